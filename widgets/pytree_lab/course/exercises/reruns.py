"""Evidence from the exercise cell: a value answer is run again at other lesson parameters, in a
copy of the notebook's namespace (`CheckContext.rerun`), and must follow them."""

from __future__ import annotations

import ast
import copy
import dataclasses
from collections.abc import Callable, Iterator
from typing import Any

from ... import lesson
from ...exercises import Case, CheckContext, Exercise, Outcome, cell_python, describe_failure, run_guarded, tools
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


def lesson_cases(right_at: Callable[[dict], dict[str, list]], derived: Callable[[dict], dict] | None = None):
    """A value exercise's cases (`Exercise.cases`): the lesson's parameters, then `RERUNS` other
    points drawn from `rng` (`other_point`). Each sets the lesson's trees and loss value (and what
    `derived(point)` adds: repair_update's `broken`); `right_at(point)` is what is right there."""

    def cases(rng) -> Iterator[Case]:
        first = lesson_point(lesson.lesson_params())
        points = [first] + [other_point(rng, right_at(first), right_at) for _ in range(RERUNS)]
        for index, point in enumerate(points):
            names = {k: point[k] for k in ("params", "grads", "value", "updated")} | (derived or dict)(point)
            label = f"hidden case {index} (other lesson parameters)" if index else "the lesson's values"
            yield Case(label, right_at(point), names=names)

    return cases


def rerun_at(context: CheckContext, case: Case, lesson_case: Case, budget: float = RERUN_BUDGET):
    """The exercise cell run again at `case` (`CheckContext.rerun`: (the run, its namespace), or
    None): the case's names set, and any other name the cell reads that holds a lesson tree (or
    leaves of one) given the case's. The practice check and nbgrader's grader both rerun this way."""
    code = cell_python(context.cell)
    if context.cell is None or context.cell.namespace is None or code is None:
        return None
    try:
        loaded = {n.id for n in ast.walk(ast.parse(code)) if isinstance(n, ast.Name)}
    except SyntaxError:
        return None
    trees = {k: v for k, v in lesson_case.names.items() if isinstance(v, dict)}
    changes = variant_changes(context.cell.names(), loaded, case.names, trees)
    return context.rerun(changes, budget=budget)


def follows_the_lesson(
    ex: Exercise, outcome: Outcome, answer, context: CheckContext, changes: str, move: str
) -> Outcome:
    """`outcome`, unless a rerun of the exercise cell at the exercise's hidden cases (`changes`:
    the names that change) shows an answer name not following them (`move` says how to compute it)."""
    problems = _rerun_problems(ex, answer, context, changes, move)
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


def _rerun_problems(ex: Exercise, answer, context: CheckContext, changes, move) -> dict[str, str]:
    """name -> what the reruns showed about it, for the answer names the cell assigns."""
    code = cell_python(context.cell)
    if ex.cases is None or context.cell is None or code is None:
        return {}
    try:
        assigned = {n.id for n in ast.walk(ast.parse(code)) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    except SyntaxError:
        return {}
    every = ex.answer_names
    answers = answer if isinstance(answer, dict) and len(every) > 1 else {every[0]: answer}
    names = [n for n in every if n in assigned]
    if not names:
        return {}
    cases = ex.cases(context.rng)
    lesson_case = next(cases)
    problems: dict[str, str] = {}
    for case in cases:
        rerun = rerun_at(context, case, lesson_case)
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
        for name in names:
            if name in problems:
                continue
            got = ns.get(name)
            if any(_same_tree_guarded(got, right) for right in case.right[name]):
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
