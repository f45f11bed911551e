"""What code run on the user's behalf must give back: the interpreter's state, and the exception
a time budget raises.

`InterpreterState.capture()` / `restore()` put back the recursion limit and usable depth, the
interval timers and their handlers, the trace and profile functions and sys.stdout / sys.stderr.
In between, the ways out that would end the kernel without an exception (`os._exit`, IPython's
`exit()` / `quit()` / `%exit`) raise `SystemExit` instead, and processes the code started are
ended with it (a child forked meanwhile ends at once: it would run on with the kernel's sockets).
Recursion levels a C extension took and never gave back (JAX's flatten with a Python callback,
on a tree that contains itself) are measured and given back: up to 3.11 through
`Py_LeaveRecursiveCall`; on 3.12 and 3.13 by writing the C counter in the thread's state.
`budget.py` and the guard (`exercises/_guard.py`) build on this module; it imports neither.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
import threading
import time
from typing import Any

__all__ = ["InterpreterState", "TimeBudgetExceeded", "clock", "headroom"]

clock = time.monotonic  # bound before any student's code runs (it may replace time.monotonic)
_REAL_EXIT = os._exit


class TimeBudgetExceeded(BaseException):
    """Raised inside student code that ran past its time budget (a BaseException, so a plain
    `except Exception:` in the student's code does not swallow it)."""


# --------------------------------------------------------------------------- the interpreter's state

_PROBE_CAP = 3000  # frames the depth probe goes down at most (a raised recursion limit stays cheap)
_SPARE = 200  # levels lent while the recursion counter is repaired
_SIGNALS = tuple(getattr(signal, name) for name in ("SIGALRM", "SIGPROF", "SIGVTALRM") if hasattr(signal, name))
_TIMERS = tuple(
    getattr(signal, name) for name in ("ITIMER_REAL", "ITIMER_PROF", "ITIMER_VIRTUAL") if hasattr(signal, name)
)


def _leave_recursive_call():
    """CPython's `Py_LeaveRecursiveCall`: it gives back one level of the counter C code (JAX's
    flatten) takes. Up to 3.11 Python frames use that counter too; from 3.12 on they have their
    own and it counts C recursion only (`_c_counter` reads it). None elsewhere (PyPy,
    Pyodide without ctypes' pythonapi, 3.14's counter, which is the C stack itself)."""
    if sys.implementation.name != "cpython" or not (3, 9) <= sys.version_info[:2] <= (3, 13):
        return None
    try:
        fn = ctypes.pythonapi.Py_LeaveRecursiveCall
    except (AttributeError, OSError):  # pragma: no cover - a build without it
        return None
    fn.restype, fn.argtypes = None, []
    return fn


_LEAVE = _leave_recursive_call()
_C_COUNTER = sys.version_info[:2] >= (3, 12)  # C recursion counted apart from Python frames


def _c_counter_offset() -> int | None:
    """Where CPython 3.12/3.13 keep the C recursion counter (`c_recursion_remaining`) in a
    thread's state: the int after `py_recursion_limit`, found by its value and checked twice
    (it follows `sys.setrecursionlimit`; the next int drops inside a call from C). None when it
    is not found so, or not needed (before 3.12: Python frames share the counter `_LEAVE` mends)."""
    if not _C_COUNTER or _LEAVE is None:
        return None
    get = ctypes.pythonapi.PyThreadState_Get
    get.restype, get.argtypes = ctypes.c_void_p, []
    base = get()
    limit = sys.getrecursionlimit()
    try:
        for offset in range(0, 256, 4):
            field = ctypes.c_int.from_address(base + offset)
            if field.value != limit:
                continue
            sys.setrecursionlimit(limit + 7)
            follows = field.value == limit + 7
            sys.setrecursionlimit(limit)
            counter = ctypes.c_int.from_address(base + offset + 4)
            if follows and 0 < counter.value - _inner(counter) <= 16:
                return offset + 4
    finally:
        sys.setrecursionlimit(limit)
    return None


def _inner(counter: ctypes.c_int) -> int:
    seen: list[int] = []

    def key(_: int) -> int:  # a Python function called from C: one level deeper in C
        seen.append(counter.value)
        return 0

    sorted([0], key=key)
    return seen[0]


_C_OFFSET = _c_counter_offset()


def _c_counter() -> ctypes.c_int | None:
    """This thread's C recursion counter (3.12, 3.13), or None."""
    if _C_OFFSET is None:
        return None
    get = ctypes.pythonapi.PyThreadState_Get
    return ctypes.c_int.from_address(get() + _C_OFFSET)


def headroom(cap: int) -> int:
    """How many more Python calls fit below the caller's frame (at most `cap`)."""
    box = [0]

    def down(i):
        box[0] = i
        if i < cap:
            down(i + 1)

    try:
        down(1)
    except RecursionError:
        pass
    return box[0]


def _set_profile(profile: Any) -> None:
    """`sys.setprofile(profile)`, or give a C-level profiler back: under cProfile (IPython's
    `%prun`) `sys.getprofile()` is the `Profile` object, which is not callable; set as a profile
    function it would fail on the next call (TypeError), so it is enabled again instead."""
    if profile is None or callable(profile):
        sys.setprofile(profile)
    elif callable(getattr(profile, "enable", None)):
        profile.enable()
    else:
        sys.setprofile(None)


def _untraced_headroom(trace, profile) -> int:
    # a trace or profile function takes frames of its own at each call: probe without them
    if trace is not None:
        sys.settrace(None)
    if profile is not None:
        sys.setprofile(None)
    try:
        return headroom(_PROBE_CAP)
    finally:
        if trace is not None:
            sys.settrace(trace)
        if profile is not None:
            _set_profile(profile)


class InterpreterState:
    """What a student's code (or a C extension it drives) can leave broken in the interpreter,
    taken now; `restore()` puts it all back, whatever happened in between. Call `capture()` and
    `restore()` from the same function (the usable recursion depth is compared at that level)."""

    thread: int
    main: bool
    limit: int
    trace: Any
    profile: Any
    streams: tuple[Any, Any]
    unraisable: Any  # sys.unraisablehook: until restore() a finalizer's error is the code's, not printed
    signals: dict[Any, Any]
    timers: dict[int, tuple[float, float]]
    start: float
    headroom: int
    c_counter: ctypes.c_int | None
    c_before: int
    children: set[int]
    ended: int  # processes the code started, ended by `restore()`

    @classmethod
    def capture(cls) -> InterpreterState:
        state = cls()
        state.thread = threading.get_ident()
        state.main = threading.current_thread() is threading.main_thread()
        state.limit = sys.getrecursionlimit()
        state.trace, state.profile = sys.gettrace(), sys.getprofile()
        state.streams = (sys.stdout, sys.stderr)
        state.unraisable, sys.unraisablehook = sys.unraisablehook, lambda _: None
        state.signals = {sig: signal.getsignal(sig) for sig in _SIGNALS} if state.main else {}
        state.timers = {which: signal.getitimer(which) for which in _TIMERS} if state.main else {}
        state.start = clock()
        state.headroom = _untraced_headroom(state.trace, state.profile)
        state.c_counter = _c_counter()
        state.c_before = state.c_counter.value if state.c_counter is not None else 0
        state.children, state.ended = _descendants(), 0
        _refuse_exits(state)
        return state

    def restore(self) -> tuple[str, ...]:
        """Put everything back; returns what had been changed (for the notes), never raises."""
        changed: list[str] = []
        for _ in range(20):  # a late alarm (TimeBudgetExceeded) or ^C can land in here: start over
            try:
                changed = self._restore()
                break
            except BaseException:  # noqa: BLE001 - the cleanup must finish
                continue
        return tuple(dict.fromkeys(changed))

    def _restore(self) -> list[str]:
        changed = []
        # first, with builtins only: no tracer, and levels lent while the lost ones are found
        sys.settrace(None)
        sys.setprofile(None)
        sys.setrecursionlimit(self.limit + _SPARE)
        lost = self._repair_depth()
        sys.setrecursionlimit(self.limit)
        if lost:
            changed.append("the recursion depth")
        if self.main:
            for which in _TIMERS:
                signal.setitimer(which, 0)
            for sig, handler in self.signals.items():
                if signal.getsignal(sig) is not handler and handler is not None:
                    signal.signal(sig, handler)
            elapsed = clock() - self.start
            for which, (remaining, interval) in self.timers.items():
                if remaining > 0:  # someone else's timer: give back what is left of it
                    signal.setitimer(which, max(remaining - elapsed, 0.001), interval)
        if (sys.stdout, sys.stderr) != self.streams:  # a redirect whose exit could not run
            sys.stdout, sys.stderr = self.streams
        started = _descendants() - self.children
        if started:
            self.ended = len(started)
            _end(started)
            changed.append("processes it started")
        _allow_exits(self)
        sys.settrace(self.trace)
        _set_profile(self.profile)
        sys.unraisablehook = self.unraisable  # last: a gc callback of JAX's fails near a lost depth
        return changed

    def _repair_depth(self) -> int:
        """Give back recursion levels a C extension took and never returned (called from
        `_restore`, one frame below where `capture` measured). Returns how many."""
        if threading.get_ident() != self.thread:
            return 0
        if _C_COUNTER:  # the counter itself, read and written as memory (no call: none is left to make)
            lost = self.c_before - self.c_counter.value if self.c_counter is not None else 0
            if lost > 0:
                self.c_counter.value = self.c_before  # type: ignore[union-attr]
            return max(lost, 0)
        expected = min(self.headroom, _PROBE_CAP) + _SPARE
        now = headroom(expected) + 1  # measured one frame deeper than capture's
        lost = expected - now
        if lost <= 0 or _LEAVE is None or (self.headroom >= _PROBE_CAP and now >= _PROBE_CAP):
            return 0
        for _ in range(lost):
            _LEAVE()
        return lost


# ------------------------------------------------------------------------------ the ways out refused

_EXITS_LOCK = threading.Lock()  # the explorer's step can run on a subshell thread while a cell runs
_HOLDERS: set[int] = set()  # the ids of the states captured and not yet restored: exits refused
_DOORS: dict[str, Any] = {}  # what the refusers replaced


def _exit_refused(door: str):
    def refuse(*args: Any, **kwargs: Any) -> None:
        exc = SystemExit(f"{door} would end the kernel")
        exc.door = door  # type: ignore[attr-defined]  # the guard names it (`describe_failure`)
        raise exc

    return refuse


def ipython_shell() -> Any:
    ipython = sys.modules.get("IPython")
    get = getattr(ipython, "get_ipython", None)
    return get() if callable(get) else None


def _refuse_exits(state: InterpreterState) -> None:
    """While any captured state is not yet restored, `os._exit` and the IPython shell's
    `ask_exit` (what `exit()`, `quit()` and `%exit` call) raise SystemExit. Process-wide and
    counted by holder, so nested and concurrent runs give the originals back once, at the end."""
    with _EXITS_LOCK:
        first = not _HOLDERS
        _HOLDERS.add(id(state))
        if not first:
            return
        _DOORS.clear()
        _DOORS["os._exit"] = os._exit
        refuse = _exit_refused("os._exit()")
        for module in _exit_homes():
            module._exit = refuse
        shell = ipython_shell()
        if shell is not None and hasattr(shell, "ask_exit"):
            _DOORS["shell"] = shell
            _DOORS["ask_exit"] = vars(shell).get("ask_exit", _ABSENT)
            shell.ask_exit = _exit_refused("exit() (or quit())")


_ABSENT = object()


def _exit_homes() -> list[Any]:
    """`os` and the module os._exit comes from."""
    return [module for module in (os, sys.modules.get("posix"), sys.modules.get("nt")) if module is not None]


def _allow_exits(state: InterpreterState) -> None:
    """Give the ways out back when the last holder is restored (safe to call again)."""
    with _EXITS_LOCK:
        _HOLDERS.discard(id(state))
        if _HOLDERS or not _DOORS:
            return
        real = _DOORS.pop("os._exit")
        for module in _exit_homes():
            module._exit = real
        shell, before = _DOORS.pop("shell", None), _DOORS.pop("ask_exit", _ABSENT)
        if shell is not None:
            if before is _ABSENT:
                vars(shell).pop("ask_exit", None)
            else:
                shell.ask_exit = before


# --------------------------------------------------------------------- processes the code started


def _descendants() -> set[int]:
    """This process's children and theirs (Linux's /proc). Here only threads that run Python are read
    (an accelerator runtime's hundreds cost ms a guard); a child whose Python thread ended may be missed."""
    me, found = os.getpid(), set[int]()
    mine = dict.fromkeys([str(me), *(str(t.native_id) for t in threading.enumerate() if getattr(t, "native_id", 0))])
    todo = [me]
    while todo:
        pid = todo.pop()
        try:
            tasks = mine if pid == me else os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue
        for task in tasks:
            try:
                with open(f"/proc/{pid}/task/{task}/children", encoding="ascii") as file:
                    kids = {int(kid) for kid in file.read().split()}
            except (OSError, ValueError):
                continue
            todo.extend(kids - found)
            found |= kids
    return found


def _end(pids: set[int]) -> None:
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    deadline = clock() + 2.0
    waiting = set(pids)
    while waiting and clock() < deadline:  # reap our own children (grandchildren go to init)
        for pid in tuple(waiting):
            try:
                done, _ = os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                done = pid
            if done:
                waiting.discard(pid)
        if waiting:
            time.sleep(0.01)


def _forked_while_guarded() -> None:
    if _HOLDERS:  # a child of code run guarded: nothing it could do here is the student's to keep
        _REAL_EXIT(0)


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forked_while_guarded)
