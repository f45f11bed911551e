"""Evidence from the exercise cell: a value answer is run again at other lesson parameters, in a
copy of the notebook's namespace (`CheckContext.rerun`), and must follow them."""

from __future__ import annotations

import ast
import copy
import dataclasses
from collections.abc import Callable
from typing import Any

from ... import lesson
from ...exercises import CheckContext, Exercise, Outcome, cell_python, describe_failure, run_guarded, tools
from .common import _same_tree, _same_tree_guarded, lesson_point

RERUNS = 2  # other parameter points per check
RERUN_BUDGET = 10.0


def variant_changes(namespace: dict, loaded: set[str], point: dict, lesson_trees: dict) -> dict:
    """What a rerun changes in the notebook's namespace: the lesson's trees replaced by the other
    point's, under their names and under any other name that holds them (grads_apart = grads);
    a container that holds leaves of them (broken = {"weight": grads["weight"]}) holds the other
    point's leaves there; containers the cell names are deep-copied, so a rerun cannot change
    the student's data (`loaded`: the names the cell's code uses)."""
    changes = {}
    swapped: dict[str, Any] = {}  # name -> the other point's tree, for names holding a lesson tree
    for name in loaded | set(lesson_trees):
        value = namespace.get(name)
        if not isinstance(value, dict):
            continue
        swapped[name] = next((point[k] for k, tree in lesson_trees.items() if _same_tree_guarded(value, tree)), None)
    # the notebook's own leaf objects of those trees, by identity, and the other point's leaf
    by_leaf = {
        id(leaf): other[key]
        for name, other in swapped.items()
        if other is not None
        for key, leaf in namespace[name].items()
        if key in other
    }
    for name in loaded:
        if name not in namespace or name in point:
            continue
        value = namespace[name]
        if swapped.get(name) is not None:
            changes[name] = swapped[name]
        elif isinstance(value, (dict, list, set)):
            if isinstance(value, dict) and by_leaf:
                value = {k: by_leaf.get(id(v), v) for k, v in value.items()}
            run = run_guarded(copy.deepcopy, value, budget=2.0)
            if run.ok:
                changes[name] = run.value
    return {**changes, **point}


def other_point(rng, lesson_expected: dict[str, list[Any]], expected: Callable[[dict], dict[str, list[Any]]]) -> dict:
    """Parameters away from the lesson's, on a grid of halves: the residual w·x + b − 3 is then a
    multiple of 1/2, so every gradient and the squared norm are whole numbers, held exactly in
    float32 (an answer rounded with int() or round() is as right there as at the lesson's point).
    No answer there may equal the lesson's, nor may the gradient be 0."""
    jnp, np = tools.jnp, tools.np
    for _ in range(100):
        weight, bias = rng.integers(-6, 7, size=2) / 2, rng.integers(-6, 7) / 2
        params = {"weight": jnp.asarray(weight.astype(np.float32)), "bias": jnp.asarray(np.float32(bias))}
        point = lesson_point(params)
        if not any(np.asarray(g).any() for g in tools.jax.tree.leaves(point["grads"])):
            continue
        if not any(
            _same_tree(theirs, ours)
            for name, answers in expected(point).items()
            for theirs in answers
            for ours in lesson_expected[name]
        ):
            return point
    raise RuntimeError("no parameter point away from the lesson's was found")  # pragma: no cover


def follows_the_lesson(
    ex: Exercise,
    outcome: Outcome,
    answer,
    context: CheckContext,
    changes: str,
    move: str,
    expected: Callable[[dict], dict[str, Any]],
) -> Outcome:
    """`outcome`, unless a rerun of the exercise cell at other lesson parameters (`changes`: the
    names that change) shows an answer name not following them; `expected(point)` gives each
    answer name's right values at a point (any of them is right), `move` says how to compute it."""
    problems = _rerun_problems(ex, answer, context, changes, move, expected)
    if not problems:
        return outcome
    if "," not in ex.answer_name:
        return dataclasses.replace(outcome, passed=False, score=0.0, passed_cases=0, lines=[*problems.values()])
    lines, passed_cases = list(outcome.lines), outcome.passed_cases
    for name, problem in problems.items():
        for i, line in enumerate(lines):
            if line.startswith(f"{name}: Correct"):
                lines[i] = problem
                passed_cases -= 1
    right = max(passed_cases, 0)
    if lines and lines[0].endswith("values right."):
        lines[0] = f"{right} of 2 values right."
    total = max(outcome.total_cases, 1)
    return dataclasses.replace(outcome, passed=False, score=right / total, lines=lines, passed_cases=right)


def _rerun_problems(ex: Exercise, answer, context: CheckContext, changes, move, expected) -> dict[str, str]:
    """name -> what the reruns showed about it, for the answer names the cell assigns."""
    code = cell_python(context.cell)
    if context.cell is None or context.cell.namespace is None or code is None:
        return {}
    try:
        used = [n for n in ast.walk(ast.parse(code)) if isinstance(n, ast.Name)]
    except SyntaxError:
        return {}
    loaded, assigned = {n.id for n in used}, {n.id for n in used if isinstance(n.ctx, ast.Store)}
    every = ex.answer_names
    answers = answer if isinstance(answer, dict) and len(every) > 1 else {every[0]: answer}
    names = [n for n in every if n in assigned]
    if not names:
        return {}
    lesson_trees = lesson_point(lesson.lesson_params())
    trees = {k: lesson_trees[k] for k in ("params", "grads", "updated")}
    lesson_expected = expected(lesson_trees)
    problems: dict[str, str] = {}
    for _ in range(RERUNS):
        point = other_point(context.rng, lesson_expected, expected)
        rerun = context.rerun(variant_changes(context.cell.names(), loaded, point, trees), budget=RERUN_BUDGET)
        if rerun is None:
            break
        run, ns = rerun
        if not run.ok:
            why = (describe_failure(run, what="it", budget=RERUN_BUDGET, hidden=True) or "").removeprefix("it ")
            for name in names:
                problems.setdefault(
                    name,
                    (
                        f"{name}: your cell, run again with other values in {changes} (to see that the answer is "
                        f"computed from them), {why.rstrip('.')}. Compute the answer from {changes}, not from the "
                        "lesson's numbers."
                    ),
                )
            break
        want = expected(point)
        for name in names:
            if name in problems:
                continue
            got = ns.get(name)
            if any(_same_tree_guarded(got, right) for right in want[name]):
                continue
            if _same_tree_guarded(got, answers.get(name)):
                changing = f"{changes} change" if " and " in changes else f"`{changes}` changes"
                problems[name] = f"{name}: this value does not change when {changing}: {move}."
            else:
                problems[name] = (
                    f"{name}: right for the lesson's {changes}, but not when {changes} hold other "
                    f"values: {move}, without numbers of the lesson written in."
                )
    return problems
