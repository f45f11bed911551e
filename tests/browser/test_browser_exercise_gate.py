"""A check card in a real JupyterLab, as a student meets it: no reference solution for the
untouched template, one after a real attempt; the verdict lives on the card only and follows
each click (nothing printed above it goes stale). Each test ends on Python's state or the numbers on screen; the card's
states are screenshotted in the light and dark themes (artifacts/screenshots)."""

from pathlib import Path

import pytest

from .harness import Timeouts, set_theme

pytestmark = pytest.mark.browser

SHOTS = Path(__file__).resolve().parents[2] / "artifacts" / "screenshots"

TEMPLATE = '''\
%%exercise grad_over_flat_params
def grad_over_flat_params(flat_params, x):
    # TODO: return the gradient of the sum of squared predictions (jax.grad)
    ...'''

MEAN_ATTEMPT = '''\
%%exercise grad_over_flat_params
def grad_over_flat_params(flat_params, x):
    def loss(p):
        return jnp.mean((x @ p[:-1] + p[-1]) ** 2)
    return jax.grad(loss)(flat_params)'''

CELLS = [
    """\
import jax, jax.numpy as jnp
from pytree_lab.course import check_cell, setup
from pytree_lab.exercises import default_evidence
setup()""",
    TEMPLATE,
    """\
card = check_cell("grad_over_flat_params")
card""",
]


@pytest.fixture(scope="module")
def gate_nb(open_module_nb):
    nb = open_module_nb(CELLS, wait_for=".ptl-ex-check")
    card = nb.panel.locator(".jp-CodeCell").nth(2)
    return nb, card, card.locator(".ptl-ex-check")


def wait_status(widget, text: str) -> None:
    widget.locator(".ptl-ex-status", has_text=text).wait_for(timeout=Timeouts.ms(Timeouts.ROUND_TRIP))


def shoot(page, widget, name: str) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    for theme in ("JupyterLab Light", "JupyterLab Dark"):
        set_theme(page, theme)
        widget.screenshot(path=str(SHOTS / f"{name}-{theme.split()[-1].lower()}.png"))
    set_theme(page, "JupyterLab Light")


def test_no_reference_solution_for_the_template_nor_for_a_graded_exercise_after_a_real_attempt(gate_nb):
    nb, _cell, widget = gate_nb
    reveal = widget.get_by_role("button", name="Show a reference solution")
    wait_status(widget, "Check 1: not yet")
    assert "Not answered yet" in widget.locator(".ptl-ex-feedback").text_content()
    widget.get_by_role("button", name="Check my answer").click()
    nb.kernel.wait_for("[card.attempts, card.busy]", lambda v: v == [2, False])
    wait_status(widget, "Check 2: not yet")
    assert reveal.is_hidden()  # two checks of the untouched template: still nothing to reveal
    nb.run("card.reveal_solution()")  # nor does asking Python directly give it
    assert nb.value("[card.solution, card.solution_available, len(default_evidence().reveals)]") == ["", False, 0]
    shoot(nb.page, widget, "check-card-template")

    nb.run(MEAN_ATTEMPT)  # a real attempt, wrong: a mean where the sum was asked
    widget.get_by_role("button", name="Check my answer").click()
    nb.kernel.wait_for("[card.attempts, card.busy]", lambda v: v == [3, False])
    wait_status(widget, "Check 3: not yet, score 0.20 (1 of 5 cases right)")
    # the course's exercises are graded: a real attempt offers no solution either, even in a
    # checkout where the solution files are found (a practice exercise's: test_browser_exercises)
    assert nb.value("[card.exercise.graded, bool(card.exercise.solutions)]") == [True, True]
    assert reveal.is_hidden() and "reference solution" not in widget.locator(".ptl-ex-status").text_content()
    nb.run("card.reveal_solution()")
    wait_status(widget, "This exercise is graded: no reference solution is shown.")
    assert nb.value("[card.solution, card.solution_available, len(default_evidence().reveals)]") == ["", False, 0]
    assert (
        widget.locator(".ptl-ex-solution-box").is_hidden() and widget.locator(".ptl-ex-solution").text_content() == ""
    )
    shoot(nb.page, widget, "check-card-graded")


def test_the_verdict_is_on_the_card_only_and_follows_every_check(gate_nb):
    nb, cell, widget = gate_nb
    nb.run(MEAN_ATTEMPT.replace("jnp.mean", "jnp.sum"))  # now right
    widget.get_by_role("button", name="Check my answer").click()
    nb.kernel.wait_for("[card.attempts, card.busy]", lambda v: v == [4, False])
    wait_status(widget, "Check 4: passed, score 1.00")
    assert nb.value("[card.result.passed, card.result.score]") == [True, 1.0]
    text = cell.locator(".jp-OutputArea").inner_text()
    # the only verdict in the cell's output is the card's, and it is the latest one
    assert "Check 4: passed" in text and "Check 1" not in text and "not yet" not in text
    assert "All 5 cases pass" in widget.locator(".ptl-ex-feedback").text_content()
    shoot(nb.page, widget, "check-card-passed")
