"""The tree model: nodes, paths, leaf summaries, alignment and diagnosis.

Pure Python. Nothing here imports jax or numpy at module level, so a diagram of a plain-Python
tree works in a JupyterLite kernel that has neither. Paths are `jax.tree_util.keystr` strings
(``['layer']['weight']``); the children of built-in containers follow `jax.tree_util`
(dict keys sorted, ``None`` an empty node, namedtuple fields as attributes). Other node types
(registered dataclasses, optax states, ...) are asked of whichever tree library registered them.
"""

from __future__ import annotations

import contextlib
import functools
import gc
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
    "diagnose_summaries",
    "element_labels",
    "path_label",
]

# Leaves at or below this many values have their values shown; bigger ones are summarised.
SMALL_LEAF = 8
# Text diagrams indent at most this many characters (a 1,000-level tree stays readable).
_MAX_INDENT = 4 * 24
_FLOAT_DTYPES = {"float16", "bfloat16", "float32", "float64"}


# --------------------------------------------------------------------------- model


# slots: a 10k-leaf model makes tens of thousands of these; without a __dict__ each is
# smaller, faster to make and half the work for the cyclic GC.
@dataclass(frozen=True, slots=True)
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
        return _type_label(self.dtype, self.shape)


@functools.lru_cache(maxsize=4096)
def _type_label(dtype: str, shape: tuple) -> str:
    # cached: a big model repeats a handful of (dtype, shape) pairs thousands of times
    if dtype in ("str", "object"):
        return dtype
    return f"{dtype}[{','.join(map(str, shape))}]"


@dataclass(slots=True)
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
    # "params" (trainable: non-float leaves are flagged) or "state" (optimizer state, metadata:
    # integer step counts are expected there and not flagged)
    role: str = "params"

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

    def counts_line(self) -> str:
        n, v = self.num_leaves, self.num_values
        if self.role != "params":
            total = sum(leaf.size for leaf in self.leaves if leaf.dtype not in ("str", "object"))
            return f"{n} {'leaf' if n == 1 else 'leaves'}, {total} value{'' if total == 1 else 's'}"
        line = f"{n} {'leaf' if n == 1 else 'leaves'}, {v} numerical parameter value{'' if v == 1 else 's'}"
        bad = self.non_differentiable
        if bad:
            names = ", ".join(f"{leaf.path} ({leaf.type_label})" for leaf in bad[:3])
            more = f" and {len(bad) - 3} more" if len(bad) > 3 else ""
            line += f"; not differentiable: {names}{more}"
        return line

    def text(self, max_lines: int = 200) -> str:
        """The lesson's text diagram (`params`, `├── weight: float32[2]`, ..., the counts line).

        At most `max_lines` tree lines; iterative, so a 1,000-level tree does not hit the
        recursion limit.
        """
        lines = [self.name]
        if self.root.leaf is not None:
            lines[0] = f"{self.name}: {self.root.leaf.type_label}"
        else:
            # (children, next child index, prefix) frames: depth-first in display order
            stack = [(self.root.children, 0, "")]
            while stack and len(lines) <= max_lines:
                children, i, prefix = stack.pop()
                if i >= len(children):
                    continue
                stack.append((children, i + 1, prefix))
                child = children[i]
                last = i == len(children) - 1
                branch = "└── " if last else "├── "
                shown = prefix
                if len(prefix) > _MAX_INDENT:  # very deep trees: keep lines readable
                    shown = f"[{(len(prefix) - _MAX_INDENT) // 4} levels] " + prefix[-_MAX_INDENT:]
                if child.leaf is not None:
                    extra = "" if child.leaf.differentiable or self.role != "params" else " (not differentiable)"
                    lines.append(f"{shown}{branch}{child.label}: {child.leaf.type_label}{extra}")
                else:
                    empty = " (empty)" if not child.children else ""
                    lines.append(f"{shown}{branch}{child.label}{empty}")
                    stack.append((child.children, 0, prefix + ("    " if last else "│   ")))
        if len(lines) > max_lines:
            n = self.num_leaves
            lines = lines[:max_lines] + [f"… ({n} {'leaf' if n == 1 else 'leaves'} in all)"]
        lines.append(self.counts_line())
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.text()

    def in_order_of(self, order: "TreeSummary") -> "TreeSummary":
        """The same summary with children shown in `order`'s display order where paths match
        (e.g. a tree JAX returned with sorted dict keys, shown as the user wrote the params)."""
        rank: dict[str, int] = {}
        for node in order.root.walk():
            for i, child in enumerate(node.children):
                rank[child.path] = i
        big = len(rank) + 1

        def copy(node: Node) -> Node:
            return Node(node.path, node.label, node.kind, node.type_name, node.depth, list(node.children), node.leaf)

        root = copy(self.root)
        stack = [root]
        while stack:
            node = stack.pop()
            kids = [copy(c) for c in node.children]
            kids.sort(key=lambda c: rank.get(c.path, big))  # stable: unknown paths keep their place at the end
            node.children = kids
            stack.extend(kids)
        return TreeSummary(self.name, root, self.leaves)


@contextlib.contextmanager
def gc_paused():
    """Pause Python's cyclic GC while a tree model is built.

    Everything built here is acyclic (freed by reference counting), yet its many small objects
    trigger full collections, which in a kernel holding jax walk every object it has: for 10,000
    leaves that costs as much as the build itself.
    """
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


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


_INDEX = [f"[{i}]" for i in range(64)]
_ATOMS = {float, int, bool, complex, str, bytes}


def _children(node: Any) -> tuple[str, str, list[tuple[str, str, int, Any]]] | None:
    """(kind, type_name, [(path_piece, label, display_rank, child), ...]) in JAX order; None for a leaf."""
    t = type(node)
    if t in _ATOMS:
        return None
    if node is None:
        return "none", "None", []
    if t is dict:
        keys = _sorted_keys(node)
        rank = {k: i for i, k in enumerate(node)}
        return "dict", "dict", [(_dict_key(k), _display_key(k), rank[k], node[k]) for k in keys]
    if t is list or t is tuple:
        pieces = [(_INDEX[i] if i < 64 else f"[{i}]",) * 2 + (i, c) for i, c in enumerate(node)]
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
    if v != v or v == math.inf or v == -math.inf:
        return str(float(v))
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


_DTYPE_NAMES: dict = {}


def _dtype_name(dtype: Any) -> str:
    """`str(dtype)`, cached: numpy computes the name afresh on every call (slow for 10k leaves)."""
    try:
        return _DTYPE_NAMES[dtype]
    except KeyError:
        name = _DTYPE_NAMES[dtype] = str(dtype)
        return name
    except TypeError:  # an unhashable dtype-like object
        return str(dtype)


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
        shape = tuple(map(int, x.shape))
        size = math.prod(shape)
        dtype = _dtype_name(x.dtype)
        diff = dtype in _FLOAT_DTYPES
        summary, values = _array_summary(x, size, dtype) if with_values else ("", None)
        return Leaf(path, shape, dtype, size, diff, summary, index, values)
    text = f"{type(x).__name__} object"
    return Leaf(path, (), "object", 1, False, text, index, None)


def _host(x: Any, size: int) -> Any:
    """`x` as a numpy array, or None for array-likes that hold no values (jax.ShapeDtypeStruct
    from eval_shape, a tracer inside jit)."""
    import numpy as np

    try:
        a = np.asarray(x)
    except Exception:  # a tracer refuses conversion; its shape and dtype are still shown
        return None
    return a if a.dtype != object and a.size == size else None


def _array_summary(x: Any, size: int, dtype: str) -> tuple[str, tuple | None]:
    """Values for small leaves; count, mean, min, max for big ones. Computed here, never shipped whole."""
    import numpy as np  # an array leaf means numpy is there

    if size == 0:
        return "empty", ()
    kind = dtype[:1]
    if kind not in ("f", "i", "u", "b") and dtype != "bfloat16":
        return f"{dtype} values", None
    a = _host(x, size)
    if a is None:
        return "no values", None
    if size <= SMALL_LEAF:
        # .tolist() gives Python numbers directly (float32 -> the same float64 astype would give)
        flat = a.ravel().tolist() if kind == "f" and dtype != "bfloat16" else a.astype(np.float64).ravel().tolist()
        if a.ndim == 0:
            return _fmt(flat[0]), tuple(flat)
        return "[" + ", ".join(map(_fmt, flat)) + "]", tuple(flat)
    # Reduce in the leaf's own dtype (no float64 copy of a 10^7-element leaf); sum in float64.
    a = a.ravel()
    if a.dtype.kind == "b" or dtype == "bfloat16":
        a = a.astype(np.float32)
    finite = np.isfinite(a)
    bad = int(size - np.count_nonzero(finite))
    parts = []
    if bad < size:
        fv = a[finite] if bad else a
        parts.append(f"mean {_fmt(float(fv.mean(dtype=np.float64)))}, "
                     f"min {_fmt(float(fv.min()))}, max {_fmt(float(fv.max()))}")
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
    with gc_paused():
        return _describe(tree, name, values)


def _describe(tree: Any, name: str, values: bool) -> TreeSummary:
    leaves: list[Leaf] = []
    root = Node("", name, "leaf", type(tree).__name__, 0)

    # Iterative depth-first walk in JAX order (deep trees must not hit the recursion limit).
    stack: list[tuple[Node, Any]] = [(root, tree)]
    pop, push = stack.pop, stack.append
    pending: list[tuple[Node, Any]] = []  # array leaves whose values are summarised in batches
    while stack:
        node, obj = pop()
        kids = _children(obj)
        if kids is None:
            node.kind = "leaf"
            is_array = values and hasattr(obj, "shape") and hasattr(obj, "dtype")
            node.leaf = leaf = _leaf(node.path, obj, len(leaves), values and not is_array)
            leaves.append(leaf)
            if is_array:
                pending.append((node, obj))
            continue
        node.kind, node.type_name, pieces = kids
        path, depth = node.path, node.depth + 1
        made = [(rank, Node(path + piece, label, "leaf", type(child).__name__, depth), child)
                for piece, label, rank, child in pieces]
        # Children are walked in JAX order (for flatten indices) but displayed as written.
        if all(made[k][0] < made[k + 1][0] for k in range(len(made) - 1)):
            node.children = [n for _, n, _ in made]
        else:
            node.children = [n for _, n, _ in sorted(made, key=_first)]
        for k in range(len(made) - 1, -1, -1):
            push((made[k][1], made[k][2]))
    if pending:
        _summarise_arrays(pending, leaves)
    return TreeSummary(name, root, leaves)


def _summarise_arrays(pending: list[tuple[Node, Any]], leaves: list[Leaf]) -> None:
    """Fill in the value summaries of array leaves, leaves of one dtype and shape at a time.

    A model repeats a few shapes thousands of times: one numpy reduction over a stack of them
    costs far less than a handful of numpy calls per leaf.
    """
    import numpy as np

    groups: dict[tuple, list[tuple[Node, Any]]] = {}
    for node, obj in pending:
        leaf = node.leaf
        groups.setdefault((leaf.dtype, leaf.shape), []).append((node, obj))
    for (dtype, shape), members in groups.items():
        size = members[0][0].leaf.size
        kind = dtype[:1]
        numeric = kind in ("f", "i", "u", "b") or dtype == "bfloat16"
        hosts = [] if len(members) == 1 or size == 0 or not numeric or size > 4096 else [
            _host(obj, size) for _, obj in members]
        if not hosts or any(h is None for h in hosts):
            found = [_array_summary(obj, size, dtype) for _, obj in members]
        else:
            stacked = np.stack([h.reshape(size) for h in hosts])
            if size <= SMALL_LEAF:
                found = _small_summaries(stacked, dtype, len(shape) == 0)
            else:
                found = _big_summaries(stacked, dtype, [obj for _, obj in members])
        for (node, _), (summary, vals) in zip(members, found):
            leaf = node.leaf
            node.leaf = leaves[leaf.index] = Leaf(leaf.path, leaf.shape, leaf.dtype, leaf.size,
                                                  leaf.differentiable, summary, leaf.index, vals)


def _small_summaries(stacked: Any, dtype: str, scalar: bool) -> list[tuple[str, tuple]]:
    import numpy as np

    rows = (stacked if dtype[:1] == "f" and dtype != "bfloat16" else stacked.astype(np.float64)).tolist()
    if scalar:
        return [(_fmt(r[0]), (r[0],)) for r in rows]
    return [("[" + ", ".join(map(_fmt, r)) + "]", tuple(r)) for r in rows]


def _big_summaries(stacked: Any, dtype: str, objs: list) -> list[tuple[str, None]]:
    import numpy as np

    if stacked.dtype.kind == "b" or dtype == "bfloat16":
        stacked = stacked.astype(np.float32)
    all_finite = np.isfinite(stacked).all(axis=1).tolist()
    means = stacked.mean(axis=1, dtype=np.float64).tolist()
    lows = stacked.min(axis=1).tolist()
    highs = stacked.max(axis=1).tolist()
    out = []
    for k, ok in enumerate(all_finite):
        if ok:
            out.append((f"mean {_fmt(means[k])}, min {_fmt(lows[k])}, max {_fmt(highs[k])}", None))
        else:  # NaN or Inf inside: the per-leaf path counts them and summarises the rest
            out.append(_array_summary(objs[k], stacked.shape[1], dtype))
    return out


def _first(item: tuple) -> Any:
    return item[0]


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
    kind: str | None = None  # None | "structure" | "shape" | "dtype" (| "value" with diagnose(values=True))
    path: str = ""
    message: str = "The trees match: same structure, leaf paths, shapes and dtypes."

    def __bool__(self) -> bool:
        return self.ok


def _sentence(name: str) -> str:
    """`the gradient tree` -> `The gradient tree` (only the first letter: names keep their case)."""
    return name[:1].upper() + name[1:]


def _where(path: str) -> str:
    return path if path else "the root"


def diagnose(
    reference: Any,
    candidate: Any,
    *,
    reference_name: str = "params",
    candidate_name: str = "the gradient tree",
    values: bool = False,
) -> Diagnosis:
    """Compare two trees: structure, then leaf paths, then shapes, then dtypes.

    Equal-shaped leaves that were swapped are not caught by those checks (nothing structural
    differs): that is why the lesson compares with an independently known update. Pass
    ``values=True`` with such a reference (e.g. the hand-derived gradients) to compare leaf
    values last (kind ``"value"``); the message says when a value belongs at another path.
    """
    ref = describe(reference, reference_name, values=values)
    cand = describe(candidate, candidate_name, values=values)
    found = diagnose_summaries(ref, cand, reference_name, candidate_name)
    if not found.ok or not values:
        return found
    return _compare_values(reference, candidate, ref, cand, reference_name, candidate_name)


def diagnose_summaries(ref: TreeSummary, cand: TreeSummary, ref_name: str, cand_name: str) -> Diagnosis:
    """`diagnose` for trees already described (the diagram reuses its summaries)."""
    # 1. structure and leaf paths: walk both node trees together.
    stack = [(ref.root, cand.root)]
    while stack:
        a, b = stack.pop()
        if a.kind != b.kind or (a.type_name != b.type_name and a.kind in ("custom", "namedtuple")):
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
                msg = (f"{_sentence(cand_name)} is missing {missing[0]} and has {extra[0]} instead: "
                       f"a renamed key is a different path, so {missing[0]} has no partner.")
                path = missing[0]
            elif missing:
                msg = (f"{_sentence(cand_name)} is missing {missing[0]}, which {ref_name} has: "
                       f"every leaf of {ref_name} needs a partner at the same path.")
                path = missing[0]
            else:
                msg = (f"{_sentence(cand_name)} has {extra[0]}, which {ref_name} does not have: "
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


def leaf_objects(tree: Any) -> list:
    """The leaves themselves, in JAX flatten order (the same walk as `describe`)."""
    out, stack = [], [tree]
    while stack:
        obj = stack.pop()
        kids = _children(obj)
        if kids is None:
            out.append(obj)
        else:
            stack.extend(child for _, _, _, child in reversed(kids[2]))
    return out


def _values_close(a: Any, b: Any) -> bool:
    try:
        import numpy as np

        x, y = np.asarray(a), np.asarray(b)
        if x.dtype.kind in "fcuib" and y.dtype.kind in "fcuib":
            return x.shape == y.shape and bool(np.allclose(x, y, rtol=1e-5, atol=1e-6, equal_nan=True))
    except ImportError:  # plain Python leaves in a kernel without numpy
        if isinstance(a, (int, float)) and isinstance(b, (int, float)):
            return math.isclose(a, b, rel_tol=1e-5, abs_tol=1e-6)
    try:
        return bool(a == b)
    except Exception:  # an object whose == is not a truth value
        return a is b


def _compare_values(reference, candidate, ref: TreeSummary, cand: TreeSummary, ref_name, cand_name) -> Diagnosis:
    ra, ca = leaf_objects(reference), leaf_objects(candidate)
    for k, (la, lb) in enumerate(zip(ref.leaves, cand.leaves)):
        if _values_close(ra[k], ca[k]):
            continue
        got = lb.summary or lb.type_label
        message = f"{_where(la.path)} is {got} in {cand_name} but {la.summary or la.type_label} in {ref_name}."
        owner = next((other.path for j, other in enumerate(ref.leaves)
                      if j != k and other.shape == lb.shape and _values_close(ra[j], ca[k])), None)
        if owner is not None:
            message += (f" That is the value that belongs at {owner}: equal shapes do not say which parameter "
                        "a value belongs to, so keep each leaf on its path.")
        return Diagnosis(False, "value", la.path, message)
    return Diagnosis(True, message="The trees match: structure, leaf paths, shapes, dtypes and values.")


# --------------------------------------------------------------------------- alignment


def _cell(node: Node, flag: bool = True) -> dict:
    leaf = node.leaf
    if leaf is not None:
        cell = {"ty": _type_label(leaf.dtype, leaf.shape), "v": leaf.summary, "i": leaf.index}
        if flag and not leaf.differentiable:
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
    unless the whole tree is a single leaf. A path only some trees have comes after its
    siblings, at the end of its parent's subtree.
    """
    with gc_paused():
        return _align(summaries, order)


def _align(summaries: list[TreeSummary], order: TreeSummary | None) -> list[dict]:
    n = len(summaries)
    by_path: dict[str, dict] = {}
    top: list[dict] = []
    kids: dict[str, list[dict]] = {}
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
                if node.children:
                    path = node.path
                    stack.extend([(c, path) for c in reversed(node.children)])
        for node, parent in walk:
            row = by_path.get(node.path)
            if row is None:
                row = by_path[node.path] = {
                    "p": node.path, "u": parent, "l": node.label, "d": node.depth,
                    "leaf": int(node.leaf is not None), "c": [None] * n,
                }
                if parent is None or parent not in by_path:
                    top.append(row)
                else:
                    siblings = kids.get(parent)
                    if siblings is None:
                        siblings = kids[parent] = []
                        by_path[parent]["leaf"] = 0  # a leaf in one tree, a container in another
                    siblings.append(row)
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
        children = kids.get(row["p"])
        if children:
            stack.extend(reversed(children))
    if seeded:
        rows = [r for r in rows if any(c is not None for c in r["c"])]
    for row in rows:
        row["s"] = _status(row["c"], row["leaf"]) if n > 1 else "ok"
    return rows


def _status(cells: list, is_leaf: int) -> str:
    if None in cells:
        return "missing"
    first = cells[0]
    has_index = "i" in first
    ty = first["ty"]
    same = True
    for c in cells:
        if ("i" in c) != has_index:
            return "kind"
        if c["ty"] != ty:
            same = False
    if same or not is_leaf:
        return "ok"
    if len({c["ty"].partition("[")[2] for c in cells}) > 1:
        return "shape"
    return "dtype"
