"""`jupyter nbconvert --to html --execute` with its default options, on a small notebook.

nbclient stores every widget's state in the executed notebook, and nbconvert's HTML exporter
then prefers a widget-view output whose state is stored over every other form of that output
(nbconvert.filters.WidgetsDataTypeFilter): the page would hold only a <script> for the view,
drawn by @jupyter-widgets/html-manager fetched from a CDN, blank offline. A kernel that nbconvert
runs has no page, so pytree-lab's widgets give their text form only there (pytree_lab/widget_common.py);
a kernel with a page (JupyterLab, Voilà, a plain nbclient run from Python) keeps the view.
"""

from __future__ import annotations

import html
import os
import re
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

CELLS = [
    "from pytree_lab import StepExplorer\nex = StepExplorer()\nex",
]


def visible_text(page: str) -> str:
    """The page's text outside <script> and <style> (what a reader sees without JavaScript)."""
    page = re.sub(r"<(script|style)\b.*?</\1>", "", page, flags=re.S | re.I)
    return html.unescape(re.sub(r"<[^>]+>", " ", page))


def export(tmp_path: Path, *options: str) -> str:
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.cells = [nbformat.v4.new_code_cell(src) for src in CELLS]
    source = tmp_path / "explorer.ipynb"
    nbformat.write(nb, source)
    run = subprocess.run(
        [sys.executable, "-m", "jupyter", "nbconvert", "--to", "html", "--execute", *options, str(source)],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "JAX_PLATFORMS": "cpu"},
    )
    assert run.returncode == 0, run.stderr[-3000:]
    return (tmp_path / "explorer.html").read_text(encoding="utf-8")


def assert_lesson_step_visible(page: str) -> None:
    text = visible_text(page)
    # the lesson's step, derived by hand: grads [-8, -4] and -4, updated [1.4, -0.8] and 0.2, loss 4 -> 0.64
    assert re.search(
        r"weight\s+float32\[2\] \[1, -1\]\s+float32\[2\] \[-8, -4\]\s+float32\[2\] \[1\.4, -0\.8\]", text
    ), text[-3000:]
    assert re.search(r"bias\s+float32\[\] 0\s+float32\[\] -4\s+float32\[\] 0\.2", text), text[-3000:]
    assert re.search(r"new loss\s+0\.64", text), text[-3000:]


def test_executed_export_without_stored_widget_state_shows_the_text_forms(tmp_path):
    assert_lesson_step_visible(export(tmp_path, "--ExecutePreprocessor.store_widget_state=False"))


def test_executed_export_with_default_options_shows_the_text_forms(tmp_path):
    page = export(tmp_path)
    assert_lesson_step_visible(page)
    assert "<script type=\"application/vnd.jupyter.widget-view+json\">" not in page  # no blank view above it


@pytest.mark.parametrize(
    ("argv", "pageless"),
    [
        (["/venv/bin/python", "/venv/bin/jupyter-nbconvert", "--to", "html", "--execute", "a.ipynb"], True),
        (["python", "-m", "jupyter", "nbconvert", "--execute", "a.ipynb"], True),
        (["python", "-m", "nbconvert", "a.ipynb"], True),
        (["/venv/bin/python3", "/venv/bin/nbgrader", "autograde", "pytrees"], True),
        (["jupyter", "execute", "a.ipynb"], True),
        (["C:\\venv\\Scripts\\jupyter-nbconvert.exe", "--execute", "a.ipynb"], True),
        (["/venv/bin/python", "/venv/bin/jupyter-lab"], False),
        (["/venv/bin/python", "/venv/bin/jupyterhub-singleuser"], False),
        (["/venv/bin/python", "/venv/bin/voila", "a.ipynb"], False),
        (["/venv/bin/python", "-m", "pytest", "tests/test_nbconvert.py"], False),  # a word, not the command
        (["/venv/bin/python", "/venv/bin/jupyter-lab", "/home/ta/courses/nbgrader"], False),  # a folder's name
        (["/venv/bin/python", "-m", "jupyterlab", "nbgrader"], False),
        (["jupyter-lab", "--notebook-dir", "execute"], False),
        (["/usr/bin/python3.11", "-u", "-m", "nbgrader", "autograde", "ps1"], True),
        ([], False),
    ],
)
def test_the_kernels_runner_is_known_by_its_command_line(argv, pageless):
    from pytree_lab.widget_common import _names_a_pageless_runner

    assert _names_a_pageless_runner(argv) is pageless


def test_a_kernel_with_a_page_keeps_the_widget_view():
    from pytree_lab import PytreeDiagram

    diagram = PytreeDiagram({"w": 1.0})
    data = diagram._repr_mimebundle_()
    data = data[0] if isinstance(data, tuple) else data
    assert data["application/vnd.jupyter.widget-view+json"]["model_id"] == diagram.model_id  # pytest's child
    assert data["text/plain"] == diagram.text()


@pytest.mark.parametrize("name", ["01_pytrees.ipynb", "02_packed_parameters.ipynb", "03_instructor_demo.ipynb"])
def test_an_executed_export_of_each_lesson_holds_no_widget_view(tmp_path, name):
    """Every widget a lesson shows has its text form there (the worked calculation, each quiz)."""
    import shutil

    source = tmp_path / name
    shutil.copy(Path(__file__).resolve().parents[1] / "content" / name, source)
    run = subprocess.run(
        [sys.executable, "-m", "jupyter", "nbconvert", "--to", "html", "--execute", str(source)],
        capture_output=True,
        text=True,
        timeout=900,
        env={**os.environ, "JAX_PLATFORMS": "cpu"},
    )
    assert run.returncode == 0, run.stderr[-3000:]
    page = source.with_suffix(".html").read_text(encoding="utf-8")
    assert page.count('<script type="application/vnd.jupyter.widget-view+json">') == 0
    if name == "01_pytrees.ipynb":  # the quizzes' text forms: a question and its choices
        assert re.search(
            r"How many leaves and how many numerical parameter values\?\s+1\. 2 leaves, 3 values", visible_text(page)
        )
