"""A rebuild after a notebook edit compiles no bytecode for unchanged archives: the build keeps
each compiled archive under the sha256 of what it compiled, and reuses it byte for byte.

Builds the real site twice (heavy: run under the shared lock). The first build uses an empty
cache of its own; the rebuild, after one notebook gained a cell, finds every archive but the
project's own wheel (built afresh from the checkout) in it."""

from __future__ import annotations

import hashlib
import json
import re
import zipfile
from pathlib import Path

import nbformat
import pytest

from lite_build import build


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def archives(site: Path) -> dict[str, str]:
    found = [
        site / "static" / "pyodide" / "python_stdlib.zip",
        *(site / "static" / "pyodide").glob("*.whl"),
        *(site / "pypi").glob("*.whl"),
    ]
    return {p.relative_to(site).as_posix(): digest(p) for p in found}


def test_a_rebuild_after_a_notebook_edit_reuses_the_compiled_archives(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(build, "BYTECODE_CACHE", tmp_path / "bytecode-cache")
    notebook = tmp_path / "notes" / "extra.ipynb"
    notebook.parent.mkdir()
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("x = 1")]
    nbformat.write(nb, notebook)
    out = tmp_path / "site"

    build.build_site(out, [notebook])
    first_log = capsys.readouterr().out
    first = archives(out)
    counted = re.search(r"\((\d+) of (\d+) archives unchanged since an earlier build", first_log)
    assert counted is not None and counted[1] == "0", first_log  # an empty cache: everything compiled
    total = int(counted[2])
    assert total >= len(first)  # the stdlib, the lock's wheels, the site's and the kernel extension's
    assert len(list((tmp_path / "bytecode-cache").glob("*.zip"))) == total

    nb.cells.append(nbformat.v4.new_markdown_cell("One more cell."))
    nbformat.write(nb, notebook)
    build.build_site(out, [notebook])
    second_log = capsys.readouterr().out
    second = archives(out)
    # every archive but the project's wheel (rebuilt from the checkout) came from the cache
    reused = re.search(r"\((\d+) of (\d+) archives unchanged", second_log)
    assert int(reused[2]) == total and int(reused[1]) >= total - 1, second_log
    assert {k: v for k, v in second.items() if "pytree_lab-" not in k} == {
        k: v for k, v in first.items() if "pytree_lab-" not in k
    }
    # the reused archives carry their bytecode, and the site's lock names their sha256
    with zipfile.ZipFile(out / "static" / "pyodide" / "python_stdlib.zip") as z:
        assert any(n.endswith(".pyc") for n in z.namelist())
    lock = json.loads((out / "static" / "pyodide" / "pyodide-lock.json").read_text())
    local = {e["file_name"]: e["sha256"] for e in lock["packages"].values() if "/" not in e["file_name"]}
    for name, sha in local.items():
        assert second[f"static/pyodide/{name}"] == sha
    # the edit is in the site
    edited = json.loads((out / "files" / "extra.ipynb").read_text())
    assert edited["cells"][-1]["source"] in ("One more cell.", ["One more cell."])


def small_site(root: Path) -> Path:
    """The parts of a site ship_bytecode reads and rewrites: the stdlib zip, one lock wheel, one
    index wheel, the lock, the index and jupyter-lite.json."""
    pyodide_dir = root / "static" / "pyodide"
    pyodide_dir.mkdir(parents=True)
    (root / "pypi").mkdir()
    with zipfile.ZipFile(pyodide_dir / "python_stdlib.zip", "w") as z:
        z.writestr("mod.py", "x = 1\n")
    with zipfile.ZipFile(pyodide_dir / "tiny-1.0-py3-none-any.whl", "w") as z:
        z.writestr("tiny/__init__.py", "y = 2\n")
    with zipfile.ZipFile(root / "pypi" / "other-1.0-py3-none-any.whl", "w") as z:
        z.writestr("other/__init__.py", "z = 3\n")
    (pyodide_dir / "pyodide-lock.json").write_text(
        json.dumps(
            {"packages": {"tiny": {"name": "tiny", "file_name": "tiny-1.0-py3-none-any.whl", "sha256": "0" * 64}}}
        )
    )
    (root / "pypi" / "all.json").write_text(
        json.dumps(
            {
                "other": {
                    "releases": {
                        "1.0": [
                            {
                                "filename": "other-1.0-py3-none-any.whl",
                                "url": "./other-1.0-py3-none-any.whl",
                                "size": 1,
                                "digests": {"sha256": "0" * 64},
                            }
                        ]
                    }
                }
            }
        )
    )
    (root / "jupyter-lite.json").write_text(
        json.dumps(
            {
                "jupyter-config-data": {
                    "litePluginSettings": {
                        f"{build.PYODIDE_KERNEL_EXTENSION}:kernel": {
                            "pipliteUrls": ["./pypi/all.json?sha256=" + "0" * 64]
                        }
                    }
                }
            }
        )
    )
    return root


def test_archives_found_in_the_cache_are_used_byte_for_byte_without_compiling(tmp_path, monkeypatch):
    """The cache-hit path alone: every archive of a small site is in the cache (as an earlier
    build leaves it), so nothing is compiled, each archive becomes the cached bytes and the lock,
    the index and the index URL name their new sha256."""
    monkeypatch.setattr(build, "BYTECODE_CACHE", tmp_path / "cache")
    site = small_site(tmp_path / "site")
    (tmp_path / "cache").mkdir()
    archives_ = [
        site / "static" / "pyodide" / "python_stdlib.zip",
        site / "static" / "pyodide" / "tiny-1.0-py3-none-any.whl",
        site / "pypi" / "other-1.0-py3-none-any.whl",
    ]
    cached = {}
    for path in archives_:
        layout = "zipimport" if path.name.endswith(".zip") else "wheel"
        prefix = "/lib/python314.zip" if layout == "zipimport" else "/lib/python3.14/site-packages"
        key = build.bytecode_cache_key({"src": str(path), "layout": layout, "prefix": prefix, "drop_sources": False})
        compiled = b"PK-compiled-" + path.name.encode()  # what an earlier build stored
        (tmp_path / "cache" / f"{key}.zip").write_bytes(compiled)
        (tmp_path / "cache" / f"{key}.json").write_text(
            json.dumps({"src": path.name, "compiled": 1, "python": "3.14.2"})
        )
        cached[path] = compiled

    def no_compiler(*args, **kwargs):
        raise AssertionError("node was run although every archive was cached")

    monkeypatch.setattr(build.subprocess, "run", no_compiler)
    monkeypatch.setattr(build, "source_date_epoch", lambda: 315532800)
    report = build.ship_bytecode(site)
    assert report["compiled_now"] == 0 and report["from_cache"] == 3
    for path, compiled in cached.items():
        assert path.read_bytes() == compiled
    lock = json.loads((site / "static" / "pyodide" / "pyodide-lock.json").read_text())
    assert lock["packages"]["tiny"]["sha256"] == digest(site / "static" / "pyodide" / "tiny-1.0-py3-none-any.whl")
    index = json.loads((site / "pypi" / "all.json").read_text())
    assert index["other"]["releases"]["1.0"][0]["digests"]["sha256"] == digest(
        site / "pypi" / "other-1.0-py3-none-any.whl"
    )
    config = json.loads((site / "jupyter-lite.json").read_text())["jupyter-config-data"]
    urls = config["litePluginSettings"][f"{build.PYODIDE_KERNEL_EXTENSION}:kernel"]["pipliteUrls"]
    assert urls == [f"./pypi/all.json?sha256={digest(site / 'pypi' / 'all.json')}"]

    # an archive whose bytes changed has another key: not in the cache, so it would be compiled
    with zipfile.ZipFile(site / "pypi" / "other-1.0-py3-none-any.whl", "w") as z:
        z.writestr("other/__init__.py", "z = 4\n")
    with pytest.raises(AssertionError, match="node was run"):
        build.ship_bytecode(site)
