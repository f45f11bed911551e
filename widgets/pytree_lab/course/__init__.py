"""The pytree course on top of the library: its exercises (graders, hints, hidden-case sizes,
reference solutions), its predictions and its quiz.

Importing it in a notebook registers `%%exercise <id>` (exercise cells run guarded; see
`pytree_lab.exercises.cells`) and binds the checker's jax / numpy functions, so a later
monkeypatch in the notebook cannot change a verdict.
"""

from __future__ import annotations

from typing import Any, Callable

from ..exercises import CheckButton, CheckResult, Evidence, _grading, cells, default_evidence
from ..exercises import record_output as record_output
from ..exercises import save_evidence as save_evidence
from ..exercises._guard import describe_failure, run_guarded, watch_modules
from . import catalogue as _catalogue
from .catalogue import EXERCISES as EXERCISES
from .catalogue import check as check
from .catalogue import exercise as exercise
from .prompts import PREDICTIONS as PREDICTIONS
from .prompts import QUIZ as QUIZ
from .prompts import grad_structure_quiz as grad_structure_quiz
from .prompts import lesson_prediction as lesson_prediction
from .prompts import quiz as quiz

__all__ = ["EXERCISES", "PREDICTIONS", "QUIZ", "check", "check_button", "check_cell", "exercise",
           "grad_structure_quiz", "lesson_prediction", "quiz", "record_output", "save_evidence",
           "try_function"]


# The in-notebook checks are formative; a course that grades uses nbgrader (`pytree-lab nbgrader`).
PRACTICE = "Practice check: feedback for you while you work; it does not count toward a grade."


def _names(exercise_id: str) -> tuple[str, ...]:
    return tuple(n.strip() for n in exercise(exercise_id).answer_name.split(",") if n.strip())


def check_button(exercise_id: str, get_answer: Callable[[], Any] | str | None = None, *,
                 evidence: Evidence | None = None, rng=None) -> CheckButton:
    """The check widget of one exercise; by default it reads the exercise's answer names."""
    ex = exercise(exercise_id)
    (evidence or default_evidence()).expect([(e.id, e.title) for e in EXERCISES.values()
                                             if e.lesson == ex.lesson])
    return CheckButton(ex, get_answer if get_answer is not None else ex.answer_name,
                       checker=check, evidence=evidence, rng=rng)


def check_cell(exercise_id: str, *, evidence: Evidence | None = None, rng=None) -> CheckButton:
    """What a notebook's check cell does: check the current answer now (printing the verdict, so
    a saved or exported notebook shows it) and return the button for later re-checks."""
    button = check_button(exercise_id, evidence=evidence, rng=rng)
    result = button.check()
    print(PRACTICE)
    print(button.announcement)
    print(button.feedback)
    if result is not None and result.passed:
        try:
            answer = button._answer()
        except Exception:  # noqa: BLE001 - the answer was readable a moment ago
            answer = None
        if answer is not None:
            (evidence or default_evidence()).add_output(f"{exercise(exercise_id).title}: my answer", answer)
    return button


def try_function(fn: Any, *args: Any, label: str = "your function", budget: float = 10.0) -> Any:
    """Call a student's function on a worked example, guarded; None (and a sentence) if it failed."""
    if fn is None or fn is Ellipsis or not callable(fn):
        print(f"Not answered yet: {label} is not a function yet.")
        return None
    run = run_guarded(fn, *args, budget=budget)
    if run.output:
        print(run.output, end="" if run.output.endswith("\n") else "\n")
    if not run.ok:
        print(describe_failure(run, what=label.capitalize(), budget=budget) + " The kernel is fine.")
        return None
    if run.value is None:
        print(f"Not answered yet: {label} returns nothing so far (no `return`?).")
    return run.value


def load_ipython_extension(shell) -> None:  # `%load_ext pytree_lab.course`
    cells.register_magic(shell, known=exercise, answer_names={k: _names(k) for k in EXERCISES})


# Bind the checker's tools now and guard the checker's own functions against replacement.
try:
    _grading.bind_tools()
except ImportError:  # no numpy/jax yet: bound at the first check
    pass
watch_modules(_grading, _catalogue)
cells.register_magic(known=exercise, answer_names={k: _names(k) for k in EXERCISES})
