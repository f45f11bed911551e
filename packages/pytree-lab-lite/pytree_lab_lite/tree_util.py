"""Pytrees with `jax.tree_util` semantics, in plain Python (the standard library only: the Lite
kernel has no jax, and the tree model works before numpy is loaded).

The rules follow `jax.tree_util` exactly, because students later move the same code to JAX:
``dict`` children in sorted key order (``defaultdict`` too; ``OrderedDict`` in insertion order);
``None`` a node with no children; list, tuple and namedtuples nodes (fields as ``.field``);
other subclasses of list/dict/tuple leaves; custom nodes from the `register_*` functions; trees
that do not match raise ``ValueError`` naming the key path and the difference.
"""

from __future__ import annotations

import collections
import dataclasses
import functools
from collections.abc import Callable, Iterable
from typing import Any, NamedTuple

__all__ = [
    "DictKey",
    "FlattenedIndexKey",
    "GetAttrKey",
    "KeyEntry",
    "KeyPath",
    "PyTreeDef",
    "SequenceKey",
    "all_leaves",
    "keystr",
    "register_dataclass",
    "register_pytree_node",
    "register_pytree_node_class",
    "register_pytree_with_keys",
    "register_pytree_with_keys_class",
    "register_static",
    "tree_all",
    "tree_flatten",
    "tree_flatten_with_path",
    "tree_leaves",
    "tree_leaves_with_path",
    "tree_map",
    "tree_map_with_path",
    "tree_reduce",
    "tree_structure",
    "tree_unflatten",
    "treedef_children",
    "treedef_is_leaf",
]


# --------------------------------------------------------------------------- key entries


def _key_class(name: str, field: str, text: str, doc: str) -> Any:
    """A key entry class as JAX's: a frozen dataclass of one field, printed on a path as `text`."""
    str_ = lambda self: text.format(getattr(self, field))  # noqa: E731
    namespace = {"__doc__": doc, "__module__": __name__, "__str__": str_, "_field": field}
    return dataclasses.make_dataclass(name, [(field, Any)], frozen=True, namespace=namespace)


DictKey = _key_class("DictKey", "key", "[{!r}]", "A dict key on a path; prints as ``['weight']``.")
SequenceKey = _key_class("SequenceKey", "idx", "[{}]", "A list/tuple position on a path; prints as ``[0]``.")
GetAttrKey = _key_class(
    "GetAttrKey", "name", ".{}", "An attribute (namedtuple or dataclass field) on a path; prints as ``.name``."
)
FlattenedIndexKey = _key_class(
    "FlattenedIndexKey",
    "key",
    "[<flat index {}>]",
    "A child of a custom node registered without keys; prints as ``[<flat index 0>]``.",
)
_KEY_CLASSES = (DictKey, SequenceKey, GetAttrKey, FlattenedIndexKey)
KeyEntry = Any
KeyPath = tuple


def keystr(keys: KeyPath, *, simple: bool = False, separator: str = "") -> str:
    """A key path as text: ``['layer']['weight']`` (or ``layer/weight`` with simple, '/')."""
    if not simple:
        return separator.join(map(str, keys))
    return separator.join(str(getattr(k, k._field)) if isinstance(k, _KEY_CLASSES) else str(k) for k in keys)


# --------------------------------------------------------------------------- registry


class _Registration(NamedTuple):
    # flatten(node) -> (children, aux); keyed(node) -> (((key, child), ...), aux)
    flatten: Callable[[Any], tuple]
    unflatten: Callable[[Any, Iterable], Any]
    keyed: Callable[[Any], tuple] | None


_registry: dict[type, _Registration] = {}


def register_pytree_node(
    nodetype: type,
    flatten_func: Callable[[Any], tuple[Iterable, Any]],
    unflatten_func: Callable[[Any, Iterable], Any],
    flatten_with_keys_func: Callable | None = None,
) -> None:
    """Make `nodetype` a tree node: ``flatten_func(x) -> (children, aux)``."""
    if nodetype in _registry or nodetype in (tuple, list, dict, type(None)):
        raise ValueError(f"Duplicate custom PyTreeDef type registration for {nodetype}.")
    _registry[nodetype] = _Registration(flatten_func, unflatten_func, flatten_with_keys_func)


def register_pytree_with_keys(
    nodetype: type,
    flatten_with_keys: Callable[[Any], tuple[Iterable, Any]],
    unflatten_func: Callable[[Any, Iterable], Any],
    flatten_func: Callable | None = None,
) -> None:
    """Make `nodetype` a tree node whose children carry their own key entries."""
    if flatten_func is None:

        def flatten_func(node: Any) -> tuple:
            pairs, aux = flatten_with_keys(node)
            return [child for _, child in pairs], aux

    register_pytree_node(nodetype, flatten_func, unflatten_func, flatten_with_keys)


def register_pytree_node_class(cls: type) -> type:
    """Class decorator: use ``cls.tree_flatten`` / ``cls.tree_unflatten``."""
    register_pytree_node(cls, lambda node: node.tree_flatten(), cls.tree_unflatten)  # type: ignore[attr-defined]
    return cls


def register_pytree_with_keys_class(cls: type) -> type:
    """Class decorator: use ``cls.tree_flatten_with_keys`` / ``cls.tree_unflatten``."""
    flatten = getattr(cls, "tree_flatten", None)
    register_pytree_with_keys(
        cls,
        lambda node: node.tree_flatten_with_keys(),
        cls.tree_unflatten,  # type: ignore[attr-defined]
        (lambda node: node.tree_flatten()) if flatten is not None else None,
    )
    return cls


def register_static(cls: type) -> type:
    """Instances of `cls` become nodes without children: metadata, never leaves."""
    register_pytree_with_keys(cls, lambda node: ((), node), lambda aux, _: aux)
    return cls


def register_dataclass(
    nodetype: type | None = None,
    data_fields: Iterable[str] | None = None,
    meta_fields: Iterable[str] | None = None,
    drop_fields: Iterable[str] = (),
) -> Any:
    """Register a dataclass: `data_fields` are children (paths ``.name``), `meta_fields` are
    static metadata kept in the treedef. For a dataclass both may be omitted: fields marked
    ``field(metadata={"static": True})`` are metadata, the other ``init`` fields are data."""
    if nodetype is None:  # used as @partial(register_dataclass, ...) or with keywords only
        return functools.partial(
            register_dataclass,
            data_fields=data_fields,
            meta_fields=meta_fields,
            drop_fields=drop_fields,
        )
    drop = set(drop_fields)
    if data_fields is None or meta_fields is None:
        if not dataclasses.is_dataclass(nodetype):
            raise TypeError(
                "register_dataclass needs data_fields and meta_fields unless the class is a "
                f"dataclass; got {nodetype!r}"
            )
        if (data_fields is None) != (meta_fields is None):
            raise TypeError("register_dataclass: give both data_fields and meta_fields, or neither")
        fields = [f for f in dataclasses.fields(nodetype) if f.init and f.name not in drop]
        data_fields = [f.name for f in fields if not f.metadata.get("static", False)]
        meta_fields = [f.name for f in fields if f.metadata.get("static", False)]
    data_names = tuple(data_fields)
    meta_names = tuple(meta_fields)
    if dataclasses.is_dataclass(nodetype):
        init_names = {f.name for f in dataclasses.fields(nodetype) if f.init} - drop
        given = set(data_names) | set(meta_names)
        if given != init_names:
            missing, unexpected = init_names - given, given - init_names
            msg = "data_fields and meta_fields must include all dataclass fields with init=True and only them."
            if missing:
                msg += f" Missing fields: {missing}. Add them to drop_fields to suppress this error."
            if unexpected:
                msg += f" Unexpected fields: {unexpected}."
            raise ValueError(msg)
    overlap = set(data_names) & set(meta_names)
    if overlap:
        raise ValueError(f"data_fields and meta_fields must not overlap. Overlapping fields: {overlap}.")

    def keyed(node: Any) -> tuple:
        pairs = tuple((GetAttrKey(n), getattr(node, n)) for n in data_names)
        return pairs, tuple(getattr(node, n) for n in meta_names)

    def unflatten(meta: tuple, children: Iterable) -> Any:
        kwargs = dict(zip(meta_names, meta))
        kwargs.update(zip(data_names, children))
        return nodetype(**kwargs)

    register_pytree_with_keys(nodetype, keyed, unflatten)
    return nodetype


def _flatten_defaultdict(d: collections.defaultdict) -> tuple:
    keys = _sorted_keys(d)
    return tuple((DictKey(k), d[k]) for k in keys), (d.default_factory, keys)


register_pytree_with_keys(
    collections.OrderedDict,
    lambda d: (tuple((DictKey(k), d[k]) for k in d), tuple(d)),
    lambda keys, values: collections.OrderedDict(zip(keys, values)),
)
register_pytree_with_keys(
    collections.defaultdict,
    _flatten_defaultdict,
    lambda aux, values: collections.defaultdict(aux[0], zip(aux[1], values)),
)


# --------------------------------------------------------------------------- the treedef

# Node kinds. Custom nodes (registered types and namedtuples) carry their type and aux data.
_LEAF, _NONE, _TUPLE, _LIST, _DICT, _NAMEDTUPLE, _CUSTOM = range(7)
_BUILTIN = {_TUPLE: tuple, _LIST: list, _DICT: dict}  # the node types of these kinds


def _sorted_keys(d: dict) -> tuple:
    try:
        return tuple(sorted(d))
    except TypeError as err:
        raise ValueError("Comparator raised exception while sorting pytree dictionary keys.") from err


class PyTreeDef:
    """The container structure of a tree, without its leaves (`jax.tree_util.PyTreeDef`)."""

    __slots__ = ("_kind", "_type", "_aux", "_children", "num_leaves", "num_nodes")
    _type: Any  # the node's type (a namedtuple's, a registered class's), else None

    def __init__(self, kind: int, node_type: type | None, aux: Any, children: tuple):
        self._kind = kind
        self._type = node_type
        self._aux = aux
        self._children = children
        self.num_leaves = 1 if kind == _LEAF else sum(c.num_leaves for c in children)
        self.num_nodes = 1 + sum(c.num_nodes for c in children)

    # -- structure
    def children(self) -> list[PyTreeDef]:
        return list(self._children)

    def unflatten(self, leaves: Iterable) -> Any:
        leaves = list(leaves)
        if len(leaves) < self.num_leaves:
            raise ValueError(f"Too few leaves for PyTreeDef; expected {self.num_leaves}, got {len(leaves)}")
        if len(leaves) > self.num_leaves:
            raise ValueError(f"Too many leaves for PyTreeDef; expected {self.num_leaves}.")
        return self._build(iter(leaves))

    def _build(self, it: Any) -> Any:
        kind = self._kind
        if kind == _LEAF:
            return next(it)
        if kind == _NONE:
            return None
        children = [c._build(it) for c in self._children]
        if kind == _TUPLE:
            return tuple(children)
        if kind == _LIST:
            return children
        if kind == _DICT:
            return dict(zip(self._aux, children))
        if kind == _NAMEDTUPLE:
            return self._type(*children)
        return _registry[self._type].unflatten(self._aux, tuple(children))

    def flatten_up_to(self, tree: Any) -> list:
        """The subtrees of `tree` that sit where this treedef has leaves."""
        out: list = []
        error = self._up_to(tree, out, ())
        if error is not None:
            raise error.error("tree", "this PyTreeDef", "the tree")
        return out

    def _up_to(self, tree: Any, out: list, path: tuple) -> _Mismatch | None:
        # Walks this treedef and `tree` together; the first difference found is returned.
        kind = self._kind
        if kind == _LEAF:
            out.append(tree)
            return None
        want = type(None) if kind == _NONE else _BUILTIN.get(kind, self._type)  # the node's type
        if type(tree) is not want:
            return _Mismatch(path, "types", want, want, type(tree))
        _, _, aux, pairs = _node(tree, keyed=True)
        if kind == _DICT and aux != self._aux:
            return _Mismatch(path, "keys", dict, self._aux, aux)
        if len(pairs) != len(self._children):
            what = "arity" if kind == _CUSTOM else "length"
            return _Mismatch(path, what, want, len(self._children), len(pairs))
        if kind == _CUSTOM and not _aux_equal(aux, self._aux):
            return _Mismatch(path, "metadata", want, self._aux, aux)
        for child_def, (key, child) in zip(self._children, pairs):
            error = child_def._up_to(child, out, path + (key,))
            if error is not None:
                return error
        return None

    # -- comparison and display
    def __eq__(self, other: object) -> bool:
        if not isinstance(other, PyTreeDef):
            return NotImplemented
        if self is other:
            return True
        mine, theirs = (self._kind, self._type, self.num_leaves), (other._kind, other._type, other.num_leaves)
        if mine != theirs or self.num_nodes != other.num_nodes:
            return False
        if self._kind in (_DICT, _CUSTOM) and not _aux_equal(self._aux, other._aux):
            return False
        return all(a == b for a, b in zip(self._children, other._children))

    def __hash__(self) -> int:
        aux = self._aux if self._kind in (_DICT, _CUSTOM) else None
        try:
            aux_hash = hash(aux)
        except TypeError:  # unhashable metadata still compares with ==
            aux_hash = 0
        return hash((self._kind, self._type, aux_hash, self._children))

    def _text(self) -> str:
        kind = self._kind
        if kind == _LEAF:
            return "*"
        if kind == _NONE:
            return "None"
        parts = [c._text() for c in self._children]
        if kind == _TUPLE:
            return "(" + ", ".join(parts) + ("," if len(parts) == 1 else "") + ")"
        if kind == _LIST:
            return "[" + ", ".join(parts) + "]"
        if kind == _DICT:
            return "{" + ", ".join(f"{k!r}: {p}" for k, p in zip(self._aux, parts)) + "}"
        if kind == _NAMEDTUPLE:
            return f"CustomNode(namedtuple[{self._type.__name__}], [{', '.join(parts)}])"
        return f"CustomNode({self._type.__name__}[{self._aux}], [{', '.join(parts)}])"

    def __repr__(self) -> str:
        return f"PyTreeDef({self._text()})"


def _aux_equal(a: Any, b: Any) -> bool:
    try:
        return bool(a == b)
    except Exception:  # e.g. arrays as metadata: equal only if identical
        return a is b


_LEAF_DEF = PyTreeDef(_LEAF, None, None, ())


def _node(tree: Any, keyed: bool) -> tuple[int, Any, Any, list]:
    """(kind, node type, aux, [(key, child), ...]) of the top of `tree`. Unless `keyed`, a custom
    node is split by its plain flatten function and its keys are None."""
    node_type: Any = type(tree)
    if tree is None:
        return _NONE, None, None, []
    if node_type is tuple or node_type is list:  # the treedef of a tuple, list or dict keeps no type
        return (_TUPLE if node_type is tuple else _LIST), None, None, [(SequenceKey(i), c) for i, c in enumerate(tree)]
    if node_type is dict:
        keys = _sorted_keys(tree)
        return _DICT, None, keys, [(DictKey(k), tree[k]) for k in keys]
    reg = _registry.get(node_type)
    if reg is not None:
        if keyed and reg.keyed is not None:
            pairs, aux = reg.keyed(tree)
            return _CUSTOM, node_type, aux, list(pairs)
        children, aux = reg.flatten(tree)
        return _CUSTOM, node_type, aux, [(FlattenedIndexKey(i) if keyed else None, c) for i, c in enumerate(children)]
    if isinstance(tree, tuple) and hasattr(node_type, "_fields"):  # a namedtuple
        return _NAMEDTUPLE, node_type, None, [(GetAttrKey(f), c) for f, c in zip(node_type._fields, tree)]
    return _LEAF, None, None, []


# --------------------------------------------------------------------------- flattening


def _flatten(
    tree: Any,
    is_leaf: Callable | None,
    leaves: list,
    paths: list | None,
    path: tuple,
    leaf_takes_path: bool = False,
) -> PyTreeDef:
    kind = _LEAF
    if is_leaf is None or not (is_leaf(path, tree) if leaf_takes_path else is_leaf(tree)):
        kind, node_type, aux, pairs = _node(tree, keyed=paths is not None)
    if kind == _LEAF:
        leaves.append(tree)
        if paths is not None:
            paths.append(path)
        return _LEAF_DEF
    children = tuple(
        _flatten(child, is_leaf, leaves, paths, path + (key,) if paths is not None else path, leaf_takes_path)
        for key, child in pairs
    )
    return PyTreeDef(kind, node_type, aux, children)


def tree_flatten(tree: Any, is_leaf: Callable[[Any], bool] | None = None) -> tuple[list, PyTreeDef]:
    """Leaves in JAX order and the treedef that rebuilds the tree from them."""
    leaves: list = []
    treedef = _flatten(tree, is_leaf, leaves, None, ())
    return leaves, treedef


def tree_flatten_with_path(
    tree: Any, is_leaf: Callable[..., bool] | None = None, is_leaf_takes_path: bool = False
) -> tuple[list[tuple[KeyPath, Any]], PyTreeDef]:
    """Like `tree_flatten`, each leaf paired with its key path (`is_leaf_takes_path`: ``is_leaf(path, node)``)."""
    leaves: list = []
    paths: list = []
    treedef = _flatten(tree, is_leaf, leaves, paths, (), is_leaf_takes_path)
    return list(zip(paths, leaves)), treedef


def tree_leaves(tree: Any, is_leaf: Callable[[Any], bool] | None = None) -> list:
    return tree_flatten(tree, is_leaf)[0]


def tree_leaves_with_path(
    tree: Any, is_leaf: Callable[..., bool] | None = None, is_leaf_takes_path: bool = False
) -> list:
    return tree_flatten_with_path(tree, is_leaf, is_leaf_takes_path)[0]


def tree_structure(tree: Any, is_leaf: Callable[[Any], bool] | None = None) -> PyTreeDef:
    return tree_flatten(tree, is_leaf)[1]


def tree_unflatten(treedef: PyTreeDef, leaves: Iterable) -> Any:
    """Rebuild a tree from a treedef and leaves in flatten order."""
    return treedef.unflatten(leaves)


def treedef_children(treedef: PyTreeDef) -> list[PyTreeDef]:
    return treedef.children()


def treedef_is_leaf(treedef: PyTreeDef) -> bool:
    return treedef.num_nodes == 1


def all_leaves(iterable: Iterable, is_leaf: Callable[[Any], bool] | None = None) -> bool:
    """True if every item is a leaf on its own."""
    return all(tree_structure(x, is_leaf) == _LEAF_DEF for x in iterable)


# --------------------------------------------------------------------------- mapping


# What differs -> (the heading's words, what each tree has at the key path).
_MISMATCH_TEXT = {
    "types": (
        "types",
        "{first} has a subtree of type\n    {ours}\nbut {other} has a subtree of different type\n    {theirs}.",
    ),
    "length": (
        "lengths of {name}",
        "{first} has a {name} of length {ours}, but {other} has a {name} of length {theirs}.",
    ),
    "keys": ("dict keys", "{first} has a dict with keys\n    {ours}\nbut {other} has a dict with keys\n    {theirs}"),
    "arity": (
        "numbers of pytree children",
        "{first} has a node of type {name} with {ours} children, but {other} has one with {theirs} children.",
    ),
    "metadata": (
        "pytree metadata",
        "{first} has a node of type {name} with metadata\n    {ours!r}\n"
        "but {other} has one with metadata\n    {theirs!r}.",
    ),
}


class _Mismatch(NamedTuple):
    """Where and how a second tree departs from the first one's structure: `ours` is what the
    first tree has at `path` (a type, a length, keys or metadata), `theirs` what the other has."""

    path: tuple
    what: str
    node_type: Any  # the first tree's node type
    ours: Any
    theirs: Any

    def error(self, label: str, first: str, other: str) -> ValueError:
        heading, body = _MISMATCH_TEXT[self.what]
        ours, theirs = (list(self.ours), list(self.theirs)) if self.what == "keys" else (self.ours, self.theirs)
        name = getattr(self.node_type, "__name__", str(self.node_type))
        words = {"first": first, "other": other, "name": name, "ours": ours, "theirs": theirs}
        lines = [
            f"pytree structure error: different {heading.format(**words)} at key path\n    {label}{keystr(self.path)}\n"
            f"At that key path, {body.format(**words)}"
        ]
        if self.what == "keys":
            if missing := [k for k in ours if k not in theirs]:
                lines.append(f"missing from {other}: {', '.join(map(repr, missing))}")
            if extra := [k for k in theirs if k not in ours]:
                lines.append(f"not in {first}: {', '.join(map(repr, extra))}")
        err = ValueError("\n".join(lines))
        err.key_path = self.path  # type: ignore[attr-defined]  # as JAX's error has: tools point at the place
        return err


def _broadcast(treedef: PyTreeDef, rest: tuple, label: str) -> list[list]:
    columns = []
    for i, other in enumerate(rest, start=1):
        out: list = []
        error = treedef._up_to(other, out, ())
        if error is not None:
            raise error.error(label, "the first tree", f"tree {i} of the others") from None
        columns.append(out)
    return columns


def tree_map(f: Callable[..., Any], tree: Any, *rest: Any, is_leaf: Callable[[Any], bool] | None = None) -> Any:
    """Apply `f` to corresponding leaves of `tree` and `rest` (which must share its structure,
    or have whole subtrees where `tree` has leaves)."""
    leaves, treedef = tree_flatten(tree, is_leaf)
    columns = _broadcast(treedef, rest, "tree_map tree")
    return treedef.unflatten(f(*xs) for xs in zip(leaves, *columns))


def tree_map_with_path(
    f: Callable[..., Any],
    tree: Any,
    *rest: Any,
    is_leaf: Callable[..., bool] | None = None,
    is_leaf_takes_path: bool = False,
) -> Any:
    """`tree_map` whose `f` also receives each leaf's key path first."""
    pairs, treedef = tree_flatten_with_path(tree, is_leaf, is_leaf_takes_path)
    columns = _broadcast(treedef, rest, "tree_map_with_path tree")
    return treedef.unflatten(f(path, leaf, *xs) for (path, leaf), *xs in zip(pairs, *columns))


_NO_INITIAL = object()


def tree_reduce(
    function: Callable[[Any, Any], Any],
    tree: Any,
    initializer: Any = _NO_INITIAL,
    is_leaf: Callable[[Any], bool] | None = None,
) -> Any:
    leaves = tree_leaves(tree, is_leaf)
    return functools.reduce(function, leaves, *(() if initializer is _NO_INITIAL else (initializer,)))


def tree_all(tree: Any, *, is_leaf: Callable[[Any], bool] | None = None) -> bool:
    return all(tree_leaves(tree, is_leaf))
