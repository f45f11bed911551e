"""How the explorer's parts are arranged on the page: `layout="compact"` (the default) or "long".

compact: one projected screen (1440×900) for the lesson's model and an MLP with Adam, about one
and a half for a small transformer. The sliders sit under the buttons in a column of their own
(scrolling inside it when there are many), beside the bars and the loss line; the input data
and the bars' table (behind one line, with the note of what changed the bars) under the
sliders; below, the diagram and the worked calculation side by side (one above the other on a
narrow page). The diagram starts with its big containers folded (what fits in about
`DIAGRAM_LINES` lines stays open) and the optimizer's moment columns and state panel folded
behind one toggle; the worked calculation shows the selected leaf (else the first) and the
model-wide rows, with a leaf picker above it and every leaf's rows in a disclosure below it.

long: every part one under the other, nothing folded.

The text form (`ex.text()`) is the same in both: every tree, column and leaf.
"""

from __future__ import annotations

import math
from typing import Any

import ipywidgets

from ..trees import TreeSummary, path_label

__all__ = ["LAYOUTS", "DIAGRAM_LINES", "MAX_PICKER", "check_layout", "arrange", "fold_plan", "LeafPicker", "present"]

LAYOUTS = ("compact", "long")
CHART_HEIGHT = "260px"  # compact: the loss line's height
BARS_PLOT_PX = 170  # compact: the bars' plot height (their figure: + title, tick labels, axis title)
MAX_PICKER = 500  # leaves listed in the worked calculation's picker (and the one selected)
DIAGRAM_LINES = 18  # compact: the diagram's containers stay open while its rows fit in about this many lines


def check_layout(value: Any, kwargs: dict | None = None) -> str:
    """The layout's name from `StepExplorer(layout=...)`: "compact" (also for None) or "long". An
    ipywidgets Layout (or a dict) is the widget box's layout, as for any widget: it goes into
    `kwargs` and the explorer is compact. Anything else is refused, naming the layouts."""
    if value is None:
        return "compact"
    if not isinstance(value, str) and kwargs is not None and isinstance(value, (dict, ipywidgets.Layout)):
        kwargs["layout"] = value
        return "compact"
    if not isinstance(value, str):
        raise TypeError(
            f"StepExplorer(layout=...) takes {' or '.join(map(repr, LAYOUTS))}, "
            f"or an ipywidgets Layout (or dict) for the widget's box; got {type(value).__name__}"
        )
    if value not in LAYOUTS:
        raise ValueError(f"StepExplorer(layout={value!r}): the layouts are {' and '.join(map(repr, LAYOUTS))}")
    return value


def _lines(node: Any) -> int:
    """About how many lines a row of the diagram takes: a small matrix one per row of values
    (more when its rows wrap), a longer vector or summary two, anything else one."""
    leaf = node.leaf
    if leaf is None:
        return 1
    if leaf.grid is not None and len(leaf.shape) >= 2 and leaf.shape[-1]:
        rows = max(1, leaf.size // leaf.shape[-1])
        return rows * math.ceil(leaf.shape[-1] / 4)
    return 2 if leaf.size > 4 else 1


def fold_plan(summary: TreeSummary) -> list[str]:
    """The containers to fold so the diagram's first view fits in about `DIAGRAM_LINES` lines: the top
    level always shows; containers open breadth-first, in display order, while their rows fit."""
    top = list(summary.root.children) if summary.root.leaf is None else []
    used = sum(_lines(n) for n in top)
    queue = [n for n in top if n.children]
    opened: set[str] = set()
    while queue:
        node = queue.pop(0)
        cost = sum(_lines(c) for c in node.children)
        if used + cost <= DIAGRAM_LINES:
            used += cost
            opened.add(node.path)
            queue += [c for c in node.children if c.children]
    return [n.path for n in summary.root.walk() if n.children and n is not summary.root and n.path not in opened]


class LeafPicker:
    """The worked calculation's leaf: a drop-down of the differentiable leaves (a native select:
    one click, or Tab and the arrow keys), kept in step with the explorer's selection. A model
    of more than `MAX_PICKER` leaves lists the first ones and the leaf selected (any leaf is
    one click away in the diagram)."""

    def __init__(self, ex: Any):
        self.ex = ex
        leaves = [n.leaf for n in ex.session.param_summary.root.walk() if n.leaf is not None and n.leaf.differentiable]
        self.listed = [(path_label(lf.path), lf.path) for lf in leaves[:MAX_PICKER]]
        self._labels = {lf.path: path_label(lf.path) for lf in leaves}
        self.dropdown = ipywidgets.Dropdown(
            options=self.listed,
            description="worked calculation for",
            style={"description_width": "initial"},
            layout={"width": "auto", "max_width": "100%"},
        ).add_class("ptl-leaf-picker")
        self._following = False
        self.follow()
        self.dropdown.observe(self._picked, "value")
        ex.observe(lambda change: self.follow(), "selected_path")

    def follow(self) -> None:
        """Show the leaf the calculation shows (the selection, or the first leaf inside it)."""
        focus = self.ex.calculation.focus
        if not focus or focus == self.dropdown.value or focus not in self._labels:
            return
        self._following = True
        try:
            if focus not in {v for _, v in self.dropdown.options}:  # past the first MAX_PICKER
                self.dropdown.options = self.listed + [(self._labels[focus], focus)]
            self.dropdown.value = focus
        finally:
            self._following = False

    def _picked(self, change: dict) -> None:
        if not self._following and change["new"] and change["new"] != self.ex.selected_path:
            self.ex.selected_path = change["new"]


# presenter mode: the text's size over JupyterLab's 13 px (diagram.css sets 24 px under .ptl-presenter)
PRESENTER_SCALE = 24 / 13
LEFT_COLUMN = {False: "0 0 342px", True: "0 0 450px"}  # compact: the controls' and sliders' column


def present(ex: Any, on: bool) -> None:
    """Presenter mode on or off: the explorer's text and controls sized for the back of a room,
    the layout kept. The page's sizes are CSS (JupyterLab's size variables redefined under
    `.ptl-presenter`, diagram.css); what Python sizes follows: the charts' margins and room for
    their ticks, and the compact layout's left column (its sliders' text is wider)."""
    (ex.add_class if on else ex.remove_class)("ptl-presenter")
    scale = PRESENTER_SCALE if on else 1.0
    for view in ex.views.values():  # each view's part (the charts' margins and room for their ticks)
        view.present(scale)
    left = getattr(ex, "left_column", None)
    if left is not None:
        left.layout.flex = LEFT_COLUMN[bool(on)]


def _box(cls: type, children: list, name: str, **layout: str) -> ipywidgets.Box:
    return cls(children, layout=layout).add_class(name)


def arrange(ex: Any, form: str, slider_box: ipywidgets.Widget) -> list[ipywidgets.Widget]:
    """The explorer's children for the layout `form` (the parts are already built: status,
    controls, sliders and every view's widgets)."""
    row, below = ex.views.parts("row"), ex.views.parts("below")
    if form == "long":
        ex.diagram.foldable_open = True
        return [
            ex.status,
            ex.controls,
            _box(ipywidgets.HBox, [slider_box, *row], "ptl-ex-row", flex_flow="row wrap", align_items="center"),
            *below,
        ]
    ex.add_class("ptl-compact")
    calc, diagram = ex.calculation, ex.diagram
    calc.folded = True
    for part in (calc, ex.status, ex.data_view):  # stretched in their box: 100% and a widget's margin ran past it
        part.layout.width = "auto"
    diagram.foldable_open = False
    folding = fold_plan(ex.session.param_summary)
    if folding:
        diagram.collapsed = folding
    data = ex.data_view
    ex.views["DataView"].compact = True
    # the bars and the loss line: a third of a projected screen high (the bars' figure taller by
    # its upright tick labels), the bars the wider; on a narrow page (1024 px) the loss line goes
    # under them rather than squeeze the bars' labels. The bars' table (its one line, and the note
    # of what changed the bars above it) goes to the left column, under the input data: the
    # figure alone sets the row's height.
    bars_box, table = getattr(ex.chart_view, "box", None), None
    if bars_box is not None and bars_box in row:
        ex.chart_view.plot_px = BARS_PLOT_PX
        ex.chart.layout.width = "auto"  # stretched in its box: 100% and the figure's margin ran past it
        bars_box.layout.flex, bars_box.layout.min_width = "2 1 420px", "360px"
        table = ex.chart_view.table
        bars_box.children = [w for w in bars_box.children if w is not table]
        table.add_class("ptl-bars-left")
    if ex.history_chart in row:
        ex.history_chart.layout.height = CHART_HEIGHT
        ex.history_chart.layout.flex, ex.history_chart.layout.min_width = "1 1 240px", "220px"
    slider_box.add_class("ptl-ex-sliders")
    # its height (eight whole sliders, more scroll inside it) is in slider.css, as the sliders' own
    for key, value in {"overflow": "auto", "min_width": "0", "flex": "0 1 auto"}.items():
        setattr(slider_box.layout, key, value)  # the box's own Layout (a new one would be a widget left open)
    # the parts this layout places itself; any other view part keeps its slot
    placed = {id(w) for w in (table, data, diagram, calc)}
    left = _box(
        ipywidgets.VBox,
        [ex.controls, slider_box, *[w for w in (data, table) if w is not None]],
        "ptl-ex-left",
        flex=LEFT_COLUMN[False],
        min_width="0",
        overflow="visible",
    )
    ex.left_column = left  # (presenter mode widens it)
    top = _box(ipywidgets.HBox, [left, *row], "ptl-ex-top", flex_flow="row wrap", align_items="flex-start")
    others = [w for w in below if id(w) not in placed]
    ex.leaf_picker = LeafPicker(ex)
    # side by side from about 1160 px on, the diagram the wider (three columns of values, two values
    # of a matrix's row a line at 1440 px), the calculation wide enough for a row of 8 values
    side = _box(
        ipywidgets.VBox,
        [ex.leaf_picker.dropdown, calc],
        "ptl-ex-calc",
        flex="1 1 540px",
        min_width="0",
        overflow="visible",
    )
    diagram.layout.min_width = "0"
    # the moments shown: the diagram takes the whole width (five columns), the calculation goes below
    widths = {False: "1 1 620px", True: "1 1 100%"}
    diagram.layout.flex = widths[bool(diagram.foldable_open)]
    diagram.observe(lambda change: setattr(diagram.layout, "flex", widths[bool(change["new"])]), "foldable_open")
    main = _box(
        ipywidgets.HBox,
        [diagram, side],
        "ptl-ex-main",
        flex_flow="row wrap",
        align_items="flex-start",
        overflow="visible",
    )
    return [ex.status, top, *others, main]
