"""The guard in a real kernel (jupyter_client, ipykernel), row by row of docs/checks.md's table:
no mistake in an exercise cell, an answer or a loss ends the kernel or hangs it, and each ends in
one sentence. Every case is followed by a cell that must answer, with the variables set before
still there."""

from __future__ import annotations

import time

import pytest
from kernel_harness import output, real_kernel

SETUP = r"""
import sys
import jax.numpy as jnp
from pytree_lab import StepExplorer, course
course.setup()  # registers %%exercise, as the course notebooks do
from pytree_lab.exercises import cells
cells.CELL_BUDGET = 1.0  # seconds an exercise cell may compute
kept = 41
"""

# what the next cell prints: the variable kept, the recursion limit and IPython's exit given back
AFTER = "print(kept, sys.getrecursionlimit(), 'ask_exit' not in vars(get_ipython()), get_ipython().exit_now)"


@pytest.fixture(scope="module")
def kernel(tmp_path_factory):
    with real_kernel(tmp_path_factory.mktemp("kernel")) as (km, kc):
        output(kc, SETUP)
        limit = output(kc, "print(sys.getrecursionlimit())").strip()
        yield km, kc, limit


def _answers(km, kc, limit) -> None:
    """The kernel is alive a while later (an exit the kernel asked for takes 0.1 s to land) and
    answers the next cell with the variables kept and everything given back."""
    time.sleep(0.5)
    assert km.is_alive()
    assert output(kc, AFTER, timeout=60).split() == ["41", limit, "True", "False"]


SYS_EXIT = "sys.exit() (or exit()/quit()). In a notebook that would stop the check, so it was caught"
DOORS = ("exit()", "quit()", "get_ipython().ask_exit()", "sys.exit()", "raise SystemExit")


@pytest.mark.parametrize("door", DOORS)
def test_no_exit_in_an_exercise_cell_answer_or_loss_ends_the_kernel(kernel, door):
    km, kc, limit = kernel
    said = output(kc, f"%%exercise squared_norm\n{door}\nnorm_squared = 1.0")
    assert f"Your cell called {SYS_EXIT}: let the cell run to its end" in said, said
    assert "The kernel is fine" in said
    _answers(km, kc, limit)

    said = output(kc, f"def answer(x):\n    {door}\n    return x\ncourse.try_function(answer, 1.0, label='answer')")
    assert said.strip() == f"answer called {SYS_EXIT}: return the answer instead. The kernel is fine.", said
    _answers(km, kc, limit)

    said = output(
        kc,
        f"def loss(p, x, target):\n    {door}\n    return 0.0\n"
        "ex = StepExplorer(time_budget=2.0)\nprint(ex.set_loss(loss), ex.result.loss)\nprint(ex.diagram.message)",
    )
    assert said.startswith("None 4.0\n"), said  # the lesson's last good step is kept
    assert "The loss raised SystemExit, which would stop the kernel; it was caught." in said, said
    _answers(km, kc, limit)


def test_percent_exit_in_an_exercise_cell_is_one_sentence_and_the_kernel_answers(kernel):
    """IPython's %exit: the exercise cell runs IPython's syntax as the kernel does; this kernel has
    no such magic (exit() is the way out it has, caught above)."""
    km, kc, limit = kernel
    said = output(kc, "%%exercise squared_norm\n%exit\nnorm_squared = 1.0")
    assert said.startswith("Your cell raised UsageError: Line magic function `%exit` not found."), said
    _answers(km, kc, limit)


def test_an_endless_loop_is_stopped_after_its_budget(kernel):
    km, kc, limit = kernel
    said = output(kc, "%%exercise squared_norm\nwhile True:\n    pass", timeout=90)
    assert "Your cell was still running after 1 s of computing and was stopped" in said, said
    _answers(km, kc, limit)
    said = output(
        kc,
        "def loss(p, x, target):\n    while True:\n        pass\n"
        "ex = StepExplorer(time_budget=1.0)\nprint(ex.set_loss(loss), ex.result.loss)\nprint(ex.diagram.message)",
        timeout=90,
    )
    assert said.startswith("None 4.0\n") and "ran for more than 1 s of its own Python code" in said, said
    _answers(km, kc, limit)


RECURSE = {
    "a function that never stops": "def f(n):\n    return f(n + 1)\nnorm_squared = f(0)",
    "again inside except RecursionError": (
        "def f(n, again=True):\n    try:\n        return f(n + 1, again)\n    except RecursionError:\n"
        "        if again:\n            return f(n + 1, False)\n        raise\nnorm_squared = f(0)"
    ),
}


@pytest.mark.parametrize("code", list(RECURSE))
def test_deep_recursion_is_one_sentence_and_the_limit_is_given_back(kernel, code):
    km, kc, limit = kernel
    said = output(kc, f"%%exercise squared_norm\nsys.setrecursionlimit(200000 // 100)\n{RECURSE[code]}", timeout=90)
    # (recursing again from the limit can take past the cell's 1 s: stopped then, as a loop)
    assert "went deeper than Python allows (RecursionError" in said or "was still running after 1 s" in said, said
    _answers(km, kc, limit)


def test_a_flood_of_output_is_cut(kernel):
    km, kc, limit = kernel
    said = output(kc, "%%exercise squared_norm\nfor i in range(100000):\n    print('x' * 80)\nnorm_squared = 1.0")
    assert len(said) < 20_000, len(said)
    _answers(km, kc, limit)


def test_the_stop_button_ends_a_cell_that_loops_over_the_explorer(kernel):
    """A KeyboardInterrupt inside the loss is never swallowed: one interrupt ends the cell (each
    new loss is traced, and its own Python runs then; a stop in a jax.debug.callback is JAX's)."""
    km, kc, limit = kernel
    output(
        kc,
        "import time\n"
        "def make(i):\n"
        "    def loss(p, x, target):\n"
        "        time.sleep(0.1)  # the loss's own Python, as it is traced\n"
        "        return (jnp.dot(p['weight'], x) + p['bias'] - target) ** 2 + 0.0 * i\n"
        "    return loss\n"
        "ex = StepExplorer(time_budget=None)\nsteps = 0",
    )
    msg_id = kc.execute("for i in range(300):\n    ex.set_loss(make(i))\n    steps += 1")
    time.sleep(4.0)
    km.interrupt_kernel()
    reply = kc.get_shell_msg(timeout=60)
    while reply["parent_header"].get("msg_id") != msg_id:  # replies to earlier cells, not read
        reply = kc.get_shell_msg(timeout=60)
    assert reply["content"]["status"] == "error" and reply["content"]["ename"] == "KeyboardInterrupt", reply["content"]
    steps = int(output(kc, "print(steps)").strip())
    assert 0 < steps < 300, steps
    _answers(km, kc, limit)
