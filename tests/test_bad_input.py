"""The bad-input catalogue: what students and instructors will feed the widgets.

Every case ends the same way: a clear message inside the widget (naming the tree path where
there is one), the last good state still on screen (diagram rows, bars, worked calculation,
`result`), no traceback printed, and full recovery once the input is fixed. Numbers after a
fix come from the lesson's hand derivation or from calling JAX directly here.
"""

from __future__ import annotations

import collections
import dataclasses
import html
import json
import math
import re
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from pytree_lab import PytreeDiagram, StepExplorer, describe, diagnose
from pytree_lab.diagram import FOLD_ABOVE
from pytree_lab.lesson import lesson_loss

GOOD = {"weight": jnp.array([1.0, -1.0]), "bias": jnp.array(0.0)}
# A second good start, derived by hand: prediction 2*2 + 1*(-1) + 0.5 = 3.5, residual 0.5,
# dL/dprediction 1, grads [2, 1] and 1; with lr 0.05: [1.9, -1.05] and 0.45; new prediction
# 3.5 - 0.05 * (4 + 1 + 1) = 3.2, loss 0.04.
OTHER = {"weight": jnp.array([2.0, -1.0]), "bias": jnp.array(0.5)}
OTHER_NUMBERS = {"loss": 0.25, "grads": ([2.0, 1.0], 1.0), "updated": ([1.9, -1.05], 0.45), "loss_after": 0.04}
LESSON_NUMBERS = {"loss": 4.0, "grads": ([-8.0, -4.0], -4.0), "updated": ([1.4, -0.8], 0.2), "loss_after": 0.64}


# --------------------------------------------------------------------------- what "cleanly" means


def snapshot(ex: StepExplorer) -> dict:
    """Everything the person sees: kept exactly when input is bad."""
    return {
        "result": ex.result,
        "rows": json.dumps(ex.diagram.rows),
        "columns": list(ex.diagram.columns),
        "bars": [list(map(float, y)) for y in ex.chart_view.bars.y],
        "calculation": ex.calculation.value,
    }


def assert_failed_cleanly(ex: StepExplorer, before: dict, fragments: list[str], capfd) -> None:
    status = html.unescape(ex.status.value)
    assert 'role="alert"' in ex.status.value, ex.status.value
    for fragment in fragments:
        assert fragment in status, (fragment, status)
        assert fragment in ex.diagram.message, (fragment, ex.diagram.message)
    assert ex.diagram.message_kind == "error"
    after = snapshot(ex)
    assert after["result"] is before["result"]
    for key in ("rows", "columns", "bars", "calculation"):
        assert after[key] == before[key], key
    printed = capfd.readouterr()
    assert "Traceback" not in printed.out + printed.err
    assert "Traceback" not in status


def assert_numbers(ex: StepExplorer, numbers: dict) -> None:
    r = ex.result
    assert r.loss == pytest.approx(numbers["loss"], rel=1e-5)
    np.testing.assert_allclose(r.grads["weight"], numbers["grads"][0], rtol=1e-5)
    np.testing.assert_allclose(r.grads["bias"], numbers["grads"][1], rtol=1e-5)
    np.testing.assert_allclose(r.updated["weight"], numbers["updated"][0], rtol=1e-5)
    np.testing.assert_allclose(r.updated["bias"], numbers["updated"][1], rtol=1e-5)
    assert r.loss_after == pytest.approx(numbers["loss_after"], rel=1e-4, abs=1e-6)
    # the views show the same step
    w, b = numbers["updated"]
    np.testing.assert_allclose(ex.chart_view.bars.y[1], [*w, b], rtol=1e-5)


def assert_recovered(ex: StepExplorer, numbers: dict, capfd) -> None:
    assert ex.status.value == "" and ex.diagram.message == ""
    assert_numbers(ex, numbers)
    printed = capfd.readouterr()
    assert "Traceback" not in printed.out + printed.err


# --------------------------------------------------------------------------- the explorer catalogue


@dataclasses.dataclass
class Case:
    id: str
    bad: Callable[[StepExplorer], Any]
    says: list[str]  # the message contains each (paths named where there are any)
    fix: Callable[[StepExplorer], Any]
    fixed: dict = dataclasses.field(default_factory=lambda: OTHER_NUMBERS)
    # True when the bad input stays in effect until fixed (a loss, a slider value); a refused
    # tree never enters, so the explorer simply stays usable.
    sticky: bool = False


def _params(**changes) -> dict:
    tree = dict(GOOD)
    for key, value in changes.items():
        if value is _DROP:
            tree.pop(key)
        else:
            tree[key] = value
    return tree


_DROP = object()


def _set_lr(value: float) -> Callable[[StepExplorer], None]:
    def move(ex: StepExplorer) -> None:
        slider = ex.sliders["learning_rate"]
        slider.min, slider.max = min(slider.min, value), max(slider.max, value)
        slider.value = value

    return move


def _lesson_lr(ex: StepExplorer) -> None:
    ex.sliders["learning_rate"].value = 0.05


def _move(label: str, value: float) -> Callable[[StepExplorer], None]:
    def move(ex: StepExplorer) -> None:
        ex.sliders[label].value = value

    return move


def _other(ex):
    return ex.set_params(OTHER)


CASES = [
    # leaves that cannot be differentiated
    Case(
        "string leaf (a model name)",
        lambda ex: ex.set_params(_params(bias="mlp")),
        ["params['bias'] is str", "not a floating-point value"],
        _other,
    ),
    Case(
        "int array leaf",
        lambda ex: ex.set_params(_params(weight=jnp.array([1, -1]))),
        ["params['weight'] is int32[2]", "cannot differentiate"],
        _other,
    ),
    Case("Python int leaf", lambda ex: ex.set_params(_params(bias=0)), ["params['bias'] is int32[]"], _other),
    Case("boolean leaf", lambda ex: ex.set_params(_params(bias=True)), ["params['bias'] is bool[]"], _other),
    Case(
        "None where a leaf was expected",
        lambda ex: ex.set_params(_params(bias=None)),
        ["params['bias'] is None", "empty subtree"],
        _other,
    ),
    Case("complex leaf", lambda ex: ex.set_params(_params(bias=1 + 2j)), ["params['bias'] is complex64[]"], _other),
    Case(
        "complex array leaf",
        lambda ex: ex.set_params(_params(weight=jnp.array([1 + 0j, -1 + 0j]))),
        ["params['weight'] is complex64[2]"],
        _other,
    ),
    # losses that fail
    Case(
        "loss raises",
        lambda ex: ex.set_loss(lambda p, x, target: p["nope"]),
        ["The step failed", "KeyError", "nope"],
        lambda ex: ex.set_loss(lesson_loss),
        LESSON_NUMBERS,
        sticky=True,
    ),
    Case(
        "loss returns a vector",
        lambda ex: ex.set_loss(lambda p, x, target: p["weight"] * x - target),
        ["single number (a scalar)", "shape: (2,)"],
        lambda ex: ex.set_loss(lesson_loss),
        LESSON_NUMBERS,
        sticky=True,
    ),
    Case(
        "gradient is NaN where the loss is finite",
        lambda ex: ex.set_loss(lambda p, x, target: lesson_loss(p, x, target) + jnp.sqrt(p["bias"] ** 2)),
        ["grads['bias'] is not finite"],
        lambda ex: ex.set_loss(lesson_loss),
        LESSON_NUMBERS,
        sticky=True,
    ),
    Case(
        "loss takes the wrong arguments",
        lambda ex: ex.set_loss(lambda p: jnp.sum(p["weight"] ** 2)),
        ["loss_fn(params, x=…, target=…)", "unexpected keyword argument"],
        lambda ex: ex.set_loss(lesson_loss),
        LESSON_NUMBERS,
        sticky=True,
    ),
    Case(
        "loss is NaN (log of a negative number)",
        lambda ex: ex.set_loss(lambda p, x, target: jnp.log(lesson_loss(p, x, target) - 5.0)),
        ["The loss is nan", "last good step"],
        lambda ex: ex.set_loss(lesson_loss),
        LESSON_NUMBERS,
    ),
    Case(
        "loss is Inf",
        lambda ex: ex.set_loss(lambda p, x, target: 1.0 / (lesson_loss(p, x, target) - 4.0)),
        ["The loss is inf"],
        lambda ex: ex.set_loss(lesson_loss),
        LESSON_NUMBERS,
    ),
    Case(
        "a NaN parameter value",
        lambda ex: ex.set_params(_params(bias=jnp.array(jnp.nan))),
        ["params['bias'] holds a non-finite value (nan)"],
        _other,
    ),
    Case(
        "an infinite input",
        lambda ex: ex.set_inputs({"x": jnp.array([jnp.inf, 1.0]), "target": jnp.array(3.0)}),
        ["inputs['x'] holds a non-finite value (inf)"],
        lambda ex: ex.set_inputs({"x": jnp.array([2.0, 1.0]), "target": jnp.array(3.0)}),
        LESSON_NUMBERS,
    ),
    # slider values
    Case(
        "huge learning rate overflows",
        _set_lr(1e38),
        ["updated['bias'] is not finite", "smaller learning rate"],
        _lesson_lr,
        LESSON_NUMBERS,
        sticky=True,
    ),
    Case(
        "negative learning rate from Python",
        _set_lr(-0.1),
        ["learning rate is -0.1", "uphill"],
        _lesson_lr,
        LESSON_NUMBERS,
        sticky=True,
    ),
    Case(
        "infinite learning rate from Python",
        _set_lr(math.inf),
        ["learning rate must be a finite number"],
        _lesson_lr,
        LESSON_NUMBERS,
        sticky=True,
    ),
    # trees that disagree (diagnose's messages: structure, paths, shapes, dtypes)
    Case("missing key", lambda ex: ex.set_params(_params(bias=_DROP)), ["is missing ['bias']"], _other),
    Case("extra key", lambda ex: ex.set_params(_params(scale=jnp.array(1.0))), ["has ['scale']", "no partner"], _other),
    Case(
        "renamed key",
        lambda ex: ex.set_params({"weight": GOOD["weight"], "b": GOOD["bias"]}),
        ["missing ['bias'] and has ['b'] instead", "renamed key"],
        _other,
    ),
    Case(
        "shape mismatch that would broadcast",
        lambda ex: ex.set_params(_params(weight=jnp.array([1.0]))),
        ["['weight'] has shape (2,)", "but (1,)", "broadcasting"],
        _other,
    ),
    Case(
        "shape mismatch, scalar for a vector",
        lambda ex: ex.set_params(_params(weight=jnp.array(1.0))),
        ["['weight'] has shape (2,)", "but ()"],
        _other,
    ),
    Case(
        "dtype mismatch",
        lambda ex: ex.set_params(_params(weight=jnp.array([1.0, -1.0], jnp.float16))),
        ["['weight'] is float32", "float16"],
        _other,
    ),
    Case(
        "a list where a dict was",
        lambda ex: ex.set_params([GOOD["weight"], GOOD["bias"]]),
        ["a dict", "a list"],
        _other,
    ),
    Case(
        "inputs of another shape",
        lambda ex: ex.set_inputs({"x": jnp.array([2.0, 1.0, 0.0]), "target": jnp.array(3.0)}),
        ["['x'] has shape (2,)", "(3,)"],
        lambda ex: ex.set_inputs({"x": jnp.array([2.0, 1.0]), "target": jnp.array(3.0)}),
        LESSON_NUMBERS,
    ),
    Case(
        "inputs missing the target",
        lambda ex: ex.set_inputs({"x": jnp.array([2.0, 1.0])}),
        ["missing ['target']"],
        lambda ex: ex.set_inputs({"x": jnp.array([2.0, 1.0]), "target": jnp.array(3.0)}),
        LESSON_NUMBERS,
    ),
    Case(
        "a string input",
        lambda ex: ex.set_inputs({"x": jnp.array([2.0, 1.0]), "target": "three"}),
        ["inputs['target'] is str"],
        lambda ex: ex.set_inputs({"x": jnp.array([2.0, 1.0]), "target": jnp.array(3.0)}),
        LESSON_NUMBERS,
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_bad_input_keeps_the_last_good_step(case: Case, capfd):
    ex = StepExplorer()
    assert_numbers(ex, LESSON_NUMBERS)
    before = snapshot(ex)
    capfd.readouterr()
    assert case.bad(ex) is None
    assert_failed_cleanly(ex, before, case.says, capfd)
    if case.sticky:
        # moving another slider while the input is still bad keeps failing cleanly, never half-updates
        ex.sliders["x[1]"].value = 1.5
        assert_failed_cleanly(ex, before, case.says[:1], capfd)
        ex.sliders["x[1]"].value = 1.0
    case.fix(ex)
    assert_recovered(ex, case.fixed, capfd)


def test_a_loss_that_raises_for_some_slider_values(capfd):
    """Value-dependent failure: log(x[0]) is NaN for x[0] < 0 and -Inf at 0; moving back recovers."""

    def loss(p, x, target):
        return (jnp.dot(p["weight"], x) + p["bias"] - target) ** 2 + 0.0 * jnp.log(x[0])

    ex = StepExplorer(loss, GOOD, {"x": jnp.array([2.0, 1.0]), "target": jnp.array(3.0)})
    assert_numbers(ex, LESSON_NUMBERS)
    before = snapshot(ex)
    capfd.readouterr()
    ex.sliders["x[0]"].value = -1.0
    assert_failed_cleanly(ex, before, ["The loss is nan"], capfd)
    ex.sliders["x[0]"].value = 0.0
    assert_failed_cleanly(ex, before, ["The loss is nan"], capfd)  # 0 * log(0) = 0 * -inf
    ex.sliders["x[0]"].value = 2.0
    assert_recovered(ex, LESSON_NUMBERS, capfd)


def test_zero_learning_rate_is_a_note_and_nothing_moves():
    ex = StepExplorer()
    ex.sliders["learning_rate"].value = 0.0
    r = ex.result
    np.testing.assert_allclose(r.grads["weight"], [-8.0, -4.0])  # gradients still computed
    np.testing.assert_array_equal(r.updated["weight"], r.params["weight"])
    np.testing.assert_array_equal(r.updated["bias"], r.params["bias"])
    assert r.loss_after == r.loss == 4.0
    assert 'role="status"' in ex.status.value and "nothing moves" in ex.status.value
    assert ex.diagram.message_kind == "info" and "learning rate is 0" in ex.diagram.message
    np.testing.assert_allclose(ex.chart_view.bars.y[0], ex.chart_view.bars.y[1])
    ex.sliders["learning_rate"].value = 0.05
    assert ex.status.value == "" and ex.diagram.message == ""
    assert_numbers(ex, LESSON_NUMBERS)


def test_negative_learning_rate_in_the_constructor(capfd):
    ex = StepExplorer(learning_rate=-0.05)
    assert ex.result is None
    assert ex.sliders["learning_rate"].value == -0.05  # kept as given, not clamped silently
    assert "learning rate is -0.05" in ex.status.value and "uphill" in ex.diagram.message
    assert "Traceback" not in "".join(capfd.readouterr())
    ex.sliders["learning_rate"].value = 0.05
    assert_recovered(ex, LESSON_NUMBERS, capfd)


def test_wrong_length_list_of_params(capfd):
    params = [jnp.array([1.0, -1.0]), jnp.array(0.0)]

    def loss(p, x, target):
        return (jnp.dot(p[0], x) + p[1] - target) ** 2

    ex = StepExplorer(loss, params, {"x": jnp.array([2.0, 1.0]), "target": jnp.array(3.0)})
    assert ex.result.loss == 4.0
    before = snapshot(ex)
    capfd.readouterr()
    assert ex.set_params([jnp.array([1.0, -1.0])]) is None
    assert_failed_cleanly(ex, before, ["is missing [1]"], capfd)
    ex.set_params([jnp.array([2.0, -1.0]), jnp.array(0.5)])
    assert ex.status.value == "" and ex.result.loss == pytest.approx(0.25)
    np.testing.assert_allclose(ex.result.grads[0], [2.0, 1.0])


def test_constructor_with_a_none_leaf_names_the_path(capfd):
    def loss(p, x):
        return (jnp.dot(p["weight"], x) + p["bias"]) ** 2

    ex = StepExplorer(loss, {"weight": jnp.array([1.0, -1.0]), "bias": None}, {"x": jnp.array([2.0, 1.0])})
    assert ex.result is None
    assert "params['bias'] is None" in html.unescape(ex.status.value)
    assert "Traceback" not in "".join(capfd.readouterr())


def test_a_none_subtree_the_model_has_stays_accepted_by_set_params_and_set_inputs(capfd):
    # None is JAX's empty subtree: a model that carries one (a frozen slot, an absent mask) keeps
    # it from step to step, so the same structure must be taken again
    def loss(p, x, mask):
        return jnp.sum((p["w"] * x) ** 2)

    x = jnp.array([1.0, 2.0])
    params = {"w": jnp.array([0.5, -1.0]), "frozen": None}
    ex = StepExplorer(loss, params, {"x": x, "mask": None}, learning_rate=0.1)
    assert ex.status.value == "" and ex.result.loss == pytest.approx(4.25)  # 0.5² + (-2)²
    new = {"w": jnp.array([0.4, -0.2]), "frozen": None}
    r = ex.set_params(new)
    value, grads = jax.value_and_grad(loss)(new, x, None)
    assert ex.status.value == "" and r.loss == pytest.approx(float(value))
    np.testing.assert_allclose(r.grads["w"], grads["w"])
    assert r.grads["frozen"] is None and r.updated["frozen"] is None
    assert ex.set_inputs({"x": jnp.array([3.0, 4.0]), "mask": None}) is not None
    assert ex.status.value == "" and ex.result.loss == pytest.approx(0.4**2 * 9 + 0.2**2 * 16)
    # a None where the model has a leaf is still refused, naming the path
    before = snapshot(ex)
    capfd.readouterr()
    assert ex.set_params({"w": None, "frozen": None}) is None
    assert_failed_cleanly(ex, before, ["params['w'] is None"], capfd)


def test_a_note_queued_for_a_failed_step_is_said_with_the_failure_not_after_it():
    params = {"w": jnp.array([0.5, -1.0]), "b": jnp.array(0.1)}
    ex = StepExplorer(lambda p, x: (jnp.dot(p["w"], x) + p["b"]) ** 2, params, {"x": jnp.array([1.0, 2.0])})
    ex.sliders["w[0]"].value = 1e30  # outside the slider's range, and the loss overflows
    said = html.unescape(ex.status.value)
    assert "The loss is inf" in said and "params['w'][0] = 1e+30 was outside its slider's range" in said
    ex.sliders["w[0]"].value = 2.0  # back to a good step: nothing about 1e30 any more
    assert ex.status.value == "" and ex.diagram.message == ""
    assert ex.result.loss == pytest.approx((2.0 - 2.0 + 0.1) ** 2)


def test_a_string_input_at_construction_gets_the_static_hint(capfd):
    # a student forgot static=["mode"]: the same sentence set_inputs gives, not JAX's jit text
    def loss(p, x, mode):
        return jnp.sum((p["w"] * x) ** 2)

    p, x = {"w": jnp.array([0.5, -1.0])}, jnp.array([1.0, 2.0])
    ex = StepExplorer(loss, p, {"x": x, "mode": "train"})
    said = html.unescape(ex.status.value)
    assert ex.result is None and "inputs['mode'] is str, not a number" in said and "static=[...]" in said
    assert "static_argnums" not in said and "Traceback" not in "".join(capfd.readouterr())
    ok = StepExplorer(loss, p, {"x": x, "mode": "train"}, static=["mode"])
    assert ok.status.value == "" and ok.result.loss == pytest.approx(0.25 + 4.0)


def test_an_int_input_used_as_a_slice_gets_the_static_hint_and_the_last_good_step_stays(capfd):
    # a student slices the batch with an int input n: JAX's raw IndexError, now a sentence naming static=['n']
    def loss(p, x, n):
        return jnp.sum(x[:n] @ p["w"]) ** 2

    p, x = {"w": jnp.array([1.0, -1.0])}, jnp.array([[1.0, 2.0], [3.0, 5.0], [4.0, 4.0]])
    ok = StepExplorer(lambda p, x, n: jnp.sum(x[:2] @ p["w"]) ** 2, p, {"x": x, "n": 2})
    assert ok.result.loss == pytest.approx(9.0)  # (1 - 2) + (3 - 5) = -3
    before = snapshot(ok)
    ok.set_loss(loss)
    assert_failed_cleanly(ok, before, ["uses the int input 'n' as a Python number", "static=['n']"], capfd)
    assert "IndexError" in html.unescape(ok.status.value)  # JAX's own words after the sentence
    fixed = StepExplorer(loss, p, {"x": x, "n": 2}, static=["n"])
    assert fixed.status.value == "" and fixed.result.loss == pytest.approx(9.0)


def test_float_class_labels_get_a_sentence_naming_their_dtype_and_the_last_good_step_stays(capfd):
    def loss(p, x, y):  # cross-entropy: the labels index the log-probabilities
        logp = jax.nn.log_softmax(x @ p["w"])
        return -logp[jnp.arange(y.shape[0]), y].mean()

    p, x = {"w": jnp.zeros((2, 3))}, jnp.array([[1.0, 0.0], [0.0, 1.0]])
    ex = StepExplorer(loss, p, {"x": x, "y": jnp.array([0.0, 2.0])})
    said = html.unescape(ex.status.value)
    assert ex.result is None and "indexes an array with float32 values" in said and "y.astype(np.int32)" in said
    ex = StepExplorer(loss, p, {"x": x, "y": jnp.array([0, 2])})
    assert ex.result.loss == pytest.approx(math.log(3.0), rel=1e-6)  # three equal logits
    before = snapshot(ex)
    ex.set_loss(lambda p, x, y: loss(p, x, y.astype(jnp.float32)))
    assert_failed_cleanly(ex, before, ["indexes an array with float32 values", "give the labels as integers"], capfd)


def test_a_batch_whose_step_fails_is_not_taken_and_the_data_line_keeps_the_last_good_one(capfd):
    def loss(p, x):
        return jnp.sum(jnp.log(x) @ p["w"]) ** 2

    ex = StepExplorer(loss, {"w": jnp.array([1.0, 1.0])}, {"x": jnp.array([[1.0, 1.0], [1.0, 1.0], [1.0, 1.0]])})
    good = ex.set_inputs({"x": jnp.array([[1.0, 2.0], [1.0, 1.0], [1.0, 1.0]])})
    assert good.loss == pytest.approx(math.log(2.0) ** 2, rel=1e-6)
    data = ex.data_view.value
    before = snapshot(ex)
    assert ex.set_inputs({"x": jnp.array([[1.0, -2.0], [1.0, 1.0], [1.0, 1.0]])}) is None  # log(-2): a NaN loss
    assert_failed_cleanly(ex, before, ["The loss is nan", "keeps its last good inputs"], capfd)
    assert ex.data_view.value == data and "[1, 2]" in data and "-2" not in ex.text()
    assert np.asarray(ex.session.input_leaves[0]).tolist() == [[1.0, 2.0], [1.0, 1.0], [1.0, 1.0]]
    assert ex.step(1).loss == pytest.approx(good.loss_after)  # the step went from the good batch, not to NaN


# --------------------------------------------------------------------------- the diagram's comparison


def test_expected_catches_swapped_leaves_at_any_scale_and_forgives_rounding():
    params = {"w1": np.array([1.0, 2.0], np.float32), "w2": np.array([3.0, 4.0], np.float32)}
    for scale in (1.0, 1e-7):  # a tiny loss (or a scaled one) has tiny gradients
        grads = {"w1": np.array([2.0, 4.0], np.float32) * scale, "w2": np.array([9.0, -3.0], np.float32) * scale}
        swapped = {"w1": grads["w2"], "w2": grads["w1"]}
        d = PytreeDiagram(params, grads=swapped, expected={"grads": grads})
        assert not d.diagnosis.ok and "belongs at ['w2']" in d.message, scale
        # float32 rounding of the same numbers is no mismatch
        noisy = {k: (v * np.float32(1 + 2e-7)).astype(np.float32) for k, v in grads.items()}
        assert diagnose(grads, noisy, values=True).ok
    # a zero that comes out as rounding noise beside values of order 1 still matches
    assert diagnose({"a": np.array([0.0, 1.0])}, {"a": np.array([1e-9, 1.0])}, values=True).ok


def _grads(**changes):
    tree = {"weight": jnp.array([-8.0, -4.0]), "bias": jnp.array(-4.0)}
    for key, value in changes.items():
        if value is _DROP:
            tree.pop(key)
        else:
            tree[key] = value
    return tree


DISAGREEING_GRADS = [
    ("missing key", _grads(bias=_DROP), "structure", "['bias']", "The grads tree is missing ['bias']"),
    ("extra key", _grads(scale=jnp.array(0.0)), "structure", "['scale']", "has ['scale']"),
    (
        "renamed key",
        {"weight": jnp.array([-8.0, -4.0]), "b": jnp.array(-4.0)},
        "structure",
        "['bias']",
        "has ['b'] instead",
    ),
    ("shape that would broadcast", _grads(bias=jnp.array([-4.0, -4.0])), "shape", "['bias']", "broadcasting"),
    ("dtype", _grads(bias=jnp.array(-4.0, jnp.float16)), "dtype", "['bias']", "float16"),
    ("tuple for a dict", (jnp.array([-8.0, -4.0]), jnp.array(-4.0)), "structure", "", "a tuple"),
]


@pytest.mark.parametrize(
    "grads, kind, path, says", [c[1:] for c in DISAGREEING_GRADS], ids=[c[0] for c in DISAGREEING_GRADS]
)
def test_diagram_names_the_first_difference_of_a_users_grads(grads, kind, path, says, capfd):
    good = _grads()
    d = PytreeDiagram(GOOD, grads=good)
    d.selected_path = "['weight']"
    d.collapsed = []
    assert d.message == "" and d.diagnosis.ok
    d.set_trees({"params": GOOD, "grads": grads})
    found = diagnose(GOOD, grads, reference_name="the params tree", candidate_name="the grads tree")
    assert (found.kind, found.path) == (kind, path)
    assert d.diagnosis == found and d.message == found.message and says in d.message
    assert d.message_kind == "warning"
    if path and kind == "structure" and path in {r["p"] for r in d.rows}:
        assert {r["p"]: r for r in d.rows}[path]["s"] == "missing"  # shown, not skipped
    elif path and kind != "structure":
        assert {r["p"]: r for r in d.rows}[path]["s"] == kind
    if "['weight']" in {r["p"] for r in d.rows}:
        assert d.selected_path == "['weight']"  # the selection survives where its path does
    assert "Traceback" not in "".join(capfd.readouterr())
    d.set_trees({"params": GOOD, "grads": good})  # fixed
    assert d.message == "" and d.diagnosis.ok and all(r["s"] == "ok" for r in d.rows)


def test_swapped_equal_shaped_leaves_need_the_hand_derived_update():
    """diagnose cannot see a swap (nothing structural differs); the hand-derived values can."""
    params = {"w1": jnp.array([1.0, -1.0]), "w2": jnp.array([0.5, 2.0])}
    x1, x2 = jnp.array([2.0, 1.0]), jnp.array([1.0, 3.0])

    def loss(p):
        return (jnp.dot(p["w1"], x1) + jnp.dot(p["w2"], x2) - 3.0) ** 2

    # by hand: prediction 2 - 1 + 0.5 + 6 = 7.5, residual 4.5, dL/dpred 9 -> grads 9*x1, 9*x2
    hand = {"w1": jnp.array([18.0, 9.0]), "w2": jnp.array([9.0, 27.0])}
    np.testing.assert_allclose(jax.grad(loss)(params)["w1"], hand["w1"])
    swapped = {"w1": hand["w2"], "w2": hand["w1"]}
    assert diagnose(params, swapped).ok  # the structural checks pass: this is the trap
    d = PytreeDiagram(params, grads=swapped)
    assert d.message == ""  # and a plain comparison of the trees cannot flag it
    d = PytreeDiagram(params, grads=swapped, expected={"grads": hand})
    assert d.diagnosis.kind == "value" and d.diagnosis.path == "['w1']"
    assert "belongs at ['w2']" in d.message and d.message_kind == "warning"
    d.set_trees({"params": params, "grads": hand}, expected={"grads": hand})
    assert d.message == "" and d.diagnosis.ok


# --------------------------------------------------------------------------- odd but legal trees


Point = collections.namedtuple("Point", "x y")


@jax.tree_util.register_dataclass
@dataclasses.dataclass
class Dense:
    weight: jax.Array
    bias: jax.Array


def deep(levels: int, value: float = 1.0) -> dict:
    tree: Any = jnp.array(value)
    for _ in range(levels):
        tree = {"k": tree}
    return tree


def state_size(d: PytreeDiagram) -> int:
    state = d.get_state()
    return len(json.dumps(state))


def jax_paths(tree) -> list[str]:
    return [jax.tree_util.keystr(p) for p, _ in jax.tree_util.tree_flatten_with_path(tree)[0]]


ODD_TREES = [
    ("empty dict", {}),
    ("900 levels deep", deep(900)),
    # deeper than JAX's own flatten goes (it recurses; Python's limit stops it near 997 levels)
    ("1,000 levels deep", deep(1000)),
    ("int keys", {0: jnp.array(1.0), 1: jnp.array([2.0, 3.0])}),
    ("tuple keys", {(0, 1): jnp.array(1.0), (1, 0): jnp.array(2.0)}),
    ("look-alike keys", {"a": jnp.array(1.0), "a ": jnp.array(2.0)}),
    ("namedtuple", {"p": Point(jnp.array(1.0), jnp.array([2.0]))}),
    ("registered dataclass", {"layer": Dense(jnp.ones((2, 3)), jnp.zeros(3))}),
    ("None and empty containers", {"a": None, "b": [], "c": (), "d": {}, "e": jnp.array(1.0)}),
]


@pytest.mark.parametrize("tree", [t for _, t in ODD_TREES], ids=[n for n, _ in ODD_TREES])
def test_odd_but_legal_trees_render(tree, capfd):
    s = describe(tree)
    too_deep = max(n.depth for n in s.root.walk()) > 996
    if too_deep:
        with pytest.raises(Exception):  # noqa: B017 - JAX recurses (its error varies); pytree-lab walks with a stack
            jax.tree.leaves(tree)
        expected, zeros = ["['k']" * 1000], deep(1000, 0.0)
    else:
        expected, zeros = jax_paths(tree), jax.tree.map(jnp.zeros_like, tree)
        assert s.num_leaves == len(jax.tree.leaves(tree))
    assert [leaf.path for leaf in s.leaves] == expected
    text = s.text()
    assert text.endswith(s.counts_line())
    d = PytreeDiagram(tree, grads=zeros)
    assert d.message == ""  # a tree and its zeros agree
    assert json.loads(json.dumps(d.get_state(), allow_nan=False))  # serialisable, strict JSON
    d.collapsed = []  # a big tree starts folded, its rows sent as the page opens them: open them all
    leaf_rows = {r["p"] for r in d.rows if r["leaf"]}
    assert leaf_rows == set(expected)
    assert "Traceback" not in "".join(capfd.readouterr())


def test_deep_tree_starts_folded_and_text_stays_readable():
    tree = deep(1000)
    d = PytreeDiagram(tree)
    assert len(d._paths) == 1000 and len(d._paths) > FOLD_ABOVE
    assert len(d.collapsed) == 999 - 1 + 1  # every container below the top one
    assert len(d.rows) == 1  # the top one's row: the rest is sent as it is opened
    lines = d.text().splitlines()
    assert len(lines) <= 203 and max(map(len, lines)) < 200
    d.selected_path = "['k']" * 1000  # a leaf 1,000 levels down can be selected
    assert d.selected_path == "['k']" * 1000
    assert len(d.rows) == 1000 and d.collapsed == []  # every level to it opened and sent


def test_abstract_leaves_show_shape_and_dtype_without_values():
    """jax.eval_shape gives ShapeDtypeStructs and jit gives tracers: no values, no crash."""
    abstract = jax.eval_shape(lambda: {"w": jnp.ones((3, 4)), "b": jnp.ones(4), "c": jnp.ones(4)})
    d = PytreeDiagram(abstract)
    cells = {r["p"]: r["c"][0] for r in d.rows}
    assert cells["['w']"] == {"ty": "float32[3,4]", "v": "no values", "i": 2}
    assert cells["['b']"]["v"] == cells["['c']"]["v"] == "no values"
    seen = []

    @jax.jit
    def step(p):
        seen.append(describe(p).text())
        return p

    step({"w": jnp.ones(3), "b": jnp.ones(3)})
    assert seen == ["params\n├── b: float32[3]\n└── w: float32[3]\n2 leaves, 6 numerical parameter values"]


def test_look_alike_keys_stay_distinct():
    d = PytreeDiagram({"a": jnp.array(1.0), "a ": jnp.array(2.0)})
    labels = [r["l"] for r in d.rows]
    assert labels == ["a", "'a '"]
    assert [r["p"] for r in d.rows] == ["['a']", "['a ']"]
    d.selected_path = "['a ']"
    assert d.selected_path == "['a ']"


def test_empty_params_in_the_explorer_is_a_note():
    ex = StepExplorer(lambda p, x: jnp.sum(x**2), {}, {"x": jnp.array([1.0, 2.0])})
    assert ex.result.loss == 5.0 and ex.result.grads == {}
    assert "no leaves" in ex.diagram.message and ex.diagram.message_kind == "info"
    assert list(ex.chart_view.bars.x) == []


def test_namedtuple_and_dataclass_params_in_the_explorer():
    params = {"layer": Dense(jnp.array([1.0, -1.0]), jnp.array(0.0))}

    def loss(p, x, target):
        return (jnp.dot(p["layer"].weight, x) + p["layer"].bias - target) ** 2

    ex = StepExplorer(loss, params, {"x": jnp.array([2.0, 1.0]), "target": jnp.array(3.0)})
    assert list(ex.sliders)[-3:] == ["layer/weight[0]", "layer/weight[1]", "layer/bias"]
    np.testing.assert_allclose(ex.result.grads["layer"].weight, [-8.0, -4.0])
    ex.set_params({"layer": Dense(jnp.array([2.0, -1.0]), jnp.array(0.5))})
    assert ex.result.loss == pytest.approx(0.25)
    pt = Point(jnp.array([1.0, -1.0]), jnp.array(0.0))
    ex = StepExplorer(
        lambda p, x, target: (jnp.dot(p.x, x) + p.y - target) ** 2,
        pt,
        {"x": jnp.array([2.0, 1.0]), "target": jnp.array(3.0)},
    )
    np.testing.assert_allclose(ex.result.updated.x, [1.4, -0.8], rtol=1e-6)
    assert [r["p"] for r in ex.diagram.rows] == [".x", ".y"]


def test_a_ten_million_element_leaf_is_summarised_never_shipped():
    big = np.arange(10_000_000, dtype=np.float32)
    d = PytreeDiagram({"embedding": big, "bias": np.float32(0.0)})
    (cell,) = next(r for r in d.rows if r["p"] == "['embedding']")["c"]
    assert cell["ty"] == "float32[10000000]"
    assert cell["v"].startswith("mean 5e+06, min 0, max 1e+07")
    tiny = PytreeDiagram({"embedding": np.zeros(3, np.float32), "bias": np.float32(0.0)})
    assert state_size(d) - state_size(tiny) < 200  # the same few rows of text, not 40 MB of numbers
    assert len(d.rows) == 2
    assert describe({"e": big}).leaves[0].values is None


# --------------------------------------------------------------------------- state from the front end


def test_stale_selection_and_folding_after_the_tree_changed():
    d = PytreeDiagram({"layer": {"w": jnp.zeros(2)}, "b": jnp.zeros(())})
    d.selected_path = "['layer']['w']"
    d.collapsed = ["['layer']"]
    d.set_trees({"params": {"b": jnp.zeros(())}})
    assert d.selected_path == "" and d.collapsed == []
    # a page that has not seen the change yet sends the old paths back: dropped, no message
    d._handle_msg(
        {
            "content": {
                "data": {"method": "update", "state": {"selected_path": "['layer']['w']", "collapsed": ["['layer']"]}}
            },
            "buffers": [],
        }
    )
    assert d.selected_path == "" and d.collapsed == [] and d.message == ""


@pytest.mark.parametrize(
    "bogus",
    [
        "__import__('os').system('touch /tmp/pytree-lab-pwned')",
        "['weight'] or 1",
        "<img src=x onerror=alert(1)>",
        "['weight'][0]",
        " ['weight']",
    ],
)
def test_bogus_paths_from_the_page_select_nothing_and_run_nothing(bogus, tmp_path):
    ex = StepExplorer()
    ex.diagram.selected_path = "['bias']"

    def page_writes(state):  # the comm message a crafted page sends
        ex.diagram._handle_msg({"content": {"data": {"method": "update", "state": state}}, "buffers": []})

    page_writes({"selected_path": bogus})
    assert ex.diagram.selected_path == "" and ex.selected_path == ""
    page_writes({"collapsed": [bogus, "['weight']"]})  # a leaf cannot fold either
    assert ex.diagram.collapsed == []
    assert not __import__("os").path.exists("/tmp/pytree-lab-pwned")


def test_hostile_keys_are_escaped_in_the_explorer_html():
    key = "<img src=x onerror=window.__pwned=1>"
    params = {key: jnp.array([1.0, -1.0]), "</script><script>window.__pwned=2</script>": jnp.array(0.0)}
    keys = list(params)

    def loss(p, x, target):
        return (jnp.dot(p[keys[0]], x) + p[keys[1]] - target) ** 2

    ex = StepExplorer(loss, params, {"x": jnp.array([2.0, 1.0]), "target": jnp.array(3.0)})
    assert ex.result.loss == 4.0
    for value in (ex.calculation.value, ex.status.value):
        assert "<img" not in value and "<script" not in value
    assert "&lt;img src=x onerror=window.__pwned=1&gt;" in ex.calculation.value
    ex.set_params({key: jnp.array([1.0, -1.0]), keys[1]: "text"})
    assert "<script" not in ex.status.value and "&lt;/script&gt;&lt;script&gt;" in ex.status.value
    assert "<script" not in ex._repr_mimebundle_()["text/html"]


@pytest.mark.parametrize("lr, says", [(jnp.array([0.1]), "an array of shape (1,)"), ("0.1", "'0.1'"), (True, "True")])
def test_a_learning_rate_that_is_not_one_number_is_refused_plainly(lr, says):
    with pytest.raises(ValueError, match=r"learning_rate is one number .*not " + re.escape(says)):
        StepExplorer(learning_rate=lr)


@pytest.mark.parametrize("lr", [jnp.array(0.1), jnp.float32(0.1), np.float64(0.1), 0.1])
def test_a_learning_rate_of_shape_nothing_is_taken(lr):
    ex = StepExplorer(learning_rate=lr)
    assert ex.result.learning_rate == pytest.approx(0.1)
    np.testing.assert_allclose(ex.result.updated["weight"], [1.0 + 0.1 * 8, -1.0 + 0.1 * 4], rtol=1e-6)
