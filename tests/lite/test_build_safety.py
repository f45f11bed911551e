"""The site build never deletes what it did not make, and a failed build changes nothing.

These run the build's own code on small folders (no site is built): the checks come first
in `build_site`, and a failure inside the build is made by replacing one step with a double
that raises, which is exactly where a real download or `jupyter lite build` would fail.
"""

from __future__ import annotations

import json
import re

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


def test_a_file_added_to_a_built_site_is_kept_not_refused(tmp_path):
    """What an earlier build did not write (a student's notebook, a host's file) is kept: the
    next build carries it into the new site unchanged."""
    out = made_by_build(tmp_path / "site")
    (out / "lab" / "student-work.ipynb").write_text("{}")
    assert build.check_output_dir(out) == ["lab/student-work.ipynb"]


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

    # someone wrote into the old site while the build ran: the new site goes in, the file is kept
    staged.mkdir()
    (staged / "newer.txt").write_text("newer site")
    build.write_marker(staged)  # as the build does before the swap
    build.write_marker(out)
    (out / "added-during-build.txt").write_text("keep me")
    assert build.swap_in(staged, out, tmp_path / "scratch") == ["added-during-build.txt"]
    assert snapshot(out) == {
        "newer.txt": b"newer site",
        "added-during-build.txt": b"keep me",
        build.MARKER_NAME: (out / build.MARKER_NAME).read_bytes(),
    }
    # the new marker lists the site's files only: the kept file stays the user's
    assert sorted(json.loads((out / build.MARKER_NAME).read_text())["files"]) == ["newer.txt"]


def new_site(tmp_path, files):
    staged = tmp_path / "scratch" / "_output"
    for rel, text in files.items():
        (staged / rel).parent.mkdir(parents=True, exist_ok=True)
        (staged / rel).write_text(text)
    build.write_marker(staged)  # as the build does before the swap
    return staged


def test_host_files_and_folders_the_build_did_not_write_are_kept_across_builds(tmp_path):
    out = made_by_build(tmp_path / "site")
    (out / "CNAME").write_text("course.example.org\n")
    (out / ".nojekyll").write_text("")
    (out / "extra" / "deep").mkdir(parents=True)
    (out / "extra" / "deep" / "notes.txt").write_text("the host's own")
    (out / "empty").mkdir()
    (out / "link").symlink_to(tmp_path / "elsewhere")
    assert build.check_output_dir(out) == [
        ".nojekyll",
        "CNAME",
        "empty/",
        "extra/",
        "lab/index.html".replace("lab/index.html", "link"),
    ]
    for round_ in range(2):  # kept by one build, kept again by the next
        staged = new_site(tmp_path, {"index.html": f"site {round_}", "lab/index.html": "lab"})
        kept = build.swap_in(staged, out, tmp_path / "scratch")
        assert kept == [".nojekyll", "CNAME", "empty/", "extra/", "link"]
        assert (out / "CNAME").read_text() == "course.example.org\n" and (out / ".nojekyll").exists()
        assert (out / "extra" / "deep" / "notes.txt").read_text() == "the host's own"
        assert (out / "empty").is_dir() and (out / "link").is_symlink()
        assert (out / "index.html").read_text() == f"site {round_}"
        assert sorted(json.loads((out / build.MARKER_NAME).read_text())["files"]) == ["index.html", "lab/index.html"]


def test_a_kept_file_where_the_new_site_has_one_refuses_and_changes_nothing(tmp_path):
    out = made_by_build(tmp_path / "site")
    (out / "index.html").write_text("the host's front page")
    before = snapshot(out)
    staged = new_site(tmp_path, {"index.html": "the site's"})
    with pytest.raises(build.BuildError, match=r"holds index.html, which the new site also has"):
        build.swap_in(staged, out, tmp_path / "scratch")
    assert snapshot(out) == before


def test_a_folder_of_only_host_files_and_empty_folders_is_accepted_and_kept(tmp_path):
    out = tmp_path / "gh-pages"
    (out / "assets").mkdir(parents=True)
    (out / "CNAME").write_text("course.example.org")
    assert build.check_output_dir(out) == ["CNAME", "assets/"]
    staged = new_site(tmp_path, {"index.html": "site"})
    build.swap_in(staged, out, tmp_path / "scratch")
    assert (out / "CNAME").read_text() == "course.example.org" and (out / "assets").is_dir()


def test_an_empty_subfolder_and_a_symlink_are_not_an_empty_folder(tmp_path, capsys):
    """Issue 20: such a folder counted as empty and was deleted by the swap."""
    out = tmp_path / "site"
    (out / "sub").mkdir(parents=True)
    target = tmp_path / "precious"
    target.mkdir()
    (target / "data.txt").write_text("mine")
    (out / "shortcut").symlink_to(target)
    assert build.main(["--output-dir", str(out)]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"error: {out} is not empty and was not made by this build") and "'shortcut'" in err
    assert "Traceback" not in err
    assert (out / "sub").is_dir() and (out / "shortcut").is_symlink() and (target / "data.txt").read_text() == "mine"


@pytest.mark.parametrize("where", ["/", "~", "."])
def test_output_dirs_that_are_not_a_sites_own_place_are_refused_in_one_line(where, capsys):
    path = {"/": "/", "~": str(build.Path.home()), ".": str(build.ROOT)}[where]
    assert build.main(["--output-dir", path]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"error: --output-dir {path} is ") and "Traceback" not in err


@pytest.mark.parametrize(
    "marker",
    [
        b"not json at all",
        b"\xff\xfe\x00binary",
        b'["a", "list"]',
        b'{"files": ["index.html"]}',
        b'{"files": {"index.html": "not-a-digest"}}',
        b'{"files": {"../outside.txt": "' + b"0" * 64 + b'"}}',
        b'{"made_by": "someone"}',
    ],
)
def test_a_malformed_marker_is_named_in_one_line_and_nothing_changes(tmp_path, capsys, marker):
    out = made_by_build(tmp_path / "site")
    (out / build.MARKER_NAME).write_bytes(marker)
    before = snapshot(out)
    assert build.main(["--output-dir", str(out)]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"error: {out / build.MARKER_NAME} is not a marker this build wrote (")
    assert err.count("\n") == 1 and "Traceback" not in err
    assert snapshot(out) == before


def test_refusing_a_big_folder_reads_only_up_to_the_first_entry_it_cannot_accept(tmp_path, monkeypatch):
    """No marker: the first entry that is not a host file or an empty folder ends the look.
    With a marker: a folder the earlier build did not write is kept whole, never walked."""
    big = tmp_path / "big"
    for i in range(300):
        (big / f"d{i}").mkdir(parents=True)
        (big / f"d{i}" / "f.txt").write_text("x")
    opened = []
    real_scandir = build.os.scandir

    def counting_scandir(path="."):
        opened.append(str(path))
        return real_scandir(path)

    monkeypatch.setattr(build.os, "scandir", counting_scandir)
    with pytest.raises(build.BuildError, match="is not empty and was not made by this build"):
        build.check_output_dir(big)
    assert opened[0] == str(big) and len(opened) <= 2  # the folder, and at most the first subfolder

    site = made_by_build(tmp_path / "site")
    os_rename = build.os.replace
    os_rename(big, site / "archive")
    opened.clear()
    assert build.check_output_dir(site) == ["archive/"]
    assert not any("archive" in p for p in opened), opened


def test_a_killed_build_leaves_staging_that_the_next_build_removes(tmp_path, monkeypatch, capsys):
    import os
    import signal
    import subprocess
    import sys

    out = tmp_path / "site"
    code = (
        "import sys, time\n"
        "from pathlib import Path\n"
        "from lite_build import build\n"
        "def slow(dest):\n"
        "    dest.mkdir(parents=True, exist_ok=True)\n"
        "    (dest / 'pyodide.asm.wasm').write_bytes(b'x' * 100000)\n"
        "    print('STAGED', flush=True)\n"
        "    time.sleep(300)\n"
        "build.fetch_pyodide = slow\n"
        f"build.build_site(Path({str(out)!r}))\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", code], cwd=build.ROOT, stdout=subprocess.PIPE, text=True)
    try:
        while "STAGED" not in (line := proc.stdout.readline()) and line:
            pass
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        proc.stdout.close()
    left = [p.name for p in tmp_path.iterdir() if p.name.startswith(".site-building-")]
    assert len(left) == 1, list(tmp_path.iterdir())

    # a staging folder of a build still running, and a folder the build did not make, stay
    running = tmp_path / ".site-building-running"
    running.mkdir()
    (running / build.STAGING_OWNER).write_text(json.dumps({"pid": os.getpid(), "host": os.uname().nodename}))
    foreign = tmp_path / ".site-building-not-ours"
    foreign.mkdir()
    (foreign / "keep.txt").write_text("not the build's")

    def offline(dest):
        raise build.BuildError("npm registry unreachable")

    monkeypatch.setattr(build, "fetch_pyodide", offline)
    assert build.main(["--output-dir", str(out)]) == 1
    printed = capsys.readouterr()
    assert f"removed {left[0]} (100.0 kB): left by a build that was stopped" in printed.out
    assert sorted(p.name for p in tmp_path.iterdir()) == [".site-building-not-ours", ".site-building-running"]
    assert (foreign / "keep.txt").read_text() == "not the build's"


def test_messages_name_the_users_file_not_the_staging_copy(tmp_path):
    staged = str(tmp_path / ".site-building-x" / "files" / "lesson.ipynb")
    mine = str(tmp_path / "course" / "lesson.ipynb")
    message = f"{staged}: not a valid notebook (bad cell)"
    assert build.user_paths(message, {staged: mine}) == f"{mine}: not a valid notebook (bad cell)"


def test_site_notebooks_carry_the_pyodide_kernels_language_info(tmp_path):
    """JupyterLab marks a notebook modified on open when the kernel's language_info differs from
    the stored one: the site's copies carry exactly what the Pyodide kernel answers, read here
    from the kernel's own front end (so a kernel upgrade that changes it fails this test)."""
    import re
    import sys

    ext = build.Path(sys.prefix) / "share" / "jupyter" / "labextensions" / build.PYODIDE_KERNEL_EXTENSION / "static"
    found = None
    for js in ext.glob("*.js"):
        m = re.search(r"language_info:(\{codemirror_mode:\{[^}]*\}[^}]*\})", js.read_text(errors="ignore"))
        if m:
            found = m[1]
            break
    assert found is not None
    as_json = json.loads(re.sub(r"([{,])([a-z_]+):", r'\1"\2":', found))
    assert as_json == build.LITE_LANGUAGE_INFO
    dest = tmp_path / "files" / "n.ipynb"
    source = good_notebook(tmp_path / "n.ipynb")
    build.stage_notebook(source, dest, "sub/n.ipynb")
    staged = json.loads(dest.read_text())
    # which published notebook and version a student's copy came from (the update check reads it)
    import hashlib

    assert staged["metadata"]["pytree_lab"] == {
        "site_path": "sub/n.ipynb",
        "site_version": hashlib.sha256(source.read_bytes()).hexdigest()[:16],
    }
    assert staged["metadata"]["language_info"] == build.LITE_LANGUAGE_INFO
    assert staged["metadata"]["kernelspec"] == build.LITE_KERNELSPEC


def test_each_site_gets_its_own_storage_name(tmp_path, capsys):
    """Two terms' sites on one host must not share students' files: the storage names come from
    the site's identity (--site-name, else the repository), the same for every rebuild of a site."""
    fall = build.site_config("ml-2026-fall")["jupyter-config-data"]
    spring = build.site_config("ml-2027-spring")["jupyter-config-data"]
    for key in ("contentsStorageName", "workspacesStorageName", "settingsStorageName"):
        assert fall[key] == "pytree-lab: ml-2026-fall" and spring[key] == "pytree-lab: ml-2027-spring"
    assert fall["enableMemoryStorage"] is False
    # the default: the repository's name and a hash of its identity, stable across builds
    name = build.default_site_name()
    assert re.fullmatch(r"[\w.-]+-[0-9a-f]{8}", name) and name == build.default_site_name()
    # a name that cannot be one is refused in one line, before anything is built
    out = tmp_path / "site"
    assert build.main(["--output-dir", str(out), "--site-name", "bad\nname"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: --site-name 'bad\\nname': give a short name") and err.count("\n") == 1
    assert not out.exists()
