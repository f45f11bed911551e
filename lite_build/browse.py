"""Open the built site in Debian's Chromium with no way out but 127.0.0.1.

Used by the site's browser test (tests/lite/) and its benchmark (bench/lite_bench.py), so
both see the site the same way a student's browser would, minus the outside network:
- DNS resolves nothing but 127.0.0.1/localhost (`--host-resolver-rules`);
- every request that leaves 127.0.0.1 is recorded, then aborted (a Playwright route);
- every request is logged with its time, so tests can say where each file came from.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from urllib.parse import urlsplit

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
    "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1, EXCLUDE localhost",
]
# Matched inside Playwright's driver, so loopback traffic never waits on Python.
LEAVES_LOOPBACK = re.compile(r"^(https?|wss?)://(?!(127\.0\.0\.1|localhost)(:\d+)?/)")
LITE_KERNEL_NAME = "Python (Pyodide)"


class Timeouts:
    """Every wait on the Lite page, in seconds, in one place."""

    PAGE = 60.0  # the lab shell and its extensions, from 127.0.0.1
    KERNEL = 120.0  # Pyodide + IPython boot in a worker on 2 busy cores
    CELL = 120.0  # the setup cell installs a dozen wheels
    WIDGET = 30.0
    ROUND_TRIP = 15.0

    @staticmethod
    def ms(seconds: float) -> float:
        return seconds * 1000.0


class LiteError(AssertionError):
    """The page did not do what the site promises; the message says what was seen."""


@dataclass
class NetLog:
    """Requests the page made: all of them (in order, timed) and those that were refused."""

    started: float = field(default_factory=time.monotonic)
    requests: list[tuple[float, str]] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)
    held: list = field(default_factory=list)  # black-holed requests still waiting
    outside: list[tuple[float, str, str]] = field(default_factory=list)  # (time, method, url) leaving 127.0.0.1
    gets: list[str] = field(default_factory=list)  # URLs fetched with GET (the page's check sends HEADs)

    def local_paths(self) -> list[str]:
        return [urlsplit(url).path for _, url in self.requests if not LEAVES_LOOPBACK.match(url)]

    def first_time(self, path_suffix: str) -> float | None:
        """Seconds from page open to the first request whose path ends with path_suffix."""
        for t, url in self.requests:
            if urlsplit(url).path.endswith(path_suffix) and not LEAVES_LOOPBACK.match(url):
                return t - self.started
        return None


def launch(playwright):
    """Debian's Chromium (never a downloaded browser build)."""
    return playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)


def offline_context(browser, black_hole: bool = False, answer=None):
    """A fresh browser profile whose outside requests are recorded and refused.

    black_hole=True: outside requests are recorded and never answered (a filtering firewall
    that drops packets); call `release(net)` before closing the context.
    answer(route) -> bool: asked first for each outside request; True when it answered or
    held the request itself (it may append the route to `net.held`).
    """
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    net = NetLog()

    def refuse(route):
        net.refused.append(route.request.url)
        net.outside.append((time.monotonic(), route.request.method, route.request.url))
        if answer is not None and answer(route):
            return
        if black_hole:
            net.held.append(route)  # no answer, ever (until release)
        else:
            route.abort("internetdisconnected")

    context.route(LEAVES_LOOPBACK, refuse)

    def seen(request):
        net.requests.append((time.monotonic(), request.url))
        if request.method == "GET":
            net.gets.append(request.url)

    context.on("request", seen)
    return context, net


def cached_profile(playwright, folder):
    """A fresh browser profile in `folder`, with the HTTP cache on disk as in a student's own
    browser (for a second visit). Outside requests fail at the resolver (`--host-resolver-rules`)
    and are recorded, not routed: Playwright turns the HTTP cache off in a context that routes."""
    context = playwright.chromium.launch_persistent_context(
        str(folder), executable_path=CHROMIUM, args=CHROMIUM_ARGS, viewport={"width": 1400, "height": 1000}
    )
    net = NetLog()

    def seen(request):
        net.requests.append((time.monotonic(), request.url))
        if request.method == "GET":
            net.gets.append(request.url)
        if LEAVES_LOOPBACK.match(request.url):
            net.refused.append(request.url)

    context.on("request", seen)
    return context, net


def release(net: NetLog) -> None:
    """End the black-holed requests (so the context can close)."""
    while net.held:
        route = net.held.pop()
        try:
            route.abort("timedout")
        except Exception:
            pass


def open_notebook(page, site_url: str, path: str, net: NetLog | None = None) -> None:
    """Open a notebook of the site in JupyterLab; the page starts its kernel by itself."""
    if net is not None:
        net.started = time.monotonic()
    page.goto(f"{site_url}/lab/index.html?path={path}", timeout=Timeouts.ms(Timeouts.PAGE))
    show_notebook(page, path)


def show_notebook(page, path: str) -> None:
    """Wait until the notebook at `path` is open and its tab the current one (after a goto or a reload)."""
    # JupyterLab restores the tabs the site's workspace had open (a notebook opened from another
    # page of the same site included) and may leave one of those current: bring this one forward
    name = path.rsplit("/", 1)[-1]
    tab = page.locator("#jp-main-dock-panel .lm-TabBar-tab").filter(
        has=page.locator(".lm-TabBar-tabLabel", has_text=re.compile(rf"^\s*{re.escape(name)}\s*$"))
    )
    tab.first.wait_for(timeout=Timeouts.ms(Timeouts.PAGE))
    deadline = time.monotonic() + Timeouts.PAGE
    while True:  # the restore may make another tab current after this one opened: check twice
        if "lm-mod-current" not in (tab.first.get_attribute("class") or ""):
            tab.first.click()
        page.wait_for_timeout(300)
        if "lm-mod-current" in (tab.first.get_attribute("class") or "") or time.monotonic() > deadline:
            break
    page.locator(".jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook .jp-Cell").first.wait_for(
        timeout=Timeouts.ms(Timeouts.PAGE)
    )


def wait_kernel_ready(page, timeout: float = Timeouts.KERNEL) -> None:
    """The notebook's Pyodide kernel has booted and is idle."""
    try:
        page.wait_for_function(
            """(name) => {
                const panel = '.jp-NotebookPanel:not(.lm-mod-hidden)';
                const kernel = document.querySelector(panel + ' .jp-Toolbar-kernelName');
                const status = document.querySelector(panel + ' .jp-Notebook-ExecutionIndicator');
                return kernel && kernel.textContent.trim() === name && status && status.dataset.status === 'idle';
            }""",
            arg=LITE_KERNEL_NAME,
            timeout=Timeouts.ms(timeout),
            polling=100,
        )
    except Exception as err:
        raise LiteError(f"the {LITE_KERNEL_NAME} kernel was not ready after {timeout:.0f} s: {err}") from None


def cell(page, index: int):
    return page.locator(".jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook .jp-Cell").nth(index)


def run_cell(page, index: int, timeout: float = Timeouts.CELL) -> str:
    """Run one code cell as a student would (select it, Shift+Enter); return its output text."""
    target = cell(page, index)
    target.scroll_into_view_if_needed()
    prompt = target.locator(".jp-InputPrompt").first
    # The prompt shows [*]: while the cell runs, then its number. The number alone cannot tell a
    # new run from the saved one (a notebook reopened after a reload shows [1]:, and its first
    # run in the new kernel is [1]: again): the page records that it saw the cell busy.
    prompt.evaluate("""(el) => {
        el.dataset.ptlSeenBusy = "";
        const seen = () => { if (el.textContent.trim() === "[*]:") el.dataset.ptlSeenBusy = "1"; };
        const observer = new MutationObserver(seen);
        observer.observe(el, { childList: true, characterData: true, subtree: true });
        el.ptlObserver?.disconnect();
        el.ptlObserver = observer;
    }""")
    prompt.click()
    page.keyboard.press("Shift+Enter")
    try:
        page.wait_for_function(
            """(el) => {
                const text = el.textContent.trim();
                return /^\\[\\d+\\]:$/.test(text) && el.dataset.ptlSeenBusy === "1";
            }""",
            arg=prompt.element_handle(),
            timeout=Timeouts.ms(timeout),
            polling=100,
        )
    except Exception as err:
        raise LiteError(
            f"cell {index} did not finish in {timeout:.0f} s; output so far:\n{cell_output(page, index)}\n{err}"
        ) from None
    return cell_output(page, index)


def cell_output(page, index: int) -> str:
    return "\n".join(cell(page, index).locator(".jp-OutputArea-output").all_inner_texts())


def run_all(page, timeout: float = 300.0) -> None:
    """Run > Run All Cells, as a student would; wait until no cell is queued or running."""
    page.locator(".lm-MenuBar-itemLabel", has_text="Run").first.click()
    page.locator(".lm-Menu-itemLabel", has_text="Run All Cells").first.click()
    page.wait_for_function(
        """() => {
            const prompts = [...document.querySelectorAll(
                '.jp-NotebookPanel:not(.lm-mod-hidden) .jp-CodeCell .jp-InputPrompt')];
            return prompts.length > 0 && prompts.every(p => /^\\[(\\d+| )\\]:$/.test(p.textContent.trim()))
                && prompts.some(p => /^\\[\\d+\\]:$/.test(p.textContent.trim()));
        }""",
        timeout=Timeouts.ms(timeout),
        polling=250,
    )


def code_cells(page):
    return page.locator(".jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook .jp-CodeCell")


def cell_errors(page, index: int) -> str:
    """Tracebacks shown under a cell (empty when it ran cleanly)."""
    return "\n".join(
        cell(page, index)
        .locator('.jp-OutputArea-output[data-mime-type="application/vnd.jupyter.stderr"]')
        .all_inner_texts()
    )


def probe_lines(text: str) -> dict[str, str]:
    """`PROBE key value` lines printed by probe cells -> {key: value}."""
    found = {}
    for line in text.splitlines():
        m = re.match(r"\s*PROBE (\S+) ?(.*)$", line)
        if m:
            found[m[1]] = m[2].strip()
    return found
