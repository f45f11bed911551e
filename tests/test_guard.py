"""The guard (`pytree_lab.guard`), in this process: its one rule (the seconds of the user's own
frames; library frames never count), its two drivers (SIGALRM on the main thread, a line tracer on
another thread), what it gives back, and what it never does: let a stop land after it returned,
swallow a kernel interrupt, or take another thread's prints. docs/checks.md has the table."""

from __future__ import annotations

import fractions
import io
import signal
import subprocess
import sys
import textwrap
import threading
import time

import pytest

from pytree_lab import guard


def spin(seconds: float) -> float:
    """The user's own loop, for about `seconds` of CPU time; returns what it used."""
    start = time.process_time()
    while time.process_time() - start < seconds:
        pass
    return time.process_time() - start


def library_work() -> fractions.Fraction:
    """About a second of pure-Python library code (fractions): no frame of it is the user's."""
    total = fractions.Fraction(0)
    for i in range(1, 60_000):
        total += fractions.Fraction(1, i)
    return total


def test_an_endless_loop_is_stopped_after_its_budget_of_its_own_time():
    started = time.process_time()
    run = guard.run(spin, 60.0, budget=0.5)
    used = time.process_time() - started
    assert run.timed_out and not run.ok and run.error is None
    assert 0.5 <= used < 3.0, used


def test_code_that_waits_is_stopped_on_the_clock():
    started = time.monotonic()
    run = guard.run(lambda: time.sleep(60), budget=0.5)
    assert run.timed_out and time.monotonic() - started < 10


def test_library_frames_never_count():
    with guard.time_budget(0.2) as budget:
        started = time.process_time()
        library_work()
        took = time.process_time() - started
    assert took > 0.2, took  # the library ran past the budget, and nothing stopped it
    assert budget.own < 0.2 and not budget.fired, budget


def test_a_stop_never_lands_after_the_guard_returned():
    late = 0
    for _ in range(40):
        run = guard.run(spin, 0.06, budget=0.05)  # right at the edge of the budget
        try:
            for _ in range(20_000):  # the caller's own work, right after
                pass
        except guard.TimeBudgetExceeded:
            late += 1
        assert run.ok or run.timed_out
    assert late == 0
    assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)


def _state() -> tuple:
    """What the guard must give back, as plain values."""
    return (
        sys.getrecursionlimit(),
        sys.gettrace(),
        sys.getprofile(),
        sys.stdout,
        sys.stderr,
        signal.getsignal(signal.SIGPROF),
        signal.getitimer(signal.ITIMER_PROF),
        signal.getsignal(signal.SIGALRM),
        signal.getitimer(signal.ITIMER_REAL),
    )


def test_everything_the_code_changed_is_given_back():
    def breaks_everything():
        sys.setrecursionlimit(500)
        sys.settrace(lambda *a: None)
        sys.setprofile(lambda *a: None)
        sys.stdout = sys.stderr = io.StringIO()
        signal.signal(signal.SIGPROF, signal.SIG_IGN)
        signal.setitimer(signal.ITIMER_PROF, 50.0)
        raise SystemExit(3)

    before = _state()
    run = guard.run(breaks_everything)
    assert isinstance(run.error, SystemExit)
    after = _state()
    assert after == before


def test_a_kernel_interrupt_is_raised_again_with_everything_given_back():
    limit = sys.getrecursionlimit()

    def interrupted():
        sys.setrecursionlimit(100)
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        guard.run(interrupted)
    assert sys.getrecursionlimit() == limit and signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)


def test_budgets_nest_and_the_outer_one_goes_on():
    with guard.time_budget(5.0) as outer:
        inner = guard.run(spin, 60.0, budget=0.3)
        assert inner.timed_out
        assert signal.getitimer(signal.ITIMER_REAL)[1] > 0  # the outer budget still ticks
        spin(0.2)
    assert not outer.fired and outer.own >= 0.4, outer


def test_on_another_thread_a_line_tracer_stops_the_loop_and_only_that_threads_prints_are_kept(capsys):
    """A check on a kernel subshell's thread: its own prints kept, the main thread's go on."""
    results = []

    def check():
        def answer():
            print("from the check")
            spin(60.0)

        results.append(guard.run(answer, budget=0.5))

    worker = threading.Thread(target=check)
    worker.start()
    while worker.is_alive():
        print("from the main thread")
        time.sleep(0.05)
    worker.join()
    (run,) = results
    assert run.timed_out and run.output == "from the check\n"
    out = capsys.readouterr().out
    assert "from the main thread" in out and "from the check" not in out


def test_a_function_that_looped_once_is_not_waited_for_again():
    def loops(x):
        while True:
            pass

    first = guard.run(loops, 1, budget=0.3, once_stuck=True)
    again = guard.run(loops, 1, budget=0.3, once_stuck=True)
    assert first.timed_out and not first.skipped and again.skipped and again.timed_out


def test_printed_output_is_kept_up_to_its_limit():
    run = guard.run(lambda: print("x" * 10_000))
    assert len(run.output) == guard.OUTPUT_LIMIT and run.output_truncated == 10_001 - guard.OUTPUT_LIMIT


RECURSE_AGAIN = """
from pytree_lab import guard
def f(n, again=True):
    try:
        return f(n + 1, again)
    except RecursionError:
        if again:
            return f(n + 1, False)  # recursing again, from the limit
        raise
for _ in range(3):
    run = guard.run(f, 0, budget=30.0)
    print(type(run.error).__name__)
print("alive", guard.run(lambda: 1 + 1).value)
"""


def test_an_answer_that_recurses_again_inside_except_recursionerror_never_aborts_the_interpreter():
    """It aborted with "Fatal Python error: Cannot recover from stack overflow" when the guard ran
    a line tracer there. (Code that recurses again there forever can be stopped by no Python code,
    the Stop button's included: CPython cannot call a handler at its recursion limit. docs/checks.md
    says so.)"""
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(RECURSE_AGAIN)], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["RecursionError"] * 3 + ["alive", "2"], done.stdout
