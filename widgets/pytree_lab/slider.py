"""`Slider`: one number of the person's model on a native range input.

The value is the kernel's: the page never writes it back. A slider shows the number it was
given, exactly (0.123456 stays 0.123456, -0.0026 stays -0.0026), until the person moves *that*
slider; only then does the page send the new position. Step and range follow the value's
scale, ten to the power of its magnitude, so a small initial weight gets a fine step.

A move is sent as a custom message ``{"type": "move", "value": v, "seq": n, "view": id}``, not
as a synced trait. Move numbers are checked: a whole number from 1, at most `MAX_JUMP` past the
newest move taken and below 2^53, and going forward for each view; a crafted number far ahead is
refused (never acknowledged), so it cannot lock the slider for later moves. ``ack`` (synced to
the page) says which move the kernel applied. The page keeps one move in flight: while the last
move sent is not acknowledged it holds only the newest position and sends it when the ack
arrives, so a fast drag costs one page update per round trip, never a queue of stale ones, and
the final position always goes out. The kernel keeps only the newest message (highest ``seq``)
and applies it when the messages already queued have been read; every move it reads is
acknowledged, even one it refuses (outside the range), so the page never waits on it.

The page may write no trait at all: ``value``, ``min``, ``max``, ``step``, ``description``,
``path`` and ``module`` are refused when a page message tries to set them.

The front-end module (static/slider.js and slider.css, about 10 KB) comes with each `Slider`
made alone. Sliders shown together share one copy: make one `SliderModule` and pass it as
``module=`` to each (a `StepExplorer` does this for its sliders). Such a slider carries a loader
of about 0.5 KB (static/slider_proxy.js) and a reference to the module widget; its view
renders with the module anywidget loaded once for the `SliderModule` (anywidget's widget
composition: ``host.getWidget``). The `SliderModule` is one more widget to close: a
`StepExplorer` finds it through its sliders' ``module`` trait and closes it with the rest.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import time
from typing import Any

import anywidget
import traitlets

from . import timing
from .page import PageIntents, is_number, static_asset, synced
from .ranges import span  # the ranges live there (no widgets); slider.span stays public

__all__ = ["Slider", "SliderModule", "span"]

log = logging.getLogger(__name__)


def _finite_or_none(value: float, widget: Any = None) -> float | None:
    """Strict JSON has no NaN or Infinity: the page gets null and shows the text form."""
    return value if isinstance(value, (int, float)) and math.isfinite(value) else None


# A move's number: a whole number from 1, within what JavaScript counts exactly (2^53 - 1), at
# most MAX_JUMP past the newest move taken (a page numbers its moves from the last ack, so a
# real page is never more than a few ahead). Per view (its "view" id), numbers only go forward;
# the newest MAX_VIEWS views are remembered.
MAX_SEQ = 2**53 - 1
MAX_JUMP = 1024
MAX_VIEWS = 16


class SliderModule(PageIntents, anywidget.AnyWidget):
    """The slider's front-end module, shared by the sliders made with ``module=`` this widget (see
    the module docstring). Never displayed, no state of its own; the page may write nothing."""

    _page_intents = frozenset()
    _esm = static_asset("slider.js")
    _css = static_asset("slider.css")

    def __repr__(self) -> str:
        return "SliderModule()"


# The view of a slider that shares a SliderModule: it renders with that widget's module.
_PROXY_ESM = static_asset("slider_proxy.js")


class _ModuleTrait(anywidget.WidgetTrait):
    """A slider's SliderModule: set when the slider is made, never after (the page draws the
    slider with that module, or with the slider's own copy when there is none)."""

    def set(self, obj: Any, value: Any) -> None:
        if obj.__dict__.get("_module_fixed"):
            raise traitlets.TraitError("a slider's module is set when the slider is made")
        super().set(obj, value)


class Slider(PageIntents, anywidget.AnyWidget):
    """A labelled range input for one number; moves from the page arrive as messages.

    Python sets `value`, `min`, `max` and `step` as with any ipywidgets slider; a value
    outside [min, max] set from Python is kept as given and the range grows to hold it
    (`widened` then says what the range was). Observe `value` to react to moves. ``module=``
    a `SliderModule`: see the module docstring (closing the slider leaves it open).
    """

    _page_intents = frozenset()  # the page writes nothing; moves arrive as messages
    _esm = static_asset("slider.js")
    _css = static_asset("slider.css")

    # The Python <-> JS contract (same names in static/slider.js). All kernel-owned.
    value = synced(
        traitlets.Float(0.0),
        "float, default 0.0: the number, exactly as given or moved to (NaN and ±inf go to the page as null).",
        by="kernel: the page's moves arrive as messages",
        to_json=_finite_or_none,
    )
    min = synced(
        traitlets.Float(-1.0),
        "float, default -1.0 (from the value's scale): the range's low end.",
        to_json=_finite_or_none,
    )
    max = synced(
        traitlets.Float(1.0),
        "float, default 1.0 (from the value's scale): the range's high end.",
        to_json=_finite_or_none,
    )
    step = synced(
        traitlets.Float(0.01),
        "float, default 0.01 (a tenth of the value's magnitude): one key press's move.",
        to_json=_finite_or_none,
    )
    description = synced(traitlets.Unicode(""), "str, default '': the visible label (cut in the middle).")
    path = synced(
        traitlets.Unicode(""), "str, default '': the full path, the slider's title and accessible description."
    )
    ack = synced(traitlets.Int(0), "int, default 0: the seq of the last page move the kernel applied (or refused).")
    module = synced(
        _ModuleTrait(),
        "SliderModule or None, default None: the widget whose front-end module renders this slider "
        "(None: it carries its own).",
        by="kernel, once, at construction",
    )

    def __init__(
        self,
        value: float = 0.0,
        *,
        description: str = "",
        path: str = "",
        min: float | None = None,
        max: float | None = None,
        step: float | None = None,
        module: SliderModule | None = None,
        **kwargs: Any,
    ):
        lo, hi, st = span(value)
        if module is not None:
            if not isinstance(module, SliderModule):
                raise TypeError(f"module= takes a SliderModule, not {type(module).__name__}.")
            if module.comm is None:
                raise ValueError("module= names a closed SliderModule: its sliders would show nothing.")
            # a loader instead of the module: the page renders this slider with `module`'s copy
            kwargs.update(module=module, _esm=_PROXY_ESM, _css="")
        super().__init__(
            value=float(value),
            description=description,
            path=path or description,
            min=lo if min is None else float(min),
            max=hi if max is None else float(max),
            step=st if step is None else float(step),
            **kwargs,
        )
        self._module_fixed = True
        self.widened: tuple[float, float] | None = None
        self.moves = 0  # page moves applied (for tests and benchmarks)
        self._pending: tuple[int, float] | None = None
        self._views: dict[str, int] = {}  # the newest move number of each page view (most recent last)
        self.refused_moves = 0  # crafted or malformed moves refused (for tests)
        self._flush_scheduled = False
        self.on_msg(self._on_page_message)

    # ------------------------------------------------------------------ values from Python
    @traitlets.observe("value")
    def _widen(self, change) -> None:
        v = change["new"]
        if not math.isfinite(v) or self.min <= v <= self.max:
            return
        lo, hi, step = span(v)
        self.widened = (self.min, self.max)
        with self.hold_sync():
            if v > self.max:
                self.max = hi
            else:
                self.min = lo
            self.step = max(self.step, step) if abs(v) >= 0.1 else min(self.step, step)

    # ------------------------------------------------------------------ moves from the page
    def _on_page_message(self, widget: Any, content: Any, buffers: Any) -> None:
        if not isinstance(content, dict) or content.get("type") != "move":
            return
        value, seq = content.get("value"), content.get("seq")
        if not is_number(value) or not math.isfinite(value) or not is_number(seq, int) or seq < 1:
            self._refuse_move("a malformed move")
            return
        if seq <= self.ack or (self._pending is not None and seq <= self._pending[0]):
            return  # an older move than one already taken: the newest wins
        newest = self.ack if self._pending is None else self._pending[0]
        if seq > MAX_SEQ or seq - newest > MAX_JUMP:
            # a page numbers its moves one after another from the last ack (slider.js): a number
            # far ahead is crafted or corrupt. Taking it would push `ack` where the page's next
            # numbers cannot pass it (past 2^53 a JavaScript number cannot even count on), and
            # lock this slider for the person; refused, never acknowledged.
            self._refuse_move(f"a move numbered {seq}, far ahead of the last one ({newest})")
            return
        view = content.get("view")
        if isinstance(view, str) and view:
            last = self._views.get(view)
            if last is not None and seq <= last:
                return  # a view's moves only go forward: a replay of this view's move
            self._views.pop(view, None)
            self._views[view] = seq
            while len(self._views) > MAX_VIEWS:
                self._views.pop(next(iter(self._views)))
        if not (self.min <= value <= self.max):
            log.warning("slider %s: a move outside [%s, %s] from the page was ignored", self.path, self.min, self.max)
            # still acknowledged (the page waits for the ack before sending its next move, and
            # shows the kernel's value again): with the last good move, or on its own
            if self._pending is not None:
                self._pending = (seq, self._pending[1])
            else:
                self.ack = seq
            return
        self._pending = (seq, float(value))
        self._schedule_flush()

    def _refuse_move(self, what: str) -> None:
        self.refused_moves += 1
        if self.refused_moves == 1:  # once per slider: a flood of crafted messages logs one line
            log.warning("slider %s: %s from the page was ignored", self.path, what)

    def _schedule_flush(self) -> None:
        """Apply the newest move once the messages already waiting have been read: at once after
        a pause (`_LEAD_GAP`: a key press, a drag's first step), else once no move came for a
        quiet interval (`_quiet`), so moves queued while the kernel was busy, which ipykernel
        hands over one by one, collapse into one; at least every `_MAX_WAIT`. Without a running
        loop (plain Python, tests) at once."""
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            self.flush()
            return
        now = loop.time()
        idle = now - self._last_move_at >= self._LEAD_GAP and now - self._last_flush_at >= self._LEAD_GAP
        self._last_move_at = now
        if self._flush_scheduled:
            return
        if idle:
            # a move after a pause: nothing else can be waiting, so apply it now, inside this
            # message's handler (its views go out before the kernel reports idle)
            self.flush()
            return
        self._flush_scheduled = True
        self._first_move_at = now
        loop.call_later(self._quiet, self._flush_when_quiet)

    # the coalescing's constants (timing.py: every timing constant of a slider move)
    _QUIET = timing.SLIDER_QUIET
    _MAX_QUIET = timing.SLIDER_MAX_QUIET
    _MAX_WAIT = timing.SLIDER_MAX_WAIT
    _LEAD_GAP = timing.SLIDER_LEAD_GAP  # a move this long after the previous move and flush is applied at once
    _last_flush_s = 0.0  # how long applying the last move took (the observers' computation)
    _last_move_at = -math.inf  # loop time of the last move received
    _last_flush_at = -math.inf  # loop time the last flush ended

    @property
    def _quiet(self) -> float:
        return min(self._MAX_QUIET, max(self._QUIET, self._last_flush_s / 4))

    def _flush_when_quiet(self) -> None:
        loop = asyncio.get_running_loop()
        now = loop.time()
        quiet = self._quiet
        if now - self._last_move_at < quiet and now - self._first_move_at < self._MAX_WAIT:
            loop.call_later(quiet - (now - self._last_move_at), self._flush_when_quiet)
            return
        self.flush()

    def flush(self) -> None:
        """Apply the newest pending move (if any) to `value`."""
        self._flush_scheduled = False
        pending, self._pending = self._pending, None
        if pending is None:
            return
        seq, value = pending
        self.moves += 1
        started = time.perf_counter()
        with self.hold_sync():
            self.ack = seq
            self.value = value
        self._last_flush_s = time.perf_counter() - started
        with contextlib.suppress(RuntimeError):
            self._last_flush_at = asyncio.get_running_loop().time()

    def __repr__(self) -> str:
        return (
            f"Slider({self.description!r}, value={self.value!r}, min={self.min!r}, max={self.max!r}, "
            f"step={self.step!r})"
        )
