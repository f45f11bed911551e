"""numpy loads in the background: on the built site in Debian's Chromium, the setup cell starts
the download of the lock's numpy and returns, and a tree diagram renders while that download is
still in flight.

No Pyodide numpy wheel can be reached from these machines, so a successful background load
cannot be run here. What is run: Pyodide's CDN answers the setup's header request for numpy
(a Playwright route answers it with 200), then the download itself (GET of the lock's numpy
URL) is held without an answer, as a slow network would hold it. The diagram cell must render
and report back to Python while that GET is still unanswered. The black-holed and refused CDN
(the whole notebook under Run All) are tested in test_lite_offline.py.
"""

from __future__ import annotations

import json
import time

import pytest

from lite_build import browse

from .conftest import BOOT, DIAGRAM, DIAGRAM_READ, PROBE_NOTEBOOK, ROOT, SETUP

pytestmark = pytest.mark.browser

LOADING_LINE = (
    "numpy and pandas are loading in the background (from cdn.jsdelivr.net): tree diagrams work now; "
    "a cell that needs numpy waits until they are loaded.\n"
    "Your work in this site is kept in this browser only (not on a server, not in other browsers): "
    "File > Download saves a notebook to your computer."
)


def numpy_url(site) -> str:
    lock = json.loads((site / "static" / "pyodide" / "pyodide-lock.json").read_text())
    return lock["packages"]["numpy"]["file_name"]


def test_numpy_download_in_flight_while_the_first_diagram_renders(lite_site, lite_server, pw):
    url = numpy_url(lite_site)
    assert url.startswith("https://cdn.jsdelivr.net/pyodide/v314.0.6/full/numpy-"), url

    def answer(route):
        request = route.request
        if request.url == url and request.method == "HEAD":
            route.fulfill(status=200, headers={"access-control-allow-origin": "*", "content-type": "application/zip"})
            return True
        return False  # everything else outside: held without an answer (black_hole below)

    seen = {}
    browser = browse.launch(pw)
    try:
        context, net = browse.offline_context(browser, black_hole=True, answer=answer)
        page = context.new_page()
        try:
            browse.open_notebook(page, lite_server.url, PROBE_NOTEBOOK, net)
            browse.wait_kernel_ready(page)
            kernel_ready = time.monotonic()
            seen["setup"] = browse.run_cell(page, SETUP)
            setup_done = time.monotonic()  # the cell's prompt showed its number
            seen["boot"] = browse.run_cell(page, BOOT)
            boot_done = time.monotonic()
            # the download of numpy has left (the setup cell started it); it stays unanswered
            deadline = time.monotonic() + browse.Timeouts.WIDGET
            while not any(m == "GET" and u == url for _, m, u in net.outside) and time.monotonic() < deadline:
                page.wait_for_timeout(100)
            # the diagram cell: run, and the tree on screen, with numpy's download unanswered
            diagram_started = time.monotonic()
            seen["diagram"] = browse.run_cell(page, DIAGRAM)
            tree = browse.cell(page, DIAGRAM).locator("[role=tree]")
            bias = tree.locator("""[data-path="['bias']"]""").first
            bias.wait_for(timeout=browse.Timeouts.ms(browse.Timeouts.WIDGET))
            bias.click()
            page.wait_for_function(
                "(el) => el.getAttribute('aria-selected') === 'true'",
                arg=bias.element_handle(),
                timeout=browse.Timeouts.ms(browse.Timeouts.ROUND_TRIP),
            )
            seen["diagram_read"] = browse.run_cell(page, DIAGRAM_READ)
            diagram_done = time.monotonic()
            held = [(r.request.method, r.request.url) for r in net.held]
            outside = [(round(t - kernel_ready, 2), method, u) for t, method, u in net.outside]
            seen["timeline_s_after_kernel_ready"] = {
                "setup_done": round(setup_done - kernel_ready, 2),
                "boot_done": round(boot_done - kernel_ready, 2),
                "diagram_started": round(diagram_started - kernel_ready, 2),
                "diagram_read_done": round(diagram_done - kernel_ready, 2),
                "outside_requests": outside,
            }
            page.screenshot(path=str(ROOT / "artifacts" / "lite-background-numpy.png"))
        finally:
            (ROOT / "artifacts").mkdir(exist_ok=True)
            (ROOT / "artifacts" / "lite-background-numpy.json").write_text(json.dumps(seen, indent=1, default=str))
            browse.release(net)
            context.close()
    finally:
        browser.close()

    assert seen["setup"].strip() == LOADING_LINE
    # the load began in the setup cell, before any later cell ran: the header request, then the
    # download of the lock's numpy URL (the Pyodide lock's own file, checked against its sha256)
    methods = [(method, u) for _, method, u in outside]
    assert ("HEAD", url) in methods and ("GET", url) in methods, outside
    first_head = next(t for t, method, u in outside if u == url and method == "HEAD")
    assert first_head <= round(boot_done - kernel_ready, 2), outside  # before the next cell had ended
    first_get = next(t for t, method, u in outside if u == url and method == "GET")
    assert first_get <= round(diagram_started - kernel_ready, 2), outside
    # ... and it was still unanswered when the diagram had rendered and round-tripped a click
    assert ("GET", url) in held, held
    probes = browse.probe_lines(seen["diagram_read"])
    assert probes["selected"] == "['bias']"
    assert probes["numpy-imported"] == "False"  # the diagram used nothing of the download
