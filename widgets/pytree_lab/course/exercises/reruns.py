"""Evidence from the exercise cell: a value answer is run again at other lesson parameters, in a
copy of the notebook's namespace (`CheckContext.rerun`), and must follow them."""

from __future__ import annotations

import dataclasses
import secrets
from collections.abc import Callable
from typing import Any

from ... import lesson
from ...exercises import CheckContext, Exercise, Outcome, cell_python, describe_failure, run_guarded, tools
from .common import _lesson_loss, _lesson_setup, _same_tree

# --------------------------------------------------------------------------- evidence from the cell
# A value answer (norm_squared, g, fixed) must be computed: the exercise cell is run again, in a
# copy of the notebook's namespace, at other lesson parameters (with their own gradients), and
# the answer must follow them.

RERUNS = 2  # other parameter points per check
RERUN_BUDGET = 10.0


def _lesson_point(params) -> dict[str, Any]:
    """The lesson's trees at a parameter point: what the notebook's names hold there."""
    jax = tools.jax
    _, x, target, lr = _lesson_setup()
    value, grads = jax.value_and_grad(_lesson_loss)(params, x, target)
    updated = jax.tree.map(lambda p, g: p - lr * g, params, grads)
    return {"params": params, "grads": grads, "value": value, "updated": updated}


def _variant_changes(namespace: dict, code: str, point: dict, lesson_trees: dict) -> dict:
    """What a rerun changes in the notebook's namespace: the lesson's trees replaced by the other
    point's, under their names and under any other name that holds them (grads_apart = grads);
    containers the cell names are deep-copied, so a rerun cannot change the student's data."""
    import ast
    import copy

    changes = {}
    try:
        loaded = {n.id for n in ast.walk(ast.parse(code)) if isinstance(n, ast.Name)}
    except SyntaxError:
        loaded = set()
    for name in loaded:
        if name not in namespace or name in point:
            continue
        value = namespace[name]
        swapped = next(
            (
                point[k]
                for k, tree in lesson_trees.items()
                if isinstance(value, dict) and run_guarded(_same_tree, value, tree, budget=2.0).value
            ),
            None,
        )
        if swapped is not None:
            changes[name] = swapped
        elif isinstance(value, (dict, list, set)):
            run = run_guarded(copy.deepcopy, value, budget=2.0)
            if run.ok:
                changes[name] = run.value
    return {**changes, **point}


def passed(outcome: Outcome) -> bool:
    return outcome.passed if outcome.passed is not None else outcome.passed_cases == outcome.total_cases


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
    answer name's right value at a point, `move` says how to compute it."""
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
    import ast

    code = cell_python(context.cell)
    if context.cell is None or context.cell.namespace is None or code is None:
        return {}
    try:
        assigned = {n.id for n in ast.walk(ast.parse(code)) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    except SyntaxError:
        return {}
    names = [n.strip() for n in ex.answer_name.split(",") if n.strip()]
    answers = answer if isinstance(answer, dict) and len(names) > 1 else {names[0]: answer}
    names = [n for n in names if n in assigned]
    if not names:
        return {}
    np, jnp = tools.np, tools.jnp
    rng = np.random.default_rng(secrets.randbits(128)) if context.rng is None else context.rng
    lesson_trees = _lesson_point(lesson.lesson_params())
    trees = {k: lesson_trees[k] for k in ("params", "grads", "updated")}
    problems: dict[str, str] = {}
    for _ in range(RERUNS):
        params = {
            "weight": jnp.asarray(rng.normal(size=2).astype(np.float32) * 1.5),
            "bias": jnp.asarray(np.float32(rng.normal() * 1.5)),
        }
        point = _lesson_point(params)
        rerun = context.rerun(_variant_changes(context.cell.namespace, code, point, trees), budget=RERUN_BUDGET)
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
            if run_guarded(_same_tree, got, want[name], budget=2.0).value:
                continue
            if run_guarded(_same_tree, got, answers.get(name), budget=2.0).value:
                changing = f"{changes} change" if " and " in changes else f"`{changes}` changes"
                problems[name] = f"{name}: this value does not change when {changing}: {move}."
            else:
                problems[name] = (
                    f"{name}: right for the lesson's {changes}, but not when {changes} hold other "
                    f"values: {move}, without numbers of the lesson written in."
                )
    return problems
