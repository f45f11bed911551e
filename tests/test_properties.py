"""Property tests: hypothesis-made pytrees against jax.tree_util, the oracle.

Trees nest dicts (string or int keys, any text, look-alikes), lists, tuples, None and
namedtuples, with leaves of random shapes and dtypes (float32, float16, bfloat16, int32,
bool, complex64, and Python floats, ints, bools). For each: `describe` agrees with JAX on
paths, shapes, dtypes and counts; `diagnose` reports the first difference in the documented
order (structure, then shapes, then dtypes, in flatten order); the engine's tree operations and
gradient step agree with JAX; and no tree or pair of trees breaks the diagram's serialisation.
"""

from __future__ import annotations

import collections
import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from diagram_wire import rows_from_columns
from hypothesis import HealthCheck, given, settings, strategies as st

from pytree_lab import PytreeDiagram, describe, diagnose, get_engine, gradient_step

Pair = collections.namedtuple("Pair", "first second")
Single = collections.namedtuple("Single", "only")

DTYPES = [np.float32, np.float16, jnp.bfloat16, np.int32, np.bool_, np.complex64]
FLOATS = {"float16", "bfloat16", "float32", "float64"}

shapes = st.lists(st.integers(0, 3), max_size=3).map(tuple)


@st.composite
def arrays(draw, dtypes=DTYPES):
    shape = draw(shapes)
    dtype = draw(st.sampled_from(dtypes))
    values = draw(st.lists(st.floats(-4, 4, width=16), min_size=int(np.prod(shape)), max_size=int(np.prod(shape))))
    return np.asarray(values, np.float32).reshape(shape).astype(dtype)


leaves = st.one_of(
    arrays(),
    st.floats(-10, 10, allow_nan=False, width=32),
    st.integers(-5, 5),
    st.booleans(),
)
text_keys = st.one_of(st.text(max_size=4), st.sampled_from(["a", "a ", " a", "<b>", "</script>"]))


def containers(kids):
    return st.one_of(
        st.dictionaries(text_keys, kids, max_size=4),
        st.dictionaries(st.integers(-3, 3), kids, max_size=3),
        st.lists(kids, max_size=3),
        st.lists(kids, max_size=3).map(tuple),
        st.tuples(kids, kids).map(lambda t: Pair(*t)),
        kids.map(Single),
        st.just(None),
    )


trees = st.recursive(leaves, containers, max_leaves=10)
float_trees = st.recursive(arrays(dtypes=[np.float32]), containers, max_leaves=8)


def jax_dtype(x) -> str:
    return str(x.dtype) if hasattr(x, "dtype") else str(jnp.asarray(x).dtype)


def flat(tree):
    return [(jax.tree_util.keystr(p), x) for p, x in jax.tree_util.tree_flatten_with_path(tree)[0]]


PROPERTY = settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@PROPERTY
@given(trees)
def test_describe_agrees_with_jax(tree):
    s = describe(tree)
    expected = flat(tree)
    assert [leaf.path for leaf in s.leaves] == [p for p, _ in expected]
    assert [leaf.shape for leaf in s.leaves] == [tuple(np.shape(x)) for _, x in expected]
    assert [leaf.dtype for leaf in s.leaves] == [jax_dtype(x) for _, x in expected]
    assert [leaf.size for leaf in s.leaves] == [int(np.size(x)) for _, x in expected]
    assert s.num_leaves == len(jax.tree.leaves(tree))
    assert s.num_values == sum(int(np.size(x)) for _, x in expected if jax_dtype(x) in FLOATS)
    assert [leaf.index for leaf in s.leaves] == list(range(s.num_leaves))
    assert {leaf.path for leaf in s.non_differentiable} == {p for p, x in expected if jax_dtype(x) not in FLOATS}
    text = s.text()
    assert text.splitlines()[-1] == s.counts_line()


# --------------------------------------------------------------------------- diagnose


def oracle(a, b):
    """The first difference, found with JAX alone: structure, then shapes, then dtypes."""
    if jax.tree.structure(a) != jax.tree.structure(b):
        return "structure", None
    for (path, x), (_, y) in zip(flat(a), flat(b)):
        if np.shape(x) != np.shape(y):
            return "shape", path
    for (path, x), (_, y) in zip(flat(a), flat(b)):
        if jax_dtype(x) != jax_dtype(y):
            return "dtype", path
    return None, None


def signature(tree) -> dict:
    """path -> (node kind, type name, child paths), from describe's node tree."""
    return {
        n.path: (n.kind, n.type_name if n.kind != "leaf" else "", tuple(c.path for c in n.children))
        for n in describe(tree).root.walk()
    }


@st.composite
def mutated(draw):
    """A tree and a copy changed in one to three places (shape, dtype, key, container kind)."""
    tree = draw(trees)
    other = tree
    for _ in range(draw(st.integers(1, 3))):
        paths = [p for p, _ in jax.tree_util.tree_flatten_with_path(other)[0]]
        kind = draw(st.sampled_from(["shape", "dtype", "replace", "listify", "same"]))
        if not paths or kind == "same":
            continue
        target = draw(st.sampled_from(paths))

        def change(p, x, target=target, kind=kind):
            if p != target:
                return x
            if kind == "shape":
                return np.zeros(np.shape(x) + (2,), np.float32)
            if kind == "dtype":
                return np.zeros(np.shape(x), np.int32 if jax_dtype(x) in FLOATS else np.float32)
            if kind == "replace":
                return draw(trees)
            return [x]

        other = jax.tree_util.tree_map_with_path(change, other)
    return tree, other


@PROPERTY
@given(mutated())
def test_diagnose_reports_the_first_difference_in_the_lessons_order(pair):
    a, b = pair
    kind, path = oracle(a, b)
    found = diagnose(a, b)
    assert found.kind == kind, (found, kind, path)
    assert found.ok is (kind is None)
    if kind in ("shape", "dtype"):
        assert found.path == path
    if kind == "structure":
        # the path named is a node where the trees really differ: there in one tree only, or
        # another kind of node, or other children
        assert signature(a).get(found.path) != signature(b).get(found.path), found
    assert found.path in found.message or (found.path == "" and "root" in found.message) or found.ok


@PROPERTY
@given(trees, trees)
def test_diagnose_of_unrelated_trees_follows_jax(a, b):
    kind, path = oracle(a, b)
    found = diagnose(a, b)
    assert found.kind == kind
    if kind in ("shape", "dtype"):
        assert found.path == path
    elif kind == "structure":
        assert signature(a).get(found.path) != signature(b).get(found.path), found


# --------------------------------------------------------------------------- the engine


@PROPERTY
@given(float_trees)
def test_engine_tree_operations_and_step_agree_with_jax(params):
    eng = get_engine()
    assert [eng.keystr(p) for p, _ in eng.tree_flatten_with_path(params)[0]] == [p for p, _ in flat(params)]
    leaves, treedef = eng.tree_flatten(params)
    assert treedef == jax.tree.structure(params)
    rebuilt = eng.tree_unflatten(treedef, leaves)
    assert jax.tree.structure(rebuilt) == jax.tree.structure(params)

    def loss(p):
        return sum(jnp.sum(leaf**2) for leaf in jax.tree.leaves(p)) + 1.0

    r = gradient_step(loss, params, learning_rate=0.25)
    assert diagnose(params, r.grads).ok and diagnose(params, r.updated).ok
    for (path, p), (_, g), (_, u) in zip(flat(params), flat(r.grads), flat(r.updated)):
        np.testing.assert_allclose(g, 2 * p, rtol=1e-6, err_msg=path)
        np.testing.assert_allclose(u, p - 0.25 * 2 * p, rtol=1e-6, atol=1e-7, err_msg=path)
    assert r.loss == pytest.approx(float(loss(params)), rel=1e-6)


# --------------------------------------------------------------------------- serialisation


def wire(d: PytreeDiagram) -> dict:
    """The state as it goes to the page, decoded the way the page decodes it."""
    state = json.loads(json.dumps(d.get_state(), allow_nan=False))
    state["rows"] = rows_from_columns(json.loads(state["rows"]))
    state["panels"] = [{**p, "rows": rows_from_columns(p["rows"])} for p in json.loads(state["panels"])]
    return state


@PROPERTY
@given(trees, trees)
def test_no_tree_breaks_the_diagrams_serialisation(a, b):
    d = PytreeDiagram(a, grads=b, extra={"state": b})
    state = wire(d)
    assert state["rows"] == d.rows
    assert len({r["p"] for r in state["rows"]}) == len(state["rows"])
    leaf_paths = {p for p, _ in flat(a)} | {p for p, _ in flat(b)}
    by_path = {r["p"]: r for r in state["rows"]}
    assert set(by_path) >= leaf_paths - {""}  # every leaf of either tree has its row
    for path in leaf_paths - {""}:
        row = by_path[path]
        # a row that can unfold although it is a leaf somewhere: flagged, never silently merged
        assert row["leaf"] or row["s"] in ("kind", "missing"), row
    for row in state["rows"]:
        if row["u"] is not None and row["u"] in by_path:
            assert not by_path[row["u"]]["leaf"]  # children hang only under rows that unfold
    assert d.text()
    if not diagnose(a, b).ok:
        assert d.message == d.diagnosis.message != ""


@PROPERTY
@given(
    st.lists(arrays(dtypes=[np.float32, np.float16, np.int32, np.bool_]), min_size=1, max_size=6).map(
        lambda xs: xs + [x.copy() for x in xs] + [np.full(np.shape(xs[0]), np.nan, np.float32)]
    )
)
def test_batched_value_summaries_equal_the_per_leaf_ones(leaves):
    """describe summarises leaves of one shape and dtype together; the text is the same as alone."""
    from pytree_lab.summaries import summarise_array as _array_summary

    s = describe(leaves)
    for leaf, x in zip(s.leaves, leaves):
        alone = _array_summary(x, int(np.size(x)), str(x.dtype))
        assert repr((leaf.summary, leaf.values)) == repr(alone), leaf.path  # repr: NaN equals NaN


def test_a_leaf_and_an_empty_node_at_one_path_are_not_the_same_row():
    """Found by the property above: Single(0.0) against Single(None) print the same paths, but
    the first has a leaf there and the second none; the text form aligns them in general."""
    d = PytreeDiagram(Single(0.0), grads=Single(None))
    text = d.text()
    assert "leaf in one tree, container in another" in text and "grads: 0 leaves" in text
    assert not diagnose(Single(0.0), Single(None)).ok
