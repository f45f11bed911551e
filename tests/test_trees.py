"""The tree model: describe, paths, alignment and diagnose, against the lesson and against JAX."""

from __future__ import annotations

import collections
import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from pytree_lab import describe, diagnose
from pytree_lab.diagram_rows import align
from pytree_lab.trees import element_labels, path_label

LESSON_PARAMS = {"weight": jnp.array([1.0, -1.0]), "bias": jnp.array(0.0)}

Pair = collections.namedtuple("Pair", "first second")


@jax.tree_util.register_dataclass
@dataclasses.dataclass
class Dense:
    weight: jax.Array
    bias: jax.Array


def test_lesson_diagram_text():
    assert str(describe(LESSON_PARAMS)) == (
        "params\n├── weight: float32[2]\n└── bias: float32[]\n2 leaves, 3 numerical parameter values"
    )


def test_lesson_leaves_follow_jax_flatten_order():
    s = describe(LESSON_PARAMS)
    # JAX sorts dict keys: bias comes first in the flat list, whatever order the dict was written in
    assert [leaf.path for leaf in s.leaves] == ["['bias']", "['weight']"]
    assert [leaf.shape for leaf in s.leaves] == [(), (2,)]
    assert [leaf.dtype for leaf in s.leaves] == ["float32", "float32"]
    assert [leaf.size for leaf in s.leaves] == [1, 2]
    assert (s.num_leaves, s.num_values) == (2, 3)
    assert [leaf.values for leaf in s.leaves] == [(0.0,), (1.0, -1.0)]


def test_nested_containers_none_namedtuple_and_dataclass():
    tree = {
        "layer": Dense(jnp.ones((2, 3)), jnp.zeros(3)),
        "pair": Pair(1.0, [2.0, None, (3.0,)]),
        "name": "mlp",
        "steps": 3,
    }
    s = describe(tree)
    expected = [jax.tree_util.keystr(p) for p, _ in jax.tree_util.tree_flatten_with_path(tree)[0]]
    assert [leaf.path for leaf in s.leaves] == expected
    assert s.num_leaves == len(jax.tree.leaves(tree))
    assert s.num_values == 6 + 3 + 1 + 1 + 1  # float elements only
    not_diff = {leaf.path: leaf.dtype for leaf in s.non_differentiable}
    assert not_diff == {"['name']": "str", "['steps']": "int32"}
    text = str(s)
    assert "name: str (not differentiable)" in text
    assert "weight: float32[2,3]" in text
    assert "[1] (empty)" in text  # None is a container with no leaves, as in JAX


def test_big_leaf_is_summarised_not_listed():
    big = np.arange(10_000, dtype=np.float32)
    leaf = describe({"w": big}).leaves[0]
    assert leaf.values is None
    assert leaf.summary == "mean 5000, min 0, max 9999"  # mean of 0..9999 is 4999.5 -> 4 significant digits


def _trees():
    leaf = st.one_of(
        st.floats(-10, 10, allow_nan=False, width=32),
        st.lists(st.integers(0, 3), min_size=0, max_size=3).map(lambda shape: np.zeros(shape, np.float32)),
        st.integers(-5, 5),
    )
    keys = st.text("abcxyz_", min_size=1, max_size=4)
    return st.recursive(
        leaf,
        lambda kids: st.one_of(
            st.dictionaries(keys, kids, max_size=4),
            st.lists(kids, max_size=3),
            st.lists(kids, max_size=3).map(tuple),
            st.tuples(kids, kids).map(lambda t: Pair(*t)),
            st.just(None),
        ),
        max_leaves=12,
    )


@settings(max_examples=150, deadline=None)
@given(_trees())
def test_paths_counts_and_order_agree_with_jax(tree):
    s = describe(tree)
    flat, _ = jax.tree_util.tree_flatten_with_path(tree)
    assert [leaf.path for leaf in s.leaves] == [jax.tree_util.keystr(p) for p, _ in flat]
    assert [leaf.shape for leaf in s.leaves] == [tuple(np.shape(x)) for _, x in flat]
    assert s.num_leaves == len(flat)
    # every row of the aligned view is a node of the tree, and no path repeats
    rows = align([s])
    assert len({r["p"] for r in rows}) == len(rows)
    assert {r["p"] for r in rows if r["leaf"]} >= {leaf.path for leaf in s.leaves} - {""}


def test_path_and_element_labels():
    assert path_label("['layer']['weight']") == "layer/weight"
    assert path_label("[0]['w']") == "[0]/w"
    assert path_label("['pair'].first") == "pair/first"
    assert path_label("['a]b']") == "a]b"
    s = describe({"weight": jnp.zeros(2), "w2": jnp.zeros((2, 2)), "bias": jnp.array(0.0)})
    labels = {leaf.path: element_labels(leaf) for leaf in s.leaves}
    assert labels["['weight']"] == ["weight[0]", "weight[1]"]
    assert labels["['bias']"] == ["bias"]
    assert labels["['w2']"] == ["w2[0,0]", "w2[0,1]", "w2[1,0]", "w2[1,1]"]


def test_look_alike_keys_stay_distinct():
    s = describe({"a": 1.0, "a ": 2.0})
    assert [n.label for n in s.root.children] == ["a", "'a '"]
    assert [n.path for n in s.root.children] == ["['a']", "['a ']"]
    # non-string keys are shown as Python writes them (keys of one type: JAX sorts them)
    s = describe({(1, 2): 4.0, (0, 1): 3.0})
    assert [n.label for n in s.root.children] == ["(1, 2)", "(0, 1)"]
    assert [leaf.path for leaf in s.leaves] == ["[(0, 1)]", "[(1, 2)]"]  # JAX's order
    assert [n.label for n in describe({1: 3.0, -2: 4.0}).root.children] == ["1", "-2"]


# ---------------------------------------------------------------- diagnose


def test_diagnose_missing_bias_names_the_path():
    grads = jax.grad(lambda p: jnp.sum(p["weight"]) + p["bias"])(LESSON_PARAMS)
    d = diagnose(LESSON_PARAMS, {"weight": grads["weight"]})
    assert (d.ok, d.kind, d.path) == (False, "structure", "['bias']")
    assert "missing ['bias']" in d.message
    # and this is the very case where jax.tree.map raises
    with pytest.raises(ValueError):
        jax.tree.map(lambda p, g: p - 0.05 * g, LESSON_PARAMS, {"weight": grads["weight"]})


def test_diagnose_reports_in_the_lesson_order():
    # structure wins over shape and dtype problems elsewhere
    cand = {"weight": jnp.zeros(3, jnp.int32)}
    assert diagnose(LESSON_PARAMS, cand).kind == "structure"
    # shape wins over dtype
    cand = {"weight": jnp.zeros(3), "bias": jnp.array(0, jnp.int32)}
    d = diagnose(LESSON_PARAMS, cand)
    assert (d.kind, d.path) == ("shape", "['weight']")
    d = diagnose(LESSON_PARAMS, {"weight": jnp.zeros(2), "bias": jnp.array(0, jnp.int32)})
    assert (d.kind, d.path) == ("dtype", "['bias']")
    assert diagnose(LESSON_PARAMS, {"bias": jnp.array(1.0), "weight": jnp.ones(2)}).ok


def test_diagnose_renamed_key_and_container_kind():
    d = diagnose(LESSON_PARAMS, {"weight": jnp.zeros(2), "b": jnp.array(0.0)})
    assert d.kind == "structure" and d.path == "['bias']" and "['b']" in d.message
    d = diagnose([1.0, 2.0], (1.0, 2.0))
    assert d.kind == "structure" and "list" in d.message and "tuple" in d.message


@settings(max_examples=100, deadline=None)
@given(_trees(), st.sampled_from(["drop", "shape", "dtype"]))
def test_diagnose_agrees_with_jax_structure(tree, change):
    assert diagnose(tree, tree).ok
    flat, treedef = jax.tree_util.tree_flatten(tree)
    if not flat:
        return
    if change == "shape":
        flat2 = [np.zeros(np.shape(flat[0]) + (2,), np.float32)] + flat[1:]
        d = diagnose(tree, jax.tree.unflatten(treedef, flat2))
        assert d.kind == "shape"
    elif change == "dtype":
        flat2 = [np.asarray(flat[0]).astype(np.float16)] + flat[1:]
        other = jax.tree.unflatten(treedef, flat2)
        d = diagnose(tree, other)
        assert d.kind == "dtype"
    else:
        other = {"wrapped": tree}
        d = diagnose(tree, other)
        assert d.kind == "structure"
        assert jax.tree.structure(tree) != jax.tree.structure(other)


# ---------------------------------------------------------------- align


def test_align_matches_rows_by_path_and_shows_missing():
    params = {"weight": jnp.zeros(2), "bias": jnp.array(0.0)}
    grads = {"weight": jnp.zeros(2), "extra": jnp.array(1.0)}
    rows = align([describe(params, "params"), describe(grads, "grads")])
    by_path = {r["p"]: r for r in rows}
    assert [r["p"] for r in rows] == ["['weight']", "['bias']", "['extra']"]
    assert by_path["['bias']"]["c"][1] is None and by_path["['bias']"]["s"] == "missing"
    assert by_path["['extra']"]["c"][0] is None and by_path["['extra']"]["s"] == "missing"
    assert by_path["['weight']"]["s"] == "ok"


def test_align_flags_shape_and_dtype_differences():
    rows = align([describe({"w": jnp.zeros(2)}), describe({"w": jnp.zeros(3)})])
    assert rows[0]["s"] == "shape"
    rows = align([describe({"w": jnp.zeros(2)}), describe({"w": jnp.zeros(2, jnp.int32)})])
    assert rows[0]["s"] == "dtype"


def test_align_follows_the_written_order_when_given():
    written = {"weight": 0.0, "bias": 0.0}
    from_jax = jax.tree.map(lambda x: x, written)  # JAX gives dict keys back sorted
    assert list(from_jax) == ["bias", "weight"]
    rows = align([describe(from_jax)], order=describe(written))
    assert [r["p"] for r in rows] == ["['weight']", "['bias']"]


def test_one_number_formatter():
    from pytree_lab.formatting import fmt_array, fmt_number, fmt_value, grid_lines, grid_rows

    assert [fmt_number(v) for v in (0.0, -0.0, 0.123456, -4, 1e-7, float("nan"), float("inf"), -float("inf"))] == [
        "0",
        "0",
        "0.1235",
        "-4",
        "1e-07",
        "nan",
        "inf",
        "-inf",
    ]
    w = np.array([[0.1, -0.4, 0.2], [0.3, 0.0, 0.4], [1e-7, 2.5, -3.0]], dtype=np.float32)
    assert fmt_array(w) == "[[0.1, -0.4, 0.2], [0.3, 0, 0.4], [1e-07, 2.5, -3]]"
    cells = (("0.1", "-0.4", "0.2"), ("0.3", "0", "0.4"), ("1e-07", "2.5", "-3"))
    assert fmt_value(w) == ("[[0.1, -0.4, 0.2], [0.3, 0, 0.4], [1e-07, 2.5, -3]]", cells)  # one text, widget or message
    assert grid_lines(cells) == ["[  0.1  -0.4  0.2]", "[  0.3     0  0.4]", "[1e-07   2.5   -3]"]
    assert grid_rows(["0", "1", "2", "3", "4", "5", "6", "7"], (2, 2, 2)) == [
        ["[0,:,:]"],
        ["0", "1"],
        ["2", "3"],
        ["[1,:,:]"],
        ["4", "5"],
        ["6", "7"],
    ]
    assert fmt_array([[1, 2], [3, 4]]) == "[[1, 2], [3, 4]]"  # plain lists, no numpy needed
    assert fmt_array(np.arange(17.0)) == "[0, 1, 2, 3, 4, 5, 6, 7, …] (17 values)"
    # a bigger leaf in the calculation: its first values, shape (2+ dimensions), count and mean
    assert fmt_value(np.arange(17.0)) == ("[0, 1, 2, 3, 4, 5, 6, 7, …] (17 values, mean 8)", ())
    assert fmt_value(np.arange(18.0).reshape(2, 9)) == ("[0, 1, 2, 3, 4, 5, 6, 7, …] (2×9, 18 values, mean 8.5)", ())
    assert fmt_array(jnp.float32(2.5)) == "2.5"


def test_trees_split_keeps_old_imports():
    import pytree_lab
    from pytree_lab import diagnose as diagnose_module_fn
    from pytree_lab.diagnose import Diagnosis, Diagnosis as D2, diagnose as diagnose_again, diagnose_summaries
    from pytree_lab.diagram_rows import align as align_again

    assert D2 is Diagnosis and diagnose_again is diagnose_module_fn is pytree_lab.diagnose
    assert callable(diagnose_summaries) and align_again is align


def test_element_labels_are_made_only_when_read():
    big = describe({"w": np.zeros(10**7, np.float32)}).leaves[0]
    labels = element_labels(big)
    assert len(labels) == 10**7
    assert labels[:3] == ["w[0]", "w[1]", "w[2]"] and labels[-1] == "w[9999999]"
    assert [x for _, x in zip(range(24), labels)][-1] == "w[23]"
    assert element_labels(big, limit=24) == [f"w[{i}]" for i in range(24)]
    m = describe({"m": np.zeros((2, 3))}).leaves[0]
    assert list(element_labels(m)) == ["m[0,0]", "m[0,1]", "m[0,2]", "m[1,0]", "m[1,1]", "m[1,2]"]
    with pytest.raises(IndexError):
        element_labels(m)[6]
