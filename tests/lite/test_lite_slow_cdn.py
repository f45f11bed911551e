"""A slow CDN, in Debian's Chromium: numpy's server answers, then stalls mid-download.

The built site is served as it is, except that its Pyodide lock names a second local server
(127.0.0.1, another port) as the place numpy comes from. That server answers the kernel's
HEAD probe at once (with the file's size), then sends the first 64 KiB of the download and
stalls for STALL_SECONDS before it drops the connection. Every other outside request is refused.

What a student must see: the setup cell says where numpy comes from; the lesson's tree-only
cells run; the `import jax` cell shows a progress line (what is downloading, how big, how long so
far) while it waits, then says in one paragraph why numpy is missing; and the file is fetched
once, however many later cells import numpy.
"""

from __future__ import annotations

import functools
import io
import json
import re
import threading
import time
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import pytest

from lite_build import browse
from lite_build.serve import QuietServer, SiteHandler

from .conftest import ROOT

pytestmark = pytest.mark.browser

LESSON = "01_pytrees.ipynb"
STALL_SECONDS = 20.0
NUMPY_BYTES = 5_000_000  # what the stalling server says the file holds
SENT_BEFORE_STALL = 64 * 1024


class StallingServer:
    """Answers HEAD at once; answers GET with headers and a first chunk, then stalls, then drops."""

    def __init__(self) -> None:
        self.requests: list[tuple[float, str, str]] = []  # (time, method, path)
        self.stop = threading.Event()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # noqa: D401 - quiet
                pass

            def _headers(self) -> None:
                self.send_response(200)
                self.send_header("Content-Type", "application/octet-stream")
                self.send_header("Content-Length", str(NUMPY_BYTES))
                self.send_header("Access-Control-Allow-Origin", "*")  # the site is another origin
                self.send_header("Access-Control-Expose-Headers", "Content-Length")
                self.send_header("Cache-Control", "no-store")
                self.end_headers()

            def do_HEAD(self):  # noqa: N802 - the base class's name
                outer.requests.append((time.monotonic(), "HEAD", self.path))
                self._headers()

            def do_GET(self):  # noqa: N802
                outer.requests.append((time.monotonic(), "GET", self.path))
                self._headers()
                try:
                    self.wfile.write(b"\0" * SENT_BEFORE_STALL)
                    self.wfile.flush()
                except OSError:
                    return
                outer.stop.wait(STALL_SECONDS)
                self.close_connection = True  # the rest never comes: the body is cut short

        self.httpd = QuietServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def base(self) -> str:
        host, port = self.httpd.server_address[:2]
        return f"http://{host}:{port}"

    def __enter__(self) -> StallingServer:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop.set()
        self.httpd.shutdown()
        self.httpd.server_close()


class SiteWithLockPointedAt(SiteHandler):
    """The built site, with numpy's lock entry pointing at `numpy_url` (pandas stays on the CDN)."""

    numpy_url = ""

    def send_head(self):
        if self.path.split("?")[0].endswith("/static/pyodide/pyodide-lock.json"):
            lock = json.loads((Path(self.directory) / "static" / "pyodide" / "pyodide-lock.json").read_text())
            entry = lock["packages"]["numpy"]
            entry["file_name"] = self.numpy_url + "/" + entry["file_name"].rsplit("/", 1)[-1]
            body = json.dumps(lock).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            return io.BytesIO(body)
        return super().send_head()


def test_a_stalled_numpy_download_shows_progress_and_is_fetched_once(lite_site, pw):
    with StallingServer() as stall:
        handler = type("Handler", (SiteWithLockPointedAt,), {"numpy_url": stall.base})
        httpd = QuietServer(("127.0.0.1", 0), functools.partial(handler, directory=str(lite_site)))
        threading.Thread(target=httpd.serve_forever, daemon=True).start()
        site_url = "http://{}:{}".format(*httpd.server_address[:2])
        stall_host = stall.base.split("://", 1)[1]
        browser = browse.launch(pw)
        progress_seen: list[str] = []
        failed_at = None
        try:
            context, net = browse.offline_context(browser)
            page = context.new_page()
            try:
                browse.open_notebook(page, site_url, LESSON, net)
                browse.wait_kernel_ready(page)
                started = time.monotonic()
                page.locator(".lm-MenuBar-itemLabel", has_text="Run").first.click()
                page.locator(".lm-Menu-itemLabel", has_text="Run All Cells").first.click()
                # while Run All goes on: the `import jax` cell (code cell 1) shows its progress line
                import_jax = browse.code_cells(page).nth(1)
                deadline = time.monotonic() + 120
                while time.monotonic() < deadline:
                    text = import_jax.locator(".jp-OutputArea").text_content() or ""
                    if "Waiting for numpy" in text and text not in progress_seen:
                        progress_seen.append(text)
                    if "numpy could not be downloaded" in text:
                        failed_at = time.monotonic()
                        break
                    time.sleep(0.5)
                waited = time.monotonic() - started
                page.wait_for_function(
                    """() => [...document.querySelectorAll(
                        '.jp-NotebookPanel:not(.lm-mod-hidden) .jp-CodeCell .jp-InputPrompt')]
                        .every(p => /^\\[(\\d+| )\\]:$/.test(p.textContent.trim()))""",
                    timeout=browse.Timeouts.ms(300),
                    polling=250,
                )
                outputs = browse.code_cells(page).evaluate_all(
                    "cells => cells.map(c => [...c.querySelectorAll('.jp-OutputArea-output')]"
                    ".map(o => o.textContent).join('\\n'))"
                )
                tree_paths = page.locator(".jp-NotebookPanel:not(.lm-mod-hidden) [role=tree] [data-path]").evaluate_all(
                    "els => els.map(e => e.dataset.path)"
                )
                shot = ROOT / "artifacts" / "lite-slow-cdn.png"
                shot.parent.mkdir(exist_ok=True)
                import_jax.scroll_into_view_if_needed()
                page.screenshot(path=str(shot))
            finally:
                browse.release(net)
                context.close()
        finally:
            browser.close()
            httpd.shutdown()
            httpd.server_close()
        requests = list(stall.requests)

    # where numpy comes from, said by the setup cell
    assert f"numpy and pandas are loading in the background (from {stall_host})" in outputs[0], outputs[0]
    # the progress line: what, how big, how long so far, the bound
    assert progress_seen, f"no progress line seen; the cell showed: {outputs[1]!r}"
    line = re.search(
        r"Waiting for numpy \((\d+\.\d) MB\) and pandas from (\S+): (\d+) s so far, at most (\d+) s", progress_seen[-1]
    )
    assert line, progress_seen
    assert line[1] == f"{NUMPY_BYTES / 1e6:.1f}", progress_seen  # the size the server gave
    assert line[2].rstrip(":") == stall_host, line[2]
    seconds_seen = [int(m) for t in progress_seen for m in re.findall(r"(\d+) s so far", t)]
    assert max(seconds_seen) >= 4, progress_seen  # rewritten as the wait goes on
    # then what happened, once, in the same cell, ending the progress line
    assert "numpy could not be downloaded from Pyodide's CDN: the download failed" in outputs[1], outputs[1]
    assert "Stopped waiting after" in outputs[1], outputs[1]
    assert "this cell runs when they are loaded" not in outputs[1], outputs[1]  # no tail of the progress line left
    said = [i for i, o in enumerate(outputs) if "numpy could not be downloaded from Pyodide's CDN: " in o]
    assert said == [1], said  # the paragraph, once (later cells say one short line each)
    # the tree-only parts ran: the lesson's params tree is drawn
    assert {"['bias']", "['weight']"} <= set(tree_paths), tree_paths
    # fetched once: one HEAD (the probe) and one GET, for the whole of Run All
    numpy_requests = [(m, p) for _, m, p in requests if "numpy" in p]
    assert [m for m, _ in numpy_requests] == ["HEAD", "GET"], requests
    assert requests == [r for r in requests if "numpy" in r[2]], requests  # nothing else was asked of it
    # one stall, not two: the cell said so about STALL_SECONDS after the one GET began
    assert failed_at is not None, outputs[1]
    get_at = next(t for t, m, p in requests if m == "GET")
    assert STALL_SECONDS - 1 <= failed_at - get_at < STALL_SECONDS + 15, (failed_at - get_at, waited)
