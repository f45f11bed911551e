"""The site build never deletes what it did not make, and a failed build changes nothing.

These run the build's own code on small folders (no site is built): the checks come first
in `build_site`, and a failure inside the build is made by replacing one step with a double
that raises, which is exactly where a real download or `jupyter lite build` would fail.
"""

from __future__ import annotations

import json

import nbformat
import pytest

from lite_build import build


def snapshot(folder):
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def made_by_build(folder):
    """A folder as an earlier build leaves it: some files and the marker listing them."""
    (folder / "lab").mkdir(parents=True)
    (folder / "lab" / "index.html").write_text("<html>old site</html>")
    (folder / "jupyter-lite.json").write_text("{}")
    build.write_marker(folder)
    return folder


def good_notebook(path):
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("x = 1")]
    nbformat.write(nb, path)
    return path


def test_a_folder_holding_a_users_files_is_refused_and_kept(tmp_path, capsys):
    out = tmp_path / "site"
    out.mkdir()
    (out / "my-notes.ipynb").write_text('{"mine": true}')
    before = snapshot(out)
    assert build.main(["--output-dir", str(out)]) == 1
    err = capsys.readouterr().err
    assert "not empty and was not made by this build" in err and str(out) in err
    assert snapshot(out) == before


def test_a_file_added_to_a_built_site_makes_the_build_refuse(tmp_path):
    out = made_by_build(tmp_path / "site")
    (out / "lab" / "student-work.ipynb").write_text("{}")
    with pytest.raises(build.BuildError, match=r"did not write or that changed since \(lab/student-work.ipynb\)"):
        build.check_output_dir(out)


def test_a_file_changed_in_a_built_site_makes_the_build_refuse(tmp_path):
    out = made_by_build(tmp_path / "site")
    (out / "lab" / "index.html").write_text("<html>edited by hand</html>")
    with pytest.raises(build.BuildError, match=r"\(lab/index.html\)"):
        build.check_output_dir(out)


def test_allowed_output_folders(tmp_path):
    build.check_output_dir(tmp_path / "new")  # missing
    (tmp_path / "empty" / "sub").mkdir(parents=True)
    build.check_output_dir(tmp_path / "empty")  # only empty folders
    build.check_output_dir(made_by_build(tmp_path / "site"))  # an untouched earlier site
    (tmp_path / "file").write_text("x")
    with pytest.raises(build.BuildError, match="is a file"):
        build.check_output_dir(tmp_path / "file")


def test_a_broken_notebook_fails_the_build_naming_it_before_anything_is_made(tmp_path, capsys):
    out = made_by_build(tmp_path / "site")
    before = snapshot(out)
    contents = tmp_path / "notebooks"
    contents.mkdir()
    good_notebook(contents / "fine.ipynb")
    (contents / "half-saved.ipynb").write_text('{"cells": [{"cell_type": "code", "sour')
    assert build.main(["--output-dir", str(out), "--contents", str(contents)]) == 1
    err = capsys.readouterr().err
    assert "half-saved.ipynb: not a valid notebook" in err
    assert "fine.ipynb" not in err
    assert snapshot(out) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notebooks", "site"]  # no staging left behind


def test_a_notebook_that_is_json_but_not_a_notebook_is_named(tmp_path):
    bad = tmp_path / "list.ipynb"
    bad.write_text(json.dumps({"cells": "not a list", "metadata": {}, "nbformat": 4, "nbformat_minor": 5}))
    with pytest.raises(build.BuildError, match=r"list.ipynb: not a valid notebook"):
        build.read_notebook(bad)


def test_a_build_failing_midway_leaves_the_earlier_site_as_it_was(tmp_path, monkeypatch):
    out = made_by_build(tmp_path / "site")
    before = snapshot(out)

    def offline(dest):  # where the real build downloads the Pyodide core
        raise build.BuildError("npm registry unreachable")

    monkeypatch.setattr(build, "fetch_pyodide", offline)
    with pytest.raises(build.BuildError, match="npm registry unreachable"):
        build.build_site(out)
    assert snapshot(out) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["site"]  # the staging folder is gone


def test_swap_in_replaces_only_a_site_the_build_made(tmp_path):
    staged = tmp_path / "scratch" / "_output"
    staged.mkdir(parents=True)
    (staged / "new.txt").write_text("new site")
    out = made_by_build(tmp_path / "site")
    build.swap_in(staged, out, tmp_path / "scratch")
    assert snapshot(out) == {"new.txt": b"new site"}

    # someone wrote into the old site while the build ran: the new site is not swapped in
    staged.mkdir()
    (staged / "newer.txt").write_text("newer site")
    build.write_marker(out)
    (out / "added-during-build.txt").write_text("keep me")
    with pytest.raises(build.BuildError, match="added-during-build.txt"):
        build.swap_in(staged, out, tmp_path / "scratch")
    assert (out / "added-during-build.txt").read_text() == "keep me"
