"""Build the course notebooks content/*.ipynb from their text sources content/src/*.md.

    .venv/bin/python tools/build_notebooks.py           # write content/*.ipynb
    .venv/bin/python tools/build_notebooks.py --check   # exit 1 if a notebook is out of date

The sources are jupytext MyST Markdown: they open as notebooks in JupyterLab (with jupytext) and
diff as text. The built notebooks are what students open and what the JupyterLite site ships;
they are committed without outputs.

Conventions the tests rely on (tests/test_notebooks.py):
- the first cell of every built notebook is lite_build/first_cell.py verbatim (tag
  `pytree-lab-setup`), inserted here and nowhere else: the sources do not contain it;
- a student's exercise cell is tagged `exercise:<id>` and starts with `%%exercise <id>`, which
  runs it guarded; the check cell after it handles every state without an error;
- a cell with an `id` option in the source keeps that id (tests read their outputs); other cells
  get `<stem>-NN`, so a rebuild is byte-identical.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import jupytext
import nbformat

ROOT = Path(__file__).resolve().parents[1]
SOURCES = ROOT / "content" / "src"
OUTPUT = ROOT / "content"
FIRST_CELL = ROOT / "lite_build" / "first_cell.py"
SETUP_TAG = "pytree-lab-setup"
KERNELSPEC = {"name": "python3", "display_name": "Python 3 (ipykernel)", "language": "python"}


def setup_cell() -> nbformat.NotebookNode:
    source = FIRST_CELL.read_text().rstrip("\n") if FIRST_CELL.exists() else "# setup"
    cell = nbformat.v4.new_code_cell(source, id=SETUP_TAG)
    cell.metadata["tags"] = [SETUP_TAG]
    return cell


def build(source: Path) -> nbformat.NotebookNode:
    text_nb = jupytext.read(source, fmt="md:myst")
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = dict(KERNELSPEC)
    nb.metadata["language_info"] = {"name": "python"}
    nb.cells.append(setup_cell())
    seen = {SETUP_TAG}
    for n, cell in enumerate(text_nb.cells, 1):
        metadata = dict(cell.metadata)
        cell_id = str(metadata.pop("id", f"{source.stem}-{n:02d}"))
        if cell_id in seen:
            raise ValueError(f"duplicate cell id {cell_id!r} in {source.name}")
        seen.add(cell_id)
        if cell.cell_type == "markdown":
            made = nbformat.v4.new_markdown_cell(cell.source, id=cell_id)
        else:
            made = nbformat.v4.new_code_cell(cell.source, id=cell_id)
        if metadata.get("tags"):
            made.metadata["tags"] = list(metadata["tags"])
        nb.cells.append(made)
    nbformat.validate(nb)
    return nb


def render(source: Path) -> str:
    return nbformat.writes(build(source)) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only compare; exit 1 when out of date")
    args = parser.parse_args(argv)
    stale = []
    for source in sorted(SOURCES.glob("*.md")):
        target = OUTPUT / f"{source.stem}.ipynb"
        text = render(source)
        if args.check:
            if not target.exists() or target.read_text() != text:
                stale.append(target.name)
        else:
            target.write_text(text)
            print("wrote", target.relative_to(ROOT))
    if stale:
        print("out of date (run tools/build_notebooks.py):", ", ".join(stale), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
