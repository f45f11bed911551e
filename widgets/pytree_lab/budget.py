"""Time budgets for code run on the user's behalf: the library's one mechanism, with two rules.

A loss with an endless loop traced by `jax.jit`, or an answer that never returns, would hang the
kernel. Both run inside a budget: a *rule* says when the code has had its time, and one *driver*
stops it there by raising `TimeBudgetExceeded` (a BaseException: `except Exception:` does not
swallow it).

- `user_code_budget(seconds)` (the explorer's step, `BudgetClock`): fires when the user's own
  Python (the innermost frame) has run `seconds` (an endless loop), or library work called from
  it (JAX tracing a loss over 100k leaves) `SLOW_FACTOR` times that (slow, not a loop). XLA
  compiling a big model (no user frame on the stack) is never cut short.
- `deadline_budget(seconds)` (the exercises' guard, `Deadline`): `seconds` of CPU time (a loaded
  machine does not count against the student) or `WALL_FACTOR` times as long on the clock.

User code is code from outside the installed packages and the standard library, told by where
it came from (`is_user_frame`).

Drivers: on the main thread of a CPython kernel one SIGALRM interval timer ticks every `BEAT`
(`time.sleep` is interrupted too; for the exercises a watchdog thread stands in while a student's
code has taken the timer over); on another thread (JupyterLab's kernel subshells) a watchdog
thread raises in it asynchronously; with neither (Pyodide) a `sys.settrace` line tracer, for the
rules that allow it (not the explorer's: it would slow the Lite engine's pure-Python step
several times over).

A rule that has fired fires at each look while the code runs; on the main thread, code that
still runs `SWALLOWED` seconds later catches every stop, and a line tracer then raises it again
inside each handler that caught it (`_arm`). The clocks are bound at import: code that replaces
`time.monotonic` fools only itself. Budgets nest. A frame in a finalizer or a GC callback is never
stopped (Python would drop the exception). Nothing stops one long call into compiled code, nor,
off the main thread, a `time.sleep`: the budget ends when it returns. The interpreter is given
back as it was (`interpreter.InterpreterState`).
"""

from __future__ import annotations

import contextlib
import ctypes
import dataclasses
import importlib.metadata
import os
import signal
import site
import sys
import sysconfig
import threading
import time
from collections.abc import Container, Iterator
from types import FrameType
from typing import Protocol

from .interpreter import InterpreterState, TimeBudgetExceeded, clock

__all__ = [
    "TimeBudgetExceeded",
    "user_code_budget",
    "deadline_budget",
    "is_user_frame",
    "BudgetClock",
    "Deadline",
    "SLOW_FACTOR",
    "WALL_FACTOR",
    "driver",
    "Watchdog",
]

# The budget's clocks, bound at import before any student's code runs: code that replaces `time`'s
# functions (`time.monotonic = lambda: 0.0`) does not stop the budget's time.
_cpu = time.process_time

TICK = 0.25  # seconds between the explorer's looks at the stack
BEAT = 0.05  # seconds between the driver's looks on the main thread (each rule's own interval on top)
# Time spent in library code called from the user's code (JAX tracing each operation of a loss
# written over 100k leaves) is not the user's loop: it counts only up to this many budgets.
SLOW_FACTOR = 4.0
WALL_FACTOR = 4.0  # a deadline on the clock of this many budgets stops code that waits (sleep, input)


class Rule(Protocol):
    """When the code in a budget has had its time. `interval`: seconds between looks;
    `traceable`: whether a line tracer may drive it (where nothing else can); `tamper_proof`:
    whether a watchdog stands in on the main thread when the code takes the timer over."""

    interval: float
    traceable: bool
    tamper_proof: bool

    def look(self, frame: FrameType, outside: set[int]) -> bool:
        """One look at the running frame; True: stop the code now."""
        ...


@dataclasses.dataclass(slots=True, eq=False)
class BudgetClock:
    """The explorer's rule, sampled every `TICK`: `own` seconds of the user's own Python (the
    innermost frame), `inside` seconds with the user's code anywhere on the stack, and why it
    fired: "own" (an endless loop), "slow" (library work past `SLOW_FACTOR` budgets) or None."""

    interval = TICK
    traceable = False
    tamper_proof = False  # a loss does not touch signals; a thread per slider move would cost
    seconds: float
    own: float = 0.0
    inside: float = 0.0
    reason: str | None = None

    def look(self, frame: FrameType, outside: set[int]) -> bool:
        # only a user frame between the running frame and those already on the stack when the budget
        # began counts (the notebook cell that built the explorer is the user's code too, but it is
        # only waiting for the step)
        if not any(is_user_frame(f) for f in _frames(frame, outside)):
            return False
        self.inside += TICK
        if id(frame) not in outside and is_user_frame(frame):
            self.own += TICK
        if self.own >= self.seconds:
            self.reason = "own"
        elif self.inside >= self.seconds * SLOW_FACTOR:
            self.reason = "slow"
        return self.reason is not None


@dataclasses.dataclass(slots=True, eq=False)
class Deadline:
    """The exercises' rule: `seconds` of the process's CPU time, or `WALL_FACTOR` times as long on
    the clock, from when the budget began."""

    interval = BEAT
    traceable = True
    tamper_proof = True
    seconds: float
    cpu: float = dataclasses.field(default_factory=_cpu)
    wall: float = dataclasses.field(default_factory=clock)

    def look(self, frame: FrameType, outside: set[int]) -> bool:
        return _cpu() - self.cpu >= self.seconds or clock() - self.wall >= self.seconds * WALL_FACTOR


def is_user_frame(frame: FrameType) -> bool:
    """True for a frame of the user's code: a notebook cell, a script, a module of the user's own
    (next to the notebook, or anywhere that holds no installed package); False for the standard
    library and installed packages, wherever they came from (`_library_file`)."""
    name = frame.f_code.co_filename
    library = _FILES.get(name)
    if library is None:
        library = _FILES[name] = _library_file(name)
    return not library


_FILES: dict[str, bool] = {}  # a code's file name -> library code (cheap enough to ask per sample)
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
    """Where installed code lives, by where it came from: the standard library and the site
    folders; the folder of every installed distribution (importlib.metadata: a `pip install
    --target` folder, the user site, a folder on PYTHONPATH an image installed into); the user
    site; entries of PYTHONPATH that hold a package; pytree_lab itself (also as an editable
    install). Never the notebook's own folder (the kernel's working directory)."""
    roots = {sysconfig.get_paths().get(k) for k in ("stdlib", "platstdlib", "purelib", "platlib")}
    roots |= {os.path.dirname(os.path.dirname(os.path.abspath(__file__)))}
    roots |= {site.getusersitepackages() if site.ENABLE_USER_SITE is not False else None}
    with contextlib.suppress(Exception):  # a broken metadata folder: the rest still count
        roots |= {str(dist.locate_file("")) for dist in importlib.metadata.distributions()}
    for entry in os.environ.get("PYTHONPATH", "").split(os.pathsep):
        if entry and _holds_a_package(entry):
            roots.add(entry)
    notebook = _real(os.getcwd())
    found = {_real(root) for root in roots if root}
    return tuple(root.rstrip(os.sep) + os.sep for root in found if root != notebook)


def _holds_a_package(folder: str) -> bool:
    try:
        with os.scandir(folder) as entries:
            return any(e.is_dir() and os.path.exists(os.path.join(e.path, "__init__.py")) for e in entries)
    except OSError:
        return False


def _frames(frame: FrameType | None, outside: Container[int] = ()) -> Iterator[FrameType]:
    """The frames from `frame` outwards, up to the first whose id is in `outside`."""
    while frame is not None and id(frame) not in outside:
        yield frame
        frame = frame.f_back


def _in_cleanup(frame: FrameType | None, outside: set[int]) -> bool:
    """A `__del__`, a weakref finalizer or a GC callback runs between here and the user's code:
    an exception raised there is printed and dropped ("Exception ignored in ...")."""
    for f in _frames(frame, outside):
        code = f.f_code
        if code.co_name in _CLEANUP_NAMES or (code.co_name == "__call__" and code.co_filename.endswith("weakref.py")):
            return True
        if is_user_frame(f):
            return False
    return False


_CLEANUP_NAMES = frozenset({"__del__", "_xla_gc_callback", "_remove_dead_weakref", "_remove"})


def _caller(frame: FrameType | None) -> FrameType | None:
    """The first frame outside this module and contextlib: the one that began the budget. It and
    the frames below it stay on the stack (and their ids theirs) while the body runs."""
    while frame is not None and frame.f_code.co_filename in _OWN_FILES:
        frame = frame.f_back
    return frame


_OWN_FILES = frozenset({__file__, contextlib.__file__})


@dataclasses.dataclass(slots=True, eq=False)
class _Budget:
    """One running budget: its rule, the frames that were on the stack when it began (they only
    wait for the body), when its next look is due, whether it has fired and whether its body has
    ended (set first thing on the way out: a cleanup that cannot run still leaves it inert)."""

    rule: Rule
    outside: set[int]
    begun: int  # the id of the frame that began it: the body runs while it is on the stack
    due: float  # when the next look is
    fired: bool = False
    ended: bool = False
    first_stop: float | None = None  # when the rule first fired
    armed: bool = False  # stops are swallowed: a tracer raises them again in the handlers (`_arm`)

    def over(self, frame: FrameType | None) -> bool:
        """The body has ended, its cleanup run or not: ended, or the frame that began the budget is
        no longer on the stack (a body that left no recursion depth keeps the cleanup from running)."""
        return self.ended or all(id(f) != self.begun for f in _frames(frame))

    def spent(self, frame: FrameType | None, now: float) -> bool:
        """Look at `frame` if a look is due: True when the code must stop now."""
        if self.ended or now < self.due:
            return False
        self.due = now + self.rule.interval
        if frame is None or _in_cleanup(frame, self.outside) or not self.rule.look(frame, self.outside):
            return False
        self.fired = True
        return True


# ------------------------------------------------------------------------------------------ drivers


def driver(rule: Rule | None = None) -> str | None:
    """Which driver runs a budget begun here: "itimer", "watchdog", "tracer", or None (no budget:
    nothing can stop code here, or only a tracer and `rule` does not allow one)."""
    on_main = threading.current_thread() is threading.main_thread()
    if on_main and sys.platform != "emscripten" and hasattr(signal, "setitimer"):
        return "itimer"
    if not on_main and hasattr(ctypes, "pythonapi") and hasattr(sys, "_current_frames"):
        return "watchdog"
    return "tracer" if rule is None or rule.traceable else None


_ON_MAIN: list[_Budget] = []  # the budgets running on the main thread, outermost first
_MAIN_BEFORE: list = []  # what the first of them found: SIGALRM's handler, ITIMER_REAL, the time


SWALLOWED = 0.5  # seconds of stops the code caught and went on: then its handlers raise them again


def _on_alarm(signum, frame):
    now = clock()
    for budget in tuple(_ON_MAIN):
        if budget.over(frame):
            _ON_MAIN.remove(budget)
        elif budget.spent(frame, now):
            if budget.first_stop is None:
                budget.first_stop = now
            elif now - budget.first_stop >= SWALLOWED:
                _arm(budget, frame)
            raise TimeBudgetExceeded()


def _arm(budget: _Budget, frame: FrameType | None) -> None:
    """The code catches every stop (`except BaseException: pass` in a loop). From now on a line
    tracer raises the stop again at each line of the user's code that handles it, where the `try`
    that caught it cannot catch it again: it leaves each `try` in turn until the body ends. Python
    removes a tracer that raises; a profile function (called as frames return) puts it back, so
    a function that swallows the stop around a call of another one is left too."""

    def ask(code_frame, event, arg):
        if budget.ended or id(code_frame) in budget.outside or not is_user_frame(code_frame):
            return None  # library code is not traced line by line
        if event == "line" and isinstance(sys.exc_info()[1], TimeBudgetExceeded):
            raise TimeBudgetExceeded()
        return ask

    def put_back(code_frame, event, arg):
        if budget.ended or sys.gettrace() is ask:
            return
        sys.settrace(ask)
        for f in _frames(code_frame, budget.outside):
            f.f_trace = ask

    budget.armed = True
    put_back(frame, "", None)
    sys.setprofile(put_back)


def _finish(cleanup) -> None:
    """Run a driver's cleanup to its end: a late look can raise in it; start it over."""
    while True:
        try:
            cleanup()
            return
        except TimeBudgetExceeded:
            continue


@contextlib.contextmanager
def _by_itimer(budget: _Budget) -> Iterator[None]:
    def start() -> None:
        # a budget whose cleanup could not run (its body left no recursion depth to run it; its
        # caller then gave the interpreter's state back) is dropped here
        here = sys._getframe()
        _ON_MAIN[:] = [b for b in _ON_MAIN if not b.over(here)]
        if _ON_MAIN and signal.getsignal(signal.SIGALRM) is not _on_alarm:
            _ON_MAIN.clear()  # and so are those whose handler is gone
        if not _ON_MAIN:
            handler = signal.signal(signal.SIGALRM, _on_alarm)
            if handler is _on_alarm:  # left by such a budget: nothing of anyone else's to give back
                handler = signal.SIG_DFL
                signal.setitimer(signal.ITIMER_REAL, 0)
            _MAIN_BEFORE[:] = [handler, signal.setitimer(signal.ITIMER_REAL, BEAT, BEAT), clock()]
        elif signal.getitimer(signal.ITIMER_REAL)[0] == 0:  # the body of an outer one stopped the timer
            signal.setitimer(signal.ITIMER_REAL, BEAT, BEAT)
        _ON_MAIN.append(budget)

    def stop() -> None:
        if budget in _ON_MAIN:
            _ON_MAIN.remove(budget)
        if not _ON_MAIN and _MAIN_BEFORE:
            signal.setitimer(signal.ITIMER_REAL, 0)
            handler, (remaining, interval), began = _MAIN_BEFORE
            signal.signal(signal.SIGALRM, handler)
            if remaining > 0:  # someone else's timer: give back what is left of it
                signal.setitimer(signal.ITIMER_REAL, max(remaining - (clock() - began), 0.001), interval)
            _MAIN_BEFORE.clear()

    try:
        start()
        yield
    finally:
        budget.ended = True
        if budget.armed:  # the tracer and profile function go (the caller gives the ones before back)
            _finish(_disarm)
        _finish(stop)


def _disarm() -> None:
    sys.settrace(None)
    sys.setprofile(None)


def _raise_in(thread_id: int, exc: type[BaseException]) -> None:
    # Never called with NULL to take a pending exception back: on CPython 3.11 that leaves the
    # interpreter's "async exception pending" flag set for good, after which every thread's
    # interpreter loop checks for pending work at each backward jump and a line tracer never runs
    # again (a RESUME with a trace function set spins). A pending exception is delivered instead.
    ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(thread_id), ctypes.py_object(exc))


def _take_delivery() -> None:
    """Let an exception set by `_raise_in` for this thread land here, now: the interpreter
    delivers it at the first backward jump of this loop (with none pending, a short loop)."""
    try:
        for _ in range(10_000):
            pass
    except TimeBudgetExceeded:
        pass


class Watchdog(threading.Thread):
    """A budget's watchdog thread: the library's own, never the notebook's (the exercises' check
    for threads a notebook left running knows it by its class)."""


@contextlib.contextmanager
def _by_watchdog(budget: _Budget, every: float | None = None, only_if=None) -> Iterator[None]:
    """`every`: seconds between looks (the rule's interval by default); `only_if`: look only
    while this says so (the main thread's stand-in, see `_budget`)."""
    target = threading.get_ident()
    lock = threading.Lock()
    stop = threading.Event()  # set (under the lock) when the body ends

    def watch() -> None:
        while not stop.wait(every or budget.rule.interval):
            with lock:
                if stop.is_set():
                    return
                frame = sys._current_frames().get(target)
                over = budget.over(frame)  # even if the body's cleanup could not run: this thread ends
                due = not over and (only_if is None or only_if()) and budget.spent(frame, clock())
                del frame  # the thread's frame (and the student's values in it) is not kept between looks
                if over:
                    return
                if due:
                    _raise_in(target, TimeBudgetExceeded)

    watchdog = Watchdog(target=watch, name="pytree-lab time budget", daemon=True)

    def end() -> None:
        with lock:
            stop.set()
        if budget.fired:  # one may still be pending: it must land here, not after the body
            _take_delivery()
        watchdog.join(1.0)

    try:
        watchdog.start()
        yield
    finally:
        budget.ended = True
        _finish(end)


_TRACED = threading.local()  # .budgets: the budgets this thread's tracer asks


def _tracer(frame, event, arg):
    now = clock()
    for budget in tuple(_TRACED.budgets):
        if budget.spent(frame, now):
            raise TimeBudgetExceeded()
    return _tracer


@contextlib.contextmanager
def _by_tracer(budget: _Budget) -> Iterator[None]:
    budgets = getattr(_TRACED, "budgets", None)
    if budgets is None or sys.gettrace() is not _tracer:  # none, or gone with the tracer (it raised)
        budgets = _TRACED.budgets = []
    first = not budgets
    before = sys.gettrace() if first else None

    def end() -> None:
        if budget in budgets:
            budgets.remove(budget)
        if first:
            sys.settrace(before)

    budgets.append(budget)
    try:
        if first:
            sys.settrace(_tracer)
        yield
    finally:
        budget.ended = True
        _finish(end)


_DRIVERS = {"itimer": _by_itimer, "watchdog": _by_watchdog, "tracer": _by_tracer}


@contextlib.contextmanager
def _budget(rule: Rule, seconds: float | None) -> Iterator[None]:
    # (a finalizer's error in the body, a stop in a __del__ or gc callback, is the body's: the
    # caller's `InterpreterState` keeps it from being printed until the interpreter is repaired)
    how = driver(rule) if seconds and seconds > 0 else None
    if how is None:
        yield
        return
    caller = _caller(sys._getframe(1))
    budget = _Budget(rule, {id(f) for f in _frames(caller)}, id(caller), clock() + rule.interval)
    with contextlib.ExitStack() as stack:
        stack.enter_context(_DRIVERS[how](budget))
        if how == "itimer" and rule.tamper_proof and hasattr(ctypes, "pythonapi"):
            # a student's code can replace SIGALRM's handler or stop the timer: then a watchdog
            # thread stands in (it looks only while the timer is not the budget's)
            stack.enter_context(_by_watchdog(budget, every=TICK, only_if=_alarm_taken))
        yield


def _alarm_taken() -> bool:
    """SIGALRM's handler or the interval timer is no longer the budget's."""
    return signal.getsignal(signal.SIGALRM) is not _on_alarm or signal.getitimer(signal.ITIMER_REAL)[0] == 0


@contextlib.contextmanager
def user_code_budget(seconds: float | None) -> Iterator[BudgetClock]:
    """Stop the user's code in the body once its own Python has run `seconds`, or library work
    called from it `SLOW_FACTOR` times that (None or 0: no budget; none under a line tracer).
    Yields the `BudgetClock` (`clock.reason`); the interpreter's state is given back after."""
    interpreter = InterpreterState.capture()
    clock = BudgetClock(seconds or 0.0)
    try:
        with _budget(clock, seconds):
            yield clock
    finally:
        interpreter.restore()


@contextlib.contextmanager
def deadline_budget(seconds: float | None) -> Iterator[Deadline]:
    """Stop the body after `seconds` of CPU time, or `WALL_FACTOR` times as long on the clock
    (None or 0: no budget). The caller gives the interpreter's state back (`run_guarded` does)."""
    deadline = Deadline(seconds or 0.0)
    with _budget(deadline, seconds):
        yield deadline
