"""Repair a mismatched update tree: the updated parameter tree (fixed) after restoring bias in the
gradient tree."""

from __future__ import annotations

import contextlib
import dataclasses

from ... import lesson
from ...exercises import CheckContext, Outcome, TreeSpec, as_number_array, fmt_num, grade_tree, tools
from .common import _lesson_setup, _same_tree, graded_exercise, lesson_point
from .reruns import at_cases, follows_the_lesson, lesson_cases

_LR = fmt_num(lesson.LEARNING_RATE)  # the lesson's learning rate, as the sentences write it
_BY_PATH = f"jax.tree.map(lambda p, g: p - {_LR} * g, params, grads)"
_SWAPPED = (
    "the gradient leaves are swapped: weight was stepped with the bias gradient and bias with the weight "
    f"gradient (so bias became an array of 2 values). Pair each parameter with its own gradient by path: {_BY_PATH}."
)
_ZIP = (
    "your zip pairs leaves by position, and the positions disagree: params' values come in the order "
    "written (weight, bias), the gradients in flatten order (bias, weight: keys sorted, as "
    "jax.tree.leaves(grads) and JAX's gradient dict give them). So weight was stepped with the bias gradient "
    f"and bias with the weight gradient. Pair by path instead: {_BY_PATH}."
)
_KEYS_SWAPPED = (
    "the updated values are right but under each other's keys: weight holds the updated bias and "
    "bias the updated weight, as zipping params' keys (weight, bias: the order written) with "
    f"leaves in flatten order (bias, weight) does. Keep the structure: {_BY_PATH}."
)
_ZIP_KEYS = (
    "your zip put the updated values under each other's keys: it pairs params' keys in the order "
    "written (weight, bias) with leaves in flatten order (bias, weight: keys sorted), so weight holds "
    f"the updated bias and bias the updated weight. Keep the structure: {_BY_PATH}."
)


_WHOLE = 2  # the first near-misses are said of the whole tree, the others leaf by leaf


def _near(names) -> list:
    """fixed's near-misses at a case (`names`: its trees), each with what it says."""
    jax, lr = tools.jax, lesson.LEARNING_RATE
    params, grads, updated = names["params"], names["grads"], names["updated"]
    return [
        ({"weight": params["weight"] - lr * grads["bias"], "bias": params["bias"] - lr * grads["weight"]}, _SWAPPED),
        ({"weight": updated["bias"], "bias": updated["weight"]}, _KEYS_SWAPPED),
        (
            params,
            "still holds the original parameter: it was not updated. Every parameter leaf needs "
            "its own gradient leaf in tree.map.",
        ),
        (grads, "holds the gradient, not the updated parameter (p − learning_rate · g)."),
        (
            jax.tree.map(lambda p, g: p + lr * g, params, grads),
            "holds p + learning_rate · g, a step uphill; subtract the gradient.",
        ),
    ]


def _grade_repair_update(answer, near: list) -> Outcome:
    point = lesson_point()
    spec = TreeSpec(
        expected=point["updated"],
        name="the updated parameter tree",
        related=tuple(near[_WHOLE:]),
        hints={
            "['weight']": f"Use p − {_LR} · g with the weight gradient from value_and_grad.",
            "['bias']": f"Use p − {_LR} · g with the bias gradient; restore bias in the gradient tree first.",
        },
    )
    outcome = grade_tree(answer, spec)
    whole = next((s for t, s in near[:_WHOLE] if not outcome.passed and _same_tree(answer, t)), None)
    if whole is not None:
        return Outcome(outcome.passed_cases, 2, [outcome.lines[0], f"- {whole}"])
    # The loss at the student's tree: the lesson's evidence that the repair worked.
    with contextlib.suppress(Exception):  # a malformed tree already has its feedback above
        leaves = {k: as_number_array(v) for k, v in answer.items()} if isinstance(answer, dict) else {}
        if set(leaves) == {"weight", "bias"} and all(v is not None for v in leaves.values()):
            _, x, target, _ = _lesson_setup()
            candidate = {k: tools.jnp.asarray(v, dtype=tools.jnp.float32) for k, v in leaves.items()}
            loss, after = (float(lesson.lesson_loss(t, x, target)) for t in (candidate, point["updated"]))
            outcome.lines.append(
                f"Loss at your updated tree: {fmt_num(loss)} (before the step: "
                f"{fmt_num(point['value'])}; the repaired update gives {fmt_num(after)})."
            )
    return outcome


def grade(answer, context: CheckContext) -> Outcome:
    seen = at_cases(EXERCISE, answer, context)
    outcome = _grade_repair_update(answer, seen.near(_near, "fixed"))
    if outcome.passed:
        move = "compute it from `params` and `grads` with jax.tree.map"
        return follows_the_lesson(outcome, seen, "fixed", "params and grads", move, _near)
    if context.cell is not None and "zip(" in (context.cell.code or ""):
        zipped = {f"- {_SWAPPED}": f"- {_ZIP}", f"- {_KEYS_SWAPPED}": f"- {_ZIP_KEYS}"}
        return dataclasses.replace(outcome, lines=[zipped.get(line, line) for line in outcome.lines])
    return outcome


def right_at(point) -> dict:
    return {"fixed": [point["updated"]]}


EXERCISE = graded_exercise(
    "repair_update",
    "Repair a mismatched update tree",
    "The updated parameter tree (fixed) after restoring bias in the gradient tree.",
    "tree",
    grade,
    lesson="Pytrees and structured parameters",
    answer_name="fixed",
    points=2,
    unit="leaves",
    # the lesson's gradient tree without its bias, as the lesson's cell builds it
    cases=lesson_cases(right_at, _near, lambda point: {"broken": {"weight": point["grads"]["weight"]}}),
)
