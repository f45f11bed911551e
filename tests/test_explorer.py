"""StepExplorer in the kernel: sliders, the compiled step, the views it feeds, bad input."""

from __future__ import annotations

import asyncio
import dataclasses
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

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
        ("prediction ŷ", "1"),
        ("residual ŷ − target", "-2"),
        ("loss L", "4"),
        ("dL/dŷ", "-4"),
        ("∂L/∂weight", "[-8, -4]"),
        ("∂L/∂bias", "-4"),
        ("new prediction", "2.2"),
        ("new residual", "-0.8"),
        ("new loss", "0.64"),
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
    assert ex.session.slider_step.traces == 1


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
    # a path set from Python that names nothing gets a message, not silence; the selection stays
    ex.selected_path = "['no such leaf']"
    assert ex.selected_path == "['bias']" and ex.diagram.selected_path == "['bias']"
    assert "selected_path &quot;[&#x27;no such leaf&#x27;]&quot; is not a path" in ex.status.value
    ex.selected_path = ""
    assert ex.selected_path == "" and ex.diagram.selected_path == ""


def test_nested_instructor_model():
    x = jnp.array([2.0, 1.0])
    params = {"layer": {"weight": jnp.array([1.0, -1.0]), "bias": jnp.array(0.0)}, "scale": jnp.array(1.0)}

    def loss(p, x, target):
        pred = p["scale"] * (jnp.dot(p["layer"]["weight"], x) + p["layer"]["bias"])
        return (pred - target) ** 2

    ex = StepExplorer(loss, params, {"x": x, "target": jnp.array(3.0)})
    assert list(ex.sliders) == [
        "x[0]",
        "x[1]",
        "target",
        "learning_rate",
        "layer/weight[0]",
        "layer/weight[1]",
        "layer/bias",
        "scale",
    ]
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


@jax.tree_util.register_dataclass
@dataclasses.dataclass
class TwoWeights:
    weight: jax.Array
    w: jax.Array


def test_selecting_a_field_marks_that_field_not_one_whose_name_starts_with_it():
    # `.w` is a prefix of `.weight` as text; the worked calculation follows `.w` alone
    params = TwoWeights(jnp.array([1.0, -1.0]), jnp.array(0.5))
    ex = StepExplorer(lambda p, x: (jnp.dot(p.weight, x) + p.w - 3.0) ** 2, params, {"x": jnp.array([2.0, 1.0])})
    ex.selected_path = ".w"
    assert ex.calculation.focus == ".w"
    marked = re.findall(r'class="ptl-calc-selected" data-path="([^"]*)"', ex.calculation.value)
    assert marked and set(marked) == {".w"}
    ex.selected_path = ".weight"
    assert ex.calculation.focus == ".weight"
    assert set(re.findall(r'class="ptl-calc-selected" data-path="([^"]*)"', ex.calculation.value)) == {".weight"}


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


# --------------------------------------------------------------------------- the person's numbers, unchanged


def test_values_are_the_persons_own_not_a_slider_grid():
    params = {"w": jnp.array([0.123456, -0.987654]), "b": jnp.array(0.3333333)}
    inputs = {"x": jnp.array([1.5, -0.25]), "target": jnp.array(2.71828)}

    def loss(p, x, target):
        return (jnp.dot(p["w"], x) + p["b"] - target) ** 2

    ex = StepExplorer(loss, params, inputs)
    value, grads = jax.value_and_grad(loss)(params, **inputs)
    assert ex.result.loss == float(value)  # exactly: no value was snapped to a 0.01 grid
    for k in params:
        np.testing.assert_array_equal(ex.result.grads[k], grads[k])
        np.testing.assert_array_equal(ex.result.params[k], params[k])
    assert ex.sliders["w[0]"].value == float(np.float32(0.123456))
    assert ex.sliders["target"].value == float(np.float32(2.71828))


def test_small_initial_weights_get_a_fine_slider_and_keep_their_value():
    ex = StepExplorer(
        lambda p, x: jnp.sum(p["w"] * x) ** 2, {"w": jnp.array([-0.0026, 0.0013])}, {"x": jnp.array([1.0, 2.0])}
    )
    s = ex.sliders["w[0]"]
    assert s.value == float(np.float32(-0.0026)) and s.step == 1e-05 and (s.min, s.max) == (-0.01, 0.01)
    assert ex.result.params["w"][0] == np.float32(-0.0026)


def test_a_loss_that_mutates_its_argument_changes_nothing_shown_or_stored():
    def rude(p, x, target):
        out = (jnp.dot(p["weight"], x) + p["bias"] - target) ** 2
        p["bias"] = 100.0  # assigns into the dict it was given
        x = x.at[0].set(0.0)
        return out

    ex = StepExplorer(
        rude,
        {"weight": jnp.array([1.0, -1.0]), "bias": jnp.array(0.0)},
        {"x": jnp.array([2.0, 1.0]), "target": jnp.array(3.0)},
    )
    r = ex.result
    assert r.loss == 4.0 and r.loss_after == pytest.approx(0.64, rel=1e-5)
    np.testing.assert_allclose(r.updated["bias"], 0.2, rtol=1e-6)  # not 100
    assert "100" not in ex.calculation.value
    ex.recompute()
    np.testing.assert_allclose(ex.result.params["bias"], 0.0)

    def popper(p, x, target):
        b = p.pop("bias")
        return (jnp.dot(p["weight"], x) + b - target) ** 2

    ex = StepExplorer(
        popper,
        {"weight": jnp.array([1.0, -1.0]), "bias": jnp.array(0.0)},
        {"x": jnp.array([2.0, 1.0]), "target": jnp.array(3.0)},
    )
    assert ex.status.value == "" and ex.result.loss == 4.0
    np.testing.assert_allclose(ex.result.grads["bias"], -4.0)
    assert sorted(ex.result.updated) == ["bias", "weight"]


def test_the_callers_numpy_arrays_are_not_aliased():
    w = np.array([1.0, -1.0], np.float32)
    x = np.array([2.0, 1.0], np.float32)
    ex = StepExplorer(
        lambda p, x, target: (jnp.dot(p["weight"], x) + p["bias"] - target) ** 2,
        {"weight": w, "bias": np.float32(0.0)},
        {"x": x, "target": np.float32(3.0)},
    )
    w[0] = 50.0  # the person edits their own arrays in place
    x[0] = 50.0
    ex.recompute()
    assert ex.result.loss == 4.0
    np.testing.assert_array_equal(ex.result.params["weight"], [1.0, -1.0])
    ex.result.params["weight"]  # and the stored trees are immutable
    with pytest.raises((TypeError, ValueError)):
        np.asarray(ex.session.param_leaves[0])[0] = 7.0


def test_x64_learning_rate_and_updates_stay_float64():
    with jax.enable_x64(True):
        params = {"b": jnp.array(0.0, jnp.float64)}
        ex = StepExplorer(
            lambda p, target: (p["b"] - target) ** 2, params, {"target": jnp.array(2.0, jnp.float64)}, learning_rate=0.1
        )
        r = ex.result
        assert r.updated["b"].dtype == jnp.float64
        assert float(r.grads["b"]) == -4.0
        assert float(r.updated["b"]) == 0.4  # 0 − 0.1·(−4) exactly, not 0.4000000059604645


# --------------------------------------------------------------------------- data stays data


def mlp_params(key=0):
    k1, k2 = jax.random.split(jax.random.PRNGKey(key))
    return {
        "hidden": {"w": jax.random.normal(k1, (2, 8)) * 0.5, "b": jnp.zeros(8)},
        "out": {"w": jax.random.normal(k2, (8, 3)) * 0.5, "b": jnp.zeros(3)},
    }


def mlp_logits(p, x):
    h = jnp.tanh(x @ p["hidden"]["w"] + p["hidden"]["b"])
    return h @ p["out"]["w"] + p["out"]["b"]


# the instructor's batched MLP broadcasts as written: its tests run under JAX's default rank promotion
mlp_broadcasts = pytest.mark.jax_promotion(rank="mlp_logits adds each layer's bias to the batch: x @ w + b")


def cross_entropy(p, x, labels):
    logp = jax.nn.log_softmax(mlp_logits(p, x))
    return -jnp.mean(jnp.take_along_axis(logp, labels[:, None], axis=1))


def batch(n=32, seed=1):
    x = jax.random.normal(jax.random.PRNGKey(seed), (n, 2))
    labels = jnp.asarray((x[:, 0] > 0).astype(jnp.int32) + (x[:, 1] > 0).astype(jnp.int32))
    return {"x": x, "labels": labels}


@mlp_broadcasts
def test_a_batched_mlp_with_int_labels_slides_params_not_data():
    params, inputs = mlp_params(), batch()
    ex = StepExplorer(cross_entropy, params, inputs, learning_rate=0.5, prediction_fn=mlp_logits, target="labels")
    value, grads = jax.value_and_grad(cross_entropy)(params, **inputs)
    assert ex.result.loss == pytest.approx(float(value), rel=1e-6)
    np.testing.assert_allclose(ex.result.grads["out"]["w"], grads["out"]["w"], rtol=1e-5, atol=1e-7)
    labels = list(ex.sliders)
    assert len(labels) == 24  # max_sliders caps the total
    assert labels[0] == "learning_rate" and labels[1] == "hidden/w[0,0]"
    assert not any(lab.startswith(("x", "labels")) for lab in labels)  # the batch and labels are data
    assert "inputs[&#x27;x&#x27;]" in ex.data_view.value and "float32[32,2] (batch)" in ex.data_view.value
    assert "int32[32] (int labels)" in ex.data_view.value
    assert ex.sliders["hidden/w[0,0]"].path == "params['hidden']['w'][0,0]"
    # the prediction is per example; logits and int labels differ in shape, so no residual row
    calc = ex.calculation.text()
    assert "prediction ŷ (per example, 96)" in calc and "residual" not in calc
    # new int labels of the same shape and dtype are accepted; floats in their place are not
    new = {"x": inputs["x"], "labels": jnp.zeros(32, jnp.int32)}
    assert ex.set_inputs(new) is not None
    assert ex.result.loss == pytest.approx(float(cross_entropy(params, **new)), rel=1e-6)
    good = ex.result
    assert ex.set_inputs({"x": inputs["x"], "labels": jnp.zeros(32)}) is None
    assert "[&#x27;labels&#x27;] is int32 in the explorer" in ex.status.value and ex.result is good


@mlp_broadcasts
def test_sliders_choose_exactly_and_max_sliders_caps_the_total():
    params, inputs = mlp_params(), batch()
    ex = StepExplorer(cross_entropy, params, inputs, sliders=["params['out']['b']", "hidden/w[1,2]", "learning_rate"])
    assert list(ex.sliders) == ["learning_rate", "hidden/w[1,2]", "out/b[0]", "out/b[1]", "out/b[2]"]
    ex.sliders["hidden/w[1,2]"].value = 0.75
    p = jax.tree.map(lambda a: a, params)
    p["hidden"]["w"] = p["hidden"]["w"].at[1, 2].set(0.75)
    assert ex.result.loss == pytest.approx(float(cross_entropy(p, **inputs)), rel=1e-6)
    ex = StepExplorer(cross_entropy, params, inputs, sliders=["['out']['w']"], max_sliders=5)
    assert len(ex.sliders) == 5 and "max_sliders=5" in ex.status.value
    with pytest.raises(ValueError, match=r"'nope'.*no parameter or input value.*params\['hidden'\]\['w'\]\[0,0\]"):
        StepExplorer(cross_entropy, params, inputs, sliders=["nope"])
    with pytest.raises(ValueError, match=r"inputs\['labels'\] is int32\[32\], data"):
        StepExplorer(cross_entropy, params, inputs, sliders=["labels"])
    lesson = StepExplorer()
    assert list(lesson.sliders) == LABELS  # the lesson keeps exactly its seven


def test_small_inputs_slide_and_big_ones_do_not():
    def loss(p, x, scale, batch):
        return jnp.sum((p["w"] * x * scale) ** 2) + jnp.mean(batch) * 0.0

    ex = StepExplorer(
        loss,
        {"w": jnp.array(1.0)},
        {"x": jnp.array([1.0, 2.0, 3.0, 4.0]), "scale": jnp.array(2.0), "batch": jnp.ones(5)},
    )
    assert list(ex.sliders) == ["x[0]", "x[1]", "x[2]", "x[3]", "scale", "learning_rate", "w"]


def test_static_inputs_are_python_values_a_loss_may_branch_on():
    def loss(p, x, training):
        y = p["w"] * x
        if training:  # a Python if: fine for a static input
            y = y * 2.0
        return y**2

    ex = StepExplorer(loss, {"w": jnp.array(1.0)}, {"x": jnp.array(3.0), "training": True}, static=["training"])
    assert ex.result.loss == 36.0 and "training" not in ex.sliders
    assert "inputs[&#x27;training&#x27;]" in ex.data_view.value
    ex.set_inputs({"x": jnp.array(3.0), "training": False})
    assert ex.result.loss == 9.0


def test_a_python_if_on_a_traced_value_gets_a_hint():
    def loss(p, x):
        if p["w"] > 0:
            return (p["w"] * x) ** 2
        return p["w"] * 0.0

    ex = StepExplorer(loss, {"w": jnp.array(1.0)}, {"x": jnp.array(3.0)})
    assert ex.result is None
    text = html_text(ex.status.value)
    assert "an `if`, `while`" in text and "jnp.where" in text and "static=" in text
    assert "TracerBoolConversionError" in text or "ConcretizationTypeError" in text


def html_text(value: str) -> str:
    import html

    return html.unescape(value)


@dataclasses.dataclass
class PlainLayer:  # not registered with JAX: one opaque leaf
    w: jax.Array


def test_an_unregistered_dataclass_points_to_register_dataclass():
    ex = StepExplorer(lambda p, x: jnp.sum(p["layer"].w * x), {"layer": PlainLayer(jnp.ones(2))}, {"x": jnp.ones(2)})
    assert ex.result is None
    text = html_text(ex.status.value)
    assert "params['layer'] is a PlainLayer dataclass" in text and "register_dataclass" in text


def test_equinox_mlp_points_to_partition_and_partition_works():
    eqx = pytest.importorskip("equinox")
    model = eqx.nn.MLP(2, 1, width_size=3, depth=1, key=jax.random.PRNGKey(0))
    x = jnp.array([[1.0, 2.0], [0.5, -1.0]])
    y = jnp.array([1.0, 0.0])

    def loss(m, x, y):
        return jnp.mean((jax.vmap(m)(x)[:, 0] - y) ** 2)

    ex = StepExplorer(loss, model, {"x": x, "y": y})
    assert ex.result is None
    assert "eqx.partition(model, eqx.is_inexact_array)" in html_text(ex.status.value)

    params, static = eqx.partition(model, eqx.is_inexact_array)

    def split_loss(p, x, y):
        return loss(eqx.combine(p, static), x, y)

    ex = StepExplorer(split_loss, params, {"x": x, "y": y})
    value, grads = jax.value_and_grad(split_loss)(params, x, y)
    assert ex.status.value == "" and ex.result.loss == pytest.approx(float(value), rel=1e-6)
    np.testing.assert_allclose(ex.result.grads.layers[0].weight, grads.layers[0].weight, rtol=1e-5)
    assert ex.sliders["layers[0]/weight[0,0]"].path == "params.layers[0].weight[0,0]"


def test_flax_style_nested_params_show_a_small_kernel_whole():
    params = {"params": {"Dense_0": {"kernel": jnp.arange(9.0).reshape(3, 3) / 10 - 0.4, "bias": jnp.zeros(3)}}}

    def loss(p, x, target):
        d = p["params"]["Dense_0"]
        return jnp.sum((x @ d["kernel"] + d["bias"] - target) ** 2)

    ex = StepExplorer(loss, params, {"x": jnp.array([1.0, 0.0, -1.0]), "target": jnp.zeros(3)})
    rows = {r.what: r for r in ex.calculation.rows()}
    grid = rows["∂L/∂params/Dense_0/kernel"].grid
    assert len(grid) == 3 and all(len(r) == 3 for r in grid)  # all 9 values, as a grid
    g = jax.grad(loss)(params, jnp.array([1.0, 0.0, -1.0]), jnp.zeros(3))["params"]["Dense_0"]["kernel"]
    assert [float(v) for v in grid[2]] == pytest.approx(np.asarray(g)[2].tolist(), rel=1e-3)
    assert ex.calculation.value.count('class="ptl-grid"') >= 2  # the diagram's grid
    assert "0.4" in ex.calculation.text().splitlines()[-1] or "[" in ex.calculation.text()


def test_batched_prediction_with_a_mean_loss_shows_dl_dyhat_honestly():
    x = jnp.array([[1.0, 2.0], [0.0, 1.0], [2.0, -1.0]])
    y = jnp.array([1.0, 0.0, 2.0])
    params = {"w": jnp.array([0.5, -0.5]), "b": jnp.array(0.1)}

    def predict(p, x):
        return x @ p["w"] + p["b"]

    def loss(p, x, y):
        return jnp.mean((predict(p, x) - y) ** 2)

    ex = StepExplorer(loss, params, {"x": x, "y": y}, prediction_fn=predict, target="y")
    rows = {r.what: r for r in ex.calculation.rows()}
    label = next(k for k in rows if k.startswith("dL/dŷ"))
    assert "mean" in label
    yhat = predict(params, x)
    expected = jax.grad(lambda yh: jnp.mean((yh - y) ** 2))(yhat)  # dL/dŷ of the real loss
    assert rows[label].value == "[" + ", ".join(f"{float(v):.4g}" for v in expected) + "]"
    assert "residual ŷ − target (per example, 3)" in rows


def test_a_missing_target_key_is_named():
    ex = StepExplorer(
        lambda p, x, y: (p["w"] * x - y) ** 2,
        {"w": jnp.array(1.0)},
        {"x": jnp.array(2.0), "y": jnp.array(1.0)},
        prediction_fn=lambda p, x, y: p["w"] * x,
    )
    assert ex.result.loss == 1.0
    assert "no 'target' key" in html_text(ex.status.value) and "target='...'" in html_text(ex.status.value)


# --------------------------------------------------------------------------- failures and lifetime


def test_an_out_of_range_value_from_python_is_kept_and_said():
    ex = StepExplorer()
    ex.sliders["x[0]"].value = 40.0
    assert ex.sliders["x[0]"].value == 40.0 and ex.sliders["x[0]"].max >= 40.0
    np.testing.assert_allclose(ex.result.params["weight"], [1.0, -1.0])
    assert ex.result.loss == pytest.approx((40.0 - 1.0 - 3.0) ** 2)
    assert "inputs[&#x27;x&#x27;][0] = 40 was outside its slider" in ex.status.value


def test_a_view_that_fails_after_the_step_keeps_the_last_good_step(monkeypatch):
    ex = StepExplorer()
    good = ex.result

    def broken(*a, **k):
        raise RuntimeError("chart exploded")

    monkeypatch.setattr(ex.chart_view, "show", broken)
    ex.sliders["x[0]"].value = 3.0
    assert ex.result is good and ex.session.last_good is good
    assert "showing it failed: RuntimeError: chart exploded" in ex.status.value
    monkeypatch.setattr(ex.diagram, "text", broken)
    assert "text form failed" in ex.text()
    assert "text/plain" in ex._repr_mimebundle_()


@pytest.mark.parametrize("exc", [SystemExit(3), GeneratorExit()])
def test_base_exceptions_from_the_loss_keep_the_kernel_alive(exc):
    ex = StepExplorer()
    good = ex.result

    def loss(p, x, target):
        raise exc

    assert ex.set_loss(loss) is None
    assert ex.result is good and 'role="alert"' in ex.status.value


def test_a_kernel_interrupt_in_the_loss_ends_the_cell_and_keeps_the_last_good_step():
    """The Stop button (KeyboardInterrupt) is never swallowed: it ends the cell that runs."""
    ex = StepExplorer()
    good = ex.result

    def loss(p, x, target):
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        ex.set_loss(loss)
    assert ex.result is good
    with pytest.raises(KeyboardInterrupt):
        ex.step(3)
    assert ex.result is good and len(ex.history) == len(good and ex.history)


def test_close_closes_every_child_widget():
    import ipywidgets
    from ipywidgets.widgets import widget as widget_module

    def open_count():
        return len(widget_module._instances)

    StepExplorer().close()  # first use imports and registers shared things
    before = open_count()
    ex = StepExplorer()
    assert open_count() - before > 40
    ex.close()
    assert open_count() == before
    assert isinstance(ex, ipywidgets.VBox)


def _page_move(slider, value, seq) -> None:
    """What the page sends for one input event on a slider."""
    slider._handle_custom_msg({"type": "move", "value": value, "seq": seq}, [])


def test_a_view_that_fails_just_after_a_single_move_is_said(monkeypatch):
    ex = StepExplorer()
    x0 = ex.sliders["x[0]"]

    def broken(*a, **k):
        raise RuntimeError("diagram exploded")

    async def move():
        monkeypatch.setattr(ex.diagram, "set_trees", broken)
        _page_move(x0, 2.5, 1)  # the chart at once; the diagram on a timer, where it fails
        assert ex.status.value == ""
        await asyncio.sleep(ex.schedule.VIEWS_SOON + 0.1)

    asyncio.run(move())
    assert "showing it failed: RuntimeError: diagram exploded" in ex.status.value
    # the step itself stands: x[0] = 2.5, prediction 1.5, residual -1.5, loss 2.25
    assert x0.value == 2.5 and ex.result.loss == pytest.approx(2.25)


def _shown_loss(ex) -> str:
    return re.search(r"<td>loss L</td><td class=\"ptl-calc-value\">([^<]*)</td>", ex.calculation.value).group(1)


def test_a_drag_moves_the_chart_at_once_and_every_view_when_it_pauses():
    from pytree_lab.formatting import fmt_number

    ex = StepExplorer()
    ex.schedule.VIEWS_EVERY = 10.0  # within this test every quick move is one drag (no periodic redraw)
    ex.schedule.DRAG_GAP = 10.0
    ex.schedule.VIEWS_TRAIL = 1.0  # a pause is 1 s here, longer than this test's own checks between moves
    x0 = ex.sliders["x[0]"]

    def consistent_chart():
        v = {k: s.value for k, s in ex.sliders.items()}
        loss, _, updated, _ = oracle(
            [v["weight[0]"], v["weight[1]"]], v["bias"], [v["x[0]"], v["x[1]"]], v["target"], v["learning_rate"]
        )
        assert ex.result.loss == pytest.approx(loss, rel=1e-6)
        np.testing.assert_allclose(ex.chart_view.bars.y[1], [*updated["weight"], updated["bias"]], rtol=1e-6, atol=1e-7)

    seen = {}

    async def drag():
        rows_before = ex.diagram.rows
        _page_move(x0, 2.5, 1)  # the first move, after a pause: the chart at once, every view just after
        assert x0.value == 2.5
        consistent_chart()
        assert ex.diagram.rows == rows_before  # the page gets the bars first
        await asyncio.sleep(ex.schedule.VIEWS_SOON + 0.05)
        assert _shown_loss(ex) == fmt_number(ex.result.loss) and ex.diagram.rows != rows_before
        rows_first = seen["rows"] = ex.diagram.rows
        consistent_chart()
        for seq, value in enumerate([2.6, 2.7, 2.8], start=2):
            await asyncio.sleep(0.005)
            _page_move(x0, value, seq)
            for _ in range(200):  # the slider's quiet interval (longer after a slow step)
                await asyncio.sleep(0.002)
                if x0.value == value:
                    break
            assert x0.value == value
            consistent_chart()  # the chart follows every move
            # the diagram and the worked calculation wait for the drag to pause
            assert ex.diagram.rows == rows_first and _shown_loss(ex) != fmt_number(ex.result.loss)
        await asyncio.sleep(ex.schedule.VIEWS_TRAIL + 0.2)

    asyncio.run(drag())
    consistent_chart()
    assert _shown_loss(ex) == fmt_number(ex.result.loss)  # the pause drew every view for the last move
    assert ex.diagram.rows != seen["rows"]
    assert ex.history[-1] == ex.result.loss and ex.history_view.line.y[-1] == pytest.approx(ex.result.loss)


def test_a_step_from_a_cell_and_a_slider_move_from_another_thread_take_turns():
    """JupyterLab runs widget messages in a kernel subshell (a thread): while a cell's
    `ex.step(n)` runs, a slider move waits for it instead of mixing into its state."""
    import threading

    ex = StepExplorer()
    order = []
    step_started, release = threading.Event(), threading.Event()
    runner = ex.session.runner()
    real_run = runner.run

    def slow_run(*args, **kwargs):
        order.append("step starts")
        step_started.set()
        release.wait(5)
        out = real_run(*args, **kwargs)
        order.append("step ends")
        return out

    runner.run = slow_run
    ex.session.runner = lambda: runner
    cell = threading.Thread(target=ex.step, args=(3,))
    cell.start()
    assert step_started.wait(5)
    mover = threading.Thread(target=lambda: (ex.sliders["x[0]"].__setattr__("value", 2.5), order.append("move done")))
    mover.start()
    mover.join(0.3)
    assert mover.is_alive()  # waiting for the step, not running inside it
    release.set()
    cell.join(10)
    mover.join(10)
    assert order == ["step starts", "step ends", "move done"]
    # both applied, in turn: three steps from the lesson's start, then x[0] = 2.5 at that point
    assert len(ex.history) == 4 and ex.sliders["x[0]"].value == 2.5
    v = {k: s.value for k, s in ex.sliders.items()}
    loss, _, _, _ = oracle(
        [v["weight[0]"], v["weight[1]"]], v["bias"], [v["x[0]"], v["x[1]"]], v["target"], v["learning_rate"]
    )
    assert ex.result.loss == pytest.approx(loss, rel=1e-5)


def test_bar_table_gives_the_chart_a_name_its_values_and_a_keyboard_path():
    """The bars as text (issue 18): the lesson's step, w = [1, -1], b = 0, x = [2, 1], t = 3,
    η = 0.05: prediction 1, dL/dpred = -4, grads w -8, -4, b -4, updated w 1.4, -0.8, b 0.2.
    A step on: prediction 2.2, dL/dpred = -1.6, grads -3.2, -1.6, -1.6, updated 1.56, -0.72, 0.28."""
    ex = StepExplorer()
    table = ex.chart_view.table
    from pytree_lab.explorer.lifetime import descendants

    assert table in descendants(ex)  # shown in the explorer (compact: under the sliders)
    assert table.title == "A gradient tree matches parameter leaves: before and after value of each parameter element"
    assert table.figure_class in ex.chart._dom_classes
    assert table.rows == [
        ["weight[0]", "['weight']", "1", "1.4"],
        ["weight[1]", "['weight']", "-1", "-0.8"],
        ["bias", "['bias']", "0", "0.2"],
    ]
    # the page chooses an element: its leaf is selected everywhere, as a click on its bar does
    table.set_state({"selected_path": "['bias']"})
    assert ex.selected_path == "['bias']" and ex.diagram.selected_path == "['bias']"
    assert list(ex.chart_view.bars.selected) == [2]
    # a path that is no element's leaf selects nothing, and the table shows the selection again
    table.set_state({"selected_path": "['nope']"})
    assert ex.selected_path == "['bias']" and table.selected_path == "['bias']"
    # kernel-owned traits refuse page writes
    table.set_state({"rows": [], "title": "x"})
    assert len(table.rows) == 3 and table.title.startswith("A gradient tree")
    # selection from Python reaches the table; a step updates its values
    ex.selected_path = "['weight']"
    assert table.selected_path == "['weight']"
    ex.step(1)
    assert table.rows == [
        ["weight[0]", "['weight']", "1.4", "1.56"],
        ["weight[1]", "['weight']", "-0.8", "-0.72"],
        ["bias", "['bias']", "0.2", "0.28"],
    ]
    ex.close()
