"""A student's code, run by `pytree_lab.guard` (the one place user code runs), said in words a
student can act on: `run_guarded(fn, *args)` always returns a `Guarded` (the value, or what went
wrong: an exception of any kind, `sys.exit()` or IPython's `exit()`, a loop past its budget),
and `describe_failure` / `notes_for` say it in one sentence. docs/checks.md says what a practice
check defends against (mistakes) and what it leaves to nbgrader's sandbox (everything else)."""

from __future__ import annotations

import re

from ..formatting import clip
from ..guard import DEFAULT_BUDGET, OUTPUT_LIMIT, Guarded, TimeBudgetExceeded, run as run_guarded

__all__ = [
    "DEFAULT_BUDGET",
    "OUTPUT_LIMIT",
    "Guarded",
    "TimeBudgetExceeded",
    "describe_failure",
    "exception_text",
    "notes_for",
    "run_guarded",
]


def exception_text(exc: BaseException, *, hidden: bool = False, limit: int = 160) -> str:
    """`TypeError: first line of the message`, short. For a hidden case, decimal numbers are
    blanked out: an error message may quote the hidden inputs."""
    try:
        text = str(exc).strip()
    except BaseException:  # noqa: BLE001 - a student's exception class with a broken __str__
        text = ""
    message = text.splitlines()[0] if text else ""
    if hidden:
        message = re.sub(r"[-+]?(?:\d+\.\d*|\.\d+|\d+[eE][-+]?\d+)(?:[eE][-+]?\d+)?", "…", message)
    message = clip(message, limit)
    name = type(exc).__name__
    return f"{name}: {message}" if message else name


def describe_failure(
    run: Guarded, *, what: str = "your code", budget: float | None = None, hidden: bool = False
) -> str | None:
    """One kind sentence for a failed run, or None when it ran fine."""
    if run.timed_out:
        limit = f" {budget:g} s of computing" if budget else " its time budget"
        if run.skipped:
            return (
                f"{what} was not run again: in an earlier call it was still running after{limit} "
                "and was stopped. Look for a loop that never ends, fix it and run its cell again."
            )
        return (
            f"{what} was still running after{limit} and was stopped: look for a loop that never "
            "ends (a `while` whose condition never changes)."
        )
    exc = run.error
    if exc is None:
        return None
    # a cell has no `return`: it ends, and its answer is what it assigned
    fix = (
        "let the cell run to its end and assign your answer instead"
        if what.lower().startswith("your cell")
        else "return the answer instead"
    )
    if isinstance(exc, SystemExit):
        return (
            f"{what} called sys.exit() (or exit()/quit()). In a notebook that would stop the "
            f"check, so it was caught: {fix}."
        )
    if isinstance(exc, RecursionError):
        # a tree that contains itself or nests very deeply does this too: no "recursion" advice
        # to a student who may have written none
        return (
            f"{what} went deeper than Python allows (RecursionError: maximum recursion depth). "
            "A function that calls itself needs a case where it stops; a tree that contains itself, "
            "or is nested thousands of levels deep, does this too."
        )
    if isinstance(exc, MemoryError):
        return f"{what} ran out of memory (MemoryError). Is an array far larger than the inputs?"
    return f"{what} raised {exception_text(exc, hidden=hidden)}"


def notes_for(run: Guarded) -> list[str]:
    """Side notes about a run that did finish: dropped output."""
    if run.output_truncated:
        return [f"Your code printed a lot: {run.output_truncated} characters of output were dropped."]
    return []
