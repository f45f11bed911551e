"""The JupyterLite site, built from this checkout and opened offline in Debian's Chromium.

Every request that leaves 127.0.0.1 is recorded and refused (see lite_build/browse.py), so
what works here works for a student with no network but the site's own host; only numpy
and pandas (compiled by Pyodide) would come from outside, at the lock file's pinned URLs.
"""

from __future__ import annotations

import hashlib
import json
import re
import zipfile

import pytest
from jupyterlite_pyodide_kernel.constants import PYODIDE_CDN_URL

from .conftest import (
    BOOT,
    BUDGET,
    COUNTER_READ,
    DIAGRAM,
    DIAGRAM_READ,
    PACKAGE_FILE_TO_COMPARE,
    PROBE_NOTEBOOK,
    ROOT,
    SETUP,
    sha256_of,
)

pytestmark = pytest.mark.browser

# The one version source (pyproject.toml's version is dynamic, read from it by hatchling).
PROJECT_VERSION = re.search(
    r'^__version__ = "([^"]+)"', (ROOT / "widgets" / "pytree_lab" / "__init__.py").read_text(), re.M
).group(1)
PYODIDE_CORE = ("pyodide.mjs", "pyodide.asm.mjs", "pyodide.asm.wasm", "python_stdlib.zip", "pyodide-lock.json")


# ---------------------------------------------------------------- the built site (no browser)


def test_site_config_points_the_kernel_at_the_site_itself(lite_site):
    config = json.loads((lite_site / "jupyter-lite.json").read_text())["jupyter-config-data"]
    # students' work: a storage name from the site's identity (not its path), never memory-only storage
    from lite_build import build

    for key in ("contentsStorageName", "workspacesStorageName", "settingsStorageName"):
        assert config[key] == "pytree-lab: " + build.default_site_name()
    assert config["enableMemoryStorage"] is False
    # a notebook saved keeps its widgets' models: a student's next visit shows them before the kernel starts
    assert config["settingsOverrides"]["@jupyter-widgets/jupyterlab-manager:plugin"] == {"saveState": True}
    kernel = config["litePluginSettings"]["@jupyterlite/pyodide-kernel-extension:kernel"]
    assert kernel["pyodideUrl"] == "./static/pyodide/pyodide.mjs"
    assert kernel["disablePyPIFallback"] is True
    assert kernel["pipliteUrls"][0].startswith("./pypi/all.json?sha256=")


def test_lock_file_is_local_except_compiled_packages_at_pinned_cdn_urls(lite_site, lite_manifest):
    lock = json.loads((lite_site / "static" / "pyodide" / "pyodide-lock.json").read_text())
    packages = lock["packages"]
    cdn = f"{PYODIDE_CDN_URL}/"
    for name in ("numpy", "pandas"):
        url = packages[name]["file_name"]
        assert url == lite_manifest["cdn_packages"][name]
        assert url.startswith(cdn) and url.endswith(".whl")
    for name in ("micropip", "ipython", "traitlets", "python-dateutil", "pytz"):
        file_name = packages[name]["file_name"]
        assert "/" not in file_name, f"{name} should be served by the site, lock says {file_name}"
        assert sha256_of(lite_site / "static" / "pyodide" / file_name) == packages[name]["sha256"]


def test_site_wheel_index_holds_the_checkouts_wheel_and_pinned_widgets(lite_site):
    index = json.loads((lite_site / "pypi" / "all.json").read_text())
    assert PROJECT_VERSION in index["pytree-lab"]["releases"]
    assert "0.11.0" in index["anywidget"]["releases"]
    assert "8.1.9" in index["ipywidgets"]["releases"]
    assert "0.13.1" in index["bqplot"]["releases"]
    assert set(index) >= {"comm", "jupyterlab-widgets", "bqscales", "traittypes", "autograd", "psygnal"}


def test_probe_notebook_got_the_setup_cell_and_the_lite_kernel(lite_site, lite_manifest):
    nb = json.loads((lite_site / "files" / PROBE_NOTEBOOK).read_text())
    first = "".join(nb["cells"][0]["source"])
    assert first == (ROOT / "lite_build" / "first_cell.py").read_text().rstrip("\n")
    assert nb["metadata"]["kernelspec"]["name"] == "python"
    assert lite_manifest["setup_cell"][PROBE_NOTEBOOK] == "injected"


def test_bytecode_by_pyodides_python_with_every_hash_kept_right(lite_site, lite_manifest):
    assert lite_manifest["bytecode"]["python"] == "3.14.2"
    pyodide_dir = lite_site / "static" / "pyodide"
    with zipfile.ZipFile(pyodide_dir / "python_stdlib.zip") as z:
        names = set(z.namelist())
        assert {"json/__init__.pyc", "asyncio/__init__.pyc", "ast.pyc"} <= names
        pyc = z.read("json/__init__.pyc")
    assert pyc[:4] == bytes.fromhex("2b0e0d0a")  # Python 3.14's magic number
    assert int.from_bytes(pyc[4:8], "little") == 1  # hash-based, unchecked
    lock = json.loads((pyodide_dir / "pyodide-lock.json").read_text())["packages"]
    with zipfile.ZipFile(pyodide_dir / lock["ipython"]["file_name"]) as z:
        assert "IPython/core/__pycache__/interactiveshell.cpython-314.pyc" in z.namelist()
    # every hash the site records matches the rewritten files
    for entry in lock.values():
        if "/" not in entry["file_name"]:
            assert sha256_of(pyodide_dir / entry["file_name"]) == entry["sha256"], entry["name"]
    for index_path in (
        lite_site / "pypi" / "all.json",
        lite_site / "extensions" / "@jupyterlite" / "pyodide-kernel-extension" / "static" / "pypi" / "all.json",
    ):
        index = json.loads(index_path.read_text())
        for package in index.values():
            for files in package["releases"].values():
                for f in files:
                    whl = index_path.parent / f["url"].split("?")[0]
                    assert sha256_of(whl) == f["digests"]["sha256"], whl.name
                    with zipfile.ZipFile(whl) as z:
                        assert any(n.endswith(".cpython-314.pyc") for n in z.namelist()), whl.name
    kernel = json.loads((lite_site / "jupyter-lite.json").read_text())["jupyter-config-data"]["litePluginSettings"][
        "@jupyterlite/pyodide-kernel-extension:kernel"
    ]
    assert kernel["pipliteUrls"][0] == "./pypi/all.json?sha256=" + sha256_of(lite_site / "pypi" / "all.json")
    assert kernel["loadPyodideOptions"] == {
        "packages": ["micropip", "piplite", "ipykernel", "comm", "pyodide-kernel", "jedi", "ipython"]
    }


# ---------------------------------------------------------------- in the browser, offline


def test_kernel_boots_from_the_sites_own_pyodide(lite_run):
    lite_run.check()
    paths = lite_run.net.local_paths()
    for name in PYODIDE_CORE:
        assert f"/static/pyodide/{name}" in paths, f"{name} was not loaded from the site"
    boot = lite_run.probes(BOOT)
    assert boot["platform"] == "emscripten"
    assert boot["pyodide"] == "314.0.6"
    # the kernel runs the site's bytecode (Pyodide writes none itself)
    assert boot["dont-write-bytecode"] == "True"
    assert boot["ipython-pyc-flags"] == "1"
    assert not lite_run.errors[BOOT], lite_run.errors[BOOT]


def test_projects_wheel_installs_from_the_site(lite_run, lite_site):
    lite_run.check()
    assert f"/pypi/pytree_lab-{PROJECT_VERSION}-py3-none-any.whl" in lite_run.net.local_paths()
    boot = lite_run.probes(BOOT)
    assert boot["pytree-lab"] == PROJECT_VERSION
    # the package in the kernel is the site's wheel, and that wheel is this checkout's
    wheel = lite_site / "pypi" / f"pytree_lab-{PROJECT_VERSION}-py3-none-any.whl"
    with zipfile.ZipFile(wheel) as z:
        in_wheel = hashlib.sha256(z.read(f"pytree_lab/{PACKAGE_FILE_TO_COMPARE}")).hexdigest()
    assert boot["file-sha256"] == in_wheel
    assert in_wheel == (lite_site.parent / "checkout-sha256").read_text()


def test_setup_cell_starts_numpy_in_the_background_and_ends(lite_run):
    lite_run.check()
    assert lite_run.outputs[SETUP].strip() == (
        "numpy and pandas are loading in the background (from cdn.jsdelivr.net): tree diagrams work now; "
        "a cell that needs numpy waits until they are loaded.\n"
        "Your work in this site is kept in this browser only (not on a server, not in other browsers): "
        "File > Download saves a notebook to your computer."
    ), lite_run.outputs[SETUP]
    assert not lite_run.errors[SETUP], lite_run.errors[SETUP]


def test_inline_anywidget_click_round_trips_to_python(lite_run):
    lite_run.check()
    assert lite_run.counter_text == "clicked 1"
    assert lite_run.probes(COUNTER_READ)["count"] == "1"


def test_pytree_diagram_renders_and_a_leaf_click_reaches_python(lite_run):
    lite_run.check()
    assert not lite_run.errors[DIAGRAM], lite_run.errors[DIAGRAM]
    assert lite_run.diagram_rendered and lite_run.bias_leaf_rendered
    read = lite_run.probes(DIAGRAM_READ)
    assert read["selected"] == "['bias']"
    # the diagram of a plain-Python tree needed no numpy
    assert read["numpy-imported"] == "False"


def test_in_pyodide_a_students_endless_loop_is_stopped_by_the_line_tracer(lite_run):
    lite_run.check()
    assert not lite_run.errors[BUDGET], lite_run.errors[BUDGET]
    probes = lite_run.probes(BUDGET)
    assert probes["budget-drivers"] == "tracer None"  # a check's budget traces; the explorer's is off
    assert probes["budget-stopped"] == "True True True"
    assert probes["budget-tracer-left"] == "True"


def test_only_numpy_and_pandas_were_requested_from_outside(lite_run, lite_manifest):
    lite_run.check()
    refused = set(lite_run.net.refused)
    # the setup cell's probe asks for numpy (at the lock's URL); refused, nothing else follows
    assert refused == {lite_manifest["cdn_packages"]["numpy"]}, f"refused: {sorted(refused)}"
