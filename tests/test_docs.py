"""The documentation site (docs/) builds warning-free and says what the code says.

The build is `make docs`'s command into a temporary folder: Sphinx with myst-parser, warnings
as errors, no network. Sphinx comes with the dev extra; a venv without it fails here, with the
reason, rather than skipping (make test must build the docs).
"""

from __future__ import annotations

import html
import importlib.util
import inspect
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
README_CAP = 8 * 1024  # bytes: what a newcomer needs; the rest lives in docs/
DOC_PAGES = sorted(p for p in DOCS.glob("*.md"))
LINKED_FILES = [ROOT / "README.md", *DOC_PAGES]


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    missing = [m for m in ("sphinx", "myst_parser") if importlib.util.find_spec(m) is None]
    if missing:
        pytest.fail(
            f"{', '.join(missing)} missing from {sys.prefix}: the docs need the dev extra "
            f"(pip install -e '.[dev]'; make reinstalls it when pyproject.toml changes)"
        )
    out = tmp_path_factory.mktemp("docs") / "html"
    start = time.monotonic()
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "sphinx",
            "-W",
            "--keep-going",
            "-q",
            "-b",
            "html",
            "-d",
            str(out.parent / "doctrees"),
            str(DOCS),
            str(out),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    took = time.monotonic() - start
    assert run.returncode == 0, f"sphinx failed ({run.returncode}):\n{run.stdout[-4000:]}\n{run.stderr[-6000:]}"
    assert took < 120, f"the docs build took {took:.0f} s"
    return out


def _text(page: Path) -> str:
    """A built page's text, as a reader sees it (tags gone, quotes straight, spaces collapsed)."""
    text = re.sub(r"<[^>]+>", "", page.read_text())
    text = html.unescape(text).translate(str.maketrans("‘’“”", "''\"\""))
    return re.sub(r"\s+", " ", text)


def _first_paragraph(obj) -> str:
    doc = inspect.getdoc(obj)
    assert doc, f"{obj!r} has no docstring"
    return re.sub(r"\s+", " ", doc.split("\n\n")[0].replace("`", "")).strip()


def test_api_page_shows_the_widgets_docstrings(site):
    import pytree_lab

    api = _text(site / "api.html")
    for name in ("StepExplorer", "OptimizerComparison", "PytreeDiagram", "PackedView", "describe", "diagnose"):
        first = _first_paragraph(getattr(pytree_lab, name))
        assert first in api, f"api.html lacks {name}'s docstring: {first!r}"
    from pytree_lab.explorer.play import Playing  # play / pause / playing, inherited by both

    page = (site / "api.html").read_text(encoding="utf-8")
    for cls in ("StepExplorer", "OptimizerComparison"):
        for member in ("play", "pause", "playing"):
            assert f'id="pytree_lab.{cls}.{member}"' in page, f"api.html lacks {cls}.{member}"
    assert _first_paragraph(Playing.play) in api
    import pytree_lab.course

    for name in ("check", "check_cell", "save_evidence"):
        assert _first_paragraph(getattr(pytree_lab.course, name)) in api


def test_pages_show_the_widgets(site):
    for page, image in (
        ("index", "explorer.png"),
        ("explorer", "explorer.png"),
        ("optimizers", "lecture-xor-mlp-adam.png"),
        ("diagram", "lecture-xor-mlp-adam.png"),
        ("explorer", "optimizer-comparison.png"),
        ("playing", "optimizer-comparison.png"),
    ):
        assert f'src="_images/{image}"' in (site / f"{page}.html").read_text(), (page, image)
        assert (site / "_images" / image).is_file()


def test_every_page_is_in_the_toctree(site):
    index = (DOCS / "index.md").read_text()
    listed = set()
    for block in re.findall(r"```\{toctree\}\n(.*?)```", index, re.S):
        listed |= {ln.strip() for ln in block.splitlines() if ln.strip() and not ln.startswith(":")}
    pages = {p.stem for p in DOC_PAGES} - {"index"}
    assert pages - listed == set(), "pages in no toctree"
    assert listed - pages == set(), "toctree entries with no page"
    for page in pages:
        assert (site / f"{page}.html").is_file()


def _slug(heading: str) -> str:
    """GitHub's (and myst_heading_anchors') anchor for a Markdown heading."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def _links(path: Path) -> list[str]:
    text = re.sub(r"^```.*?^```", "", path.read_text(), flags=re.S | re.M)  # not inside code blocks
    return re.findall(r"\]\(([^)\s]+)\)", text)


@pytest.mark.parametrize("path", LINKED_FILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_point_to_files_that_exist(path):
    for link in _links(path):
        if re.match(r"[a-z]+:", link):
            continue  # http(s), mailto: not checked offline
        target, _, anchor = link.partition("#")
        resolved = (path.parent / target).resolve() if target else path
        assert resolved.exists(), f"{path.name}: {link} -> {resolved} does not exist"
        if anchor and resolved.suffix == ".md":
            headings = re.findall(r"^#+ (.+)$", resolved.read_text(), re.M)
            assert anchor in {_slug(h) for h in headings}, f"{path.name}: no heading for #{anchor} in {target}"


def test_readme_is_what_a_newcomer_needs():
    readme = (ROOT / "README.md").read_text()
    size = len(readme.encode())
    assert size < README_CAP, f"README.md is {size} bytes (cap {README_CAP}): move reference material to docs/"
    for private in ("_format", "_intent", "_grading"):
        assert private not in readme
    # the docs it points at are the site's pages
    linked = {Path(link.partition("#")[0]).name for link in _links(ROOT / "README.md") if link.startswith("docs/")}
    assert {"index.md", "api.md", "explorer.md", "performance.md"} <= linked


def test_setup_cell_is_described_where_it_is_inserted():
    """tools/build_notebooks.py and the JupyterLite build both put the setup cell in; the docs say both."""
    assert "first_cell" in (ROOT / "tools" / "build_notebooks.py").read_text()
    assert "def stage_notebook" in (ROOT / "lite_build" / "build.py").read_text()
    course = re.sub(r"\s+", " ", (DOCS / "course.md").read_text())
    assert "put in two places: `tools/build_notebooks.py`" in course
    assert "(`lite_build/build.py`)" in course


def test_readme_example_runs_as_written(capsys):
    """The README's first example, executed: its printed tree and the gradients its comment gives."""
    readme = (ROOT / "README.md").read_text()
    section = readme.split("## A first example", 1)[1]
    code = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    assert len(code.strip().splitlines()) <= 12
    namespace: dict = {}
    exec(compile(code, "README.md", "exec"), namespace)  # noqa: S102 - our own README's example
    out = capsys.readouterr().out
    assert "2 leaves, 3 numerical parameter values" in out
    ex = namespace["ex"]
    try:
        assert float(ex.result.grads["bias"]) == -4.0
        assert [float(g) for g in ex.result.grads["weight"]] == [-8.0, -4.0]
        assert "[-8. -4.] -4.0" in out and "# [-8. -4.] -4.0, computed" in code
    finally:
        ex.close()
