"""The explorer's widgets: guarded against page writes, and closed when the explorer is done.

ipywidgets keeps every open widget in a registry until it is closed, so an explorer that is
replaced without close() (`ex = StepExplorer()` run again) would stay in memory with its ~70
widgets and compiled steps for the rest of the session. Two things close it:
- the page closing its comm (the front end disposing of the model);
- a new explorer being built while this one had views and now has none (the cell that showed
  it was run again or cleared), or this one losing its last view after a newer one was built
  (the page's "no view left" may reach the kernel after the cell run again has built the new
  one). One still shown anywhere, or never shown (a script, a test), is left alone; a closed
  explorer keeps its Python state (params, history).
"""

from __future__ import annotations

import contextlib
import weakref
from typing import TYPE_CHECKING, Any, ClassVar

import ipywidgets

from ..page import refuse_page_writes

__all__ = ["Lifetime", "descendants", "guard"]


def guard(widget: ipywidgets.Widget) -> ipywidgets.Widget:
    """`widget` refusing page writes but the ones the page may make on a stock part the explorer
    builds: a checkbox's tick, a drop-down's choice (the worked calculation's leaf) and a bqplot
    mark's click selection or hovered point; nothing else (children, text, options, bar heights,
    scales, labels, layouts and styles are the kernel's)."""
    import bqplot

    intents = {
        ipywidgets.Checkbox: {"value"},
        ipywidgets.Dropdown: {"index"},
        bqplot.Mark: {"selected", "hovered_point"},
    }
    return refuse_page_writes(widget, next((v for k, v in intents.items() if isinstance(widget, k)), ()))


def descendants(root: ipywidgets.Widget) -> list[ipywidgets.Widget]:
    """Every widget reachable from `root` through its synced traits (children, marks, axes,
    scales, layouts, styles, tooltips), root first."""
    seen: dict[int, ipywidgets.Widget] = {}
    stack: list[Any] = [root]
    while stack:
        obj = stack.pop()
        if isinstance(obj, ipywidgets.Widget):
            if id(obj) in seen:
                continue
            seen[id(obj)] = obj
            for key in obj.keys:
                with contextlib.suppress(Exception):
                    stack.append(getattr(obj, key))
        elif isinstance(obj, (list, tuple)):
            stack.extend(obj)
        elif isinstance(obj, dict):
            stack.extend(obj.values())
    return list(seen.values())


class Lifetime:
    """Mixin for the explorer widget: guards what it built, retires a replaced explorer, and
    closes with its page. The widget calls `_start_lifetime()` once its children are set."""

    if TYPE_CHECKING:  # the widget this mixes into (StepExplorer, an ipywidgets.VBox) has these

        def close(self) -> None: ...

    # The page writes only `_view_count` (views shown); every other synced trait is the kernel's.
    _page_intents: ClassVar[frozenset[str]] = frozenset({"_view_count"})
    # Explorers alive in this kernel (weakly held: this set never keeps one alive).
    _live: ClassVar[weakref.WeakSet[Any]] = weakref.WeakSet()
    _had_views = False
    _closed = False
    _built_count = 0  # explorers built in this kernel; each knows its place (`_generation`)
    _generation = 0

    @property
    def closed(self) -> bool:
        """True once the explorer is closed (by `close()`, its page, or a newer explorer)."""
        return self._closed

    @property
    def shown(self) -> int:
        """How many views of the explorer the page shows now (the page counts them; None: not yet)."""
        return max(getattr(self, "_view_count", None) or 0, 0)

    def _start_lifetime(self) -> None:
        self._closed = False
        # the page writes intents only: every widget built here refuses page writes of
        # kernel-owned state (children, text, bar heights, scales, labels); close() closes them all
        self._built = descendants(self)
        for widget in self._built:
            guard(widget)
        for other in list(Lifetime._live):
            if other is self or other.__dict__.get("_closed", True):
                continue
            if other._had_views and other._view_count == 0:
                with contextlib.suppress(Exception):
                    other.close()
        Lifetime._built_count += 1
        self._generation = Lifetime._built_count
        Lifetime._live.add(self)
        self.observe(self._views_changed, "_view_count")  # type: ignore[attr-defined]
        self._view_count = 0  # the front end now counts this explorer's views
        comm = getattr(self, "comm", None)
        if comm is not None and hasattr(comm, "on_close"):
            me = weakref.ref(self)  # the comm must not keep the explorer alive

            def closed_by_page(msg: Any = None) -> None:
                ex = me()
                if ex is not None and not ex.closed:
                    with contextlib.suppress(Exception):
                        ex.close()

            comm.on_close(closed_by_page)

    def _views_changed(self, change: dict) -> None:
        if isinstance(change["new"], int) and change["new"] > 0:
            self._had_views = True
        elif (
            change["new"] == 0
            and self._had_views
            and not self._closed
            and any(
                other._generation > self._generation and not other.__dict__.get("_closed", True)
                for other in list(Lifetime._live)
            )
        ):
            with contextlib.suppress(Exception):
                self.close()

    def _adopt(self, widget: ipywidgets.Widget) -> None:
        """A widget made after construction (the loss line's log scale): guarded and closed with the rest."""
        guard(widget)
        self._built.append(widget)

    def _close_widgets(self) -> None:
        for widget in [*self.__dict__.get("_built", ()), *descendants(self)]:
            if widget is not self:
                with contextlib.suppress(Exception):
                    widget.close()
