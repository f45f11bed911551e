"""Which traits the page may write.

Python owns a widget's data; the page draws it and reports what the person did through a few
*intent* traits (a selection, a folded node). Everything else the kernel sends (rows, panels,
results, answers) is the kernel's: a page that writes one of those (a stale view, a crafted
comm message, a buggy extension) is refused, the kernel's value is sent back to the page, and
the refusal is logged once per widget class and trait at INFO level (never a traceback in the
notebook).

    class MyWidget(PageIntents, anywidget.AnyWidget):
        _page_intents = frozenset({"selected_path", "collapsed"})

Works for any ipywidgets widget (anywidget included): it filters `set_state`, the one door
through which the front end's trait writes come in.
"""

from __future__ import annotations

import logging
from typing import ClassVar

__all__ = ["PageIntents", "refuse_page_writes", "page_writes_refused"]

log = logging.getLogger("pytree_lab.page")
_logged: set[tuple[str, str]] = set()


class PageIntents:
    """Mixin for an ipywidgets widget: the page may write only the traits in `_page_intents`."""

    # The traits the page may write; every other synced trait is the kernel's.
    _page_intents: ClassVar[frozenset[str]] = frozenset()

    @property
    def refused_page_writes(self) -> dict[str, int]:
        """How many page writes this widget refused, per trait ({} when none)."""
        return dict(self.__dict__.get("_refused_page_writes", {}))

    def set_state(self, sync_data: dict) -> None:
        allowed = self._page_intents
        kept = {k: v for k, v in sync_data.items() if k in allowed}
        refused = [k for k in sync_data if k not in allowed]
        if refused:
            self._refuse(refused)
        if kept:
            super().set_state(kept)  # type: ignore[misc]
        if refused:
            known = [k for k in refused if k in getattr(self, "keys", ())]
            if known:
                self.send_state(known)  # type: ignore[attr-defined]  # the page shows the kernel's values again

    def _refuse(self, names: list[str]) -> None:
        counts = self.__dict__.setdefault("_refused_page_writes", {})
        cls = type(self).__name__
        for name in names:
            counts[name] = counts.get(name, 0) + 1
            if (cls, name) not in _logged:
                _logged.add((cls, name))
                log.info(
                    "%s: the page tried to write %r, which only the kernel writes; kept the kernel's value "
                    "(the page may write: %s)",
                    cls,
                    name,
                    ", ".join(sorted(self._page_intents)) or "nothing",
                )


def refuse_page_writes(widget, intents=frozenset()):
    """The same rule for a stock widget pytree-lab builds (an ipywidgets box, HTML, button,
    checkbox; a bqplot figure, mark, scale or axis): the page may write only `intents`
    (a checkbox's `value`, a mark's click `selected`), every other write is refused, logged
    once per class and trait, and the kernel's value is sent back. Returns the widget."""
    if isinstance(widget, PageIntents) or widget.__dict__.get("_page_guarded"):
        return widget
    allowed = frozenset(intents)
    own = type(widget).set_state

    def set_state(sync_data: dict) -> None:
        kept = {k: v for k, v in sync_data.items() if k in allowed}
        refused = [k for k in sync_data if k not in allowed]
        if refused:
            counts = widget.__dict__.setdefault("_refused_page_writes", {})
            cls = type(widget).__name__
            for name in refused:
                counts[name] = counts.get(name, 0) + 1
                if (cls, name) not in _logged:
                    _logged.add((cls, name))
                    log.info(
                        "%s: the page tried to write %r, which only the kernel writes; kept the kernel's "
                        "value (the page may write: %s)",
                        cls,
                        name,
                        ", ".join(sorted(allowed)) or "nothing",
                    )
        if kept:
            own(widget, kept)
        known = [k for k in refused if k in getattr(widget, "keys", ())]
        if known:
            widget.send_state(known)

    widget.set_state = set_state
    widget.__dict__["_page_guarded"] = True
    return widget


def page_writes_refused(widget) -> dict:
    """How many page writes `widget` refused, per trait ({} when none)."""
    return dict(widget.__dict__.get("_refused_page_writes", {}))
