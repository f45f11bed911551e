"""Sphinx configuration for pytree-lab's documentation (`make docs`; tests/test_docs.py builds it too).

Offline: no intersphinx, nothing fetched. The API reference imports the checkout's own
pytree_lab (widgets/ goes first on sys.path), so it documents this tree, not an installed copy.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

DOCS = Path(__file__).resolve().parent
ROOT = DOCS.parent
sys.path.insert(0, str(ROOT / "widgets"))

import pytree_lab  # noqa: E402

project = "pytree-lab"
author = "pytree-lab contributors"
copyright = "pytree-lab contributors"  # noqa: A001 - Sphinx's name for it
version = release = pytree_lab.__version__

extensions = ["myst_parser", "sphinx.ext.autodoc"]
source_suffix = {".md": "markdown"}
root_doc = "index"
exclude_patterns = ["_build"]
myst_heading_anchors = 3  # links such as page.md#a-heading resolve

# the docstrings write `name` for code (Markdown's habit): show it as code
default_role = "literal"

autodoc_member_order = "bysource"
autodoc_typehints = "signature"
autodoc_class_signature = "separated"
autodoc_default_options = {"members": True, "undoc-members": False, "inherited-members": False}

html_theme = "alabaster"
html_title = "pytree-lab"
html_static_path: list[str] = []
html_theme_options = {"description": "Widgets that teach JAX pytrees", "fixed_sidebar": False}

# The pages are also read on GitHub, where `../lite_build/README.md` is the JupyterLite
# build's own page; on this site that text is jupyterlite.md (which includes it).
_OUTSIDE = {"../lite_build/README.md": "jupyterlite.md"}


def _site_links(app, docname, source):
    text = source[0]
    for outside, page in _OUTSIDE.items():
        text = re.sub(r"\]\(" + re.escape(outside) + r"(#[^)]*)?\)", f"]({page})", text)
    source[0] = text


# The docstrings are written for help() and the editor, with Markdown's habits: `if`s (a
# plural after code) and `f(**inputs)` in running text. Two rewrites make them valid
# reStructuredText without changing what they say.
_CODE = re.compile(r"`[^`\n]+`")
_STARSTAR_ARG = re.compile(r"(?<=[(, ])\*\*(?=[A-Za-z_]\w*\))")


def _code_span(match: re.Match) -> str:
    after = match.string[match.end() : match.end() + 1]
    return match.group(0) + ("\\ " if after.isalnum() else "")


def _rst_docstring(app, what, name, obj, options, lines):
    for i, line in enumerate(lines):
        if "``" not in line and line.count("`") % 2 == 0:  # whole single-backtick spans only
            line = _CODE.sub(_code_span, line)
        lines[i] = _STARSTAR_ARG.sub(r"\\*\\*", line)


def setup(app):
    app.connect("source-read", _site_links)
    app.connect("autodoc-process-docstring", _rst_docstring)
