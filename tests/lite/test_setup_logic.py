"""`pytree_lab.compat.lite_kernel.setup()` decisions, with test doubles for the browser.

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
piplite = types.ModuleType("piplite")
piplite.install = install
sys.modules.update({"js": js, "pyodide": pyodide, "pyodide.ffi": ffi, "pyodide_js": pyodide_js, "piplite": piplite})

from pytree_lab.compat import lite_kernel
started = time.monotonic()
outcome = asyncio.run(lite_kernel.setup(probe_seconds=1.0, install_seconds=1.0))
seconds = time.monotonic() - started
import jax
print("RESULT" + json.dumps({
    "outcome": outcome, "calls": calls, "seconds": seconds,
    "jax_version": jax.__version__,
    "jnp_array": repr(jax.numpy.array([1.0, 2.0])),
}))
'''


def run_setup(fetch, install="ok", numpy_file=NUMPY_URL):
    # numpy is importable only where the install succeeds, as in the browser
    case = {"fetch": fetch, "install": install, "numpy_file": numpy_file,
            "no_numpy": not (fetch == 200 and install == "ok")}
    proc = subprocess.run([sys.executable, "-c", SCRIPT, json.dumps(case)], capture_output=True, text=True,
                          cwd=ROOT, timeout=300)
    line = next((ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT")), None)
    assert line is not None, proc.stdout + proc.stderr
    result = json.loads(line[len("RESULT"):])
    result["printed"] = proc.stdout[: proc.stdout.index("RESULT")]
    return result


def test_numpy_arrives_the_lite_engine_is_installed():
    r = run_setup(fetch=200)
    assert r["outcome"] == "lite"
    assert r["calls"]["fetch"] == [[NUMPY_URL, "HEAD"]]  # the lock's URL, headers only
    assert r["calls"]["install"] == [["numpy", "autograd", "bqplot"]]
    import numpy

    assert r["printed"] == (f"Ready: numpy {numpy.__version__} loaded; `import jax` gives pytree-lab's "
                            "Lite engine (numpy + autograd).\n")
    assert r["jax_version"].endswith("+pytree-lab-lite")
    assert r["jnp_array"].startswith("array([1., 2.]")  # a real numpy array: the full engine


@pytest.mark.parametrize("fetch, why", [
    ("hang", "no answer from cdn.jsdelivr.net within 1 s (a firewall may be dropping it)"),
    ("refuse", "the request to cdn.jsdelivr.net was refused or the network is offline"),
    (404, "cdn.jsdelivr.net answered HTTP 404"),
])
def test_cdn_unreachable_no_download_is_started(fetch, why):
    r = run_setup(fetch=fetch)
    assert r["outcome"] == "trees-only"
    assert r["calls"]["install"] == []  # a download that would hang or fail is never started
    assert r["printed"].startswith(f"numpy could not be downloaded from Pyodide's CDN: {why}.\nStill working:")
    assert r["jnp_array"] == "Array([1.0, 2.0])"  # the tree-only engine


@pytest.mark.parametrize("install, why", [
    ("hang", "the download did not finish within 1 s"),
    ("fail", "the download failed (ValueError: Can't fetch wheel from 'https://cdn.jsdelivr.net/...')"),
])
def test_cdn_answers_but_the_download_stalls_or_fails(install, why):
    r = run_setup(fetch=200, install=install)
    assert r["outcome"] == "trees-only"
    assert r["printed"].startswith(f"numpy could not be downloaded from Pyodide's CDN: {why}.\n")
    assert r["jnp_array"] == "Array([1.0, 2.0])"


def test_a_site_with_numpy_included_probes_its_own_copy():
    r = run_setup(fetch=200, numpy_file="numpy-2.4.6-cp314-cp314-pyemscripten_2026_0_wasm32.whl")
    assert r["calls"]["fetch"] == [[
        "http://127.0.0.1:8000/static/pyodide/numpy-2.4.6-cp314-cp314-pyemscripten_2026_0_wasm32.whl", "HEAD"]]
    assert r["outcome"] == "lite"
