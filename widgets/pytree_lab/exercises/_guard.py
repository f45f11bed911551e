"""Running a student's code without letting it take the kernel down.

`run_guarded(fn, *args)` calls `fn` and always returns a `Guarded`: the value, or what went wrong
in words a student can act on. It catches BaseException (`sys.exit()`, `KeyboardInterrupt`,
`GeneratorExit` raised by hand; `os._exit()` and IPython's `exit()` raise SystemExit meanwhile),
bounds the call in time, keeps at most a few thousand characters of what the code printed, ends
the processes it started (reported), and reports when the code replaced a function of jax /
jax.numpy / numpy / time or of the checker itself (and puts the original back, so later checks
are not poisoned).

The time budget is `pytree_lab.budget`'s deadline rule: `budget` seconds of CPU time, or
WALL_FACTOR times as long on the clock. Nothing stops one long call into compiled code (one huge
XLA computation): the budget ends when it returns. Whatever the code does, the interpreter is
given back as it was (`pytree_lab.interpreter.InterpreterState`: the recursion limit and the
levels a C extension took, the timers and their handlers, the trace functions, sys.stdout).
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import re
import sys
import types
import weakref
from collections.abc import Callable
from typing import Any

from ..budget import WALL_FACTOR, deadline_budget
from ..formatting import clip
from ..interpreter import InterpreterState, TimeBudgetExceeded

DEFAULT_BUDGET = 10.0  # seconds per call of student code
OUTPUT_LIMIT = 4000  # characters of printed output kept per call


@dataclasses.dataclass
class Guarded:
    value: Any = None
    error: BaseException | None = None
    timed_out: bool = False
    output: str = ""
    output_truncated: int = 0  # characters dropped
    replaced: tuple[str, ...] = ()  # "jax.grad", ... replaced during the call (and restored)
    restored: tuple[str, ...] = ()  # parts of the interpreter's state the call broke (put back)
    processes: int = 0  # processes the call started (os.fork, subprocess), ended after it
    skipped: bool = False  # not called: the same function ran past its budget before

    @property
    def ok(self) -> bool:
        return self.error is None and not self.timed_out


class _BoundedText(io.TextIOBase):
    def __init__(self, limit: int) -> None:
        self._parts: list[str] = []
        self._kept = 0
        self._limit = limit
        self.dropped = 0

    def writable(self) -> bool:
        return True

    def write(self, text) -> int:
        text = str(text)
        room = self._limit - self._kept
        if room > 0:
            self._parts.append(text[:room])
            self._kept += min(room, len(text))
        self.dropped += max(0, len(text) - max(room, 0))
        return len(text)

    def getvalue(self) -> str:
        return "".join(self._parts)


# Functions a student answer might replace ("monkeypatch") and the checker relies on.
_WATCHED = {
    "jax": ("grad", "value_and_grad", "jit", "vmap"),
    "jax.numpy": ("sum", "mean", "dot", "array", "asarray", "allclose", "square", "matmul"),
    "jax.tree": ("map", "leaves", "flatten", "unflatten", "structure"),
    "jax.tree_util": ("tree_map", "tree_leaves", "tree_flatten", "tree_unflatten", "tree_flatten_with_path", "keystr"),
    "numpy": ("asarray", "allclose", "sum", "isfinite", "array", "dot", "concatenate", "sort"),
    "builtins": ("sum", "float", "abs", "len", "isinstance", "print", "max", "min"),
    "time": ("monotonic", "process_time", "perf_counter", "time", "sleep"),  # the kernel's clocks too
}
_EXTRA_WATCHED: list[types.ModuleType] = []


def watch_modules(*modules: types.ModuleType) -> None:
    """Also guard every function defined at the top of these modules (the checker's own)."""
    for module in modules:
        if module not in _EXTRA_WATCHED:
            _EXTRA_WATCHED.append(module)


def _snapshot() -> dict[tuple[str, str], Any]:
    shot = {}
    for name, attrs in _WATCHED.items():
        module = sys.modules.get(name)
        if module is None:
            continue
        for attr in attrs:
            if hasattr(module, attr):
                shot[(name, attr)] = getattr(module, attr)
    for module in _EXTRA_WATCHED:
        for attr, value in list(vars(module).items()):
            if callable(value) and not attr.startswith("__"):
                shot[(module.__name__, attr)] = value
    return shot


def _restore(before: dict[tuple[str, str], Any]) -> tuple[str, ...]:
    changed = []
    for (name, attr), value in before.items():
        module = sys.modules.get(name)
        if module is not None and getattr(module, attr, None) is not value:
            setattr(module, attr, value)
            changed.append(f"{name}.{attr}")
    return tuple(changed)


# Student functions that ran past their budget: a function that looped once is not waited for
# again (a lesson calls it in several cells, a grader in several checks; each would cost the whole
# budget). Redefining it (running its cell again) makes a new function object, called as usual.
_STUCK: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def run_guarded(
    fn: Callable[..., Any],
    *args: Any,
    budget: float | None = DEFAULT_BUDGET,
    once_stuck: bool = False,
    **kwargs: Any,
) -> Guarded:
    """Call `fn(*args, **kwargs)` as student code: never raises, never runs past `budget` seconds
    of Python, keeps `OUTPUT_LIMIT` characters of output. With `once_stuck`, a function that ran
    past its budget in an earlier call is not called again (`skipped`, `timed_out`)."""
    if once_stuck:
        with contextlib.suppress(TypeError):  # unhashable or not weak-referenceable: never marked
            if fn in _STUCK:
                return Guarded(timed_out=True, skipped=True)
    interpreter = InterpreterState.capture()
    before = _snapshot()
    result = Guarded()
    try:
        _run(result, before, fn, args, kwargs, budget)
    except BaseException as exc:  # noqa: BLE001 - the cleanup itself failed (an interpreter left
        # without recursion depth by a C extension): what the code did is said, the state restored below
        if result.error is None and not result.timed_out:
            result.error = exc
    finally:
        result.restored = interpreter.restore()
        result.processes = interpreter.ended
        result.replaced = tuple(dict.fromkeys(result.replaced + _restore(before)))
    if once_stuck and result.timed_out:
        with contextlib.suppress(TypeError):  # not weak-referenceable (a builtin): called again next time
            _STUCK[fn] = True
    if result.error is not None:
        # the student's traceback holds their frames (and whatever they reference): drop it
        result.error.__traceback__ = None
    return result


def _run(result: Guarded, before, fn, args, kwargs, budget) -> None:
    sink = _BoundedText(OUTPUT_LIMIT)
    try:
        with contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink):
            try:
                with deadline_budget(budget):
                    try:
                        result.value = fn(*args, **kwargs)
                    except TimeBudgetExceeded:
                        result.timed_out = True
                    except BaseException as exc:  # noqa: BLE001 - student code may raise anything
                        result.error = exc
            except TimeBudgetExceeded:  # a late stop, in the handler or the budget's cleanup
                result.timed_out = True
            except BaseException as exc:  # noqa: BLE001 - the cleanup failed: what the code did is said
                if result.error is None and not result.timed_out:
                    result.error = exc
    except TimeBudgetExceeded:  # a late alarm between the student's return and the timer's stop
        result.timed_out = True
    finally:
        result.replaced = _restore(before)
        result.output = sink.getvalue()
        result.output_truncated = sink.dropped


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
        limit = (
            f" {budget:g} s of computing (or {budget * WALL_FACTOR:g} s on the clock)" if budget else " its time budget"
        )
        if run.skipped:
            return (
                f"{what} was not run again: in an earlier call it was still running after{limit} "
                "and was stopped. Look for a loop that never ends, fix it and run its cell again."
            )
        return (
            f"{what} was still running after{limit} and was stopped: look for a loop that never "
            "ends (a `while` whose condition never changes) or a long `sleep`."
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
        door = getattr(exc, "door", None)  # os._exit(), IPython's exit(): refused by `InterpreterState`
        if door:
            return f"{what} called {door}, which would end the kernel, so it was caught: {fix}."
        return (
            f"{what} called sys.exit() (or exit()/quit()). In a notebook that would stop the "
            f"check, so it was caught: {fix}."
        )
    if isinstance(exc, KeyboardInterrupt):
        return (
            f"{what} was interrupted (KeyboardInterrupt: the toolbar's stop button, or a `raise "
            f"KeyboardInterrupt` in the code); the kernel is fine. A loop that never ends needs a way out; "
            f"otherwise {fix}."
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
    """Side notes about a run that did finish: replaced functions, dropped output."""
    notes = []
    if run.replaced:
        notes.append(
            "Your code replaced " + ", ".join(run.replaced) + "; the original was put back so "
            "that later checks compute with the real functions."
        )
    if run.processes:
        notes.append(
            f"Your code started {run.processes} process{'es' if run.processes > 1 else ''} (os.fork or "
            f"subprocess); {'they were' if run.processes > 1 else 'it was'} ended with the call: an answer "
            "computes in the kernel's own process."
        )
    if run.output_truncated:
        notes.append(f"Your code printed a lot: {run.output_truncated} characters of output were dropped.")
    return notes
