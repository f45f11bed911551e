"""The course's exercises: one catalogue line per exercise module (`course/exercises/<id>.py`).

Every expected value is computed when a check runs, with `jax.grad` of a reference loss (real
JAX; the Lite engine in a JupyterLite kernel) from the lesson model in `pytree_lab.lesson`:
nothing here is a typed-in answer. Only `common.self_check` holds the lesson's hand-derived
numbers, to catch a kernel whose jax / numpy was replaced under the checker.

Function answers run on the task's worked example plus hidden cases whose values are drawn,
one case at a time and only after the previous case was graded, from a generator seeded by the
operating system; feedback may describe a hidden case's size (N examples, d features) but never
its inputs or its expected output. Each case runs guarded (`exercises.run_guarded`).
"""

from __future__ import annotations

import ast
import dataclasses
from typing import Any

from .. import lesson as lesson  # the lesson model the graders use (catalogue.lesson)
from ..exercises import (
    CheckResult,
    Evidence,
    Exercise,
    bind_tools,
    default_evidence,
    grade_answer,
    is_unanswered,
    seal_mapping,
)
from ._cell_evidence import _with_cell_evidence
from .exercises import grad_over_flat_params, nested_scale_grad, repair_update, squared_norm
from .exercises.common import jax_hint

__all__ = ["EXERCISES", "check", "exercise"]

EXERCISES: dict[str, Exercise] = {
    module.EXERCISE.id: module.EXERCISE
    for module in (squared_norm, nested_scale_grad, repair_update, grad_over_flat_params)
}


seal_mapping("the exercise catalogue", EXERCISES)  # an entry replaced later is put back


def exercise(exercise_id: str) -> Exercise:
    if exercise_id not in EXERCISES:
        raise ValueError(f"unknown exercise {exercise_id!r}; the exercises are: {', '.join(EXERCISES)}")
    return EXERCISES[exercise_id]


def check(
    exercise_id: str,
    answer: Any = None,
    *,
    rng=None,
    evidence: Evidence | None = None,
    stale: str | None = None,
    code: str | None = None,
    cell=None,
    **named: Any,
) -> CheckResult:
    """Grade `answer` for the exercise `exercise_id` and record the result as evidence.

    Never raises for a wrong, broken or hostile answer: the result says what happened.
    `check("squared_norm", norm_squared, manual=manual)` grades both values of "Make it yours".
    `rng` (a numpy Generator) draws the hidden cases of function exercises; by default a fresh one
    seeded by the operating system per check.
    """
    ex = exercise(exercise_id)
    if named:
        answer = {**({ex.answer_name.split(",")[0].strip(): answer} if answer is not None else {}), **named}
    bind_tools()
    result = grade_answer(ex, answer, rng=rng, stale=stale)
    if stale is None and cell is not None and not is_unanswered(answer) and ex.answer_kind != "function":
        result = _with_cell_evidence(ex, result, answer, cell, rng)
    said = _said_plainly(ex, result, stale, cell)
    if said is not None:
        result = dataclasses.replace(result, feedback=said)
    if stale is not None or not is_unanswered(answer) or said is not None:  # a cell that raised: with its error
        log = evidence if evidence is not None else default_evidence()
        log.add_check(ex, result, answer, code=code, error=stale or "")
    return result


def _said_plainly(ex: Exercise, result: CheckResult, stale: str | None, cell) -> str | None:
    """The feedback with what the cell shows said plainly, or None when there is nothing to add:
    JAX's error explained (the function named when it returned None), and an answer name the cell
    set to None (`norm_squared = print(...)`) told so, not "replace the `...`"."""
    code = getattr(cell, "code", "") or ""
    if stale is not None:
        hint = jax_hint(stale).strip()
        try:
            defined = [n.name for n in ast.walk(ast.parse(code.split("\n", 1)[-1])) if isinstance(n, ast.FunctionDef)]
        except SyntaxError:
            defined = []
        if hint.startswith("The function returns None") and len(defined) == 1:
            hint = hint.replace("The function", defined[0], 1)
        return f"{result.feedback}\n{hint}" if hint else None
    namespace = getattr(cell, "namespace", None) or {}
    names = [n.strip() for n in ex.answer_name.split(",") if n.strip()]
    held = [n for n in names if n in namespace and namespace[n] is None]
    if not held or ex.answer_kind == "function":
        return None
    lines = result.feedback.splitlines()
    for name in held:
        why = (
            "print() shows a value but returns None"
            if "print(" in code
            else "the expression assigned to it gives nothing (a function without `return` returns None)"
        )
        sentence = f"{name} is None: {why}. Assign the value itself: {name} = <the expression>."
        lines = [
            sentence if line.startswith(("Not answered yet", f"{name}: not answered yet")) else line for line in lines
        ]
    return "\n".join(lines)
