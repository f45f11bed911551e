"""`PytreeDiagram`: trees drawn side by side, rows matched by path, clickable and foldable.

Wire format (the one place it is written down; static/diagram.js reads it with the same names)
-----------------------------------------------------------------------------------------
In Python a row is a dict and a cell a dict or None (see `align`)::

    row  = {"p": path, "u": parent path or None, "l": label, "d": depth, "leaf": 0/1,
            "c": [cell per tree], "s": status}
    cell = {"ty": type label, "v": value text | "g": grid text, "i": flatten index,
            "nd": 1 if not differentiable, "n": number of children (containers)}

The page receives `rows` (and each panel's "rows") as one JSON text, by column rather than by
row (JSON objects cost per key, and a 10k-leaf tree has 15,000 rows and cells), each column
under its name spelled out (ROW_COLUMNS, CELL_COLUMNS: sent once per column, they cost nothing
worth counting; spelled out in every row they made the 10k-leaf state 19% bigger)::

    {"path": [...], "parent": [...], "label": [...], "depth": [...], "leaf": [...],
     "status": [...], "cells": [{"type": [...], "value": [...], "grid": [...], "index": [...],
                                 "not_differentiable": [...], "children": [...]}, ...]}

one list per row key, and per tree one list per cell key, a row's values at the same position;
null where a cell is missing or lacks that key. The page turns it back into the row and cell
objects above (the short keys are the page's and Python's in-memory names only).

Big trees (more than FOLD_ABOVE rows) start folded, and `rows` holds only the open part: the
rows below a container are sent when the container is first opened (the page writes
`collapsed`; Python adds its children's rows and sends `rows` again) or when a path inside it
is selected. Their values are formatted then too (`describe(values="later")` copies them when
the tree is given). The page adds the new rows below their container (diagram.js `grow`).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any

import anywidget
import traitlets

from .diagnose import Diagnosis, diagnose, diagnose_summaries
from .diagram_rows import (
    _STATUS_TEXT,
    _align,
    _ancestors,
    _head_rows,
    _panels_json,
    _rows_json,
    _structure,
    _unknown_path_message,
    align,
)
from .formatting import grid_lines
from .page import PageIntents, static_asset, synced
from .tree_model import tree_lines
from .trees import TreeError, TreeSummary, describe, gc_paused
from .widget_common import TextForm, refuse_unknown_widget_keywords

__all__ = ["PytreeDiagram", "align"]

_MISSING = object()

# Beyond this many rows, containers start folded (children are rendered when unfolded).
FOLD_ABOVE = 200


# --------------------------------------------------------------------------- the widget


class PytreeDiagram(PageIntents, TextForm, anywidget.AnyWidget):
    """One or more pytrees drawn side by side, each leaf beside its partners at the same path.

    >>> PytreeDiagram(params)                                   # one tree
    >>> PytreeDiagram(params, grads=grads, updated=updated)     # aligned columns
    >>> PytreeDiagram(params, grads=grads, extra={"optimizer state": opt_state})

    Click a leaf to select it in every tree (`selected_path`, a keystr, settable from Python);
    click a container to fold it. Bad input never clears the diagram: `show_message` puts a
    message above the last good trees.

    Aligned trees are checked with `diagnose` (``compare=True``, the default): when a column
    disagrees with the first (a missing, extra or renamed key, another shape or dtype), the
    first difference is shown as a warning above the trees, path named, and kept in
    `diagnosis`. Rows stay aligned, with the differing paths marked.

    ``expected={"grads": hand_derived_grads}`` also compares a column's *values* with a tree
    known independently (the lesson's hand-derived update): this is what catches two
    equal-shaped leaves that were swapped, which no structural check can see.

    Text from the trees (keys, field names, string leaves) is always drawn as text, never HTML.

    A tree of more than `FOLD_ABOVE` rows starts folded, and its folded containers' rows stay
    in the kernel until they are opened: `rows` is what the page has, `summaries` and `text()`
    the whole trees.
    """

    _esm = static_asset("diagram.js")
    _css = static_asset("diagram.css")
    # The page reports what the person did; every other trait is written by Python only.
    _page_intents = frozenset({"selected_path", "collapsed", "foldable_open"})
    _selection_note = ""
    _folding: Sequence[str] = ()  # the last `collapsed` _valid_collapsed gave

    # The Python <-> JS contract (spelled the same in static/diagram.js).
    columns = synced(traitlets.List(traitlets.Unicode()), "list[str], default []: the trees' names, side by side.")
    # Rows and panels travel as one JSON text each, by column (the module docstring's wire
    # format): ipywidgets otherwise walks every row and cell for binary buffers (a third of a
    # second for 10,000 leaves).
    rows: traitlets.List[dict] = synced(
        traitlets.List(),
        "list[dict], default []: the aligned rows (wire format in the module doc).",
        to_json=_rows_json,
    )
    counts = synced(traitlets.List(traitlets.Unicode()), "list[str], default []: each tree's count line.")
    panels: traitlets.List[dict] = synced(
        traitlets.List(),
        "list[dict], default []: the side panels (optimizer state): title and rows each.",
        to_json=_panels_json,
    )
    selected_path = synced(
        traitlets.Unicode(""),
        "str, default '': the keystr path of the selected row ('' for none).",
        by="page (an intent)",
    )
    # (its items are checked in _valid_collapsed: one check per path, not a trait's per item)
    collapsed: traitlets.List[str] = synced(
        traitlets.List(), "list[str], default []: the paths of the folded containers.", by="page (an intent)"
    )
    message = synced(
        traitlets.Unicode(""), "str, default '': a message above the trees (an error, a warning or a note)."
    )
    message_kind = synced(traitlets.Unicode("error"), "str, default 'error': 'error', 'warning' or 'info'.")
    caption = synced(traitlets.Unicode(""), "str, default '': a line under the trees saying how they were computed.")
    foldable = synced(
        traitlets.List(traitlets.Unicode()),
        "list[str], default []: columns and side-panel titles folded behind one toggle above the trees "
        "(an explorer's optimizer moments and state); the text form shows them all.",
    )
    foldable_open = synced(
        traitlets.CBool(False), "bool, default False: the `foldable` parts show.", by="page (an intent) or the kernel"
    )

    def __init__(
        self,
        params: Any = _MISSING,
        *,
        grads: Any = _MISSING,
        updated: Any = _MISSING,
        trees: dict | None = None,
        extra: Any = _MISSING,
        name: str = "params",
        compare: bool = True,
        expected: dict | None = None,
        **kwargs: Any,
    ):
        refuse_unknown_widget_keywords(self, kwargs)  # PytreeDiagram(p, grad=g) must not drop g
        super().__init__(**kwargs)
        self._summaries: list[TreeSummary] = []
        self._panel_summaries: list[TreeSummary] = []
        self._paths: set[str] = set()
        self._containers: set[str] = set()
        # the aligned trees' containers; each side panel's; the panels' paths
        self._boxes: list[str] = []
        self._panel_boxes: list[list[str]] = []
        self._panel_paths: set[str] = set()
        # A big tree (the aligned trees, or a panel, of more than FOLD_ABOVE rows) sends only the
        # rows below the containers in `_opened` (and the top level): the rest when opened.
        self._lazy_main = False
        self._lazy_panels: list[bool] = []
        self._opened: set[str] = set()
        self._showing = False
        self._order: TreeSummary | None = None
        self.compare = compare
        self.diagnosis: Diagnosis | None = None
        # The last tree that could not be shown (a cycle, a node that raises), "" when none.
        self.error = ""
        named = {k: v for k, v in ((name, params), ("grads", grads), ("updated", updated)) if v is not _MISSING}
        self.set_trees({**named, **(trees or {})}, extra=extra, expected=expected)

    # ------------------------------------------------------------------ data
    def set_trees(
        self,
        trees: dict,
        *,
        extra: Any = _MISSING,
        fold: bool | None = None,
        order: Any = _MISSING,
        expected: dict | None = None,
    ) -> None:
        """Replace the trees (name -> tree); selection and folding are kept.

        `fold`: True folds every container, False none; left out, the containers a big tree
        (more than FOLD_ABOVE rows) did not have before start folded.

        `extra`: the side panels' trees (e.g. an optimizer state), replaced when given; left out,
        the panels shown stay (an explorer's slider move keeps its optimizer panel); `extra=None`
        removes them.

        `order`: a tree (or TreeSummary) whose order the rows follow, e.g. the params as written,
        when the trees shown came back from JAX with their dict keys sorted.
        `expected`: column name -> a tree that column's values should equal (see the class doc).
        """
        with gc_paused():  # describe, align and the JSON text of the rows, for big trees
            try:
                self._set_trees(trees, extra, fold, order, expected)
            except TreeError as err:  # a tree that contains itself or whose nodes raise
                self.error = str(err)
                kept = " The diagram keeps the trees it showed before." if self.rows else ""
                self.show_message(f"{err}{kept}")
                return
        self.error = ""

    def _set_trees(self, trees: dict, extra: Any, fold: bool | None, order: Any, expected: dict | None) -> None:
        # values copied now, formatted for the rows sent (a folded 10k-leaf model sends none)
        summaries = [describe(tree, name, values="later") for name, tree in trees.items()]
        expected = expected or {}
        for column in expected:
            if column not in trees:
                raise ValueError(f"expected= names {column!r}, which is not one of the trees {list(trees)}")
        # structure first (each tree against the first), then values (expected=): the lesson's order
        compared = self.compare and len(summaries) > 1
        structure = (
            diagnose_summaries(summaries[0], s, f"the {summaries[0].name} tree", f"the {s.name} tree")
            for s in summaries[1:]
        )
        values = (
            diagnose(ref, trees[c], reference_name=f"the expected {c}", candidate_name=f"the {c} tree", values=True)
            for c, ref in expected.items()
        )
        verdicts = itertools.chain(structure if compared else (), values)
        diagnosis = next((v for v in verdicts if not v.ok), Diagnosis(True) if compared else None)
        panels: list[TreeSummary] | None = None if extra is _MISSING else []
        if extra is not _MISSING and extra is not None:
            if not isinstance(extra, dict) or not all(isinstance(k, str) for k in extra):
                extra = {"optimizer state": extra}
            panels = [describe(tree, title, values="later") for title, tree in extra.items()]
        if order is not _MISSING and not isinstance(order, TreeSummary):
            order = describe(order, "order", values=False)
        self._order = order = None if order is _MISSING else order
        self._summaries = summaries
        paths, self._boxes = _structure(summaries)
        self._lazy_main = len(paths) > FOLD_ABOVE
        self._showing = True
        try:
            with self.hold_sync():  # the page gets one message
                self._show(summaries, panels, paths, fold, order, diagnosis)
        finally:
            self._showing = False

    def _show(self, summaries, panels, paths, fold, order, diagnosis) -> None:
        known = self._containers
        # fold=True folds every container; by default a big tree's new containers start folded
        # (all of them the first time; none on a step that keeps the structure)
        if fold is None and self._lazy_main:
            folding = [p for p in self._boxes if p not in known]
        else:
            folding = list(self._boxes) if fold else []
        if panels is not None:
            self._panel_summaries = panels
            self._panel_boxes, self._lazy_panels = [], []
            self._panel_paths = set()
            for panel in panels:
                panel.role = "state"  # optimizer state and metadata: integer counts are expected
                p_paths, p_boxes = _structure([panel])
                self._panel_boxes.append(p_boxes)
                self._lazy_panels.append(len(p_paths) > FOLD_ABOVE)
                self._panel_paths |= p_paths
                if self._lazy_panels[-1]:  # a big panel's containers start folded, the first time
                    folding += [p for p in p_boxes if p not in known]
        paths |= self._panel_paths
        containers = set(self._boxes).union(*self._panel_boxes)
        self._paths, self._containers = paths, containers
        self.columns = [s.name for s in summaries]
        self.counts = [s.counts_line(_column_noun(s.name)) for s in summaries]
        if folding or self.collapsed:
            self.collapsed = [p for p in self.collapsed if p in containers] + folding
        shut = set(self.collapsed)
        self._opened = (self._opened & containers) | {p for p in self._lazy_boxes() if p not in shut}
        self.rows = align(summaries, order, self._opened if self._lazy_main else None)
        if panels is not None:
            self.panels = self._panel_rows()
        if self.selected_path and self.selected_path not in paths:
            self.selected_path = ""
        self.diagnosis = diagnosis
        if diagnosis is not None and not diagnosis.ok:
            self.show_message(diagnosis.message, "warning")
        else:
            self.message = ""

    def show_message(self, text: str, kind: str = "error") -> None:
        """Show a message above the trees; the trees on screen stay as they were."""
        self.message_kind = kind
        self.message = text

    @property
    def summaries(self) -> list[TreeSummary]:
        for s in self._summaries:
            s.show_values()  # values left for later (rows not sent yet) are made for whoever reads them
        return list(self._summaries)

    def has_path(self, path: str) -> bool:
        """Whether `path` (a keystr path) is a node of the trees or panels shown: one that can be selected."""
        return path in self._paths

    def unknown_path_message(self, path: str) -> str:
        """What to say of a selection that is no path here, with the closest path that is."""
        return _unknown_path_message(path, self._paths, self._summaries)

    # ------------------------------------------------------------------ state from the page
    @traitlets.validate("selected_path")
    def _valid_selection(self, proposal):
        path = proposal["value"]
        if path == "" or path in self._paths:
            if self._selection_note and self.message == self._selection_note:
                self.message = ""
            self._selection_note = ""
            return path
        if "selected_path" in self._property_lock:
            return ""  # a stale page (the tree changed under it) selects nothing
        # From Python: say so, and keep the selection that was there.
        self._selection_note = self.unknown_path_message(path)
        self.show_message(self._selection_note, kind="warning")
        return self.selected_path

    @traitlets.validate("collapsed")
    def _valid_collapsed(self, proposal):
        # only containers fold; unknown paths (a stale page) are dropped
        # (the last value this gave: under a held notification, as when the page writes,
        # `self.collapsed` is already the unchecked value)
        value, last = proposal["value"], self._folding
        if any(type(p) is not str for p in value):
            return list(last)  # not paths (a broken page): the folding stays as it was
        known = self._containers
        kept = [p for p in dict.fromkeys(value) if p in known]
        if value and not kept:
            return list(last)  # only paths the trees lack (a stale page): nothing opens
        self._folding = kept
        return kept

    def _lazy_boxes(self) -> list[str]:
        """The containers of the big trees (those whose rows are sent as they are opened)."""
        lazy = zip([self._lazy_main, *self._lazy_panels], [self._boxes, *self._panel_boxes])
        return [p for big, boxes in lazy if big for p in boxes]

    def _panel_rows(self) -> list[dict]:
        return [
            {"title": s.name, "rows": align([s], None, self._opened if lazy else None), "counts": s.counts_line()}
            for s, lazy in zip(self._panel_summaries, self._lazy_panels)
        ]

    @traitlets.observe("collapsed")
    def _send_opened(self, change) -> None:
        """A container opened for the first time (by the page, or from Python): its rows are sent."""
        if self._showing:
            return
        shut = set(self.collapsed)
        newly = [p for p in self._lazy_boxes() if p not in shut and p not in self._opened]
        if newly:
            self._opened.update(newly)
            self._send_rows()

    @traitlets.observe("selected_path")
    def _open_to_selection(self, change) -> None:
        """A path selected inside folded containers (from Python): they open, its row is sent."""
        path = self.selected_path
        if self._showing or not path or not (self._lazy_main or any(self._lazy_panels)):
            return
        chain = _ancestors(self._summaries, path) or _ancestors(self._panel_summaries, path)
        shut = set(self.collapsed)
        if all(p in self._opened and p not in shut for p in chain):
            return
        with self.hold_sync():
            self._opened.update(chain)
            self._showing = True  # the rows go once, below
            try:
                self.collapsed = [p for p in self.collapsed if p not in chain]
            finally:
                self._showing = False
            self._send_rows()

    def _send_rows(self) -> None:
        """The rows of the big trees again, with what was opened since."""
        with gc_paused():
            if self._lazy_main:
                self.rows = align(self._summaries, self._order, self._opened)
            if any(self._lazy_panels):
                self.panels = self._panel_rows()

    # ------------------------------------------------------------------ without a widget front end
    def text(self, max_lines: int = 200) -> str:
        """The diagram as text, for places without a widget front end (HTML exports, consoles).

        One tree: the lesson's text diagram. Several trees: one aligned table, as on screen,
        a row per path with each tree's cell beside the others (a path a tree lacks shows
        ``— missing`` in its column). Side panels follow as text diagrams.
        """
        order = self._order
        if len(self._summaries) == 1:
            parts = [(s.in_order_of(order) if order is not None else s).text(max_lines) for s in self._summaries]
        elif self._summaries:
            parts = [self._aligned_text(max_lines)]
        else:
            parts = []
        parts += [s.text(max_lines) for s in self._panel_summaries]
        if self.message:
            parts.insert(0, f"[{self.message_kind}] {self.message}")
        return "\n\n".join(parts)

    def _aligned_text(self, max_lines: int) -> str:
        summaries = self._summaries
        with gc_paused():  # the rows shown, with their values; every row only when the trees differ
            head = _head_rows(summaries, self._order, max_lines, self.__dict__.setdefault("_head_cache", {}))
            if head is None:  # not the same paths in every tree (as params, grads and updated have)
                every = _align(summaries, self._order, None, values=False)
                last_child = {r["u"]: r["p"] for r in every}  # a parent's last child gets └──
                head = every[:max_lines], [last_child.get(r["u"]) == r["p"] for r in every[:max_lines]], len(every)
            rows, lasts, total = head
            for col, s in enumerate(summaries):
                s.show_values([c["i"] for r in rows if (c := r["c"][col]) is not None and "i" in c])
        names = tree_lines(((r["p"], r["u"], last, r["l"]) for r, last in zip(rows, lasts)), len(rows))
        cells = []
        for r in rows:
            line = []
            for col, cell in enumerate(r["c"]):
                if cell is None or "i" not in cell:
                    line.append("— missing" if cell is None else cell["ty"])
                    continue
                leaf = summaries[col].leaves[cell["i"]]
                nd = " (not differentiable)" if cell.get("nd") else ""
                if leaf.grid:  # a matrix in its own shape, a line per row
                    rows_of = grid_lines([t.split(" ") for t in leaf.grid.split("\n")])
                    line.append("\n".join([cell["ty"] + nd, *rows_of]))
                else:
                    line.append(f"{cell['ty']} {leaf.summary}".rstrip() + nd)
            if r["s"] != "ok":
                line[-1] += f"   ← {_STATUS_TEXT.get(r['s'], r['s'])}"
            cells.append(line)
        width = min(max([len(n) for n in names] + [4]), 60)
        col_widths = [
            min(max([len(t) for c in cells for t in c[k].split("\n")] + [len(name)]), 48)
            for k, name in enumerate(self.columns)
        ]

        def join(first: str, rest: list[str]) -> list[str]:
            """One table row, as many lines as its tallest cell (a matrix's rows)."""
            split = [t.split("\n") for t in rest]
            out = []
            for k in range(max([len(t) for t in split] + [1])):
                parts = [(first if k == 0 else "").ljust(width)]
                parts += [(t[k] if k < len(t) else "").ljust(w) for t, w in zip(split, col_widths)]
                out.append("  ".join(parts).rstrip())
            return out

        lines = join("path", list(self.columns))
        lines += [text for n, c in zip(names, cells) for text in join(n, c)]
        if total > max_lines:
            lines.append(f"… ({total} rows in all)")
        lines += [f"{name}: {counts}" for name, counts in zip(self.columns, self.counts)]
        return "\n".join(lines)

    def __repr__(self) -> str:
        names = ", ".join(self.columns) or "empty"
        return f"PytreeDiagram({names})"


def _column_noun(name: str) -> str:
    """What a column's values are: only params and updated hold parameters; a gradient tree
    holds derivatives, and a moment tree aligned with params (Adam's mu, nu) optimizer state."""
    if name in ("params", "updated") or name.startswith(("params", "updated")):
        return "numerical parameter"
    if name.startswith("grad"):
        return "gradient"
    if any(word in name.split() for word in ("mu", "nu", "trace", "acc_grads", "moment")):
        return "optimizer state"
    return "numerical"
