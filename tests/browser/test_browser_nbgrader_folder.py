"""A JupyterLab started as a course's TA starts it, `jupyter lab ~/courses/nbgrader`, draws every
widget: the text form is for kernels that nbconvert, nbgrader or `jupyter execute` run (no page),
told by the program that runs the kernel, never by a folder's name on its command line."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from .harness import open_lab, open_notebook, start_lab

pytestmark = pytest.mark.browser


def test_a_lab_started_in_a_folder_named_nbgrader_draws_the_widget_views(browser, tmp_path):
    folder = tmp_path / "nbgrader"
    jupyter = Path(sys.executable).parent / "jupyter"  # `jupyter lab` execs jupyter-lab: the kernel's parent
    server = start_lab(tmp_path, program=[str(jupyter), "lab", str(folder)], root="nbgrader")
    context = browser.new_context(viewport={"width": 1200, "height": 900})
    try:
        page = context.new_page()
        open_lab(page, server)
        cells = [
            "import os\nparent = open(f'/proc/{os.getppid()}/cmdline').read().split(chr(0))",
            "from pytree_lab import PytreeDiagram\nPytreeDiagram({'w': [1.5, 2.0]})",
        ]
        nb = open_notebook(page, server, "lesson.ipynb", cells, wait_for='[role="tree"]')
        try:
            assert nb.value("parent")[1:3] == [str(Path(sys.executable).parent / "jupyter-lab"), str(folder)]
            assert nb.panel.locator('[role="tree"]').count() == 1  # the live view, drawn
            assert nb.panel.locator("pre.pytree-lab-text").count() == 0  # not the text form
        finally:
            nb.close()
    finally:
        context.close()
        server.stop()
