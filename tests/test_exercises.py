"""Exercise checking: check(), the catalogue of typical wrong answers, the student widgets and the
evidence file. Oracles are the lessons' hand-derived numbers (96, −4, [1.4, −0.8], 0.2, 0.64,
[8, 12, 4]) and, for the hidden cases, an independent numpy derivation of the gradient."""

from __future__ import annotations

import json
import pathlib
import re
import subprocess
import sys
import types

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import pytree_lab
from pytree_lab import course, exercises
from pytree_lab.course import check, check_button, grad_structure_quiz, lesson_prediction
from pytree_lab.exercises import (
    Evidence,
    EvidenceButton,
    PredictionPrompt,
    Quiz,
)

SOLUTIONS = pathlib.Path(__file__).parents[1] / "course_source" / "solutions"
STATIC = pathlib.Path(pytree_lab.__file__).parent / "static"

# the lesson's names, as the notebook defines them before its exercise cells
LESSON = """
import jax, jax.numpy as jnp
params = {"weight": jnp.array([1.0, -1.0]), "bias": jnp.array(0.0)}
x = jnp.array([2.0, 1.0])
def loss(p):
    return (jnp.dot(p["weight"], x) + p["bias"] - 3.0) ** 2
value, grads = jax.value_and_grad(loss)(params)
updated = jax.tree.map(lambda p, g: p - 0.05 * g, params, grads)
"""


def _load(*exercise_ids: str) -> types.SimpleNamespace:
    """The lesson's names after the reference solutions (course_source/solutions/<id>.py) ran."""
    namespace: dict = {}
    exec(LESSON, namespace)  # noqa: S102 - the lesson's own code
    for exercise_id in exercise_ids:
        exec((SOLUTIONS / f"{exercise_id}.py").read_text(), namespace)  # noqa: S102 - our solutions
    return types.SimpleNamespace(**namespace)


lesson = _load("squared_norm", "nested_scale_grad", "repair_update")
lesson.missing_key_error = True  # repair_update's solution raises AssertionError unless it raised ValueError
packed = _load("grad_over_flat_params")


@pytest.fixture(autouse=True)
def _fresh_evidence():
    exercises.clear_evidence()
    yield
    exercises.clear_evidence()


def _rng(seed: int = 0):
    return np.random.default_rng(seed)


# --------------------------------------------------------------------------- public names


def test_library_exports_only_library_names_and_check_is_the_course_alias():
    course_names = {"EXERCISES", "grad_structure_quiz", "lesson_prediction", "CheckButton", "Quiz"}
    assert not course_names & set(pytree_lab.__all__)
    assert pytree_lab.check is course.check


def test_nothing_in_the_library_imports_the_course():
    import ast

    root = pathlib.Path(pytree_lab.__file__).parent
    offenders = []
    for path in root.rglob("*.py"):
        if "course" in path.relative_to(root).parts:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and "course" in node.module.split("."):
                offenders.append(str(path))
            if isinstance(node, ast.Import) and any("course" in a.name.split(".") for a in node.names):
                offenders.append(str(path))
    assert offenders == []
    # the one reference is the lazy `check` alias, by name, in __init__
    assert '".course"' in (root / "__init__.py").read_text()


def test_the_course_uses_the_library_lesson_model():
    from pytree_lab import lesson as lesson_model
    from pytree_lab.course import catalogue

    assert catalogue.lesson is lesson_model
    assert not hasattr(catalogue, "_LESSON_WEIGHT")


def test_unknown_exercise_is_a_clear_error():
    with pytest.raises(ValueError, match="squared_norm"):
        check("squared_nrom", 96.0)


# --------------------------------------------------------------------------- squared_norm


def test_squared_norm_reference_solution_and_hand_value_pass():
    for answer in (lesson.norm_squared, lesson.manual, 96.0, 96, np.float32(96.0), jnp.array(96.0)):
        result = check("squared_norm", answer)
        assert (result.passed, result.score) == (True, 1.0), result.feedback
        assert "96" in result.feedback


@pytest.mark.parametrize(
    ("answer", "words"),
    [
        (96**0.5, ["norm", "no square root"]),
        (80.0, ["weight leaf alone", "bias"]),  # 64 + 16: the bias leaf forgotten
        (-16.0, ["sum of the gradients", "square"]),  # −8 − 4 − 4
        (32.0, ["mean", "sum"]),  # 96 / 3 values
        (256.0, ["squared the sum"]),
        (2.0, ["parameters"]),  # 1 + 1 + 0: params, not grads
        (jnp.array([64.0, 16.0, 16.0]), ["shape (3,)", "Sum them"]),
        (jnp.array([80.0, 16.0]), ["one number per leaf"]),
        ({"weight": 80.0, "bias": 16.0}, ["one number", "dict"]),
        ("96", ["string"]),
        (lambda: 96.0, ["not a function"]),
        (95.0, ["not the squared norm"]),
    ],
)
def test_squared_norm_wrong_answers_get_the_right_feedback(answer, words):
    result = check("squared_norm", answer)
    assert not result.passed and result.score == 0.0
    for word in words:
        assert word in result.feedback, result.feedback


# --------------------------------------------------------------------------- nested_scale_grad


def _grad_tree(weight, bias, scale):
    return {"layer": {"weight": jnp.array(weight), "bias": jnp.array(bias)}, "scale": jnp.array(scale)}


def test_nested_scale_grad_reference_and_hand_derived_tree_pass():
    hand = _grad_tree([-8.0, -4.0], -4.0, -4.0)  # d/dscale = −4 from the lesson's hint
    for answer in (lesson.g, hand):
        result = check("nested_scale_grad", answer)
        assert (result.passed, result.score) == (True, 1.0), result.feedback
    assert "['layer']['weight']" in result.feedback and "['scale']" in result.feedback


def test_nested_missing_key_names_its_path_and_gets_partial_credit():
    answer = {"layer": {"weight": lesson.g["layer"]["weight"]}, "scale": lesson.g["scale"]}
    result = check("nested_scale_grad", answer)
    assert not result.passed
    assert result.score == pytest.approx(2 / 3)
    assert "Your tree is missing ['layer']['bias']" in result.feedback


def test_nested_flat_tree_is_told_where_the_leaves_belong():
    g = lesson.g
    answer = {"weight": g["layer"]["weight"], "bias": g["layer"]["bias"], "scale": g["scale"]}
    result = check("nested_scale_grad", answer)
    assert not result.passed and result.score == pytest.approx(1 / 3)
    assert "your tree has ['weight'] instead" in result.feedback
    assert "belongs at ['layer']['weight']" in result.feedback


def test_nested_swapped_weight_entries_are_called_swapped():
    result = check("nested_scale_grad", _grad_tree([-4.0, -8.0], -4.0, -4.0))
    assert not result.passed and result.score == pytest.approx(2 / 3)
    assert "['layer']['weight']: the entries are swapped" in result.feedback


def test_nested_wrong_shape_names_path_and_shapes():
    result = check("nested_scale_grad", _grad_tree([[-8.0, -4.0]], -4.0, -4.0))
    assert not result.passed
    assert "['layer']['weight'] has shape (2,) in the gradient tree but (1, 2) in your tree" in result.feedback
    assert "The values are right; reshape to (2,)." in result.feedback


def test_nested_params_instead_of_grads_and_flipped_sign():
    result = check("nested_scale_grad", lesson.nested)
    assert result.score == 0.0 and "parameter value, not its gradient" in result.feedback
    flipped = jax.tree.map(lambda v: -v, lesson.g)
    result = check("nested_scale_grad", flipped)
    assert result.score == 0.0 and "sign is flipped" in result.feedback


def test_nested_list_leaf_and_metadata_string_are_explained():
    answer = {"layer": {"weight": [-8.0, -4.0], "bias": -4.0}, "scale": -4.0}
    result = check("nested_scale_grad", answer)
    assert not result.passed
    assert "['layer']['weight'] is a container with 2 leaves" in result.feedback
    with_name = dict(lesson.g, name="tiny-mlp")
    result = check("nested_scale_grad", with_name)
    assert not result.passed and result.score == pytest.approx(3 / 4)
    assert "Extra leaf ['name'] is text" in result.feedback and "not a parameter" in result.feedback


def test_nested_tuple_around_the_tree():
    value = lesson.nested_loss(lesson.nested)
    result = check("nested_scale_grad", (value, lesson.g))
    assert result.score == 0.0 and "tuple" in result.feedback and "without a tuple" in result.feedback


# --------------------------------------------------------------------------- repair_update


def test_repair_update_reference_and_hand_values_pass_with_loss_064():
    hand = {"weight": jnp.array([1.4, -0.8]), "bias": jnp.array(0.2)}
    assert lesson.missing_key_error  # the broken gradient tree really raised ValueError
    for answer in (lesson.fixed, hand):
        result = check("repair_update", answer)
        assert (result.passed, result.score) == (True, 1.0), result.feedback
        assert "Loss at your updated tree: 0.64" in result.feedback
        assert "before the step: 4" in result.feedback


def test_repair_update_missing_bias_is_a_missing_key():
    result = check("repair_update", {"weight": lesson.fixed["weight"]})
    assert not result.passed and result.score == pytest.approx(0.5)
    assert "Your tree is missing ['bias']" in result.feedback


def test_repair_update_typical_mistakes():
    p, g = lesson.params, lesson.grads
    not_updated_bias = {"weight": lesson.fixed["weight"], "bias": p["bias"]}
    result = check("repair_update", not_updated_bias)
    assert result.score == pytest.approx(0.5)
    assert "['bias']: still holds the original parameter" in result.feedback
    assert "Loss at your updated tree: 1 " in result.feedback  # (2.2 − 0.2 + 0 − 3)² = 1

    uphill = jax.tree.map(lambda p, g: p + 0.05 * g, p, g)
    result = check("repair_update", uphill)
    assert result.score == 0.0 and "uphill" in result.feedback
    assert "['bias'], ['weight']" in result.feedback  # one explanation, both paths

    result = check("repair_update", g)
    assert result.score == 0.0 and "holds the gradient, not the updated parameter" in result.feedback

    swapped = {"weight": jnp.array([-0.8, 1.4]), "bias": jnp.array(0.2)}
    result = check("repair_update", swapped)
    assert result.score == pytest.approx(0.5) and "entries are swapped" in result.feedback


# --------------------------------------------------------------------------- grad_over_flat_params


def _hand_gradient(flat_params, x):
    """The gradient by hand, independent of jax: 2·[xᵀp, Σp] with p = x·w + b."""
    flat_params, x = np.asarray(flat_params, np.float64), np.asarray(x, np.float64)
    predictions = x @ flat_params[:-1] + flat_params[-1]
    return np.concatenate([2 * x.T @ predictions, [2 * predictions.sum()]])


class Recorder:
    """Wraps an answer and keeps every input it was called with (the hidden cases included)."""

    def __init__(self, fn):
        self.fn = fn
        self.calls: list[tuple[np.ndarray, np.ndarray]] = []
        self.__name__ = getattr(fn, "__name__", "answer")

    def __call__(self, flat_params, x):
        self.calls.append((np.array(flat_params), np.array(x)))
        return self.fn(flat_params, x)


def _printed_forms(value: float) -> set[str]:
    v = float(value)
    return {f"{v:.4f}", f"{v:.5g}", f"{v:.4g}", repr(v), str(np.float32(v))}


def assert_no_hidden_data(recorder: Recorder, feedback: str) -> None:
    worked_flat, worked_x = recorder.calls[0]
    np.testing.assert_array_equal(worked_flat, [1.0, 0.0, 0.0])
    np.testing.assert_array_equal(worked_x, [[2.0, 3.0]])
    hidden = [(flat, x) for flat, x in recorder.calls[1:] if x.shape != (1, 2) or not np.array_equal(x, worked_x)]
    assert len(hidden) >= 3
    assert len({x.shape for _, x in hidden}) >= 2  # several N and d
    for flat, x in hidden:
        for value in np.concatenate([flat, x.ravel(), _hand_gradient(flat, x)]):
            for text in _printed_forms(value):
                assert text not in feedback, f"hidden value {text} leaked into: {feedback}"
    assert "Traceback" not in feedback and 'File "' not in feedback


def test_grad_over_flat_params_reference_passes_on_example_and_hidden_cases():
    answer = Recorder(packed.grad_over_flat_params)
    result = check("grad_over_flat_params", answer, rng=_rng(1))
    assert (result.passed, result.score) == (True, 1.0), result.feedback
    # five cases, one call each
    assert result.cases_total == 5 and len(answer.calls) == 5
    np.testing.assert_allclose(
        np.asarray(packed.grad_over_flat_params(jnp.array([1.0, 0.0, 0.0]), jnp.array([[2.0, 3.0]]))), [8.0, 12.0, 4.0]
    )
    assert_no_hidden_data(answer, result.feedback)


def test_hidden_cases_come_from_a_fresh_generator_each_check():
    first, second = Recorder(packed.grad_over_flat_params), Recorder(packed.grad_over_flat_params)
    assert check("grad_over_flat_params", first).passed
    assert check("grad_over_flat_params", second).passed
    hidden_first = np.concatenate([f for f, _ in first.calls[1:]])
    hidden_second = np.concatenate([f for f, _ in second.calls[1:]])
    assert hidden_first.shape != hidden_second.shape or not np.allclose(hidden_first, hidden_second)


def _sum_sq(flat, x, *, reduce=jnp.sum):
    return reduce((x @ flat[:-1] + flat[-1]) ** 2)


def mean_instead_of_sum(flat_params, x):
    return jax.grad(lambda p: _sum_sq(p, x, reduce=jnp.mean))(flat_params)


def bias_first(flat_params, x):
    return jax.grad(lambda p: jnp.sum((x @ p[1:] + p[0]) ** 2))(flat_params)


def bias_gradient_placed_first(flat_params, x):
    grad = packed.grad_over_flat_params(flat_params, x)
    return jnp.concatenate([grad[-1:], grad[:-1]])


def missing_bias(flat_params, x):
    return jax.grad(lambda w: jnp.sum((x @ w + flat_params[-1]) ** 2))(flat_params[:-1])


def returns_tuple(flat_params, x):
    def loss(w, b):
        return jnp.sum((x @ w + b) ** 2)

    return jax.grad(loss, argnums=(0, 1))(flat_params[:-1], flat_params[-1])


def returns_value_and_grad(flat_params, x):
    return jax.value_and_grad(_sum_sq)(flat_params, x)


def returns_dict(flat_params, x):
    grad = packed.grad_over_flat_params(flat_params, x)
    return {"w": grad[:-1], "b": grad[-1]}


def wrong_shape(flat_params, x):
    return packed.grad_over_flat_params(flat_params, x)[None, :]


def swapped_leaves(flat_params, x):
    grad = packed.grad_over_flat_params(flat_params, x)
    return grad.at[-2].set(grad[-1]).at[-1].set(grad[-2])  # last weight ↔ bias


def raises(flat_params, x):
    raise ValueError(f"cannot handle {flat_params} and {x}")


def returns_loss(flat_params, x):
    return _sum_sq(flat_params, x)


def grad_wrt_x(flat_params, x):
    return jax.grad(_sum_sq, argnums=1)(flat_params, x)


def flipped_sign(flat_params, x):
    return -packed.grad_over_flat_params(flat_params, x)


def bias_left_out_of_predictions(flat_params, x):
    return jax.grad(lambda p: jnp.sum((x @ p[:-1]) ** 2))(flat_params)


def hard_coded_two_features(flat_params, x):
    return jax.grad(lambda p: jnp.sum((x @ p[:2] + p[2]) ** 2))(flat_params)


def half_gradient(flat_params, x):
    return packed.grad_over_flat_params(flat_params, x) / 2


CATALOGUE = [
    # (answer, words in the feedback, score): the worked example has N = 1, so a mean passes it
    (mean_instead_of_sum, ["mean where a sum was asked", "N times too small", "jnp.sum"], 0.2),
    (bias_first, ["bias is in the wrong position", "bias last"], 0.0),
    (bias_gradient_placed_first, ["bias is in the wrong position"], 0.0),
    (missing_bias, ["bias gradient is missing"], 0.0),
    (returns_tuple, ["returned a tuple of 2 items", "one-leaf pytree", "one array of shape (d + 1,)"], 0.0),
    (returns_value_and_grad, ["(loss, gradient)", "value_and_grad", "Return only the gradient"], 0.0),
    (returns_dict, ["dict with keys 'w', 'b'", "one array"], 0.0),
    (wrong_shape, ["values are right", "shape (1, d + 1)"], 0.0),
    (swapped_leaves, ["wrong order"], None),
    (raises, ["raised ValueError: cannot handle"], 0.0),
    (returns_loss, ["returned the loss value"], 0.0),
    (grad_wrt_x, ["with respect to x", "argnums=0"], 0.0),
    (flipped_sign, ["sign is flipped"], 0.0),
    (bias_left_out_of_predictions, ["bias is not in the predictions"], 0.0),
    (half_gradient, ["half the gradient"], 0.0),
]


@pytest.mark.parametrize(("wrong", "words", "score"), CATALOGUE, ids=[c[0].__name__ for c in CATALOGUE])
@pytest.mark.parametrize("seed", [3, 11])
def test_grad_over_flat_params_wrong_answers(wrong, words, score, seed):
    answer = Recorder(wrong)
    result = check("grad_over_flat_params", answer, rng=_rng(seed))
    assert not result.passed
    if score is not None:
        assert result.score == pytest.approx(score), result.feedback
    for word in words:
        assert word in result.feedback, result.feedback
    assert_no_hidden_data(answer, result.feedback)


def test_worked_example_feedback_may_show_the_public_numbers():
    result = check("grad_over_flat_params", flipped_sign, rng=_rng(5))
    assert "- Every case: the sign is flipped" in result.feedback  # one line for one mistake
    result = check("grad_over_flat_params", wrong_shape, rng=_rng(5))
    assert (
        "- Worked example (flat_params = [1, 0, 0], x = [[2, 3]]): the values are right but your array "
        "has shape (1, d + 1) = (1, 3); return one array of shape (d + 1,) = (3,)."
    ) in result.feedback
    assert "- Hidden cases 1 (N = " in result.feedback
    result = check("grad_over_flat_params", lambda flat_params, x: jnp.array([8.0, 12.0, 5.0]), rng=_rng(5))
    assert "the worked example gives [8, 12, 4]" in result.feedback


def test_answer_that_only_knows_the_worked_example_fails_the_hidden_cases():
    result = check("grad_over_flat_params", lambda flat_params, x: jnp.array([8.0, 12.0, 4.0]), rng=_rng(2))
    assert not result.passed and result.score == pytest.approx(0.2)
    assert "Hidden case" in result.feedback or "hidden case" in result.feedback


def test_hard_coded_feature_count_passes_only_the_d_equals_2_cases():
    answer = Recorder(hard_coded_two_features)
    result = check("grad_over_flat_params", answer, rng=_rng(4))
    sizes = [x.shape[1] for _, x in answer.calls]
    assert result.cases_passed == sizes.count(2) and 0 < result.score < 1
    assert "raised TypeError" in result.feedback
    assert_no_hidden_data(answer, result.feedback)


def test_non_callable_answers():
    result = check("grad_over_flat_params", jnp.array([8.0, 12.0, 4.0]))
    assert result.score == 0.0 and "without parentheses" in result.feedback
    result = check("grad_over_flat_params", "grad_over_flat_params")
    assert result.score == 0.0 and "Not answered yet" not in result.feedback


@settings(max_examples=8, deadline=None)
@given(seed=st.integers(0, 2**32 - 1))
def test_hand_derived_gradient_matches_every_hidden_case(seed):
    # independent of jax: agreement in every case means the checker's jax.grad reference is the
    # lesson's gradient (a formula by hand computes from its inputs: it passes, as when graded)
    result = check(
        "grad_over_flat_params",
        lambda flat_params, x: _hand_gradient(flat_params, x).astype(np.float32),
        rng=_rng(seed),
    )
    assert (result.cases_passed, result.cases_total, result.passed, result.score) == (5, 5, True, 1.0), result.feedback
    assert result.feedback.startswith("All 5 cases pass: the worked example ([8, 12, 4]")


# --------------------------------------------------------------------------- widgets


def _click(widget, intent: str) -> None:
    """What the browser sends on a click, through the widget's real message handler."""
    widget._handle_custom_msg({"type": intent}, [])


def test_check_button_announces_a_pass(tmp_path):
    log = Evidence()
    button = check_button("grad_over_flat_params", lambda: packed.grad_over_flat_params, evidence=log)
    assert (button.kind, button.title, button.status, button.announcement) == (
        "check",
        "Gradient of packed parameters",
        "",
        "",
    )
    _click(button, "check")
    assert button.status == "passed" and button.score == 1.0 and not button.busy
    assert button.announcement == "Check 1: passed, score 1.00 (5 of 5 cases right)."
    assert button.feedback == button.result.feedback and "All 5 cases pass" in button.feedback
    assert [c["exercise_id"] for c in log.checks] == ["grad_over_flat_params"]


def test_check_button_rechecks_the_current_answer():
    answers = {"current": mean_instead_of_sum}
    button = check_button("grad_over_flat_params", lambda: answers["current"], evidence=Evidence())
    _click(button, "check")
    assert button.status == "failed" and button.score == pytest.approx(0.2)
    assert button.announcement == "Check 1: not yet, score 0.20 (1 of 5 cases right)."
    assert "mean where a sum was asked" in button.feedback
    answers["current"] = packed.grad_over_flat_params  # the student fixes the cell and clicks again
    _click(button, "check")
    assert button.status == "passed" and button.announcement.startswith("Check 2: passed")


def test_check_button_without_a_defined_answer_explains_what_to_run():
    button = check_button("squared_norm", "norm_squared", evidence=Evidence())
    _click(button, "check")
    assert button.status == "error" and button.result is None
    assert "Could not get norm_squared: NameError" in button.feedback
    assert "Run the cell that defines it" in button.announcement


def test_check_button_tree_answer_and_unknown_intent():
    button = check_button(
        "nested_scale_grad",
        lambda: {"layer": {"weight": jnp.array([-8.0, -4.0])}, "scale": jnp.array(-4.0)},
        evidence=Evidence(),
    )
    _click(button, "something-else")  # ignored
    assert button.attempts == 0
    _click(button, "check")
    assert button.announcement == "Check 1: not yet, score 0.67 (2 of 3 leaves right)."
    assert "['layer']['bias']" in button.feedback


def test_feedback_with_markup_stays_text():
    # feedback can quote the student's own strings; the front end must show them as text
    button = check_button(
        "nested_scale_grad", lambda: dict(lesson.g, name="<img src=x onerror=alert(1)>"), evidence=Evidence()
    )
    _click(button, "check")
    assert "'<img src=x onerror" in button.feedback
    source = (STATIC / "exercises.js").read_text()
    for sink in ("innerHTML", "outerHTML", "insertAdjacentHTML", "document.write"):
        assert sink not in source
    assert '"aria-live": "polite"' in source and "textContent" in source


def test_prediction_needs_a_prediction_then_reveals_the_computed_answer():
    log = Evidence()
    prompt = lesson_prediction("which_weight_changes_more", evidence=log)
    assert prompt.kind == "predict" and prompt.prompt == "Which weight changes more, and why?"
    _click(prompt, "reveal")
    assert not prompt.revealed and prompt.answer == ""
    assert prompt.announcement == "Type your prediction first, then reveal the answer."
    prompt.prediction = "weight[0], its input is bigger"  # what typing in the text box syncs
    _click(prompt, "reveal")
    assert prompt.revealed
    assert prompt.answer.startswith("weight[0] changes more: weight[0] moves by 0.4 and weight[1] by 0.2")
    assert "-8" in prompt.answer and "-4" in prompt.answer
    assert prompt.announcement == "Revealed. Compare it with your prediction:"
    assert log.predictions[0]["prediction"] == "weight[0], its input is bigger"


def test_other_lesson_predictions_compute_their_answers():
    leaves = lesson_prediction("gradient_leaves", evidence=Evidence())
    leaves.prediction = "[-8, -4] and -4"
    _click(leaves, "reveal")
    assert "grads['weight'] = [-8, -4]" in leaves.answer and "grads['bias'] = -4" in leaves.answer
    treedef = lesson_prediction("treedef_keeps", evidence=Evidence())
    treedef.prediction = "the keys"
    _click(treedef, "reveal")
    assert str(jax.tree.structure(lesson.params)) in treedef.answer and "'bias', 'weight'" in treedef.answer


def test_custom_prediction_prompt_uses_its_reveal_function():
    calls = []
    prompt = PredictionPrompt("Loss after one step?", lambda: calls.append(1) or "0.64", evidence=Evidence())
    prompt.prediction = "about 0.6"
    _click(prompt, "reveal")
    _click(prompt, "reveal")  # already revealed: not recomputed, not recorded twice
    assert calls == [1] and prompt.answer == "0.64" and len(prompt.evidence.predictions) == 1


def test_quiz_explains_after_an_answer():
    log = Evidence()
    quiz = grad_structure_quiz(evidence=log)
    assert quiz.question == "What structure does grad(loss)(params) have?"
    assert quiz.choices[:3] == [
        "One scalar regardless of parameters",
        "A pytree corresponding to params",
        "A list of Python source lines",
    ]
    _click(quiz, "check")
    assert not quiz.answered and quiz.announcement == "Choose an answer first."
    quiz.selected = 0
    _click(quiz, "check")
    assert quiz.answered and not quiz.correct
    assert quiz.announcement == "Not quite: you chose “One scalar regardless of parameters”."
    assert "The answer: A pytree corresponding to params." in quiz.explanation
    assert "Each floating-point parameter leaf gets a corresponding gradient leaf." in quiz.explanation
    # locked: the first answer counts, a second choice is refused and not recorded
    quiz.selected = 1
    assert quiz.selected == 0
    _click(quiz, "check")
    assert not quiz.correct and quiz.announcement.startswith("Already answered")
    assert [q["correct"] for q in log.quiz] == [False]
    # every choice explained, the wrong ones saying why they are wrong
    assert len(quiz.choice_notes) == len(quiz.choices)
    assert quiz.choice_notes[0].startswith("Not this one:") and "[-8, -4]" in quiz.choice_notes[0]
    assert quiz.choice_notes[1].startswith("Right:")
    assert "sorting" in quiz.choice_notes[3]


# --------------------------------------------------------------------------- evidence


def test_save_evidence_writes_markdown_and_json_in_the_notebook_folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    check("squared_norm", lesson.norm_squared)
    check("grad_over_flat_params", mean_instead_of_sum, rng=_rng(0))
    prompt = lesson_prediction("which_weight_changes_more")
    prompt.prediction = "weight[0]"
    _click(prompt, "reveal")
    quiz = grad_structure_quiz()
    quiz.selected = 1
    _click(quiz, "check")
    exercises.record_output("gradient tree", lesson.grads)
    exercises.record_output("loss after the repaired update", lesson.loss(lesson.fixed))

    saved = exercises.save_evidence()
    assert saved.markdown == tmp_path / "pytree-lab-evidence.md"
    assert saved.json == tmp_path / "pytree-lab-evidence.json"
    text = saved.markdown.read_text()
    for piece in (
        "# Pytree lab: my evidence",
        "## Predictions",
        "Which weight changes more, and why?",
        "| weight\\[0\\] |",
        "## Summary",
        "| Make it yours (`squared_norm`) | passed | 1 |",
        "| Gradient of packed parameters (`grad_over_flat_params`) | not yet | 1 |",
        "## Checks",
        "Make it yours (`squared_norm`): passed, score 1.00",
        "Gradient of packed parameters (`grad_over_flat_params`): not yet, score 0.20",
        "mean where a sum was asked",
        "## Check your understanding",
        "| What structure does grad(loss)(params) have? | A pytree corresponding to params (correct) | none |",
        "## Key outputs",
        "### gradient tree",
    ):
        assert piece in text, piece
    data = json.loads(saved.json.read_text())
    assert [c["passed"] for c in data["checks"]] == [True, False]
    assert data["checks"][0]["answer"] == pytest.approx(96.0)
    assert data["outputs"][0]["value"] == {"bias": -4.0, "weight": [-8.0, -4.0]}
    assert data["outputs"][1]["value"] == pytest.approx(0.64, abs=1e-6)
    assert data["predictions"][0]["answer"].startswith("weight[0] changes more")
    assert data["quiz"][0]["choice"] == "A pytree corresponding to params"


def test_saving_again_merges_sessions_and_never_overwrites_a_foreign_file(tmp_path):
    first, second = Evidence(), Evidence()  # two kernel sessions
    check("squared_norm", lesson.norm_squared, evidence=first)
    saved1 = first.save(tmp_path / "my.md")
    check("squared_norm", 80.0, evidence=second)
    saved2 = second.save(tmp_path / "my.md")
    assert saved2.markdown == saved1.markdown
    data = json.loads(saved2.json.read_text())
    assert [c["answer"] for c in data["checks"]] == [pytest.approx(96.0), pytest.approx(80.0)]
    assert len(data["sessions"]) == 2
    assert "| passed | 2 |" in saved2.markdown.read_text()
    # saving the same session twice adds nothing twice
    second.save(tmp_path / "my.md")
    assert len(json.loads(saved2.json.read_text())["checks"]) == 2
    # a file the log did not write is never overwritten: the evidence goes to a dated file
    notes = tmp_path / "notes.md"
    notes.write_text("my own notes\n")
    saved3 = second.save(notes)
    assert notes.read_text() == "my own notes\n"
    assert saved3.markdown != notes and saved3.markdown.name.startswith("notes-")
    assert saved3.markdown.exists() and saved3.json.exists()


def test_student_text_is_escaped_in_the_markdown(tmp_path):
    log = Evidence()
    prompt = PredictionPrompt("Which?", lambda: "weight[0]", prediction_id="p", evidence=log)
    prompt.prediction = "<script>alert(1)</script> | **bold** # [link](x)"
    prompt.reveal()
    prompt.self_rating = "partly"
    text = log.save(tmp_path / "e.md").markdown.read_text()
    assert "<script>" not in text and "&lt;script&gt;" in text
    assert "\\*\\*bold\\*\\*" in text and "\\|" in text and "\\[link\\]" in text
    assert "| partly |" in text


def test_evidence_button_saves_and_announces(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    log = Evidence()
    check("repair_update", lesson.fixed, evidence=log)
    button = EvidenceButton("portfolio/pytree-lesson", evidence=log)
    assert button.label == "Save my evidence"
    _click(button, "save")
    markdown = tmp_path / "portfolio" / "pytree-lesson.md"
    assert button.saved_path == str(markdown)
    assert markdown.exists() and markdown.with_suffix(".json").exists()
    assert button.announcement == (
        f"Saved pytree-lesson.md and pytree-lesson.json in {markdown.parent}: "
        "the file now holds 0 predictions, 1 check, 0 quiz answers, 0 key outputs, "
        "from 1 session."
    )
    assert "Loss at your updated tree: 0.64" in markdown.read_text()


def test_evidence_fences_survive_backticks_in_feedback():
    log = Evidence()
    log.add_output("code", "```\nprint('hi')\n```")
    text = log.to_markdown()
    assert "````text\n```\nprint('hi')\n```\n````" in text
    assert re.search(r"^## Key outputs$", text, re.M)


# --------------------------------------------------------------------------- JupyterLite engine

LITE_SCRIPT = '''
import json, sys
class _Block:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("jax", "jaxlib"):
            raise ImportError(f"{name} is not installed here")
sys.meta_path.insert(0, _Block())
import pytree_lab_lite
engine = pytree_lab_lite.install_as_jax()
import jax, jax.numpy as jnp
from pytree_lab import check
x = jnp.array([2.0, 1.0])
params = {"weight": jnp.array([1.0, -1.0]), "bias": jnp.array(0.0)}
def loss(p):
    return (jnp.dot(p["weight"], x) + p["bias"] - 3.0) ** 2
grads = jax.grad(loss)(params)
fixed = jax.tree.map(lambda p, g: p - 0.05 * g, params, grads)
def flat_sum(fp, x):
    return jax.grad(lambda p: jnp.sum((x @ p[:-1] + p[-1]) ** 2))(fp)
def flat_mean(fp, x):
    return jax.grad(lambda p: jnp.mean((x @ p[:-1] + p[-1]) ** 2))(fp)
results = [check("squared_norm", 96.0), check("repair_update", fixed),
           check("repair_update", {"weight": fixed["weight"]}),
           check("grad_over_flat_params", flat_sum), check("grad_over_flat_params", flat_mean)]
print(json.dumps({"engine": engine, "real_jax": "jaxlib" in sys.modules,
                  "results": [[r.passed, r.score, r.feedback] for r in results]}))
'''


def test_checks_run_on_the_jupyterlite_engine():
    # jax cannot be imported in the browser kernel: the checks must work on the Lite engine
    out = subprocess.run(
        [sys.executable, "-W", "error", "-c", LITE_SCRIPT], capture_output=True, text=True, timeout=300
    )
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout.strip().splitlines()[-1])
    assert data["engine"] == "lite" and not data["real_jax"]
    (norm, repaired, missing, flat_sum, flat_mean) = data["results"]
    assert norm[:2] == [True, 1.0]
    assert repaired[:2] == [True, 1.0] and "Loss at your updated tree: 0.64" in repaired[2]
    assert missing[:2] == [False, 0.5] and "Your tree is missing ['bias']" in missing[2]
    assert flat_sum[:2] == [True, 1.0]
    assert flat_mean[:2] == [False, 0.2] and "mean where a sum was asked" in flat_mean[2]


@pytest.mark.parametrize("exercise_id", ["squared_norm", "nested_scale_grad", "repair_update", "grad_over_flat_params"])
@pytest.mark.parametrize("answer", [None, ...])
def test_an_unanswered_exercise_says_so_and_records_nothing(exercise_id, answer):
    evidence = Evidence()
    result = check(exercise_id, answer, evidence=evidence)
    assert (result.passed, result.score) == (False, 0.0)
    assert result.feedback.startswith("Not answered yet")
    assert len(evidence) == 0


def test_widgets_read_as_text_without_a_front_end():

    bundle = grad_structure_quiz()._repr_mimebundle_()
    text = (bundle[0] if isinstance(bundle, tuple) else bundle)["text/plain"]
    assert "What structure does grad(loss)(params) have?" in text
    assert "2. A pytree corresponding to params" in text


def test_a_closed_check_button_is_freed():
    """Like the diagram: nothing keeps a closed exercise widget alive."""
    import gc
    import weakref

    b = check_button("squared_norm", lambda: 96.0)
    ref = weakref.ref(b)
    b.close()
    del b
    gc.collect()
    assert ref() is None


def test_an_intent_carries_the_input_it_acts_on():
    """ipywidgets holds the page's trait write back while an earlier one is pending, so the
    "reveal" / "check" message can arrive before the last keystrokes: the intent carries the
    input, and Python acts on that, not on the first letter it had seen."""
    log = Evidence()
    prompt = PredictionPrompt("Which leaf moves most?", lambda: "weight[0]", evidence=log)
    prompt.prediction = "w"  # the first keystroke's write; the rest is still held back
    prompt._handle_custom_msg({"type": "reveal", "prediction": "weight[0]"}, [])
    assert prompt.revealed and prompt.prediction == "weight[0]"
    assert log.predictions[0]["prediction"] == "weight[0]"
    prompt.set_state({"prediction": "weight[0] and more"})  # the held-back write, after the reveal
    assert prompt.prediction == "weight[0]"  # locked once revealed

    quiz = grad_structure_quiz(evidence=Evidence())
    quiz._handle_custom_msg({"type": "check", "selected": 1}, [])
    assert quiz.answered and quiz.correct and quiz.selected == 1
    quiz._handle_custom_msg({"type": "check", "selected": 0}, [])  # the first answer counts
    assert quiz.selected == 1 and quiz.correct

    wrong_type = PredictionPrompt("Which?", lambda: "x", evidence=Evidence())
    wrong_type._handle_custom_msg({"type": "reveal", "prediction": 5}, [])
    assert not wrong_type.revealed and wrong_type.prediction == ""
    refused = Quiz("Q?", ["a", "b"], 0, "because", evidence=Evidence())
    refused._handle_custom_msg({"type": "check", "selected": 1, "correct": True, "answer_index": 1}, [])
    assert refused.answered and not refused.correct and refused.answer_index == 0  # only `selected` is taken
