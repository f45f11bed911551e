"""A time budget for the user's own Python code inside a step (a loss, a prediction function,
a custom node), that never stops JAX's own work.

A loss with an endless `while` loop is traced by `jax.jit` in the kernel's main thread and would
hang the kernel. `user_code_budget(seconds)` arms an interval timer that looks at the Python
stack every 0.25 s and counts two times: the user's own Python (the innermost frame is the
user's code) and library work called from it (a user frame is further down: JAX tracing each
operation a loss over 100k leaves asks for). It raises `TimeBudgetExceeded` when the own time
passes `seconds` (an endless loop), or when the time with the user's code on the stack passes
`SLOW_FACTOR` times that (slow, not a loop: the `BudgetClock` it yields says which, so the
message can say what is slow). XLA compiling a big model (no user frame on the stack, the
handler runs when the compile returns) is never cut short, however long it takes.

"User code" is code from outside the installed packages and the standard library: a notebook
cell, a script, a module of the user's own.

Off the main thread (JupyterLab hands widget messages to a kernel subshell, a thread of its own,
so a slider's step runs there) signals cannot reach the code: a watchdog thread looks at that
thread's stack instead, and raises `TimeBudgetExceeded` in it asynchronously (at its next Python
instruction) under the same rule. Where neither works (Pyodide has no interval timers and no
threads), or while another interval timer is armed on the main thread (an exercise check's own
budget), the budget is off and the call runs as before.

Whatever the body does, the interpreter is given back as it was: recursion limit and usable
depth, interval timers and their handlers, the trace function (`_interpreter.InterpreterState`).
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import sys
import sysconfig
import threading
from types import FrameType

from ._interpreter import InterpreterState, TimeBudgetExceeded

__all__ = ["TimeBudgetExceeded", "user_code_budget", "is_user_frame", "BudgetClock", "SLOW_FACTOR"]

TICK = 0.25  # seconds between looks at the stack
# Time spent in library code called from the user's code (JAX tracing each operation of a loss
# written over 100k leaves) is not the user's loop: it counts only up to this many budgets.
SLOW_FACTOR = 4.0


class BudgetClock:
    """What a budget saw, sampled every `TICK`: `own` seconds with the user's own Python running
    (the innermost frame), `inside` seconds with the user's code anywhere on the stack (library
    code called from it included), and why it fired: "own" (the user's own Python ran past the
    budget: an endless loop) or "slow" (library work called from the user's code ran past
    `SLOW_FACTOR` budgets: a slow trace, not a loop), None while it has not."""

    __slots__ = ("seconds", "own", "inside", "reason")

    def __init__(self, seconds: float):
        self.seconds = seconds
        self.own = 0.0
        self.inside = 0.0
        self.reason: str | None = None

    def tick(self, frame: FrameType | None, outside: set[int]) -> bool:
        """One look at the stack; True when the budget is spent and the user's code is running
        (never inside a finalizer or a garbage-collection callback, where Python would print the
        exception and drop it: the next tick tries again)."""
        if frame is None or _in_cleanup(frame, outside):
            return False
        if not _user_code_running(frame, outside):
            return False
        self.inside += TICK
        if id(frame) not in outside and is_user_frame(frame):
            self.own += TICK
        if self.own >= self.seconds:
            self.reason = "own"
        elif self.inside >= self.seconds * SLOW_FACTOR:
            self.reason = "slow"
        return self.reason is not None


_LIBRARY_ROOTS = tuple(
    os.path.normcase(os.path.realpath(p)) + os.sep
    for p in {sysconfig.get_paths().get(k) for k in ("stdlib", "platstdlib", "purelib", "platlib")}
    | {os.path.dirname(os.path.dirname(os.path.abspath(__file__)))}  # pytree_lab itself (editable too)
    if p
)


def is_user_frame(frame: FrameType) -> bool:
    """True for a frame of the user's code (not an installed package, not the standard library)."""
    name = frame.f_code.co_filename
    if name.startswith(("<frozen", "<string>")):
        return False
    path = os.path.normcase(os.path.realpath(name)) if os.sep in name else name
    return not path.startswith(_LIBRARY_ROOTS)


def _user_code_running(frame: FrameType | None, outside: set[int]) -> bool:
    """A user frame between the running frame and the frames that were already on the stack when
    the budget began (the notebook cell that built the explorer is the user's code too, but it is
    only waiting for the step: it must not count)."""
    while frame is not None and id(frame) not in outside:
        if is_user_frame(frame):
            return True
        frame = frame.f_back
    return False


def _in_cleanup(frame: FrameType | None, outside: set[int]) -> bool:
    """A `__del__`, a weakref finalizer or a GC callback runs between here and the user's code:
    an exception raised there is printed and dropped ("Exception ignored in ...")."""
    while frame is not None and id(frame) not in outside:
        code = frame.f_code
        if code.co_name in _CLEANUP_NAMES or (code.co_name == "__call__" and code.co_filename.endswith("weakref.py")):
            return True
        if is_user_frame(frame):
            return False
        frame = frame.f_back
    return False


_CLEANUP_NAMES = frozenset({"__del__", "_xla_gc_callback", "_remove_dead_weakref", "_remove"})


def _stack_ids() -> set[int]:
    ids: set[int] = set()
    frame: FrameType | None = sys._getframe(1)
    while frame is not None:
        ids.add(id(frame))
        frame = frame.f_back
    return ids


def _available() -> bool:
    return (
        hasattr(signal, "setitimer")
        and threading.current_thread() is threading.main_thread()
        and signal.getitimer(signal.ITIMER_REAL)[0] == 0
    )


def _watchdog_available() -> bool:
    return (
        threading.current_thread() is not threading.main_thread()
        and hasattr(ctypes, "pythonapi")
        and hasattr(sys, "_current_frames")
    )


def _raise_in(thread_id: int, exc: type[BaseException]) -> None:
    # Never called with NULL to take a pending exception back: on CPython 3.11 that leaves the
    # interpreter's "async exception pending" flag set for good, after which every thread's
    # interpreter loop checks for pending work at each backward jump and a line tracer
    # (`sys.settrace`, the exercises' budget in Pyodide and off the main thread) never runs again
    # (a RESUME with a trace function set spins). A pending exception is delivered instead (below).
    ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(thread_id), ctypes.py_object(exc))


def _take_delivery() -> None:
    """Let an exception set by `_raise_in` for this thread land here, now: the interpreter
    delivers it at the first backward jump of this loop."""
    try:
        for _ in range(10_000):
            pass
    except TimeBudgetExceeded:
        pass


@contextlib.contextmanager
def _watched(seconds: float):
    """The budget for a thread other than the main one: a watchdog thread."""
    target = threading.get_ident()
    outside = _stack_ids()
    lock = threading.Lock()
    stop = threading.Event()
    state = {"active": True, "fired": False}
    clock = BudgetClock(seconds)

    def watch() -> None:
        while True:
            if stop.wait(TICK):
                return
            with lock:
                if not state["active"]:
                    return
                frame = sys._current_frames().get(target)
                if clock.tick(frame, outside):
                    _raise_in(target, TimeBudgetExceeded)
                    state["fired"] = True
                    return
                del frame

    threading.Thread(target=watch, name="pytree-lab time budget", daemon=True).start()
    delivered = False
    try:
        yield clock
    except TimeBudgetExceeded:
        delivered = True
        raise
    finally:
        while True:  # the exception can land in the cleanup: finish it whatever happens
            try:
                with lock:
                    state["active"] = False
                    stop.set()
                if state["fired"] and not delivered:  # set, maybe not delivered: not after the body
                    _take_delivery()
                break
            except TimeBudgetExceeded:
                delivered = True
                continue


@contextlib.contextmanager
def user_code_budget(seconds: float | None):
    """Stop the user's code in the body once its own Python has run `seconds` (sampled every
    `TICK`), or once library work called from it has run `SLOW_FACTOR` times that (None or 0: no
    budget). Yields the `BudgetClock`: after a stop, `clock.reason` says which. Whatever happens
    in the body, the interpreter's recursion limit and depth, interval timers, their signals'
    handlers and the trace function are given back as they were."""
    interpreter = InterpreterState.capture()
    try:
        with _user_code_budget(seconds) as clock:
            yield clock
    finally:
        interpreter.restore()


@contextlib.contextmanager
def _user_code_budget(seconds: float | None):
    clock = BudgetClock(seconds or 0.0)
    if not seconds or seconds <= 0:
        yield clock
        return
    if not _available():
        if _watchdog_available():
            with _watched(seconds) as clock:
                yield clock
        else:
            yield clock
        return
    state = {"active": True}
    outside = _stack_ids()  # these frames stay alive (on the stack) while the body runs

    def on_alarm(signum, frame):
        if state["active"] and clock.tick(frame, outside):
            raise TimeBudgetExceeded()

    previous = signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, TICK, TICK)
    try:
        yield clock
    finally:
        while True:  # a tick can land in the cleanup: finish it whatever happens
            try:
                state["active"] = False
                signal.setitimer(signal.ITIMER_REAL, 0)
                signal.signal(signal.SIGALRM, previous)
                break
            except TimeBudgetExceeded:
                continue
