"""The diagram's rows back from their wire form, as the page reads them (static/diagram.js
`rowsFromWire`; the format is written down in pytree_lab/diagram.py's docstring)."""

from __future__ import annotations

from pytree_lab.diagram_rows import CELL_COLUMNS, ROW_COLUMNS


def rows_from_columns(wire: dict) -> list[dict]:
    """The rows of `wire`: a cell's keys that are null on the wire are left out."""
    rows = []
    for k in range(len(wire["path"])):
        row = {key: wire[name][k] for key, name in ROW_COLUMNS.items()}
        row["c"] = [
            None
            if col["type"][k] is None
            else {key: col[n][k] for key, n in CELL_COLUMNS.items() if col[n][k] is not None}
            for col in wire["cells"]
        ]
        rows.append(row)
    return rows
