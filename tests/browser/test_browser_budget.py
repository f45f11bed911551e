"""The time budget in a real JupyterLab: a student's answer that never returns, checked by a click
in the page, is stopped and said on the card; the kernel stays alive with nothing left armed or
running, and the fixed answer passes on the next click."""

import pytest

from .harness import Timeouts

pytestmark = pytest.mark.browser

CELLS = [
    """\
import signal, threading
import jax, jax.numpy as jnp
from pytree_lab.course import check_button
from pytree_lab.exercises import Evidence

ran_on_main = []

def answer(flat_params, x):
    ran_on_main.append(threading.current_thread() is threading.main_thread())
    while True:  # the student's endless loop
        pass

looping = check_button("grad_over_flat_params", lambda: answer, evidence=Evidence())
looping""",
]


def wait_status(card, start: str, timeout: float) -> str:
    status = card.locator(".ptl-ex-status")
    card.page.wait_for_function(
        "([el, start]) => el.textContent.startsWith(start)",
        arg=[status.element_handle(), start],
        timeout=Timeouts.ms(timeout),
    )
    return status.text_content()


def test_an_endless_answer_checked_from_the_page_is_stopped_and_said(open_module_nb):
    nb = open_module_nb(CELLS, wait_for=".ptl-ex")
    card = nb.panel.locator(".jp-CodeCell .jp-OutputArea").nth(0).locator(".ptl-ex")
    card.get_by_role("button", name="Check my answer").click()
    # the function answer's budget is 10 s of computing; its later cases are not waited for again
    said = wait_status(card, "Check 1: not yet", 10 * 4 + Timeouts.ROUND_TRIP)
    assert said.startswith("Check 1: not yet, score 0.00 (0 of 5 cases right).")
    feedback = card.locator(".ptl-ex-feedback").text_content()
    assert "your function was still running after 10 s of computing and was stopped" in feedback
    assert feedback == nb.value("looping.feedback") and nb.value("looping.status") == "failed"
    assert nb.value("len(ran_on_main)") == 1  # called once: the stuck function is not called again
    # the kernel is alive and nothing of the budget is left: no timer, no handler, no watchdog
    assert nb.value("signal.getitimer(signal.ITIMER_REAL)") == [0.0, 0.0]
    assert nb.value("signal.getsignal(signal.SIGALRM) is signal.SIG_DFL") is True
    assert nb.value("[t.name for t in threading.enumerate() if 'budget' in t.name]") == []

    nb.run(
        "def answer(flat_params, x):\n    return jax.grad(lambda p: jnp.sum((x @ p[:-1] + p[-1]) ** 2))(flat_params)"
    )  # the student fixes the cell: a new function, checked as usual
    card.get_by_role("button", name="Check my answer").click()
    said = wait_status(card, "Check 2:", Timeouts.ROUND_TRIP * 4)
    assert said.startswith("Check 2: passed, score 1.00 (5 of 5 cases right).")
    assert nb.value("looping.status") == "passed"
