"""The one place user code runs: a loss, an answer, a custom pytree node, an exercise cell.

It defends against mistakes (docs/checks.md has the table): an endless loop, any exception
(`BaseException` included: `sys.exit()`, `raise SystemExit`, IPython's `exit()` / `quit()` /
`%exit`), deep recursion, huge output. Each ends in a `Guarded` the caller says in one sentence,
and the kernel keeps every variable. It does not defend against code that sets out to defeat it
(`os._exit`, patching numpy or the checker, swallowing every stop, fork bombs): that fools only its
author. Grades come from nbgrader's sandbox (`course/autograde.py`), which defends against all.

One rule: the seconds spent while the user's own code is the innermost Python frame (a loss's
endless loop): its CPU time, or a quarter of the clock's where that is more (code that waits:
`time.sleep`, `input`). Library frames (JAX tracing, XLA compiling, wherever the library is
installed) never count. Two drivers: on the main thread of CPython, a SIGALRM interval timer looks every
`TICK`; elsewhere (Pyodide, a kernel subshell's thread) a line tracer looks at each line of the
user's code, where the caller allows one (`traced`). Nothing stops one long call into compiled
code: the budget ends when it returns.

On the way out everything it changed is given back (the recursion limit, the timer and its
handler, the trace and profile functions, sys.stdout / sys.stderr), and a stop never lands after
it returned: the budget is over before its timer stops, and a late tick does nothing. A kernel
interrupt (`KeyboardInterrupt`, the Stop button) is never swallowed: `run` raises it again once
everything is given back, so it ends the cell that is running.

This package is the only owner of `sys.settrace`, `signal.setitimer` and `signal.signal` in the
library (tests/test_layout_budgets.py holds it).
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib.metadata
import io
import os
import signal
import site
import sys
import sysconfig
import threading
import time
import weakref
from collections.abc import Callable, Iterator
from types import FrameType
from typing import Any

__all__ = [
    "DEFAULT_BUDGET",
    "Budget",
    "Guarded",
    "TimeBudgetExceeded",
    "interrupted",
    "ipython_shell",
    "is_user_frame",
    "run",
    "time_budget",
]

TICK = 0.05  # seconds between the driver's looks
WAIT_FACTOR = 4.0  # seconds of the clock that count as one of CPU time, for code that waits
DEFAULT_BUDGET = 10.0  # seconds of the user's own code per call
OUTPUT_LIMIT = 4000  # characters of printed output kept per call
_cpu, _clock = time.process_time, time.monotonic  # bound at import: a replaced time fools only itself


class TimeBudgetExceeded(BaseException):
    """Raised inside user code that ran past its time budget (a BaseException: a plain
    `except Exception:` in the user's code does not swallow it)."""


# --------------------------------------------------------------------------- whose code


def is_user_frame(frame: FrameType) -> bool:
    """True for a frame of the user's code: a notebook cell, a script, a module of the user's own
    (next to the notebook, or anywhere that holds no installed package); False for the standard
    library and installed packages, wherever they came from."""
    name = frame.f_code.co_filename
    library = _FILES.get(name)
    if library is None:
        library = _FILES[name] = _library_file(name)
    return not library


_FILES: dict[str, bool] = {}  # a code's file name -> library code
_ROOTS: list = [None, ()]  # the sys.path the library's folders were found for, and those folders


def _library_file(name: str) -> bool:
    if name.startswith(("<frozen", "<string>")):
        return True
    if os.sep not in name:  # "<exercise ...>", "<ipython-input-...>": the user's cell
        return False
    if _ROOTS[0] != sys.path:
        _ROOTS[:] = [list(sys.path), _library_roots()]
    return _real(name).startswith(_ROOTS[1])


def _real(path: str) -> str:
    return os.path.normcase(os.path.realpath(path))


def _library_roots() -> tuple[str, ...]:
    """Where installed code lives: the standard library and site folders, every installed
    distribution's folder, the user site, PYTHONPATH entries that hold a package, pytree_lab
    itself (an editable install too); never the notebook's own folder (the working directory)."""
    roots = {sysconfig.get_paths().get(k) for k in ("stdlib", "platstdlib", "purelib", "platlib")}
    roots |= {os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))}
    roots |= {site.getusersitepackages() if site.ENABLE_USER_SITE is not False else None}
    with contextlib.suppress(Exception):  # a broken metadata folder: the rest still count
        roots |= {str(dist.locate_file("")) for dist in importlib.metadata.distributions()}
    for entry in filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep)):
        with contextlib.suppress(OSError), os.scandir(entry) as entries:
            if any(e.is_dir() and os.path.exists(os.path.join(e.path, "__init__.py")) for e in entries):
                roots.add(entry)  # a folder that holds a package
    notebook = _real(os.getcwd())
    found = {_real(root) for root in roots if root}
    return tuple(root.rstrip(os.sep) + os.sep for root in found if root != notebook)


# A finalizer or GC callback between here and the user's code: an exception raised there would be
# printed and dropped ("Exception ignored in ..."), so no stop is raised in it
_CLEANUP = frozenset({"__del__", "_xla_gc_callback", "_remove_dead_weakref", "_remove"})


# --------------------------------------------------------------------------- the rule and its drivers


@dataclasses.dataclass(eq=False)
class Budget:
    """One running budget: `seconds` while the user's own frame is innermost (None: no limit,
    only counted); `own`, what that code has used so far."""

    seconds: float | None
    own: float = 0.0
    fired: bool = False
    running: bool = True
    last: float = dataclasses.field(default_factory=_cpu)
    last_clock: float = dataclasses.field(default_factory=_clock)
    user: bool = False  # the innermost frame at the last look was the user's
    thread: int = dataclasses.field(default_factory=threading.get_ident)

    def look(self, frame: FrameType | None, user: bool | None = None) -> bool:
        """Counts the time since the last look as the user's when their frame was innermost then
        (CPU time, or a quarter of the clock's); True when the code must stop now (and not in a
        finalizer)."""
        now, clock = _cpu(), _clock()
        if self.user:
            self.own += max(now - self.last, (clock - self.last_clock) / WAIT_FACTOR)
        self.last, self.last_clock = now, clock
        self.user = user if user is not None else frame is not None and is_user_frame(frame)
        if self.seconds is not None and self.own >= self.seconds:
            self.fired = True
        return self.fired and self.running and (frame is None or frame.f_code.co_name not in _CLEANUP)


_RUNNING: list[Budget] = []  # budgets running on any thread, outermost first


def _looks(frame: FrameType | None, user: bool | None = None) -> bool:
    """Every budget running on this thread looks (none is skipped); True: one must stop now."""
    me, stop = threading.get_ident(), False
    for budget in _RUNNING:
        if budget.thread == me and budget.running:
            stop = budget.look(frame, user) or stop
    return stop


def _on_alarm(signum: int, frame: FrameType | None) -> None:
    if _looks(frame):
        raise TimeBudgetExceeded()


def _traced_call(frame: FrameType, event: str, arg: Any) -> Any:
    """The tracer's global function, called as each frame starts: the time so far belongs to the
    frame that called; library frames report only their return."""
    user = is_user_frame(frame)
    if _looks(frame.f_back, user):
        raise TimeBudgetExceeded()
    if not user:
        frame.f_trace_lines = False
    return _traced_local


def _traced_local(frame: FrameType, event: str, arg: Any) -> Any:
    if event == "line" or event == "return":
        back = frame if event == "line" else frame.f_back
        user = back is not None and is_user_frame(back)
        if _looks(frame, user) and event == "line":
            raise TimeBudgetExceeded()
    return _traced_local


def _signals() -> bool:
    """A SIGALRM timer can drive a budget here: CPython's main thread (not Pyodide)."""
    on_main = threading.current_thread() is threading.main_thread()
    return on_main and sys.platform != "emscripten" and hasattr(signal, "setitimer")


@contextlib.contextmanager
def time_budget(seconds: float | None, *, traced: bool = True) -> Iterator[Budget]:
    """Bounds the block: `seconds` of the user's own frames (None: no limit), IPython's exit()
    refused meanwhile (it would end the kernel after the cell). Without a main-thread signal a
    line tracer drives it, where `traced` allows (the explorer's step does not: a tracer would
    slow the Lite engine's pure-Python step several times over)."""
    budget = Budget(seconds)
    shell = ipython_shell()
    had_exit = shell is not None and "ask_exit" in vars(shell)
    if shell is not None:
        shell.ask_exit = _refused_exit  # IPython's exit() would end the kernel after the cell
    try:
        with _timed(budget, traced):
            yield budget
    finally:
        if shell is not None and not had_exit:
            with contextlib.suppress(AttributeError, RecursionError):
                del shell.ask_exit


@contextlib.contextmanager
def _timed(budget: Budget, traced: bool) -> Iterator[None]:
    """The budget's driver, from its start to its end."""
    if budget.seconds is None:
        yield
        return
    signals = _signals()
    before = (signal.getsignal(signal.SIGALRM), signal.getitimer(signal.ITIMER_REAL)) if signals else None
    trace = sys.gettrace()
    _RUNNING.append(budget)
    try:
        if before is not None:
            signal.signal(signal.SIGALRM, _on_alarm)
            signal.setitimer(signal.ITIMER_REAL, TICK, TICK)
        elif traced:
            sys.settrace(_traced_call)
        yield
    finally:
        budget.running = False  # first: a tick that comes late does nothing
        if budget in _RUNNING:
            _RUNNING.remove(budget)
        try:
            if before is not None:
                if any(b.thread == budget.thread for b in _RUNNING):  # an outer budget goes on ticking
                    signal.setitimer(signal.ITIMER_REAL, TICK, TICK)
                else:
                    signal.setitimer(signal.ITIMER_REAL, *before[1])  # the timer first, then its handler
                    signal.signal(signal.SIGALRM, before[0])
            elif traced:
                sys.settrace(trace)
        except RecursionError:  # no C depth left (a C extension kept it): the inert handler stays
            pass


# --------------------------------------------------------------------------- a guarded call


@dataclasses.dataclass
class Guarded:
    """What a guarded call did: its value, or its error (never a KeyboardInterrupt: that is
    raised again), whether it ran past its budget, what it printed."""

    value: Any = None
    error: BaseException | None = None
    timed_out: bool = False
    output: str = ""
    output_truncated: int = 0  # characters dropped
    skipped: bool = False  # not called: the same function ran past its budget before

    @property
    def ok(self) -> bool:
        return self.error is None and not self.timed_out


@dataclasses.dataclass
class _Kept:
    """What a call printed: the parts kept (`OUTPUT_LIMIT` characters at most), how many dropped."""

    parts: list[str] = dataclasses.field(default_factory=list)
    size: int = 0
    dropped: int = 0


class _Output(io.TextIOBase):
    """sys.stdout / sys.stderr while a call runs: what the calling thread writes is kept (up to
    `OUTPUT_LIMIT`); other threads (the kernel's main thread beside a check on a subshell's
    thread) write on where they did."""

    def __init__(self, original: Any, kept: _Kept) -> None:
        self.original, self.kept, self.thread = original, kept, threading.get_ident()

    def writable(self) -> bool:
        return True

    def write(self, text: Any) -> int:
        text = str(text)
        if threading.get_ident() != self.thread:
            return self.original.write(text)
        room = max(OUTPUT_LIMIT - self.kept.size, 0)
        self.kept.parts.append(text[:room])
        self.kept.size += min(len(text), room)
        self.kept.dropped += max(len(text) - room, 0)
        return len(text)


def interrupted(err: BaseException) -> bool:
    """A kernel interrupt: a KeyboardInterrupt, or one that JAX turned into its runtime error
    (the Stop button while a loss's callback ran)."""
    if isinstance(err, KeyboardInterrupt):
        return True
    return "RuntimeError" in type(err).__name__ and str(err).rstrip().endswith("KeyboardInterrupt")


def ipython_shell() -> Any:
    """The running IPython shell, or None."""
    ipython = sys.modules.get("IPython")
    return ipython.get_ipython() if ipython is not None else None


def _refused_exit(*args: Any, **kwargs: Any) -> None:
    raise SystemExit("exit()")


_TIMERS = [
    (getattr(signal, t), getattr(signal, n)) for t, n in (("ITIMER_PROF", "SIGPROF"), ("ITIMER_VIRTUAL", "SIGVTALRM"))
]


@contextlib.contextmanager
def _given_back() -> Iterator[None]:
    """Everything user code may change of the interpreter's state, put back on the way out: the
    recursion limit, the trace and profile functions, stdout and stderr, the profiling timers and
    their handlers (SIGALRM's is the budget's own); an error a finalizer of the code raises
    meanwhile is the code's, never printed."""
    limit, trace, profile, out, err = sys.getrecursionlimit(), sys.gettrace(), sys.getprofile(), sys.stdout, sys.stderr
    hook, sys.unraisablehook = sys.unraisablehook, lambda _: None
    main = _signals()
    timers = [(t, n, signal.getitimer(t), signal.getsignal(n)) for t, n in _TIMERS] if main else []
    try:
        yield
    finally:
        sys.stdout, sys.stderr, sys.unraisablehook = out, err, hook  # first: no call needed
        try:  # each a call into C: where a C extension kept the C depth (CPython 3.12+), none can run
            sys.setrecursionlimit(limit)
            if sys.gettrace() is not trace:
                sys.settrace(trace)
            if sys.getprofile() is not profile:  # (cProfile's, under %prun, cannot be set back: kept)
                sys.setprofile(profile if callable(profile) else None)
            for timer, name, left, handler in timers:
                signal.setitimer(timer, *left)
                signal.signal(name, handler)
        except RecursionError:
            pass


def _through(levels: int, fn: Callable[..., Any], args: tuple, kwargs: dict) -> Any:
    """`fn` called `levels` frames further down. A C extension that raises RecursionError may keep
    the levels it took (JAX's flatten of a tree that contains itself, with a Python callback):
    they come from below these, so the guard keeps `levels` to give everything back with. (The
    kept levels themselves are lost to the kernel until it restarts: only CPython's internals
    could give them back.)"""
    return fn(*args, **kwargs) if levels <= 0 else _through(levels - 1, fn, args, kwargs)


# Functions that ran past their budget: one that looped once is not waited for again (a grader
# calls it in several cases); running its cell again makes a new function, called as usual.
_STUCK: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def run(
    fn: Callable[..., Any],
    *args: Any,
    budget: float | None = DEFAULT_BUDGET,
    once_stuck: bool = False,
    **kwargs: Any,
) -> Guarded:
    """Call `fn(*args, **kwargs)` as user code: returns a `Guarded`, never raises (but a kernel
    interrupt), runs at most `budget` seconds of the user's own code, keeps `OUTPUT_LIMIT`
    characters of what it printed. With `once_stuck`, a function that ran past its budget in an
    earlier call is not called again (`skipped`, `timed_out`)."""
    if once_stuck:
        with contextlib.suppress(TypeError):  # not weak-referenceable: never marked
            if fn in _STUCK:
                return Guarded(timed_out=True, skipped=True)
    result, kept = Guarded(), _Kept()
    interrupt: KeyboardInterrupt | None = None
    try:
        with _given_back():
            sys.stdout, sys.stderr = _Output(sys.stdout, kept), _Output(sys.stderr, kept)
            with time_budget(budget):
                result.value = _through(32, fn, args, kwargs)
    except TimeBudgetExceeded:
        result.timed_out = True
    except KeyboardInterrupt as exc:
        interrupt = exc
    except BaseException as exc:  # noqa: BLE001 - user code may raise anything
        result.error = exc
        if interrupted(exc):
            interrupt = KeyboardInterrupt()
        exc.__traceback__ = None  # it holds the user's frames (and whatever they reference)
    result.output, result.output_truncated = "".join(kept.parts), kept.dropped
    if interrupt is not None:
        raise interrupt
    if once_stuck and result.timed_out:
        with contextlib.suppress(TypeError):
            _STUCK[fn] = True
    return result
