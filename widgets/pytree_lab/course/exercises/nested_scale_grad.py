"""Extend to a nested model: the gradient tree g of nested_loss at {"layer": params, "scale": 1.0}."""

from __future__ import annotations

import dataclasses
from typing import Any

from ... import lesson
from ...exercises import (
    CheckContext,
    Outcome,
    TreeSpec,
    as_number_array,
    close,
    fmt_num,
    grade_tree,
    tools,
    type_name,
)
from .common import _lesson_setup, _same_tree, graded_exercise
from .reruns import at_cases, follows_the_lesson, lesson_cases


def _nested_params():
    return {"layer": lesson.lesson_params(), "scale": tools.jnp.array(1.0)}


def _residual(s, wx, b, target):
    return s * (wx + b) - target


def _nested_loss(p, form=lambda s, wx, b, target: _residual(s, wx, b, target) ** 2):
    """The nested model's loss at p, (s·(w·x + b) − 3)², or a near-miss's `form` of the same parts."""
    _, x, target, _ = _lesson_setup()
    return form(p["scale"], tools.jnp.dot(p["layer"]["weight"], x), p["layer"]["bias"], target)


_WHOLE = 4  # the first near-misses are said of the whole tree, the others leaf by leaf


def _near(names) -> list:
    """g's near-misses at a case (`names`: its trees), each with what it says."""
    jax, jnp = tools.jax, tools.jnp
    nested = {"layer": names["params"], "scale": jnp.array(1.0)}
    grads = jax.grad(_nested_loss)(nested)
    return [
        (nested, "g holds the parameter value, not its gradient, at every leaf: g = jax.grad(nested_loss)(nested)."),
        (
            jax.grad(_nested_loss)(nested, _residual),
            "g is the gradient of the residual pred − 3, not of the squared error: nested_loss must return "
            "(pred - 3.) ** 2.",
        ),
        (
            jax.grad(_nested_loss)(nested, lambda s, wx, b, target: (s * wx + b - target) ** 2),
            "g is the gradient of s·(w·x) + b: scale multiplies the bias too, pred = scale * (w·x + b) "
            "(where the bias is 0, as at the lesson's start, the two agree).",
        ),
        (
            jax.grad(_nested_loss)(nested, lambda s, wx, b, target: s * _residual(1.0, wx, b, target) ** 2),
            "g is the gradient of scale · (w·x + b − 3)²: scale multiplies the prediction, not the squared "
            "error: pred = scale * (w·x + b), then (pred - 3.) ** 2.",
        ),
        (
            jax.tree.map(lambda g: -g, grads),
            "the sign is flipped. The residual is prediction − target, which is negative here.",
        ),
        (
            jax.tree.map(jnp.zeros_like, grads),
            "is 0: the loss does not depend on this leaf. Does nested_loss read it through its argument p "
            "(not from params outside the function)?",
        ),
    ]


def _grade_nested_scale_grad(answer, near: list) -> Outcome:
    grads = tools.jax.grad(_nested_loss)(_nested_params())
    spec = TreeSpec(
        expected=grads,
        name="the gradient tree",
        related=tuple(near[_WHOLE:]),
        hints={
            "['scale']": "At the start the prediction is 1 and the residual is −2; d/dscale multiplies "
            "the derivative of the squared loss by w·x + b.",
            "['layer']['weight']": "Each weight's gradient is the derivative of the loss with respect to "
            "the prediction, times scale, times its input.",
            "['layer']['bias']": "The bias gradient is the derivative with respect to the prediction, times scale.",
        },
    )
    outcome = grade_tree(answer, spec)
    # a mistake recognised by the whole tree, never by one leaf that happens to equal a value
    whole = next((s for t, s in near[:_WHOLE] if not outcome.passed and _same_tree(answer, t)), None)
    if whole is not None:
        return Outcome(outcome.passed_cases, 3, [outcome.lines[0], f"- {whole}"])
    if outcome.passed:
        outcome.lines.append(
            f"d loss / d scale: {fmt_num(grads['scale'])}, as derived by hand "
            "(residual −2, times 2, times w·x + b = 1)."
        )
    return outcome


def right_at(point) -> dict:
    """g's right value at a point: the gradient of the nested model s·(w·x + b)."""
    return {"g": [tools.jax.grad(_nested_loss)({"layer": point["params"], "scale": tools.jnp.array(1.0)})]}


def grade(answer, context: CheckContext) -> Outcome:
    seen = at_cases(EXERCISE, answer, context)
    outcome = _grade_nested_scale_grad(answer, seen.near(_near, "g"))
    if outcome.passed:
        move = "build nested from `params` and compute g with jax.grad"
        return follows_the_lesson(outcome, seen, "g", "params", move, _near)
    if context.cell is None:
        return outcome
    try:  # the student's own nested_loss runs: under the check's guard
        found = _nested_evidence(context.cell.namespace, [case.names["params"] for case, _ in seen.samples[1:]])
    except Exception:  # noqa: BLE001 - evidence that cannot be read is no evidence
        found = None
    if not found:
        return outcome
    # the evidence says it first; the tree-level sentences that say the same go
    same = ("holds the parameter value", "gradient of the residual", "is 0: the loss does not depend")
    lines = outcome.lines
    kept = [line for line in lines[1:] if not any(words in line for words in same)]
    return dataclasses.replace(outcome, lines=lines[:1] + [f"- {found}"] + kept)


def _nested_evidence(namespace, others: list) -> str | None:
    """The first thing wrong, found from the student's own nested and nested_loss: the tree,
    then the loss's value at the start (squared?), then which leaves it does not depend on,
    then whether g is its gradient (`others`: the params of the other cases). None when the evidence
    is not there."""
    if not isinstance(namespace, dict):
        return None
    jax = tools.jax
    nested, nested_loss, g = namespace.get("nested"), namespace.get("nested_loss"), namespace.get("g")
    want = _nested_params()
    if nested is None or not callable(nested_loss):
        return None
    if not _same_tree(nested, want):
        return (
            'nested is not {"layer": params, "scale": 1.0}: build it from params, with scale a float '
            "scalar equal to 1 (jnp.array(1.))."
        )
    value = as_number_array(nested_loss(nested))
    if value is None or value.size != 1:
        return (
            f"nested_loss(nested) returns {type_name(nested_loss(nested))}; it must return one number, "
            "the squared error (pred - 3.) ** 2."
        )
    value = float(value.reshape(()))
    right = float(_nested_loss(want))
    if not close(value, right):
        if close(value, float(_nested_loss(want, _residual))):
            return (
                f"nested_loss returns {fmt_num(value)} at the start: that is the residual pred − 3, not the "
                "squared error. Square it: return (pred - 3.) ** 2."
            )
        if value < 0:
            return (
                f"nested_loss returns {fmt_num(value)} at the start, below 0: a squared error never is. "
                "Return the squared error: (pred - 3.) ** 2."
            )
        low, high = 3 - value**0.5, 3 + value**0.5
        return (
            f"nested_loss returns {fmt_num(value)} at the start, where the squared error is {fmt_num(right)}: "
            "there the prediction s·(w·x + b) is 1·(2 − 1 + 0) = 1 and the target 3. If your loss is "
            f"(pred - 3.) ** 2, your prediction is {fmt_num(low)} (or {fmt_num(high)}), not 1: check how pred "
            "uses scale, weight, bias and x, each read through p."
        )
    np, theirs = tools.np, jax.grad(nested_loss)(nested)
    paths, reference = _leaves_paths(theirs), _leaves_paths(jax.grad(_nested_loss)(want))
    unused = [path for path, ref in reference.items() if path in paths and not np.any(paths[path]) and np.any(ref)]
    for params in others:  # 0 at every case, not only where the lesson's bias 0 makes it so
        there = _leaves_paths(jax.grad(nested_loss)({"layer": params, "scale": tools.jnp.array(1.0)}))
        unused = [path for path in unused if path in there and not np.any(there[path])]
    if unused:
        reads, them = ", ".join(f"p{path}" for path in unused), "it" if len(unused) == 1 else "them"
        return (
            f"nested_loss does not depend on {reads} (its gradient is 0 at every point tried): the loss does "
            f"not use {them}, or reads {them} from outside (params?) instead of through its argument p. JAX "
            'differentiates only what the loss computes from p: read every leaf through p, as p["layer"]["weight"].'
        )
    if g is not None and not _same_tree(g, theirs):
        return "g is not the gradient of your nested_loss at nested: g = jax.grad(nested_loss)(nested)."
    return None


def _leaves_paths(tree) -> dict[str, Any]:
    tree_util = tools.jax.tree_util
    return {tree_util.keystr(path): leaf for path, leaf in tree_util.tree_leaves_with_path(tree)}


EXERCISE = graded_exercise(
    "nested_scale_grad",
    "Extend to a nested model",
    'The gradient tree g of nested_loss at {"layer": params, "scale": 1.0}.',
    "tree",
    grade,
    lesson="Pytrees and structured parameters",
    answer_name="g",
    points=2,
    unit="leaves",
    cases=lesson_cases(right_at, _near),
)
