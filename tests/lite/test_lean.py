"""The lean site (`build.py --lean`): bytecode without the .py sources it replaces, run in
Pyodide 314.0.6's own interpreter (under node, as the build compiles it).

A small wheel and the site's real stdlib zip go through lite_build/bytecode.mjs with
drop_sources on; then Pyodide boots from that lean stdlib zip, installs the lean wheel and
imports from both. What must hold: every .py that compiled is gone and its .pyc stands in its
place; a .py that does not compile is kept; the wheel's RECORD lists what is in it; imports
work; a traceback into a sourceless file names file, line and function but shows no source.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from lite_build import build  # noqa: E402

MOD = '''\
def f(x):
    y = x * 2
    raise ValueError(f"boom {y}")
'''

RUN = r'''
import { readFileSync } from "node:fs";
import { pathToFileURL } from "node:url";
import path from "node:path";
const [dir, wheel] = process.argv.slice(2);
const { loadPyodide } = await import(pathToFileURL(path.join(dir, "pyodide.mjs")).href);
const py = await loadPyodide({ indexURL: dir + "/" });
py.unpackArchive(new Uint8Array(readFileSync(wheel)), "wheel", { extractDir: "/lib/python3.14/site-packages" });
console.log("RESULT" + py.runPython(`
import json, sys, traceback, importlib.util
import asyncio, email.parser, json.decoder  # from the lean stdlib zip
import leanpkg.mod
try:
    leanpkg.mod.f(21)
except ValueError:
    tb = traceback.format_exc()
json.dumps({
    "json_file": json.__file__, "json_loader": type(json.__spec__.loader).__name__,
    "mod_file": leanpkg.mod.__file__, "mod_loader": type(leanpkg.mod.__spec__.loader).__name__,
    "traceback": tb,
})
`));
'''


@pytest.fixture(scope="module")
def lean(tmp_path_factory):
    if not shutil.which("node"):
        pytest.fail("node is needed (Debian package `nodejs`), as for the site build", pytrace=False)
    work = tmp_path_factory.mktemp("lean")
    pyodide_dir = work / "pyodide"
    build.fetch_pyodide(pyodide_dir)  # the site's own core, integrity-checked (cached)
    wheel = work / "leanpkg-1.0-py3-none-any.whl"
    files = {
        "leanpkg/__init__.py": "VALUE = 1\n",
        "leanpkg/mod.py": MOD,
        "leanpkg/template.py": "def broken(:\n",  # not Python: kept as it is
        "leanpkg-1.0.dist-info/METADATA": "Metadata-Version: 2.1\nName: leanpkg\nVersion: 1.0\n",
        "leanpkg-1.0.dist-info/WHEEL": (
            "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
        ),
    }
    record = (
        "".join(f"{name},sha256=x,{len(text)}\n" for name, text in files.items()) + "leanpkg-1.0.dist-info/RECORD,,\n"
    )
    with zipfile.ZipFile(wheel, "w") as z:
        for name, text in files.items():
            z.writestr(name, text)
        z.writestr("leanpkg-1.0.dist-info/RECORD", record)
    stdlib = pyodide_dir / "python_stdlib.zip"
    source_stdlib = set(zipfile.ZipFile(stdlib).namelist())
    jobs = [
        {
            "src": str(stdlib),
            "dst": str(work / "stdlib-lean.zip"),
            "layout": "zipimport",
            "prefix": "/lib/python314.zip",
            "drop_sources": True,
        },
        {
            "src": str(wheel),
            "dst": str(work / "lean.whl"),
            "layout": "wheel",
            "prefix": "/lib/python3.14/site-packages",
            "drop_sources": True,
        },
    ]
    (work / "jobs.json").write_text(json.dumps(jobs))
    proc = subprocess.run(
        ["node", str(ROOT / "lite_build" / "bytecode.mjs"), str(pyodide_dir), str(work / "jobs.json")],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    shutil.copy2(work / "stdlib-lean.zip", stdlib)
    (work / "run.mjs").write_text(RUN)
    run = subprocess.run(
        ["node", str(work / "run.mjs"), str(pyodide_dir), str(work / "lean.whl")],
        capture_output=True,
        text=True,
        timeout=600,
    )
    line = next((ln for ln in run.stdout.splitlines() if ln.startswith("RESULT")), None)
    assert line is not None, run.stdout[-3000:] + run.stderr[-3000:]
    return {
        "wheel": zipfile.ZipFile(work / "lean.whl"),
        "stdlib": zipfile.ZipFile(stdlib),
        "source_stdlib": source_stdlib,
        "run": json.loads(line[len("RESULT") :]),
    }


def test_lean_wheel_holds_bytecode_in_place_of_sources(lean):
    names = set(lean["wheel"].namelist())
    assert {"leanpkg/__init__.pyc", "leanpkg/mod.pyc"} <= names
    assert "leanpkg/mod.py" not in names and "leanpkg/__init__.py" not in names
    assert not any("__pycache__" in n for n in names)
    assert "leanpkg/template.py" in names and "leanpkg/template.pyc" not in names  # did not compile: kept
    record = [line.split(",")[0] for line in lean["wheel"].read("leanpkg-1.0.dist-info/RECORD").decode().splitlines()]
    assert set(record) == names, set(record) ^ names


def test_lean_stdlib_zip_has_no_source_that_compiled(lean):
    names = set(lean["stdlib"].namelist())
    assert "json/__init__.pyc" in names and "json/__init__.py" not in names
    assert "asyncio/base_events.pyc" in names and "asyncio/base_events.py" not in names
    py_left = {n for n in names if n.endswith(".py")}
    # what stays as source is only what Python 3.14 itself cannot compile (test data and the like)
    assert len(py_left) < 0.02 * len({n for n in lean["source_stdlib"] if n.endswith(".py")}), sorted(py_left)[:20]


def test_pyodide_boots_and_imports_from_lean_bytecode(lean):
    run = lean["run"]
    assert run["json_file"] == "/lib/python314.zip/json/__init__.pyc"
    assert run["mod_file"].endswith("site-packages/leanpkg/mod.pyc")
    assert run["mod_loader"] == "SourcelessFileLoader"


def test_a_traceback_into_lean_code_names_the_place_but_shows_no_source(lean):
    tb = lean["run"]["traceback"]
    assert 'leanpkg/mod.py", line 3, in f' in tb, tb  # the file it was compiled from, line, function
    assert "raise ValueError" not in tb  # the source line cannot be shown: the README says so
    assert tb.rstrip().endswith("ValueError: boom 42")
