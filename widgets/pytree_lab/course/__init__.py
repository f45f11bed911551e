"""The pytree course on top of the library: its exercises (graders, hints, hidden-case sizes,
reference solutions), its predictions and its quiz.

Importing it binds the checker's jax / numpy functions, so a later monkeypatch in the notebook
cannot change a verdict, and registers nothing in IPython: a course notebook's setup cell calls
`setup()` (or runs `%load_ext pytree_lab.course`), which registers `%%exercise <id>` (exercise
cells run guarded; see `pytree_lab.exercises.cells`) and the hook that notes each cell's run.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

from ..exercises import (
    CheckButton,
    Evidence,
    as_number_array,
    bind_tools,
    default_evidence,
    describe_failure,
    fmt_shape,
    is_unanswered,
    last_run,
    record_output,
    register_magic,
    run_guarded,
    save_evidence as _save_evidence,
    type_name,
)
from .catalogue import EXERCISES, check, exercise
from .exercises import common
from .prompts import PREDICTIONS, QUIZ, grad_structure_quiz, lesson_prediction, quiz

__all__ = [
    "EXERCISES",
    "PREDICTIONS",
    "QUIZ",
    "check",
    "check_button",
    "check_cell",
    "exercise",
    "grad_structure_quiz",
    "keep_evidence",
    "lesson_prediction",
    "quiz",
    "record_output",
    "save_evidence",
    "setup",
    "try_function",
]

# The in-notebook checks are formative; a course that grades uses nbgrader (`pytree-lab nbgrader`).
PRACTICE = "Practice check: feedback for you while you work; it does not count toward a grade."


def check_button(
    exercise_id: str, get_answer: Callable[[], Any] | str | None = None, *, evidence: Evidence | None = None, rng=None
) -> CheckButton:
    """The check widget of one exercise; by default it reads the exercise's answer names."""
    ex = exercise(exercise_id)
    button = CheckButton(ex, get_answer if get_answer is not None else ex.answer_name, evidence=evidence, rng=rng)
    button.evidence.expect([(e.id, e.title) for e in EXERCISES.values() if e.lesson == ex.lesson])
    return button


def check_cell(exercise_id: str, *, evidence: Evidence | None = None, rng=None) -> CheckButton:
    """What a notebook's check cell does: check the current answer now and return the check's
    card. The card is the one place for the verdict: each later click re-checks and updates it,
    and its text form (what a saved or exported notebook shows without widgets) follows it."""
    button = check_button(exercise_id, evidence=evidence, rng=rng)
    result = button.check()
    print(PRACTICE)  # a note about the check, not its verdict: that is on the card, kept current
    if result is not None and result.passed:
        answer = None
        with contextlib.suppress(Exception):  # the answer was readable a moment ago
            answer = button.read_answer()
        if answer is not None:
            button.evidence.add_output(f"{exercise(exercise_id).title}: my answer", answer)
    return button


def _sentence(text: str) -> str:
    """`text` ending in exactly one full stop (an error message may bring its own)."""
    text = text.rstrip()
    return text if text.endswith((".", "!", "?", "…")) else text + "."


def _not_one_array(value: Any, label: str, shape: tuple[int, ...]) -> str | None:
    """One sentence when `value` is not one array of `shape`, else None."""
    want = f"one array of shape {fmt_shape(shape)}"
    if isinstance(value, tuple) and len(value) == 2:
        first = as_number_array(value[0])
        if first is not None and first.size == 1:
            return (
                f"{label} returned a pair (a number, then an array), as jax.value_and_grad does: "
                f"return only the gradient, {want}."
            )
    if isinstance(value, (tuple, list, dict)):
        return f"{label} returned {type_name(value)}; this cell needs {want}, with nothing around it."
    arr = as_number_array(value)
    if arr is None:
        return f"{label} returned {type_name(value)}; this cell needs {want}."
    if tuple(arr.shape) != tuple(shape):
        return f"{label} returned an array of shape {fmt_shape(arr.shape)}; this cell needs {want}."
    return None


def try_function(
    fn: Any,
    *args: Any,
    label: str = "your function",
    budget: float = 10.0,
    exercise_id: str | None = None,
    shape: tuple[int, ...] | None = None,
) -> Any:
    """Call a student's function on a worked example, guarded; None (and one sentence) if it
    failed, if the exercise cell's last run failed (the function left over is an earlier one),
    or if it did not return one array of `shape` (by default, for a function exercise: the shape
    of its first argument)."""
    exercise_id = exercise_id or next((k for k, ex in EXERCISES.items() if label in ex.answer_names), None)
    if exercise_id is not None:
        last = last_run(exercise_id)
        if last is not None and last.error_text:
            print(
                f"The last run of the exercise cell failed ({_sentence(last.error_text)[:-1]}), so "
                f"{label} is still the one from an earlier run: this cell does not use it. Fix the "
                "exercise cell, run it again, then run this cell."
            )
            return None
    if fn is None or fn is Ellipsis or not callable(fn) or is_unanswered(fn):
        print(f"Not answered yet: {label} is not written yet (replace the `...` in the exercise cell).")
        return None
    run = run_guarded(fn, *args, budget=budget, once_stuck=True)
    if run.output:
        print(run.output, end="" if run.output.endswith("\n") else "\n")
    if not run.ok:
        what = label if label.isidentifier() else label[:1].upper() + label[1:]
        print(_sentence(describe_failure(run, what=what, budget=budget) or "") + " The kernel is fine.")
        return None
    if run.value is None:
        print(f"Not answered yet: {label} returns nothing so far (no `return`?).")
        return None
    if shape is None and exercise_id is not None and exercise(exercise_id).answer_kind == "function" and args:
        shape = getattr(args[0], "shape", None)
    if shape is not None:
        problem = _not_one_array(run.value, label, tuple(shape))
        if problem:
            print(problem)
            return None
    return run.value


def keep_evidence(path, *, evidence: Evidence | None = None) -> None:
    """From now on, merge each check, prediction, quiz answer and key output into `path`
    (Markdown, and JSON beside it) as it happens, as `save_evidence(path)` would: a kernel
    restart then loses none of them. In a notebook's kernel the course keeps the evidence in
    `pytree-lab-evidence.md` until a lesson names its own file."""
    default_evidence(evidence).autosave = path


def save_evidence(path=None, *, evidence: Evidence | None = None):
    """Save the evidence recorded in this kernel (merged into the file when it exists) and say
    what the file now holds. Run alone in a kernel where nothing was recorded yet (after a
    restart, say), it explains what to run first and writes nothing."""
    log = default_evidence(evidence)
    if not len(log) and not log.expected:
        print(
            "Nothing has been recorded in this kernel yet (after a kernel restart the record starts "
            "empty). Run the notebook from the top first (Run → Run All Cells), or at least its first "
            "cell and the cells whose results you want to keep, then run this cell again. A file saved "
            "earlier is kept as it is."
        )
        return None
    saved = _save_evidence(path, evidence=log)
    print(saved.summary())
    return saved


def setup(shell=None) -> bool:
    """Register `%%exercise <id>` and the post-run hook in this IPython kernel (again: no change);
    False outside IPython. In a kernel, each check, prediction, quiz answer and key output is then
    merged into the evidence file as it happens (`pytree-lab-evidence.md` until a lesson names its
    own with `keep_evidence`): a kernel restart loses none of them."""
    names = {k: ex.answer_names for k, ex in EXERCISES.items()}
    registered = register_magic(shell, known=exercise, answer_names=names, explain=common.cell_hint)
    if registered and default_evidence().autosave is None:
        default_evidence().autosave = "pytree-lab-evidence.md"
    return registered


load_ipython_extension = setup  # `%load_ext pytree_lab.course`

# Bind the checker's tools now and guard the checker's own functions against replacement.
with contextlib.suppress(ImportError):  # no numpy/jax yet: bound at the first check
    bind_tools()
