"""The explorer's views behind one interface, and their registry.

A `View` is drawn from a computed step and computes no numbers: `show(result)` draws a step,
`select(path)` follows the selection, `text()` is its part of the explorer's text form. `fast`
views follow every slider move at once; the others follow when the schedule says (schedule.py).
`parts()` says where its widgets go in the explorer (`slot`: the row beside the sliders, or below),
and `public` which attributes the explorer exposes for it. It reads its session through `Session`.
`where` says what draws it, through `ViewSet`: the live explorer (presenter mode: `present`), the
replay page (its `replay()` at each point) and OptimizerComparison (once for each optimizer).

A new view is one class and one entry in `VIEWS` (the order of the text form), from any module.
"""

from __future__ import annotations

import contextlib
import functools
import html
import json
from collections.abc import Callable
from typing import Any, Protocol

import ipywidgets

from ..calculation import WorkedCalculation
from ..chart import BeforeAfterChart, LossHistoryChart
from ..diagram import PytreeDiagram
from ..engine import Engine
from ..step import StepResult
from ..trees import TreeSummary, path_label
from .lifetime import descendants
from .messages import fmt_number
from .optimizer import columns, foldable, optimizer_rows
from .sliders import bar_values, chosen_bars, default_bars, describe, small_input, walk_leaves, with_selection

__all__ = ["View", "ViewSet", "VIEWS", "Session"]


class Session(Protocol):
    """What a view may read of the session it draws (an `ExplorerSession`); a view changes none of it."""

    engine: Engine
    optimizer: Any  # None: p − η·g
    rate_source: str  # where the learning rate lives: "argument", "state" or "fixed"
    device_name: str
    params_tree: Any
    param_summary: TreeSummary  # the trees as written (their order), without values
    input_summary: TreeSummary
    input_data: TreeSummary  # the inputs with their values
    static: dict
    specs: list  # the sliders' SliderSpecs (none in an OptimizerComparison)
    moving: dict[int, list[int]] | None  # leaf -> positions whose gradient moved at the start
    history: Any  # the loss at every point visited (a sequence of floats)
    last_good: StepResult | None
    extra: Any  # show_extra's trees


class View:
    """One view of the explorer's step (see the module doc)."""

    fast = False  # drawn with every slider move, before the slow views
    options: tuple[str, ...] = ()  # the explorer's keywords this view takes (ViewSet passes them)
    after_record = False  # drawn once the step is recorded in the history (the loss line)
    slot: tuple[str, int] | None = None  # where `widget` goes: "row" (beside the sliders) or "below", position
    where: tuple[str, ...] = ("explorer", "replay", "comparison")  # what draws it (the module doc)

    def __init__(self, session: Session):
        self.session = session
        self.selected = ""
        self.public: dict[str, Any] = {}
        self.widget: Any = None

    def parts(self) -> list[tuple[str, int, ipywidgets.Widget]]:
        return [(*self.slot, self.widget)] if self.slot else []

    def show(self, result: Any) -> None:
        """Draw the step `result`."""

    def select(self, path: str) -> None:
        self.selected = path

    def text(self) -> str:
        return ""

    def replay(self) -> Any:
        """What the replay page keeps of the step shown (JSON): by default its text, shown as text."""
        return self.text()

    def present(self, scale: float) -> None:
        """Presenter mode: text `scale` times the usual size (1: off); the page's CSS sizes the rest."""

    def close(self) -> None:
        """Let go of what the view holds beyond its widgets (which the explorer closes)."""


class ChartView(View):
    """The before/after bars of at most `MAX_BARS` parameter elements (the bar plan, sliders.py):
    those `bars=` names, by default those with sliders; a selection not shown comes in."""

    fast = True
    options = ("bars",)
    slot = ("row", 0)  # the bars, their note and their table (text alternative and keyboard path) as one box
    where = ("explorer", "replay")  # (the comparison shows each optimizer's update in its diagram)

    def __init__(self, session: Session, bars: Any = None):
        super().__init__(session)
        self.elements: list = []
        self._result: Any = None
        self.chart = BeforeAfterChart([], [], title="A gradient tree matches parameter leaves")
        # the chosen bars: `bars=` now (a name that is not there is a ValueError that says so); by
        # default those with sliders, known once the sliders are planned (`_ready`)
        self.base: list | None = None
        if bars is not None:
            self.base, note = chosen_bars(bars, session.param_summary, session.input_summary)
            self._draw(self.base, note)
        # chart_view: the chart's Python object (bars, table, fixed_range); chart: its bqplot Figure
        self.public, self.widget = {"chart_view": self.chart, "chart": self.chart.figure}, self.chart.box

    def _ready(self) -> list:
        if self.base is None:
            slid = [sp.element for sp in self.session.specs if sp.element is not None]
            self.base = default_bars(slid, self.session.param_summary, self.session.moving)
            self._draw(self.base, "")
        return self.base

    def _draw(self, shown: list, note: str) -> None:
        self.elements = list(shown)
        # the ticks are the labels, cut in the middle where long (the chart's short_labels)
        self.chart.set_elements([e.label for e in shown], [e.leaf.path for e in shown], [e.path for e in shown])
        self.chart.note = note
        if self._result is not None:
            self.show(self._result)

    def show(self, result: Any) -> None:
        self._ready()
        self._result, self.values = result, bar_values(self.session.engine, result, self.elements)  # before, after
        self.chart.show(*self.values)
        self.chart.highlight(self.selected)

    def select(self, path: str) -> None:
        super().select(path)
        shown, note = with_selection(path, self.elements, self._ready(), self.session.param_summary)
        if shown is not None:  # its elements were not all shown: they come in (a rare change)
            self._draw(shown, note)
        self.chart.highlight(path)

    def text(self) -> str:
        self._ready()
        if not self.elements:
            return ""
        note = f" {self.chart.note}" if self.chart.note else ""
        return f"Bars (before and after the step): {describe(self.elements)}.{note}"

    def replay(self) -> Any:
        return self.values

    def present(self, scale: float) -> None:
        self.chart.scale = scale


class LossLineView(View):
    """The loss at every point visited (`history`)."""

    after_record = True
    slot = ("row", 1)
    where = ("explorer",)  # the replay page and the comparison draw their loss lines from the record

    def __init__(self, session: Session):
        super().__init__(session)
        self.line = LossHistoryChart()
        self.widget = self.line.figure
        # history_view: the line's Python object; history_chart: its bqplot Figure
        self.public = {"history_view": self.line, "history_chart": self.line.figure}

    def show(self, result: Any) -> None:
        self.line.show(self.session.history)

    def text(self) -> str:
        history = self.session.history
        if not history:
            return ""
        more = f" ({len(history)} points)" if len(history) > 12 else ""
        return "Loss at each point visited: " + " → ".join(fmt_number(v) for v in history[-12:]) + more

    def present(self, scale: float) -> None:
        self.line.set_scale(scale)

    def close(self) -> None:
        self.line.close()  # its log scale is not reachable while the linear one is shown


class DataView(View):
    """Inputs without sliders, as data: shape, dtype and values or a summary (not per step)."""

    slot = ("below", 1)
    where = ("explorer", "replay")

    def __init__(self, session: Session):
        super().__init__(session)
        self.widget = self.html = ipywidgets.HTML(layout={"width": "100%"}).add_class("pytree-lab-data")
        self.rows: list[tuple[str, str, str, str]] = []
        self.compact = False  # one line that opens (set by the explorer's compact layout)
        self.public = {"data_view": self.html}

    def show(self, result: Any = None) -> None:
        """Draw the session's input data: the inputs of the step shown (None: before a first step)."""
        s = self.session
        slid = {sp.element.flat_index for sp in s.specs if sp.element is not None and sp.element.tree == "inputs"}
        rows = []
        for leaf in walk_leaves(s.input_data):
            if leaf.index in slid:
                continue
            kind = "int labels" if leaf.dtype.startswith(("int", "uint")) else "mask" if leaf.dtype == "bool" else ""
            why = kind or ("data" if small_input(leaf) else "batch")
            rows.append((f"inputs{leaf.path}", leaf.type_label, why, leaf.summary))
        for key, value in s.static.items():
            rows.append((f"inputs[{key!r}]", type(value).__name__, "static", repr(value)[:60]))
        self.rows = rows
        if not rows:
            self.html.value = ""
            return
        esc = html.escape
        items = "".join(
            f'<li title="{esc(path, quote=True)}"><code>{esc(path)}</code> {esc(ty)} ({esc(why)}): {esc(summary)}</li>'
            for path, ty, why, summary in rows
        )
        if self.compact:  # one line that opens (the explorer's compact layout)
            names = ", ".join(f"{esc(path_label(path[len('inputs') :], path))} {esc(ty)}" for path, ty, _, _ in rows)
            self.html.value = (
                f'<details class="ptl-data ptl-data-folded" aria-label="inputs shown as data"><summary>'
                f"<b>Data</b> (fixed): {names}</summary><ul>{items}</ul></details>"
            )
            return
        self.html.value = (
            f'<div class="ptl-data" aria-label="inputs shown as data"><b>Data</b> '
            f"(fixed; change with set_inputs): <ul>{items}</ul></div>"
        )

    def text(self) -> str:
        if not self.rows:
            return ""
        return "Data (fixed):\n" + "\n".join(
            f"  {path}: {ty} ({why}) {summary}" for path, ty, why, summary in self.rows
        )


class DiagramView(View):
    """The aligned trees (params | grads | the optimizer's moments | updated) and side panels."""

    slot = ("below", 2)
    where = ("explorer", "replay")  # (the comparison aligns every optimizer's columns in one diagram)

    def __init__(self, session: Session):
        super().__init__(session)
        self.widget = self.diagram = PytreeDiagram()
        self.diagram.set_trees({"params": session.params_tree}, order=session.param_summary)
        self._caption()
        # the words on the moment columns and the state panel while they show (compact folds them)
        self.diagram.observe(lambda change: self._caption(), ["foldable", "foldable_open"])
        self.public = {"diagram": self.diagram}

    def _caption(self) -> None:
        shown = bool(self.diagram.foldable_open or not self.diagram.foldable)
        on = f" on {self.session.device_name}" if self.session.device_name else ""
        self.diagram.caption = f"computed in the kernel by {self.session.engine.name}{on}: " + (
            "value_and_grad, then tree.map(p − η·g)"
            if self.session.optimizer is None
            else "value_and_grad, then opt.update(grads, state, params) and optax.apply_updates"
            + ("; moment columns and the optimizer state panel are the state after this step" if shown else "")
        )

    def show(self, result: Any, keep_panels: bool = True) -> None:
        trees, extra = columns(self.session, result)
        self.diagram.foldable = foldable(trees, extra)  # the optimizer's moments and state: one toggle
        panels = {} if keep_panels and extra is None else {"extra": extra}
        self.diagram.set_trees(trees, order=self.session.param_summary, **panels)

    def show_extra(self) -> None:
        """The session's extra panels, now (they replace the panels shown)."""
        s = self.session
        if s.last_good is None:
            self.diagram.set_trees({"params": s.params_tree}, extra=s.extra, order=s.param_summary)
        else:
            self.show(s.last_good, keep_panels=False)

    def text(self) -> str:
        text = self.diagram.text()
        return f"{text}\n({self.diagram.caption})" if self.session.device_name else text

    def replay(self) -> Any:
        got = self.diagram.get_state(["rows", "panels", "counts"])  # the rows the page's diagram.js draws
        return {"rows": json.loads(got["rows"]), "panels": json.loads(got["panels"]), "counts": got["counts"]}


class CalculationView(View):
    """The step written out by hand: forward, backward, update, after (and the optimizer's rows)."""

    slot = ("below", 3)
    where = ("explorer",)  # every leaf's rows at every point: too big for a replay page (its diagram has the numbers)

    def __init__(self, session: Session):
        super().__init__(session)
        self.widget = self.calculation = WorkedCalculation(session.engine)
        if session.optimizer is not None:
            self.calculation.optimizer_rows = functools.partial(optimizer_rows, session)
        self.public = {"calculation": self.calculation}

    def show(self, result: Any) -> None:
        self.calculation.show(result, self.session.param_summary, self.selected)

    def select(self, path: str) -> None:
        super().select(path)
        self.calculation.select(path)

    def text(self) -> str:
        return self.calculation.text() if self.session.last_good is not None else ""

    def close(self) -> None:
        self.calculation.optimizer_rows = None


# The views, in the order of the explorer's text form.
VIEWS: tuple[type[View], ...] = (DiagramView, DataView, CalculationView, LossLineView, ChartView)


class ViewSet(dict):
    """The views by class name of `VIEWS` drawn `where` ("explorer", "replay" or "comparison": the
    module doc), each given the `options` it takes, and what is done to all of them."""

    def __init__(self, session: Session, where: str = "explorer", **options: Any):
        self.options = options
        super().__init__(
            (cls.__name__, cls(session, **{k: options[k] for k in cls.options if k in options}))
            for cls in VIEWS  # VIEWS as it is now (a registration)
            if where in cls.where
        )

    def parts(self, slot: str = "") -> list[ipywidgets.Widget]:
        """The views' widgets for `slot` ("row" or "below"; "": both), in their positions."""
        found = [(pos, i, w) for i, v in enumerate(self.values()) for s, pos, w in v.parts() if slot in ("", s)]
        return [w for _, _, w in sorted(found, key=lambda item: item[:2])]

    def show(self, result: Any, which: Callable[[View], bool] = lambda view: True) -> None:
        """The step `result` drawn by every view, or by those `which` takes."""
        for view in self.values():
            if which(view):
                view.show(result)

    def text(self) -> str:
        return "\n\n".join(p for p in (view.text() for view in self.values()) if p)

    def close(self, widgets: bool = False) -> None:
        """Let every view go; `widgets`: close their widgets too (views of no explorer, which closes its own)."""
        for view in self.values():
            with contextlib.suppress(Exception):
                view.close()
            for widget in [w for _, _, part in view.parts() for w in descendants(part)] if widgets else []:
                widget.close()
