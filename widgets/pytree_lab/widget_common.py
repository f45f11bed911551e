"""What every pytree-lab widget does alike: its text form, and unknown keywords refused.

A widget's mimebundle carries its text form (text/plain and an escaped <pre>) beside the live
view: an HTML export of a notebook saved in JupyterLab shows it. A kernel run by `jupyter
nbconvert --execute`, `jupyter execute` or nbgrader has no page, and nbconvert would prefer the
stored view (blank offline) over the text: there the bundle holds the text form only. The kernel
knows who runs it by the program its parent process runs (never a word after it, such as a folder).

`StepExplorer(learning_rat=0.1)` would otherwise run at the default rate: a keyword typo is an
error that says what was meant.
"""

from __future__ import annotations

import contextlib
import difflib
import functools
import html
import inspect
import itertools
import ntpath
import os
import sys
from typing import Any

__all__ = ["TextForm", "refuse_unknown_widget_keywords"]


class TextForm:
    """Mixin for a widget with a `text()` method: its mimebundle carries that text as
    text/plain and as an escaped <pre> (text/html) beside the live view."""

    def text(self) -> str:  # pragma: no cover - every widget defines its own
        raise NotImplementedError

    def _repr_mimebundle_(self, **kwargs):
        bundle = super()._repr_mimebundle_(**kwargs)
        data = bundle[0] if isinstance(bundle, tuple) else bundle
        if isinstance(data, dict):
            # A composite (the explorer is an ipywidgets VBox of anywidgets and bqplot) gets the
            # metadata anywidget gives its own views: in Colab it names the custom widget manager
            # that renders third-party widgets (empty elsewhere).
            if not isinstance(bundle, tuple):
                with contextlib.suppress(ImportError):  # an anywidget without it: nothing to add
                    from anywidget._util import get_repr_metadata

                    bundle = (data, metadata) if (metadata := get_repr_metadata()) else bundle
            if _run_without_a_page():
                data.pop(_WIDGET_VIEW, None)
            text = self.text()
            data["text/plain"] = text
            data["text/html"] = (
                '<pre class="pytree-lab-text" style="font-family:monospace">' + html.escape(text) + "</pre>"
            )
        return bundle


_WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
# programs that run a notebook's kernel with no page (nbclient underneath), as their command lines name them
_PAGELESS_SCRIPTS = frozenset({"jupyter-nbconvert", "jupyter-nbgrader", "jupyter-execute", "nbgrader"})
_PAGELESS_SUBCOMMANDS = frozenset({"nbconvert", "nbgrader", "execute"})
_PAGELESS_MODULES = frozenset({"nbconvert", "nbgrader"})


def _parent_command_line() -> list[str]:
    ppid = os.getppid()
    with contextlib.suppress(OSError), open(f"/proc/{ppid}/cmdline", "rb") as f:
        return [part.decode(errors="replace") for part in f.read().split(b"\0") if part]
    try:
        import psutil  # type: ignore[import-untyped]  # optional: where /proc is missing (macOS, Windows)
    except ImportError:
        return []
    try:
        return list(psutil.Process(ppid).cmdline())
    except Exception:  # noqa: BLE001 - no parent to read: a page may be there
        return []


def _names_a_pageless_runner(argv: list[str]) -> bool:
    """`jupyter-nbconvert ...`, `jupyter nbconvert ...`, `python -m nbconvert ...`, the same for
    nbgrader, and `jupyter execute` (nbclient's command); POSIX and Windows paths (ntpath splits both).
    Only the program is read (after the interpreter and its options), never its arguments: a
    JupyterLab started in a folder named `nbgrader` has a page."""
    words = [ntpath.basename(a).lower().removesuffix(".exe").removesuffix("-script.py") for a in argv]
    if words and words[0].startswith("python"):
        words = list(itertools.dropwhile(lambda w: w.startswith("-") and w != "-m", words[1:]))
    w = [*words, "", "", ""]
    if w[0] == "-m":
        return w[1] in _PAGELESS_MODULES or (w[1] == "jupyter" and w[2] in _PAGELESS_SUBCOMMANDS)
    return w[0] in _PAGELESS_SCRIPTS or (w[0] == "jupyter" and w[1] in _PAGELESS_SUBCOMMANDS)


@functools.cache
def _run_without_a_page() -> bool:
    """True in a kernel run by nbconvert, nbgrader or `jupyter execute`: no page will draw views."""
    if sys.platform == "emscripten":  # JupyterLite: the page is the kernel's host
        return False
    return _names_a_pageless_runner(_parent_command_line())


def refuse_unknown_widget_keywords(widget: Any, kwargs: dict) -> None:
    """TypeError for the first keyword in `kwargs` the widget's constructor does not take, with
    the closest valid name (difflib) or the list of them. Valid: its class's own arguments, then
    its traits (ipywidgets passes trait values such as layout= or tooltip= through to the widget)."""
    cls = type(widget)
    own = [
        name
        for name, p in inspect.signature(cls.__init__).parameters.items()
        if name != "self" and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
    ]
    valid = list(dict.fromkeys(own + sorted(cls.class_trait_names())))
    for name in kwargs:
        if name not in valid:
            shown = [v for v in valid if not v.startswith("_")]
            close = difflib.get_close_matches(str(name), shown, n=1)
            hint = f"did you mean {close[0]!r}?" if close else f"it takes {', '.join(map(repr, shown))}."
            raise TypeError(f"{cls.__name__}() got an unexpected keyword argument {name!r}: {hint}")
