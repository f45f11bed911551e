"""A student holds a copy of a course notebook; the instructor publishes a newer version: the
setup cell says so, with one link that opens the new version, written beside the copy. The copy
is never changed. (The site side is a double of the site's files; the kernel side is the real
code, in CPython.)"""

from __future__ import annotations

import asyncio
import json

from pytree_lab_site import lite_updates

BASE = "https://teacher.example.org/ml-2026/"


def notebook(version: str, text: str, site_path: str = "01_pytrees.ipynb") -> str:
    return json.dumps(
        {
            "cells": [{"cell_type": "markdown", "metadata": {}, "source": text}],
            "metadata": {"pytree_lab": {"site_path": site_path, "site_version": version}},
            "nbformat": 4,
            "nbformat_minor": 5,
        }
    )


def run(root, site: dict):
    asked = []

    async def fetch_text(url):
        asked.append(url)
        return site.get(url)

    return asyncio.run(lite_updates.find_updates(str(root), BASE, fetch_text)), asked


def test_publish_v1_student_works_publish_v2_the_student_is_told_and_keeps_the_copy(tmp_path):
    copy = tmp_path / "01_pytrees.ipynb"
    copy.write_text(notebook("v1aaaaaaaaaaaaaa", "v1 text, and the student's own answer"))
    before = copy.read_bytes()
    site = {BASE + "files/01_pytrees.ipynb": notebook("v1aaaaaaaaaaaaaa", "v1 text")}
    assert run(tmp_path, site)[0] == []  # v1 still published: nothing to say

    site[BASE + "files/01_pytrees.ipynb"] = notebook("v2bbbbbbbbbbbbbb", "v2 text")
    updates, asked = run(tmp_path, site)
    assert asked == [BASE + "files/01_pytrees.ipynb"]
    assert updates == [
        {"site_path": "01_pytrees.ipynb", "copy": "01_pytrees.ipynb", "new": "01_pytrees (new version v2bbbb).ipynb"}
    ]
    assert copy.read_bytes() == before  # the student's copy is untouched
    assert (tmp_path / "01_pytrees (new version v2bbbb).ipynb").read_text() == site[BASE + "files/01_pytrees.ipynb"]
    html = lite_updates.update_message(updates, BASE)
    assert (
        '<a href="https://teacher.example.org/ml-2026/lab/index.html?path=01_pytrees%20%28new%20version%20'
        'v2bbbb%29.ipynb" target="_blank">Open the new version beside your copy</a>'
    ) in html
    assert "The instructor published a newer version of <b>01_pytrees.ipynb</b>" in html

    # checked again (the next session): the same file, no second copy
    assert run(tmp_path, site)[0] == updates
    assert sorted(p.name for p in tmp_path.iterdir()) == ["01_pytrees (new version v2bbbb).ipynb", "01_pytrees.ipynb"]


def test_a_file_in_the_way_is_never_overwritten(tmp_path):
    (tmp_path / "01_pytrees.ipynb").write_text(notebook("v1aaaaaaaaaaaaaa", "mine"))
    squatter = tmp_path / "01_pytrees (new version v2bbbb).ipynb"
    squatter.write_text('{"not": "the new version"}')
    site = {BASE + "files/01_pytrees.ipynb": notebook("v2bbbbbbbbbbbbbb", "v2")}
    updates, _ = run(tmp_path, site)
    assert updates[0]["new"] == "01_pytrees (new version v2bbbb, 2).ipynb"
    assert squatter.read_text() == '{"not": "the new version"}'


def test_notebooks_not_from_the_site_and_unreadable_sites_say_nothing(tmp_path):
    (tmp_path / "mine.ipynb").write_text(json.dumps({"cells": [], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}))
    (tmp_path / "broken.ipynb").write_text("{ half")
    (tmp_path / "01_pytrees.ipynb").write_text(notebook("v1aaaaaaaaaaaaaa", "mine"))
    updates, asked = run(tmp_path, {})  # the site's file could not be fetched
    assert updates == [] and asked == [BASE + "files/01_pytrees.ipynb"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["01_pytrees.ipynb", "broken.ipynb", "mine.ipynb"]


def test_names_are_text_in_the_message_never_html():
    html = lite_updates.update_message(
        [
            {
                "site_path": "<img src=x onerror=alert(1)>.ipynb",
                "copy": "a<b>.ipynb",
                "new": "a<b> (new version 123456).ipynb",
            }
        ],
        BASE,
    )
    assert "<img" not in html and "&lt;img src=x onerror=alert(1)&gt;.ipynb" in html
    assert "a&lt;b&gt;.ipynb" in html


def test_the_sites_root_from_a_page_address():
    assert lite_updates.site_base_url(BASE + "lab/index.html?path=01_pytrees.ipynb") == BASE
    assert (
        lite_updates.site_base_url("http://127.0.0.1:8000/notebooks/index.html?path=a.ipynb")
        == "http://127.0.0.1:8000/"
    )
    # what the kernel sees: its worker's script (measured in the built site, JupyterLite 0.8)
    worker = "extensions/@jupyterlite/pyodide-kernel-extension/static/comlink.worker.c654f1f92d96ff96.js"
    assert lite_updates.site_base_url(BASE + worker) == BASE
    assert lite_updates.site_base_url("http://127.0.0.1:8000/term-a/" + worker) == "http://127.0.0.1:8000/term-a/"
