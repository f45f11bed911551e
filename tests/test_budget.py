"""The explorer's time budget stops the user's own endless code, never JAX's own work."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import jax.numpy as jnp
import pytest

from pytree_lab import StepExplorer
from pytree_lab.budget import TimeBudgetExceeded, is_user_frame, user_code_budget


def test_a_loop_in_the_users_code_is_stopped():
    def spin():
        while True:
            pass

    start = time.monotonic()
    with pytest.raises(TimeBudgetExceeded), user_code_budget(0.3):
        spin()
    assert time.monotonic() - start < 5
    assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)  # nothing left armed


def test_waiting_in_library_code_is_not_stopped_even_when_the_caller_is_user_code():
    # the test's own frame (user code) is on the stack, but it only waits: like a notebook cell
    # that built an explorer while XLA compiles
    with user_code_budget(0.1):
        time.sleep(0.6)
        sum(range(3_000_000))  # builtins: library work


def test_frames_are_told_apart():
    import sys

    import jax._src.api as api

    assert is_user_frame(sys._getframe())
    assert not is_user_frame(type("F", (), {"f_code": api.jit.__code__})())


def test_an_endless_loss_ends_in_a_message_and_the_last_good_step_stays():
    ex = StepExplorer(time_budget=0.5)
    good = ex.result

    def endless(p, x, target):
        while True:
            pass

    start = time.monotonic()
    assert ex.set_loss(endless) is None
    assert time.monotonic() - start < 10
    assert "ran for more than 0.5 s" in ex.diagram.message and "endless loop" in ex.diagram.message
    assert ex.result is good and ex.result.loss == 4.0  # the lesson's loss, kept
    assert ex.step(3) is None  # steps from a loss that never returns are refused the same way
    assert ex.history == [4.0]

    def fixed(p, x, target):
        return (jnp.dot(p["weight"], x) + p["bias"] - target) ** 2

    assert ex.set_loss(fixed).loss == 4.0  # recovers
    assert ex.diagram.message == ""


def test_an_endless_loss_at_construction_is_said_not_hung():
    def endless(p, x):
        while True:
            pass

    ex = StepExplorer(endless, {"w": jnp.array([1.0])}, {"x": jnp.array(2.0)}, time_budget=0.5)
    assert ex.result is None and "endless loop" in ex.diagram.message


def _in_a_thread(fn):
    """Run fn in another thread (where JupyterLab's subshell runs widget messages); its outcome."""
    import threading

    out = {}

    def run():
        try:
            out["value"] = fn()
        except BaseException as err:  # noqa: BLE001 - reported to the test
            out["error"] = err

    t = threading.Thread(target=run)
    t.start()
    t.join(20)
    assert not t.is_alive(), "the thread is still running"
    return out


def test_a_loop_in_the_users_code_is_stopped_off_the_main_thread_too():
    def spin():
        while True:
            pass

    def step():
        with user_code_budget(0.3):
            spin()

    start = time.monotonic()
    out = _in_a_thread(step)
    assert isinstance(out.get("error"), TimeBudgetExceeded)
    assert time.monotonic() - start < 10


def test_off_the_main_thread_library_waits_are_not_stopped_and_nothing_lands_later():
    def wait_then_work():
        with user_code_budget(0.1):
            time.sleep(0.6)  # library code: never stopped
        total = 0
        for k in range(2_000_000):  # user code after the budget ended: nothing may land here
            total += k
        time.sleep(0.5)
        return total

    out = _in_a_thread(wait_then_work)
    assert out == {"value": sum(range(2_000_000))}


def test_an_endless_loss_given_from_another_thread_ends_in_a_message():
    ex = StepExplorer(time_budget=0.5)
    good = ex.result

    def endless(p, x, target):
        while True:
            pass

    out = _in_a_thread(lambda: ex.set_loss(endless))
    assert out == {"value": None}
    assert "ran for more than 0.5 s" in ex.diagram.message and "endless loop" in ex.diagram.message
    assert ex.result is good and ex.result.loss == 4.0


_AFTER_A_STOP = r"""
import sys, threading
from pytree_lab.budget import TimeBudgetExceeded, user_code_budget

def spin():
    while True:
        pass

def stopped():
    try:
        with user_code_budget(0.2):
            spin()
    except TimeBudgetExceeded:
        print("stopped")

t = threading.Thread(target=stopped); t.start(); t.join(20)
seen = []

def tracer(frame, event, arg):
    seen.append(event)
    if len(seen) > 1000:
        raise TimeBudgetExceeded()
    return tracer

def traced():
    sys.settrace(tracer)
    try:
        spin()
    except TimeBudgetExceeded:
        print("traced", seen[0], len(seen))

t = threading.Thread(target=traced); t.start(); t.join(20)
"""


def test_after_a_stop_off_the_main_thread_line_tracers_still_run(tmp_path):
    # a stop must leave nothing pending in the interpreter: on CPython 3.11 taking a pending
    # exception back with PyThreadState_SetAsyncExc(id, NULL) left a flag set for good, after
    # which no trace function ran in any thread (the exercises' budget then never fired)
    import subprocess
    import sys

    script = tmp_path / "after_a_stop.py"  # a file of the user's own (code from "<string>" is not)
    script.write_text(_AFTER_A_STOP)
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=60)
    assert done.stdout.split("\n")[:2] == ["stopped", "traced call 1001"], done.stdout + done.stderr


# ------------------------------------------------------------------------- one mechanism, two rules
def _spin():
    while True:
        pass


def _swallows_then_spins():
    # a bare `except` swallows the first stop; the rule keeps firing while the code runs
    try:
        _spin()
    except BaseException:  # noqa: BLE001 - what a student writes
        pass
    _spin()


@pytest.mark.parametrize("outer,inner", [("user", "deadline"), ("deadline", "user")])
def test_budgets_nest_and_the_inner_one_stops_its_body(outer, inner):
    from pytree_lab.budget import deadline_budget

    make = {"user": user_code_budget, "deadline": deadline_budget}
    start = time.monotonic()
    with make[outer](30.0):
        with pytest.raises(TimeBudgetExceeded), make[inner](0.3):
            _spin()
        after_inner = time.monotonic() - start
        sum(range(1_000_000))  # the outer budget's body goes on: nothing of the inner lands here
    assert after_inner < 5
    assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)
    assert signal.getsignal(signal.SIGALRM) is signal.SIG_DFL


@pytest.mark.parametrize("where", ["main thread", "another thread"])
def test_a_fired_deadline_fires_again_until_the_code_stops(where):
    from pytree_lab.budget import deadline_budget, driver

    def run():
        with deadline_budget(0.3) as rule:
            _swallows_then_spins()
        return rule

    if where == "main thread":
        assert driver() == "itimer"
        with pytest.raises(TimeBudgetExceeded):
            run()
    else:
        out = _in_a_thread(run)
        assert isinstance(out.get("error"), TimeBudgetExceeded)


def test_the_deadline_counts_cpu_time_and_the_clock_is_its_backstop():
    from pytree_lab.budget import WALL_FACTOR, Deadline

    rule = Deadline(0.2)
    time.sleep(0.3)  # waiting: no CPU time
    assert not rule.look(None, set())  # type: ignore[arg-type]
    time.sleep(0.2 * WALL_FACTOR - 0.3 + 0.05)
    assert rule.look(None, set())  # type: ignore[arg-type]
    busy = Deadline(0.2)
    end = time.process_time() + 0.25
    while time.process_time() < end:
        pass
    assert busy.look(None, set())  # type: ignore[arg-type]


_AFTER_A_BROKEN_CLEANUP = r"""
import signal, sys, time
from pytree_lab.exercises._guard import run_guarded

def leaves_no_depth():  # the budget's own cleanup, a few calls deep, cannot run
    depth, frame = 0, sys._getframe()
    while frame is not None:
        depth, frame = depth + 1, frame.f_back
    sys.setrecursionlimit(depth + 3)
    raise SystemExit(3)

def spin():
    while True:
        pass

print(run_guarded(leaves_no_depth, budget=0.5).error.__class__.__name__)
start = time.monotonic()
print(run_guarded(spin, budget=0.3).timed_out, time.monotonic() - start < 5)
"""


def test_after_a_body_that_broke_the_budgets_cleanup_the_next_budget_still_stops(tmp_path):
    # a body that leaves no recursion depth keeps the budget's cleanup from running: the caller
    # gives the interpreter's state back, and the next budget must arm its own timer again
    import subprocess
    import sys

    script = tmp_path / "broken_cleanup.py"
    script.write_text(_AFTER_A_BROKEN_CLEANUP)
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=60)
    assert done.stdout.split("\n")[:2] == ["SystemExit", "True True"], done.stdout + done.stderr


_TAKES_THE_ALARM = r"""
import signal, sys, threading, time
from pytree_lab.exercises._guard import run_guarded

def student():
    if sys.argv[1] == "handler":
        signal.signal(signal.SIGALRM, signal.SIG_IGN)
    else:
        signal.setitimer(signal.ITIMER_REAL, 0)
    while True:
        pass

start = time.monotonic()
run = run_guarded(student, budget=0.5)
print(run.timed_out, run.error is None, time.monotonic() - start < 10)
print(signal.getsignal(signal.SIGALRM) is signal.SIG_DFL, signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0))
print([t.name for t in threading.enumerate() if t.name == "pytree-lab time budget"])
"""


@pytest.mark.parametrize("takes", ["handler", "timer"])
def test_a_student_who_takes_the_alarm_over_is_still_stopped(takes, tmp_path):
    # the main thread's timer is the student's to break: a watchdog stands in when it is gone
    # (in a process of its own: without the stand-in the loop would never end)
    import subprocess
    import sys

    script = tmp_path / "takes_the_alarm.py"
    script.write_text(_TAKES_THE_ALARM)
    try:
        done = subprocess.run([sys.executable, str(script), takes], capture_output=True, text=True, timeout=60)
    except subprocess.TimeoutExpired:
        pytest.fail(f"a student who took the alarm's {takes} over was never stopped")
    assert done.stdout.splitlines()[:3] == ["True True True", "True True", "[]"], done.stdout + done.stderr


_AFTER_A_LOST_DEPTH_OFF_MAIN = r"""
import sys, threading, time
import jax
from pytree_lab import budget
from pytree_lab.exercises._guard import run_guarded

def loses_depth():  # JAX's flatten gives up on it without giving its recursion count back
    deep = node = [1.0]
    for _ in range(1500 if sys.version_info < (3, 13) else 12_000):  # past the C recursion limit
        inner = [1.0]
        node.append(inner)
        node = inner
    jax.tree_util.tree_flatten_with_path(deep, is_leaf=lambda n: n is None)

out = {}

def student_thread():
    out["run"] = run_guarded(loses_depth, budget=0.2)
    try:
        total, end = 0, time.monotonic() + 1.5  # past the budget's 0.8 s on the clock: nothing lands
        while time.monotonic() < end:
            total += 1
        out["after"] = "ran"
    except BaseException as err:
        out["after"] = type(err).__name__

t = threading.Thread(target=student_thread)
t.start()
t.join(60)
time.sleep(0.6)
print(out["run"].error is not None or "the recursion depth" in out["run"].restored, out["after"])
print([w.name for w in threading.enumerate() if isinstance(w, budget.Watchdog)])
"""


def test_off_the_main_thread_a_body_that_lost_the_recursion_depth_leaves_no_watchdog_behind(tmp_path):
    # the budget's own cleanup cannot run then (no depth left); its watchdog must still end with
    # the body, and never stop the code that runs after it
    import subprocess
    import sys

    script = tmp_path / "lost_depth.py"
    script.write_text(_AFTER_A_LOST_DEPTH_OFF_MAIN)
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120)
    assert done.stdout.splitlines()[:2] == ["True ran", "[]"], done.stdout + done.stderr[-2000:]


_HOSTILE_TO_THE_BUDGET = r"""
import os, sys, time
from pytree_lab.budget import TimeBudgetExceeded, user_code_budget
from pytree_lab.exercises._guard import notes_for, run_guarded

clock, cpu = time.monotonic, time.process_time

def frozen():  # the student's code stops time's clocks, then loops
    time.monotonic = lambda: 0.0
    time.process_time = lambda: 0.0
    while True:
        pass

def swallows():
    while True:
        try:
            while True:
                pass
        except BaseException:
            pass

def swallows_around_a_call():  # a function that swallows the stop around another that does
    while True:
        try:
            swallows()
        except BaseException: pass

for case in (frozen, swallows, swallows_around_a_call):
    start = clock()
    run = run_guarded(case, budget=0.3)
    time.monotonic, time.process_time = clock, cpu
    print(case.__name__, run.timed_out, clock() - start < 15, sys.gettrace(), sys.getprofile())

for case in (frozen, swallows_around_a_call):  # the explorer's rule, on the user's own Python
    start = clock()
    try:
        with user_code_budget(0.3):
            case()
    except TimeBudgetExceeded:
        print("stopped", clock() - start < 15)
    time.monotonic, time.process_time = clock, cpu

def forks():
    for _ in range(2):
        os.fork()  # a child of the guarded call ends at once (it would run the caller's code on)
    return 5

run = run_guarded(forks, budget=5)
print(run.value, run.processes, notes_for(run))
from pytree_lab.interpreter import _descendants
print(sorted(_descendants()))  # none left, not even a zombie
"""


def test_a_student_who_freezes_the_clocks_swallows_the_stop_or_forks_is_stopped_and_cleaned_up(tmp_path):
    # in a process of its own: without the budget's own clocks and the escalation the loops never end
    import subprocess
    import sys

    script = tmp_path / "hostile.py"
    script.write_text(_HOSTILE_TO_THE_BUDGET)
    try:
        done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120)
    except subprocess.TimeoutExpired as hung:
        pytest.fail(f"the budget hung: {hung.stdout}")
    lines = done.stdout.splitlines()
    assert lines[:3] == [
        "frozen True True None None",
        "swallows True True None None",
        "swallows_around_a_call True True None None",
    ], done.stdout + done.stderr[-3000:]
    assert lines[3:5] == ["stopped True", "stopped True"], done.stdout + done.stderr[-3000:]
    # two forks, each child ended at once (the first one's would have forked again)
    assert lines[5] == (
        '5 2 ["Your code started 2 processes (os.fork or subprocess); they were ended with the call: '
        "an answer computes in the kernel's own process.\"]"
    ), done.stdout
    assert lines[6] == "[]", done.stdout


_RUNTIME_THREADS = r"""
import builtins, ctypes, os, subprocess, threading, time
from pytree_lab import interpreter

libc = ctypes.CDLL(None)
park = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p)(lambda _: libc.pause())
for _ in range(300):  # an accelerator runtime's threads: made by pthread_create, never running Python
    assert libc.pthread_create(ctypes.byref(ctypes.c_ulong()), None, park, None) == 0
time.sleep(0.2)
mine = subprocess.Popen(["sleep", "30"])
kids = []
helper = threading.Thread(target=lambda: (kids.append(subprocess.Popen(["sleep", "30"])), time.sleep(1)))
helper.start()
time.sleep(0.3)
reads = []
interpreter.open = lambda path, *a, **k: (reads.append(path), builtins.open(path, *a, **k))[1]
found = interpreter._descendants()
print(len(os.listdir("/proc/self/task")) > 300, found == {mine.pid, kids[0].pid})
print(len(reads) <= threading.active_count() + 3)
for p in (mine, kids[0]):
    p.kill()
os._exit(0)
"""


def test_the_processes_a_guarded_call_started_are_found_without_reading_a_runtimes_threads(tmp_path):
    """A TPU host's JAX keeps hundreds of threads that never run Python; a guard reads the children
    of the threads that run Python (two per guard, four guards per slider move)."""
    import subprocess
    import sys

    script = tmp_path / "threads.py"
    script.write_text(_RUNTIME_THREADS)
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=60)
    assert done.stdout.split() == ["True", "True", "True"], done.stdout + done.stderr[-3000:]


_WHOSE_CODE = r"""
import os, sys
from pytree_lab.budget import is_user_frame, _FILES

def frame_of(fn):
    return type("F", (), {"f_code": fn.__code__})()

import mdurl, plainpkg, mine
print(mdurl.__file__.startswith(sys.argv[1]), plainpkg.__file__.startswith(sys.argv[2]))
print(is_user_frame(frame_of(mdurl.decode)), is_user_frame(frame_of(plainpkg.work)), is_user_frame(frame_of(mine.loss)))
exec(compile("def cell(): pass", "/tmp/ipykernel_1/2.py", "exec"))  # a notebook cell's code
print(is_user_frame(frame_of(cell)), is_user_frame(sys._getframe()))
print(mdurl.decode.__code__.co_filename in _FILES)  # asked once per file name
"""


def test_library_code_is_told_by_where_it_came_from_not_by_one_prefix_list(tmp_path):
    # a `pip install --target` folder (a package with its metadata) and a PYTHONPATH folder that
    # holds a package are library code; a .py file in the notebook's folder stays the user's,
    # even with that folder on PYTHONPATH too
    import importlib.metadata
    import shutil
    import subprocess
    import sys

    import mdurl

    target, plain, notebook = tmp_path / "target", tmp_path / "plain", tmp_path / "notebook"
    shutil.copytree(Path(mdurl.__file__).parent, target / "mdurl")
    dist = importlib.metadata.distribution("mdurl")
    shutil.copytree(
        Path(str(dist.locate_file(""))) / f"mdurl-{dist.version}.dist-info", target / f"mdurl-{dist.version}.dist-info"
    )
    (plain / "plainpkg").mkdir(parents=True)
    (plain / "plainpkg" / "__init__.py").write_text("def work():\n    return 1\n")
    (notebook / "mine").mkdir(parents=True)  # the user's own package, next to the notebook
    (notebook / "mine" / "__init__.py").write_text("def loss(p):\n    return p\n")
    (notebook / "check.py").write_text(_WHOSE_CODE)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(target), str(plain), str(notebook), env.get("PYTHONPATH", "")])
    done = subprocess.run(
        [sys.executable, "check.py", str(target), str(plain)],
        cwd=notebook,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.stdout.splitlines() == ["True True", "False False True", "True True", "True"], (
        done.stdout + done.stderr[-3000:]
    )


def test_the_interpreter_repairs_find_what_they_mend_on_this_python():
    # the C-API the guard's depth repair relies on, on each CPython `make test-pythons` runs: up to
    # 3.13 Py_LeaveRecursiveCall; on 3.12 and 3.13 the C recursion counter, found in the thread's
    # state (it drops by a level or two inside a Python function called from C)
    import sys

    from pytree_lab import interpreter

    if sys.implementation.name == "cpython" and sys.version_info[:2] <= (3, 13):
        assert interpreter._LEAVE is not None
    if sys.implementation.name == "cpython" and (3, 12) <= sys.version_info[:2] <= (3, 13):
        counter = interpreter._c_counter()
        assert counter is not None and 0 < counter.value - interpreter._inner(counter) <= 16


def test_the_processes_started_are_looked_for_where_threads_have_no_native_id(monkeypatch):
    """Pyodide's threading has no native_id (its Python is single-threaded): a guard still runs."""
    import subprocess
    import threading

    from pytree_lab import interpreter

    class PyodideMainThread:  # threading._MainThread there: name and ident, no native_id
        name, ident = "MainThread", 1

    monkeypatch.setattr(threading, "enumerate", lambda: [PyodideMainThread()])
    before = interpreter._descendants()  # a test worker may hold servers of other tests
    child = subprocess.Popen(["sleep", "30"])
    try:
        assert interpreter._descendants() - before == {child.pid}
    finally:
        child.kill()
        child.wait()
    run = interpreter.InterpreterState.capture()
    assert run.restore() == ()
