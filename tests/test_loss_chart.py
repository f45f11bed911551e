"""The loss history chart: one point per visited step, scales that hold every value."""

from __future__ import annotations

import math

import numpy as np

from pytree_lab.chart import LossHistoryChart


def test_the_lesson_history_is_drawn_point_by_point():
    chart = LossHistoryChart()
    chart.show([4.0, 0.64, 0.1024])
    np.testing.assert_allclose(np.asarray(chart.line.y), [4.0, 0.64, 0.1024])
    np.testing.assert_allclose(np.asarray(chart.line.x), [0, 1, 2])
    np.testing.assert_allclose(np.asarray(chart.point.y), [0.1024])
    np.testing.assert_allclose(np.asarray(chart.point.x), [2])
    assert chart.y_axis.scale is chart.y_linear
    assert chart.y_linear.min <= 0 and chart.y_linear.max > 4.0
    assert chart.x_scale.min == 0 and chart.x_scale.max == 2


def test_a_single_point_and_a_flat_history_have_a_visible_range():
    chart = LossHistoryChart()
    chart.show([4.0])
    assert chart.x_scale.max > chart.x_scale.min
    chart.show([0.0, 0.0])
    assert chart.y_linear.max > chart.y_linear.min


def test_log_scale_for_a_positive_history_linear_otherwise():
    chart = LossHistoryChart(log=True)
    chart.show([4.0, 1e-3, 2e-7])
    assert chart.on_log_scale and chart.line.scales["y"] is chart.y_log
    assert chart.y_log.min <= 2e-7 and chart.y_log.max >= 4.0
    chart.show([1.0, 0.0])  # a zero loss cannot go on a log scale
    assert not chart.on_log_scale and chart.line.scales["y"] is chart.y_linear
    chart.set_log(False)
    chart.show([4.0, 1e-3])
    assert not chart.on_log_scale


def test_a_non_finite_value_does_not_break_the_scale():
    chart = LossHistoryChart()
    chart.show([4.0, math.inf, 1.0])
    assert math.isfinite(chart.y_linear.min) and math.isfinite(chart.y_linear.max)
    assert chart.y_linear.max > 4.0
