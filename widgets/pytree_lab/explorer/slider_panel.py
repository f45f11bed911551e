"""The explorer's sliders as widgets: one `Slider` per entry of the slider plan (sliders.py), all in
one box and sharing one copy of the front-end module (`SliderModule`).

Values go one way, sliders -> session: `take` puts a slider's new value into the session (and
notes a value set from Python past the slider's range, which widened it). When the session moves
from Python (set_params, step, reset), `follow` moves the sliders to its values; their moves then
run no step of their own (`take` says so): the explorer recomputes once after.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable
from typing import Any

import ipywidgets

from ..formatting import short_labels
from ..slider import Slider, SliderModule
from .messages import widened_note

__all__ = ["SliderPanel"]


class SliderPanel:
    """The sliders of `session`'s slider plan (`chosen`, `max_sliders`: see StepExplorer): `sliders`
    by label, `box` the widget holding them."""

    def __init__(self, session: Any, chosen: Iterable[str] | None, max_sliders: int):
        self.session = session
        module = SliderModule()  # the slider module, sent to the page once for all these sliders
        plan = session.plan_sliders(chosen, max_sliders)
        labels = [spec.label for spec in plan]
        shown = dict(zip(labels, short_labels(labels)))  # short (cut in the middle), no two alike
        self.sliders: dict[str, Slider] = {
            spec.label: Slider(
                spec.value,
                description=shown[spec.label],
                path=spec.path,
                min=spec.min,
                max=spec.max,
                step=spec.step,
                module=module,
            )
            for spec in plan
        }
        self.box = ipywidgets.VBox(list(self.sliders.values()), layout={"min_width": "330px"})
        self.following = False  # set while the sliders follow the session

    def on_move(self, callback: Callable[[str, dict], None]) -> None:
        """`callback(label, change)` for each new value of a slider (the page's moves and Python's)."""
        for label, slider in self.sliders.items():
            slider.observe(functools.partial(callback, label), "value")

    def take(self, label: str, change: dict) -> bool:
        """The slider `label`'s new value (a traitlets change) into the session. True when it is a
        move of its own (a step to run); False while the sliders follow the session."""
        slider = change["owner"]
        if slider.widened is not None:
            lo, hi = slider.widened
            slider.widened = None
            self.session.notes.append(widened_note(slider.path, change["new"], lo, hi))
        self.session.move(label, change["new"])
        return not self.following

    def follow(self, keep_notes: bool = True) -> None:
        """The sliders move to the session's values (one recompute after, by the caller)."""
        notes = list(self.session.notes)
        self.following = True
        try:
            for label, slider in self.sliders.items():
                slider.value = self.session.values[label]
                slider.widened = None  # a new point, not a value pushed out of range by hand
        finally:
            self.following = False
            if keep_notes:
                self.session.notes = notes

    def param_sliders(self) -> list[tuple[Any, Slider]]:
        """(element, Slider) of each parameter element with a slider, in order."""
        return [
            (spec.element, self.sliders[spec.label])
            for spec in self.session.specs
            if spec.element is not None and spec.element.tree == "params"
        ]
