"""The diagram's rows: trees aligned by path into the rows `PytreeDiagram` sends, their wire
format (written down in diagram.py's docstring), their text form, and the closest path to an
unknown one. No widgets here."""

from __future__ import annotations

import functools
import json
import operator
from typing import Any

from .tree_model import Node, TreeSummary, _split_path, dtype_shape_label, gc_paused

_as_json_text = functools.partial(json.dumps, ensure_ascii=False, separators=(",", ":"), allow_nan=False)

# The wire format's columns (module docstring): in-memory key -> the column's name on the
# wire. The same names in static/diagram.js.
ROW_COLUMNS = {"p": "path", "u": "parent", "l": "label", "d": "depth", "leaf": "leaf", "s": "status"}
CELL_COLUMNS = {"ty": "type", "v": "value", "g": "grid", "i": "index", "nd": "not_differentiable", "n": "children"}


def _rows_by_column(rows: list[dict]) -> dict:
    """Rows as the page receives them: one list per column (module docstring)."""
    wire: dict = {name: [r[k] for r in rows] for k, name in ROW_COLUMNS.items()}
    wire["cells"] = [  # per tree: its cells, a column of the rows' cell lists
        {name: [None if c is None else c.get(k) for c in cells] for k, name in CELL_COLUMNS.items()}
        for cells in zip(*(r["c"] for r in rows))
    ]
    return wire


def _rows_json(rows: list[dict], widget: Any = None) -> str:
    return _as_json_text(_rows_by_column(rows))


def _panels_json(panels: list[dict], widget: Any = None) -> str:
    return _as_json_text([{**p, "rows": _rows_by_column(p["rows"])} for p in panels])


# --------------------------------------------------------------------------- wire rows


def _row(node: Node, parent: str | None, leaf: int, cells: list, status: str = "ok") -> dict:
    return {"p": node.path, "u": parent, "l": node.label, "d": node.depth, "leaf": leaf, "c": cells, "s": status}


def _cell(node: Node, flag: bool = True) -> dict:
    leaf = node.leaf
    if leaf is None:
        return {"ty": node.type_name, "n": len(node.children)}
    # a small matrix is shown whole in its shape: its grid rows, no one-line text
    cell = {"ty": dtype_shape_label(leaf.dtype, leaf.shape), "i": leaf.index}
    cell.update({"g": leaf.grid} if leaf.grid is not None else {"v": leaf.summary})
    if flag and not leaf.differentiable:
        cell["nd"] = 1
    return cell


def align(summaries: list[TreeSummary], order: TreeSummary | None = None, opened: set | None = None) -> list[dict]:
    """Rows matched by path across trees, in the first tree's display order.

    `order` (optional) is a tree whose display order wins, e.g. the params as the user wrote
    them when the first tree came back from a JAX transformation with its dict keys sorted.
    `opened` (optional): the containers whose children are wanted; the children of any other
    container are left out (the top level is always there). Values a summary left for later
    (``describe(values="later")``) are formatted for the leaves in the rows, and only those.

    Rows as diagram.py's docstring writes them (``s``: ``ok``, ``missing``, ``shape``, ``dtype``
    or ``kind``). The root container is not a row unless the whole tree is a single leaf. A path
    only some trees have comes after its siblings, at the end of its parent's subtree.
    """
    with gc_paused():
        return _align(summaries, order, opened)


def _walk(summary: TreeSummary, opened: set | None, values: bool = True) -> list[tuple[Node, str | None]]:
    """(node, parent path) in display order: the rows of one tree, below the opened containers;
    the values of their leaves formatted if they were left for later."""
    root = summary.root
    walk: list[tuple[Node, str | None]]
    walk = [(root, None)] if root.leaf is not None else [(node, parent) for node, parent, _ in root.below(opened)]
    if values and summary.later:
        summary.show_values([node.leaf.index for node, _ in walk if node.leaf is not None])
    return walk


def _align(
    summaries: list[TreeSummary], order: TreeSummary | None, opened: set | None = None, values: bool = True
) -> list[dict]:
    if len(summaries) == 1 and order is None and values:
        one = _rows_of_one(summaries[0], opened)
        if one is not None:
            return one
    n = len(summaries)
    by_path: dict[str, dict] = {}
    top: list[dict] = []
    kids: dict[str, list[dict]] = {}
    seeded = order is not None
    for col, summary in enumerate(([order] if order is not None else []) + list(summaries)):
        col -= seeded
        for node, parent in _walk(summary, opened, values):
            row = by_path.get(node.path)
            if row is None:
                row = by_path[node.path] = _row(node, parent, int(node.leaf is not None), [None] * n)
                if parent is None or parent not in by_path:
                    top.append(row)
                else:
                    by_path[parent]["leaf"] = 0  # a leaf in one tree, a container in another
                    kids.setdefault(parent, []).append(row)
            if col >= 0:
                row["c"][col] = _cell(node, summary.role == "params")
                if node.leaf is None:
                    row["leaf"] = 0  # a container in any tree can unfold
    for row in top:
        if row["u"] is not None and row["u"] in by_path:
            row["u"] = None  # its parent row came later (a root leaf in another tree): shown on top
    # rows in display order: parents before children, first-seen order among siblings
    rows: list[dict] = []
    stack = list(reversed(top))
    while stack:
        row = stack.pop()
        rows.append(row)
        stack.extend(reversed(kids.get(row["p"], ())))
    if seeded:
        rows = [r for r in rows if any(c is not None for c in r["c"])]
    for row in rows:
        row["s"] = _status(row["c"], row["leaf"]) if n > 1 else "ok"
    return rows


def _head_rows(
    summaries: list[TreeSummary], order: TreeSummary | None, limit: int, cache: dict | None = None
) -> tuple | None:
    """The first `limit` rows of `_align(summaries, order, values=False)`, whether each is its
    parent's last child, and how many rows there are in all, without aligning every row: for
    trees that all have the same paths in the same (JAX) order, as params, grads and updated do
    (the text form of three 100k-leaf trees: milliseconds, where aligning all took a second).
    None when the trees differ in any path (the general alignment is needed)."""
    if len(summaries) < 2:
        return None
    first = order if order is not None else summaries[0]
    lists = [first.nodes] + [s.nodes for s in summaries]
    base = lists[0]
    if not all(lists) or any(len(nodes) != len(base) for nodes in lists) or base[0].leaf is not None:
        return None
    key = (first, *summaries)  # held by the cache, so these summaries stay what the key means
    cache = {} if cache is None else cache
    cached = cache.get("key", ())
    if len(cached) == len(key) and all(a is b for a, b in zip(cached, key)):
        index = cache["index"]
    else:
        path_of = operator.attrgetter("path")
        paths = list(map(path_of, base))
        leafy = [node.leaf is not None for node in base]
        # the same paths, each a leaf in every tree or in none (a leaf 0.0 in params and an empty
        # None at that path in grads print alike but are not the same row)
        same = all(
            nodes is base or (list(map(path_of, nodes)) == paths and [n.leaf is not None for n in nodes] == leafy)
            for nodes in lists[1:]
        )
        index = dict(zip(paths, range(len(paths)))) if same else None
        if index is not None and len(index) != len(paths):  # two nodes print alike: the general merge
            index = None
        cache.update(key=key, index=index)
    if index is None:
        return None
    flags = [s.role == "params" for s in summaries]
    rows: list[dict] = []
    lasts: list[bool] = []
    for node, parent, last in first.root.below():
        if len(rows) >= limit:
            break
        k = index.get(node.path)
        if k is None:  # a node the walk order does not know (a summary made another way)
            return None
        cells = [_cell(s.nodes[k], flag) for s, flag in zip(summaries, flags)]
        is_leaf = int(all(s.nodes[k].leaf is not None for s in summaries))
        rows.append(_row(node, parent, is_leaf, cells, _status(cells, is_leaf)))
        lasts.append(last)
    return rows, lasts, len(base) - 1


def _rows_of_one(summary: TreeSummary, opened: set | None = None) -> list[dict] | None:
    """`_align` for one tree (a diagram of params alone, a side panel): its rows are its nodes
    in display order. None if two nodes share a path (a custom node's keys can print alike):
    the general walk merges those."""
    flag = summary.role == "params"
    rows = [
        _row(node, parent, int(node.leaf is not None), [_cell(node, flag)]) for node, parent in _walk(summary, opened)
    ]
    return rows if len({r["p"] for r in rows}) == len(rows) else None


def _structure(summaries: list[TreeSummary]) -> tuple[set, list]:
    """Every path of the aligned trees (whether its row is sent or not), and the containers
    among them (the root is a row only when it is a leaf)."""
    paths: set = set()
    containers: dict = {}  # in order, each once
    for summary in summaries:
        nodes = summary.nodes or list(summary.root.walk())
        if nodes[0].leaf is not None:
            paths.add(nodes[0].path)
            continue
        paths.update([n.path for n in nodes[1:]])
        containers.update(dict.fromkeys(n.path for n in nodes[1:] if n.leaf is None))
    return paths, list(containers)


def _ancestors(summaries: list[TreeSummary], path: str) -> list[str]:
    """The containers above `path` (top first) in the first tree that has it: found by walking
    down the children whose paths begin the path (a keystr is its parent's plus one piece)."""
    for summary in summaries:
        stack: list[tuple[Node, list[str]]] = [(child, []) for child in summary.root.children]
        while stack:
            node, above = stack.pop()
            if node.path == path:
                return above
            if node.children and path.startswith(node.path):
                stack.extend((child, above + [node.path]) for child in node.children)
    return []


def _status(cells: list, is_leaf: int) -> str:
    if None in cells:
        return "missing"
    if len({"i" in c for c in cells}) > 1:
        return "kind"
    types = {c["ty"] for c in cells}
    if len(types) == 1 or not is_leaf:
        return "ok"
    return "shape" if len({t.partition("[")[2] for t in types}) > 1 else "dtype"


# Why a row is marked (the same words as the page's tooltips, static/diagram.js STATUS_TEXT).
_STATUS_TEXT = {
    "missing": "missing in one tree",
    "shape": "shapes differ",
    "dtype": "dtypes differ",
    "kind": "leaf in one tree, container in another",
}


def _unknown_path_message(path: str, paths: set, summaries: list | tuple = ()) -> str:
    shown = path if len(path) <= 80 else path[:79] + "…"
    close = _closest_path(path, paths, summaries)
    hint = " The diagram shows no paths yet."
    if close:
        hint = f" Did you mean {close[0]}?"
    elif paths:
        hint = f" Paths are keystr strings such as {min(paths, key=len)}."
    return f"selected_path {shown!r} is not a path in these trees, so the selection is unchanged.{hint}"


def _closest_path(path: str, paths: set, summaries: list | tuple) -> list[str]:
    """The known path most like `path`, in a list (empty when none is close). A big tree is walked
    down piece by piece, difflib asked about one node's children at a time: over all 15,000
    paths of a 10k-leaf model at once it takes a second."""
    import difflib

    if len(paths) <= 2_000 or not summaries:
        return difflib.get_close_matches(path, sorted(paths), n=1, cutoff=0.6) if len(paths) <= 20_000 else []
    root = node = summaries[0].root
    for piece in _split_path(path):
        if not node.children:
            break
        target = node.path + piece
        kids = {c.path: c for c in node.children}
        if target not in kids:
            found = difflib.get_close_matches(target, list(kids), n=1, cutoff=0.6)
            if not found:
                return []
            target = found[0]
        node = kids[target]
    return [node.path] if node is not root and node.path != path else []
