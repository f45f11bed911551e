"""What the page gets and what it may write back.

The widgets' ES modules and stylesheets (static/), as anywidget should get them: `static_asset`.

Python owns a widget's data; the page draws it and reports what the person did through a few
*intent* traits (a selection, a folded node). Everything else the kernel sends (rows, panels,
results, answers) is the kernel's: a page that writes one of those (a stale view, a crafted
comm message, a buggy extension) is refused, the kernel's value is sent back to the page, and
the refusal is logged once per widget class and trait at INFO level (never a traceback in the
notebook). It filters `set_state`, the one door through which the front end's trait writes come
in, so it works for any ipywidgets widget (anywidget included):

    class MyWidget(PageIntents, anywidget.AnyWidget):
        _page_intents = frozenset({"selected_path", "collapsed"})
"""

from __future__ import annotations

import importlib.util
import logging
import os
import pathlib
import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, ClassVar, TypeGuard

if TYPE_CHECKING:
    from anywidget._file_contents import FileContents

__all__ = ["PageIntents", "refuse_page_writes", "page_writes_refused", "static_asset"]

STATIC = pathlib.Path(__file__).parent / "static"

# What the modules share (static/_shared.js): a script, not a module (anywidget loads one file
# per widget, so nothing can be imported), put before the text of each module that calls one of
# its functions; the slider proxy, sent with every slider, calls none of them.
SHARED_SOURCE = (STATIC / "_shared.js").read_text(encoding="utf-8")
# the functions it defines, from its own text (top-level `function name(`)
SHARED_NAMES = tuple(re.findall(r"^function (\w+)\(", SHARED_SOURCE, re.M))
# Sent once per module (four times with an explorer): without its whole-line comments (JSDoc is
# for tsc) and indentation (no string spans lines); a comment after code on its line stays.
# tests/test_static_shared.py has node parse every module as the page gets it.
_WHOLE_LINE_COMMENT = re.compile(r"^[ \t]*(?://[^\n]*|/\*(?:(?!\*/).)*\*/[ \t]*)\n", re.M | re.S)
SHARED_JS = "// pytree-lab: static/_shared.js, its comments and indentation left out\n" + re.sub(
    r"(?m)^[ \t]+|\n(?=\n)", "", _WHOLE_LINE_COMMENT.sub("", SHARED_SOURCE)
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
    if os.environ.get("ANYWIDGET_HMR") != "1":
        return with_shared(name, path.read_text(encoding="utf-8"))
    from anywidget._file_contents import FileContents  # (anywidget is only needed by the widgets)

    class LiveModule(FileContents):
        def __str__(self) -> str:
            return with_shared(self._path.name, super().__str__())

    return LiveModule(path, start_thread=importlib.util.find_spec("watchfiles") is not None)


log = logging.getLogger("pytree_lab.page")
_logged: set[tuple[str, str]] = set()


def _filter(widget: Any, allowed: frozenset, sync_data: dict, apply: Callable[[dict], None]) -> None:
    """`apply` the page's writes of `allowed` traits; refuse, count and log (once per class and
    trait) the others, and send the kernel's values of those back."""
    refused = [k for k in sync_data if k not in allowed]
    counts = widget.__dict__.setdefault("_refused_page_writes", {}) if refused else {}
    cls = type(widget).__name__
    for name in refused:
        counts[name] = counts.get(name, 0) + 1
        if (cls, name) not in _logged:
            _logged.add((cls, name))
            log.info(
                "%s: the page tried to write %r, which only the kernel writes; kept the kernel's value "
                "(the page may write: %s)",
                cls,
                name,
                ", ".join(sorted(allowed)) or "nothing",
            )
    kept = {k: v for k, v in sync_data.items() if k in allowed}
    if kept:
        apply(kept)
    known = [k for k in refused if k in getattr(widget, "keys", ())]
    if known:
        widget.send_state(known)  # the page shows the kernel's values again


def page_writes_refused(widget) -> dict:
    """How many page writes `widget` refused, per trait ({} when none)."""
    return dict(widget.__dict__.get("_refused_page_writes", {}))


class PageIntents:
    """Mixin for an ipywidgets widget: the page may write only the traits in `_page_intents`."""

    # The traits the page may write; every other synced trait is the kernel's.
    _page_intents: ClassVar[frozenset[str]] = frozenset()

    refused_page_writes = property(page_writes_refused)

    def set_state(self, sync_data: dict) -> None:
        _filter(self, self._page_intents, sync_data, super().set_state)  # type: ignore[misc]


def refuse_page_writes(widget, intents=frozenset()):
    """The same rule for a stock widget pytree-lab builds (an ipywidgets box, HTML, button,
    checkbox; a bqplot figure, mark, scale or axis): the page may write only `intents`
    (a checkbox's `value`, a mark's click `selected`). Returns the widget."""
    if isinstance(widget, PageIntents) or widget.__dict__.get("_page_guarded"):
        return widget
    own, allowed = type(widget).set_state, frozenset(intents)
    widget.set_state = lambda sync_data: _filter(widget, allowed, sync_data, lambda kept: own(widget, kept))
    widget.__dict__["_page_guarded"] = True
    return widget


def synced(trait: Any, help: str, by: str = "kernel", **tags: Any) -> Any:
    """`trait`, synced, its help saying who writes it: the kernel, or the page (`_page_intents`)."""
    trait.help = trait.__doc__ = f"{help} Written by the {by}."
    return trait.tag(sync=True, **tags)


def is_number(value: Any, kinds: Any = (int, float)) -> TypeGuard[Any]:
    """`value` is one of `kinds` and not a bool (a bool is an int to Python, never a number meant)."""
    return isinstance(value, kinds) and not isinstance(value, bool)
