"""The explorer, its diagram and a quiz in Jupyter Notebook 7 and in Voilà, for real.

One jupyter_server (the harness's, with the `notebook` and `voila` server extensions of this
venv) serves the same notebook to Notebook 7 (/notebooks/...) and to Voilà (/voila/render/...).
In each front end a test moves the explorer's x[0] slider by keyboard and by mouse, clicks the
diagram's bias leaf, answers the quiz, and then asserts the *kernel's* state, read through a
second client on that front end's kernel: `ex.result` against jax called directly here,
`ex.selected_path`, `quiz.answered`. JupyterLab is covered by the rest of tests/browser.
"""

from __future__ import annotations

import time
import urllib.parse

import pytest

from .harness import HarnessError, KernelProbe, Timeouts, start_lab, write_notebook
from .pages import slider_handle, tree_cell, wait_selected
from .test_browser_explorer import oracle

pytestmark = pytest.mark.browser

CELLS = [
    "from pytree_lab import StepExplorer\n"
    "ex = StepExplorer()\n"
    "ex",
    "from pytree_lab.course import grad_structure_quiz\n"
    "quiz = grad_structure_quiz()\n"
    "quiz",
]
NAME = "frontends.ipynb"
LESSON = dict(x1=1.0, target=3.0, lr=0.05, w0=1.0, w1=-1.0, b=0.0)


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    srv, error = None, None
    try:
        srv = start_lab(tmp_path_factory.mktemp("frontends"),
                        args=["--JupyterNotebookApp.expose_app_in_browser=True"])
    except HarnessError as err:
        error = str(err)
    if error:
        pytest.fail(error, pytrace=False)
    write_notebook(srv.root_dir, NAME, CELLS)
    yield srv
    srv.stop()


@pytest.fixture
def page(browser, server):
    context = browser.new_context(viewport={"width": 1400, "height": 2000})
    pg = context.new_page()
    pg.set_default_timeout(Timeouts.ms(Timeouts.WIDGET_VIEW))
    errors: list[str] = []
    pg.on("pageerror", lambda e: errors.append(str(e)))
    pg.pytree_lab_errors = errors
    yield pg
    context.close()
    # each test starts from a fresh kernel: Notebook 7 would reuse the last test's session
    for session in server.api("GET", "/api/sessions"):
        server.api("DELETE", f"/api/sessions/{session['id']}")
    for kernel in server.api("GET", "/api/kernels"):
        server.api("DELETE", f"/api/kernels/{kernel['id']}")


def _kernels(server) -> set[str]:
    return {k["id"] for k in server.api("GET", "/api/kernels")}


def _probe_new_kernel(server, before: set[str]) -> tuple[str, KernelProbe]:
    deadline = time.monotonic() + Timeouts.KERNEL_READY
    while time.monotonic() < deadline:
        new = _kernels(server) - before
        if len(new) == 1:
            (kid,) = new
            if server.connection_file(kid).exists():
                return kid, KernelProbe(server.connection_file(kid))
        time.sleep(Timeouts.POLL * 4)
    raise HarnessError(f"no new kernel appeared; kernels: {_kernels(server)}\n{server.log_tail()}")


def _open_notebook7(page, server) -> KernelProbe:
    before = _kernels(server)
    page.goto(f"{server.url}/notebooks/{NAME}?token={server.token}", timeout=Timeouts.ms(Timeouts.PAGE_LOAD))
    page.wait_for_function("() => window.jupyterapp !== undefined", timeout=Timeouts.ms(Timeouts.PAGE_LOAD))
    # Notebook 7's own "run all" (the Run menu's command), once its kernel is ready
    page.evaluate("""async () => {
        const app = window.jupyterapp;
        await app.started; await app.restored;
        const w = app.shell.currentWidget;
        await w.context.ready; await w.sessionContext.ready;
        await w.sessionContext.session.kernel.info;
        await app.commands.execute('notebook:run-all-cells');
    }""")
    _, probe = _probe_new_kernel(server, before)
    return probe


def _open_voila(page, server) -> KernelProbe:
    before = _kernels(server)
    page.goto(f"{server.url}/voila/render/{urllib.parse.quote(NAME)}?token={server.token}",
              timeout=Timeouts.ms(Timeouts.RUN_ALL))
    _, probe = _probe_new_kernel(server, before)
    return probe


OPENERS = {"notebook7": _open_notebook7, "voila": _open_voila}


def _wait_result(probe, x0: float) -> dict:
    """ex.result once the kernel has computed the step for slider x[0] == x0."""
    return probe.wait_for("[ex.sliders['x[0]'].value, vars(ex.result)]",
                          lambda v: v[0] == pytest.approx(x0, abs=1e-9) and v[1]["params"] is not None
                          and v[1]["loss"] != 4.0, timeout=Timeouts.ROUND_TRIP)[1]


def _assert_step(result: dict, x0: float) -> None:
    want = oracle(x0, **LESSON)
    assert result["loss"] == pytest.approx(want["loss"], rel=1e-5)
    assert result["grads"]["weight"] == pytest.approx(want["grads"]["weight"], rel=1e-5)
    assert result["grads"]["bias"] == pytest.approx(want["grads"]["bias"], rel=1e-5)
    assert result["updated"]["weight"] == pytest.approx(want["updated"]["weight"], rel=1e-5, abs=1e-6)
    assert result["updated"]["bias"] == pytest.approx(want["updated"]["bias"], rel=1e-5, abs=1e-6)


NOTEBOOK7_ARROWS = pytest.mark.xfail(strict=True, reason=(
    "Notebook 7: an arrow key on a focused pytree-lab slider moves focus to a cell and leaves the value "
    "unchanged (issue 18, section 2; slider.js is being fixed)"))


@pytest.mark.parametrize("frontend", [pytest.param("notebook7", marks=NOTEBOOK7_ARROWS), "voila"])
def test_slider_keyboard_steps_the_kernel(frontend, server, page):
    probe = OPENERS[frontend](page, server)
    try:
        page.locator('[role="tree"]').first.wait_for(state="visible", timeout=Timeouts.ms(Timeouts.RUN_ALL))
        assert probe.value("vars(ex.result)")["loss"] == pytest.approx(4.0)  # the lesson's start, by hand
        explorer = page.locator(".pytree-lab-explorer").first
        handle = slider_handle(explorer, "x[0]")
        handle.focus()
        handle.press("ArrowRight")  # one step (0.01)
        x0 = probe.wait_for("ex.sliders['x[0]'].value", lambda v: v != 2.0)
        assert x0 == pytest.approx(2.01, abs=1e-9)
        _assert_step(_wait_result(probe, x0), x0)
        assert handle.evaluate("el => el === document.activeElement")  # the key did not move focus away
    finally:
        probe.close()


@pytest.mark.parametrize("frontend", ["notebook7", "voila"])
def test_mouse_diagram_and_quiz_drive_the_kernel(frontend, server, page):
    probe = OPENERS[frontend](page, server)
    try:
        page.locator('[role="tree"]').first.wait_for(state="visible", timeout=Timeouts.ms(Timeouts.RUN_ALL))
        page.locator(".bqplot rect.bar").first.wait_for(state="attached")
        assert probe.value("vars(ex.result)")["loss"] == pytest.approx(4.0)
        explorer = page.locator(".pytree-lab-explorer").first

        # mouse: a click three quarters along x[0]'s track (range -2..6) moves it there
        handle = slider_handle(explorer, "x[0]")
        box = handle.bounding_box()
        page.mouse.click(box["x"] + box["width"] * 0.75, box["y"] + box["height"] / 2)
        x0 = probe.wait_for("ex.sliders['x[0]'].value", lambda v: abs(v - 2.0) > 1.0)
        assert 3.0 < x0 < 5.0  # near -2 + 0.75 * 8 = 4 (the thumb's width shifts it a little)
        _assert_step(_wait_result(probe, x0), x0)

        # the diagram: clicking the bias leaf selects it in the kernel
        tree_cell(explorer, "['bias']", "params").click()
        assert probe.wait_for("ex.selected_path", lambda v: v == "['bias']") == "['bias']"
        wait_selected(explorer, "['bias']")

        # the quiz answers, graded by the kernel
        quiz = page.locator(".ptl-ex").filter(has_text="What structure does grad(loss)(params) have?").first
        quiz.get_by_label("A pytree corresponding to params").check()
        assert probe.wait_for("quiz.selected", lambda v: v == 1) == 1
        quiz.get_by_role("button", name="Check answer").click()
        assert probe.wait_for("quiz.answered", lambda v: v is True) is True
        quiz.locator(".ptl-ex-status").filter(has_text="Correct.").wait_for()
        # Page errors are not asserted: Notebook 7's page logs "Cannot read properties of undefined
        # (reading 'schema')" while it loads; what this test checks is the kernel's state above.
    finally:
        probe.close()
