"""Readable without a kernel: an executed notebook exported to HTML still shows the trees.

The notebook is executed by a real kernel (nbclient) and saved the way JupyterLab saves it
(widget state not stored, its default), then converted with `jupyter nbconvert --to html`.
Where no widget front end runs, the widgets' text/html representation is what shows: the
lesson's text diagram and, for the explorer, the three trees and the worked calculation.
"""

from __future__ import annotations

import html
import re
import subprocess
import sys
from pathlib import Path

import nbformat
from kernel_harness import notebook_client

CELLS = [
    "import jax.numpy as jnp\n"
    "from pytree_lab import PytreeDiagram, StepExplorer\n"
    "params = {'weight': jnp.array([1.0, -1.0]), 'bias': jnp.array(0.0)}\n"
    "PytreeDiagram(params)",
    "StepExplorer()",
    "PytreeDiagram({'<img src=x onerror=alert(1)>': jnp.array(1.0)})",
]

LESSON_DIAGRAM = "params\n├── weight: float32[2]\n└── bias: float32[]\n2 leaves, 3 numerical parameter values"


def text_blocks(page: str) -> list[str]:
    """The text of every `<pre class="pytree-lab-text">` block, unescaped."""
    return [html.unescape(m) for m in re.findall(r'<pre class="pytree-lab-text"[^>]*>(.*?)</pre>', page, re.S)]


def test_exported_html_shows_the_trees_and_the_calculation(tmp_path: Path):
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.cells = [nbformat.v4.new_code_cell(src) for src in CELLS]
    notebook_client(nb, tmp_path, store_widget_state=False).execute()
    source = tmp_path / "lesson.ipynb"
    nbformat.write(nb, source)
    # every widget output carries its live view and the text form beside it
    for cell in nb.cells:
        data = cell.outputs[-1]["data"]
        assert "application/vnd.jupyter.widget-view+json" in data and "text/html" in data

    subprocess.run(
        [sys.executable, "-m", "jupyter", "nbconvert", "--to", "html", str(source)],
        check=True,
        capture_output=True,
        timeout=300,
    )
    page = (tmp_path / "lesson.html").read_text(encoding="utf-8")
    blocks = text_blocks(page)
    assert len(blocks) == 3

    diagram, explorer, hostile = blocks
    assert diagram == LESSON_DIAGRAM
    # the explorer: params, grads and updated as written, then the worked calculation's numbers
    # one aligned table: a row per path, params | grads | updated side by side (hand-derived step)
    assert re.search(r"^path\s+params\s+grads\s+updated$", explorer, re.M)
    assert re.search(
        r"^├── weight\s+float32\[2\] \[1, -1\]\s+float32\[2\] \[-8, -4\]\s+float32\[2\] \[1.4, -0.8\]$", explorer, re.M
    )
    assert re.search(r"^└── bias\s+float32\[\] 0\s+float32\[\] -4\s+float32\[\] 0.2$", explorer, re.M)
    for what, value in [
        ("loss L", "4"),
        ("∂L/∂weight", "[-8, -4]"),
        ("∂L/∂bias", "-4"),
        ("new prediction", "2.2"),
        ("new loss", "0.64"),
    ]:
        assert re.search(rf"{re.escape(what)}\s+{re.escape(value)}$", explorer, re.M), what
    assert "0.05·[-8, -4]  [1.4, -0.8]" in explorer
    # a hostile key is text in the export too
    assert "<img src=x onerror=alert(1)>" in hostile
    assert "<img" not in page.split('<pre class="pytree-lab-text"', 3)[3].split("</pre>")[0]
