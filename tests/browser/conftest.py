"""Fixtures for the real-browser suite: one JupyterLab server and one Chromium page per session.

Tests get notebooks through the `open_nb` factory, which closes each notebook and shuts its
kernel down afterwards, so the shared page starts every test with an empty main area.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from .harness import (
    LIGHT,
    HarnessError,
    Timeouts,
    launch_chromium,
    open_lab,
    open_notebook,
    set_theme,
    start_lab,
)

ARTIFACTS = Path(__file__).resolve().parents[2] / "artifacts" / "browser-failures"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    setattr(item, f"rep_{report.when}", report)


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
def browser():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        chromium, error = None, None
        try:
            chromium = launch_chromium(pw)
        except HarnessError as err:
            error = str(err)
        if error:
            pytest.fail(error, pytrace=False)
        yield chromium
        chromium.close()


@pytest.fixture(scope="session")
def lab_page(browser, lab_server):
    """The lab shell, loaded once; page errors are collected for failing tests to show."""
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    page = context.new_page()
    page.set_default_timeout(Timeouts.ms(Timeouts.WIDGET_VIEW))
    page.pytree_lab_errors = []
    page.on("pageerror", lambda exc: page.pytree_lab_errors.append(str(exc)))
    open_lab(page, lab_server)
    yield page
    context.close()


@pytest.fixture
def open_nb(request, lab_page, lab_server):
    """Factory: `open_nb(cells, wait_for=selector)` -> Notebook, run and showing its widgets."""
    opened = []

    def factory(cells, wait_for=None, name=None):
        stem = re.sub(r"[^A-Za-z0-9_]+", "_", request.node.name)
        nb_name = name or f"{stem}_{len(opened)}.ipynb"
        nb = open_notebook(lab_page, lab_server, nb_name, cells, wait_for=wait_for)
        opened.append(nb)
        return nb

    yield factory

    failed = any(getattr(request.node, f"rep_{when}", None) and getattr(request.node, f"rep_{when}").failed
                 for when in ("setup", "call"))
    if failed:
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        stem = re.sub(r"[^A-Za-z0-9_]+", "_", request.node.nodeid)
        try:
            lab_page.screenshot(path=str(ARTIFACTS / f"{stem}.png"))
        except Exception:  # a screenshot is a debugging aid; never mask the real failure
            pass
        if lab_page.pytree_lab_errors:
            print("page errors:\n" + "\n".join(lab_page.pytree_lab_errors))
        print("server log tail:\n" + lab_server.log_tail())
    for nb in opened:
        nb.close()
    if lab_page.evaluate("() => document.body.dataset.jpThemeName") != LIGHT:
        set_theme(lab_page, LIGHT)
