"""The tree model's types: `Leaf`, `Node`, `TreeSummary` and `TreeError`.

Pure Python, no jax or numpy. `describe` (trees.py) builds them; the diagram, the chart and the
worked calculation read them.
"""

from __future__ import annotations

import contextlib
import functools
import gc
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, cast

from .formatting import short_error

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
    # A small matrix (2+ dimensions, up to SMALL_LEAF values) shown whole: its formatted values,
    # a row's separated by spaces, rows (the last axis across) by newlines. None otherwise.
    grid: str | None = None

    @property
    def type_label(self) -> str:
        """`float32[2]`, `float32[]`, `str` — the lesson's notation."""
        return _type_label(self.dtype, self.shape)


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
    children: list[Node] = field(default_factory=list)
    leaf: Leaf | None = None

    def walk(self) -> Iterator[Node]:
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

            def items() -> Iterator[tuple[str, str | None, bool, str]]:
                stack: list[tuple[Node, str, bool]] = [(self.root, "", True)]  # depth-first, as written
                while stack:
                    node, parent, last = stack.pop()
                    kids = node.children
                    stack.extend((c, node.path, i == len(kids) - 1) for i, c in reversed(list(enumerate(kids))))
                    if node is self.root:
                        continue
                    if node.leaf is not None:
                        nd = "" if node.leaf.differentiable or self.role != "params" else " (not differentiable)"
                        yield node.path, parent, last, f"{node.label}: {node.leaf.type_label}{nd}"
                    else:
                        yield node.path, parent, last, node.label + ("" if kids else " (empty)")

            lines += tree_lines(items(), max_lines)
        if len(lines) > max_lines:
            n = self.num_leaves
            lines = lines[:max_lines] + [f"… ({n} {'leaf' if n == 1 else 'leaves'} in all)"]
        lines.append(self.counts_line())
        return "\n".join(lines)

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


def _unreadable_message(where: str, obj: Any, problem: _Unreadable) -> str:
    kind = type(obj).__name__
    err = short_error(problem.error, 200)
    if problem.stage == "flatten":
        return f"{where}: flattening this {kind} raised {err}; its registered flatten function failed."
    if problem.stage == "attributes":
        return f"{where}: this {kind} raised {err} when its attributes were read (a __getattr__ that raises)."
    if problem.stage == "leaf":
        return f"{where}: this {kind} leaf raised {err} when its shape and dtype were read."
    if problem.stage == "sort":
        return (
            f"{where}: this {kind}'s keys cannot be sorted ({err}). JAX sorts a dict's keys to flatten "
            "it, so it refuses this one: use keys of one type (all strings, say)."
        )
    return f"{where}: a key of this {kind} raised {err} when it was written as a path (its repr or ordering)."


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
