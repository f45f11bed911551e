"""Each diagnosis names the real fault or says plainly what JAX's error means (issue 33), one case
at a time: the exact cell a student runs and the sentence the check card shows. Oracles: the
lesson's hand derivations (at the start the prediction is 1, the target 3, the squared error 4;
the packed example's gradient [8, 12, 4])."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import pytest
from test_computed_answers import run_and_check

from pytree_lab.course import catalogue
from pytree_lab.exercises import Evidence, cells, exception_text

NESTED = (
    "nested = {{'layer': params, 'scale': {scale}}}\n"
    "def nested_loss(p):\n"
    "    pred = {pred}\n"
    "    {ret}\n"
    "g = jax.grad(nested_loss)(nested)"
)
PRED = "p['scale'] * (jnp.dot(p['layer']['weight'], x) + p['layer']['bias'])"


def nested(scale="jnp.array(1.)", pred=PRED, ret="return (pred - 3.) ** 2") -> str:
    return NESTED.format(scale=scale, pred=pred, ret=ret)


@pytest.fixture(autouse=True)
def _fresh_runs():
    cells.forget()
    yield
    cells.forget()


CELL_CASES = {
    "print() assigned to the answer": (
        "squared_norm",
        "norm_squared = print(sum(jnp.sum(g ** 2) for g in jax.tree.leaves(grads)))\n"
        "manual = jnp.sum(grads['weight'] ** 2) + grads['bias'] ** 2",
        "norm_squared is None: print() shows a value but returns None. Assign the value itself: "
        "norm_squared = <the expression>.",
    ),
    "the number of leaves": (
        "squared_norm",
        "norm_squared = len(jax.tree.leaves(grads))\nmanual = jnp.sum(grads['weight'] ** 2) + grads['bias'] ** 2",
        "norm_squared: You gave 2. That is 2, the number of gradient leaves: square every value of every leaf "
        "and add them up.",
    ),
    "no return in the loss": (
        "nested_scale_grad",
        nested(ret="(pred - 3.) ** 2"),
        "nested_loss returns None: did you forget `return`?",
    ),
    "scale added to the prediction": (
        "nested_scale_grad",
        nested(pred="p['scale'] + jnp.dot(p['layer']['weight'], x) + p['layer']['bias']"),
        "- nested_loss returns 1 at the start, where the squared error is 4: there the prediction s·(w·x + b) is "
        "1·(2 − 1 + 0) = 1 and the target 3. If your loss is (pred - 3.) ** 2, your prediction is 2 (or 4), "
        "not 1: check how pred uses scale, weight, bias and x, each read through p.",
    ),
    "the outer params read instead of p": (
        "nested_scale_grad",
        nested(pred="p['scale'] * (jnp.dot(params['weight'], x) + p['layer']['bias'])"),
        "nested_loss does not depend on p['layer']['weight']",
    ),
    "an int32 scale": (
        "nested_scale_grad",
        nested(scale="jnp.array(1)"),
        "A leaf holds whole numbers (an int array): jax.grad differentiates floats only. Write it as a float: "
        "jnp.array(1.), with the point.",
    ),
    "a key misspelt": (
        "nested_scale_grad",
        nested(pred="p['scale'] * (jnp.dot(p['layer']['weights'], x) + p['layer']['bias'])"),
        "The dictionary it was read from has no key 'weights'",
    ),
}


@pytest.mark.parametrize("case", list(CELL_CASES))
def test_a_wrong_cell_gets_a_true_sentence(case):
    exercise_id, code, said = CELL_CASES[case]
    result, _ = run_and_check(exercise_id, code)
    assert not result.passed
    assert said in result.feedback, result.feedback
    # the untrue sentences of before
    assert "replace the `...`" not in result.feedback and "replace its `...`" not in result.feedback
    assert "squared norm of the parameters" not in result.feedback.split("Or:")[0]
    if case == "scale added to the prediction":
        assert "return (pred - 3.) ** 2." not in result.feedback


def test_a_check_of_a_cell_set_to_none_is_recorded():
    log = Evidence()
    ns = {}
    cells.run_exercise_cell("repair_update", "fixed = print('my update')", ns)
    result = catalogue.check("repair_update", None, evidence=log, cell=cells.last_run("repair_update"))
    assert result.feedback == (
        "fixed is None: print() shows a value but returns None. Assign the value itself: fixed = <the expression>."
    )
    assert [c["exercise_id"] for c in log.checks] == ["repair_update"]


REPAIR_WITH_LR = 'fixed = jax.tree.map(lambda p, g: p - lr * g, params, {**broken, "bias": grads["bias"]})'


def test_a_repair_checked_after_a_later_cell_rebound_a_name_it_read_is_rerun_with_what_it_read():
    """The lesson's section 13 runs `for lr in (0.05, 0.01)` after the repair, so `lr` is 0.01 when
    the student clicks the repair's card again: reruns with that lr gave their bias 0 - 0.01 · 1 =
    -0.01 at a hidden point where the repair gives 0.05, and the card told a right answer (bias 0.2)
    it was not computed from params and grads. A rerun reads what the cell's run read."""
    import numpy as np
    from test_computed_answers import NOTEBOOK

    from pytree_lab import course

    ns = {**NOTEBOOK, "lr": 0.05}  # a cell of the student's own: lr = 0.05
    cells.run_exercise_cell("repair_update", REPAIR_WITH_LR, ns)
    assert float(ns["fixed"]["bias"]) == pytest.approx(0.2)
    ns["lr"] = 0.01  # section 13's loop ran since
    for seed in range(3):
        rng = np.random.default_rng(seed)
        result = course.check_button("repair_update", lambda: ns["fixed"], evidence=Evidence(), rng=rng).check()
        assert (result.passed, result.score) == (True, 1.0), result.feedback
    assert ns["lr"] == 0.01  # the notebook's names are left as they are


SCALE_ON_WEIGHT = "p['scale'] * jnp.dot(p['layer']['weight'], x) + p['layer']['bias']"
NORM_OF = "norm_squared = {expr}\nmanual = norm_squared"

# A near-miss a student tried, the sentence it gets and the sentence it once got from a coincidence
# of the lesson's numbers (the start has bias 0 and residual -2, and x[1] = 1 makes weight[1]'s
# gradient the bias's at every point): the cell runs again at the hidden cases, where the
# coincidence is gone, and a near-miss is said only where it explains every case.
NEAR_MISSES = {
    "scale on the weight term only, s·(w·x) + b": (
        "nested_scale_grad",
        nested(pred=SCALE_ON_WEIGHT),
        "g: right at the lesson's values, but not at others: g is the gradient of s·(w·x) + b: scale multiplies "
        "the bias too, pred = scale * (w·x + b) (where the bias is 0, as at the lesson's start, the two agree).",
        "without numbers of the lesson written in",
    ),
    "scale multiplies the loss": (
        "nested_scale_grad",
        nested(
            pred="jnp.dot(p['layer']['weight'], x) + p['layer']['bias']", ret="return p['scale'] * (pred - 3.) ** 2"
        ),
        "2 of 3 leaves of the gradient tree are right.\n- g is the gradient of scale · (w·x + b − 3)²: scale "
        "multiplies the prediction, not the squared error: pred = scale * (w·x + b), then (pred - 3.) ** 2.",
        "the sign is flipped",
    ),
    "the bias squared in the prediction (its gradient is 0 where the bias is, at the start)": (
        "nested_scale_grad",
        nested(pred="p['scale'] * (jnp.dot(p['layer']['weight'], x) + p['layer']['bias'] ** 2)"),
        "2 of 3 leaves of the gradient tree are right.\n- ['layer']['bias']: 0 is not the right value.",
        "does not depend on",
    ),
    "weight[1]'s square missing": (
        "squared_norm",
        NORM_OF.format(expr="grads['weight'][0] ** 2 + grads['bias'] ** 2"),
        "norm_squared: You gave 80. That adds two of the three squares: the weight leaf alone, or weight[0]'s and "
        "the bias's (in this lesson weight[1]'s gradient equals the bias's, so the value cannot tell which is "
        "missing). Add the square of every value.",
        "the bias gradient's square is missing",
    ),
    "the squared norm of section 6's two-weight gradient": (
        "squared_norm",
        NORM_OF.format(expr="sum(jnp.sum(g ** 2) for g in jax.tree.leaves(two_grads))"),
        "norm_squared: You gave 256, which is not the squared norm of all gradient leaves.",
        "You squared the sum",
    ),
}


def _with_section_6(notebook: dict) -> dict:
    """The notebook's names after section 6: its two-weight model's gradient (w_x = [1, -1], w_z = 0,
    z = [1, 3]: prediction 1, residual -2, so [-8, -4], [-4, -12] and -4; squares 256)."""
    two = {"w_x": jnp.array([1.0, -1.0]), "w_z": jnp.array([0.0, 0.0]), "bias": jnp.array(0.0)}
    z = jnp.array([1.0, 3.0])

    def two_loss(p):
        return (jnp.dot(p["w_x"], notebook["x"]) + jnp.dot(p["w_z"], z) + p["bias"] - 3.0) ** 2

    return {**notebook, "two_grads": jax.grad(two_loss)(two)}


@pytest.mark.parametrize("case", list(NEAR_MISSES))
def test_a_near_miss_is_said_only_where_it_explains_every_case(case):
    from test_computed_answers import NOTEBOOK

    exercise_id, code, said, untrue = NEAR_MISSES[case]
    notebook = _with_section_6(NOTEBOOK)
    assert sum(float((g**2).sum()) for g in jax.tree.leaves(notebook["two_grads"])) == 256.0  # the hand value
    result, _ = run_and_check(exercise_id, code, notebook)
    assert not result.passed
    assert said in result.feedback, result.feedback
    assert untrue not in result.feedback


def test_an_answer_of_one_value_in_shape_1_is_one_number_at_every_case():
    """jnp.sum(..., keepdims=True) and a (1,) bias: right at the lesson's values, so right at every
    case (the check and the grader compare alike), never 'numbers of the lesson written in'."""
    code = (
        "norm_squared = jnp.sum(jnp.concatenate([jnp.ravel(g) for g in jax.tree.leaves(grads)]) ** 2, keepdims=True)\n"
        "manual = jnp.sum(grads['weight'] ** 2) + grads['bias'].reshape(1) ** 2"
    )
    result, ns = run_and_check("squared_norm", code)
    assert ns["norm_squared"].shape == ns["manual"].shape == (1,)
    assert (result.passed, result.score) == (True, 1.0), result.feedback


def test_the_repair_from_broken_passes_whichever_cells_ran_again_before_it():
    """Lesson 01 re-run out of order: the value_and_grad cell again after `broken` was built binds
    `grads` to a new tree (equal values, other objects). The repair is right in either order."""
    import numpy as np
    from test_computed_answers import NOTEBOOK

    from pytree_lab import course

    code = 'fixed = jax.tree.map(lambda p, g: p - 0.05 * g, params, {**broken, "bias": grads["bias"]})'
    again = {**NOTEBOOK, "grads": jax.grad(NOTEBOOK["loss"])(NOTEBOOK["params"])}  # cell 11 run again
    assert again["broken"]["weight"] is not again["grads"]["weight"]
    for notebook in (NOTEBOOK, again):
        ns = dict(notebook)
        cells.run_exercise_cell("repair_update", code, ns)
        for seed in range(3):
            card = course.check_button(
                "repair_update", lambda: ns["fixed"], evidence=Evidence(), rng=np.random.default_rng(seed)
            )
            result = card.check()
            assert (result.passed, result.score) == (True, 1.0), result.feedback


FLAT = "def grad_over_flat_params(flat_params, x):\n{body}\n"
FLAT_CASES = {
    "zeros returned, no loss at all": (
        "    return jnp.zeros_like(flat_params)",
        "or nothing was differentiated (return jax.grad(loss)(flat_params), not an array of zeros)",
    ),
    "x transposed": (
        "    return jax.grad(lambda p: jnp.sum((x.T @ p[:-1] + p[-1]) ** 2))(flat_params)",
        "The shapes in a product do not match: in x @ w, x's last axis and w must have the same length",
    ),
    "x @ flat_params unsliced": (
        "    return jax.grad(lambda p: jnp.sum((x @ p + p[-1]) ** 2))(flat_params)",
        "w = flat_params[:-1], not all of flat_params",
    ),
    "numpy inside the loss": (
        "    return jax.grad(lambda p: jnp.sum((x @ np.asarray(p)[:-1] + p[-1]) ** 2))(flat_params)",
        "numpy cannot compute on the values jax.grad traces: use jnp (jax.numpy)",
    ),
    "a loss that is not one number": (
        "    return jax.grad(lambda p: (x @ p[:-1] + p[-1]) ** 2)(flat_params)",
        "jax.grad needs a loss that returns one number, and this one returns an array: add it up (jnp.sum)",
    ),
}


@pytest.mark.parametrize("case", list(FLAT_CASES))
def test_a_wrong_packed_gradient_gets_a_true_sentence(case):
    import jax
    import jax.numpy as jnp
    import numpy as np

    body, said = FLAT_CASES[case]
    ns = {"jax": jax, "jnp": jnp, "np": np}
    exec(FLAT.format(body=body), ns)
    result = catalogue.check("grad_over_flat_params", ns["grad_over_flat_params"], evidence=Evidence())
    assert not result.passed
    assert said in result.feedback, result.feedback
    if case.startswith("zeros"):
        assert "every entry is 0, where the gradient is not." in result.feedback


def test_a_long_error_is_cut_between_words():
    long = "grad requires real- or complex-valued inputs (input dtype that is a sub-dtype of np.inexact), but got int32"
    text = exception_text(TypeError(long), limit=60)
    assert text == "TypeError: grad requires real- or complex-valued inputs (input dtype …"
    assert exception_text(TypeError("short"), limit=60) == "TypeError: short"


def test_a_stop_from_the_toolbar_ends_the_cell_and_is_never_said_as_a_verdict():
    from pytree_lab.exercises import run_guarded

    def stopped():
        raise KeyboardInterrupt  # what the toolbar's stop button raises in the running code

    with pytest.raises(KeyboardInterrupt):
        run_guarded(stopped, budget=5.0)


def test_every_short_form_of_a_message_is_cut_between_words():
    """The widgets' short error, the tree grader's text leaf and the autograder's error line share
    one cut (formatting.clip): never inside a word."""
    from pytree_lab.exercises import TreeSpec, grade_tree
    from pytree_lab.formatting import clip, short_error

    assert clip("abc def ghi", 8) == "abc …" and clip("abc def", 8) == "abc def"
    text = short_error(ValueError("shapes (2,8) and (8,2) cannot be broadcast together " * 20), limit=70)
    assert text == "ValueError: shapes (2,8) and (8,2) cannot be broadcast together …"
    named = {"w": "the weight of the first layer of the model, before its first step"}
    said = " ".join(grade_tree(named, TreeSpec({"w": 1.0}, "the tree")).lines)
    assert "'the weight of the first layer of the model …'" in said, said


def test_a_typed_in_value_beside_a_wrong_one_is_told_to_compute_it():
    """The cases decide each name: 96 typed in is not right because the other name is wrong."""
    result, _ = run_and_check("squared_norm", "norm_squared = 96.0\nmanual = jnp.sum(grads['weight'] ** 2)")
    assert (result.passed, result.score) == (False, 0.0)
    assert result.feedback.splitlines()[:2] == [
        "0 of 2 values right.",
        "norm_squared: this value does not change when `grads` changes: compute it from `grads`.",
    ]
