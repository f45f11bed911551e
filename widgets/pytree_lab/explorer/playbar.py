"""`PlayControl`: the explorer's Play / Pause button, its speed and the step number shown.

Every trait is the kernel's: the page writes none (a page write is refused and the kernel's value
sent back, see page.py). What the person does arrives as custom messages, *intents* the
kernel decides on:

    {"type": "play"}                      start playing at `steps_per_second`
    {"type": "pause"}                     stop
    {"type": "rate", "value": 10}         another speed (one of `RATES`)
    {"type": "drawn", "frame": 12}        the page has drawn played step 12 (the acknowledgement)

`frame` is the played step the kernel last sent, set once that step's views are all sent; the
page answers ``drawn`` after its next paint (static/play.js), and the player computes the next
step only after that answer (see play.py). `step` is the step number of the point the explorer
shows, `playing` whether it plays, `message` why it stopped (text, never HTML).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import anywidget
import traitlets

from ..page import PageIntents, static_asset

__all__ = ["PlayControl", "RATES"]

RATES = (1, 2, 5, 10, 20, 30)  # the speeds the page offers (steps per second)
MAX_FRAME = 2**53 - 1


class PlayControl(PageIntents, anywidget.AnyWidget):
    """Play / Pause, speed and step number (see the module doc). `on_intent(kind, value)` is
    called with each well-formed intent from the page; malformed messages are ignored."""

    _page_intents = frozenset()  # the page writes nothing: intents arrive as messages
    _esm = static_asset("play.js")
    _css = static_asset("play.css")

    playing = traitlets.Bool(False, help="bool: steps are being played. Written by the kernel.").tag(sync=True)
    steps_per_second = traitlets.Float(10.0, help="float: the playing speed. Written by the kernel.").tag(sync=True)
    step = traitlets.Int(0, help="int: the step number of the point shown. Written by the kernel.").tag(sync=True)
    frame = traitlets.Int(
        0, help="int: the played step the page is asked to acknowledge once drawn. Written by the kernel."
    ).tag(sync=True)
    message = traitlets.Unicode("", help="str: why playing stopped (text). Written by the kernel.").tag(sync=True)
    rates = traitlets.List(list(RATES), help="list: the speeds offered. Written by the kernel.").tag(sync=True)

    def __init__(self, **kwargs: Any):
        super().__init__(**kwargs)
        self.on_intent: Callable[[str, Any], None] | None = None
        self.ignored = 0  # malformed messages ignored (for tests)
        self.on_msg(self._on_page_message)

    def _on_page_message(self, widget: Any, content: Any, buffers: Any) -> None:
        kind = content.get("type") if isinstance(content, dict) else None
        value: Any = None
        if kind == "drawn":
            value = content.get("frame")
            ok = isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= MAX_FRAME
        elif kind == "rate":
            value = content.get("value")
            ok = (
                isinstance(value, (int, float))
                and not isinstance(value, bool)
                and math.isfinite(value)
                and value in RATES
            )
        else:
            ok = kind in ("play", "pause")
        if not ok:
            self.ignored += 1
            return
        if self.on_intent is not None:
            self.on_intent(kind, value)  # type: ignore[arg-type]  # ok: kind is one of the str kinds

    def __repr__(self) -> str:
        return f"PlayControl(playing={self.playing}, step={self.step}, steps_per_second={self.steps_per_second})"
