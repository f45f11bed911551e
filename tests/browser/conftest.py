"""Fixtures for the real-browser suite: one JupyterLab server and one Chromium page per session.

Tests get notebooks through the `open_nb` factory (closed after the test) or `open_module_nb`
(shared by a module's tests, which then reset the state they touch). Closing a notebook
shuts its kernel down, so the shared page starts each test with only what it asked for.
On a failure, a screenshot of the page goes to artifacts/browser-failures/.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from .harness import (
    LIGHT,
    HarnessError,
    Notebook,
    Timeouts,
    launch_chromium,
    open_lab,
    open_notebook,
    set_theme,
    start_lab,
)

ARTIFACTS = Path(__file__).resolve().parents[2] / "artifacts" / "browser-failures"


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_]+", "_", text).strip("_")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    # while the test's fixtures are still alive: the page shows what went wrong
    page = item.funcargs.get("lab_page") if hasattr(item, "funcargs") else None
    if page is None or not report.failed or report.when not in ("setup", "call"):
        return
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    shot = ARTIFACTS / f"{_slug(item.nodeid)}.png"
    try:
        page.screenshot(path=str(shot))
        report.sections.append(("browser", f"screenshot: {shot}"))
    except Exception as err:  # a debugging aid must never mask the real failure
        report.sections.append(("browser", f"no screenshot: {err}"))
    if page.pytree_lab_errors:
        report.sections.append(("page errors", "\n".join(page.pytree_lab_errors)))
    if getattr(page, "lab_errors", None):
        report.sections.append(("JupyterLab's own page errors", "\n".join(page.lab_errors)))


@pytest.fixture(scope="session")
def lab_server(tmp_path_factory):
    server, error = None, None
    try:
        server = start_lab(tmp_path_factory.mktemp("lab"))
    except HarnessError as err:
        error = str(err)
    if error:
        pytest.fail(error, pytrace=False)
    yield server
    server.stop()


@pytest.fixture(scope="session")
def browser(pw):
    chromium, error = None, None
    try:
        chromium = launch_chromium(pw)
    except HarnessError as err:
        error = str(err)
    if error:
        pytest.fail(error, pytrace=False)
    yield chromium
    chromium.close()


def _page_error(page, exc) -> None:
    """An uncaught error in the page, with the test that was running. One whose stack holds only
    JupyterLab's own bundle (jlab_core) is JupyterLab's (seen: its notebook removing a node twice
    while the harness runs a cell) and goes to `lab_errors`, shown in a failure's report; every
    other error is in `pytree_lab_errors`, which the tests assert empty."""
    text = f"{exc} (during {page.pytree_lab_test})"
    frames = [line for line in (getattr(exc, "stack", "") or "").splitlines() if line.strip().startswith("at ")]
    if frames and all("/static/lab/jlab_core." in line for line in frames):
        page.lab_errors.append(text)
    else:
        page.pytree_lab_errors.append(text)


@pytest.fixture(scope="session")
def lab_page(browser, lab_server):
    """The lab shell, loaded once; page errors are collected for failure reports."""
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    page = context.new_page()
    page.set_default_timeout(Timeouts.ms(Timeouts.WIDGET_VIEW))
    page.pytree_lab_errors = []
    page.lab_errors = []  # JupyterLab's own, kept apart (see _page_error)
    page.pytree_lab_test = ""  # the test running (set by _name_the_test): each error names it
    page.on("pageerror", lambda exc: _page_error(page, exc))
    open_lab(page, lab_server)
    yield page
    context.close()


class NotebookOpener:
    """`opener(cells, wait_for=selector)` -> a Notebook, every cell run, its widgets shown."""

    def __init__(self, page, server, stem: str):
        self.page, self.server, self.stem = page, server, stem
        self.opened: list[Notebook] = []

    def __call__(self, cells: list[str], wait_for: str | None = None, name: str | None = None) -> Notebook:
        nb_name = name or f"{self.stem}_{len(self.opened)}.ipynb"
        nb = open_notebook(self.page, self.server, nb_name, cells, wait_for=wait_for)
        self.opened.append(nb)
        return nb

    def close_all(self) -> None:
        for nb in self.opened:
            nb.close()


@pytest.fixture
def open_nb(request, lab_page, lab_server):
    opener = NotebookOpener(lab_page, lab_server, _slug(request.node.name))
    yield opener
    opener.close_all()


@pytest.fixture(scope="module")
def open_module_nb(request, lab_page, lab_server):
    opener = NotebookOpener(lab_page, lab_server, _slug(request.module.__name__.rsplit(".", 1)[-1]))
    yield opener
    opener.close_all()


@pytest.fixture(autouse=True)
def _name_the_test(request):
    """The shared page's errors say which test was running when they were raised."""
    if "lab_page" in request.fixturenames:
        request.getfixturevalue("lab_page").pytree_lab_test = request.node.nodeid
    yield


@pytest.fixture(autouse=True)
def _light_theme_after_test(request):
    """A test that switches theme leaves the shared page light again."""
    yield
    if "lab_page" in request.fixturenames:
        page = request.getfixturevalue("lab_page")
        if page.evaluate("() => document.body.dataset.jpThemeName") != LIGHT:
            set_theme(page, LIGHT)
