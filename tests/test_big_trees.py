"""The diagram's model of big trees: the shortcuts a 10k-leaf model takes give the same model.

Values are checked against numpy on the leaves themselves; the wire form against the rows.
"""

from __future__ import annotations

import dataclasses
import json
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from diagram_wire import rows_from_columns

from pytree_lab import PytreeDiagram, describe
from pytree_lab.diagram import _align, _panels_json, _rows_json
from pytree_lab.formatting import fmt_number, fmt_small, small_templates
from pytree_lab.trees import Leaf, TreeError, check_tree


def layers(n_layers: int, shape=(4, 4), seed: int = 0) -> dict:
    """The benchmark's big tree: a dict of layers, each {"weight", "bias"}, as JAX arrays."""
    rng = np.random.default_rng(seed)

    def arr(s):
        return jnp.asarray(rng.standard_normal(s, dtype=np.float32) * 0.1)

    return {f"layer_{i:05d}": {"weight": arr(shape), "bias": arr(shape[-1:])} for i in range(n_layers)}


@pytest.fixture(scope="module")
def big() -> dict:
    return layers(5_000)  # 10,000 leaves


def _cells(d: PytreeDiagram) -> dict:
    return {r["p"]: r["c"][0] for r in d.rows}


def test_10k_leaf_values_shown_are_numpys_values(big):
    d = PytreeDiagram(big)
    assert len(d.rows) == 5_000  # folded: the layers' rows only, no value formatted yet
    assert len(d._summaries[0].later) == 10_000
    d.collapsed = []  # every layer opened (as a page would, one by one): every row sent, values made
    s = d._summaries[0]
    assert s.num_leaves == 10_000 and len(d.rows) == 15_000 and not s.later
    assert [leaf.path for leaf in s.leaves] == [
        jax.tree_util.keystr(p) for p, _ in jax.tree_util.tree_flatten_with_path(big)[0]
    ]
    cells = _cells(d)
    for i in (0, 1, 2_718, 4_999):
        name = f"layer_{i:05d}"
        w, b = np.asarray(big[name]["weight"]), np.asarray(big[name]["bias"])
        wpath, bpath = f"['{name}']['weight']", f"['{name}']['bias']"
        # the 4x4 weight, whole: a row of the grid per row of the matrix, each value as fmt_number gives it
        assert cells[wpath]["ty"] == "float32[4,4]"
        assert cells[wpath]["g"].split("\n") == [" ".join(fmt_number(float(v)) for v in row) for row in w]
        assert cells[bpath]["v"] == "[" + ", ".join(fmt_number(float(v)) for v in b) + "]"
        leaf = {leaf.path: leaf for leaf in s.leaves}[wpath]
        assert leaf.values == tuple(float(v) for v in w.ravel())  # the user's numbers, not rounded
        assert leaf.summary == "[" + ", ".join("[" + ", ".join(fmt_number(float(v)) for v in r) + "]" for r in w) + "]"
        assert cells[wpath]["i"] == leaf.index and s.leaves[leaf.index] is leaf
    # containers: a layer holds two leaves, displayed as written (weight first), walked sorted (bias first)
    layer = d.rows[0]
    assert layer["p"] == "['layer_00000']" and layer["c"][0] == {"ty": "dict", "n": 2}
    assert [r["l"] for r in d.rows[1:3]] == ["weight", "bias"]
    assert cells["['layer_00000']['bias']"]["i"] == 0 and cells["['layer_00000']['weight']"]["i"] == 1


def test_10k_leaf_summaries_of_bigger_leaves_are_numpys_mean_min_max():
    tree = layers(5_000, shape=(8, 8), seed=3)  # 64 values a weight: summarised, stacked by shape
    tree["layer_00007"]["weight"] = tree["layer_00007"]["weight"].at[0, 0].set(jnp.nan)
    s = describe(tree)
    by_path = {leaf.path: leaf for leaf in s.leaves}
    for i in (0, 7, 1_234, 4_999):
        w = np.asarray(tree[f"layer_{i:05d}"]["weight"])
        leaf = by_path[f"['layer_{i:05d}']['weight']"]
        finite = w[np.isfinite(w)]
        text = (
            f"mean {fmt_number(float(finite.mean(dtype=np.float64)))}, "
            f"min {fmt_number(float(finite.min()))}, max {fmt_number(float(finite.max()))}"
        )
        assert leaf.summary == (text + "; 1 non-finite" if i == 7 else text)
        assert leaf.values is None and leaf.grid is None


def test_printf_templates_give_the_one_formatter_text():
    tricky = [
        0.0,
        -0.0,
        1.5625,
        0.15625,
        12345.0,
        2.5e-5,
        1e-7,
        -1e20,
        5e-324,
        1.7976931348623157e308,
        float("nan"),
        float("inf"),
        -float("inf"),
        0.1,
        -0.30000001192092896,
        1234.5,
        99995.0,
    ]
    rng = np.random.default_rng(1)
    values = tricky + (rng.standard_normal(3_000) * 10.0 ** rng.integers(-9, 9, 3_000)).tolist()
    line, _ = small_templates(())
    assert [line % (v + 0.0,) for v in values] == [fmt_number(v) for v in values]
    # a batch of small leaves gives each one the text fmt_small gives it alone
    grid16 = [
        0.0,
        -0.0,
        1.5625,
        0.15625,
        12345.0,
        2.5e-5,
        1e-7,
        -1e20,
        3e38,
        float("nan"),
        float("inf"),
        -float("inf"),
        0.1,
        -0.3,
        1234.5,
        99995.0,
    ]
    batch = np.array(grid16, dtype=np.float64).reshape(1, 4, 4).repeat(3, axis=0)
    d = describe([jnp.asarray(x, dtype=jnp.float32) for x in batch] + [np.asarray(x) for x in batch])
    alone = fmt_small([float(v) for v in batch[0].astype(np.float32).ravel()], (4, 4))
    assert {(leaf.summary, leaf.grid) for leaf in d.leaves[:3]} == {alone}
    assert {(leaf.summary, leaf.grid) for leaf in d.leaves[3:]} == {fmt_small(batch[0].ravel().tolist(), (4, 4))}
    assert "0" in alone[1].split() and "-0" not in alone[1].split()  # -0.0 shows as 0 ...
    assert math.copysign(1.0, d.leaves[3].values[1]) == -1.0  # ... and the value keeps its sign


def test_wire_rows_by_column_decode_to_the_rows(big):
    d = PytreeDiagram(big, extra={"optimizer state": {"count": jnp.array(3), "mu": layers(3)}})
    assert rows_from_columns(json.loads(_rows_json(d.rows))) == d.rows
    panels = json.loads(_panels_json(d.panels))
    assert [{**p, "rows": rows_from_columns(p["rows"])} for p in panels] == d.panels
    # the state sent to the page is that text, smaller than rows as objects
    state = d.get_state()
    assert rows_from_columns(json.loads(state["rows"])) == d.rows
    assert len(state["rows"]) < 0.85 * len(json.dumps(d.rows, separators=(",", ":")))
    # each column under its name spelled out, once
    wire = json.loads(state["rows"])
    assert set(wire) == {"path", "parent", "label", "depth", "leaf", "status", "cells"}
    assert set(wire["cells"][0]) == {"type", "value", "grid", "index", "not_differentiable", "children"}
    assert wire["path"][:2] == [d.rows[0]["p"], d.rows[1]["p"]]
    # several trees, a missing cell, a cell with "nd": the general alignment, same decoding
    two = PytreeDiagram({"a": jnp.ones(2), "n": jnp.array([1, 2])}, grads={"a": jnp.zeros(2)})
    assert any(c is None for r in two.rows for c in r["c"]) and any("nd" in c for r in two.rows for c in r["c"] if c)
    assert rows_from_columns(json.loads(_rows_json(two.rows))) == two.rows


def test_one_tree_rows_equal_the_general_alignment():
    tree = {"b": [1.0, {"x": np.arange(3), "y": None}], "a": layers(3), "e": {}, "s": "text"}
    s = describe(tree)
    rows = _align([s], None)
    # the general merge of two copies gives the same rows, with a second, equal cell
    assert [{**r, "c": r["c"][:1]} for r in _align([s, s], None)] == rows
    assert all(r["c"][0] == r["c"][1] for r in _align([s, s], None))
    # and its one-column answer (an order tree forces the general walk) too
    general = _align([s], describe(tree, "order", values=False))
    assert [{**r, "s": "ok"} for r in general] == rows


def test_leaves_are_frozen_leaf_objects(big):
    leaf = describe({"w": big["layer_00000"]["weight"]}).leaves[0]
    assert type(leaf) is Leaf and dataclasses.is_dataclass(leaf)
    with pytest.raises(dataclasses.FrozenInstanceError):
        leaf.summary = "changed"
    same = Leaf(
        leaf.path,
        leaf.shape,
        leaf.dtype,
        leaf.size,
        leaf.differentiable,
        leaf.summary,
        leaf.index,
        leaf.values,
        leaf.grid,
    )
    assert leaf == same and hash(leaf) == hash(same) and repr(leaf) == repr(same)


def test_shortcuts_keep_cycles_and_odd_keys_found():
    # a cycle through plain dicts of arrays is still found, path named
    inner = {"w": jnp.ones(2)}
    tree = {"layer": {"dense": inner}}
    inner["back"] = tree["layer"]
    with pytest.raises(TreeError, match=r"params\['layer'\]\['dense'\]\['back'\] refers back to params\['layer'\]"):
        describe(tree)
    with pytest.raises(TreeError, match="refers back"):
        check_tree(tree)
    # dicts with non-string keys take the general step: JAX's order and paths
    odd = {2: jnp.ones(1), 1: {"b": jnp.zeros(1), "a": 1.0}}
    assert [leaf.path for leaf in describe(odd).leaves] == [
        jax.tree_util.keystr(p) for p, _ in jax.tree_util.tree_flatten_with_path(odd)[0]
    ]
    # numpy scalars that are also Python numbers keep the Python number's dtype, as before
    leaves = describe({"f": np.float64(2.5), "g": np.float32(1.5)}).leaves
    assert [(leaf.dtype, leaf.summary) for leaf in leaves] == [("float32", "2.5"), ("float32", "1.5")]


def test_values_read_from_buffers_or_one_by_one_are_the_leaves_values():
    rng = np.random.default_rng(7)
    base = rng.standard_normal((6, 4, 4)).astype(np.float32)
    views = [b.T for b in base]  # not contiguous: no single buffer, read one by one
    copies = [np.ascontiguousarray(v) for v in views]
    on_jax = [jnp.asarray(v) for v in copies]
    ints = [rng.integers(-3, 3, (2, 3)).astype(np.int64) for _ in range(3)]
    bools = [jnp.asarray(rng.random(4) > 0.5) for _ in range(3)]
    s = describe({"v": views, "c": copies, "j": on_jax, "i": ints, "b": bools})
    by = {leaf.path: leaf for leaf in s.leaves}
    for k in range(6):
        expected = tuple(float(x) for x in copies[k].ravel())
        got = [by[f"['{col}'][{k}]"] for col in "vcj"]
        assert [leaf.values for leaf in got] == [expected] * 3
        assert len({(leaf.summary, leaf.grid) for leaf in got}) == 1
        assert got[0].grid.split("\n") == [" ".join(fmt_number(float(x)) for x in row) for row in copies[k]]
    for k in range(3):
        assert by[f"['i'][{k}]"].values == tuple(float(x) for x in ints[k].ravel())
        assert by[f"['b'][{k}]"].values == tuple(float(x) for x in np.asarray(bools[k]))
        assert by[f"['b'][{k}]"].summary == "[" + ", ".join("1" if x else "0" for x in np.asarray(bools[k])) + "]"
