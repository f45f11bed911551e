"""One JupyterLab server and one Chromium page for the browser sections, via the test harness."""

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

__all__ = ["BenchLab", "KernelProbe", "Notebook", "REPO", "Timeouts"]

# The notebook panel for a path, in page JS (the harness marks panels with this attribute).
FIND_PANEL = """
  const find = (path) => {
    for (const w of window.jupyterapp.shell.widgets('main')) {
      if (w.context && w.context.path === path && w.content && w.content.model) return w;
    }
    return null;
  };
"""


# A diagnostic server variant: kernel websockets with Nagle's algorithm off, so small
# server -> page messages are not held back waiting for the page's delayed ACK.
NODELAY_CONFIG = """\
from jupyter_server.services.kernels.websocket import KernelWebsocketHandler

_open = KernelWebsocketHandler.open


async def _open_nodelay(self, *args, **kwargs):
    self.set_nodelay(True)
    return await _open(self, *args, **kwargs)


KernelWebsocketHandler.open = _open_nodelay
print(NODELAY_MARK, flush=True)
""".replace("NODELAY_MARK", repr("bench: TCP_NODELAY on kernel websockets"))


class BenchLab:
    """`with BenchLab() as lab:` a lab server, Chromium and a loaded lab page; all stopped after."""

    def __init__(self, nodelay: bool = False):
        self.base = Path(tempfile.mkdtemp(prefix="pytree-lab-bench-"))
        self.nodelay = nodelay
        if nodelay:
            # start_lab points JUPYTER_CONFIG_DIR at base/config: the server reads this file there
            config = self.base / "config"
            config.mkdir(parents=True, exist_ok=True)
            (config / "jupyter_server_config.py").write_text(NODELAY_CONFIG)
        self.server = None
        self._pw = None
        self.browser = None
        self.page = None
        self.errors: list[str] = []

    def __enter__(self) -> "BenchLab":
        from playwright.sync_api import sync_playwright

        try:
            self.server = start_lab(self.base)
            self._pw = sync_playwright().start()
            self.browser = launch_chromium(self._pw)
            context = self.browser.new_context(viewport={"width": 1400, "height": 1000})
            self.page = context.new_page()
            self.page.set_default_timeout(Timeouts.ms(Timeouts.WIDGET_VIEW))
            self.page.on("pageerror", lambda exc: self.errors.append(str(exc)))
            if self.nodelay and "bench: TCP_NODELAY on kernel websockets" not in self.server.log_tail(400):
                raise RuntimeError("the server did not load the TCP_NODELAY config:\n" + self.server.log_tail())
            open_lab(self.page, self.server)
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def notebook(self, name: str, cells: list[str], wait_for: str | None = None) -> Notebook:
        return open_notebook(self.page, self.server, name, cells, wait_for=wait_for)

    def __exit__(self, *exc) -> None:
        try:
            if self.browser is not None:
                self.browser.close()
            if self._pw is not None:
                self._pw.stop()
        finally:
            if self.server is not None:
                self.server.stop()
            remove_tree(self.base)


def setup_cell(*lines: str) -> str:
    """A first cell that makes the `bench` package importable in the kernel."""
    return "\n".join([f"import sys; sys.path.insert(0, {str(REPO)!r})", *lines])
