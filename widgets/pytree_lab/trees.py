"""The tree model: nodes, paths, leaves and `describe`.

Pure Python. Nothing here imports jax or numpy at module level, so a diagram of a plain-Python
tree works in a JupyterLite kernel that has neither. Paths are `jax.tree_util.keystr` strings
(``['layer']['weight']``); the children of built-in containers follow `jax.tree_util`
(dict keys sorted, ``None`` an empty node, namedtuple fields as attributes). Other node types
(registered dataclasses, optax states, ...) are asked of whichever tree library registered them.
"""

from __future__ import annotations

import functools
import math
import sys
import traceback
from typing import Any

from .formatting import fmt_number, visible
from .summaries import Later, summarise_arrays
from .tree_model import (  # the model's types, importable from here too (__all__)
    _FLOAT_DTYPES,
    MAX_DEPTH,
    Leaf,
    Node,
    TreeError,
    TreeSummary,
    _fatal,
    _NewLeaf,
    _Unreadable,
    _unreadable_message,
    element_labels,
    gc_paused,
    path_label,
)

__all__ = [
    "Leaf",
    "Node",
    "TreeSummary",
    "TreeError",
    "TreeTooDeepError",
    "check_tree",
    "jax_depth_limit",
    "describe",
    "element_labels",
    "path_label",
]

# --------------------------------------------------------------------------- the jax in use
# asked without importing any: `describe` on plain Python containers never loads jax or numpy


def active_tree_util() -> Any:
    """The tree library already imported in this kernel (never imported here): `jax.tree_util`
    (or the Lite engine installed as ``jax``), else pytree-lab-lite's `tree_util`, else None."""
    jax = sys.modules.get("jax")
    if jax is not None:
        return getattr(jax, "tree_util", None) or sys.modules.get("jax.tree_util")
    return sys.modules.get("pytree_lab_lite.tree_util")


def x64_enabled() -> bool:
    """`jax_enable_x64` of the jax in use (False when none is loaded, and for the Lite engine)."""
    jax = sys.modules.get("jax")
    try:
        return bool(jax.config.jax_enable_x64) if jax is not None else False
    except AttributeError:
        return False


# --------------------------------------------------------------------------- children


def _display_key(key: Any) -> str:
    """A dict key as the user reads it; look-alikes (`'a'` vs `'a '`) stay distinct."""
    if isinstance(key, str) and key and key == key.strip() and key.isprintable():
        return key
    return repr(key)


def _key_texts(key: Any) -> tuple[str, str]:
    """(path piece, label) of a dict key: `['weight']`, `weight`."""
    return f"[{key!r}]", _display_key(key)


# the same for a string key, remembered: a model repeats `weight`, `bias` thousands of times
_str_key_texts = functools.lru_cache(maxsize=50_000)(_key_texts)


_INDEX = [f"[{i}]" for i in range(64)]
_ATOMS = {float, int, bool, complex, str, bytes}


def _has_array_attrs(node: Any) -> bool:
    try:
        return hasattr(node, "shape") and hasattr(node, "dtype")
    except BaseException as err:  # a __getattr__ that raises something other than AttributeError
        if _fatal(err):
            raise
        raise _Unreadable("attributes", err) from err


def _flatten_one_level_with_path(tu: Any, node: Any) -> list[tuple[tuple, Any]]:
    """[(keypath, child), ...] of one level of a registered node: each child is a leaf.

    `is_leaf` says "not a leaf" to the root only: children are leaves, the node itself too if it
    is its own child (a cycle the walk reports; JAX's flatten would recurse until the interpreter
    gives up). Some JAX versions (0.4.30) walk the tree twice inside `tree_flatten_with_path`
    (a `tree_flatten`, then the key paths), so "the first call is the root" is not enough: a
    single-walk `tree_flatten` counts the children first, and then every (children + 1)-th call,
    the first of each walk, is the root's.
    """
    calls = [0]

    def first_call_only(x: Any) -> bool:
        calls[0] += 1
        return calls[0] != 1

    period = len(tu.tree_flatten(node, is_leaf=first_call_only)[0]) + 1
    seen = [0]

    def root_of_each_walk(x: Any) -> bool:
        i = seen[0]
        seen[0] += 1
        return i % period != 0

    return tu.tree_flatten_with_path(node, is_leaf=root_of_each_walk)[0]


def _dict_children(node: dict, type_name: str) -> tuple[str, str, list[tuple[str, str, Any]], list[int] | None]:
    """A dict's children in JAX's order (sorted keys), shown as written. Keys that cannot be
    sorted together (1 and "b"): JAX refuses such a dict, so the tree is refused here too."""
    try:
        keys = sorted(node)
    except TypeError as err:
        raise _Unreadable("sort", err) from err
    written = list(node)
    pieces = [(_str_key_texts(k) if type(k) is str else _key_texts(k)) + (node[k],) for k in keys]
    if keys == written:
        return "dict", type_name, pieces, None
    at = dict(zip(keys, range(len(keys))))
    return "dict", type_name, pieces, [at[k] for k in written]


def _children(node: Any) -> tuple[str, str, list[tuple[str, str, Any]], list[int] | None] | None:
    """(kind, type_name, [(path_piece, label, child), ...] in JAX order, the order they are shown
    in: their positions, None for the same); None for a leaf.

    Raises `_Unreadable` when the node's own code (a flatten, a key's repr or ordering, an
    attribute) raises.
    """
    t = type(node)
    if t in _ATOMS:
        return None
    if node is None:
        return "none", "None", [], None
    stage = "keys"
    try:
        if t is dict:
            return _dict_children(node, "dict")
        if t is list or t is tuple:
            return (
                t.__name__,
                t.__name__,
                [(_INDEX[i] if i < 64 else f"[{i}]",) * 2 + (c,) for i, c in enumerate(node)],
                None,
            )
        stage = "attributes"
        if isinstance(node, tuple) and hasattr(t, "_fields"):
            return "namedtuple", t.__name__, [(f".{f}", f, getattr(node, f)) for f in t._fields], None
        if isinstance(node, (str, bytes, int, float, complex, bool)) or _has_array_attrs(node):
            return None
        tu = active_tree_util()
        stage = "keys"
        if tu is None:
            return _dict_children(node, t.__name__) if isinstance(node, dict) else None  # a dict subclass
        stage = "flatten"
        flat = _flatten_one_level_with_path(tu, node)
        if len(flat) == 1 and flat[0][0] == () and flat[0][1] is node:
            return None
        stage = "keys"
        pieces, keys = [], []
        for keypath, child in flat:
            piece = tu.keystr(keypath)
            key: Any = keypath[-1] if keypath else None
            label = visible(piece)
            if hasattr(key, "key"):
                label = _display_key(key.key)
            elif hasattr(key, "name"):  # a field name, shown escaped: a newline would draw a fake row
                label = visible(str(key.name))
            pieces.append((piece, label, child))
            keys.append(getattr(key, "key", None))
        if not isinstance(node, dict):  # (a namedtuple was read above)
            return "custom", t.__name__, pieces, None
        rank = {k: i for i, k in enumerate(node)}  # a dict is shown as written
        ranks = [rank.get(k, i) for i, k in enumerate(keys)]
        return (
            "dict",
            t.__name__,
            pieces,
            None if ranks == sorted(ranks) else sorted(range(len(ranks)), key=ranks.__getitem__),
        )
    except _Unreadable:
        raise
    except BaseException as err:
        if _fatal(err):
            raise
        raise _Unreadable(stage, err) from err


# --------------------------------------------------------------------------- leaves


_NUMBERS = (bool, int, float, complex)
_SCALAR_DTYPES = ((bool, "bool", "bool"), (int, "int32", "int64"), (float, "float32", "float64"))


def _scalar_dtype(x: Any) -> str:
    """JAX's dtype of a Python number (`jax_enable_x64` decides the width)."""
    for t, narrow, wide in _SCALAR_DTYPES:
        if isinstance(x, t):
            return wide if x64_enabled() else narrow
    return "complex128" if x64_enabled() else "complex64"


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


def _leaf(path: str, x: Any, index: int, with_values: bool) -> Leaf:
    """A leaf that is no array: a number, a string, any other object."""
    if isinstance(x, _NUMBERS):
        summary = str(x) if isinstance(x, bool) else fmt_number(x)
        values = None if isinstance(x, complex) or not with_values else (float(x),)
        return Leaf(path, (), _scalar_dtype(x), 1, isinstance(x, float), summary, index, values)
    if isinstance(x, (str, bytes)):
        text = repr(x)
        if len(text) > 40:
            text = text[:37] + "…"
        return Leaf(path, (), "str", 1, False, text, index, None)
    text = f"{type(x).__name__} object"
    return Leaf(path, (), "object", 1, False, text, index, None)


# --------------------------------------------------------------------------- describe


def describe(tree: Any, name: str = "params", *, values: bool | str = True) -> TreeSummary:
    """Summarise a pytree: containers, leaves (in JAX flatten order), shapes, dtypes, counts.

    `values`: True summarises every leaf's values (`Leaf.summary`, `.values`, `.grid`); False
    none; ``"later"`` copies the values of small array leaves and formats them when
    `TreeSummary.show_values` asks (a diagram formats only the rows it sends to the page).

    >>> print(describe({"weight": [1.0, -1.0], "bias": 0.0}))  # doctest: +NORMALIZE_WHITESPACE
    params
    ├── weight
    │   ├── [0]: float32[]
    │   └── [1]: float32[]
    └── bias: float32[]
    3 leaves, 3 numerical parameter values
    """
    with gc_paused():
        return _describe(tree, name, values)[0]


def _describe(tree: Any, name: str, values: bool | str) -> tuple[TreeSummary, list]:
    """`describe`, and the leaves themselves (in the same order as its `leaves`)."""
    later = values == "later"
    values = bool(values)
    leaves: list = []
    objects: list = []
    root = Node("", name, "leaf", type(tree).__name__, 0)

    # Iterative depth-first walk in JAX order (deep trees must not hit the recursion limit).
    # `open_` holds the containers on the way from the root to the node being walked (id ->
    # (path, container), kept alive so its id stays its own): meeting one again is a cycle. A
    # (None, id) frame closes a container once its children are done. The same container twice
    # side by side is no cycle.
    stack: list[tuple[Any, Any]] = [(root, tree)]
    pop, push = stack.pop, stack.append
    open_: dict[int, tuple[str, Any]] = {}
    # array leaves whose values are summarised in batches: (node, array, shape, dtype, index);
    # their Leaf is made once, with its summary, after the walk
    pending: list[tuple[Node, Any, tuple, str, int]] = []
    array_types = _ARRAY_TYPES
    nodes: list[Node] = []
    seen = nodes.append
    while stack:
        node, obj = pop()
        if node is None:
            del open_[obj]
            continue
        seen(node)
        try:  # a numpy or jax array is a leaf: no questions to ask it
            kids = None if type(obj) in array_types else _children(obj)
        except _Unreadable as problem:
            raise TreeError(_unreadable_message(name + node.path, obj, problem), node.path) from problem.error
        if kids is None:
            node.kind = "leaf"
            objects.append(obj)
            try:
                if type(obj) in array_types:
                    shape, dtype = obj.shape, _dtype_name(obj.dtype)
                elif _has_array_attrs(obj) and (values or not isinstance(obj, _NUMBERS)):
                    # np.float64 is a Python number too
                    shape, dtype = ((), _scalar_dtype(obj)) if isinstance(obj, _NUMBERS) else _array_leaf_type(obj)
                else:
                    shape = None
                if shape is None:
                    leaf = _leaf(node.path, obj, len(leaves), values)
                elif values:  # summarised in one batch after the walk
                    pending.append((node, obj, shape, dtype, len(leaves)))
                    leaves.append(None)
                    continue
                else:
                    leaf = _NewLeaf(node.path, shape, dtype, math.prod(shape), dtype in _FLOAT_DTYPES, "", len(leaves))
                node.leaf = leaf
            except BaseException as err:
                if _fatal(err):
                    raise
                unreadable = err if isinstance(err, _Unreadable) else _Unreadable("leaf", err)
                raise TreeError(_unreadable_message(name + node.path, obj, unreadable), node.path) from unreadable.error
            leaves.append(leaf)
            continue
        node.kind, node.type_name, pieces, order = kids
        if not pieces:
            continue
        # the step into a container: its children in JAX order (flatten indices follow it), shown
        # in the order written; TreeError when it is open on the way down (a cycle) or too deep
        key = id(obj)
        if key in open_:
            raise TreeError(
                f"{name}{node.path} refers back to {name}{open_[key][0]}: a tree cannot contain "
                "itself (JAX would recurse forever); keep the reference outside the tree.",
                node.path,
            )
        if node.depth >= MAX_DEPTH:
            raise TreeError(
                f"{name}{node.path[:200]}… is more than {MAX_DEPTH} levels deep: is a node making "
                "new children without end?",
                node.path,
            )
        path, depth = node.path, node.depth + 1
        made = [
            (Node(path + piece, label, "leaf", type(child).__name__, depth), child) for piece, label, child in pieces
        ]
        node.children = [n for n, _ in made] if order is None else [made[k][0] for k in order]
        # only a container with containers inside can be part of a cycle: it is kept open
        if not all(type(child) in array_types or type(child) in _ATOMS or child is None for _, child in made):
            open_[key] = (path, obj)
            push((None, key))
        stack.extend(reversed(made))
    summary = TreeSummary(name, root, leaves, nodes=nodes)
    if pending:
        _fill_summaries(pending, leaves, summary.later if later else None)
    return summary, objects


# Types whose instances are array leaves (numpy's and jax's arrays, met once in a tree): the
# walk takes their shape and dtype without asking `_children` and `hasattr` about each one.
# Only the libraries' own types are remembered: their attributes do not vary by instance.
_ARRAY_TYPES: set = set()
_ARRAY_MODULES = ("numpy", "jaxlib", "jax")


def _array_leaf_type(x: Any) -> tuple[tuple, str]:
    """(shape, dtype name) of an array leaf; remembers numpy's and jax's array types."""
    shape = tuple(map(int, x.shape))
    dtype = _dtype_name(x.dtype)
    t = type(x)
    if (t.__module__ or "").partition(".")[0] in _ARRAY_MODULES and type(x.shape) is tuple:
        _ARRAY_TYPES.add(t)
    return shape, dtype


def _fill_summaries(pending: list[tuple[Node, Any, tuple, str, int]], leaves: list, later: dict | None) -> None:
    """Make the Leaf of each array leaf with its value summary (one batched pass). With `later`
    (a TreeSummary's), small leaves are copied now and their summaries made when shown."""
    items = [(obj, dtype, shape, math.prod(shape)) for _, obj, shape, dtype, _ in pending]
    found = summarise_arrays(items, later=later is not None)
    for (node, _, shape, dtype, index), made in zip(pending, found):
        if type(made) is Later:
            later[index] = (node, made)  # type: ignore[index]  # a Later only when `later` is given
            made = ("", None, None)
        summary, vals, grid = made
        node.leaf = leaves[index] = _NewLeaf(
            node.path, shape, dtype, math.prod(shape), dtype in _FLOAT_DTYPES, summary, index, vals, grid
        )


class TreeTooDeepError(TreeError, RecursionError):
    """A tree nested deeper than JAX's tree functions can flatten from here (they recurse, and
    stop at Python's recursion limit). A RecursionError too: that is what JAX would have raised."""


# Calls between the check and JAX's own flatten (a grader, the guard, a tree.map callback)
JAX_DEPTH_MARGIN = 100


def jax_depth_limit() -> int:
    """The deepest tree (levels of containers) JAX's tree functions can flatten when called from
    here: Python's recursion limit, less the frames already on the stack and a margin for the
    calls in between. JAX's flatten recurses once per level; past the limit it raises (with a
    Python callback, `is_leaf`, it also leaves the interpreter's recursion count broken)."""
    depth = sum(1 for _ in traceback.walk_stack(sys._getframe()))  # frames on the stack, this one included
    return max(0, sys.getrecursionlimit() - depth - JAX_DEPTH_MARGIN)


def check_tree(tree: Any, name: str = "params") -> None:
    """Raise `TreeError` (path named) for a tree JAX must not be handed: one that contains itself
    (``g['layer']['bias'] refers back to g``), whose nodes raise, or that is nested deeper than
    JAX's tree functions can flatten from here (`TreeTooDeepError`). Every entry point that gives
    a user's tree to JAX calls it first: JAX's own recursion on such a tree exhausts the
    interpreter instead of failing."""
    summary = _describe(tree, name, values=False)[0]
    limit = jax_depth_limit()
    deepest = max(summary.nodes, key=lambda node: node.depth, default=None)
    if deepest is not None and deepest.depth > limit:
        where = deepest.path if len(deepest.path) <= 60 else deepest.path[:30] + "…" + deepest.path[-24:]
        raise TreeTooDeepError(
            f"{name} is {deepest.depth} levels deep (down to {name}{where}): more than JAX's tree functions "
            f"can flatten here (they stop at Python's recursion limit, {sys.getrecursionlimit()}; about "
            f"{limit} levels fit). Nest it less deeply.",
            deepest.path,
        )
