"""The formative checks' integrity: a wrong answer never passes because the answer, an earlier
cell or a thread replaced a function the checker relies on. Each route is put back, the check
says it does not count, and the next check of a wrong answer fails as it should."""

from __future__ import annotations

import dataclasses
import threading

import jax
import jax.numpy as jnp
import numpy as np
import numpy._core.numeric as numeric
import pytest

from pytree_lab import exercises
from pytree_lab.course import EXERCISES, check, check_button
from pytree_lab.course.exercises import squared_norm
from pytree_lab.exercises import _grading, _integrity
from pytree_lab.exercises._grading import CheckResult, Outcome

DOES_NOT_COUNT = "This check does not count"


@pytest.fixture(autouse=True)
def _fresh_evidence():
    exercises.clear_evidence()
    yield
    exercises.clear_evidence()
    assert _integrity.verify() == []  # every test leaves the checker as it found it


def _fails_as_it_should():
    wrong = check("squared_norm", 95.0)
    assert not wrong.passed and "You gave 95, which is not the squared norm" in wrong.feedback
    assert check("squared_norm", 96.0).passed
    assert eval("1 + 1") == 2


def _always_close(*args, **kwargs):
    return np.ones(np.broadcast(*[np.asarray(a) for a in args[:2]]).shape, bool)


EARLIER_CELL = {
    "numpy._core.numeric.isclose": lambda: setattr(numeric, "isclose", _always_close),
    "numpy.allclose": lambda: setattr(np, "allclose", lambda *a, **k: True),
    "_grading._close": lambda: setattr(_grading, "_close", lambda a, b: True),
    "catalogue._close": lambda: setattr(squared_norm, "close", lambda a, b: True),
    "_close's code": lambda: setattr(_grading._close, "__code__", (lambda a, b: True).__code__),
    "a method of CheckResult": lambda: setattr(CheckResult, "__init__", _passing_init),
    "the frozen numpy": lambda: setattr(_grading._TOOLS["np"], "allclose", lambda *a, **k: True),
    "a catalogue entry": lambda: EXERCISES.__setitem__(
        "squared_norm",
        dataclasses.replace(EXERCISES["squared_norm"], grade=lambda answer, rng=None: Outcome(1, 1, ["Correct."])),
    ),
    "a catalogue entry's grader": lambda: object.__setattr__(
        EXERCISES["squared_norm"], "grade", lambda answer, rng=None: Outcome(1, 1, ["Correct."])
    ),
    "jax.grad": lambda: setattr(jax, "grad", lambda f, *a, **k: lambda *x, **y: {"weight": jnp.zeros(2)}),
}

_real_init = CheckResult.__init__


def _passing_init(self, passed, score, feedback, *args, **kwargs):
    _real_init(self, True, 1.0, feedback, *args, **kwargs)


@pytest.mark.parametrize("route", list(EARLIER_CELL))
def test_a_patch_from_an_earlier_cell_is_put_back_and_that_check_does_not_count(route):
    EARLIER_CELL[route]()
    result = check("squared_norm", 95.0)
    assert not result.passed and result.score == 0.0
    assert result.feedback.startswith("Before this check, code in this notebook had replaced part of the checker")
    assert DOES_NOT_COUNT in result.feedback
    assert exercises.default_evidence().checks[-1]["passed"] is False  # the record says so too
    _fails_as_it_should()  # put back: later checks grade with the real functions


def _answer_patching(patch):
    class Sneaky:
        def __array__(self, dtype=None, copy=None):
            patch()  # while the checker reads the value
            return np.asarray(95.0, dtype=dtype)

    return Sneaky()


@pytest.mark.parametrize(
    "route",
    [
        "numpy._core.numeric.isclose",
        "_grading._close",
        "a method of CheckResult",
        "_close's code",
        "a catalogue entry's grader",
    ],
)
def test_an_answer_that_patches_while_it_is_read_does_not_pass(route):
    result = check("squared_norm", _answer_patching(EARLIER_CELL[route]))
    assert not result.passed and result.score == 0.0
    assert DOES_NOT_COUNT in result.feedback or "this check does not count" in result.feedback, result.feedback
    _fails_as_it_should()


def test_a_function_answer_that_patches_isclose_does_not_pass():
    def grad_over_flat_params(flat_params, x):
        numeric.isclose = _always_close
        return jnp.zeros_like(flat_params)

    result = check("grad_over_flat_params", grad_over_flat_params)
    assert not result.passed and "isclose" in result.feedback
    _fails_as_it_should()


def test_a_thread_that_patches_after_the_check_returns_is_reported_and_its_patch_undone():
    go = threading.Event()

    def later():
        go.wait(10)
        _grading._close = lambda a, b: True

    def grad_over_flat_params(flat_params, x):
        if not any(t.name == "sneaky" for t in threading.enumerate()):
            threading.Thread(target=later, name="sneaky", daemon=True).start()
        return jnp.zeros_like(flat_params)

    result = check("grad_over_flat_params", grad_over_flat_params)
    assert not result.passed
    assert "A thread started from this notebook is still running (sneaky)" in result.feedback
    assert DOES_NOT_COUNT in result.feedback
    go.set()
    for thread in threading.enumerate():
        if thread.name == "sneaky":
            thread.join(10)
    after = check("squared_norm", 95.0)  # the patch landed after the check: found before the next
    assert not after.passed and "_grading._close" in after.feedback and DOES_NOT_COUNT in after.feedback
    _fails_as_it_should()


def test_a_running_thread_from_an_earlier_cell_makes_checks_not_count_until_it_ends():
    stop = threading.Event()
    thread = threading.Thread(target=stop.wait, args=(30,), name="cell-thread")  # target: stdlib
    user = threading.Thread(target=lambda: stop.wait(30), name="my-loop")  # target: the notebook's code
    thread.start(), user.start()
    try:
        result = check("squared_norm", 96.0)
        assert not result.passed and "(my-loop)" in result.feedback and "cell-thread" not in result.feedback
    finally:
        stop.set()
        thread.join(10), user.join(10)
    _fails_as_it_should()


def test_the_button_path_is_guarded_the_same_way():
    button = check_button("squared_norm", lambda: 95.0)
    EARLIER_CELL["_grading._close"]()
    button._on_front_end_msg(button, {"type": "check"}, [])
    assert button.status == "failed" and button.feedback.startswith("Before this check")
    button._on_front_end_msg(button, {"type": "check"}, [])
    assert button.status == "failed" and "You gave 95" in button.feedback


def test_nothing_is_reported_when_nothing_was_replaced():
    before = _integrity.sealed()
    assert before > 10_000  # numpy, jax and the checker: functions, classes' methods, entries
    for _ in range(2):
        assert check("squared_norm", 96.0).feedback.startswith("norm_squared: Correct")
        jax.jit(lambda x: jnp.sum(x**2))(jnp.ones(3)).block_until_ready()
    assert _integrity.verify() == []


def test_a_timer_from_an_earlier_cell_that_would_patch_later_makes_the_check_not_count():
    timer = threading.Timer(30, lambda: setattr(_grading, "_close", lambda a, b: True))
    timer.name = "patch-later"
    timer.start()
    try:
        result = check("squared_norm", 95.0)
        assert not result.passed and "(patch-later)" in result.feedback and DOES_NOT_COUNT in result.feedback
    finally:
        timer.cancel()
        timer.join(10)
    _fails_as_it_should()


def test_a_subshell_the_kernel_starts_during_a_check_does_not_stop_it_counting():
    """JupyterLab asks ipykernel 7 for subshells, each run in a SubshellThread the kernel starts,
    possibly while a check runs: that thread is the kernel's, not the answer's. A kernel thread
    class running the notebook's own function still counts as the notebook's."""
    import zmq
    from ipykernel.subshell import SubshellThread
    from ipykernel.thread import BaseThread

    started = []

    def grad_over_flat_params(flat_params, x):
        if not started:  # the kernel starts a subshell while the answer runs
            started.append(SubshellThread("f509e22a", zmq.Context.instance(), daemon=True))
            started[0].start()

        def loss(p):
            return jnp.sum((x @ p[:-1] + p[-1]) ** 2)

        return jax.grad(loss)(flat_params)

    try:
        result = check("grad_over_flat_params", grad_over_flat_params)
        assert started[0].is_alive()
        assert result.passed, result.feedback
    finally:
        started[0].stop()
        started[0].join(10)
    stop = threading.Event()
    disguised = BaseThread(target=lambda: stop.wait(30), name="disguised", daemon=True)
    disguised.start()
    try:
        result = check("squared_norm", 96.0)
        assert not result.passed and "(disguised)" in result.feedback and DOES_NOT_COUNT in result.feedback
    finally:
        stop.set()
        disguised.stop()
        disguised.join(10)
    _fails_as_it_should()
