"""Drive a real JupyterLab server and page from tests.

Everything here is real: a `jupyter lab` subprocess of the current interpreter, Debian's
Chromium through Playwright, and a jupyter_client connection straight to the notebook's
kernel so a test can read the *Python* state after a browser action.

The module has no pytest dependency so benchmarks can reuse it; fixtures live in
conftest.py.
"""

from __future__ import annotations

import ast
import json
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.error
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# tests/server_harness.py: `tests.server_harness` when the benchmark imports this module from the
# repository root, `server_harness` where tests/ is on the path (pytest, tools/lab_shots.py)
if __package__ == "tests.browser":
    from tests.server_harness import api_request, free_port, wait_until_answering
else:
    from server_harness import api_request, free_port, wait_until_answering

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
]
LIGHT = "JupyterLab Light"
DARK = "JupyterLab Dark"


class Timeouts:
    """Every wait in the browser suite, in seconds, in one place."""

    SERVER_START = 90.0  # a cold `jupyter lab` on 2 busy cores
    SERVER_STOP = 15.0
    PAGE_LOAD = 90.0  # first load builds the lab page and fetches every extension
    KERNEL_READY = 90.0
    RUN_ALL = 180.0  # importing jax and the first compile happen in the first cells
    WIDGET_VIEW = 60.0
    ROUND_TRIP = 15.0  # one browser -> kernel -> browser exchange, with a loaded machine
    KERNEL_REPLY = 60.0
    THEME = 30.0
    POLL = 0.05

    @staticmethod
    def ms(seconds: float) -> float:
        """Playwright counts milliseconds."""
        return seconds * 1000.0


class HarnessError(AssertionError):
    """A failure of the page or server that a test should report as a failure."""


# Settings every test session starts from, written into an isolated settings directory
# so the person's own JupyterLab settings never change what the tests see.
LAB_SETTINGS: dict[str, dict[str, Any]] = {
    # no news/update toasts over the notebook
    "@jupyterlab/apputils-extension/notification": {"fetchNews": "false", "checkForUpdates": False},
    "@jupyterlab/apputils-extension/themes": {"theme": LIGHT, "adaptive-theme": False},
    # every cell stays in the DOM (no virtualised windowing), so selectors see all outputs
    "@jupyterlab/notebook-extension/tracker": {"windowingMode": "none"},
    # the harness saves explicitly; autosave would race with closing
    "@jupyterlab/docmanager-extension/plugin": {"autosave": False},
}


@dataclass
class LabServer:
    """A running `jupyter lab` with its own config, settings, runtime and notebook dirs."""

    proc: subprocess.Popen
    base: Path
    root_dir: Path
    runtime_dir: Path
    port: int
    token: str
    log_path: Path

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def lab_url(self, path: str = "") -> str:
        return f"{self.url}/lab{('/tree/' + path) if path else ''}?token={self.token}"

    def api(self, method: str, path: str, body: Any = None, timeout: float = 10.0) -> Any:
        return api_request(self.url, self.token, method, path, body, timeout)

    def log_tail(self, n: int = 60) -> str:
        try:
            lines = self.log_path.read_text(errors="replace").splitlines()
        except OSError:
            return ""
        return "\n".join(lines[-n:])

    def session_for(self, path: str) -> dict:
        for s in self.api("GET", "/api/sessions"):
            if s.get("path") == path:
                return s
        raise HarnessError(f"the server has no session for {path!r}")

    def connection_file(self, kernel_id: str) -> Path:
        return self.runtime_dir / f"kernel-{kernel_id}.json"

    def stop(self) -> None:
        if self.proc.poll() is None:
            # SIGTERM lets jupyter_server shut its kernels down cleanly
            self.proc.terminate()
            try:
                self.proc.wait(Timeouts.SERVER_STOP)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(Timeouts.SERVER_STOP)


def start_lab(
    base: Path | None = None, args: Sequence[str] = (), program: Sequence[str] = (), root: str = "notebooks"
) -> LabServer:
    """Start JupyterLab on a free port and wait until its API answers (`args`: more options;
    `program`: the command instead of `python -m jupyterlab`; `root`: the name of its folder)."""
    base = Path(base or tempfile.mkdtemp(prefix="pytree-lab-browser-"))
    dirs = {
        name: base / (root if name == "notebooks" else name)
        for name in ("notebooks", "config", "data", "runtime", "settings", "workspaces", "ipython")
    }
    for d in dirs.values():
        d.mkdir(parents=True, exist_ok=True)
    for plugin, values in LAB_SETTINGS.items():
        target = dirs["settings"] / f"{plugin}.jupyterlab-settings"
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(json.dumps(values))

    env = dict(os.environ)
    env.update(
        JUPYTER_CONFIG_DIR=str(dirs["config"]),
        JUPYTER_DATA_DIR=str(dirs["data"]),
        JUPYTER_RUNTIME_DIR=str(dirs["runtime"]),
        JUPYTERLAB_SETTINGS_DIR=str(dirs["settings"]),
        JUPYTERLAB_WORKSPACES_DIR=str(dirs["workspaces"]),
        IPYTHONDIR=str(dirs["ipython"]),
        JAX_PLATFORMS="cpu",
        # the debugger's frozen-modules warning on stderr is noise in the server log
        PYDEVD_DISABLE_FILE_VALIDATION="1",
    )
    env.pop("JUPYTER_PLATFORM_DIRS", None)
    # make the venv's `python` the one kernels run, whatever PATH the caller had
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])

    token = secrets.token_hex(16)
    port = free_port()
    log_path = base / "server.log"
    cmd = [
        *(program or [sys.executable, "-m", "jupyterlab"]),
        "--no-browser",
        "--ServerApp.ip=127.0.0.1",
        f"--ServerApp.port={port}",
        "--ServerApp.port_retries=20",
        f"--IdentityProvider.token={token}",
        f"--ServerApp.root_dir={dirs['notebooks']}",
        "--ServerApp.terminals_enabled=False",
        "--LabApp.expose_app_in_browser=True",
        "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
        "--LabApp.news_url=",
        *args,
    ]
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        cmd.append("--allow-root")  # containers and CI often run as root
    with open(log_path, "wb") as log:  # the server writes to its own copy of the handle
        proc = subprocess.Popen(
            cmd, cwd=dirs["notebooks"], env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
    server = LabServer(proc, base, dirs["notebooks"], dirs["runtime"], port, token, log_path)
    wait_until_answering(server, dirs["runtime"], Timeouts.SERVER_START, "jupyter lab", server.log_tail, HarnessError)
    return server


def launch_chromium(playwright):
    """Debian's Chromium; a missing binary is a failure the caller reports, never a skip."""
    if not (os.path.isfile(CHROMIUM) and os.access(CHROMIUM, os.X_OK)):
        raise HarnessError(
            f"{CHROMIUM} is missing: the real-browser tests need Debian's Chromium "
            "(`make chromium` or `apt-get install chromium`)."
        )
    return playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)


def open_lab(page, server: LabServer) -> None:
    """Load the lab shell and wait until the app has restored its layout."""
    page.goto(server.lab_url(), timeout=Timeouts.ms(Timeouts.PAGE_LOAD))
    page.wait_for_function("() => window.jupyterapp !== undefined", timeout=Timeouts.ms(Timeouts.PAGE_LOAD))
    page.evaluate("async () => { await window.jupyterapp.started; await window.jupyterapp.restored; }")


def set_theme(page, theme: str) -> None:
    """Switch the lab theme through its own command and wait until the new CSS applies."""
    page.evaluate(
        "async (theme) => { await window.jupyterapp.commands.execute('apputils:change-theme', {theme}); }",
        theme,
    )
    page.wait_for_function(
        "(theme) => document.body.dataset.jpThemeName === theme",
        arg=theme,
        timeout=Timeouts.ms(Timeouts.THEME),
    )
    # the theme manager sets the name when its stylesheet has loaded; let one frame paint
    page.evaluate("() => new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))")


def write_notebook(root: Path, name: str, cells: list[str]) -> str:
    """Write a notebook of code cells under the server's root; return its API path."""
    import nbformat

    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.cells = [nbformat.v4.new_code_cell(src) for src in cells]
    path = root / name
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, path)
    return name


# JS run in the page: find the open notebook panel for a path.
_FIND_PANEL = """
  const find = (path) => {
    for (const w of window.jupyterapp.shell.widgets('main')) {
      if (w.context && w.context.path === path && w.content && w.content.model) return w;
    }
    return null;
  };
"""


class KernelProbe:
    """A second client on a notebook's kernel: runs code and reads Python values.

    Its requests never show up in the notebook: JupyterLab only renders replies to its own
    requests, while comm messages (widget state) do reach the page.
    """

    def __init__(self, connection_file: Path):
        from jupyter_client import BlockingKernelClient

        self.client = BlockingKernelClient(connection_file=str(connection_file))
        self.client.load_connection_file()
        self.client.start_channels()
        self.client.wait_for_ready(timeout=Timeouts.KERNEL_READY)

    def _request(self, code: str, user_expressions: dict | None = None) -> dict:
        msg_id = self.client.execute(code, silent=True, store_history=False, user_expressions=user_expressions or {})
        deadline = time.monotonic() + Timeouts.KERNEL_REPLY
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise HarnessError(f"no reply from the kernel within {Timeouts.KERNEL_REPLY}s for {code!r}")
            reply = self.client.get_shell_msg(timeout=remaining)
            if reply["parent_header"].get("msg_id") == msg_id:
                content = reply["content"]
                if content["status"] != "ok":
                    raise HarnessError(
                        strip_ansi(
                            f"kernel error running {code!r}: {content.get('ename')}: {content.get('evalue')}\n"
                            + "\n".join(content.get("traceback", []))
                        )
                    )
                return content

    def run(self, code: str) -> None:
        """Execute statements in the notebook's namespace (e.g. set a trait from Python)."""
        self._request(code)

    def value(self, expr: str) -> Any:
        """Evaluate an expression in the notebook's namespace; return it JSON-decoded.

        `silent=True` keeps the request out of the notebook's history and execution count.
        """
        # arrays (numpy, jax) and numpy scalars become lists and floats through .tolist()
        content = self._request("", {"v": f"__import__('json').dumps({expr}, default=lambda o: o.tolist())"})
        result = content["user_expressions"]["v"]
        if result["status"] != "ok":
            raise HarnessError(f"kernel error evaluating {expr!r}: {result.get('ename')}: {result.get('evalue')}")
        return json.loads(ast.literal_eval(result["data"]["text/plain"]))

    def wait_for(self, expr: str, predicate: Callable[[Any], bool], timeout: float = Timeouts.ROUND_TRIP) -> Any:
        """Poll `expr` until `predicate(value)` holds; return the last value either way.

        Browser-to-kernel messages travel on another socket than ours, so a read right
        after a click can overtake the click; the caller asserts on what is returned.
        """
        deadline = time.monotonic() + timeout
        while True:
            value = self.value(expr)
            if predicate(value) or time.monotonic() > deadline:
                return value
            time.sleep(Timeouts.POLL)

    def close(self) -> None:
        self.client.stop_channels()


@dataclass
class Notebook:
    """A notebook open in the page, with a probe on its kernel."""

    page: Any
    server: LabServer
    path: str
    kernel_id: str
    session_id: str
    kernel: KernelProbe
    closed: bool = field(default=False)

    @property
    def panel(self):
        """Locator for this notebook's panel in the page."""
        return self.page.locator(f'.jp-NotebookPanel[data-pytree-lab-path="{self.path}"]')

    def value(self, expr: str) -> Any:
        return self.kernel.value(expr)

    def run(self, code: str) -> None:
        self.kernel.run(code)

    def wait_for_value(self, expr: str, expected: Any, timeout: float = Timeouts.ROUND_TRIP) -> Any:
        return self.kernel.wait_for(expr, lambda v: v == expected, timeout)

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        try:
            self.kernel.close()
            self.page.evaluate(
                "async (path) => {"
                + _FIND_PANEL
                + """
                  const w = find(path);
                  if (!w) return;
                  await w.context.save();
                  w.dispose();
                }""",
                self.path,
            )
        finally:
            # the kernel goes only after its panel is gone, so the page shows no "kernel died" dialog
            try:
                self.server.api("DELETE", f"/api/sessions/{self.session_id}")
            except urllib.error.HTTPError as err:
                err.close()  # the error holds the response's socket
                if err.code != 404:
                    raise


def open_notebook(
    page,
    server: LabServer,
    name: str,
    cells: list[str],
    wait_for: str | None = None,
    run_all_s: float = 2 * Timeouts.RUN_ALL,
) -> Notebook:
    """Write `cells` as a notebook, open it in the page, run all cells, wait for `wait_for`.

    Raises HarnessError with the cell's traceback if any cell fails, and with what the page
    shows (the kernel's status, which cells ran) if Run All is not done within `run_all_s`.
    """
    path = write_notebook(server.root_dir, name, cells)
    page.evaluate(
        "async (path) => {"
        + _FIND_PANEL
        + """
          const app = window.jupyterapp;
          await app.commands.execute('docmanager:open', {path, factory: 'Notebook'});
          const w = find(path);
          if (!w) throw new Error('notebook panel did not open: ' + path);
          w.node.dataset.pytreeLabPath = path;
          app.shell.activateById(w.id);
          await w.context.ready;
          await w.sessionContext.ready;
          const kernel = w.sessionContext.session && w.sessionContext.session.kernel;
          if (!kernel) throw new Error('no kernel started for ' + path);
          await kernel.info;  // resolves once the kernel answered kernel_info
        }""",
        path,
    )
    session = server.session_for(path)
    kernel_id = session["kernel"]["id"]
    probe = KernelProbe(server.connection_file(kernel_id))
    nb = Notebook(page, server, path, kernel_id, session["id"], probe)
    try:
        errors = page.evaluate(
            "async ({path, ms}) => {"
            + _FIND_PANEL
            + """
              const w = find(path);
              window.jupyterapp.shell.activateById(w.id);
              const run = window.jupyterapp.commands.execute('notebook:run-all-cells').then(() => true);
              const done = await Promise.race([run, new Promise((r) => setTimeout(() => r(false), ms))]);
              const errors = [];
              const cells = w.content.model.cells;
              if (!done) {
                const k = w.sessionContext.session && w.sessionContext.session.kernel;
                const ran = [];
                for (let i = 0; i < cells.length; i++) {
                  const c = cells.get(i);
                  if (c.type === 'code') ran.push(`${i}:${c.executionCount === null ? '-' : c.executionCount}`);
                }
                return [`Run All not done after ${ms / 1000} s: kernel ${k ? k.status : 'none'}, `
                        + `connection ${k ? k.connectionStatus : 'none'}; cell:execution count ${ran.join(' ')}`];
              }
              for (let i = 0; i < cells.length; i++) {
                const cell = cells.get(i);
                if (cell.type !== 'code') continue;
                if (cell.executionCount === null) errors.push(`cell ${i} did not run`);
                const outputs = cell.outputs;
                for (let j = 0; j < outputs.length; j++) {
                  const o = outputs.get(j).toJSON();
                  if (o.output_type === 'error') {
                    errors.push(`cell ${i}: ${o.ename}: ${o.evalue}\\n${(o.traceback || []).join('\\n')}`);
                  }
                }
              }
              return errors;
            }""",
            {"path": path, "ms": Timeouts.ms(run_all_s)},
        )
        if errors:
            raise HarnessError(strip_ansi(f"running {path} failed:\n" + "\n".join(errors)))
        if wait_for:
            nb.panel.locator(wait_for).first.wait_for(state="visible", timeout=Timeouts.ms(Timeouts.WIDGET_VIEW))
    except BaseException:
        nb.close()
        raise
    return nb


def strip_ansi(text: str) -> str:
    import re

    return re.sub(r"\x1b\[[0-9;]*m", "", text)


def remove_tree(path: Path) -> None:
    shutil.rmtree(path, ignore_errors=True)
