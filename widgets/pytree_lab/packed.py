"""`PackedView`: where each position of a packed parameter vector comes from, element by element.

`jax.flatten_util.ravel_pytree` packs a pytree into one vector. The view draws, for each layout
(the tree as given, and e.g. a tuple `(w, b)` beside a dict), the packed vector as numbered
positions (integer indices with the value under each) and the tree's leaves with their elements.
Selecting a leaf highlights every packed position it occupies; selecting a position highlights
the single element it holds (`params['w'][1]`), not the whole leaf. Both ways run in Python:
the page writes only the selection (`selected`), the highlights are computed here.
Every tree operation goes through the engine (`engine=`, default: this kernel's), so the view
works the same with JAX and with the Lite engine.
"""

from __future__ import annotations

from typing import Any

import anywidget
import traitlets

from .engine import Engine, get_engine
from .formatting import fmt_number
from .page import PageIntents, static_asset, synced
from .widget_common import TextForm, refuse_unknown_widget_keywords

__all__ = ["PackedView"]


class _Layout:
    def __init__(self, name: str, tree: Any, eng: Engine, cap: int):
        import numpy as np

        eng.check_tree(tree, name)  # a tree that contains itself or nests too deep: refused before JAX
        self.name, self.packed = name, eng.ravel_pytree(tree)[0]
        self.owner: dict[int, tuple[str, tuple | None]] = {}
        self.leaves: dict[str, range] = {}  # leaf path -> its packed positions
        drawn = []
        for path, leaf in eng.tree_flatten_with_path(tree)[0]:  # packed leaf after leaf, each row-major
            shape, key, start = np.shape(leaf), eng.keystr(path), len(self.owner)
            self.owner.update((start + i, (key, index if shape else None)) for i, index in enumerate(np.ndindex(shape)))
            self.leaves[key] = positions = range(start, len(self.owner))
            shown = positions[: max(0, cap - start)]
            elements = [{"i": i, "label": self.label(i)} for i in shown]
            drawn.append(
                {"path": key, "shape": list(shape), "elements": elements, "hidden": len(positions) - len(shown)}
            )
        values = np.asarray(self.packed).ravel()
        if len(self.owner) != values.size:  # pragma: no cover - ravel_pytree packs leaf by leaf
            raise ValueError("the packed vector does not match the tree's leaves")
        self.page = {  # what the page draws: up to `cap` positions
            "name": name,
            "positions": [
                {"i": i, "value": f"{v:g}", "label": self.label(i)} for i, v in enumerate(values[:cap].tolist())
            ],
            "more": max(0, values.size - cap),
            "leaves": drawn,
        }

    def label(self, position: int) -> str:
        path, index = self.owner[position]
        element = "" if index is None else "[" + ",".join(map(str, index)) + "]"
        return f"{self.name}{path}{element}"


class PackedView(PageIntents, TextForm, anywidget.AnyWidget):
    """Packed positions <-> tree elements for `tree`, as `ravel_pytree` lays them out.

    `layouts={"(w, b)": (params["w"], params["b"])}` adds other layouts of the same parameters
    beside the first. `.packed`, `.owner` (position -> (leaf path, element index or None)),
    `.label(position)`, `select_leaf(path)`, `select_position(i)`; `.selected` is what the
    person chose (layout, "leaf"/"position", key) and `.highlight` what is lit.
    """

    # One button per position is drawn up to this many positions per layout; past it, the page
    # counts what it does not draw (a 500x500 leaf would otherwise be 250,000 buttons). Python
    # keeps every position: `label`, `owner`, `select_*` and `text` cover them all.
    MAX_DRAWN = 2_000

    _esm = static_asset("packed.js")
    _css = static_asset("packed.css")
    _page_intents = frozenset({"selected"})
    layouts_data: traitlets.List[dict] = synced(
        traitlets.List(), "list[dict], default []: each layout's packed positions and leaves, as drawn."
    )
    selected = synced(
        traitlets.Dict(),
        "dict, default {}: what the person pressed: {'layout': int, 'kind': 'leaf' or 'position', 'key': str or int}.",
        by="page (an intent)",
    )
    highlight = synced(
        traitlets.Dict(), "dict, default {}: the layout, positions and element labels lit for the selection."
    )
    readout = synced(traitlets.Unicode(""), "str, default '': the sentence saying what the selection is.")

    def __init__(
        self,
        tree: Any,
        name: str = "params",
        *,
        layouts: dict[str, Any] | None = None,
        engine: Engine | None = None,
        **kwargs: Any,
    ):
        refuse_unknown_widget_keywords(self, kwargs)  # a typo is an error, not a dropped argument
        eng = engine or get_engine()
        self._layouts = [_Layout(n, t, eng, self.MAX_DRAWN) for n, t in [(name, tree), *(layouts or {}).items()]]
        self.packed, self.owner, self.name = self._layouts[0].packed, self._layouts[0].owner, name
        super().__init__(layouts_data=[layout.page for layout in self._layouts], **kwargs)

    def label(self, position: int, layout: int = 0) -> str:
        return self._layouts[layout].label(position)

    def select_leaf(self, path: str, layout: int = 0) -> None:
        self.selected = {"layout": layout, "kind": "leaf", "key": path}

    def select_position(self, position: int, layout: int = 0) -> None:
        self.selected = {"layout": layout, "kind": "position", "key": int(position)}

    @traitlets.observe("selected")
    def _on_selected(self, change) -> None:
        sel = change["new"] or {}
        try:
            layout_index = int(sel.get("layout", 0))
            layout = self._layouts[layout_index]
        except (TypeError, ValueError, IndexError):
            return
        kind, key = sel.get("kind"), sel.get("key")
        if kind == "leaf":
            positions = layout.leaves.get(key) if isinstance(key, str) else None
            if positions is None:
                return
            drawn = positions[: max(0, self.MAX_DRAWN - positions.start)]  # what the page shows
            self.highlight = {
                "layout": layout_index,
                "positions": list(drawn),
                "elements": [layout.label(i) for i in drawn],
            }
            if len(positions) <= 20:
                self.readout = f"{layout.name}{key} occupies packed positions {list(positions)}"
            else:
                self.readout = (
                    f"{layout.name}{key} occupies packed positions {positions[0]} to {positions[-1]} "
                    f"({len(positions):,} values)"
                )
        elif kind == "position":
            try:
                position = int(key)  # type: ignore[arg-type]  # None: TypeError, caught
            except (TypeError, ValueError):
                return
            if position not in layout.owner:
                return
            self.highlight = {"layout": layout_index, "positions": [position], "elements": [layout.label(position)]}
            self.readout = f"packed[{position}] holds {layout.label(position)}"

    TEXT_POSITIONS = 200  # positions listed per layout in the text form; the rest are counted

    def text(self) -> str:
        import numpy as np

        lines = []
        cap = self.TEXT_POSITIONS
        for layout in self._layouts:
            values = np.asarray(layout.packed).ravel()
            more = f" … ({values.size - cap:,} more)" if values.size > cap else ""
            shown = ", ".join(fmt_number(v) for v in values[:cap].tolist())
            lines.append(f"{layout.name}: packed [{shown}{more}]")
            lines += [f"  packed[{i}] <- {layout.label(i)}" for i in range(min(cap, len(layout.owner)))]
            if len(layout.owner) > cap:
                lines.append(f"  … {len(layout.owner) - cap:,} more positions")
        if self.readout:
            lines.append(self.readout)
        return "\n".join(lines)
