"""The explorer's status line and buttons: Step, Step ×10, Reset, Play / Pause (playbar.py), and the
boxes that fix the bars' y range and put the loss line on a log scale. A click's step runs as a step
from the page (play.py: its output goes to the explorer's output area; Reset stops playing)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import ipywidgets

from .playbar import PlayControl

__all__ = ["build_controls"]


def build_controls(ex: Any, fixed_range: bool, clicked: Callable[..., None]) -> None:
    """Make the controls as the explorer's attributes (`status`, the line for messages;
    `step_button`, `step10_button`, `reset_button`, `fixed_range_box`, `log_scale_box`, and `controls`, the row
    holding the buttons; `play_control`, Play / Pause with its speed and step number), wired to it:
    a button calls `clicked(method, *args)`, which runs the step as one from the page."""
    ex.status = ipywidgets.HTML(layout={"width": "100%"})
    ex.status.add_class("pytree-lab-status")
    ex.step_button = ipywidgets.Button(description="Step", tooltip="take one step: move to updated")
    ex.step10_button = ipywidgets.Button(description="Step ×10", tooltip="take ten steps (one compiled loop)")
    ex.reset_button = ipywidgets.Button(
        description="Reset",
        tooltip="back to the starting params, inputs and learning rate, and a fresh optimizer state",
    )
    ex.fixed_range_box = ipywidgets.Checkbox(
        value=bool(fixed_range), description="fix the bars' y range", indent=False, layout={"width": "auto"}
    )
    ex.log_scale_box = ipywidgets.Checkbox(description="log-scale loss", indent=False, layout={"width": "auto"})
    for button in (ex.step_button, ex.step10_button, ex.reset_button):
        button.add_class("pytree-lab-step-button")
    ex.step_button.on_click(lambda _: clicked(ex.step, 1))
    ex.step10_button.on_click(lambda _: clicked(ex.step, 10))
    ex.reset_button.on_click(lambda _: clicked(ex.reset))
    ex.play_control = PlayControl()
    ex.fixed_range_box.observe(lambda change: setattr(ex.chart_view, "fixed_range", bool(change["new"])), "value")
    ex.log_scale_box.observe(lambda change: ex.history_view.set_log(change["new"]), "value")  # the page's intent
    ex.controls = ipywidgets.HBox(
        [ex.step_button, ex.step10_button, ex.reset_button, ex.play_control, ex.fixed_range_box, ex.log_scale_box],
        layout={"flex_flow": "row wrap", "align_items": "center"},
    )
    ex.controls.add_class("pytree-lab-controls")
