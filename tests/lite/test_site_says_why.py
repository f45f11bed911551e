"""Broken copies of the built site, in Debian's Chromium: each says why on the page, in one sentence.

Copies of the one built site (hard links, so the copies are cheap) with a file of Pyodide's own
set missing, the project's wheel missing, or a wheel cut short; the intact site with the wheels'
requests failing in the network, with the browser's storage quota used up, and in a browser
without IndexedDB. Each page must show one sentence naming the cause and what to do, while a
student waits (the files are checked against the build's list as the page opens, not after a
timeout); the intact site says nothing.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import time
from pathlib import Path

import pytest

from lite_build import browse
from lite_build.build import CHECK_SCRIPT, CHECKED_PAGES, FILES_NAME
from lite_build.serve import SiteServer

from .conftest import PROBE_NOTEBOOK

pytestmark = pytest.mark.browser

NOTICE = "#pytree-lab-site-notice"
WAIT_S = 60.0  # the page's shell from 127.0.0.1 on busy cores; the check itself is a few HEAD requests


def broken_copy(site: Path, where: Path, remove=(), cut=()) -> Path:
    """A copy of `site` (hard links) without the files matching `remove`, with those matching `cut`
    cut to half their size (a new file, the original untouched)."""
    shutil.copytree(site, where, copy_function=os.link)
    gone = [p for pattern in remove for p in where.glob(pattern)]
    assert gone, remove
    for path in gone:
        path.unlink()
    for pattern in cut:
        for path in where.glob(pattern):
            data = path.read_bytes()
            path.unlink()
            path.write_bytes(data[: len(data) // 2])
    return where


def notice_of(pw, url: str, setup=None) -> tuple[list[dict], float]:
    """Open the probe notebook; the notice's lines ({cause, text}) and the seconds until the first."""
    browser = browse.launch(pw)
    try:
        context, net = browse.offline_context(browser)
        if setup is not None:
            setup(context)
        page = context.new_page()
        started = time.monotonic()
        page.goto(f"{url}/lab/index.html?path={PROBE_NOTEBOOK}", timeout=browse.Timeouts.ms(browse.Timeouts.PAGE))
        page.locator(f"{NOTICE} p").first.wait_for(timeout=browse.Timeouts.ms(WAIT_S))
        seconds = time.monotonic() - started
        page.wait_for_timeout(1500)  # a second cause, if any, comes from the same checks
        lines = page.eval_on_selector_all(
            f"{NOTICE} p", "ps => ps.map(p => ({cause: p.dataset.cause, text: p.textContent}))"
        )
        context.close()
    finally:
        browser.close()
    assert net.outside == [] or all("cdn.jsdelivr.net" in u for _, _, u in net.outside), net.outside
    return lines, seconds


def setup_cell_of(pw, url: str) -> str:
    """What the probe notebook's setup cell shows when run (once the kernel is ready)."""
    browser = browse.launch(pw)
    try:
        context, net = browse.offline_context(browser)
        page = context.new_page()
        browse.open_notebook(page, url, PROBE_NOTEBOOK, net)
        browse.wait_kernel_ready(page)
        said = browse.run_cell(page, 0).strip()
        context.close()
    finally:
        browser.close()
    return said


def shown_after_reload(page) -> None:
    """The probe notebook open again after a reload; when it is not, what the page showed instead
    (dialogs, tabs, a screenshot in artifacts/): seen once on a loaded machine, no tab in 60 s."""
    try:
        browse.show_notebook(page, PROBE_NOTEBOOK)
    except Exception as err:
        shot = Path(__file__).resolve().parents[2] / "artifacts" / "lite-reload-no-notebook.png"
        shot.parent.mkdir(exist_ok=True)
        page.screenshot(path=str(shot))
        seen = page.evaluate("""() => ({
            dialogs: [...document.querySelectorAll('.jp-Dialog')].map(d => d.textContent.slice(0, 300)),
            tabs: [...document.querySelectorAll('.lm-TabBar-tab')].map(t => t.textContent),
            splash: !!document.querySelector('#jupyterlab-splash, .jp-LabShell') })""")
        raise AssertionError(f"after the reload the notebook did not open: {seen}; screenshot {shot}\n{err}") from None


def one_sentence(text: str) -> bool:
    return text.count(". ") == 0 and text.endswith(".") and "\n" not in text


def test_the_build_lists_every_file_with_size_and_hash_and_loads_the_check_first(lite_site):
    listed = json.loads((lite_site / FILES_NAME).read_text())["files"]
    on_disk = {
        p.relative_to(lite_site).as_posix()
        for p in lite_site.rglob("*")
        if p.is_file() and p.name not in (FILES_NAME, ".pytree-lab-build.json")
    }
    assert set(listed) == on_disk
    for rel in [r for r in listed if r.endswith(".whl")][:5] + ["lab/index.html", CHECK_SCRIPT]:
        data = (lite_site / rel).read_bytes()
        assert listed[rel] == [len(data), hashlib.sha256(data).hexdigest()], rel
    for page in CHECKED_PAGES:
        head = (lite_site / page).read_text().split("</head>")[0]
        # the first script of the page, before JupyterLite's own: it runs while the shell loads
        assert head.index("<script") == head.index(f'<script src="../{CHECK_SCRIPT}"></script>'), page


def test_a_missing_file_of_pyodides_set_is_named_as_a_broken_upload(lite_site, tmp_path, pw):
    copy = broken_copy(lite_site, tmp_path / "site", remove=["static/pyodide/ipython-*.whl"])
    missing = next(lite_site.glob("static/pyodide/ipython-*.whl")).name
    with SiteServer(copy) as server:
        lines, seconds = notice_of(pw, server.url)
    assert [line["cause"] for line in lines] == ["upload"], lines
    text = lines[0]["text"]
    assert text.startswith("This copy of the site is incomplete: 1 of the files Python needs is missing on the server")
    assert f"static/pyodide/{missing}" in text and "upload the whole built folder again" in text
    assert one_sentence(text), text
    assert seconds < WAIT_S


def test_a_missing_project_wheel_is_named_and_a_cut_wheel_is_damaged(lite_site, tmp_path, pw):
    wheel = next(lite_site.glob("pypi/pytree_lab-*.whl")).name
    copy = broken_copy(lite_site, tmp_path / "site", remove=["pypi/pytree_lab-*.whl"], cut=["pypi/anywidget-*.whl"])
    with SiteServer(copy) as server:
        lines, _ = notice_of(pw, server.url)
    assert [line["cause"] for line in lines] == ["upload"], lines
    assert f"(pypi/{wheel}), so Python cannot start here" in lines[0]["text"]  # missing comes first
    with SiteServer(copy) as server:  # the setup cell says it in one sentence too (the installer read a 404 page)
        said = setup_cell_of(pw, server.url)
    assert said.startswith("The course packages could not be installed from this site (BadZipFile: "), said
    assert said.endswith("check the connection and reload the page.") and one_sentence(said), said
    (copy / "pypi" / wheel).write_bytes((lite_site / "pypi" / wheel).read_bytes())
    with SiteServer(copy) as server:
        lines, _ = notice_of(pw, server.url)
    assert lines[0]["text"].startswith("This copy of the site is damaged: 1 of the files Python needs has another size")
    assert "pypi/anywidget-" in lines[0]["text"] and one_sentence(lines[0]["text"])


def test_a_pyodide_wheel_of_the_right_size_with_other_bytes_is_named_as_damaged(lite_site, tmp_path, pw):
    """Random bytes of the wheel's own size: the sizes agree, Pyodide refuses the wheel (its sha256 is
    not the lock's) and the kernel never starts; the page compares the contents with the build's list."""
    copy = broken_copy(lite_site, tmp_path / "site", remove=["static/pyodide/ipython-*.whl"])
    wheel = next(lite_site.glob("static/pyodide/ipython-*.whl"))
    (copy / "static" / "pyodide" / wheel.name).write_bytes(os.urandom(wheel.stat().st_size))
    with SiteServer(copy) as server:
        lines, seconds = notice_of(pw, server.url)
    assert [line["cause"] for line in lines] == ["upload"], lines
    assert lines[0]["text"] == (
        "This copy of the site is damaged: 1 of the files Python needs differs from what the build made "
        f"(static/pyodide/{wheel.name}), so Python cannot start here; whoever published the site should upload "
        "the whole built folder again (or rebuild it with make lite-build)."
    )
    assert one_sentence(lines[0]["text"]) and seconds < WAIT_S


def test_a_network_failure_is_not_called_a_broken_upload(lite_server, pw):
    def drop_wheels(context):
        context.route("**/static/pyodide/*.whl", lambda route: route.abort("connectionreset"))

    lines, _ = notice_of(pw, lite_server.url, drop_wheels)
    assert [line["cause"] for line in lines] == ["network"], lines
    assert "this is the network, not the site: check the connection and reload the page." in lines[0]["text"]
    assert "upload" not in lines[0]["text"] and one_sentence(lines[0]["text"])


def test_a_full_storage_quota_is_said(lite_server, pw):
    def full(context):
        page = context.new_page()  # the quota is the origin's: set it through a first page's session
        session = context.new_cdp_session(page)
        origin = lite_server.url.rstrip("/")
        session.send("Storage.overrideQuotaForOrigin", {"origin": origin, "quotaSize": 1024})

    lines, _ = notice_of(pw, lite_server.url, full)
    assert [line["cause"] for line in lines] == ["full"], lines
    assert lines[0]["text"].startswith("This browser's storage for this site is full")
    assert "File > Download" in lines[0]["text"] and one_sentence(lines[0]["text"])


def test_a_browser_without_indexeddb_is_said(lite_server, pw):
    def no_indexeddb(context):
        context.add_init_script("Object.defineProperty(window, 'indexedDB', {get() { return undefined; }});")

    lines, _ = notice_of(pw, lite_server.url, no_indexeddb)
    assert "no-storage" in [line["cause"] for line in lines], lines
    text = next(line["text"] for line in lines if line["cause"] == "no-storage")
    assert text.startswith("This browser gives the site no storage of its own (IndexedDB is off")
    assert one_sentence(text)


def test_the_intact_site_says_nothing(lite_server, pw):
    browser = browse.launch(pw)
    try:
        context, net = browse.offline_context(browser)
        page = context.new_page()
        browse.open_notebook(page, lite_server.url, PROBE_NOTEBOOK, net)
        browse.wait_kernel_ready(page)
        checked = [u for _, u in net.requests if u.endswith(FILES_NAME)]
        assert checked, "the page did not read the list of files"
        assert page.locator(NOTICE).count() == 0
        context.close()
    finally:
        browser.close()


STORED = """async ([name, path]) => {
    if (!(await indexedDB.databases()).some(db => db.name === name)) return false;
    const db = await new Promise((ok, no) => {
        const r = indexedDB.open(name); r.onsuccess = () => ok(r.result); r.onerror = no; });
    const found = db.objectStoreNames.contains('files') && await new Promise(ok => {
        const r = db.transaction('files').objectStore('files').get(path); r.onsuccess = () => ok(!!r.result); });
    db.close();
    return found;
}"""
STORED_VERSION = """async ([name, path, version]) => {
    const db = await new Promise((ok, no) => {
        const r = indexedDB.open(name); r.onsuccess = () => ok(r.result); r.onerror = no; });
    const store = db.transaction('files', 'readwrite').objectStore('files');
    const item = await new Promise(ok => { const r = store.get(path); r.onsuccess = () => ok(r.result); });
    if (version !== null) {
        item.content.metadata.pytree_lab.site_version = version;
        await new Promise(ok => { const r = store.put(item, path); r.onsuccess = ok; });
    }
    db.close();
    return item.content.metadata.pytree_lab.site_version;
}"""


def test_a_stored_copy_older_than_the_sites_notebook_is_told_as_the_page_opens(lite_site, lite_server, pw):
    name = json.loads((lite_site / "jupyter-lite.json").read_text())["jupyter-config-data"]["contentsStorageName"]
    browser = browse.launch(pw)
    try:
        context, net = browse.offline_context(browser)
        page = context.new_page()
        browse.open_notebook(page, lite_server.url, PROBE_NOTEBOOK, net)
        browse.cell(page, 0).click()
        page.keyboard.press("Control+s")  # the student's stored copy
        page.wait_for_function(STORED, arg=[name, PROBE_NOTEBOOK], timeout=30_000)
        published = page.evaluate(STORED_VERSION, [name, PROBE_NOTEBOOK, None])
        link = f"{lite_server.url}/lab/index.html?path={PROBE_NOTEBOOK}"
        # the page opened again by the notebook's link (a reload finds the notebook only when the
        # workspace was saved before it: the launcher, seen on a loaded machine)
        page.goto(link, timeout=browse.Timeouts.ms(browse.Timeouts.PAGE))
        # the notebook shown again (its tab current), and the page's check of stored copies done
        shown_after_reload(page)
        page.locator("html[data-ptl-updates-checked]").wait_for(state="attached", timeout=browse.Timeouts.ms(WAIT_S))
        assert page.locator(NOTICE).count() == 0  # the copy is of the site's version: nothing to say

        page.evaluate(STORED_VERSION, [name, PROBE_NOTEBOOK, "0123456789abcdef"])  # saved from an older site
        started = time.monotonic()
        page.goto(link, timeout=browse.Timeouts.ms(browse.Timeouts.PAGE))
        line = page.locator(f"{NOTICE} p").first
        line.wait_for(timeout=browse.Timeouts.ms(WAIT_S))
        seconds = time.monotonic() - started
        text = line.text_content()
        assert line.get_attribute("data-cause") == f"update:{PROBE_NOTEBOOK}"
        assert text == (
            f"A newer version of {PROBE_NOTEBOOK} was published after you saved your copy {PROBE_NOTEBOOK} (your "
            "copy is what opens, unchanged): run its first cell to put the new version beside it as a new file."
        )
        assert published != "0123456789abcdef" and seconds < WAIT_S
        context.close()
    finally:
        browser.close()
