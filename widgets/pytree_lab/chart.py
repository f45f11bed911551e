"""Before/after bars of every parameter element (bqplot), as in the lesson's figure."""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence
from typing import Any

import anywidget
import bqplot
import ipywidgets
import traitlets

from .formatting import fmt_number, isolate_rtl, short_labels, visible
from .page import PageIntents, static_asset, synced
from .ranges import nice
from .tree_model import under

__all__ = [
    "BeforeAfterChart",
    "BarTable",
    "LossHistoryChart",
    "LossLinesChart",
    "LINE_COLORS",
    "thin_line",
    "MAX_DRAWN",
]

_figure_ids = itertools.count(1)


class BarTable(PageIntents, anywidget.AnyWidget):
    """The bar chart as text and by keyboard: a table of every bar's element, before and after
    value (the chart's text alternative, in a disclosure under it), each element a button
    that selects its leaf, as a click on its bar does. It also names the chart for screen
    readers (a named figure described by the table, its drawing an image of the same name).
    A `note` (what changed the bars shown) is a line above the table, always visible."""

    _esm = static_asset("chart.js")
    _css = static_asset("chart.css")
    _page_intents = frozenset({"selected_path"})
    rows: traitlets.List[list[str]] = synced(
        traitlets.List(),
        "list[list[str]], default []: a row per bar pair: label, owner path, before and after as text.",
    )
    title = synced(traitlets.Unicode(""), "str, default '': the table's accessible name.")
    figure_class = synced(traitlets.Unicode(""), "str, default '': the DOM class of the figure the table describes.")
    note = synced(traitlets.Unicode(""), "str, default '': a line shown above the table (why these bars).")
    selected_path = synced(
        traitlets.Unicode(""), "str, default '': the leaf selected in the table.", by="page (an intent)"
    )


BEFORE = "#1f77b4"
AFTER = "#ff7f0e"


def _value_axis(scale: bqplot.Scale, label: str) -> bqplot.Axis:
    """The vertical axis of every chart here: numbers to three figures, dashed grid lines."""
    return bqplot.Axis(
        scale=scale, side="left", label=label, tick_format=".3~g", label_offset="45px", grid_lines="dashed"
    )


class BeforeAfterChart:
    """A grouped bar chart: one pair of bars (before, after) per parameter element.

    `labels` name the elements in full (`Dense_0/kernel[0,1]`, `bias`): the table under the
    chart shows them; `owners` give the leaf path each element belongs to, so selecting a leaf
    highlights its bars and clicking a bar reports the leaf (`on_pick`). `paths` (optional) are
    the elements' full paths: the bars' x values, so a bar's tooltip names it in full. `ticks`
    (optional) are the labels under the bars (by default the labels), made unique and cut in the
    middle where too long (`formatting.short_labels`: `layers[0]/…/kernel[0,1]`), their full form in
    the table and the tooltip. Many or long ticks stand upright, with room below for them and
    the axis title. `set_elements` changes the bars shown; `note` is a line under the chart
    saying why (e.g. the selection brought its leaf in).
    """

    def __init__(
        self,
        labels: Sequence[str],
        owners: Sequence[str],
        title: str = "",
        paths: Sequence[str] | None = None,
        ticks: Sequence[str] | None = None,
    ):
        self.x_scale = bqplot.OrdinalScale()
        # Explicit min/max: a grouped Bars mark on a scale without them draws zero-height bars.
        self.y_scale = bqplot.LinearScale(min=-1.0, max=1.0)
        self.bars = bqplot.Bars(
            x=[],
            y=[[], []],
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
        self.x_axis = bqplot.Axis(scale=self.x_scale, label="parameter element")
        self.y_axis = _value_axis(self.y_scale, "parameter value")
        figure_class = f"ptl-bars-figure-{next(_figure_ids)}"  # how the table finds its chart in the page
        self.figure = bqplot.Figure(
            marks=[self.bars],
            axes=[self.x_axis, self.y_axis],
            title=title,
            legend_location="top-right",
            _dom_classes=[figure_class],
            animation_duration=0,
        )
        # fixed_range: keep the y scale across steps (it only widens when a bar would leave it)
        self.fixed_range = False
        self._picking = False
        self._on_pick: Callable[[str], None] | None = None
        self.bars.observe(self._picked, "selected")
        self._highlighted = ""
        self.table = BarTable(
            title=f"{title or 'Bar chart'}: before and after value of each parameter element", figure_class=figure_class
        )
        self.table.observe(self._table_picked, "selected_path")
        # the figure with its note and table under it: one box, placed as one part
        self.figure.layout.width = "100%"
        self.box = ipywidgets.VBox([self.figure, self.table], layout={"flex": "1 1 440px", "min_width": "320px"})
        self.box.add_class("ptl-bars-box")
        self._plot_px = PLOT_PX
        self._scale = 1.0
        self.tick_labels: dict = {}
        self.set_elements(labels, owners, paths, ticks)

    @property
    def note(self) -> str:
        """The line under the chart (what changed the bars shown), '' for none."""
        return self.table.note

    @note.setter
    def note(self, text: str) -> None:
        self.table.note = text

    def set_elements(
        self,
        labels: Sequence[str],
        owners: Sequence[str],
        paths: Sequence[str] | None = None,
        ticks: Sequence[str] | None = None,
    ) -> None:
        """Show other elements (their values NaN until the next `show`): a rare change, not a step."""
        self.labels = list(labels)
        self.owners = list(owners)
        self.paths = list(paths) if paths is not None else list(self.labels)
        if len(set(self.paths)) != len(self.paths):  # x values must be distinct
            self.paths = [f"{p} #{i}" for i, p in enumerate(self.paths)]
        # an SVG tick has no <bdi>: right-to-left keys are isolated with U+2068/U+2069 instead
        ticks = list(ticks) if ticks is not None else self.labels
        shown = [isolate_rtl(visible(t)) for t in short_labels(ticks, TICK_CHARS)]
        self.tick_labels = dict(zip(self.paths, shown))
        self._before = [math.nan] * len(self.labels)
        self._after = [math.nan] * len(self.labels)
        self._picking = True
        try:
            with self.figure.hold_sync(), self.bars.hold_sync(), self.x_axis.hold_sync():
                self.bars.selected = None
                self.bars.x = self.paths
                self.bars.y = [[0.0] * len(self.labels), [0.0] * len(self.labels)]
                self.x_axis.tick_labels = self.tick_labels
                self._fit_axis()
        finally:
            self._picking = False
        self.table.rows = self._rows()
        if self._highlighted:
            self.highlight(self._highlighted)

    @property
    def plot_px(self) -> int:
        """The plot's height in px between the title and the x axis (the figure grows by the
        room its tick labels and titles take)."""
        return self._plot_px

    @plot_px.setter
    def plot_px(self, value: int) -> None:
        self._plot_px = int(value)
        self._fit_axis()

    @property
    def scale(self) -> float:
        """1, or presenter mode's `PRESENTER_SCALE`: its text is drawn larger (chart.css), its
        margins and the room for its ticks grow with it."""
        return self._scale

    @scale.setter
    def scale(self, value: float) -> None:
        self._scale = float(value)
        # bqplot spaces its legend's rows 16 px apart whatever their size: larger, the legend's
        # two lines would overlap, so the x axis's title says it instead
        self.bars.display_legend = self._scale == 1
        self.x_axis.label = "parameter element" if self._scale == 1 else "blue: before, orange: after"
        self._fit_axis()

    def _fit_axis(self) -> None:
        """Upright ticks when there are many or long ones (in presenter mode, also when side by
        side they would take more than a narrow plot's width), with room below the axis for the
        longest (its width estimated, `tick_width`), then the axis title under them."""
        shown = list(self.tick_labels.values())
        s, font = self._scale, max(TICK_FONT_PX, PRESENTER_TEXT_PX if self._scale > 1 else 0)
        upright = len(shown) > 8 or max((len(t) for t in shown), default=0) > 10
        upright = upright or (s > 1 and sum(tick_width(t, font) + font for t in shown) > 360)
        below = TICK_GAP + math.ceil(max((tick_width(t, font) for t in shown), default=1.0)) if upright else 0
        title_at = round(below + TITLE_GAP if upright else 35 * s)
        top, left = round(40 * s), round(70 * s)
        with self.figure.hold_sync(), self.x_axis.hold_sync():
            self.x_axis.tick_rotate = -90 if upright else 0
            self.x_axis.tick_style = (
                {"text-anchor": "end", "dominant-baseline": "central", "font-size": f"{font}px"} if upright else {}
            )
            self.x_axis.label_offset = f"{title_at}px"
            self.y_axis.label_offset = f"{round(45 * s)}px"
            self.figure.fig_margin = {"top": top, "bottom": title_at + 12, "left": left, "right": 20}
            self.y_axis.num_ticks = 5 if s > 1 else None  # larger ticks: fewer, on a taller plot
            self.figure.layout.height = f"{round(self._plot_px * min(s, 1.5)) + top + title_at + 12}px"

    def _rows(self) -> list[list[str]]:
        return [
            [isolate_rtl(visible(label)), owner, fmt_number(b), fmt_number(a)]
            for label, owner, b, a in zip(self.labels, self.owners, self._before, self._after)
        ]

    def _table_picked(self, change) -> None:
        if not self._picking and self._on_pick is not None:
            if change["new"] in self.owners:  # an element's leaf; anything else the page sends selects nothing
                self._on_pick(change["new"])
            else:
                self.highlight(self._highlighted)  # the page shows the selection as it is again

    def show(self, before: Sequence[float], after: Sequence[float]) -> None:
        """New bar heights; the y scale always covers 0 and every value."""
        self._before, self._after = [float(v) for v in before], [float(v) for v in after]
        self.table.rows = self._rows()
        values = [v for v in list(before) + list(after) if math.isfinite(v)] + [0.0]
        lo, hi = min(values), max(values)
        if self.fixed_range and self.y_scale.min <= lo and hi <= self.y_scale.max:
            # a fixed range keeps its scale while every bar fits, so motion across steps shows
            self.bars.y = [list(before), list(after)]
            return
        if self.fixed_range:  # it only grows, to keep every bar on screen
            lo, hi = min(lo, self.y_scale.min), max(hi, self.y_scale.max)
        # headroom above the tallest bar keeps the legend (top right) clear of every bar
        top = hi + max(0.35 * (hi - lo), 0.3)
        step = nice((top - lo) / 7)
        y_min = math.floor(lo / step) * step
        y_max = math.ceil(top / step) * step
        n_steps = int(round((y_max - y_min) / step))  # noqa: RUF046 - the values may be numpy floats
        ticks = [round(y_min + k * step, 10) for k in range(n_steps + 1)]
        with self.figure.hold_sync(), self.bars.hold_sync():
            self.y_scale.min = y_min
            self.y_scale.max = y_max
            self.y_axis.tick_values = ticks
            self.bars.y = [list(before), list(after)]

    def highlight(self, path: str) -> None:
        """Highlight the bars of the leaf at `path` (or of every leaf under a container path)."""
        idx = [i for i, owner in enumerate(self.owners) if path and under(owner, path)]
        self._highlighted = path
        self._picking = True
        try:
            self.bars.selected = idx or None
            self.table.selected_path = path or ""
        finally:
            self._picking = False

    def on_pick(self, callback: Callable[[str], None]) -> None:
        self._on_pick = callback

    def _picked(self, change) -> None:
        sel = change["new"]
        if not self._picking and self._on_pick is not None and sel is not None and len(sel):
            if 0 <= (i := int(list(sel)[-1])) < len(self.owners):
                self._on_pick(self.owners[i])


# Upright tick labels: their font and the longest shown whole; a longer one is cut in the middle
# (its full form is in the table and the tooltip). A tick's length is estimated from the advance
# widths of printable ASCII (in thousandths of an em) in DejaVu Sans or Liberation Sans, whichever
# is wider (measured in Chromium's canvas; Liberation Sans has Arial's and Helvetica's metrics,
# DejaVu Sans is the widest common sans-serif): never shorter than either draws it. Any other
# character counts a whole em.
TICK_FONT_PX = 11
PRESENTER_TEXT_PX = 20  # presenter mode: the charts' smallest text (chart.css), ticks included
# fmt: off
_ASCII_WIDTH = (  # code points 32-126, 16 a row
    318, 401, 460, 838, 636, 950, 780, 275, 390, 390, 500, 838, 318, 361, 318, 337,
    636, 636, 636, 636, 636, 636, 636, 636, 636, 636, 337, 337, 838, 838, 838, 556,
    1015, 684, 686, 722, 770, 667, 611, 778, 752, 295, 500, 667, 557, 863, 748, 787,
    667, 787, 722, 667, 611, 732, 684, 989, 685, 667, 685, 390, 337, 390, 838, 556,
    500, 613, 635, 550, 635, 615, 352, 635, 634, 278, 278, 579, 278, 974, 634, 612,
    635, 635, 411, 521, 392, 634, 592, 818, 592, 592, 525, 636, 337, 636, 838,
)
# fmt: on
TICK_GAP = 4  # px from the axis line to where an upright tick's text starts (measured: at the line)
TITLE_GAP = 20  # px from the end of the longest tick to the axis title's baseline
TICK_CHARS = 26
PLOT_PX = 230  # px of plot height between the margins


def tick_width(text: str, font_px: float = TICK_FONT_PX) -> float:
    """About how long `text` is drawn as a tick label, in px: never less than DejaVu Sans or
    Liberation Sans draw it (see `_ASCII_WIDTH`)."""
    return sum(_ASCII_WIDTH[ord(c) - 32] if 32 <= ord(c) < 127 else 1000 for c in text) * font_px / 1000


class _LossChart:
    """What the loss charts share: a step axis (whole steps only), a linear loss axis, and the
    figure holding them with the marks `_marks` makes on those scales."""

    history: Any  # what `show` drew last

    def __init__(self, title: str, layout: dict, *, log: bool = False):
        self.log = log  # the loss on a log scale when every value is positive (set_log)
        self.on_new_widget: Callable | None = None  # told of a widget made later (the log scale)
        self.y_log: bqplot.LogScale | None = None  # made when first needed
        self.x_scale = bqplot.LinearScale(min=0.0, max=1.0)
        self.y_linear = bqplot.LinearScale(min=0.0, max=1.0)
        self.x_axis = bqplot.Axis(scale=self.x_scale, label="step", tick_format="d", tick_values=[0.0, 1.0])
        self.y_axis = _value_axis(self.y_linear, "loss")
        self.figure = bqplot.Figure(
            marks=self._marks({"x": self.x_scale, "y": self.y_linear}),
            axes=[self.x_axis, self.y_axis],
            title=title,
            fig_margin={"top": 40, "bottom": 50, "left": 70, "right": 20},
            layout=layout,
            animation_duration=0,
        )

    def _marks(self, scales: dict) -> list:
        raise NotImplementedError

    def show(self, history: Any) -> None:
        raise NotImplementedError

    def set_log(self, log: bool) -> None:
        self.log = bool(log)
        self.show(self.history)

    def _axes(self, ys: Sequence[Any], marks: Sequence[Any]) -> tuple[Any, bool]:
        """The axes for the losses `ys` (numpy arrays, one per line), set on `marks`: steps from 0,
        at most about eight whole-number ticks; the finite losses on a log scale (whole decades)
        when asked and every one is positive, else linear with 0. Returns (the loss scale, whether log)."""
        import numpy as np

        last = max(max((y.size for y in ys), default=0) - 1, 1)
        self.x_scale.min, self.x_scale.max = 0.0, float(last)
        self.x_axis.tick_values = [float(k) for k in range(0, last + 1, int(nice(last / 8)) or 1)]
        finite = np.concatenate([y[np.isfinite(y)] for y in ys] + [np.zeros(0)])
        lo, hi = (float(finite.min()), float(finite.max())) if finite.size else (0.0, 0.0)
        use_log = self.log and lo > 0
        if use_log and self.y_log is None:
            self.y_log = bqplot.LogScale(min=1e-3, max=1.0)
            if self.on_new_widget is not None:
                self.on_new_widget(self.y_log)
        scale = self.y_log if use_log and self.y_log is not None else self.y_linear
        if use_log:
            y_min, y_max = 10 ** math.floor(math.log10(lo)), 10 ** math.ceil(math.log10(hi))
            y_max = y_max if y_max > y_min else y_min * 10
        else:
            # 0 and every value, with a margin on the side that is not 0
            lo, hi = min(lo, 0.0), max(hi, 0.0)
            pad = 0.08 * (hi - lo) or 1.0
            y_min, y_max = (lo if lo == 0 else lo - pad), hi + pad
        scale.min, scale.max = float(y_min), float(y_max)
        if self.y_axis.scale is not scale:
            self.y_axis.scale = scale
            for mark in marks:
                mark.scales = {"x": self.x_scale, "y": scale}
        return scale, use_log

    def close(self) -> None:
        """Close every widget of the chart, a scale not on screen included."""
        marks = self.figure.marks
        scales = (self.x_scale, self.y_linear, getattr(self, "y_log", None))
        for w in (self.figure, *marks, *[m.tooltip for m in marks], self.x_axis, self.y_axis, *scales):
            if w is not None:
                w.close()


class LossHistoryChart(_LossChart):
    """The loss at every point visited, one point per step (bqplot line + the current point).

    `show(history)` draws `history[0]` (the start) through `history[-1]` (where the explorer
    stands now); an empty history (no step has worked yet) draws no point at all. The step
    axis has whole-number ticks only. `log=True` puts the loss on a log scale when every value is positive (Adam's
    loss falls by orders of magnitude); with a zero or negative loss the scale stays linear.
    """

    def __init__(self, title: str = "Loss at each step", *, log: bool = False):
        self.history: Sequence[float] = []
        self._few_ticks = False  # presenter mode (set_scale): about five round loss ticks
        super().__init__(
            title, {"flex": "1 1 320px", "min_width": "260px", "max_width": "560px", "height": "300px"}, log=log
        )

    def _marks(self, scales: dict) -> list:
        # no point until a step worked: a point at loss 0 would be a step that did not happen
        self.line = bqplot.Lines(x=[], y=[], scales=scales, colors=[BEFORE], stroke_width=2, labels=["loss"])
        self.point = bqplot.Scatter(
            x=[],
            y=[],
            scales=scales,
            colors=[AFTER],
            default_size=48,
            tooltip=bqplot.Tooltip(fields=["x", "y"], labels=["step", "loss"], formats=["", ".4g"]),
        )
        return [self.line, self.point]

    def set_scale(self, scale: float) -> None:
        """1, or presenter mode's: its text is drawn larger (chart.css), its margins and its height
        grow with it, with fewer ticks on the loss axis."""
        self._height = getattr(self, "_height", None) or self.figure.layout.height or "300px"
        self._few_ticks = scale > 1
        with self.figure.hold_sync():
            self.figure.layout.height = f"{round(float(self._height[:-2]) * min(scale, 1.5))}px"
            top, bottom, left = round(40 * scale), round(50 * scale), round(70 * scale)
            self.figure.fig_margin = {"top": top, "bottom": bottom, "left": left, "right": 20}
            self.y_axis.label_offset = f"{round(45 * scale)}px"
            self.x_axis.label_offset = f"{round(35 * scale)}px" if scale != 1 else None
        self.show(self.history)

    @property
    def on_log_scale(self) -> bool:
        return self.y_log is not None and self.y_axis.scale is self.y_log

    def show(self, history: Sequence[float]) -> None:
        """Draw `history` (once per step or run, and when a slider moves the current point): past
        `MAX_DRAWN` points thinned (`thin_line`: every spike and dip kept, the first and the last
        point exact), the step axis sent only when it changed (a slider move changes the last loss)."""
        import numpy as np

        ys_all = np.asarray(history, dtype=np.float64).reshape(-1)
        self.history = history
        xs, ys = thin_line(ys_all, MAX_DRAWN)  # nothing happened yet: no point, the scales as built
        with self.figure.hold_sync(), self.line.hold_sync(), self.point.hold_sync():
            scale, use_log = self._axes([ys_all], [self.line, self.point])
            if self._few_ticks and not use_log:
                gap = nice((scale.max - scale.min) / 5)
                self.y_axis.tick_values = [
                    k * gap for k in range(math.ceil(scale.min / gap), math.floor(scale.max / gap) + 1)
                ]
            elif self.y_axis.tick_values is not None:
                self.y_axis.tick_values = None
            old_x = self.line.x
            if old_x is None or np.shape(old_x) != xs.shape or not np.array_equal(old_x, xs):
                self.line.x = xs
            self.line.y = ys
            self.point.x, self.point.y = xs[-1:], ys[-1:]


# One colour per run compared (tab10's first six): mid-tone hues, each readable on JupyterLab's
# light and dark backgrounds, and told apart by people with red-green colour blindness by their
# lightness as well (blue, orange, green, red, purple, brown).
LINE_COLORS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b")


class LossLinesChart(_LossChart):
    """Several loss lines on one step axis (an optimizer comparison): one line per run (a bqplot
    Lines mark each, in `LINE_COLORS`; no legend drawn over the lines: its owner names them beside
    the chart, each in its line's colour) for the runs `names`. `show(histories)` draws
    each run's losses from step 0 (runs of other lengths end where they end), each point marked
    while there are few (`MARKED` at most: a single point is a dot); past `MAX_DRAWN` steps each
    line is thinned as the explorer's loss line is (`thin_line`: every spike and dip kept)."""

    MARKED = 30

    def __init__(self, names: Sequence[str], title: str = "Loss at each step"):
        self.names = list(names)
        self.history: Sequence[Sequence[float]] = []
        layout = {"flex": "1 1 360px", "min_width": "280px", "max_width": "640px", "height": "320px"}
        super().__init__(title, layout)

    def _marks(self, scales: dict) -> list:
        style = {"stroke_width": 2, "marker": "circle", "marker_size": 24}
        self.lines = [
            bqplot.Lines(x=[], y=[], scales=scales, colors=[color], labels=[name], **style)
            for name, color in zip(self.names, LINE_COLORS)
        ]
        return list(self.lines)

    def show(self, histories: Sequence[Sequence[float]]) -> None:
        import numpy as np

        self.history = histories
        ys = [np.asarray(h, dtype=np.float64).reshape(-1) for h in histories]
        n = max((y.size for y in ys), default=0)
        with self.figure.hold_sync():
            self._axes(ys, self.lines)
            for line, y in zip(self.lines, ys):
                with line.hold_sync():
                    line.x, line.y = thin_line(y, MAX_DRAWN)
                    line.marker = "circle" if n <= self.MARKED else None


# The most points the loss line sends to the page: a chart is a few hundred pixels wide.
MAX_DRAWN = 2_000


def thin_line(values, max_points: int = MAX_DRAWN):
    """(x, y) of the line to draw for `values` (one per step), at most about `max_points` points.

    Up to `max_points` values: every point. Beyond: the steps after the first and before the
    last are cut into `max_points // 2 - 1` buckets of equal width, and each bucket gives its
    lowest and its highest value, in step order (the line passes through both, so no spike is
    lost); the first and the last point are kept exactly as they are.
    """
    import numpy as np

    ys = np.asarray(values, dtype=np.float64).reshape(-1)
    n = int(ys.size)
    if n <= max_points:
        return np.arange(n, dtype=np.float64), ys.copy()
    inner = ys[1:-1]
    buckets = max(1, max_points // 2 - 1)
    width = -(-inner.size // buckets)  # ceil
    pad = width * buckets - inner.size
    # the last bucket is padded with NaN, which neither its lowest nor its highest value can be
    grid = np.concatenate([inner, np.full(pad, np.nan)]).reshape(buckets, width)
    filled = ~np.all(np.isnan(grid), axis=1)
    grid, rows = grid[filled], np.nonzero(filled)[0]
    i_lo, i_hi = np.nanargmin(grid, axis=1), np.nanargmax(grid, axis=1)
    first, second = np.minimum(i_lo, i_hi), np.maximum(i_lo, i_hi)
    base = rows * width + 1  # the step number of each bucket's first value
    xs = np.stack([base + first, base + second], axis=1).reshape(-1)
    keep = np.ones(xs.size, bool)
    keep[1::2] = first != second  # a bucket whose lowest is its highest: one point
    xs = xs[keep]
    out_x = np.concatenate([[0], xs, [n - 1]]).astype(np.float64)
    return out_x, ys[out_x.astype(np.int64)]
