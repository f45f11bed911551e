"""Before/after bars of every parameter element (bqplot), as in the lesson's figure."""

from __future__ import annotations

import math
from typing import Callable, Sequence

import bqplot

__all__ = ["BeforeAfterChart"]

BEFORE = "#1f77b4"
AFTER = "#ff7f0e"


class BeforeAfterChart:
    """A grouped bar chart: one pair of bars (before, after) per parameter element.

    `labels` name the elements (`weight[0]`, `weight[1]`, `bias`); `owners` give the leaf path
    each element belongs to, so selecting a leaf highlights its bars and clicking a bar
    reports the leaf (`on_pick`). `paths` (optional) are the elements' full paths: the bars'
    x values, so a bar's tooltip names it in full; the axis shows the labels, shortened from
    the left when long and turned when many, so ticks never overlap.
    """

    def __init__(self, labels: Sequence[str], owners: Sequence[str], title: str = "",
                 paths: Sequence[str] | None = None):
        from .slider import short_label

        self.labels = list(labels)
        self.owners = list(owners)
        self.paths = list(paths) if paths is not None else list(self.labels)
        if len(set(self.paths)) != len(self.paths):  # x values must be distinct
            self.paths = [f"{p} #{i}" for i, p in enumerate(self.paths)]
        shown = [short_label(label, 14) for label in self.labels]
        if len(set(shown)) != len(shown):
            shown = list(self.labels)
        many = len(self.labels) > 8 or max((len(t) for t in shown), default=0) > 10
        self.tick_labels = dict(zip(self.paths, shown))
        self.x_scale = bqplot.OrdinalScale()
        # Explicit min/max: a grouped Bars mark on a scale without them draws zero-height bars.
        self.y_scale = bqplot.LinearScale(min=-1.0, max=1.0)
        self.bars = bqplot.Bars(
            x=self.paths,
            y=[[0.0] * len(self.labels), [0.0] * len(self.labels)],
            scales={"x": self.x_scale, "y": self.y_scale},
            type="grouped",
            colors=[BEFORE, AFTER],
            labels=["before", "after"],
            display_legend=True,
            base=0.0,
            interactions={"click": "select"},
            selected_style={"stroke": "currentColor", "stroke-width": "2"},
            unselected_style={"opacity": "0.35"},
            tooltip=bqplot.Tooltip(fields=["x", "y"], labels=["path", "value"], formats=["", ".4g"]),
        )
        self.x_axis = bqplot.Axis(scale=self.x_scale, label="parameter element", tick_labels=self.tick_labels,
                                  tick_rotate=-90 if many else 0, label_offset="100px" if many else "35px",
                                  tick_style={"text-anchor": "end", "dominant-baseline": "central"} if many else {})
        self.y_axis = bqplot.Axis(scale=self.y_scale, side="left", label="parameter value",
                                  tick_format=".3~g", label_offset="45px",
                                  grid_lines="dashed")
        self.figure = bqplot.Figure(
            marks=[self.bars],
            axes=[self.x_axis, self.y_axis],
            title=title,
            legend_location="top-right",
            fig_margin={"top": 40, "bottom": 115 if many else 50, "left": 70, "right": 20},
            layout={"flex": "1 1 440px", "min_width": "320px", "height": "380px" if many else "300px"},
            animation_duration=0,
        )
        self._picking = False
        self._on_pick: Callable[[str], None] | None = None
        self.bars.observe(self._picked, "selected")

    def show(self, before: Sequence[float], after: Sequence[float]) -> None:
        """New bar heights; the y scale always covers 0 and every value."""
        values = [v for v in list(before) + list(after) if math.isfinite(v)] + [0.0]
        lo, hi = min(values), max(values)
        # headroom above the tallest bar keeps the legend (top right) clear of every bar
        top = hi + max(0.35 * (hi - lo), 0.3)
        step = _nice_step((top - lo) / 7)
        y_min = math.floor(lo / step) * step
        y_max = math.ceil(top / step) * step
        ticks = [round(y_min + k * step, 10) for k in range(int(round((y_max - y_min) / step)) + 1)]
        with self.figure.hold_sync(), self.bars.hold_sync():
            self.y_scale.min = y_min
            self.y_scale.max = y_max
            self.y_axis.tick_values = ticks
            self.bars.y = [list(before), list(after)]

    def highlight(self, path: str) -> None:
        """Highlight the bars of the leaf at `path` (or of every leaf under a container path)."""
        idx = [i for i, owner in enumerate(self.owners) if path and (owner == path or owner.startswith(path))]
        self._picking = True
        try:
            self.bars.selected = idx or None
        finally:
            self._picking = False

    def on_pick(self, callback: Callable[[str], None]) -> None:
        self._on_pick = callback

    def _picked(self, change) -> None:
        if self._picking or self._on_pick is None:
            return
        sel = change["new"]
        if sel is None or len(sel) == 0:
            return
        i = int(list(sel)[-1])
        if 0 <= i < len(self.owners):
            self._on_pick(self.owners[i])


def _nice_step(raw: float) -> float:
    """1, 2 or 5 times a power of ten: ticks a reader can add up."""
    if not math.isfinite(raw) or raw <= 0:
        return 1.0
    power = 10 ** math.floor(math.log10(raw))
    for m in (1, 2, 5, 10):
        if raw <= m * power:
            return m * power
    return 10 * power

