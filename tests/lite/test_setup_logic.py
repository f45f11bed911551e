"""`pytree_lab_site.lite_kernel.setup()` and the background load, with test doubles for the browser.

In the browser the CDN is never reachable here, so the paths where numpy does arrive, or
where the CDN answers but the download stalls or fails, are driven by doubles of Pyodide's
JS bridge (`js.fetch`, `pyodide_js.lockfile`, `pyodide.ffi`) and of `piplite.install`, in a
CPython subprocess where jax cannot be imported (as in the browser). The real page is
tested in test_lite_offline.py (refused and black-holed CDN).
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
NUMPY_URL = "https://cdn.jsdelivr.net/pyodide/v314.0.6/full/numpy-2.4.6-cp314-cp314-pyemscripten_2026_0_wasm32.whl"

SCRIPT = r'''
import asyncio, json, sys, time, types
case = json.loads(sys.argv[1])

class BlockJax:
    def find_spec(self, name, path=None, target=None):
        blocked = ("jax", "jaxlib") + (("numpy", "autograd", "bqplot", "pandas") if case["no_numpy"] else ())
        if name.split(".")[0] in blocked:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
sys.meta_path.insert(0, BlockJax())

calls = {"fetch": [], "install": []}

class JsException(Exception):
    pass

class Response:
    def __init__(self, status):
        self.status, self.ok = status, 200 <= status < 300
        self.headers = {"content-length": "6912345"}

async def fetch(url, options):
    calls["fetch"].append([url, options["method"]])
    if case["fetch"] == "hang":
        await asyncio.Event().wait()
    if case["fetch"] == "refuse":
        raise JsException("TypeError: Failed to fetch")
    return Response(case["fetch"])

async def install(packages, **kwargs):
    calls["install"].append(list(packages))
    if case["install"] == "hang":
        await asyncio.Event().wait()
    if case["install"] == "fail":
        raise ValueError("Can't fetch wheel from 'https://cdn.jsdelivr.net/...'")

js = types.ModuleType("js")
js.fetch = fetch
js.Object = types.SimpleNamespace(fromEntries=dict)
ffi = types.ModuleType("pyodide.ffi")
ffi.JsException = JsException
ffi.to_js = lambda value, dict_converter=None: dict_converter(value.items()) if dict_converter else value
pyodide = types.ModuleType("pyodide")
pyodide.ffi = ffi
pyodide_js = types.ModuleType("pyodide_js")
pyodide_js.lockfile = types.SimpleNamespace(packages=types.SimpleNamespace(
    numpy=types.SimpleNamespace(file_name=case["numpy_file"])))
pyodide_js.lockfileBaseUrl = "http://127.0.0.1:8000/static/pyodide/"
calls["load"] = []

async def load_package(names):
    calls["load"].append(list(names))
    if case["install"] == "hang":
        await asyncio.Event().wait()
    if case["install"] == "slow":
        await asyncio.sleep(2.3)
pyodide_js.loadPackage = load_package
piplite = types.ModuleType("piplite")
piplite.install = install
sys.modules.update({"js": js, "pyodide": pyodide, "pyodide.ffi": ffi, "pyodide_js": pyodide_js, "piplite": piplite})

calls["kernel_fetch"] = []

async def kernel_load_packages_from_imports(code, *args, **kwargs):
    calls["kernel_fetch"].append(code)
kernel_module = types.ModuleType("pyodide_kernel.kernel")
kernel_module._load_packages_from_imports = kernel_load_packages_from_imports
sys.modules.update({"pyodide_kernel": types.ModuleType("pyodide_kernel"), "pyodide_kernel.kernel": kernel_module})

from pytree_lab_site import lite_kernel
lite_kernel.PROGRESS_SECONDS = case.get("progress_seconds", 2.0)

async def main():
    started = time.monotonic()
    said = await lite_kernel.setup(probe_seconds=1.0, install_seconds=case.get("install_seconds", 1.0))
    setup_s = time.monotonic() - started
    print("SETUP-END")
    # the cells after the setup cell, as the kernel runs them: its pre-cell step first
    cells = {}
    for name, code in case["cells"]:
        t = time.monotonic()
        await kernel_module._load_packages_from_imports(code)
        cells[name] = {"waited": time.monotonic() - t, "outcome": lite_kernel.LOAD.outcome}
        print(f"CELL-END {name}")
    if case.get("rerun_setup"):  # the student runs the setup cell again, after the load ended
        await lite_kernel.wait_for_numpy() if case["rerun_setup"] == "after-wait" else await asyncio.sleep(1.5)
        print("RERUN")
        await lite_kernel.setup(probe_seconds=1.0, install_seconds=1.0)
    outcome = await lite_kernel.wait_for_numpy()
    return said, setup_s, cells, outcome, time.monotonic() - started

said, setup_s, cells, outcome, seconds = asyncio.run(main())
import jax
print("RESULT" + json.dumps({
    "said": said, "setup_seconds": setup_s, "cells": cells,
    "outcome": outcome, "calls": calls, "seconds": seconds,
    "jax_version": jax.__version__,
    "jnp_array": repr(jax.numpy.array([1.0, 2.0])),
}))
'''


DIAGRAM_CELL = "from pytree_lab import PytreeDiagram\nPytreeDiagram({'weight': [1.0, -1.0], 'bias': 0.0})"
JAX_CELL = "import jax\nimport jax.numpy as jnp\nfrom pytree_lab import PytreeDiagram, StepExplorer"


def run_setup(fetch, install="ok", numpy_file=NUMPY_URL, cells=(), rerun_setup=None, **more):
    # numpy is importable only where the install succeeds, as in the browser
    case = {
        "fetch": fetch,
        "install": install,
        "numpy_file": numpy_file,
        "no_numpy": not (fetch == 200 and install in ("ok", "slow")),
        "cells": list(cells),
        "rerun_setup": rerun_setup,
        **more,
    }
    proc = subprocess.run(
        [sys.executable, "-c", SCRIPT, json.dumps(case)], capture_output=True, text=True, cwd=ROOT, timeout=300
    )
    line = next((ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT")), None)
    assert line is not None, proc.stdout + proc.stderr
    result = json.loads(line[len("RESULT") :])
    printed = proc.stdout[: proc.stdout.index("RESULT")]
    result["setup_printed"], _, rest = printed.partition("SETUP-END\n")
    result["printed"] = rest  # what the cells after the setup cell printed (CELL-END lines between)
    return result


LOADING_LINE = (
    "numpy and pandas are loading in the background (from cdn.jsdelivr.net): tree diagrams work "
    "now; a cell that needs numpy waits until they are loaded.\n"
    "Your work in this site is kept in this browser only (not on a server, not in other browsers): "
    "File > Download saves a notebook to your computer.\n"
)


def test_numpy_arrives_the_lite_engine_is_installed():
    r = run_setup(fetch=200, cells=[("jax", JAX_CELL)])
    assert r["said"] == "loading" and r["setup_printed"] == LOADING_LINE
    assert r["outcome"] == "lite"
    assert r["calls"]["fetch"] == [[NUMPY_URL, "HEAD"]]  # the lock's URL, headers only
    assert r["calls"]["install"] == [["numpy", "autograd", "bqplot"]]  # one load, not one per cell
    assert r["calls"]["load"] == [["numpy", "pandas"]]  # the big downloads by Pyodide's loader, at once
    assert r["cells"]["jax"]["outcome"] == "lite"  # the jax cell ran after the load was settled
    assert r["printed"] == "CELL-END jax\n"  # nothing to say when numpy arrived
    assert r["calls"]["kernel_fetch"] == [JAX_CELL]  # the kernel's own step still runs (finds numpy loaded)
    assert r["jax_version"].endswith("+pytree-lab-lite")
    assert r["jnp_array"].startswith("array([1., 2.]")  # a real numpy array: the full engine


def test_the_setup_cell_does_not_wait_and_a_diagram_cell_does_not_either():
    """The CDN black-holed: the setup cell and a plain-Python diagram cell end at once while
    the probe is still waiting; the jax cell waits for that same load, ends within its bound and
    says what happened."""
    r = run_setup(fetch="hang", cells=[("diagram", DIAGRAM_CELL), ("jax", JAX_CELL), ("jax-again", JAX_CELL)])
    # bounds with room for a loaded machine, each below what the fault would take: a setup cell
    # that waited for the probe takes its whole 1 s; a jax cell that waited for the hung CDN, forever
    assert r["setup_seconds"] < 0.9, r["setup_seconds"]  # the probe's 1 s bound has not run out
    assert r["cells"]["diagram"] == {"waited": pytest.approx(0, abs=0.5), "outcome": None}  # still loading
    assert 0.4 < r["cells"]["jax"]["waited"] < 5.0, r["cells"]  # the rest of the probe's 1 s, not the hang
    assert r["cells"]["jax"]["outcome"] == "trees-only"
    assert r["calls"]["fetch"] == [[NUMPY_URL, "HEAD"]]  # one probe for all cells
    assert r["calls"]["install"] == [] and r["calls"]["load"] == []
    # the paragraph once, in the first cell that needed numpy; then nothing
    assert r["printed"] == (
        "CELL-END diagram\n"
        "numpy could not be downloaded from Pyodide's CDN: no answer from cdn.jsdelivr.net "
        f"within 1 s (a firewall may be dropping it).\n{lite_kernel_still_works()}\n"
        "CELL-END jax\nCELL-END jax-again\n"
    )
    # once numpy could not be had, the kernel's own fetch is skipped for cells importing it
    assert r["calls"]["kernel_fetch"] == [DIAGRAM_CELL, JAX_CELL, JAX_CELL]  # jax is not a lock package


def lite_kernel_still_works() -> str:
    from pytree_lab_site.lite_kernel import STILL_WORKS

    return STILL_WORKS


@pytest.mark.parametrize(
    "fetch, why",
    [
        ("hang", "no answer from cdn.jsdelivr.net within 1 s (a firewall may be dropping it)"),
        ("refuse", "the request to cdn.jsdelivr.net was refused or the network is offline"),
        (404, "cdn.jsdelivr.net answered HTTP 404"),
    ],
)
def test_cdn_unreachable_no_download_is_started(fetch, why):
    r = run_setup(fetch=fetch, cells=[("numpy", "import numpy as np")])
    assert r["outcome"] == "trees-only"
    assert r["calls"]["install"] == [] and r["calls"]["load"] == []  # a download that would hang or fail never starts
    assert r["printed"].startswith(f"numpy could not be downloaded from Pyodide's CDN: {why}.\nStill working:")
    assert r["calls"]["kernel_fetch"] == []  # no second try at numpy for the cell importing it
    assert r["jnp_array"] == "Array([1.0, 2.0])"  # the tree-only engine


@pytest.mark.parametrize(
    "install, why",
    [
        ("hang", "the download did not finish within 1 s"),
        ("fail", "the download failed (RuntimeError: numpy did not arrive)"),
    ],
)
def test_cdn_answers_but_the_download_stalls_or_fails(install, why):
    r = run_setup(fetch=200, install=install, cells=[("jax", JAX_CELL)])
    assert r["outcome"] == "trees-only"
    assert r["printed"].startswith(f"numpy could not be downloaded from Pyodide's CDN: {why}.\n")
    # numpy was asked for once, by Pyodide's loader; micropip never asked for it a second time
    assert r["calls"]["load"] == [["numpy", "pandas"]] and r["calls"]["install"] == []
    assert r["cells"]["jax"]["waited"] < 6.0  # the probe's 1 s + the download's 1 s, with room for load
    assert r["jnp_array"] == "Array([1.0, 2.0])"


def test_a_site_with_numpy_included_probes_its_own_copy():
    r = run_setup(fetch=200, numpy_file="numpy-2.4.6-cp314-cp314-pyemscripten_2026_0_wasm32.whl")
    assert r["calls"]["fetch"] == [
        ["http://127.0.0.1:8000/static/pyodide/numpy-2.4.6-cp314-cp314-pyemscripten_2026_0_wasm32.whl", "HEAD"]
    ]
    assert r["outcome"] == "lite"


@pytest.mark.parametrize(
    "code, waits",
    [
        ("import jax", True),
        ("import jax.numpy as jnp", True),
        ("from jax import tree_util", True),
        ("import numpy as np", True),
        ("import pandas", True),
        ("from optax import adam", True),
        ("from pytree_lab import StepExplorer", True),
        ("from pytree_lab import PytreeDiagram, gradient_step", True),
        ("from pytree_lab.explorer import StepExplorer", True),
        ("import pytree_lab.step", True),
        ("if True:\n    import autograd", True),
        ("from pytree_lab import PytreeDiagram\nPytreeDiagram({'a': 1.0})", False),
        ("from pytree_lab import describe, diagnose", False),
        ("from pytree_lab import PytreeDiagram, describe, get_engine", True),
        ("from pytree_lab_lite import optax", True),
        ("import pytree_lab", False),
        ("x = {'a': [1.0, 2.0]}", False),
        ("import json, math", False),
        ("def f(:", False),  # a syntax error waits for nothing: the cell says so itself
    ],
)
def test_which_cells_wait_for_numpy(code, waits):
    from pytree_lab_site.lite_kernel import cell_needs_numpy

    assert cell_needs_numpy(code) is waits


def test_a_cell_with_ipython_syntax_is_read_as_ipython_runs_it():
    code = textwrap.dedent("""
        import json
        from IPython.core.interactiveshell import InteractiveShell
        InteractiveShell.instance()
        from pytree_lab_site.lite_kernel import cell_needs_numpy
        print(json.dumps([cell_needs_numpy("%load_ext autoreload\\nimport numpy as np"),
                          cell_needs_numpy("!ls\\nimport jax"),
                          cell_needs_numpy("%time x = 1")]))
    """)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert proc.stdout.strip().splitlines()[-1] == "[true, true, false]", proc.stdout + proc.stderr


def test_the_setup_cell_run_again_says_how_the_load_ended_and_starts_no_second_one():
    # the load failed while no cell needed numpy: the setup cell, run again, says so (once)
    r = run_setup(fetch="refuse", rerun_setup="idle")
    assert r["printed"].startswith(
        "RERUN\nnumpy could not be downloaded from Pyodide's CDN: the request to "
        "cdn.jsdelivr.net was refused or the network is offline.\nStill working:"
    )
    assert r["printed"].count("numpy could not be downloaded") == 1
    assert r["calls"]["fetch"] == [[NUMPY_URL, "HEAD"]]  # no second probe
    r = run_setup(fetch=200, rerun_setup="after-wait")
    import numpy

    assert r["printed"] == (
        f"RERUN\nnumpy {numpy.__version__} is loaded; `import jax` gives pytree-lab's Lite engine (numpy + autograd).\n"
    )
    assert r["calls"]["install"] == [["numpy", "autograd", "bqplot"]] and r["calls"]["load"] == [["numpy", "pandas"]]


def test_the_setup_cell_is_silent_outside_the_browser_and_says_nothing_false_there():
    """Issue 18: in JupyterLab the setup cell said "Your work in this site is kept in this
    browser only", which is false there. Outside JupyterLite it prints and displays nothing;
    what it says about storage is printed by the browser's setup only (tested above)."""
    source = (ROOT / "lite_build" / "first_cell.py").read_text()
    code = textwrap.dedent('''
        import json, sys
        from IPython.core.interactiveshell import InteractiveShell
        from IPython.utils.capture import capture_output
        shell = InteractiveShell.instance()
        with capture_output() as cap:
            result = shell.run_cell(sys.argv[1])
        print("RESULT" + json.dumps({"stdout": cap.stdout, "stderr": cap.stderr, "outputs": len(cap.outputs),
                                     "ok": result.success, "value": repr(result.result)}))
    ''')
    proc = subprocess.run([sys.executable, "-c", code, source], capture_output=True, text=True, cwd=ROOT, timeout=120)
    line = next((ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT")), None)
    assert line is not None, proc.stdout + proc.stderr
    assert json.loads(line[len("RESULT") :]) == {"stdout": "", "stderr": "", "outputs": 0, "ok": True, "value": "None"}
    # the cell's own text states nothing that is true in one place only
    assert "kept in this browser" not in source


def test_a_cell_waiting_for_a_slow_download_shows_what_and_how_big_then_how_long_it_took():
    r = run_setup(fetch=200, install="slow", install_seconds=30.0, progress_seconds=0.5, cells=[("jax", JAX_CELL)])
    assert r["outcome"] == "lite" and r["cells"]["jax"]["outcome"] == "lite"
    import re

    # one line rewritten in place (carriage returns; read here as line ends), then the time taken
    shown = [ln for ln in r["printed"].split("CELL-END jax")[0].splitlines() if ln]
    progress = [
        re.fullmatch(
            r"Waiting for numpy \(6\.9 MB\) and pandas from cdn\.jsdelivr\.net: (\d+) s so far, "
            r"at most 31 s in all; this cell runs when they are loaded\.",
            ln,
        )
        for ln in shown[:-1]
    ]
    assert len(progress) >= 3 and all(progress), shown
    seconds = [int(m[1]) for m in progress]
    assert seconds == sorted(seconds) and seconds[-1] <= 4
    assert re.fullmatch(r"Loaded after [234] s\.\s*", shown[-1]), shown[-1]
    assert r["calls"]["load"] == [["numpy", "pandas"]] and r["calls"]["install"] == [["numpy", "autograd", "bqplot"]]
