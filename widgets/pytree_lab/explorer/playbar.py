"""The explorer's controls: `PlayControl` (its Play / Pause button, its speed and the step number
shown) and, with it in one row (`step_controls`), the status line, Step, Step ×10 and Reset and
the boxes that fix the bars' y range and put the loss line on a log scale. A click's step runs as a
step from the page (play.py: its output goes to the explorer's output area; Reset stops playing).

Every trait of PlayControl is the kernel's: the page writes none (a page write is refused and the kernel's value
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

from collections.abc import Callable
from typing import Any

import anywidget
import ipywidgets
import traitlets

from ..page import PageIntents, is_number, static_asset, synced

__all__ = ["PlayControl", "RATES", "build_controls", "step_controls"]

RATES = (1, 2, 5, 10, 20, 30)  # the speeds the page offers (steps per second)
MAX_FRAME = 2**53 - 1


class PlayControl(PageIntents, anywidget.AnyWidget):
    """Play / Pause, speed and step number (see the module doc). `on_intent(kind, value)` is
    called with each well-formed intent from the page; malformed messages are ignored."""

    _page_intents = frozenset()  # the page writes nothing: intents arrive as messages
    _esm = static_asset("play.js")
    _css = static_asset("play.css")

    playing = synced(traitlets.Bool(False), "bool: steps are being played.")
    steps_per_second = synced(traitlets.Float(10.0), "float: the playing speed.")
    step = synced(traitlets.Int(0), "int: the step number of the point shown.")
    frame = synced(traitlets.Int(0), "int: the played step the page is asked to acknowledge once drawn.")
    message = synced(traitlets.Unicode(""), "str: why playing stopped (text).")
    rates = synced(traitlets.List(list(RATES)), "list: the speeds offered.")

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
            ok = is_number(value, int) and 0 <= value <= MAX_FRAME
        elif kind == "rate":
            value = content.get("value")
            ok = is_number(value) and value in RATES
        else:
            ok = kind in ("play", "pause")
        if not ok:
            self.ignored += 1
            return
        if self.on_intent is not None:
            self.on_intent(kind, value)  # type: ignore[arg-type]  # ok: kind is one of the str kinds

    def __repr__(self) -> str:
        return f"PlayControl(playing={self.playing}, step={self.step}, steps_per_second={self.steps_per_second})"


TOOLTIPS = (
    "take one step: move to updated",
    "take ten steps (one compiled loop)",
    "back to the starting params, inputs and learning rate, and a fresh optimizer state",
)


def build_controls(ex: Any, fixed_range: bool, clicked: Callable[..., None]) -> None:
    """Make the controls as the explorer's attributes (`step_controls`'s, and `fixed_range_box`
    and `log_scale_box` at the end of the `controls` row)."""
    ex.fixed_range_box = ipywidgets.Checkbox(
        value=bool(fixed_range), description="fix the bars' y range", indent=False, layout={"width": "auto"}
    )
    ex.log_scale_box = ipywidgets.Checkbox(description="log-scale loss", indent=False, layout={"width": "auto"})
    step_controls(ex, clicked, TOOLTIPS, (ex.fixed_range_box, ex.log_scale_box))
    ex.fixed_range_box.observe(lambda change: setattr(ex.chart_view, "fixed_range", bool(change["new"])), "value")
    ex.log_scale_box.observe(lambda change: ex.history_view.set_log(change["new"]), "value")  # the page's intent


def step_controls(ex: Any, clicked: Callable[..., None], tooltips: tuple[str, ...], boxes: tuple = ()) -> None:
    """Make the controls an explorer and an OptimizerComparison share, as `ex`'s attributes (`status`,
    the line for messages; `step_button`, `step10_button`, `reset_button`, with these `tooltips`;
    `play_control`, Play / Pause with its speed and step number; and `controls`, the row holding
    them and `boxes`), wired to it: a button calls `clicked(method, *args)`, which runs the step
    as one from the page."""
    ex.status = ipywidgets.HTML(layout={"width": "100%"}).add_class("pytree-lab-status")
    ex.step_button, ex.step10_button, ex.reset_button = (
        ipywidgets.Button(description=d, tooltip=t) for d, t in zip(("Step", "Step ×10", "Reset"), tooltips)
    )
    buttons = [ex.step_button, ex.step10_button, ex.reset_button]
    for button, (method, *args) in zip(buttons, ((ex.step, 1), (ex.step, 10), (ex.reset,))):
        button.add_class("pytree-lab-step-button")
        button.on_click(lambda _, m=method, a=args: clicked(m, *a))
    ex.play_control = PlayControl()
    ex.controls = ipywidgets.HBox(
        [*buttons, ex.play_control, *boxes], layout={"flex_flow": "row wrap", "align_items": "center"}
    ).add_class("pytree-lab-controls")
