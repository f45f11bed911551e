"""The text form of aligned trees with the same paths is printed from its first rows alone
(`_head_rows`): it must be exactly the text the full alignment gives."""

from __future__ import annotations

import collections

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from pytree_lab import PytreeDiagram, diagram as diagram_module

Pair = collections.namedtuple("Pair", ["left", "right"])


def _trees():
    nested = {
        "z_layer": {"w": jnp.ones((2, 3)), "b": jnp.zeros(3)},
        "a_scale": jnp.array(2.0),
        "blocks": [{"k": jnp.arange(4.0)}, {"k": jnp.arange(4.0) * 2, "extra": None}],
        "pair": Pair(jnp.array(1.0), (jnp.array(3.0), jnp.array([1.0, 2.0]))),
    }
    wide = {f"w{i:03d}": np.float32(i) for i in range(450)}  # more rows than the text shows
    deep = {"a": {"b": {"c": {"d": [jnp.ones(2), {"e": jnp.zeros(())}]}}}, "f": jnp.ones(())}
    return [nested, wide, deep]


def _general_text(d: PytreeDiagram, max_lines: int = 200) -> str:
    saved = diagram_module._head_rows
    diagram_module._head_rows = lambda *a, **k: None  # the full alignment, as before
    try:
        return d.text(max_lines)
    finally:
        diagram_module._head_rows = saved


@pytest.mark.parametrize("k", range(3))
@pytest.mark.parametrize("max_lines", [200, 7])
@pytest.mark.parametrize("written_order", [False, True])
def test_same_paths_text_is_the_full_alignments_text(k, max_lines, written_order):
    from pytree_lab import describe

    params = _trees()[k]
    grads = jax.tree.map(lambda x: x * 2 - 1, params)  # JAX's dict order (sorted keys), not the written one
    updated = jax.tree.map(lambda p, g: p - 0.1 * g, params, grads)
    d = PytreeDiagram()
    order = {"order": describe(params, "params", values=False)} if written_order else {}  # as the explorer does
    d.set_trees({"params": params, "grads": grads, "updated": updated}, **order)
    fast = d.text(max_lines)
    assert diagram_module._head_rows(d._summaries, d._order, max_lines) is not None  # the fast path ran
    assert fast == _general_text(d, max_lines)
    assert "params" in fast.splitlines()[0] and "updated" in fast.splitlines()[0]


def test_trees_that_differ_take_the_full_alignment():
    params = _trees()[0]
    grads = jax.tree.map(lambda x: x * 2, params)
    del grads["a_scale"]
    d = PytreeDiagram()
    d.set_trees({"params": params, "grads": grads})
    assert diagram_module._head_rows(d._summaries, d._order, 200) is None
    text = d.text()
    assert "— missing" in text and "missing in one tree" in text


def test_the_explorer_text_of_a_wide_model_counts_every_row():
    from pytree_lab import StepExplorer

    params = {f"w{i:03d}": jnp.array(float(i % 5)) for i in range(300)}
    ex = StepExplorer(
        lambda p, s: sum(v * v for v in p.values()) * s, params, {"s": jnp.array(1.0)}, sliders=["learning_rate"]
    )
    text = ex.text()
    assert "… (300 rows in all)" in text
    row = next(line for line in text.splitlines() if "w003" in line)
    # w003 = 3: grad 2·3 = 6, updated 3 − 0.05·6 = 2.7
    assert "float32[] 3" in row and "float32[] 6" in row and "float32[] 2.7" in row
    ex.close()
