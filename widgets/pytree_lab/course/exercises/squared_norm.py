"""Make it yours: the squared norm of all gradient leaves (norm_squared), and again by adding the
weight and bias contributions directly (manual)."""

from __future__ import annotations

import contextlib
import dataclasses

from ...exercises import (
    CheckContext,
    Outcome,
    as_number_array,
    close,
    fmt,
    fmt_shape,
    grade_number,
    tools,
    type_name,
)
from .common import graded_exercise
from .reruns import at_cases, follows_the_lesson, lesson_cases

# weight[1]'s gradient is the bias's at every point of the lesson model (x[1] = 1): no value tells
# their squares apart, so a sentence names both
_EITHER = "in this lesson weight[1]'s gradient equals the bias's, so the value cannot tell which"


def _near(names) -> list:
    """The near-misses of the squared norm at a case (`names`: its trees), each with what it says;
    the last three are shapes (one value per value, one per leaf, the bias broadcast)."""
    jax, jnp = tools.jax, tools.jnp
    params, grads, updated = names["params"], names["grads"], names["updated"]
    leaves = jax.tree.leaves(grads)
    expected = sum(jnp.sum(g**2) for g in leaves)
    weight_part = jnp.sum(grads["weight"] ** 2)
    total = sum(jnp.sum(g) for g in leaves)
    n_values = sum(int(g.size) for g in leaves)
    return [
        (jnp.sqrt(expected), "That is the norm; the exercise asks for the squared norm (no square root)."),
        (
            weight_part,
            "That adds two of the three squares: the weight leaf alone, or weight[0]'s and the bias's "
            f"({_EITHER} is missing). Add the square of every value.",
        ),
        (
            grads["bias"] ** 2,
            f"That is one value's square: the bias leaf alone, or weight[1]'s ({_EITHER}). Add the squares "
            "of every value of every leaf.",
        ),
        (
            weight_part + grads["bias"],
            f"The bias gradient (or weight[1]'s: {_EITHER}) was added without squaring it: square every value of "
            "every leaf.",
        ),
        (
            sum(jnp.sum(jnp.abs(g)) for g in leaves),
            "That is the sum of absolute gradients: square each value before adding.",
        ),
        (total, "That is the sum of the gradients: square each value before adding."),
        (total**2, "You squared the sum; sum the squares instead."),
        (expected / n_values, f"That is a mean over the {n_values} values (jnp.mean); the exercise asks for a sum."),
        (
            sum(jnp.mean(g**2) for g in leaves),
            "You averaged inside each leaf (jnp.mean); add every value's square instead (jnp.sum).",
        ),
        (
            jnp.asarray(float(len(leaves))),
            f"That is {len(leaves)}, the number of gradient leaves: square every value of every leaf and add them up.",
        ),
        (
            jnp.asarray(float(n_values)),
            f"That is {n_values}, the number of values in the gradient leaves: square each value and add them up.",
        ),
        (
            sum(jnp.sum(p**2) for p in jax.tree.leaves(params)),
            "That is the squared norm of the parameters, not of the gradient leaves.",
        ),
        (
            sum(jnp.sum(p**2) for p in jax.tree.leaves(updated)),
            "That is the squared norm of the updated parameters, not of the gradient leaves.",
        ),
        (jnp.concatenate([jnp.ravel(g**2) for g in leaves]), "per value"),
        (jnp.stack([jnp.sum(g**2) for g in leaves]), "per leaf"),
        # sum(g**2 for g in leaves) without a reduction inside each leaf: the bias's square is
        # broadcast onto every weight entry, giving a weight-shaped array
        (grads["weight"] ** 2 + grads["bias"] ** 2, "broadcast"),
    ]


def _grade_one_norm(answer, name: str, expected: float, near: list) -> Outcome:
    np = tools.np
    *variants, (per_value, _), (per_leaf, _), (broadcast, _) = near
    arr, sums = as_number_array(answer), None
    if isinstance(answer, (list, tuple)) and answer and all(as_number_array(v) is not None for v in answer):
        with contextlib.suppress(TypeError, ValueError):
            sums = np.asarray([float(np.asarray(v).sum()) for v in answer])
    if arr is not None and arr.shape == np.shape(broadcast) and close(arr, broadcast):
        said = (
            f"has shape {fmt_shape(arr.shape)}, not one number: adding whole leaves (`sum(g**2 for g in leaves)`) "
            "broadcasts the bias's square onto each weight entry. Reduce inside each leaf first: `jnp.sum(g**2)`, "
            "then add the leaves."
        )
    elif sums is not None and sums.shape == np.shape(per_leaf) and close(np.sort(sums), np.sort(per_leaf)):
        said = f"is {type_name(answer)}, one sum per leaf ({fmt(sums)}): right so far. Add the leaves' sums together."
    else:
        what = "the squared norm of all gradient leaves"
        outcome = grade_number(answer, expected, variants, what=what, per_value=per_value, per_leaf=per_leaf)
        return dataclasses.replace(outcome, lines=[f"{name}: {line}" for line in outcome.lines])
    return Outcome(0, 1, [f"{name} {said}"])


def _grade_squared_norm(answer, seen) -> Outcome:
    """`norm_squared` alone, or {"norm_squared": ..., "manual": ...}: each graded, saying a near-miss
    only where it explains that name's value at every case (`seen`)."""
    expected = right_at(seen.lesson)["norm_squared"][0]
    if isinstance(answer, dict) and set(answer) <= {"norm_squared", "manual"} and answer:
        outcomes = []
        for name in ("norm_squared", "manual"):
            if name not in answer or answer[name] is None or answer[name] is Ellipsis:
                outcomes.append(Outcome(0, 1, [f"{name}: not answered yet (replace its `...`)."]))
            else:
                outcomes.append(_graded(answer[name], name, expected, seen))
        passed = sum(o.passed_cases for o in outcomes)
        return Outcome(passed, 2, [f"{passed} of 2 values right."] + [line for o in outcomes for line in o.lines])
    return _graded(answer, "norm_squared", expected, seen)


def _graded(answer, name: str, expected: float, seen) -> Outcome:
    """One name's value graded at the lesson's case, then at every case (a near-miss said where it
    explains each)."""
    outcome = _grade_one_norm(answer, name, expected, seen.near(_near, name))
    return follows_the_lesson(outcome, seen, name, "grads", "compute it from `grads`", _near)


def right_at(point) -> dict:
    value = float(sum(tools.jnp.sum(g**2) for g in tools.jax.tree.leaves(point["grads"])))
    return {"norm_squared": [value], "manual": [value]}


def grade(answer, context: CheckContext) -> Outcome:
    return _grade_squared_norm(answer, at_cases(EXERCISE, answer, context))


EXERCISE = graded_exercise(
    "squared_norm",
    "Make it yours",
    "Compute the squared norm of all gradient leaves (norm_squared), and again by adding the "
    "weight and bias contributions directly (manual).",
    "number",
    grade,
    lesson="Pytrees and structured parameters",
    answer_name="norm_squared, manual",
    points=2,
    unit="values",
    cases=lesson_cases(right_at, _near),
)
