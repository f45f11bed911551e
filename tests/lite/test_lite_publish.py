"""Publishing the site, in Debian's Chromium: what students' browsers keep, across sites and updates.

- Two sites on one origin (two terms' builds under two paths of one server, different
  --site-name): a notebook saved in site A is not seen in site B, and it is still there in A.
- An update: the instructor publishes v1; a student runs the notebook (JupyterLab autosaves
  their copy); the instructor publishes v2 to the same place; the student reloads and runs the
  setup cell: it says a newer version exists, one click opens v2 beside their copy, and their
  copy is unchanged.

Outside requests are refused throughout (numpy is not needed here).
"""

from __future__ import annotations

import functools
import json
import subprocess
import sys
import threading
from pathlib import Path

import nbformat
import pytest

from lite_build import browse
from lite_build.build import storage_name
from lite_build.serve import QuietServer, SiteHandler, SiteServer

from .conftest import ROOT

pytestmark = pytest.mark.browser

TERM_B = "lite2-test-term-b"
LESSON = "update_lesson.ipynb"
V1_TEXT = "Version one of the update lesson."
V2_TEXT = "Version two of the update lesson, published later."
STUDENT_NOTE = "# my own note, typed in site A"


def write_lesson(folder: Path, text: str) -> Path:
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell(text), nbformat.v4.new_code_cell('print("the lesson ran")')]
    path = folder / LESSON
    nbformat.write(nb, path)
    return path


def build(site: Path, contents: Path, site_name: str) -> None:
    proc = subprocess.run(
        [
            sys.executable,
            str(ROOT / "lite_build" / "build.py"),
            "--output-dir",
            str(site),
            "--contents",
            str(contents),
            "--site-name",
            site_name,
            "--no-stored-outputs",  # what is published, not the lessons' first paint (test_lite_offline)
        ],
        capture_output=True,
        text=True,
        timeout=900,
    )
    if proc.returncode != 0:
        pytest.fail(f"the site build failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}", pytrace=False)


@pytest.fixture(scope="module")
def term_site(tmp_path_factory):
    """A second site (v1 of the update lesson), with its own --site-name."""
    work = tmp_path_factory.mktemp("term-b")
    (work / "v1").mkdir()
    site = work / "site"
    build(site, write_lesson(work / "v1", V1_TEXT), TERM_B)
    return site


def cell_sources(page) -> list[str]:
    return page.locator(".jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook .jp-Cell").evaluate_all(
        "cells => cells.map(c => [...c.querySelectorAll('.cm-line, .jp-RenderedMarkdown')]"
        ".map(l => l.textContent).join('\\n'))"
    )


def wait_cells(page, n: int) -> None:
    """The notebook shows at least `n` cells (it renders them in turns after it opens)."""
    browse.cell(page, n - 1).wait_for(timeout=browse.Timeouts.ms(browse.Timeouts.WIDGET))


def wait_saved(page, timeout: float) -> None:
    """The notebook's tab no longer shows unsaved changes."""
    page.wait_for_function(
        "() => !document.querySelector('.lm-TabBar-tab.jp-mod-dirty')", timeout=browse.Timeouts.ms(timeout), polling=500
    )


# ---------------------------------------------------------------- two sites, one origin


def test_a_notebook_saved_in_one_site_never_appears_in_another_on_the_same_origin(
    lite_site, term_site, lite_manifest, pw, tmp_path
):
    both = tmp_path / "host"
    both.mkdir()
    (both / "term-a").symlink_to(lite_site, target_is_directory=True)
    (both / "term-b").symlink_to(term_site, target_is_directory=True)
    httpd = QuietServer(("127.0.0.1", 0), functools.partial(SiteHandler, directory=str(both)))
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    origin = "http://{}:{}".format(*httpd.server_address[:2])
    lesson = "01_pytrees.ipynb"  # in both sites
    browser = browse.launch(pw)
    try:
        context, net = browse.offline_context(browser)
        page = context.new_page()
        # site A: the student adds a cell below the first one and saves
        browse.open_notebook(page, f"{origin}/term-a", lesson, net)
        browse.cell(page, 0).locator(".jp-InputPrompt").first.click()
        page.keyboard.press("Escape")
        page.keyboard.press("b")
        page.keyboard.press("Enter")
        page.keyboard.type(STUDENT_NOTE)
        page.keyboard.press("Escape")
        page.keyboard.press("Control+s")
        wait_saved(page, 30)
        in_a = cell_sources(page)
        # site B, same origin, same browser profile: its own lesson, unchanged
        browse.open_notebook(page, f"{origin}/term-b", lesson, net)
        wait_cells(page, 3)
        in_b = cell_sources(page)
        databases = page.evaluate("async () => (await indexedDB.databases()).map(d => d.name)")
        # site A again: the saved notebook is still there
        browse.open_notebook(page, f"{origin}/term-a", lesson, net)
        wait_cells(page, 3)
        in_a_again = cell_sources(page)
        context.close()
    finally:
        browser.close()
        httpd.shutdown()
        httpd.server_close()

    assert STUDENT_NOTE in in_a[1], in_a[:3]
    assert not any(STUDENT_NOTE in src for src in in_b), in_b[:3]
    # B's lesson from the top, as published (the notebook page renders cells as they scroll in,
    # so the cells on the page are not all of them)
    assert "Pytrees and structured parameters" in in_b[1], in_b[:3]
    assert STUDENT_NOTE in in_a_again[1] and "Pytrees and structured parameters" in in_a_again[2], in_a_again[:3]
    # each site kept its files under its own storage name
    a_name, b_name = storage_name(lite_manifest["site_name"]), storage_name(TERM_B)
    assert a_name != b_name
    assert any(a_name in (d or "") for d in databases) and any(b_name in (d or "") for d in databases), databases
    assert net.refused == [] or all("cdn.jsdelivr.net" in u for u in net.refused), net.refused


# ---------------------------------------------------------------- an update, published


def test_a_student_is_told_of_a_new_version_and_opens_it_beside_their_copy(term_site, pw, tmp_path):
    server = SiteServer(term_site).start()
    browser = browse.launch(pw)
    shot = ROOT / "artifacts" / "lite-update-notice.png"
    shot.parent.mkdir(exist_ok=True)
    try:
        context, net = browse.offline_context(browser)
        page = context.new_page()
        # v1 is published; the student runs the lesson; its copy is saved in the browser (by
        # JupyterLab's autosave, every 120 s, or by the student: the same stored copy; Ctrl+S here)
        browse.open_notebook(page, server.url, LESSON, net)
        browse.wait_kernel_ready(page)
        first_run = [browse.run_cell(page, 0), browse.run_cell(page, 2)]
        page.keyboard.press("Control+s")
        wait_saved(page, 30)
        copy_v1 = cell_sources(page)

        # the instructor publishes v2 to the same place
        (tmp_path / "v2").mkdir()
        build(term_site, write_lesson(tmp_path / "v2", V2_TEXT), TERM_B)
        published = json.loads((term_site / "files" / LESSON).read_text())
        version = published["metadata"]["pytree_lab"]["site_version"]

        # the student comes back by the lesson's link: their copy opens; its setup cell tells of the
        # new version (a reload finds the notebook only when the workspace was saved before it)
        browse.open_notebook(page, server.url, LESSON)
        browse.wait_kernel_ready(page)
        copy_after_reload = cell_sources(page)
        setup = browse.run_cell(page, 0)
        notice = browse.cell(page, 0).locator("ul.pytree-lab-updates")
        notice.wait_for(timeout=browse.Timeouts.ms(browse.Timeouts.WIDGET))
        notice_text = notice.inner_text()
        notice.scroll_into_view_if_needed()
        page.screenshot(path=str(shot))
        link = notice.locator("a")
        with context.expect_page(timeout=browse.Timeouts.ms(browse.Timeouts.PAGE)) as opened:
            link.click()
        new_page = opened.value
        new_page.locator(".jp-Notebook .jp-Cell").first.wait_for(timeout=browse.Timeouts.ms(browse.Timeouts.PAGE))
        new_page.locator(".jp-RenderedMarkdown", has_text=V2_TEXT).first.wait_for(
            timeout=browse.Timeouts.ms(browse.Timeouts.WIDGET)
        )
        new_url = new_page.url
        current = new_page.locator("#jp-main-dock-panel .lm-TabBar-tab.lm-mod-current .lm-TabBar-tabLabel").first
        current.wait_for(timeout=browse.Timeouts.ms(browse.Timeouts.WIDGET))
        new_tab = current.inner_text()
        new_sources = cell_sources(new_page)
        new_page.close()
        # the student's copy, opened again from storage
        browse.open_notebook(page, server.url, LESSON, net)
        wait_cells(page, len(copy_v1))
        copy_later = cell_sources(page)
        copy_later_output = browse.cell_output(page, 2)  # the run the student saved
        listing = page.locator(".jp-DirListing-content .jp-DirListing-itemText")
        page.locator(".jp-DirListing-itemText", has_text="new version").first.wait_for(
            timeout=browse.Timeouts.ms(browse.Timeouts.WIDGET)
        )
        files = listing.all_inner_texts()
        context.close()
    finally:
        browser.close()
        server.stop()

    assert "the lesson ran" in first_run[1], first_run
    assert V1_TEXT in copy_v1[1]
    new_name = f"update_lesson (new version {version[:6]}).ipynb"
    assert V1_TEXT in copy_after_reload[1] and V2_TEXT not in " ".join(copy_after_reload)  # the copy, not v2
    assert f"The instructor published a newer version of {LESSON}" in notice_text, notice_text
    assert f"Your copy {LESSON} is kept as it is" in notice_text, notice_text
    assert new_name in notice_text, notice_text
    assert "Open the new version beside your copy" in setup, setup
    # one click opened v2, saved beside the copy
    assert new_tab == new_name, (new_tab, new_url)
    assert V2_TEXT in new_sources[1] and V1_TEXT not in " ".join(new_sources), new_sources
    # the copy is unchanged: v1's text and the student's run
    assert V1_TEXT in copy_later[1] and V2_TEXT not in " ".join(copy_later), copy_later
    assert len(copy_later) == len(copy_v1) and "the lesson ran" in copy_later_output, copy_later_output
    assert LESSON in files and new_name in files, files  # both, side by side in the file browser
