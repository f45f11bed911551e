"""The explorer against hostile losses, optimizers and page messages (issue 20, sections 4-6):
every case ends in a sentence in the widget, the kernel keeps answering, and the slider, the bars
and `result` agree with what the message says."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
import pytest

from pytree_lab import StepExplorer

optax_adam = pytest.mark.jax_promotion(dtype="optax's adam raises a float to its int32 step count (bias correction)")


def _alert(ex) -> str:
    value = ex.status.value
    assert 'role="alert"' in value, value
    return value


class _StrRaises(Exception):
    def __str__(self):
        raise RuntimeError("str of the error")

    def __repr__(self):
        raise RuntimeError("repr of the error")


class _StrExits(Exception):
    def __str__(self):
        raise SystemExit(3)

    def __repr__(self):
        raise SystemExit(4)


class _StrNotText(Exception):
    def __str__(self):
        return 42  # str() then raises TypeError


@pytest.mark.parametrize("kind", [_StrRaises, _StrExits, _StrNotText])
def test_a_loss_whose_error_cannot_be_printed_gets_a_message_and_keeps_the_views_on_the_last_good_step(kind):
    state = {"bad": False}

    def loss(p, x):
        if state["bad"]:
            raise kind()
        return jnp.sum((p["w"] * x) ** 2)

    ex = StepExplorer(loss, {"w": jnp.array([1.0, 2.0])}, {"x": jnp.array(3.0)})
    assert ex.result.loss == 45.0  # (3² + 6²)
    good = ex.result
    state["bad"] = True
    assert ex.set_loss(loss) is None  # retraced: raises now
    text = _alert(ex)
    assert (
        f"The step failed: {kind.__name__}: (its message could not be shown: the exception&#x27;s __str__ failed)"
        in text
    )
    ex.sliders["w[0]"].value = 0.5  # a move: the same message, nothing escapes
    assert f"{kind.__name__}" in _alert(ex)
    assert ex.step(3) is None and kind.__name__ in _alert(ex)
    assert ex.result is good  # the last good step: the bars say w = [1, 2] before, as the message says
    np.testing.assert_allclose(ex.chart_view.bars.y[0], [1.0, 2.0])
    assert not ex.text().startswith("StepExplorer (its text form failed")  # the text form still works
    state["bad"] = False
    r = ex.set_loss(loss)  # fixed: the slider's value is used
    assert r.loss == pytest.approx((0.5 * 3) ** 2 + 6.0**2)
    np.testing.assert_allclose(ex.chart_view.bars.y[0], [0.5, 2.0])


# ---------------------------------------------------------------------------------------- slider move numbers
def _page_move(slider, value, seq, view=None) -> None:
    """The comm message a page's slider view sends for a move (slider.js), through the real door."""
    content = {"type": "move", "value": value, "seq": seq}
    if view is not None:
        content["view"] = view
    slider._handle_msg({"content": {"data": {"method": "custom", "content": content}}, "buffers": []})


@pytest.mark.parametrize("crafted", [2**60, 2**53, 2**53 - 1, 10**6, 1026, -5, 0, 2**64 + 1])
def test_a_crafted_move_number_does_not_lock_the_slider(crafted):
    ex = StepExplorer()
    s = ex.sliders["bias"]
    _page_move(s, 0.5, 1, "tab-a")
    assert s.ack == 1 and s.value == 0.5
    _page_move(s, 1.5, crafted)  # one crafted message
    assert s.ack == 1 and s.value == 0.5  # refused, never acknowledged
    assert s.refused_moves == 1
    # the page numbers its next move from the ack it sees (slider.js: max(sent, ack) + 1)
    _page_move(s, 0.25, 2, "tab-a")
    assert s.ack == 2 and s.value == 0.25
    # the step followed: bias 0.25 → prediction 1.25, residual -1.75, dL/db = -3.5
    assert float(ex.result.grads["bias"]) == pytest.approx(-3.5)
    _page_move(s, -0.75, 3, "tab-a")
    assert s.value == -0.75 and float(ex.result.grads["bias"]) == pytest.approx(2 * (1 - 0.75 - 3))


def test_move_numbers_go_forward_per_view_and_a_flood_logs_once(caplog):
    ex = StepExplorer()
    s = ex.sliders["bias"]
    _page_move(s, 0.5, 5, "tab-a")
    _page_move(s, 0.7, 6, "tab-b")  # another tab of the same notebook: numbered from the ack
    assert s.ack == 6 and s.value == 0.7
    _page_move(s, 0.1, 1030)  # within reach of a page (a jump under 1024 from 6) is taken ...
    assert s.ack == 1030 and s.value == 0.1
    _page_move(s, 0.9, 6, "tab-b")  # ... and a replay of an older move is not
    assert s.value == 0.1
    with caplog.at_level("WARNING", logger="pytree_lab.slider"):
        for k in range(200):
            _page_move(s, 0.3, 2**60 + k)
    assert s.refused_moves == 200 and len(caplog.records) <= 1
    _page_move(s, 0.3, 1031, "tab-a")
    assert s.ack == 1031 and s.value == 0.3


# ---------------------------------------------------------------------------------------- long runs
def _slow_loss(p, m):
    # a few hundred microseconds a step: a million steps would take minutes
    h = p["w"] * m
    for _ in range(8):
        h = jnp.tanh(h @ m)
    return jnp.mean(h**2)


def test_an_absurd_number_of_steps_is_refused_with_the_bound():
    ex = StepExplorer()
    with pytest.raises(
        ValueError, match=r"step\(n\) takes at most 1,000,000 steps at a time, not 100,000,000,000,000,000,000"
    ):
        ex.step(10**20)
    with pytest.raises(ValueError, match="at most 1,000,000"):
        ex.step(np.int64(2**62))
    assert ex.history == [4.0] and ex.result.loss == 4.0  # nothing moved
    ex.step(2)
    assert len(ex.history) == 3  # and it still steps


def test_any_run_stops_at_the_time_budget_where_it_got_to():
    import tracemalloc

    m = jnp.asarray(np.random.default_rng(0).normal(size=(96, 96)).astype(np.float32) / 10)
    ex = StepExplorer(_slow_loss, {"w": jnp.array(0.5)}, {"m": m}, sliders=["learning_rate"], time_budget=1.0)
    tracemalloc.start()
    try:
        r = ex.step(1_000_000)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert r is not None
    taken = len(ex.history) - 1
    assert 0 < taken < 1_000_000
    assert f"Stopped after {taken:,} of 1,000,000 steps: the run reached the time budget (1 s" in ex.status.value
    assert peak < 50e6  # Python memory of the run: the losses of the steps taken, not of a million
    # the explorer is where the run got to: the result is the step from there, the kernel goes on
    assert ex.result.loss == ex.history[-1]
    r2 = ex.step(1)
    assert r2 is not None and len(ex.history) == taken + 2


# ---------------------------------------------------------------------------------------- the loss line
def test_a_long_loss_line_is_thinned_for_drawing_with_every_bucket_extreme_and_the_last_point_exact():
    from pytree_lab.chart import MAX_DRAWN, LossHistoryChart, thin_line

    values = np.cos(np.arange(100_001) / 50.0) + np.arange(100_001) * 1e-5
    values[31_337] = 9.0  # one spike
    values[77_777] = -3.0  # one dip
    xs, ys = thin_line(values)
    assert xs.size <= MAX_DRAWN + 2
    assert xs[0] == 0 and xs[-1] == 100_000 and ys[-1] == values[-1]
    assert np.all(np.diff(xs) > 0)  # in step order
    np.testing.assert_array_equal(ys, values[xs.astype(int)])  # every drawn point is a real one
    assert 31_337 in xs and 77_777 in xs  # the extremes survive
    # each bucket's lowest and highest value is drawn
    inner = values[1:-1]
    width = -(-inner.size // (MAX_DRAWN // 2 - 1))
    for b in (0, 17, 400, (inner.size - 1) // width):
        chunk = inner[b * width : (b + 1) * width]
        assert chunk.min() in ys and chunk.max() in ys
    chart = LossHistoryChart()
    chart.show(values)
    assert len(chart.line.y) == xs.size and chart.point.y[0] == values[-1]
    assert chart.y_linear.min <= -3.0 and chart.y_linear.max >= 9.0
    short = [4.0, 0.64, 0.1024]
    xs, ys = thin_line(short)
    np.testing.assert_array_equal(xs, [0, 1, 2]) and np.testing.assert_array_equal(ys, short)


def test_after_a_million_steps_a_slider_move_sends_a_bounded_message(monkeypatch):
    import ipywidgets

    ex = StepExplorer(time_budget=None)
    ex.sliders["learning_rate"].value = 0.001  # slow descent: a million finite steps
    ex.step(1_000_000)
    assert len(ex.history) == 1_000_001
    sent: list[int] = []

    def measure(self, msg, buffers=None):
        import json

        sent.append(len(json.dumps(msg, default=str)) + sum(len(memoryview(b).cast("B")) for b in buffers or []))

    monkeypatch.setattr(ipywidgets.Widget, "_send", measure)
    ex.sliders["bias"].value = 0.25
    assert ex.history[-1] == ex.result.loss and len(ex.history) == 1_000_001
    line = ex.history_view.line
    assert line.y[-1] == ex.result.loss and len(line.y) <= 2_002
    assert sent and sum(sent) < 400_000  # every message of the move, the diagram's included
    sent.clear()
    ex.step(10)
    assert len(ex.history) == 1_000_011 and sum(sent) < 400_000


# ---------------------------------------------------------------------------------------- page writes
def _page_writes(widget, state: dict) -> None:
    """The comm message a page (a stale view, a crafted message) sends to write traits."""
    widget._handle_msg({"content": {"data": {"method": "update", "state": state, "buffer_paths": []}}, "buffers": []})


def test_the_page_cannot_write_the_explorers_kernel_owned_parts():
    from pytree_lab.explorer.lifetime import descendants as _descendants
    from pytree_lab.page import page_writes_refused

    ex = StepExplorer()
    children = list(ex.children)
    status, bars_y = ex.status.value, np.array(ex.chart_view.bars.y)
    y_min, y_max = ex.chart_view.y_scale.min, ex.chart_view.y_scale.max
    _page_writes(ex, {"children": [], "layout": None, "_dom_classes": []})
    _page_writes(ex.status, {"value": "<b>hacked</b>"})
    _page_writes(ex.chart_view.bars, {"y": [[0, 0, 0], [9, 9, 9]], "x": ["a", "b", "c"], "colors": ["red"]})
    _page_writes(ex.chart_view.y_scale, {"min": 100.0, "max": 200.0})
    _page_writes(ex.step_button, {"description": "Delete everything", "disabled": True})
    _page_writes(ex.controls, {"children": []})
    _page_writes(ex.children[2], {"children": []})
    _page_writes(ex.calculation, {"value": "<i>wrong numbers</i>"})
    _page_writes(ex.history_view.line, {"y": [1e9]})
    _page_writes(ex.chart, {"marks": [], "axes": [], "title": "x"})
    _page_writes(ex.play_control, {"playing": True, "frame": 5, "message": "<b>x</b>"})
    _page_writes(ex.debug.html, {"value": "<b>hacked</b>"})
    assert list(ex.children) == children and len(ex.controls.children) == 6
    assert not ex.playing and ex.play_control.frame == 0 and ex.play_control.message == ""
    assert ex.debug.html.value == "" and ex.output == ""
    assert ex.status.value == status and "hacked" not in ex.status.value
    np.testing.assert_array_equal(np.array(ex.chart_view.bars.y), bars_y)
    assert (ex.chart_view.y_scale.min, ex.chart_view.y_scale.max) == (y_min, y_max)
    assert ex.step_button.description == "Step" and not ex.step_button.disabled
    assert "wrong numbers" not in ex.calculation.value and ex.chart.marks == [ex.chart_view.bars]
    assert page_writes_refused(ex.chart_view.bars) == {"y": 1, "x": 1, "colors": 1}
    assert ex.refused_page_writes == {"children": 1, "layout": 1, "_dom_classes": 1}
    # intents still work: ticking the checkbox, clicking a bar (selects its leaf everywhere)
    _page_writes(ex.fixed_range_box, {"value": True})
    assert ex.chart_view.fixed_range is True
    _page_writes(ex.log_scale_box, {"value": True})  # the loss line on a log scale; its scales stay the kernel's
    assert ex.history_view.on_log_scale and ex.history_view.y_log.min == 1.0 and ex.history_view.y_log.max == 10.0
    _page_writes(ex.history_view.y_log, {"min": 1e-9, "type": "linear"})
    assert ex.history_view.y_log.min == 1.0 and page_writes_refused(ex.history_view.y_log) == {"min": 1, "type": 1}
    _page_writes(ex.chart_view.bars, {"selected": [2]})
    assert ex.selected_path == "['bias']" and ex.diagram.selected_path == "['bias']"
    # and the explorer still works as before: a move, a step
    ex.sliders["bias"].value = 1.0
    assert float(ex.result.grads["bias"]) == pytest.approx(2 * (1 + 1 - 3))
    built = _descendants(ex)
    ex.close()
    assert len(built) > 30 and all(w.comm is None for w in built)


@optax_adam
def test_close_closes_every_widget_built_even_after_the_page_tried_to_empty_it():
    from pytree_lab.explorer.lifetime import descendants as _descendants

    ex = StepExplorer(optimizer=__import__("optax").adam(0.1))
    ex.history_view.set_log(True)  # a widget made after construction: the log scale
    built = _descendants(ex) + [ex.history_view.y_log, ex.history_view.y_linear]
    _page_writes(ex, {"children": []})
    _page_writes(ex.children[2], {"children": []})
    ex.children = []  # even emptied from Python
    ex.close()
    assert all(w.comm is None for w in built), [type(w).__name__ for w in built if w.comm is not None]


# ---------------------------------------------------------------------------------------- optimizer blame
def _opt_loss(p, x, target):
    return (jnp.dot(p["weight"], x) + p["bias"] - target) ** 2


def _start():
    return {"weight": jnp.array([1.0, -1.0]), "bias": jnp.array(0.0)}


def _inputs():
    return {"x": jnp.array([2.0, 1.0]), "target": jnp.array(3.0)}


def _transformation(init, update):
    import optax

    return optax.GradientTransformation(init, update)


def nan_moment():
    import jax

    def init(p):
        return {"m": jax.tree.map(lambda x: jnp.full_like(x, jnp.nan), p)}

    def update(g, s, p=None):
        return jax.tree.map(lambda a, m: -0.1 * a + m, g, s["m"]), s

    return _transformation(init, update)


def inf_after_two_steps():
    import jax
    import optax

    def init(p):
        return {"n": jnp.zeros((), jnp.int32)}

    def update(g, s, p=None):
        scale = jnp.where(s["n"] >= 2, jnp.inf, 0.1)
        return jax.tree.map(lambda a: -scale * a, g), {"n": s["n"] + 1}

    return optax.GradientTransformation(init, update)


def reshaping():
    import jax
    import optax

    return _transformation(
        lambda p: optax.EmptyState(), lambda g, s, p=None: (jax.tree.map(lambda a: jnp.stack([a, a]), g), s)
    )


def dropping_a_leaf():
    import optax

    return _transformation(lambda p: optax.EmptyState(), lambda g, s, p=None: ({"weight": g["weight"]}, s))


def exiting():
    import optax

    def update(g, s, p=None):
        sys.exit(1)

    return _transformation(lambda p: optax.EmptyState(), update)


def raising_keyboard_interrupt_free():
    import optax

    def update(g, s, p=None):
        raise _StrRaises()

    return _transformation(lambda p: optax.EmptyState(), update)


import sys  # noqa: E402


@pytest.mark.parametrize(
    "make, words",
    [
        (
            nan_moment,
            [
                "The optimizer's state holds NaN at state['m']['bias'] (nan_moment)",
                "the optimizer is at fault",
                "not the loss or the learning rate",
            ],
        ),
        (
            reshaping,
            [
                "The optimizer's update (reshaping) changed the shape of params['bias']: its update has shape (2,) "
                "where the parameter has ()"
            ],
        ),
        (dropping_a_leaf, ["The optimizer's update (dropping_a_leaf) returned updates shaped as", "not as the params"]),
        (exiting, ["The optimizer's update (exiting) failed: SystemExit: 1.", "The optimizer is at fault here"]),
        (
            raising_keyboard_interrupt_free,
            [
                "The optimizer's update (raising_keyboard_interrupt_free) failed: _StrRaises: "
                "(its message could not be shown: the exception's __str__ failed). The optimizer is at fault"
            ],
        ),
    ],
)
def test_optimizer_failures_are_blamed_on_the_optimizer_by_name(make, words):
    import html

    ex = StepExplorer(_opt_loss, _start(), _inputs(), optimizer=make())
    text = html.unescape(_alert(ex))
    for w in words:
        assert w in text, text
    assert "The loss" not in text and "smaller learning rate" not in text
    # nothing worked yet: never "the last good step is still shown"
    assert "last good step" not in text and "No step has worked yet, so none is shown." in text
    assert ex.result is None and ex.step(5) is None and ex.history == []
    assert "The loss" not in html.unescape(_alert(ex))
    ex.close()


def test_an_optimizer_that_goes_wrong_later_is_blamed_and_the_last_good_step_stays():
    import html

    ex = StepExplorer(_opt_loss, _start(), _inputs(), optimizer=inf_after_two_steps())
    assert ex.result is not None
    ex.step(1)
    good = ex.result
    assert ex.step(1) is None  # the state after this step says n = 3: the next update is infinite
    text = html.unescape(_alert(ex))
    assert "(inf_after_two_steps) of params['bias'] is not finite although the gradient is" in text
    assert "the optimizer is at fault" in text and "The last good step is still shown." in text
    assert ex.result is good and ex.history == pytest.approx([4.0, good.loss])


@pytest.mark.parametrize(
    "init, words",
    [
        (lambda p: (x for x in [1, 2]), "The optimizer's init (<lambda>) returned a state holding generator at state"),
        (lambda p: sys.exit(2), "The optimizer's init (<lambda>) failed: SystemExit: 2."),
        (lambda p: {"m": "text"}, "returned a state holding str at state['m']"),
    ],
)
def test_an_optimizer_whose_init_fails_is_refused_with_its_name(init, words):
    from pytree_lab.training import OptimizerError

    opt = _transformation(init, lambda g, s, p=None: (g, s))
    with pytest.raises(OptimizerError) as caught:
        StepExplorer(_opt_loss, _start(), _inputs(), optimizer=opt)
    # named by the function that built it (here this test: the update is a lambda made inside it)
    assert words.replace("<lambda>", "test_an_optimizer_whose_init_fails_is_refused_with_its_name") in str(caught.value)
    assert "loss" not in str(caught.value).split("not the loss")[0]
    # a real optax optimizer still works afterwards
    import optax

    ex = StepExplorer(_opt_loss, _start(), _inputs(), optimizer=optax.sgd(0.05))
    np.testing.assert_allclose(np.asarray(ex.result.updated["weight"]), [1.4, -0.8], rtol=1e-6)


# ---------------------------------------------------------------------------------------- lifetime
def _page_closes_comm(widget) -> None:
    """What the kernel does when the page sends comm_close for this widget's model."""
    import comm

    comm.get_comm_manager().comm_close(None, None, {"content": {"comm_id": widget.comm.comm_id, "data": {}}})


def _alive_explorers() -> int:
    import gc

    gc.collect()
    return sum(1 for obj in gc.get_objects() if type(obj) is StepExplorer)


@optax_adam
def test_an_explorer_whose_comm_the_page_closes_is_closed_and_collected():
    import gc
    import weakref

    import optax
    from ipywidgets.widgets.widget import _instances

    from pytree_lab.explorer.lifetime import descendants as _descendants

    ex = StepExplorer(optimizer=optax.adam(0.1))
    ex.step(3)
    ex.sliders["bias"].value = 0.3  # timers, compiled steps and history in use
    built = _descendants(ex)
    ids = {w.model_id for w in built}
    ref = weakref.ref(ex)
    _page_closes_comm(ex)
    assert all(w.comm is None for w in built) and not ids & set(_instances)
    params = ex.params  # a closed explorer keeps its numbers, not its compiled programs
    assert float(params["bias"]) == pytest.approx(0.3)
    assert len(ex.history) == 4 and ex.session.slider_step is None
    assert ex.step(2) is None and ex.recompute() is None and ex.reset() is None
    assert "adam mu" in ex.text() and not ex.text().startswith("StepExplorer (its text form failed")
    del ex, built
    gc.collect()
    assert ref() is None


def test_a_replaced_explorer_whose_views_are_gone_is_closed_and_collected_but_a_shown_one_is_kept():
    import gc
    import weakref

    first = StepExplorer()
    _page_writes(first, {"_view_count": 1})  # shown in the page
    shown_elsewhere = StepExplorer()
    _page_writes(shown_elsewhere, {"_view_count": 2})
    never_shown = StepExplorer()
    assert (first.shown, shown_elsewhere.shown, never_shown.shown) == (1, 2, 0)
    ref = weakref.ref(first)
    _page_writes(first, {"_view_count": 0})  # its cell is run again: the output is cleared
    second = StepExplorer()  # ... and the new explorer is built
    assert first.comm is None and first.children[0].comm is None
    assert shown_elsewhere.comm is not None and never_shown.comm is not None and second.comm is not None
    shown_elsewhere.sliders["bias"].value = 0.5  # still works
    assert float(shown_elsewhere.result.grads["bias"]) == pytest.approx(2 * (1 + 0.5 - 3))
    del first
    gc.collect()
    assert ref() is None
    for ex in (shown_elsewhere, never_shown, second):
        ex.close()


def test_a_replaced_explorer_whose_last_view_goes_after_the_new_one_is_built_is_closed_then():
    """The page's "no view left" can reach the kernel after the cell run again has built the new
    explorer (JupyterLab hands widget messages to a subshell): the old one is closed when it
    arrives. The newest explorer losing its view (its output cleared) is kept: it may be shown
    again."""
    first = StepExplorer()
    _page_writes(first, {"_view_count": 1})
    second = StepExplorer()  # built while the page still counts first's view
    assert first.comm is not None
    _page_writes(second, {"_view_count": 1})
    _page_writes(first, {"_view_count": 0})  # ... then the cleared output's count arrives
    assert first.comm is None and first.children[0].comm is None
    _page_writes(second, {"_view_count": 0})  # the newest, cleared: kept
    assert second.comm is not None
    second.sliders["bias"].value = 0.5
    assert float(second.result.grads["bias"]) == pytest.approx(2 * (1 + 0.5 - 3))
    second.close()


def test_running_the_explorer_cell_again_and_again_keeps_memory_bounded():
    import gc
    import tracemalloc

    ex = StepExplorer()
    start = _alive_explorers()
    tracemalloc.start()
    try:
        for k in range(15):
            _page_writes(ex, {"_view_count": 1})
            _page_writes(ex, {"_view_count": 0})
            ex = StepExplorer()  # `ex = StepExplorer()` run again, never closed
            ex.sliders["bias"].value = 0.1 * k
            if k == 4:
                gc.collect()
                after_five = tracemalloc.get_traced_memory()[0]
        gc.collect()
        after_all = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    assert _alive_explorers() <= start  # only the one in `ex`
    # ten more explorers cost no memory that stays (measured: under 10 kB in all; one explorer
    # kept alive holds about 620 kB)
    assert after_all - after_five < 1e6
    ex.close()


# ---------------------------------------------------------------------------------------- big trees and the budget
def _many_leaves(n: int) -> dict:
    return {f"w{i:05d}": jnp.asarray(np.float32(i % 7 - 3)) for i in range(n)}


def _sum_of_squares(p, scale):
    return sum((w * w) * scale for w in p.values())  # the loss's own Python: one line per leaf


def test_jax_tracing_a_many_leaf_loss_is_not_the_users_loop():
    """Tracing 6,000 leaves takes longer than the budget, but almost none of it is the loss's own
    Python (the innermost frame is JAX's): library frames never count."""
    n = 6_000
    ex = StepExplorer(
        _sum_of_squares,
        _many_leaves(n),
        {"scale": jnp.asarray(np.float32(1.0))},
        sliders=["learning_rate"],
        time_budget=0.5,
    )
    assert ex.result is not None, ex.status.value
    values = np.asarray([i % 7 - 3 for i in range(n)], np.float64)
    assert ex.result.loss == pytest.approx(float(np.sum(values**2)))
    assert float(ex.result.grads["w00004"]) == 2.0 * 1  # 4 % 7 - 3 = 1: d(w²)/dw = 2
    assert ex.session.clock.own < 0.5 and "endless loop" not in ex.status.value
    ex.close()


def test_an_endless_loop_in_the_loss_is_still_stopped_as_one():
    def endless(p, scale):
        while True:
            pass

    ex = StepExplorer(endless, _many_leaves(10), {"scale": jnp.asarray(np.float32(1.0))}, time_budget=0.5)
    assert "which usually means an endless loop" in _alert(ex) and ex.session.clock.fired
    assert 0.5 <= ex.session.clock.own < 5.0
    ex.close()
