"""The tree model: nodes, paths, leaf summaries, alignment and diagnosis.

Pure Python. Nothing here imports jax or numpy at module level, so a diagram of a plain-Python
tree works in a JupyterLite kernel that has neither. Paths are `jax.tree_util.keystr` strings
(``['layer']['weight']``); the children of built-in containers follow `jax.tree_util`
(dict keys sorted, ``None`` an empty node, namedtuple fields as attributes). Other node types
(registered dataclasses, optax states, ...) are asked of whichever tree library registered them.
"""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass, field
from typing import Any, Iterator

__all__ = [
    "Leaf",
    "Node",
    "TreeSummary",
    "Diagnosis",
    "describe",
    "diagnose",
    "element_labels",
    "path_label",
]

# Leaves at or below this many values have their values shown; bigger ones are summarised.
SMALL_LEAF = 8
_FLOAT_DTYPES = {"float16", "bfloat16", "float32", "float64"}


# --------------------------------------------------------------------------- model


@dataclass(frozen=True)
class Leaf:
    """One leaf of a tree: where it is and what it holds."""

    path: str
    shape: tuple
    dtype: str
    size: int
    differentiable: bool
    summary: str = ""
    index: int = 0  # position in JAX flatten order
    # Up to SMALL_LEAF values as floats (None for non-numeric leaves and for big leaves).
    values: tuple | None = None

    @property
    def type_label(self) -> str:
        """`float32[2]`, `float32[]`, `str` — the lesson's notation."""
        if self.dtype in ("str", "object"):
            return self.dtype
        return f"{self.dtype}[{','.join(str(d) for d in self.shape)}]"


@dataclass
class Node:
    """A container or a leaf, with its children in the order the user wrote them."""

    path: str
    label: str  # the last key: `weight`, `[0]`, `scale`
    kind: str  # dict | list | tuple | namedtuple | none | custom | leaf
    type_name: str
    depth: int
    children: list["Node"] = field(default_factory=list)
    leaf: Leaf | None = None

    def walk(self) -> Iterator["Node"]:
        stack = [self]
        while stack:
            node = stack.pop()
            yield node
            stack.extend(reversed(node.children))


@dataclass
class TreeSummary:
    """What `describe` finds: the node tree plus its leaves in JAX flatten order."""

    name: str
    root: Node
    leaves: list[Leaf]

    @property
    def num_leaves(self) -> int:
        return len(self.leaves)

    @property
    def num_values(self) -> int:
        """Numerical parameter values: the elements of the differentiable leaves."""
        return sum(leaf.size for leaf in self.leaves if leaf.differentiable)

    @property
    def non_differentiable(self) -> list[Leaf]:
        return [leaf for leaf in self.leaves if not leaf.differentiable]

    def leaf(self, path: str) -> Leaf | None:
        for leaf in self.leaves:
            if leaf.path == path:
                return leaf
        return None

    def counts_line(self) -> str:
        n, v = self.num_leaves, self.num_values
        line = f"{n} {'leaf' if n == 1 else 'leaves'}, {v} numerical parameter value{'' if v == 1 else 's'}"
        bad = self.non_differentiable
        if bad:
            names = ", ".join(f"{leaf.path} ({leaf.type_label})" for leaf in bad[:3])
            more = f" and {len(bad) - 3} more" if len(bad) > 3 else ""
            line += f"; not differentiable: {names}{more}"
        return line

    def text(self, max_lines: int = 200) -> str:
        """The lesson's text diagram (`params`, `├── weight: float32[2]`, ..., the counts line)."""
        lines = [self.name]

        def emit(node: Node, prefix: str) -> None:
            for i, child in enumerate(node.children):
                if len(lines) > max_lines:
                    return
                last = i == len(node.children) - 1
                branch = "└── " if last else "├── "
                if child.leaf is not None:
                    extra = "" if child.leaf.differentiable else " (not differentiable)"
                    lines.append(f"{prefix}{branch}{child.label}: {child.leaf.type_label}{extra}")
                else:
                    empty = " (empty)" if not child.children else ""
                    lines.append(f"{prefix}{branch}{child.label}{empty}")
                    emit(child, prefix + ("    " if last else "│   "))

        if self.root.leaf is not None:
            lines[0] = f"{self.name}: {self.root.leaf.type_label}"
        else:
            emit(self.root, "")
        if len(lines) > max_lines:
            lines = lines[:max_lines] + [f"… ({self.num_leaves} leaves in all)"]
        lines.append(self.counts_line())
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.text()


# --------------------------------------------------------------------------- children


def _jax_tree_util():
    """The tree library that may know custom nodes: real jax if in use, else the Lite one."""
    jax = sys.modules.get("jax")
    if jax is not None:
        return jax.tree_util
    lite = sys.modules.get("pytree_lab.compat.tree_util")
    return lite


def _is_namedtuple(x: Any) -> bool:
    return isinstance(x, tuple) and hasattr(type(x), "_fields")


def _dict_key(key: Any) -> str:
    return f"[{key!r}]"


def _display_key(key: Any) -> str:
    """A dict key as the user reads it; look-alikes (`'a'` vs `'a '`) stay distinct."""
    if isinstance(key, str):
        if key and key == key.strip() and key.isprintable():
            return key
    return repr(key)


def _sorted_keys(d: dict) -> list:
    try:
        return sorted(d)
    except TypeError:
        # jax refuses unorderable mixed keys too; keep a deterministic order for display.
        return sorted(d, key=lambda k: (type(k).__name__, repr(k)))


def _children(node: Any) -> tuple[str, str, list[tuple[str, str, int, Any]]] | None:
    """(kind, type_name, [(path_piece, label, display_rank, child), ...]) in JAX order; None for a leaf."""
    t = type(node)
    if node is None:
        return "none", "None", []
    if t is dict:
        keys = _sorted_keys(node)
        rank = {k: i for i, k in enumerate(node)}
        return "dict", "dict", [(_dict_key(k), _display_key(k), rank[k], node[k]) for k in keys]
    if t is list or t is tuple:
        pieces = [(f"[{i}]", f"[{i}]", i, c) for i, c in enumerate(node)]
        return t.__name__, t.__name__, pieces
    if _is_namedtuple(node):
        return "namedtuple", t.__name__, [(f".{f}", f, i, getattr(node, f)) for i, f in enumerate(t._fields)]
    if isinstance(node, (str, bytes, int, float, complex, bool)) or (
        hasattr(node, "shape") and hasattr(node, "dtype")
    ):
        return None
    tu = _jax_tree_util()
    if tu is None:
        if isinstance(node, dict):  # dict subclasses, without jax: as a dict
            keys = _sorted_keys(node)
            rank = {k: i for i, k in enumerate(node)}
            return "dict", t.__name__, [(_dict_key(k), _display_key(k), rank[k], node[k]) for k in keys]
        return None
    # One level of any registered node: every child is treated as a leaf.
    flat, _ = tu.tree_flatten_with_path(node, is_leaf=lambda x: x is not node)
    if len(flat) == 1 and flat[0][0] == () and flat[0][1] is node:
        return None
    pieces = []
    kind = "namedtuple" if _is_namedtuple(node) else ("dict" if isinstance(node, dict) else "custom")
    for i, (keypath, child) in enumerate(flat):
        piece = tu.keystr(keypath)
        key = keypath[-1] if keypath else None
        label = piece
        if hasattr(key, "key"):
            label = _display_key(key.key)
        elif hasattr(key, "name"):
            label = str(key.name)
        pieces.append((piece, label, i, child))
    if kind == "dict":
        rank = {k: i for i, k in enumerate(node)}
        pieces = [(p, lab, rank.get(getattr(kp[-1], "key", None), i), c)
                  for (p, lab, i, c), (kp, _) in zip(pieces, flat)]
    return kind, t.__name__, pieces


# --------------------------------------------------------------------------- leaves


def _fmt(v: float) -> str:
    if isinstance(v, float) and (math.isnan(v) or math.isinf(v)):
        return str(v)
    if v == 0:
        return "0"
    return f"{v:.4g}"


def _scalar_dtype(x: Any) -> str:
    if isinstance(x, bool):
        return "bool"
    if isinstance(x, int):
        return "int64" if _x64() else "int32"
    if isinstance(x, float):
        return "float64" if _x64() else "float32"
    if isinstance(x, complex):
        return "complex128" if _x64() else "complex64"
    return type(x).__name__


def _x64() -> bool:
    jax = sys.modules.get("jax")
    try:
        return bool(jax.config.jax_enable_x64) if jax is not None else False
    except AttributeError:
        return False


def _leaf(path: str, x: Any, index: int, with_values: bool = True) -> Leaf:
    if isinstance(x, (bool, int, float, complex)):
        dtype = _scalar_dtype(x)
        diff = isinstance(x, float)
        values = (float(x.real) if isinstance(x, complex) else float(x),) if with_values else None
        summary = repr(x) if isinstance(x, complex) else _fmt(float(x)) if not isinstance(x, bool) else str(x)
        return Leaf(path, (), dtype, 1, diff, summary, index, values if not isinstance(x, complex) else None)
    if isinstance(x, (str, bytes)):
        text = repr(x)
        if len(text) > 40:
            text = text[:37] + "…"
        return Leaf(path, (), "str", 1, False, text, index, None)
    if hasattr(x, "shape") and hasattr(x, "dtype"):
        shape = tuple(int(d) for d in x.shape)
        size = math.prod(shape)
        dtype = str(x.dtype)
        diff = dtype in _FLOAT_DTYPES
        summary, values = _array_summary(x, size, dtype) if with_values else ("", None)
        return Leaf(path, shape, dtype, size, diff, summary, index, values)
    text = f"{type(x).__name__} object"
    return Leaf(path, (), "object", 1, False, text, index, None)


def _array_summary(x: Any, size: int, dtype: str) -> tuple[str, tuple | None]:
    """Values for small leaves; count, mean, min, max for big ones. Computed here, never shipped whole."""
    import numpy as np  # an array leaf means numpy is there

    if size == 0:
        return "empty", ()
    kind = dtype[:1]
    if kind not in ("f", "i", "u", "b") and dtype != "bfloat16":
        return f"{dtype} values", None
    a = np.asarray(x)
    if size <= SMALL_LEAF:
        flat = a.astype(np.float64).ravel().tolist()
        if a.ndim == 0:
            return _fmt(flat[0]), tuple(flat)
        return "[" + ", ".join(_fmt(v) for v in flat) + "]", tuple(flat)
    af = a.astype(np.float64, copy=False).ravel()
    finite = np.isfinite(af)
    parts = []
    if finite.any():
        fv = af[finite] if not finite.all() else af
        parts.append(f"mean {_fmt(float(fv.mean()))}, min {_fmt(float(fv.min()))}, max {_fmt(float(fv.max()))}")
    bad = int(size - finite.sum())
    if bad:
        parts.append(f"{bad} non-finite")
    return "; ".join(parts), None


# --------------------------------------------------------------------------- describe


def describe(tree: Any, name: str = "params", *, values: bool = True) -> TreeSummary:
    """Summarise a pytree: containers, leaves (in JAX flatten order), shapes, dtypes, counts.

    >>> print(describe({"weight": [1.0, -1.0], "bias": 0.0}))  # doctest: +NORMALIZE_WHITESPACE
    params
    ├── weight
    │   ├── [0]: float32[]
    │   └── [1]: float32[]
    └── bias: float32[]
    3 leaves, 3 numerical parameter values
    """
    leaves: list[Leaf] = []
    root = Node("", name, "leaf", type(tree).__name__, 0)

    # Iterative depth-first walk in JAX order (deep trees must not hit the recursion limit).
    stack: list[tuple[Node, Any]] = [(root, tree)]
    while stack:
        node, obj = stack.pop()
        kids = _children(obj)
        if kids is None:
            node.kind = "leaf"
            node.leaf = _leaf(node.path, obj, len(leaves), values)
            leaves.append(node.leaf)
            continue
        node.kind, node.type_name, pieces = kids
        made = []
        for piece, label, rank, child in pieces:
            made.append((rank, Node(node.path + piece, label, "leaf", type(child).__name__, node.depth + 1), child))
        # Children are walked in JAX order (for flatten indices) but displayed as written.
        node.children = [n for _, n, _ in sorted(made, key=lambda t: t[0])]
        stack.extend((n, c) for _, n, c in reversed(made))
    return TreeSummary(name, root, leaves)


def path_label(path: str) -> str:
    """A short label from a keystr: `['layer']['weight']` -> `layer/weight`, `[0]['w']` -> `[0]/w`."""
    out = []
    for piece in _split_path(path):
        if piece.startswith("['") or piece.startswith('["'):
            out.append("/" + piece[2:-2])
        elif piece.startswith("."):
            out.append("/" + piece[1:])
        elif piece.startswith("["):
            out.append(piece)
        else:
            out.append("/" + piece)
    text = "".join(out)
    return text[1:] if text.startswith("/") else text


def _split_path(path: str) -> list[str]:
    """Split a keystr into its pieces, respecting quotes inside brackets."""
    pieces, i, n = [], 0, len(path)
    while i < n:
        c = path[i]
        if c == "[":
            j, quote, depth = i + 1, None, 1
            while j < n:
                ch = path[j]
                if quote:
                    if ch == "\\":
                        j += 1
                    elif ch == quote:
                        quote = None
                elif ch in "'\"":
                    quote = ch
                elif ch == "[":
                    depth += 1
                elif ch == "]":
                    depth -= 1
                    if depth == 0:
                        break
                j += 1
            pieces.append(path[i : j + 1])
            i = j + 1
        elif c == ".":
            j = i + 1
            while j < n and path[j] not in ".[":
                j += 1
            pieces.append(path[i:j])
            i = j
        else:
            pieces.append(path[i:])
            break
    return pieces


def element_labels(leaf: Leaf) -> list[str]:
    """One label per element of a leaf: `weight[0]`, `weight[1]`, `bias`, `w[0,1]`."""
    base = path_label(leaf.path)
    if not leaf.shape:
        return [base]
    labels = []
    for flat in range(leaf.size):
        idx, rem = [], flat
        for d in reversed(leaf.shape):
            idx.append(rem % d)
            rem //= d
        labels.append(f"{base}[{','.join(str(i) for i in reversed(idx))}]")
    return labels


# --------------------------------------------------------------------------- diagnose


@dataclass(frozen=True)
class Diagnosis:
    """The first difference between two trees, in the order the lesson teaches."""

    ok: bool
    kind: str | None = None  # None | "structure" | "shape" | "dtype"
    path: str = ""
    message: str = "The trees match: same structure, leaf paths, shapes and dtypes."

    def __bool__(self) -> bool:
        return self.ok


def _where(path: str) -> str:
    return path if path else "the root"


def diagnose(
    reference: Any,
    candidate: Any,
    *,
    reference_name: str = "params",
    candidate_name: str = "the gradient tree",
) -> Diagnosis:
    """Compare two trees: structure, then leaf paths, then shapes, then dtypes.

    Equal-shaped leaves that were swapped are not caught here (nothing structural differs):
    that is why the lesson compares with an independently known update.
    """
    ref = describe(reference, reference_name, values=False)
    cand = describe(candidate, candidate_name, values=False)
    ref_name, cand_name = reference_name, candidate_name

    # 1. structure and leaf paths: walk both node trees together.
    stack = [(ref.root, cand.root)]
    while stack:
        a, b = stack.pop()
        if a.kind != b.kind or (a.kind != "leaf" and a.type_name != b.type_name and a.kind == "custom"):
            what_a = "a leaf" if a.kind == "leaf" else f"a {a.type_name}"
            what_b = "a leaf" if b.kind == "leaf" else f"a {b.type_name}"
            return Diagnosis(
                False, "structure", a.path,
                f"At {_where(a.path)}, {ref_name} has {what_a} but {cand_name} has {what_b}: "
                "the containers must agree before any leaves can be paired.",
            )
        if a.kind == "leaf":
            continue
        a_keys = {c.path: c for c in a.children}
        b_keys = {c.path: c for c in b.children}
        missing = [p for p in a_keys if p not in b_keys]
        extra = [p for p in b_keys if p not in a_keys]
        if missing or extra:
            if missing and extra:
                msg = (f"{cand_name.capitalize()} is missing {missing[0]} and has {extra[0]} instead: "
                       f"a renamed key is a different path, so {missing[0]} has no partner.")
                path = missing[0]
            elif missing:
                msg = (f"{cand_name.capitalize()} is missing {missing[0]}, which {ref_name} has: "
                       f"every leaf of {ref_name} needs a partner at the same path.")
                path = missing[0]
            else:
                msg = (f"{cand_name.capitalize()} has {extra[0]}, which {ref_name} does not have: "
                       "an extra path has no partner.")
                path = extra[0]
            return Diagnosis(False, "structure", path, msg)
        stack.extend((a_keys[p], b_keys[p]) for p in reversed(list(a_keys)))

    # 2. shapes, in JAX flatten order.
    for la, lb in zip(ref.leaves, cand.leaves):
        if la.shape != lb.shape:
            return Diagnosis(
                False, "shape", la.path,
                f"{_where(la.path)} has shape {la.shape} in {ref_name} but {lb.shape} in {cand_name}: "
                "a matching structure does not prove matching shapes, and broadcasting could hide this.",
            )
    # 3. dtypes.
    for la, lb in zip(ref.leaves, cand.leaves):
        if la.dtype != lb.dtype:
            return Diagnosis(
                False, "dtype", la.path,
                f"{_where(la.path)} is {la.dtype} in {ref_name} but {lb.dtype} in {cand_name}.",
            )
    return Diagnosis(True)


# --------------------------------------------------------------------------- alignment


def _cell(node: Node) -> dict:
    if node.leaf is not None:
        leaf = node.leaf
        cell = {"ty": leaf.type_label, "v": leaf.summary, "i": leaf.index}
        if not leaf.differentiable:
            cell["nd"] = 1
        return cell
    return {"ty": node.type_name, "n": len(node.children)}


def align(summaries: list[TreeSummary], order: TreeSummary | None = None) -> list[dict]:
    """Rows matched by path across trees, in the first tree's display order.

    `order` (optional) is a tree whose display order wins, e.g. the params as the user wrote
    them when the first tree came back from a JAX transformation with its dict keys sorted.

    Each row: ``p`` path, ``u`` parent path, ``l`` label, ``d`` depth, ``leaf`` (0/1),
    ``c`` one cell per tree (None where the path is missing), ``s`` status
    (``ok``, ``missing``, ``shape``, ``dtype``, ``kind``). The root container is not a row
    unless the whole tree is a single leaf.
    """
    rows: list[dict] = []
    index: dict[str, int] = {}
    n = len(summaries)
    seeded = order is not None
    for col, summary in enumerate(([order] if seeded else []) + list(summaries)):
        col -= seeded
        root = summary.root
        if root.leaf is not None:
            walk = [(root, None)]
        else:
            walk = []
            stack = [(c, "") for c in reversed(root.children)]
            while stack:
                node, parent = stack.pop()
                walk.append((node, parent))
                stack.extend((c, node.path) for c in reversed(node.children))
        for node, parent in walk:
            i = index.get(node.path)
            if i is None:
                row = {"p": node.path, "u": parent, "l": node.label, "d": node.depth,
                       "leaf": int(node.leaf is not None), "c": [None] * n}
                if col <= 0 or parent is None or parent not in index:
                    pos = len(rows)
                else:
                    # an extra path: place it at the end of its parent's subtree
                    pos = index[parent] + 1
                    prefix = parent
                    while pos < len(rows) and rows[pos]["p"].startswith(prefix) and rows[pos]["d"] > node.depth - 1:
                        pos += 1
                if pos == len(rows):
                    rows.append(row)
                    index[node.path] = pos
                else:
                    rows.insert(pos, row)
                    index = {r["p"]: k for k, r in enumerate(rows)}
                i = index[node.path]
            if col >= 0:
                rows[i]["c"][col] = _cell(node)
    if seeded:
        rows = [r for r in rows if any(c is not None for c in r["c"])]
    for row in rows:
        cells = row["c"]
        status = "ok"
        if any(c is None for c in cells):
            status = "missing"
        else:
            kinds = {("i" in c) for c in cells}
            if len(kinds) > 1:
                status = "kind"
            elif row["leaf"]:
                shapes = {c["ty"].partition("[")[2] for c in cells}
                dtypes = {c["ty"].partition("[")[0] for c in cells}
                if len(shapes) > 1:
                    status = "shape"
                elif len(dtypes) > 1:
                    status = "dtype"
        row["s"] = status
    return rows
