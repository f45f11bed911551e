"""StepExplorer in the kernel: sliders, the compiled step, the views it feeds, bad input."""

from __future__ import annotations

import dataclasses
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import traitlets

from pytree_lab import StepExplorer

LABELS = ["x[0]", "x[1]", "target", "learning_rate", "weight[0]", "weight[1]", "bias"]


def oracle(weight, bias, x, target, lr):
    """The lesson's step computed directly with JAX."""
    params = {"weight": jnp.array(weight, jnp.float32), "bias": jnp.array(bias, jnp.float32)}
    xa = jnp.array(x, jnp.float32)

    def loss(p):
        return (jnp.dot(p["weight"], xa) + p["bias"] - target) ** 2

    value, grads = jax.value_and_grad(loss)(params)
    updated = jax.tree.map(lambda p, g: p - lr * g, params, grads)
    return float(value), grads, updated, float(loss(updated))


def numbers(html_text):
    return [float(v) for v in re.findall(r"-?\d+(?:\.\d+)?(?:e-?\d+)?", html_text)]


def test_default_explorer_is_the_lesson():
    ex = StepExplorer()
    assert list(ex.sliders) == LABELS
    assert [ex.sliders[k].value for k in LABELS] == [2.0, 1.0, 3.0, 0.05, 1.0, -1.0, 0.0]
    r = ex.result
    assert r.loss == 4.0 and r.loss_after == pytest.approx(0.64, abs=1e-6)
    np.testing.assert_allclose(r.grads["weight"], [-8.0, -4.0])
    np.testing.assert_allclose(r.grads["bias"], -4.0)
    np.testing.assert_allclose(r.updated["weight"], [1.4, -0.8], rtol=1e-6)


def test_chart_is_the_seed_figure():
    ex = StepExplorer()
    bars = ex.chart_view.bars
    # the bars' x values are full paths (the tooltip names them); the axis shows the labels
    assert list(bars.x) == ["params['weight'][0]", "params['weight'][1]", "params['bias']"]
    assert [ex.chart_view.x_axis.tick_labels[x] for x in bars.x] == ["weight[0]", "weight[1]", "bias"]
    np.testing.assert_allclose(bars.y, [[1.0, -1.0, 0.0], [1.4, -0.8, 0.2]], rtol=1e-6)
    assert ex.chart_view.y_axis.label == "parameter value"
    assert bars.type == "grouped"
    # every bar lies inside the explicit scale (a scale without min/max draws zero-height bars)
    assert ex.chart_view.y_scale.min <= -1.0 and ex.chart_view.y_scale.max >= 1.4


def test_worked_calculation_numbers_come_from_the_step():
    ex = StepExplorer()
    text = ex.calculation.value
    for line, value in [
        ("prediction ŷ", "1"), ("residual ŷ − target", "-2"), ("loss L", "4"), ("dL/dŷ", "-4"),
        ("∂L/∂weight", "[-8, -4]"), ("∂L/∂bias", "-4"), ("new prediction", "2.2"),
        ("new residual", "-0.8"), ("new loss", "0.64"),
    ]:
        assert re.search(rf"<td>{re.escape(line)}</td><td class=\"ptl-calc-value\">{re.escape(value)}</td>", text), line
    assert "[1.4, -0.8]" in text and ">0.2<" in text


@pytest.mark.parametrize(
    "moves",
    [{"x[0]": 3.0}, {"target": -1.5, "learning_rate": 0.2}, {"weight[1]": 2.25, "bias": -0.5, "x[1]": -2.0}],
)
def test_slider_moves_recompute_in_the_kernel(moves):
    ex = StepExplorer()
    for label, value in moves.items():
        ex.sliders[label].value = value
    v = {k: s.value for k, s in ex.sliders.items()}
    loss, grads, updated, loss_after = oracle(
        [v["weight[0]"], v["weight[1]"]], v["bias"], [v["x[0]"], v["x[1]"]], v["target"], v["learning_rate"]
    )
    r = ex.result
    assert r.loss == pytest.approx(loss, rel=1e-6)
    np.testing.assert_allclose(r.grads["weight"], grads["weight"], rtol=1e-6)
    np.testing.assert_allclose(r.updated["bias"], updated["bias"], rtol=1e-6, atol=1e-7)
    assert r.loss_after == pytest.approx(loss_after, rel=1e-5, abs=1e-6)
    np.testing.assert_allclose(ex.chart_view.bars.y[1], [*updated["weight"], updated["bias"]], rtol=1e-6, atol=1e-7)
    # compiled once, reused for every new value
    assert ex._step.traces == 1


def test_selection_is_shared_by_diagram_chart_and_explorer():
    ex = StepExplorer()
    ex.diagram.selected_path = "['bias']"  # as a click in the page does
    assert ex.selected_path == "['bias']"
    assert list(ex.chart_view.bars.selected) == [2]
    ex.selected_path = "['weight']"
    assert ex.diagram.selected_path == "['weight']"
    assert list(ex.chart_view.bars.selected) == [0, 1]
    assert 'class="ptl-calc-selected" data-path="[&#x27;weight&#x27;]"' in ex.calculation.value
    ex.chart_view.bars.selected = [2]  # a click on the bias bars
    assert ex.selected_path == "['bias']" and ex.diagram.selected_path == "['bias']"
    # a path set from Python that names nothing is an error with a message, not silence
    with pytest.raises(traitlets.TraitError, match=r"\['no such leaf'\]\" is no path.*\"\['weight'\]\""):
        ex.selected_path = "['no such leaf']"
    assert ex.selected_path == "['bias']" and ex.diagram.selected_path == "['bias']"  # kept
    ex.diagram.selected_path = "['no such leaf']"  # a stale page path selects nothing
    assert ex.selected_path == "" and ex.diagram.selected_path == ""


def test_nested_instructor_model():
    x = jnp.array([2.0, 1.0])
    params = {"layer": {"weight": jnp.array([1.0, -1.0]), "bias": jnp.array(0.0)}, "scale": jnp.array(1.0)}

    def loss(p, x, target):
        pred = p["scale"] * (jnp.dot(p["layer"]["weight"], x) + p["layer"]["bias"])
        return (pred - target) ** 2

    ex = StepExplorer(loss, params, {"x": x, "target": jnp.array(3.0)})
    assert list(ex.sliders) == ["x[0]", "x[1]", "target", "learning_rate", "layer/weight[0]",
                                "layer/weight[1]", "layer/bias", "scale"]
    np.testing.assert_allclose(ex.result.grads["scale"], -4.0)
    assert [r["p"] for r in ex.diagram.rows] == ["['layer']", "['layer']['weight']", "['layer']['bias']", "['scale']"]


@jax.tree_util.register_dataclass
@dataclasses.dataclass
class Affine:
    w: jax.Array
    b: jax.Array


@pytest.mark.parametrize(
    "params, loss",
    [
        ([jnp.array([1.0, -1.0]), jnp.array(0.0)], lambda p, x: (jnp.dot(p[0], x) + p[1] - 3.0) ** 2),
        ((jnp.array([1.0, -1.0]), jnp.array(0.0)), lambda p, x: (jnp.dot(p[0], x) + p[1] - 3.0) ** 2),
        (Affine(jnp.array([1.0, -1.0]), jnp.array(0.0)), lambda p, x: (jnp.dot(p.w, x) + p.b - 3.0) ** 2),
    ],
)
def test_lists_tuples_and_dataclasses(params, loss):
    ex = StepExplorer(loss, params, {"x": jnp.array([2.0, 1.0])})
    assert ex.result.loss == 4.0
    leaves = jax.tree.leaves(ex.result.grads)
    np.testing.assert_allclose(leaves[0], [-8.0, -4.0])
    np.testing.assert_allclose(leaves[1], -4.0)
    assert ex.result.loss_after == pytest.approx(0.64, abs=1e-6)


def _only_positive(v):
    if v < 0:
        raise ValueError("x[0] must be positive")


def test_a_loss_that_raises_keeps_the_last_good_state(capfd):
    def touchy(p, x):
        jax.debug.callback(_only_positive, x[0])  # raises in Python for some slider values
        return (jnp.dot(p["w"], x) - 1.0) ** 2

    ex = StepExplorer(touchy, {"w": jnp.array([1.0, 2.0])}, {"x": jnp.array([1.0, 1.0])})
    good, rows, bars = ex.result, ex.diagram.rows, [list(y) for y in ex.chart_view.bars.y]
    assert good.loss == 4.0
    ex.sliders["x[0]"].value = -0.5
    assert ex.result is good and ex.diagram.rows == rows
    assert [list(y) for y in ex.chart_view.bars.y] == bars
    assert "ValueError: x[0] must be positive" in ex.status.value and 'role="alert"' in ex.status.value
    assert ex.diagram.message.endswith("ValueError: x[0] must be positive")
    assert "Traceback" not in ex.status.value + capfd.readouterr().err  # no flood
    ex.sliders["x[0]"].value = 0.5  # fixed: full recovery
    assert ex.status.value == "" and ex.diagram.message == ""
    assert ex.result.loss == pytest.approx((0.5 + 2.0 - 1.0) ** 2)


def test_a_loss_with_the_wrong_arguments_says_so():
    ex = StepExplorer(lambda p: jnp.sum(p["w"]) ** 2, {"w": jnp.array([1.0, 2.0])}, {"x": jnp.array([1.0])})
    assert ex.result is None
    assert "TypeError" in ex.status.value and "x" in ex.status.value


def test_overflow_is_reported_with_the_path():
    ex = StepExplorer()
    good = ex.result
    ex.sliders["learning_rate"].max = 1e38
    ex.sliders["learning_rate"].value = 1e38
    assert ex.result is good
    assert "not finite" in ex.status.value and "updated[" in ex.status.value


def test_string_leaf_in_params_is_named():
    params = {"weight": jnp.array([1.0, -1.0]), "name": "mlp"}
    ex = StepExplorer(lambda p, x: jnp.dot(p["weight"], x) ** 2, params, {"x": jnp.array([2.0, 1.0])})
    assert ex.result is None
    assert "params[&#x27;name&#x27;] is str" in ex.status.value
    assert "not a floating-point parameter" in ex.diagram.message
