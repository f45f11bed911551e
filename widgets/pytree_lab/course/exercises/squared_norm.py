"""Make it yours: the squared norm of all gradient leaves (norm_squared), and again by adding the
weight and bias contributions directly (manual)."""

from __future__ import annotations

import math

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
from .common import _lesson_step, graded_exercise
from .reruns import follows_the_lesson, lesson_cases


def _squared_norm_parts():
    jax, jnp = tools.jax, tools.jnp
    params, grads, updated, _, _ = _lesson_step()
    leaves = jax.tree.leaves(grads)
    expected = float(sum(jnp.sum(g**2) for g in leaves))
    weight_part = float(jnp.sum(grads["weight"] ** 2))
    bias_part = float(grads["bias"] ** 2)
    total = float(sum(jnp.sum(g) for g in leaves))
    n_values = sum(int(g.size) for g in leaves)
    variants = [
        (math.sqrt(expected), "That is the norm; the exercise asks for the squared norm (no square root)."),
        (weight_part, "That is the weight leaf alone: the bias gradient's square is missing."),
        (bias_part, "That is the bias leaf alone: add the weight leaf's squares too."),
        (
            weight_part + float(grads["bias"]),
            "The bias gradient was added without squaring it: square every leaf's values, the bias too.",
        ),
        (
            float(sum(jnp.sum(jnp.abs(g)) for g in leaves)),
            "That is the sum of absolute gradients: square each value before adding.",
        ),
        (total, "That is the sum of the gradients: square each value before adding."),
        (total**2, "You squared the sum; sum the squares instead."),
        (expected / n_values, f"That is a mean over the {n_values} values (jnp.mean); the exercise asks for a sum."),
        (
            float(sum(jnp.mean(g**2) for g in leaves)),
            "You averaged inside each leaf (jnp.mean); add every value's square instead (jnp.sum).",
        ),
        (
            float(len(leaves)),
            f"That is {len(leaves)}, the number of gradient leaves: square every value of every leaf and add them up.",
        ),
        (
            float(n_values),
            f"That is {n_values}, the number of values in the gradient leaves: square each value and add them up.",
        ),
        (
            float(sum(jnp.sum(p**2) for p in jax.tree.leaves(params))),
            "That is the squared norm of the parameters, not of the gradient leaves.",
        ),
        (
            float(sum(jnp.sum(p**2) for p in jax.tree.leaves(updated))),
            "That is the squared norm of the updated parameters, not of the gradient leaves.",
        ),
    ]
    per_value = jnp.concatenate([jnp.ravel(g**2) for g in leaves])
    per_leaf = jnp.stack([jnp.sum(g**2) for g in leaves])
    # sum(g**2 for g in leaves) without a reduction inside each leaf: the bias's square is
    # broadcast onto every weight entry, giving a weight-shaped array
    broadcast = grads["weight"] ** 2 + grads["bias"] ** 2
    return expected, variants, per_value, per_leaf, broadcast


def _grade_one_norm(answer, name: str, parts) -> Outcome:
    np = tools.np
    expected, variants, per_value, per_leaf, broadcast = parts
    arr = as_number_array(answer)
    if arr is not None and arr.shape == tuple(broadcast.shape) and close(arr, broadcast):
        return Outcome(
            0,
            1,
            [
                f"{name} has shape {fmt_shape(arr.shape)}, not one number: adding whole leaves "
                "(`sum(g**2 for g in leaves)`) broadcasts the bias's square onto each weight entry. "
                "Reduce inside each leaf first: `jnp.sum(g**2)`, then add the leaves."
            ],
        )
    if isinstance(answer, (list, tuple)) and answer and all(as_number_array(v) is not None for v in answer):
        try:
            values = np.asarray([float(np.asarray(v).sum()) for v in answer])
        except (TypeError, ValueError):
            values = None
        if values is not None and values.shape == tuple(per_leaf.shape) and close(np.sort(values), np.sort(per_leaf)):
            return Outcome(
                0,
                1,
                [
                    f"{name} is {type_name(answer)}, one sum per leaf ({fmt(values)}): right so far. "
                    "Add the leaves' sums into one number."
                ],
            )
    outcome = grade_number(
        answer,
        expected,
        variants,
        what="the squared norm of all gradient leaves",
        per_value=per_value,
        per_leaf=per_leaf,
    )
    outcome.lines = [f"{name}: {line}" for line in outcome.lines]
    return outcome


def _grade_squared_norm(answer) -> Outcome:
    """`norm_squared` alone, or {"norm_squared": ..., "manual": ...}: each graded."""
    parts = _squared_norm_parts()
    if isinstance(answer, dict) and set(answer) <= {"norm_squared", "manual"} and answer:
        outcomes = []
        for name in ("norm_squared", "manual"):
            if name not in answer or answer[name] is None or answer[name] is Ellipsis:
                outcomes.append(Outcome(0, 1, [f"{name}: not answered yet (replace its `...`)."]))
            else:
                outcomes.append(_grade_one_norm(answer[name], name, parts))
        passed = sum(o.passed_cases for o in outcomes)
        lines = [line for o in outcomes for line in o.lines]
        return Outcome(passed, 2, [f"{passed} of 2 values right."] + lines)
    return _grade_one_norm(answer, "norm_squared", parts)


def right_at(point) -> dict:
    value = float(sum(tools.jnp.sum(g**2) for g in tools.jax.tree.leaves(point["grads"])))
    return {"norm_squared": [value], "manual": [value]}


def grade(answer, context: CheckContext) -> Outcome:
    outcome = _grade_squared_norm(answer)
    return follows_the_lesson(EXERCISE, outcome, answer, context, "grads", "compute it from `grads`")


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
    cases=lesson_cases(right_at),
)
