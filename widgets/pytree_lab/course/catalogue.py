"""The course's exercises: one catalogue line per exercise module (`course/exercises/<id>.py`).

Every expected value is computed when a check runs, with `jax.grad` of a reference loss (real
JAX; the Lite engine in a JupyterLite kernel) from the lesson model in `pytree_lab.lesson`:
nothing here is a typed-in answer. Each exercise declares its cases once (`Exercise.cases`):
the practice check reruns the cell on them, and nbgrader's grader grades on them.
"""

from __future__ import annotations

from typing import Any

from .. import lesson as lesson  # the lesson model the graders use (catalogue.lesson)
from ..exercises import CheckContext, CheckResult, Evidence, Exercise, check as check_answer
from .exercises import grad_over_flat_params, nested_scale_grad, repair_update, squared_norm

__all__ = ["EXERCISES", "check", "exercise"]

MODULES = (  # one per exercise, in the course's order
    squared_norm,
    nested_scale_grad,
    repair_update,
    grad_over_flat_params,
)
EXERCISES: dict[str, Exercise] = {module.EXERCISE.id: module.EXERCISE for module in MODULES}


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
        answer = {**({ex.answer_names[0]: answer} if answer is not None else {}), **named}
    return check_answer(ex, answer, CheckContext(rng=rng, cell=cell, stale=stale, code=code, evidence=evidence))
