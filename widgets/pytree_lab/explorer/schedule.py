"""When the explorer's views are drawn: every view timer of the explorer (its constants, with the
slider's, in pytree_lab/timing.py).

While a slider is dragged, moves come faster than the page can redraw every view: the fast
views (the bars) follow each move at once, and the slow ones (the diagram, the worked
calculation, the loss line) follow the newest move when the drag pauses for `VIEWS_TRAIL`, and
at least every `VIEWS_EVERY` during a long drag. A move after a pause (a key press, a click)
updates the fast views at once and the slow ones `VIEWS_SOON` later, so the page draws the bars
before it works through the bigger messages; every change from Python updates every view at
once. The explorer's `result` is always the newest step.

The page sends a slider's next move only once the last is acknowledged (static/slider.js, and
slider.py collapses moves queued in the kernel), so the moves of a drag arrive about a round
trip apart: `DRAG_GAP` and `VIEWS_TRAIL` are longer than a round trip on a busy machine, or
every move of a drag would redraw every view.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Callable
from typing import Any

from .. import timing

__all__ = ["Schedule"]


def _loop_time() -> float | None:
    try:
        return asyncio.get_running_loop().time()
    except RuntimeError:  # no event loop (plain Python): nothing to wait for
        return None


class Schedule:
    """Draws a step's `views` (a views.ViewSet) now or later: the fast ones at once (each
    `view.show(result)`), the others later; `failed(error)` says a slow draw that failed on a timer's
    turn; `lock` is held on a timer's turn (the explorer's lock: one change at a time)."""

    DRAG_GAP = timing.DRAG_GAP  # s between two slider moves' steps that makes them one drag
    VIEWS_TRAIL = timing.VIEWS_TRAIL  # s of pause in a drag after which the slow views follow
    VIEWS_EVERY = timing.VIEWS_EVERY  # s: the slow views follow a long drag at least this often
    VIEWS_SOON = timing.VIEWS_SOON  # s after a single move's fast views that its slow views follow

    def __init__(self, views: Any, failed: Callable[[BaseException], None], lock: Any):
        self.fast_views = [view for view in views.values() if view.fast]  # drawn by the schedule itself
        self.views, self._failed, self._lock = views, failed, lock
        self.moving = False  # the step being shown comes from a slider move
        self.closed = False
        self.due: Any = None  # a step whose slow views wait (for the drag to pause, or VIEWS_SOON)
        self._timer: Any = None
        self._move_at = -math.inf  # loop time of the last slider move's step
        self._views_at = -math.inf  # loop time the slow views were last drawn

    def show(self, result: Any) -> None:
        """A new step: the fast views now, the slow ones now or later (see the module doc). The
        loss line is not drawn here when the slow views are drawn now: the step is not recorded yet."""
        dragging = self._dragging()
        # the fast views first: the bars are what the eye follows while a slider moves, so their
        # message leaves the kernel before the diagram's and the calculation's bigger ones (called
        # here, not through a helper: the slider path is six calls, explorer/__init__.py)
        for view in self.fast_views:
            view.show(result)
        if dragging:
            self.due = result
            if self._timer is None:
                self._timer = asyncio.get_running_loop().call_later(self.VIEWS_TRAIL, self._tick)
        elif self.moving and self.VIEWS_SOON > 0 and _loop_time() is not None:
            self.due = result
            self._cancel_timer()
            self._timer = asyncio.get_running_loop().call_later(self.VIEWS_SOON, self._tick, False)
        else:
            self.draw_now(result, history=False)

    def draw_now(self, result: Any, history: bool = True) -> None:
        """The slow views for `result`, now (nothing stays due); the loss line only if the step is in the `history`."""
        self.due = None
        self._cancel_timer()
        self.views.show(result, lambda view: not view.fast and (history or not view.after_record))
        now = _loop_time()
        if now is not None:
            self._views_at = now

    def draw_all(self, result: Any) -> None:
        """Every view for `result` now, the loss line aside (putting the views back on a step)."""
        for view in self.fast_views:
            view.show(result)
        self.draw_now(result, history=False)

    def draw_due(self) -> None:
        """Draw the views a drag left waiting (before a message, a text form or a close)."""
        if self.due is not None:
            self.draw_now(self.due)

    def close(self) -> None:
        self.closed = True
        self._cancel_timer()
        self.due = None

    # ---- internals
    def _dragging(self) -> bool:
        if not self.moving:
            return False
        now = _loop_time()
        if now is None:
            return False
        drag = now - self._move_at < self.DRAG_GAP
        self._move_at = now
        return drag and now - self._views_at < self.VIEWS_EVERY

    def _cancel_timer(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _tick(self, trail: bool = True) -> None:
        """A timer's turn, a drag's (`trail`: once it pauses for VIEWS_TRAIL) or a single move's: the
        views left waiting, drawn; a failure said as a failed step is."""
        with self._lock:
            self._timer = None
            if self.due is None or self.closed:
                return
            loop = asyncio.get_running_loop()
            wait = self.VIEWS_TRAIL - (loop.time() - self._move_at) if trail else 0.0
            if wait > 0:  # the drag goes on: wait for its pause
                self._timer = loop.call_later(wait, self._tick)
                return
            try:
                self.draw_now(self.due)
            except BaseException as err:  # noqa: BLE001 - said in the widget
                self.due = None
                self._failed(err)
