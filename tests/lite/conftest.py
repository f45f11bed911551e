"""Fixtures for the JupyterLite site test: build the site once, serve it, drive one notebook.

The site is built by the same code as `make lite-build`, into a temporary folder, with one
extra notebook (the probe below) so the test can run its own cells. The probe has no setup
cell on purpose: the build must inject the canonical one, exactly as it would for a course
notebook that lacks it.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from lite_build import browse  # noqa: E402
from lite_build.serve import SiteServer  # noqa: E402

PROBE_NOTEBOOK = "lite_probe.ipynb"
PACKAGE_FILE_TO_COMPARE = "static/diagram.js"  # the wheel in the kernel must carry this checkout's file

# The probe's cells, after the setup cell the build puts first (index 0).
BOOT_CELL = f"""\
import sys, hashlib, importlib.metadata, pathlib
import pyodide, pytree_lab
print("PROBE platform", sys.platform)
print("PROBE pyodide", pyodide.__version__)
print("PROBE pytree-lab", importlib.metadata.version("pytree-lab"))
print("PROBE file-sha256", hashlib.sha256(
    (pathlib.Path(pytree_lab.__file__).parent / "{PACKAGE_FILE_TO_COMPARE}").read_bytes()).hexdigest())
print("PROBE numpy-imported", "numpy" in sys.modules)
import importlib.util, IPython.core.interactiveshell as _shell
_pyc = pathlib.Path(importlib.util.cache_from_source(_shell.__file__))
# the site's bytecode: an unchecked-hash pyc (flags 1) that only the build writes
print("PROBE ipython-pyc-flags", int.from_bytes(_pyc.read_bytes()[4:8], "little") if _pyc.exists() else "missing")
print("PROBE dont-write-bytecode", sys.dont_write_bytecode)
print("PROBE ipython-file", _shell.__file__)
"""
# An anywidget with inline ES module: the widget stack on its own, independent of pytree-lab.
ANYWIDGET_CELL = """\
import anywidget, traitlets

class ClickCounter(anywidget.AnyWidget):
    _esm = '''
    export default {
      render({ model, el }) {
        const button = document.createElement("button");
        button.className = "lite-probe-counter";
        const show = () => { button.textContent = `clicked ${model.get("count")}`; };
        button.addEventListener("click", () => { model.set("count", model.get("count") + 1); model.save_changes(); });
        model.on("change:count", show);
        show();
        el.appendChild(button);
      },
    };
    '''
    count = traitlets.Int(0).tag(sync=True)

counter = ClickCounter()
counter
"""
COUNTER_READ_CELL = 'print("PROBE count", counter.count)'
DIAGRAM_CELL = """\
from pytree_lab import PytreeDiagram
diagram = PytreeDiagram({"weight": [1.0, -1.0], "bias": 0.0})
diagram
"""
DIAGRAM_READ_CELL = """\
print("PROBE selected", diagram.selected_path)
print("PROBE numpy-imported", "numpy" in sys.modules)
"""
# A student's endless answer, run guarded: Pyodide has no interval timer and no thread, so the
# time budget's line tracer stops it; the explorer's budget is off there (no driver).
BUDGET_CELL = """\
import time
from pytree_lab import guard
from pytree_lab.exercises import run_guarded

def endless():
    while True:
        pass

started = time.monotonic()
guarded = run_guarded(endless, budget=0.5)
with guard.time_budget(0.5, traced=False):  # the explorer's: neither a timer nor a tracer here
    explorer_driver = "tracer" if sys.gettrace() is not None else "None"
print("PROBE budget-drivers", "tracer" if not guard._signals() else "itimer", explorer_driver)
print("PROBE budget-stopped", guarded.timed_out, guarded.error is None, time.monotonic() - started < 15)
print("PROBE budget-tracer-left", sys.gettrace() is None)
"""
CELLS = [BOOT_CELL, ANYWIDGET_CELL, COUNTER_READ_CELL, DIAGRAM_CELL, DIAGRAM_READ_CELL, BUDGET_CELL]
SETUP, BOOT, COUNTER, COUNTER_READ, DIAGRAM, DIAGRAM_READ, BUDGET = range(7)


def build_probe_site(tmp_path_factory, *options: str, bench_notebook: bool = False) -> Path:
    work = tmp_path_factory.mktemp("lite")
    probe = work / "probe" / PROBE_NOTEBOOK
    probe.parent.mkdir()
    extra = []
    if bench_notebook:  # `make bench`'s notebook (bench/lite_bench.py), for the test of its runs
        from bench import lite_bench

        extra = ["--contents", str(lite_bench.write_notebook(probe.parent))]
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(src) for src in CELLS]
    nbformat.write(nb, probe)
    site = work / "site"
    # what the checkout holds as the build starts (others may edit the tree while tests run)
    (work / "checkout-sha256").write_text(sha256_of(ROOT / "widgets" / "pytree_lab" / PACKAGE_FILE_TO_COMPARE))
    proc = subprocess.run(
        [
            sys.executable,
            str(ROOT / "lite_build" / "build.py"),
            "--output-dir",
            str(site),
            "--contents",
            str(probe),
            *extra,
            *options,
        ],
        capture_output=True,
        text=True,
        timeout=900,
    )
    if proc.returncode != 0:
        pytest.fail(f"the site build failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}", pytrace=False)
    return site


@pytest.fixture(scope="session")
def lite_site(tmp_path_factory) -> Path:
    """The site, built from this checkout by lite_build/build.py (+ the probe notebook and the
    benchmark's)."""
    return build_probe_site(tmp_path_factory, bench_notebook=True)


@pytest.fixture(scope="session")
def lite_manifest(lite_site) -> dict:
    return json.loads((lite_site / "pytree-lab-site.json").read_text())


@pytest.fixture(scope="session")
def lite_server(lite_site):
    with SiteServer(lite_site) as server:
        yield server


@dataclass
class LiteRun:
    """What one student-like session on the probe notebook showed."""

    net: browse.NetLog
    outputs: dict[int, str] = field(default_factory=dict)
    errors: dict[int, str] = field(default_factory=dict)
    counter_text: str = ""
    diagram_rendered: bool = False
    bias_leaf_rendered: bool = False
    failure: str = ""

    def probes(self, index: int) -> dict[str, str]:
        return browse.probe_lines(self.outputs.get(index, ""))

    def check(self) -> None:
        if self.failure:
            raise AssertionError(self.failure)


@pytest.fixture(scope="session")
def lite_run(lite_server, pw) -> LiteRun:
    """Open the probe notebook offline, run its cells, click the widgets; record everything.

    One page session serves every assertion (a Pyodide boot costs ~15 s); a step that fails
    is recorded and each test that depends on it fails with the message.
    """
    return drive_probe(pw, lite_server, "lite-failure.png")


def drive_probe(pw, lite_server, failure_shot: str) -> LiteRun:
    browser = browse.launch(pw)
    try:
        context, net = browse.offline_context(browser)
        page = context.new_page()
        run = LiteRun(net=net)
        try:
            browse.open_notebook(page, lite_server.url, PROBE_NOTEBOOK, net)
            browse.wait_kernel_ready(page)
            for index in (SETUP, BOOT, COUNTER):
                run.outputs[index] = browse.run_cell(page, index)
                run.errors[index] = browse.cell_errors(page, index)

            button = browse.cell(page, COUNTER).locator("button.lite-probe-counter")
            button.click(timeout=browse.Timeouts.ms(browse.Timeouts.WIDGET))
            page.wait_for_function(
                "(el) => el.textContent === 'clicked 1'",
                arg=button.element_handle(),
                timeout=browse.Timeouts.ms(browse.Timeouts.ROUND_TRIP),
            )
            run.counter_text = button.inner_text()
            run.outputs[COUNTER_READ] = browse.run_cell(page, COUNTER_READ)

            run.outputs[DIAGRAM] = browse.run_cell(page, DIAGRAM)
            run.errors[DIAGRAM] = browse.cell_errors(page, DIAGRAM)
            tree = browse.cell(page, DIAGRAM).locator("[role=tree]")
            tree.first.wait_for(timeout=browse.Timeouts.ms(browse.Timeouts.WIDGET))
            run.diagram_rendered = True
            bias = tree.locator("""[data-path="['bias']"]""").first
            bias.wait_for(timeout=browse.Timeouts.ms(browse.Timeouts.WIDGET))
            run.bias_leaf_rendered = True
            bias.click()
            page.wait_for_function(
                "(el) => el.getAttribute('aria-selected') === 'true'",
                arg=bias.element_handle(),
                timeout=browse.Timeouts.ms(browse.Timeouts.ROUND_TRIP),
            )
            # the click's comm message left before the read cell's execute request, and the
            # kernel handles them in order: the read cell sees what the click set
            run.outputs[DIAGRAM_READ] = browse.run_cell(page, DIAGRAM_READ)
            run.outputs[BUDGET] = browse.run_cell(page, BUDGET)
            run.errors[BUDGET] = browse.cell_errors(page, BUDGET)
        except Exception as err:  # recorded, then raised by every test that needs the step
            shot = ROOT / "artifacts" / failure_shot
            shot.parent.mkdir(exist_ok=True)
            try:
                page.screenshot(path=str(shot))
            except Exception:
                pass
            run.failure = f"{type(err).__name__}: {err}\noutputs so far: {run.outputs}\nscreenshot: {shot}"
        context.close()
    finally:
        browser.close()
    return run


def sha256_of(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()
