"""The tree model's types: `Leaf`, `Node`, `TreeSummary` and `TreeError`; paths and labels:
`path_label` (``['layer']['w']`` -> ``layer/w``), `_split_path`, and the labels of a leaf's
elements (`element_labels`, ``w[0,1]``).

Pure Python, no jax or numpy. `describe` (trees.py) builds them; the diagram, the chart and the
worked calculation read them.
"""

from __future__ import annotations

import contextlib
import functools
import gc
import re
from collections.abc import Callable, Container, Iterable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, cast

from .formatting import index_text, short_error

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
    # Up to formatting.GRID_MAX values as floats (None for non-numeric leaves and for big leaves).
    values: tuple | None = None
    # A small matrix (2+ dimensions, up to formatting.GRID_MAX values) shown whole: its formatted values,
    # a row's separated by spaces, rows (the last axis across) by newlines. None otherwise.
    grid: str | None = None

    @property
    def type_label(self) -> str:
        """`float32[2]`, `float32[]`, `str` — the lesson's notation."""
        return dtype_shape_label(self.dtype, self.shape)


class _FastLeaf:
    """Makes a `Leaf` four times faster than its frozen constructor (which sets each field
    through object.__setattr__): the same slots, set plainly, then the object becomes a Leaf,
    frozen from then on. Used where a big model makes tens of thousands of them."""

    __slots__ = Leaf.__slots__

    def __init__(self, path, shape, dtype, size, differentiable, summary="", index=0, values=None, grid=None):
        self.path, self.shape, self.dtype, self.size, self.differentiable = path, shape, dtype, size, differentiable
        self.summary, self.index, self.values, self.grid = summary, index, values, grid
        self.__class__ = Leaf


_NewLeaf = cast("Callable[..., Leaf]", _FastLeaf)  # what it makes is a Leaf
try:  # a Python whose dataclass slots differ from these: the frozen constructor, as it is
    _NewLeaf("", (), "", 0, False)
except TypeError:
    _NewLeaf = Leaf


@functools.lru_cache(maxsize=4096)
def dtype_shape_label(dtype: str, shape: tuple) -> str:
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
    children: list[Node] = field(default_factory=list)
    leaf: Leaf | None = None

    def walk(self) -> Iterator[Node]:
        """This node and every node under it, in display order."""
        yield self
        for node, _, _ in self.below():
            yield node

    def below(self, opened: Container[str] | None = None) -> Iterator[tuple[Node, str, bool]]:
        """(node, parent path, last of its parent's children) of the nodes under this one, in
        display order; with `opened`, only the top level and the children of containers in it."""
        stack: list[tuple[Node, str | None, bool]] = [(self, None, True)]
        while stack:
            node, parent, last = stack.pop()
            if parent is not None:
                yield node, parent, last
            kids = node.children
            if kids and (parent is None or opened is None or node.path in opened):
                end = len(kids) - 1
                stack.extend([(kid, node.path, k == end) for k, kid in enumerate(kids)][::-1])


@dataclass
class TreeSummary:
    """What `describe` finds: the node tree plus its leaves in JAX flatten order."""

    name: str
    root: Node
    leaves: list[Leaf]
    # "params" (trainable: non-float leaves are flagged) or "state" (optimizer state, metadata:
    # integer step counts are expected there and not flagged)
    role: str = "params"
    # describe(values="later"): flatten index -> (node, Later) of each leaf whose values were
    # copied but not yet formatted (its Leaf has summary "" until `show_values` formats it)
    later: dict = field(default_factory=dict, repr=False, compare=False)
    # every node describe made, root first, in its walk's (JAX) order; empty for a summary made
    # another way (walk `root` then)
    nodes: list = field(default_factory=list, repr=False, compare=False)

    def show_values(self, indices: Any = None) -> None:
        """Format the values `describe(values="later")` copied, of these leaves (flatten
        indices) or of all: their Leaf, here and on their node, gets its summary, values and grid."""
        later = self.later
        if not later:
            return
        picked = list(later) if indices is None else [i for i in indices if i in later]
        groups: dict[int, tuple[Any, list]] = {}
        for i in picked:
            node, spot = later.pop(i)
            groups.setdefault(id(spot.group), (spot.group, []))[1].append((i, node, spot.row))
        for group, members in groups.values():
            for (i, node, _), (summary, vals, grid) in zip(members, group.found([row for *_, row in members])):
                old = self.leaves[i]
                node.leaf = self.leaves[i] = _NewLeaf(
                    old.path, old.shape, old.dtype, old.size, old.differentiable, summary, i, vals, grid
                )

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

    def counts_line(self, noun: str = "numerical parameter") -> str:
        """`2 leaves, 3 numerical parameter values`; `noun` names what a column's values are
        (a gradient or an optimizer's moment tree has the params' leaves but no parameters)."""
        n, v = self.num_leaves, self.num_values
        if self.role != "params":
            total = sum(leaf.size for leaf in self.leaves if leaf.dtype not in ("str", "object"))
            return f"{n} {'leaf' if n == 1 else 'leaves'}, {total} value{'' if total == 1 else 's'}"
        line = f"{n} {'leaf' if n == 1 else 'leaves'}, {v} {noun} value{'' if v == 1 else 's'}"
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
            rows = self.root.below()
            lines += tree_lines(((n.path, parent, last, self._line(n)) for n, parent, last in rows), max_lines)
        if len(lines) > max_lines:
            n = self.num_leaves
            lines = lines[:max_lines] + [f"… ({n} {'leaf' if n == 1 else 'leaves'} in all)"]
        lines.append(self.counts_line())
        return "\n".join(lines)

    def _line(self, node: Node) -> str:
        if node.leaf is None:
            return node.label + ("" if node.children else " (empty)")
        nd = "" if node.leaf.differentiable or self.role != "params" else " (not differentiable)"
        return f"{node.label}: {node.leaf.type_label}{nd}"

    def __str__(self) -> str:
        return self.text()

    def in_order_of(self, order: TreeSummary) -> TreeSummary:
        """The same summary with children shown in `order`'s display order where paths match
        (e.g. a tree JAX returned with sorted dict keys, shown as the user wrote the params)."""
        self.show_values()  # the copy's nodes are new: values left for later are made now
        rank: dict[str, int] = {}
        for node in order.root.walk():
            for i, child in enumerate(node.children):
                rank[child.path] = i
        big = len(rank) + 1
        root = replace(self.root)
        stack = [root]
        while stack:  # copies, sorted stably: unknown paths keep their place at the end
            node = stack.pop()
            node.children = sorted((replace(c) for c in node.children), key=lambda c: rank.get(c.path, big))
            stack.extend(node.children)
        return TreeSummary(self.name, root, self.leaves)


@contextlib.contextmanager
def gc_paused():
    """Pause Python's cyclic GC while a tree model is built.

    Everything built here is acyclic (freed by reference counting), yet its many small objects
    trigger full collections, which in a kernel holding jax walk every object it has: for 10,000
    leaves that costs as much as the build itself.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


class TreeError(ValueError):
    """A tree that cannot be described: it contains itself, or its own code raised.

    `path` is the keystr of the node at fault (``""`` for the root); the message names it
    after the tree's name: ``params['self'] refers back to params``.
    """

    def __init__(self, message: str, path: str = ""):
        super().__init__(message)
        self.path = path


# A custom node that makes new children forever has no cycle to find: stop at this depth.
MAX_DEPTH = 10_000


# what `_Unreadable.stage` was doing, said after "{where}: "
_UNREADABLE = {
    "flatten": "flattening this {kind} raised {err}; its registered flatten function failed.",
    "attributes": "this {kind} raised {err} when its attributes were read (a __getattr__ that raises).",
    "leaf": "this {kind} leaf raised {err} when its shape and dtype were read.",
    "sort": "this {kind}'s keys cannot be sorted ({err}). JAX sorts a dict's keys to flatten it, so it "
    "refuses this one: use keys of one type (all strings, say).",
    "keys": "a key of this {kind} raised {err} when it was written as a path (its repr or ordering).",
}


def _unreadable_message(where: str, obj: Any, problem: _Unreadable) -> str:
    text = _UNREADABLE.get(problem.stage, _UNREADABLE["keys"])
    return f"{where}: " + text.format(kind=type(obj).__name__, err=short_error(problem.error, 200))


class _Unreadable(Exception):
    """User code inside a node (its flatten, a key's repr, an attribute) raised: `stage` says
    what was being done, `error` is what it raised."""

    def __init__(self, stage: str, error: BaseException):
        super().__init__(stage)
        self.stage, self.error = stage, error


def tree_lines(items: Iterable[tuple[str, str | None, bool, str]], max_lines: int) -> list[str]:
    """The lesson's tree lines (`├── weight: float32[2]`, `│   └── bias`), the one text renderer
    of a tree (TreeSummary.text, PytreeDiagram.text): items are (path, parent path or None for a
    root, last of its parent's children, text), each after its parent; at most `max_lines` + 1
    lines. Very deep prefixes keep their last levels (`[3 levels] │   ...`)."""
    prefixes: dict[str | None, str] = {None: "", "": ""}
    out: list[str] = []
    for path, parent, last, text in items:
        above = prefixes.get(parent, "")
        prefixes[path] = above + ("    " if last else "│   ")
        if len(above) > _MAX_INDENT:
            above = f"[{(len(above) - _MAX_INDENT) // 4} levels] " + above[-_MAX_INDENT:]
        out.append(text if parent is None else f"{above}{'└── ' if last else '├── '}{text}")
        if len(out) > max_lines:
            break
    return out


def under(leaf_path: str, path: str) -> bool:
    """Whether the leaf at `leaf_path` is `path` or inside the container at `path` (keystr paths;
    "" is the root): `['a']` holds `['a']['w']` and `['a'][0]`, not `['ab']`."""
    return leaf_path == path or (leaf_path.startswith(path) and leaf_path[len(path) :][:1] in ("[", "."))


def _fatal(err: BaseException) -> bool:
    """Errors that must not be caught: the person interrupted the kernel. Everything else a
    tree's own code raises (SystemExit and other BaseExceptions included) is reported."""
    return isinstance(err, KeyboardInterrupt)


def path_label(path: str, root: str = "params") -> str:
    """A short label from a keystr: `['layer']['weight']` -> `layer/weight`, `[0]['w']` -> `[0]/w`;
    `root` names the root (path "")."""
    text = ""
    for piece in _split_path(path):
        if piece.startswith("[") and not piece.startswith(("['", '["')):
            text += piece  # an index: `[0]`
        else:  # a key or attribute name: `['w']`, `.first`
            text += "/" + (piece[2:-2] if piece.startswith("[") else piece.removeprefix("."))
    return text.removeprefix("/") or root


_QUOTED = r"""'(?:\\.|[^'\\])*'|"(?:\\.|[^"\\])*\""""
# a keystr's piece: `[...]` (with quoted strings and brackets inside), `.name`, or the rest as it is
_PIECE = re.compile(rf"""\[(?>{_QUOTED}|\[(?>{_QUOTED}|[^\]])*+\]|[^\]])*+\]|\.[^.\[]*|.+""", re.S)


def _split_path(path: str) -> list[str]:
    """Split a keystr into its pieces, respecting quotes inside brackets."""
    return _PIECE.findall(path)


class ElementLabels(Sequence):
    """The labels of a leaf's elements, made on demand: `weight[0]`, `w[0,1]`, `bias`.

    A 10^7-element leaf has 10^7 labels, and a view shows a couple of dozen: iterating,
    indexing or slicing makes only the labels asked for. Equal to the list of all labels.
    """

    __slots__ = ("base", "shape", "size")

    def __init__(self, base: str, shape: tuple, size: int):
        self.base, self.shape, self.size = base, shape, size

    def __len__(self) -> int:
        return self.size if self.shape else 1

    def __getitem__(self, k):
        flat = range(len(self))[k]  # the positions asked for (IndexError past either end)
        if isinstance(k, slice):
            return [self[i] for i in flat]
        return f"{self.base}[{index_text(flat, self.shape)}]" if self.shape else self.base

    def __eq__(self, other: object) -> bool:
        return list(self) == list(other) if isinstance(other, (list, tuple, ElementLabels)) else NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"ElementLabels({self[:3]}{'…' if len(self) > 3 else ''}, {len(self)} labels)"


def element_labels(leaf: Leaf, limit: int | None = None) -> ElementLabels | list[str]:
    """One label per element of a leaf: `weight[0]`, `weight[1]`, `bias`, `w[0,1]`.

    Lazy (labels are made as they are read); `limit` gives a list of at most that many.
    """
    labels = ElementLabels(path_label(leaf.path, ""), leaf.shape, leaf.size)
    return labels if limit is None else labels[:limit]
