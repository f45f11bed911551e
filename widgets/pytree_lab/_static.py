"""The widgets' ES modules and stylesheets (static/), as anywidget should get them."""

from __future__ import annotations

import importlib.util
import os
import pathlib
import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from anywidget._file_contents import FileContents

STATIC = pathlib.Path(__file__).parent / "static"

# What the modules share (static/_shared.js): a script, not a module (anywidget loads one file
# per widget, so nothing can be imported), put before the text of each module that calls one of
# its functions; the slider proxy, sent with every slider, calls none of them.
SHARED_SOURCE = (STATIC / "_shared.js").read_text(encoding="utf-8")
# the functions it defines, from its own text (top-level `function name(`)
SHARED_NAMES = tuple(re.findall(r"^function (\w+)\(", SHARED_SOURCE, re.M))
# It is sent once per module (four times with an explorer), so without its whole-line comments
# (the file's documentation, not code: the JSDoc types matter to tsc only); a comment after code
# on its line stays. tests/test_static_shared.py has node parse every module as the page gets it.
_WHOLE_LINE_COMMENT = re.compile(r"^[ \t]*(?://[^\n]*|/\*(?:(?!\*/).)*\*/[ \t]*)\n", re.M | re.S)
SHARED_JS = "// pytree-lab: static/_shared.js, its comments left out\n" + re.sub(
    r"\n{2,}", "\n", _WHOLE_LINE_COMMENT.sub("", SHARED_SOURCE)
).lstrip("\n")
_CALLS_SHARED = re.compile(r"(?<![\w$.])(?:" + "|".join(map(re.escape, SHARED_NAMES)) + r")\(")


def with_shared(name: str, text: str) -> str:
    """A module's text as the page gets it: the shared script in front if the module calls it."""
    if name.endswith(".js") and _CALLS_SHARED.search(text):
        return SHARED_JS + "\n" + text
    return text


def static_asset(name: str) -> str | FileContents:
    """A static file's text for anywidget.

    Given a path, anywidget connects every instance to the file's change signal, which keeps
    each widget (and the trees it holds) alive after `close()`; the text does not.
    `ANYWIDGET_HMR=1` (live reload while editing the JS) gets the file, watched (when
    `watchfiles` is installed) and still with the shared script in front; an edit of
    _shared.js itself is seen at the next kernel start.
    """
    path = STATIC / name
    if os.environ.get("ANYWIDGET_HMR") == "1":
        return _live_module(path)
    return with_shared(name, path.read_text(encoding="utf-8"))


def _live_module(path: pathlib.Path) -> FileContents:
    """The file anywidget watches for `ANYWIDGET_HMR=1`, read with the shared script in front."""
    from anywidget._file_contents import FileContents  # (anywidget is only needed by the widgets)

    class LiveModule(FileContents):
        def __str__(self) -> str:
            return with_shared(self._path.name, super().__str__())

    return LiveModule(path, start_thread=importlib.util.find_spec("watchfiles") is not None)
