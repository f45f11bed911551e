"""The worked calculation: one step written out as the lesson writes it by hand.

A view, a peer of the chart and the diagram: it is fed a `StepResult` and computes nothing
itself. Rows follow the parameters as the person wrote them; small matrices (up to 16 values)
are shown whole as a grid, bigger leaves by their first values and a summary. Every number
is escaped text (keys from user trees included), never HTML.
"""

from __future__ import annotations

import html
from dataclasses import dataclass
from typing import Any

import anywidget
import traitlets

from .formatting import GRID_MAX, HEAD, fmt_number, fmt_value, grid_lines, index_text, is_slice_label
from .page import PageIntents, static_asset, synced
from .step import StepResult
from .summaries import on_host, to_host
from .tree_model import under
from .trees import TreeSummary, path_label
from .widget_common import TextForm, refuse_unknown_widget_keywords

__all__ = ["WorkedCalculation", "CalcRow", "fmt_number", "fmt_value"]

MAX_LEAF_ROWS = 24  # gradient and update rows shown; the rest are counted (the diagram has them all)
FOLD_ABOVE = 3  # folded (`folded=True`): a model with more leaves shows the selected leaf's rows only
SHORT_VALUE = 34  # folded: a value of at most this many characters is never broken across lines


@dataclass(frozen=True)
class CalcRow:
    section: str  # forward | backward | update | after
    what: str
    value: str  # one line
    path: str = ""  # the params path it belongs to ("" for model-wide quantities)
    grid: tuple = ()  # rows of cells for a small matrix, shown whole
    minor: bool = False  # left out of the folded form (its numbers are shown elsewhere on screen)
    short: str = ""  # `what` without its numbers, for the folded form ("" when `what` is short)
    note: bool = False  # `value` is a sentence (why a number is what it is), not a number
    group: str = ""  # the folded form draws the rows of one group in a disclosure titled so


class WorkedCalculation(PageIntents, TextForm, anywidget.AnyWidget):
    """The step written out: forward (prediction, residual, loss), backward (dL/dŷ, one
    gradient per leaf), update (p − η·g = new p), after (new prediction, new loss).

    `show(result, order)` draws a step; `select(path)` highlights the rows of a leaf;
    `rows()` and `text()` give the same content without a front end. The page draws `value`
    again at each step, keeping the disclosures the person opened open (static/calculation.js).
    """

    _esm = static_asset("calculation.js")
    _css = static_asset("calculation.css")
    value = synced(traitlets.Unicode(""), "str, default '': the calculation's markup, every text in it escaped.")

    def __init__(self, engine: Any, **kwargs: Any):
        refuse_unknown_widget_keywords(self, kwargs)
        super().__init__(layout={"width": "100%"}, **kwargs)
        self.add_class("pytree-lab-calculation")
        self.engine = engine
        self._result: StepResult | None = None
        self._order: TreeSummary | None = None
        self._selected = ""
        # folded: the rows of one leaf (the selected one, else the first) and the model-wide rows;
        # every leaf's rows one click away in a disclosure below (an explorer's compact layout)
        self.folded = False
        self.focus = ""  # the path of the leaf the folded form shows
        self._leaf_count = 0
        # optimizer_rows(result, leaves, selected_path) -> rows for the selected leaf's optimizer
        # update (set by an explorer with an optimizer); the rows then follow the selection
        self.optimizer_rows: Any = None

    def show(self, result: StepResult, order: TreeSummary, selected_path: str = "") -> None:
        self._selected = selected_path
        rows = self._rows(result, order)  # computed first: a failure leaves the last table on screen
        self._result, self._order = result, order
        self._rows_cache = rows
        self.value = self._html(rows)

    def select(self, path: str) -> None:
        self._selected = path
        if self._result is not None and self._order is not None:  # set together by show()
            if self.optimizer_rows is not None or self.folded:
                self._rows_cache = self._rows(self._result, self._order)
            self.value = self._html(self._rows_cache)

    def rows(self) -> list[CalcRow]:
        return list(self._rows_cache) if self._result is not None else []

    # ------------------------------------------------------------------ content
    def _rows(self, r: StepResult, order: TreeSummary) -> list[CalcRow]:
        eng = self.engine
        rows: list[CalcRow] = []
        x = r.extras or {}

        def add(section: str, what: str, value: Any, path: str = "", short: str = "") -> None:
            text, grid = fmt_value(value)
            rows.append(CalcRow(section, what, text, path, grid, short=short if len(what) > 48 else ""))

        batch = ""
        if "prediction" in x:
            import numpy as np

            size = int(np.size(x["prediction"]))
            batch = f" (per example, {size})" if size > 1 else ""
            add("forward", "prediction ŷ" + batch, x["prediction"])
            if "residual" in x:
                add("forward", "residual ŷ − target" + batch, x["residual"])
        add("forward", "loss L", r.loss)
        if "dloss_dprediction" in x:
            add("backward", x.get("dloss_label", "dL/dŷ"), x["dloss_dprediction"])
        leaves = [n.leaf for n in order.root.walk() if n.leaf is not None and n.leaf.differentiable]
        shown, hidden = leaves[:MAX_LEAF_ROWS], len(leaves) - MAX_LEAF_ROWS
        first = focus_leaf(leaves, self._selected) if leaves else None
        if first is not None and first not in shown:  # the selected leaf always has its rows
            shown, hidden = shown + [first], hidden - 1
        self._leaf_count = len(leaves)
        self.focus = first.path if first is not None else ""
        grads, updated, before = (eng.tree_leaves(t) for t in (r.grads, r.updated, r.params))
        part = {leaf.index: nonzero_part(grads[leaf.index]) for leaf in shown}  # (suffix, take)
        for leaf in shown:
            name = path_label(leaf.path) + part[leaf.index][0]
            add("backward", f"∂L/∂{name}", part[leaf.index][1](grads[leaf.index]), leaf.path)
        if hidden > 0:
            rows.append(CalcRow("backward", f"… {hidden} more leaves", "in the diagram's grads column"))
        lr = fmt_number(r.learning_rate)
        updates = getattr(r, "updates", None)  # an optimizer's step (TrainingResult)
        by_optimizer = updates is not None and self.optimizer_rows is not None
        if by_optimizer:
            rows.extend(self.optimizer_rows(r, shown, self._selected))
        steps = eng.tree_leaves(updates) if by_optimizer else grads
        for leaf in shown:
            name, take = path_label(leaf.path) + part[leaf.index][0], part[leaf.index][1]
            p, d = (fmt_value(take(t[leaf.index]))[0] for t in (before, steps))
            d = f"({d})" if d.startswith("-") else d
            short = f"{name} + update" if by_optimizer else f"{name} − {lr}·∂L/∂{name}"
            what = f"{short} = {p} + {d}" if by_optimizer else f"{short} = {p} − {lr}·{d}"
            add("update", what, take(updated[leaf.index]), leaf.path, short)
        if hidden > 0:
            rows.append(CalcRow("update", f"… {hidden} more leaves", "in the diagram's updated column"))
        if "new_prediction" in x:
            add("after", "new prediction" + batch, x["new_prediction"])
            if "new_residual" in x:
                add("after", "new residual" + batch, x["new_residual"])
        add("after", "new loss", r.loss_after)
        return rows

    def _html(self, rows: list[CalcRow]) -> str:
        if self.folded and self._leaf_count > FOLD_ABOVE:
            return self._folded_html(rows, self._leaf_count)
        esc = html.escape
        sel = self._selected
        body, last = [], None
        for row in rows:
            path = row.path
            cls = ' class="ptl-calc-selected"' if sel and path and under(path, sel) else ""
            head = esc(row.section) if row.section != last else ""
            last = row.section
            value = grid_html(row.grid, row.what) if row.grid else esc(row.value)
            body.append(_tr(path, head, f'<td>{esc(row.what)}</td><td class="ptl-calc-value">{value}</td>', cls))
        return (
            '<table class="ptl-calc" aria-label="worked calculation">'
            "<caption>Worked calculation (numbers from the step just computed)</caption>" + "".join(body) + "</table>"
        )

    def _folded_html(self, rows: list[CalcRow], count: int) -> str:
        """The selected leaf's rows and the model-wide ones; every leaf's gradient and update in
        a disclosure below (a <details>: one click or Enter away, in the Tab order)."""
        focus = self.focus
        mine = [r for r in rows if (r.path == focus or not r.path) and not r.minor and not r.what.startswith("… ")]
        rest = [r for r in rows if r not in mine and not r.minor and r.section in ("backward", "update")]
        return (
            f'<div class="ptl-calc-folded" data-focus="{html.escape(focus, quote=True)}">'
            + _compact_table(mine, f"worked calculation for {path_label(focus)}")
            + f'<details class="ptl-calc-all"><summary>every leaf: ∂L/∂p and the update ({count} leaves'
            + (f"; the first {MAX_LEAF_ROWS} here, any one from the list above" if count > MAX_LEAF_ROWS else "")
            + ")</summary>"
            + _compact_table(rest, "every leaf's gradient and update")
            + "</details></div>"
        )

    def text(self) -> str:
        rows = self.rows()
        if not rows:
            return ""
        width = max(len(r.what) for r in rows)
        lines, last = ["Worked calculation (numbers from the step just computed)"], None
        for r in rows:
            head = r.section if r.section != last else ""
            last = r.section
            values = grid_lines(r.grid) if r.grid else [r.value]  # a matrix: a line per row
            lines.append(f"{head:<9} {r.what:<{width}}  {values[0]}")
            lines.extend(f"{'':<9} {'':<{width}}  {v}" for v in values[1:])
        return "\n".join(lines)


def nonzero_part(grad: Any) -> tuple[str, Any]:
    """A leaf too big to show whole whose first values have a zero gradient (an embedding's rows
    the batch does not use) is shown by its part that has one: a matrix's first such row
    (`[2,:]`), a vector's values from the first such one (`[40:48]`); else ("", the whole)."""
    import numpy as np

    def own(a: Any) -> Any:  # an array on an accelerator stays there: only the part shown comes over
        return np.asarray(a) if on_host(a) else a

    g = own(grad)
    rows = g.reshape(-1, g.shape[-1]) if g.ndim >= 2 else g.reshape(-1, 1)
    k = int(to_host((rows != 0).any(axis=1).argmax())) if g.size > GRID_MAX else 0  # the first row with one
    if k < (HEAD if g.ndim < 2 else 1):
        return "", lambda a: a
    if g.ndim < 2:
        return f"[{k}:{min(k + HEAD, g.size)}]", lambda a: own(a)[k : k + HEAD]
    return f"[{index_text(k, g.shape[:-1])},:]", lambda a: own(a).reshape(-1, g.shape[-1])[k]


def focus_leaf(leaves: list, selected: str) -> Any:
    """The leaf the worked calculation follows: the selected one, the first inside a selected
    container, else the first leaf."""
    return next((lf for lf in leaves if selected and under(lf.path, selected)), leaves[0])


def _compact_table(rows: list[CalcRow], label: str) -> str:
    """Rows as the folded form draws them: a number beside its name, a matrix under its name
    (the diagram's grid, scrolling sideways where wider than the panel), a sentence across; the
    rows of a `group` in a disclosure of their own, where the group's first row would be."""
    esc = html.escape
    body, last, done = [], None, set()
    for row in rows:
        if row.group:
            if row.group not in done:
                done.add(row.group)
                inner = "".join(_compact_row(r, False) for r in rows if r.group == row.group)
                name = esc(row.group, quote=True)  # the group's table's own name, not the outer table's
                inner = f'<table class="ptl-calc ptl-calc-compact" aria-label="{name}">{inner}</table>'
                head = esc(row.section) if row.section != last else ""
                last = row.section
                details = f'<details class="ptl-calc-group"><summary>{esc(row.group)}</summary>{inner}</details>'
                body.append(_tr(row.path, head, f'<td colspan="2">{details}</td>'))
            continue
        body.append(_compact_row(row, row.section != last))
        last = row.section
    return f'<table class="ptl-calc ptl-calc-compact" aria-label="{esc(label, quote=True)}">{"".join(body)}</table>'


def _tr(path: str, head: str, cells: str, cls: str = "") -> str:
    """A row of the calculation: its leaf's path, its section's name (on the section's first row), its cells."""
    return f'<tr{cls} data-path="{html.escape(path, quote=True)}"><th scope="row">{head}</th>{cells}</tr>'


def _compact_row(row: CalcRow, first: bool) -> str:
    esc = html.escape
    what = esc(row.short or row.what)
    if row.grid:  # a matrix under its name, in its own shape (the diagram's grid)
        grid = grid_html(row.grid, row.short or row.what)
        cells = f'<td colspan="2" class="ptl-calc-wide"><div>{what}</div><div class="ptl-calc-value">{grid}</div></td>'
    elif row.note:
        cells = f'<td colspan="2" class="ptl-calc-note">{esc(row.value)}</td>'
    else:  # a short value stays on one line (its name wraps beside it), a long one wraps
        short = " ptl-calc-short" if len(row.value) <= SHORT_VALUE else ""
        cells = f'<td>{what}</td><td class="ptl-calc-value{short}">{esc(row.value)}</td>'
    return _tr(row.path, esc(row.section) if first else "", cells)


def grid_html(grid: tuple, label: str) -> str:
    """A matrix's grid rows as the diagram draws them (static/diagram.js, valueGrid): one line
    per row of values, never rewrapped (wider than its cell, it scrolls sideways), a slice's
    label on a line of its own; every cell as wide as the widest value."""
    esc = html.escape
    width = max((len(c) for r in grid if not is_slice_label(r) for c in r), default=1)
    lines = []
    for r in grid:
        if is_slice_label(r):
            lines.append(f'<span class="ptl-grid-slice" role="row"><span role="rowheader">{esc(r[0])}</span></span>')
            continue
        cells = "".join(f'<span class="ptl-grid-cell" role="cell">{esc(c)}</span>' for c in r)
        lines.append(f'<span class="ptl-grid-row" role="row">{cells}</span>')
    return (
        f'<span class="ptl-grid" role="table" aria-label="{esc(label, quote=True)}" '
        f'style="--ptl-grid-ch: {width}">{"".join(lines)}</span>'
    )
