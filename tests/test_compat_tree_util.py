"""`pytree_lab_lite.tree_util` against real `jax.tree_util`, on hypothesis-generated pytrees.

Same leaves in the same order, same key paths (keystr), same treedef text, same equality of
treedefs, same success or ValueError for tree_map over two trees, and the same key path named
in the error.
"""

from __future__ import annotations

import collections
import dataclasses
import re
import subprocess
import sys

import jax.tree_util as jtu
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from pytree_lab_lite import tree_util as ctu

# ---- node types known to both registries

Pair = collections.namedtuple("Pair", "first second")
Triple = collections.namedtuple("Triple", "x y z")


@dataclasses.dataclass
class Linear:
    """A layer with two data fields and one metadata field (the lesson's 'model name')."""

    weight: object
    bias: object
    name: str = "dense"


@dataclasses.dataclass
class Scaled:
    """Registered without explicit field lists: `static` metadata marks the metadata."""

    value: object
    tag: str = dataclasses.field(default="s", metadata={"static": True})
    extra: object = None


class Box:
    """Registered with plain flatten/unflatten: children get FlattenedIndexKey paths."""

    def __init__(self, a, b, label="box"):
        self.a, self.b, self.label = a, b, label

    def __eq__(self, other):
        return type(other) is Box and (self.a, self.b, self.label) == (other.a, other.b, other.label)


class Keyed:
    """Registered with keys of its own choosing."""

    def __init__(self, left, right):
        self.left, self.right = left, right


for tu in (jtu, ctu):
    tu.register_dataclass(Linear, data_fields=["weight", "bias"], meta_fields=["name"])
    tu.register_dataclass(Scaled)
    tu.register_pytree_node(Box, lambda b: ((b.a, b.b), b.label), lambda label, ch: Box(*ch, label))
    tu.register_pytree_with_keys(
        Keyed,
        lambda k, tu=tu: (((tu.GetAttrKey("left"), k.left), (tu.DictKey("R"), k.right)), None),
        lambda _, ch: Keyed(*ch),
    )

# ---- strategies

keys = st.sampled_from(["a", "b", "bias", "weight", "layer", "z", "B", "_x"])
leaves = st.one_of(st.integers(-5, 5), st.floats(-2, 2, allow_nan=False), st.just("name"))


def extend(children):
    return st.one_of(
        st.dictionaries(keys, children, max_size=4),
        st.lists(children, max_size=4),
        st.lists(children, max_size=3).map(tuple),
        st.builds(Pair, children, children),
        st.builds(Triple, children, children, children),
        st.builds(Linear, children, children, st.sampled_from(["dense", "head"])),
        st.builds(Scaled, children, st.sampled_from(["s", "t"]), children),
        st.builds(Box, children, children, st.sampled_from(["box", "crate"])),
        st.builds(Keyed, children, children),
        st.dictionaries(keys, children, max_size=3).map(lambda d: collections.OrderedDict(reversed(list(d.items())))),
    )


trees = st.recursive(st.one_of(leaves, st.none()), extend, max_leaves=12)
is_leaf_choices = st.sampled_from(
    [None, lambda x: isinstance(x, tuple), lambda x: x is None, lambda x: isinstance(x, dict) and len(x) == 1]
)

SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def paths(tu, tree, is_leaf=None):
    flat, _ = tu.tree_flatten_with_path(tree, is_leaf)
    return [tu.keystr(p) for p, _ in flat]


# ---- flatten / paths / treedef


@SETTINGS
@given(trees, is_leaf_choices)
def test_flatten_matches_jax(tree, is_leaf):
    j_leaves, j_def = jtu.tree_flatten(tree, is_leaf)
    c_leaves, c_def = ctu.tree_flatten(tree, is_leaf)
    assert len(c_leaves) == len(j_leaves)
    assert all(a is b for a, b in zip(c_leaves, j_leaves))
    assert repr(c_def) == repr(j_def)
    assert (c_def.num_leaves, c_def.num_nodes) == (j_def.num_leaves, j_def.num_nodes)
    assert ctu.tree_leaves(tree, is_leaf) == c_leaves


@SETTINGS
@given(trees, is_leaf_choices)
def test_key_paths_match_jax(tree, is_leaf):
    assert paths(ctu, tree, is_leaf) == paths(jtu, tree, is_leaf)
    j_flat, _ = jtu.tree_flatten_with_path(tree, is_leaf)
    c_flat, _ = ctu.tree_flatten_with_path(tree, is_leaf)
    for (jp, _), (cp, _) in zip(j_flat, c_flat):
        assert ctu.keystr(cp, simple=True, separator="/") == jtu.keystr(jp, simple=True, separator="/")
        assert [repr(k) for k in cp] == [repr(k) for k in jp]


@SETTINGS
@given(trees)
def test_unflatten_round_trip(tree):
    c_leaves, c_def = ctu.tree_flatten(tree)
    tagged = [f"leaf{i}" for i in range(len(c_leaves))]
    rebuilt = ctu.tree_unflatten(c_def, tagged)
    # the rebuilt tree is the same structure for JAX too, with leaves in the same places
    assert jtu.tree_leaves(rebuilt) == tagged
    assert repr(jtu.tree_structure(rebuilt)) == repr(c_def)
    assert ctu.tree_structure(ctu.tree_unflatten(c_def, c_leaves)) == c_def
    assert ctu.tree_leaves(ctu.tree_unflatten(c_def, c_leaves)) == c_leaves


@SETTINGS
@given(trees, trees)
def test_treedef_equality_matches_jax(a, b):
    assert (ctu.tree_structure(a) == ctu.tree_structure(b)) == (jtu.tree_structure(a) == jtu.tree_structure(b))
    if ctu.tree_structure(a) == ctu.tree_structure(b):
        assert hash(ctu.tree_structure(a)) == hash(ctu.tree_structure(b))


class Mapped:
    """An unregistered wrapper: a leaf for both libraries."""

    def __init__(self, value):
        self.value = value


@SETTINGS
@given(trees)
def test_structure_equal_after_mapping_leaves(tree):
    mapped = ctu.tree_map(Mapped, tree)
    assert ctu.tree_structure(mapped) == ctu.tree_structure(tree)
    assert [m.value for m in ctu.tree_leaves(mapped)] == ctu.tree_leaves(tree)
    assert paths(ctu, mapped) == paths(ctu, tree) == paths(jtu, jtu.tree_map(Mapped, tree))


# ---- tree_map over several trees


def mutate(tree, choice):
    """A second tree that may differ from `tree` somewhere (a key, a length, a type, a leaf)."""
    if isinstance(tree, dict) and not isinstance(tree, collections.OrderedDict) and tree:
        ks = sorted(tree)
        k = ks[choice % len(ks)]
        kind = choice % 4
        if kind == 0:
            return {kk: v for kk, v in tree.items() if kk != k}
        if kind == 1:
            return {**tree, k + "_extra": 1}
        return {kk: (mutate(v, choice // 4) if kk == k else v) for kk, v in tree.items()}
    if type(tree) in (list, tuple) and tree:
        kind = choice % 4
        if kind == 0:
            return type(tree)(list(tree)[:-1])
        if kind == 1:
            return list(tree) if type(tree) is tuple else tuple(tree)
        i = choice % len(tree)
        items = list(tree)
        items[i] = mutate(items[i], choice // 4)
        return type(tree)(items)
    if isinstance(tree, (Pair, Triple)):
        items = list(tree)
        i = choice % len(items)
        items[i] = mutate(items[i], choice // 3)
        return type(tree)(*items)
    if isinstance(tree, Linear):
        if choice % 3 == 0:
            return Linear(tree.weight, tree.bias, tree.name + "2")
        return Linear(mutate(tree.weight, choice // 3), tree.bias, tree.name)
    if tree is None:
        return [None, 7, {"k": 1}][choice % 3]
    return [tree, None, [tree], {"k": tree}][choice % 4]


def key_path_line(message):
    lines = message.splitlines()
    assert lines[0].startswith("pytree structure error:"), message
    return lines[1].strip()


def child(node, key):
    if isinstance(key, ctu.SequenceKey):
        return node[key.idx]
    if isinstance(key, ctu.DictKey):
        return node.right if isinstance(node, Keyed) else node[key.key]
    if isinstance(key, ctu.FlattenedIndexKey):
        return (node.a, node.b)[key.key]
    return getattr(node, key.name)


def as_jax_0_10_reports(path, tree):
    """The key path as jax 0.10's error text spells it: it names every namedtuple child after
    the first field (jaxlib's flatten_one_level_with_keys repeats the first field's key)."""
    out, node = [], tree
    for key in path:
        if isinstance(node, tuple) and hasattr(type(node), "_fields"):
            out.append(ctu.GetAttrKey(type(node)._fields[0]))
        else:
            out.append(key)
        node = child(node, key)
    return tuple(out)


@SETTINGS
@given(trees, st.integers(0, 10_000))
def test_tree_map_two_trees_matches_jax(tree, choice):
    other = mutate(tree, choice)
    outcomes = {}
    for name, tu in (("jax", jtu), ("lite", ctu)):
        try:
            outcomes[name] = ("ok", tu.tree_map(lambda a, b: (a, b), tree, other))
        except ValueError as err:
            outcomes[name] = ("ValueError", err)
    assert outcomes["lite"][0] == outcomes["jax"][0]
    if outcomes["jax"][0] == "ok":
        j, c = outcomes["jax"][1], outcomes["lite"][1]
        assert repr(ctu.tree_structure(c)) == repr(jtu.tree_structure(j))
        assert ctu.tree_leaves(c) == jtu.tree_leaves(j)
    else:
        # both name the same key path, e.g. "tree_map tree['layer'][1]"
        lite_err = outcomes["lite"][1]
        lite_line = key_path_line(str(lite_err))
        assert lite_line == "tree_map tree" + ctu.keystr(lite_err.key_path)
        child_of_path = tree
        for key in lite_err.key_path:  # the path exists in the first tree
            child_of_path = child(child_of_path, key)
        jax_line = key_path_line(str(outcomes["jax"][1]))
        assert jax_line in {lite_line, "tree_map tree" + ctu.keystr(as_jax_0_10_reports(lite_err.key_path, tree))}


@SETTINGS
@given(trees, st.integers(0, 10_000))
def test_tree_map_with_path_matches_jax(tree, choice):
    other = mutate(tree, choice)
    results = {}
    for name, tu in (("jax", jtu), ("lite", ctu)):
        try:
            results[name] = tu.tree_leaves(tu.tree_map_with_path(lambda p, a, b: (tu.keystr(p), a, b), tree, other))
        except ValueError:
            results[name] = ValueError
    assert results["lite"] == results["jax"]


def test_tree_map_three_trees_and_prefix_subtrees():
    params = {"w": [1, 2], "b": 3}
    grads = {"w": [10, 20], "b": 30}
    extra = {"w": [(1, 1), None], "b": {"anything": 0}}  # whole subtrees under prefix leaves
    f = lambda p, g, e: (p, g, e)  # noqa: E731
    assert ctu.tree_map(f, params, grads, extra) == jtu.tree_map(f, params, grads, extra)


def test_mismatch_messages_name_path_and_keys():
    params = {"layer": {"weight": 1, "bias": 2}, "scale": 3}
    grads = {"layer": {"weight": 1}, "scale": 3}
    with pytest.raises(ValueError) as lite_err:
        ctu.tree_map(lambda p, g: p - g, params, grads)
    with pytest.raises(ValueError) as jax_err:
        jtu.tree_map(lambda p, g: p - g, params, grads)
    assert key_path_line(str(lite_err.value)) == key_path_line(str(jax_err.value)) == "tree_map tree['layer']"
    assert "missing from tree 1 of the others: 'bias'" in str(lite_err.value)
    with pytest.raises(ValueError, match=re.escape("tree_map tree[1]")):
        ctu.tree_map(lambda a, b: a, [1, None], [1, 5])
    with pytest.raises(ValueError, match="different lengths of list"):
        ctu.tree_map(lambda a, b: a, [1, 2], [1, 2, 3])
    with pytest.raises(ValueError, match="different pytree metadata"):
        ctu.tree_map(lambda a, b: a, Linear(1, 2, "a"), Linear(1, 2, "b"))


# ---- details of the API


def test_key_entries_print_like_jax():
    for name in ("DictKey", "SequenceKey", "GetAttrKey", "FlattenedIndexKey"):
        arg = {"DictKey": "w", "SequenceKey": 2, "GetAttrKey": "bias", "FlattenedIndexKey": 1}[name]
        c, j = getattr(ctu, name)(arg), getattr(jtu, name)(arg)
        assert (str(c), repr(c)) == (str(j), repr(j))
        assert c == getattr(ctu, name)(arg) and hash(c) == hash(getattr(ctu, name)(arg))
    mixed = (ctu.DictKey(1), ctu.DictKey("a"), ctu.DictKey((1, 2)), ctu.SequenceKey(3), ctu.GetAttrKey("f"))
    assert ctu.keystr(mixed) == "[1]['a'][(1, 2)][3].f"
    assert ctu.keystr(mixed, simple=True, separator="/") == "1/a/(1, 2)/3/f"
    assert ctu.keystr(()) == ""


def test_treedef_repr_and_api():
    tree = {"b": [1, (2, None)], "a": Pair(3, {"z": 4, "y": None}), "c": None}
    c_def, j_def = ctu.tree_structure(tree), jtu.tree_structure(tree)
    assert repr(c_def) == repr(j_def) == str(c_def)
    assert [repr(d) for d in c_def.children()] == [repr(d) for d in j_def.children()]
    assert c_def.flatten_up_to({"a": Pair([1], {"y": None, "z": 2}), "b": [0, (None, None)], "c": None}) == [
        [1],
        2,
        0,
        None,
    ]
    assert ctu.treedef_is_leaf(ctu.tree_structure(1)) and not ctu.treedef_is_leaf(c_def)
    for empty in (None, (), [], {}):
        assert repr(ctu.tree_structure(empty)) == repr(jtu.tree_structure(empty))
    assert ctu.tree_structure([1]) != ctu.tree_structure((1,))
    assert (ctu.tree_structure([1]) == 5) is False


def test_unflatten_wrong_leaf_count_is_value_error():
    td = ctu.tree_structure([1, 2])
    for wrong in ([1], [1, 2, 3]):
        with pytest.raises(ValueError):
            jtu.tree_unflatten(jtu.tree_structure([1, 2]), wrong)
        with pytest.raises(ValueError, match="leaves for PyTreeDef; expected 2"):
            ctu.tree_unflatten(td, wrong)


def test_subclasses_of_builtin_containers_are_leaves_as_in_jax():
    class T(tuple):
        pass

    class D(dict):
        pass

    class L(list):
        pass

    tree = [T((1, 2)), D(a=1), L([1, 2]), collections.defaultdict(list, {"b": 1, "a": 2})]
    assert ctu.tree_leaves(tree) == jtu.tree_leaves(tree)
    assert paths(ctu, tree) == paths(jtu, tree)


def test_unsortable_dict_keys_raise_value_error_like_jax():
    with pytest.raises(ValueError):
        jtu.tree_flatten({1: 1, "a": 2})
    with pytest.raises(ValueError, match="sorting pytree dictionary keys"):
        ctu.tree_flatten({1: 1, "a": 2})


def test_register_dataclass_checks_fields_like_jax():
    @dataclasses.dataclass
    class Half:
        a: object
        b: object

    for tu in (jtu, ctu):
        with pytest.raises(ValueError, match="Missing fields"):
            tu.register_dataclass(Half, data_fields=["a"], meta_fields=[])
    with pytest.raises(ValueError, match="Duplicate"):
        ctu.register_dataclass(Linear, data_fields=["weight", "bias"], meta_fields=["name"])


def test_dataclass_metadata_is_not_a_leaf():
    model = Linear(weight=[1.0, 2.0], bias=0.5, name="dense")
    assert paths(ctu, model) == paths(jtu, model) == [".weight[0]", ".weight[1]", ".bias"]
    assert ctu.tree_map(lambda x: x * 2, model) == Linear([2.0, 4.0], 1.0, "dense")


def test_is_leaf_takes_path_like_jax():
    tree = {"layer": {"weight": [1, 2], "bias": 3}, "opt": {"count": 0, "mu": [4, 5]}}
    for tu in (jtu, ctu):
        flat, _ = tu.tree_flatten_with_path(tree, lambda p, n: tu.keystr(p) == "['opt']", True)
        assert [tu.keystr(p) for p, _ in flat] == [
            "['layer']['bias']",
            "['layer']['weight'][0]",
            "['layer']['weight'][1]",
            "['opt']",
        ]
        mapped = tu.tree_map_with_path(
            lambda p, x: tu.keystr(p),
            tree,
            is_leaf=lambda p, n: tu.keystr(p) == "['layer']['weight']",
            is_leaf_takes_path=True,
        )
        assert mapped["layer"]["weight"] == "['layer']['weight']"
        assert mapped["opt"]["mu"] == ["['opt']['mu'][0]", "['opt']['mu'][1]"]


def test_tree_reduce_and_all():
    tree = {"a": [1, 2], "b": (3, None)}
    assert ctu.tree_reduce(lambda x, y: x + y, tree) == jtu.tree_reduce(lambda x, y: x + y, tree) == 6
    assert ctu.tree_reduce(lambda x, y: x + y, tree, 10) == 16
    assert ctu.tree_all(tree) and not ctu.tree_all({"a": 0})


def test_stdlib_only():
    # The tree model describes plain-Python trees in a kernel without numpy.
    code = (
        "import sys\n"
        "from pytree_lab_lite import tree_util\n"
        "import pytree_lab_lite\n"
        "print(tree_util.keystr(tree_util.tree_flatten_with_path({'layer': {'w': 1}})[0][0][0]))\n"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('numpy', 'autograd', 'jax', 'jaxlib'))\n"
        "print(bad)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.splitlines() == ["['layer']['w']", "[]"]
