"""The explorer's status line and buttons: Step, Step ×10, Reset, Play / Pause (playbar.py), and the
boxes that fix the bars' y range and put the loss line on a log scale. A click's step runs as a step
from the page (play.py: its output goes to the explorer's output area; Reset stops playing)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import ipywidgets

from .playbar import PlayControl

__all__ = ["build_controls", "step_controls"]

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
    ex.status = ipywidgets.HTML(layout={"width": "100%"})
    ex.status.add_class("pytree-lab-status")
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
    )
    ex.controls.add_class("pytree-lab-controls")
