"""Shapes and names as they are (issue 34 §1): a leaf is drawn in its own shape in the diagram,
the worked calculation and the text forms; labels are cut in the middle and unique; the default
sliders and bars move the loss; `bars=` and `sliders=` refuse wrong values with a sentence.

Expectations are written out by hand (values 0..15 laid out as a (2, 8) and an (8, 2)); JAX
only checks that the gradients a default picks are not zero.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from pytree_lab import PytreeDiagram, StepExplorer
from pytree_lab.formatting import grid_lines, grid_rows
from pytree_lab.trees import describe

ROWS_2x8 = [[str(v) for v in range(8)], [str(v) for v in range(8, 16)]]
ROWS_8x2 = [[str(2 * r), str(2 * r + 1)] for r in range(8)]


def shapes_model():
    """w1 (2, 8) and w2 (8, 2), both holding 0..15; the loss is linear in each, so its gradient
    is the constant it is multiplied by: w1's is 0..15 as a (2, 8), w2's 0..15 as an (8, 2)."""
    a = jnp.arange(16.0)
    params = {"w1": a.reshape(2, 8), "w2": a.reshape(8, 2)}

    def loss(p, x):
        return x * (jnp.sum(p["w1"] * a.reshape(2, 8)) + jnp.sum(p["w2"] * a.reshape(8, 2)))

    return loss, params


def test_a_leaf_keeps_its_shape_in_the_tree_description():
    d = describe({"w1": jnp.arange(16.0).reshape(2, 8), "w2": jnp.arange(16.0).reshape(8, 2)})
    w1, w2 = d.leaves
    assert [r.split(" ") for r in w1.grid.split("\n")] == ROWS_2x8  # 2 rows of 8
    assert [r.split(" ") for r in w2.grid.split("\n")] == ROWS_8x2  # 8 rows of 2
    cube = describe(jnp.arange(12.0).reshape(2, 2, 3)).leaves[0]
    assert cube.grid == "[0,:,:]\n0 1 2\n3 4 5\n[1,:,:]\n6 7 8\n9 10 11"


def test_higher_ranks_are_labelled_slices():
    rows = grid_rows([str(v) for v in range(24)], (2, 3, 4))
    assert rows == [
        ["[0,:,:]"],
        ["0", "1", "2", "3"],
        ["4", "5", "6", "7"],
        ["8", "9", "10", "11"],
        ["[1,:,:]"],
        ["12", "13", "14", "15"],
        ["16", "17", "18", "19"],
        ["20", "21", "22", "23"],
    ]
    assert grid_lines(rows)[:2] == ["[0,:,:]", "[ 0   1   2   3]"]


def test_the_calculation_and_the_text_forms_draw_the_same_shape():
    loss, params = shapes_model()
    ex = StepExplorer(loss, params, {"x": jnp.float32(1.0)}, layout="long")
    try:
        rows = {r.what: r for r in ex.calculation.rows()}
        assert [list(r) for r in rows["∂L/∂w1"].grid] == ROWS_2x8
        assert [list(r) for r in rows["∂L/∂w2"].grid] == ROWS_8x2
        assert rows["∂L/∂w1"].value == "[[0, 1, 2, 3, 4, 5, 6, 7], [8, 9, 10, 11, 12, 13, 14, 15]]"
        # the page's markup: one row element per matrix row, a cell per value
        html = ex.calculation.value
        w1 = html.split('aria-label="∂L/∂w1"')[1].split("</table>")[0].split('aria-label="')[0]
        assert w1.count('class="ptl-grid-row"') == 2 and w1.count('class="ptl-grid-cell"') == 16
        # the worked calculation's text: the gradient of w1 on 2 lines of 8, of w2 on 8 of 2
        text = ex.calculation.text().splitlines()
        k = next(i for i, line in enumerate(text) if "∂L/∂w1" in line and "·" not in line)
        assert [line.split("[")[-1].rstrip("]").split() for line in text[k : k + 2]] == ROWS_2x8
        k = next(i for i, line in enumerate(text) if "∂L/∂w2" in line and "·" not in line)
        assert [line.split("[")[-1].rstrip("]").split() for line in text[k : k + 8]] == ROWS_8x2
        # the diagram's text form (params, grads, updated side by side): w1's rows under its line
        dtext = ex.diagram.text().splitlines()
        k = next(i for i, line in enumerate(dtext) if line.lstrip("├└─ ").startswith("w1 "))
        grads = [line.split("]")[1].split("[")[1].split() for line in dtext[k + 1 : k + 3]]
        assert grads == ROWS_2x8  # the grads column's rows (params' are the same numbers)
        k = next(i for i, line in enumerate(dtext) if line.lstrip("├└─ ").startswith("w2 "))
        assert [line.split("[")[1].split("]")[0].split() for line in dtext[k + 1 : k + 9]] == ROWS_8x2
    finally:
        ex.close()


def test_a_diagrams_cells_carry_each_matrix_in_its_shape():
    d = PytreeDiagram({"w1": jnp.arange(16.0).reshape(2, 8), "w2": jnp.arange(16.0).reshape(8, 2)})
    text = d.text()
    assert "w1: float32[2,8]" in text and "w2: float32[8,2]" in text
    cells = {r["p"]: r["c"][0]["g"] for r in d.rows if r["leaf"]}  # what the page gets (diagram.py)
    assert [r.split(" ") for r in cells["['w1']"].split("\n")] == ROWS_2x8
    assert [r.split(" ") for r in cells["['w2']"].split("\n")] == ROWS_8x2


# ------------------------------------------------------------------ labels


def test_flax_style_labels_keep_their_layer():
    params = {"params": {"Dense_0": {"kernel": jnp.ones((2, 3))}, "Dense_1": {"kernel": jnp.ones((3, 2))}}}

    def loss(p, x):
        return jnp.sum((x @ p["params"]["Dense_0"]["kernel"]) @ p["params"]["Dense_1"]["kernel"])

    ex = StepExplorer(
        loss, params, {"x": jnp.ones((1, 2))}, sliders=["params/Dense_0/kernel[0,0]", "params/Dense_1/kernel[0,0]"]
    )
    try:
        shown = [s.description for label, s in ex.sliders.items() if label != "learning_rate"]
        # 26 characters: the shared `params/` goes first (issue 44), the layer and element stay whole
        assert shown == ["Dense_0/kernel[0,0]", "Dense_1/kernel[0,0]"]
    finally:
        ex.close()


@jax.tree_util.register_dataclass
@dataclasses.dataclass
class Linear:
    weight: jax.Array
    bias: jax.Array


@jax.tree_util.register_dataclass
@dataclasses.dataclass
class Attention:
    query: Linear


@jax.tree_util.register_dataclass
@dataclasses.dataclass
class Block:
    attention: Attention


@jax.tree_util.register_dataclass
@dataclasses.dataclass
class Model:
    layers: list


def test_equinox_like_labels_are_cut_in_the_middle_and_unique():
    model = Model([Block(Attention(Linear(jnp.ones((2, 2)), jnp.zeros(2)))) for _ in range(2)])

    def loss(m, x):
        for block in m.layers:
            x = x @ block.attention.query.weight + block.attention.query.bias
        return jnp.sum(x**2)

    names = ["layers[0]/attention/query/weight[0,0]", "layers[1]/attention/query/weight[0,0]"]
    ex = StepExplorer(loss, model, {"x": jnp.ones(2)}, sliders=names, bars=names)
    try:
        # 38 characters each, over 24: the middle keys go, the layer and the element stay
        assert [ex.sliders[n].description for n in names] == ["layers[0]/…/weight[0,0]", "layers[1]/…/weight[0,0]"]
        assert ex.sliders[names[0]].path == "params.layers[0].attention.query.weight[0,0]"  # the title: in full
        ticks = [ex.chart_view.x_axis.tick_labels[x] for x in ex.chart_view.bars.x]
        assert ticks == ["layers[0]/…/weight[0,0]", "layers[1]/…/weight[0,0]"]
    finally:
        ex.close()


# ------------------------------------------------------------------ defaults that move the loss


def embedding_model():
    """A 6-token embedding (6, 4) and an output projection (4, 6); the batch uses tokens 2 and 3
    only, so rows 0, 1, 4 and 5 of the embedding have a zero gradient."""
    rng = np.random.default_rng(1)
    params = {
        "embedding": jnp.asarray(rng.normal(size=(6, 4)), jnp.float32),
        "out": jnp.asarray(rng.normal(size=(4, 6)), jnp.float32),
    }
    inputs = {"tokens": jnp.array([2, 3]), "labels": jnp.array([3, 4])}

    def loss(p, tokens, labels):
        logits = p["embedding"][tokens] @ p["out"]
        return -jnp.mean(jax.nn.log_softmax(logits)[jnp.arange(2), labels])

    return loss, params, inputs


def test_default_sliders_and_bars_skip_rows_the_batch_does_not_use(cpu_reference):
    loss, params, inputs = embedding_model()
    grads = jax.grad(loss)(params, **inputs)
    ex = StepExplorer(loss, params, inputs, max_sliders=10)
    try:
        # 48 parameter values, 9 sliders for them after the learning rate: rows 2 and 3 (the tokens
        # of the batch), then out's first value; rows 0 and 1 (8 values) and 4 and 5 (8) passed over
        expected = [f"embedding[{r},{c}]" for r in (2, 3) for c in range(4)] + ["out[0,0]"]
        assert list(ex.sliders) == ["learning_rate", *expected]
        for label in expected:  # each moves the loss: its gradient is not zero (JAX's own)
            leaf, index = label.split("[")
            assert float(grads[leaf][tuple(int(i) for i in index.rstrip("]").split(","))]) != 0.0
        note = ex.text()
        assert "9 parameter elements whose gradient is not zero" in note and "16 elements before them" in note
        bars = [el.label for el in ex.views["ChartView"].elements]
        assert bars[:9] == expected and len(bars) == 24
        assert not any(b.startswith(("embedding[0,", "embedding[1,", "embedding[4,", "embedding[5,")) for b in bars)
        # the worked calculation opens on the embedding's first row with a gradient, not row 0's zeros
        row = next(r for r in ex.calculation.rows() if r.what.startswith("∂L/∂embedding"))
        assert row.what == "∂L/∂embedding[2,:]"
        np.testing.assert_allclose([float(v) for v in row.value.strip("[]").split(", ")], grads["embedding"][2], 1e-3)
        update = next(r for r in ex.calculation.rows() if r.section == "update" and r.path == "['embedding']")
        assert update.what.startswith("embedding[2,:] − ")
        before = ex.result.loss
        ex.sliders["embedding[2,0]"].value = ex.sliders["embedding[2,0]"].value + 0.5
        assert ex.result.loss != before  # a default slider moves the loss
    finally:
        ex.close()


def test_defaults_are_every_element_when_all_fit():
    loss, params, inputs = embedding_model()
    ex = StepExplorer(loss, params, inputs, max_sliders=60)
    try:
        assert len(ex.sliders) == 49 and "embedding[0,0]" in ex.sliders  # all 48, and the rate
        assert "whose gradient is not zero" not in ex.text()
    finally:
        ex.close()


@pytest.mark.parametrize(
    ("keyword", "value", "error", "words"),
    [
        ("bars", 3, TypeError, "bars= takes a list of paths or labels (strings), e.g. bars=["),
        ("bars", [], ValueError, "bars=[] names nothing, so no bar would be drawn"),
        ("bars", [3], TypeError, "bars= takes paths or labels as strings, not int 3"),
        ("bars", {"out": 1}, TypeError, "not dict"),
        ("sliders", [], ValueError, "(max_sliders=0 shows none)"),
        ("sliders", 2.5, TypeError, "sliders= takes a list of paths or labels (strings)"),
        ("bars", ["nothing_here"], ValueError, "bars= names 'nothing_here', which is no parameter value here"),
    ],
)
def test_every_wrong_bars_or_sliders_value_gets_a_sentence(keyword, value, error, words):
    loss, params, inputs = embedding_model()
    with pytest.raises(error) as info:
        StepExplorer(loss, params, inputs, **{keyword: value})
    text = str(info.value)
    assert words in text and text.rstrip(")").endswith(".")
