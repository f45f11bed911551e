"""The guard in a real kernel (jupyter_client, ipykernel): no answer ends the kernel or hangs it.
Every case is followed by a cell that must answer, with the variables set before still there."""

from __future__ import annotations

import pytest
from kernel_harness import output, real_kernel

SETUP = r"""
import os, posix, sys, time
import jax.numpy as jnp
from pytree_lab import StepExplorer, course
course.setup()  # registers %%exercise, as the course notebooks do
from pytree_lab.exercises import cells
cells.CELL_BUDGET = 1.0  # seconds an exercise cell may compute (4 on the clock)
kept = 41
"""

# what the next cell prints: the variable kept, and the ways out given back as they were
AFTER = (
    "print(kept, os._exit is posix._exit and os._exit.__name__ == '_exit', "
    "'ask_exit' not in vars(get_ipython()), get_ipython().exit_now)"
)


@pytest.fixture(scope="module")
def kernel(tmp_path_factory):
    with real_kernel(tmp_path_factory.mktemp("kernel")) as (km, kc):
        output(kc, SETUP)
        yield km, kc


def _answers(km, kc) -> None:
    """The kernel is alive a while later (an exit the kernel asked for takes 0.1 s to land) and
    answers the next cell with the variables kept and every way out given back."""
    import time

    time.sleep(0.5)
    assert km.is_alive()
    assert output(kc, AFTER, timeout=60).split() == ["41", "True", "True", "False"]


ASK_EXIT = "exit() (or quit()), which would end the kernel, so it was caught"
OS_EXIT = "os._exit(), which would end the kernel, so it was caught"
SYS_EXIT = "sys.exit() (or exit()/quit()). In a notebook that would stop the check, so it was caught"
DOORS = {
    "exit()": ASK_EXIT,
    "quit()": ASK_EXIT,
    "get_ipython().ask_exit()": ASK_EXIT,
    "sys.exit()": SYS_EXIT,
    "raise SystemExit": SYS_EXIT,
    "os._exit(3)": OS_EXIT,
    "posix._exit(0)": OS_EXIT,
}


@pytest.mark.parametrize("door", list(DOORS))
def test_no_exercise_cell_answer_or_loss_ends_the_kernel(kernel, door):
    km, kc = kernel
    said = output(kc, f"%%exercise squared_norm\n{door}\nnorm_squared = 1.0")
    assert f"Your cell called {DOORS[door]}: let the cell run to its end" in said, said
    assert "The kernel is fine" in said
    _answers(km, kc)

    said = output(kc, f"def answer(x):\n    {door}\n    return x\ncourse.try_function(answer, 1.0, label='answer')")
    assert said.strip() == f"answer called {DOORS[door]}: return the answer instead. The kernel is fine.", said
    _answers(km, kc)

    said = output(
        kc,
        f"def loss(p, x, target):\n    {door}\n    return 0.0\n"
        "ex = StepExplorer(time_budget=2.0)\nprint(ex.set_loss(loss), ex.result.loss)\nprint(ex.diagram.message)",
    )
    assert said.startswith("None 4.0\n"), said  # the lesson's last good step is kept
    assert "The loss raised SystemExit, which would stop the kernel; it was caught." in said, said
    _answers(km, kc)


def test_percent_exit_in_an_exercise_cell_answer_or_loss_is_one_sentence_and_the_kernel_answers(kernel):
    """IPython's %exit: the exercise cell runs IPython's syntax as the kernel does (it was a syntax
    error there), and this kernel has no such magic (exit() is the way out it has, caught above)."""
    km, kc = kernel
    said = output(kc, "%%exercise squared_norm\n%exit\nnorm_squared = 1.0")
    assert said.startswith("Your cell raised UsageError: Line magic function `%exit` not found."), said
    assert "The kernel is fine" in said
    _answers(km, kc)
    said = output(kc, "def answer(x):\n    %exit\n    return x\ncourse.try_function(answer, 1.0, label='answer')")
    assert said.strip() == "answer raised UsageError: Line magic function `%exit` not found. The kernel is fine.", said
    _answers(km, kc)
    said = output(
        kc,
        "def loss(p, x, target):\n    %exit\n    return 0.0\n"
        "ex = StepExplorer(time_budget=2.0)\nprint(ex.set_loss(loss), ex.result.loss)\nprint(ex.diagram.message)",
    )
    assert said.startswith("None 4.0\n") and "UsageError" in said, said
    _answers(km, kc)


HANGS = {
    "frozen clocks": "time.monotonic = lambda: 0.0\ntime.process_time = lambda: 0.0\nwhile True:\n    pass",
    "swallowed stops": (
        "while True:\n    try:\n        while True:\n            pass\n    except BaseException:\n        pass"
    ),
}


@pytest.mark.parametrize("hang", list(HANGS))
def test_no_exercise_cell_hangs_the_kernel(kernel, hang):
    km, kc = kernel
    said = output(kc, f"%%exercise squared_norm\n{HANGS[hang]}", timeout=90)
    assert "Your cell was still running after 1 s of computing (or 4 s on the clock) and was stopped" in said, said
    if hang == "frozen clocks":  # and the kernel's clocks are given back
        assert "Your code replaced time.monotonic, time.process_time; the original was put back" in said, said
    _answers(km, kc)
    assert output(kc, "print(time.monotonic() > 0)").strip() == "True"


def test_an_answer_that_forks_is_reported_and_its_processes_ended(kernel):
    km, kc = kernel
    before = output(kc, "from pytree_lab.interpreter import _descendants\nprint(sorted(_descendants()))")
    said = output(kc, "%%exercise squared_norm\nfor _ in range(3):\n    os.fork()\nnorm_squared = 96.0")
    assert "Your code started 3 processes (os.fork or subprocess); they were ended with the call" in said, said
    _answers(km, kc)
    assert output(kc, "print(sorted(_descendants()))") == before
