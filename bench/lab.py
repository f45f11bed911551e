"""JupyterLab servers (as installed, stock) and their Chromium pages for the browser sections, via the test harness."""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from tests.browser.harness import (  # noqa: E402  (the harness lives with the browser tests)
    KernelProbe,
    Notebook,
    Timeouts,
    launch_chromium,
    open_lab,
    open_notebook,
    remove_tree,
    start_lab,
)
from tests.server_harness import EXTENSION_OFF  # noqa: E402

__all__ = ["ACTIVE_MARK", "BenchLab", "Chromium", "KernelProbe", "Notebook", "REPO", "SERVERS", "Timeouts"]

# The notebook panel for a path, in page JS (the harness marks panels with this attribute).
FIND_PANEL = """
  const find = (path) => {
    for (const w of window.jupyterapp.shell.widgets('main')) {
      if (w.context && w.context.path === path && w.content && w.content.model) return w;
    }
    return null;
  };
"""


# The server as pytree-lab installs it has its jupyter_server extension on (TCP_NODELAY on
# kernel websockets, pytree_lab/server.py); "stock" is the same server with the extension
# switched off for this one server (a jpserver_extensions entry on its command line).
ACTIVE_MARK = "pytree-lab: TCP_NODELAY on kernel websockets"
SERVERS = {
    "stock": "stock jupyter_server (pytree_lab extension disabled)",
    "installed": "as installed (pytree_lab extension: TCP_NODELAY on kernel websockets)",
}


class Chromium:
    """`with Chromium() as browser:` one Debian Chromium for every lab page of a run."""

    def __enter__(self):
        from playwright.sync_api import sync_playwright

        self._pw = sync_playwright().start()
        try:
            self.browser = launch_chromium(self._pw)
        except BaseException:
            self._pw.stop()
            raise
        return self.browser

    def __exit__(self, *exc) -> None:
        try:
            self.browser.close()
        finally:
            self._pw.stop()


class BenchLab:
    """`with BenchLab(browser) as lab:` a lab server, a page of its own in `browser`, loaded; all stopped after.

    `server="installed"`: pytree-lab as installed (its server extension on); `"stock"`: the
    extension switched off. The server log is checked for which one is running.
    """

    def __init__(self, browser, server: str = "installed"):
        if server not in SERVERS:
            raise ValueError(f"server is one of {sorted(SERVERS)}, not {server!r}")
        self.kind = server
        self.describe = SERVERS[server]
        self.browser = browser
        self.base = Path(tempfile.mkdtemp(prefix=f"pytree-lab-bench-{server}-"))
        self.server = None
        self.context = None
        self.page = None
        self.errors: list[str] = []

    def __enter__(self) -> BenchLab:
        try:
            self.server = start_lab(self.base, args=EXTENSION_OFF if self.kind == "stock" else ())
            active = ACTIVE_MARK in self.server.log_tail(400)
            if active != (self.kind == "installed"):
                raise RuntimeError(
                    f"expected a {self.describe} server; its log says otherwise:\n" + self.server.log_tail()
                )
            self.context = self.browser.new_context(viewport={"width": 1400, "height": 1000})
            self.page = self.context.new_page()
            self.page.set_default_timeout(Timeouts.ms(Timeouts.WIDGET_VIEW))
            self.page.on("pageerror", lambda exc: self.errors.append(f"{self.kind}: {exc}"))
            open_lab(self.page, self.server)
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def notebook(self, name: str, cells: list[str], wait_for: str | None = None) -> Notebook:
        return open_notebook(self.page, self.server, name, cells, wait_for=wait_for)

    def __exit__(self, *exc) -> None:
        try:
            if self.context is not None:
                self.context.close()
        finally:
            if self.server is not None:
                self.server.stop()
            remove_tree(self.base)


def setup_cell(*lines: str) -> str:
    """A first cell that makes the `bench` package importable in the kernel."""
    return "\n".join([f"import sys; sys.path.insert(0, {str(REPO)!r})", *lines])
