"""`PackedView`: where each position of a packed parameter vector comes from.

`jax.flatten_util.ravel_pytree` packs a pytree into one vector. The view shows one button per
packed position linked both ways to a `PytreeDiagram` of the tree beside the tree of positions
(the unpacked `0, 1, 2, …`): click a position to select its leaf, or a leaf to see its positions.
"""

from __future__ import annotations

import html
import importlib
from typing import Any

import ipywidgets

from .diagram import PytreeDiagram
from .engine import Engine, get_engine

__all__ = ["PackedView"]


class PackedView(ipywidgets.VBox):
    """Packed positions <-> tree paths for `tree`, as `ravel_pytree` lays them out.

    `.packed` (the vector), `.owner` (position -> (leaf path, element index or None)),
    `.label(position)` (e.g. ``params['w'][1]``), `.diagram`, `.buttons`.
    """

    def __init__(self, tree: Any, name: str = "params", *, engine: Engine | None = None, **kwargs: Any):
        import numpy as np

        super().__init__(**kwargs)
        eng = engine or get_engine()
        ravel_pytree = importlib.import_module(eng.jax.__name__ + ".flatten_util").ravel_pytree
        packed, unravel = ravel_pytree(tree)
        self.packed = packed
        self.name = name
        positions = unravel(eng.numpy.arange(packed.size, dtype=packed.dtype))
        flat, _ = eng.tree_flatten_with_path(positions)
        self.owner: dict[int, tuple[str, tuple | None]] = {}
        for path, where in flat:
            where = np.asarray(where)
            for index, position in np.ndenumerate(where):
                self.owner[int(position)] = (eng.keystr(path), index if where.ndim else None)

        self.diagram = PytreeDiagram(trees={name: tree, "position in packed vector": positions})
        self.buttons = ipywidgets.ToggleButtons(
            options=[(f"[{i}] {float(v):g}", i) for i, v in enumerate(np.asarray(packed))],
            value=None, description="packed",
            tooltips=[self.label(i) for i in range(int(packed.size))],
            style={"button_width": "5.5em"},
        )
        self.readout = ipywidgets.HTML()
        self.buttons.observe(self._from_buttons, "value")
        self.diagram.observe(self._from_diagram, "selected_path")
        self.children = [self.buttons, self.readout, self.diagram]

    def label(self, position: int) -> str:
        path, index = self.owner[position]
        element = "" if index is None else "[" + ",".join(map(str, index)) + "]"
        return f"{self.name}{path}{element}"

    def _from_buttons(self, change: dict) -> None:
        position = change["new"]
        if position is None:
            return
        self.diagram.selected_path = self.owner[position][0]
        # paths come from the user's keys: shown as text, never as HTML
        self.readout.value = f"packed[{position}] comes from <code>{html.escape(self.label(position))}</code>"

    def _from_diagram(self, change: dict) -> None:
        path = change["new"]
        mine = [i for i, (p, _) in sorted(self.owner.items()) if p == path]
        if not mine:
            return
        if self.buttons.value not in mine:
            self.buttons.value = mine[0]
        self.readout.value = (
            f"<code>{html.escape(self.name + path)}</code> occupies packed positions {mine}"
        )

