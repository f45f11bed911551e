"""Which elements the before/after bars show (issue 22 §2): `bars=`, the sliders' elements by
default, the selection bringing its leaf in; tick labels that tell leaves apart (§1); and the
loss line after a failed first step (no point, whole-number ticks).

Trees: a flax-style MLP for XOR ({'Dense_0': {'kernel': (2, 8), 'bias': (8,)}, 'Dense_1':
{'kernel': (8, 1), 'bias': (1,)}}: 33 values, kernel before bias as flax writes them) and a
transformer-like dict of 37 leaves (an embedding, two blocks, a final norm and an output layer).
Expected bars are written from the trees' shapes, in the order the person wrote the tree.
"""

from __future__ import annotations

import itertools
import math
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from pytree_lab import StepExplorer
from pytree_lab.chart import TICK_CHARS, TICK_FONT_PX, BeforeAfterChart, LossHistoryChart, tick_width
from pytree_lab.explorer.sliders import MAX_BARS
from pytree_lab.formatting import short_labels

X = jnp.array([[0.0, 0.0], [0.0, 1.0], [1.0, 0.0], [1.0, 1.0]])
Y = jnp.array([0.0, 1.0, 1.0, 0.0])


def mlp_params():
    k1, k2 = jax.random.split(jax.random.PRNGKey(0))
    return {
        "Dense_0": {"kernel": jax.random.normal(k1, (2, 8)) * 0.5, "bias": jnp.zeros(8)},
        "Dense_1": {"kernel": jax.random.normal(k2, (8, 1)) * 0.5, "bias": jnp.zeros(1)},
    }


def mlp_loss(params, x):
    h = jnp.tanh(x @ params["Dense_0"]["kernel"] + params["Dense_0"]["bias"])
    out = (h @ params["Dense_1"]["kernel"] + params["Dense_1"]["bias"])[:, 0]
    return jnp.mean((out - Y) ** 2)


# The instructor's models broadcast as written: their tests run under JAX's default rank promotion.
mlp_broadcasts = pytest.mark.jax_promotion(rank="mlp_loss adds each layer's bias to the batch: x @ kernel + bias")


D, VOCAB = 4, 6  # small widths: 37 leaves, every path of a transformer's depth


def block(key):
    keys = iter(jax.random.split(key, 8))
    attn = {name: {"w": jax.random.normal(next(keys), (D, D)) * 0.3, "b": jnp.zeros(D)} for name in "qkvo"}
    mlp = {
        "fc1": {"w": jax.random.normal(next(keys), (D, 2 * D)) * 0.3, "b": jnp.zeros(2 * D)},
        "fc2": {"w": jax.random.normal(next(keys), (2 * D, D)) * 0.3, "b": jnp.zeros(D)},
    }
    return {
        "ln1": {"scale": jnp.ones(D), "bias": jnp.zeros(D)},
        "attn": attn,
        "ln2": {"scale": jnp.ones(D), "bias": jnp.zeros(D)},
        "mlp": mlp,
    }


def transformer_params():
    k = jax.random.split(jax.random.PRNGKey(1), 4)
    return {
        "embedding": jax.random.normal(k[0], (VOCAB, D)) * 0.3,
        "block_0": block(k[1]),
        "block_1": block(k[2]),
        "ln_f": {"scale": jnp.ones(D), "bias": jnp.zeros(D)},
        "out": {"w": jax.random.normal(k[3], (D, VOCAB)) * 0.3, "b": jnp.zeros(VOCAB)},
    }


def _norm(x, p):
    mu = x.mean(-1, keepdims=True)
    return (x - mu) / jnp.sqrt(((x - mu) ** 2).mean(-1, keepdims=True) + 1e-5) * p["scale"] + p["bias"]


def transformer_loss(params, tokens):
    x = params["embedding"][tokens]
    for name in ("block_0", "block_1"):
        b = params[name]
        h = _norm(x, b["ln1"])
        q, k, v = (h @ b["attn"][n]["w"] + b["attn"][n]["b"] for n in "qkv")
        att = jax.nn.softmax(q @ k.T / math.sqrt(D), axis=-1)
        x = x + (att @ v) @ b["attn"]["o"]["w"] + b["attn"]["o"]["b"]
        h = _norm(x, b["ln2"])
        x = (
            x
            + jax.nn.relu(h @ b["mlp"]["fc1"]["w"] + b["mlp"]["fc1"]["b"]) @ b["mlp"]["fc2"]["w"]
            + b["mlp"]["fc2"]["b"]
        )
    logits = _norm(x, params["ln_f"]) @ params["out"]["w"] + params["out"]["b"]
    target = jnp.roll(tokens, -1)
    return -jnp.mean(jax.nn.log_softmax(logits)[jnp.arange(tokens.shape[0]), target])


transformer_broadcasts = pytest.mark.jax_promotion(
    rank="transformer_loss adds biases and layer-norm scales to every token's row: h @ w + b, x * scale + bias"
)


TOKENS = jnp.array([0, 1, 2, 3, 4, 5, 0, 1], jnp.int32)


def element_paths(leaf_path: str, shape: tuple) -> list[str]:
    """`params<leaf_path>[i,j]` for every element, in row-major order (the bars' x values)."""
    if not shape:
        return [f"params{leaf_path}"]
    return [f"params{leaf_path}[{','.join(map(str, idx))}]" for idx in itertools.product(*map(range, shape))]


MLP_ORDER = [
    ("['Dense_0']['kernel']", (2, 8)),
    ("['Dense_0']['bias']", (8,)),
    ("['Dense_1']['kernel']", (8, 1)),
    ("['Dense_1']['bias']", (1,)),
]
MLP_ALL = [p for leaf, shape in MLP_ORDER for p in element_paths(leaf, shape)]


def shown(ex) -> list[str]:
    return [str(x) for x in ex.chart_view.bars.x]


def ticks(ex) -> list[str]:
    return [ex.chart_view.x_axis.tick_labels[x] for x in ex.chart_view.bars.x]


def values_of(ex, path: str) -> tuple[float, float]:
    """Before and after of one element, read from the explorer's result (the step's own trees)."""
    leaf = next(leaf for leaf, _ in MLP_ORDER if path.startswith(f"params{leaf}"))
    keys = [k.strip("'") for k in leaf.strip("[]").split("][")]
    idx = tuple(int(i) for i in path[len(f"params{leaf}") :].strip("[]").split(","))
    before, after = ex.result.params, ex.result.updated
    for k in keys:
        before, after = before[k], after[k]
    return float(np.asarray(before)[idx]), float(np.asarray(after)[idx])


@pytest.fixture(scope="module")
def mlp():
    return StepExplorer(mlp_loss, mlp_params(), {"x": X}, learning_rate=0.5)


@mlp_broadcasts
def test_by_default_the_bars_are_the_elements_with_sliders_then_the_next_ones(mlp):
    slid = [el.path for el, _ in mlp.param_sliders]
    # 24 sliders: the learning rate and 23 parameter elements (x is a batch, not a slider)
    assert slid == MLP_ALL[:23]
    assert shown(mlp) == MLP_ALL[:24]  # the 23 with sliders, then the next one in the tree's order
    # bar heights are the step's own before and after values
    np.testing.assert_allclose(
        np.asarray(mlp.chart_view.bars.y).T, [values_of(mlp, p) for p in MLP_ALL[:24]], rtol=1e-6
    )


@mlp_broadcasts
def test_sliders_choose_the_bars_and_the_rest_fill_up_to_the_cap():
    ex = StepExplorer(
        mlp_loss,
        mlp_params(),
        {"x": X},
        learning_rate=0.5,
        sliders=["['Dense_1']['kernel']", "Dense_1/bias", "learning_rate"],
    )
    chosen = element_paths("['Dense_1']['kernel']", (8, 1)) + element_paths("['Dense_1']['bias']", (1,))
    assert [el.path for el, _ in ex.param_sliders] == chosen
    assert shown(ex) == chosen + MLP_ALL[: MAX_BARS - 9]
    assert ex.chart_view.note == ""


@mlp_broadcasts
def test_bars_choose_exactly_by_path_label_or_container():
    params = mlp_params()
    ex = StepExplorer(mlp_loss, params, {"x": X}, bars=["params['Dense_1']"])
    assert shown(ex) == element_paths("['Dense_1']['kernel']", (8, 1)) + ["params['Dense_1']['bias'][0]"]
    assert ex.chart_view.note == ""
    ex = StepExplorer(
        mlp_loss, params, {"x": X}, bars=["Dense_0/kernel[1,3]", "['Dense_1']['bias']", "Dense_0/bias[7]"]
    )
    assert shown(ex) == [
        "params['Dense_0']['kernel'][1,3]",
        "params['Dense_1']['bias'][0]",
        "params['Dense_0']['bias'][7]",
    ]
    np.testing.assert_allclose(
        np.asarray(ex.chart_view.bars.y)[0], [float(params["Dense_0"]["kernel"][1, 3]), 0.0, 0.0]
    )
    # more than the cap: the first 24, and a note that says so (on screen and in the text form)
    ex = StepExplorer(mlp_loss, params, {"x": X}, bars=["['Dense_0']", "['Dense_1']"])
    assert shown(ex) == MLP_ALL[:24]
    assert "first 24" in ex.chart_view.note and ex.chart_view.table.note == ex.chart_view.note
    assert "first 24" in ex.text()


@pytest.mark.parametrize(
    "bars, error, match",
    [
        (["['Dense_2']"], ValueError, r"bars= names \"\['Dense_2'\]\", which is no parameter value here.*Dense_0"),
        (["nope"], ValueError, r"'nope'"),
        (["x"], ValueError, r"'x', which is an input.*inputs do not change"),
        (["learning_rate"], ValueError, r"learning rate is no parameter"),
        ([3], TypeError, r"strings"),
    ],
)
def test_a_bars_name_that_is_not_a_parameter_is_refused_by_name(bars, error, match):
    with pytest.raises(error, match=match):
        StepExplorer(mlp_loss, mlp_params(), {"x": X}, bars=bars)


@mlp_broadcasts
def test_selecting_a_leaf_not_shown_brings_it_in_and_says_so(mlp):
    mlp.selected_path = ""
    kernel1 = element_paths("['Dense_1']['kernel']", (8, 1))
    assert not set(kernel1) & set(shown(mlp))
    x_changes = []
    mlp.chart_view.bars.observe(lambda c: x_changes.append(c), "x")
    mlp.selected_path = "['Dense_1']['kernel']"  # as a click in the diagram sets it
    now = shown(mlp)
    assert now == MLP_ALL[:16] + kernel1  # the chosen bars that fit, then the selected leaf's 8
    assert len(x_changes) == 1
    note = mlp.chart_view.note
    assert "Dense_1/kernel" in note and "8 values" in note
    assert note in mlp.text()
    # its bars are highlighted, and their heights are the step's values
    assert sorted(mlp.chart_view.bars.selected) == list(range(16, 24))
    y = np.asarray(mlp.chart_view.bars.y)
    for i, path in enumerate(now):
        np.testing.assert_allclose(y[:, i], values_of(mlp, path), rtol=1e-6)
    # a slider move changes heights only: the x values (and tick labels) are not sent again
    x_changes.clear()
    mlp.sliders["Dense_0/kernel[0,0]"].value = 0.25
    assert x_changes == [] and shown(mlp) == now
    assert np.asarray(mlp.chart_view.bars.y)[0, 0] == pytest.approx(0.25)
    # selecting a shown leaf highlights it and changes nothing else
    mlp.selected_path = "['Dense_0']['kernel']"
    assert shown(mlp) == now and sorted(mlp.chart_view.bars.selected) == list(range(16))
    # a container: every element under it comes in (9), with the chosen bars that fit
    mlp.selected_path = "['Dense_1']['bias']"
    assert shown(mlp) == MLP_ALL[:23] + ["params['Dense_1']['bias'][0]"]
    assert "Dense_1/bias" in mlp.chart_view.note and "its 1 value" in mlp.chart_view.note
    assert list(mlp.chart_view.bars.selected) == [23]


@mlp_broadcasts
def test_a_click_in_the_page_brings_the_leaf_in_too(mlp):
    """The page's click arrives as the diagram's selected_path (its one intent)."""
    mlp.selected_path = ""
    mlp.diagram.set_state({"selected_path": "['Dense_1']"})
    assert mlp.selected_path == "['Dense_1']"
    assert shown(mlp)[-9:] == element_paths("['Dense_1']['kernel']", (8, 1)) + ["params['Dense_1']['bias'][0]"]
    assert sorted(mlp.chart_view.bars.selected) == list(range(15, 24))
    # the bars' table sends the leaf of a bar clicked: selected, already shown
    mlp.chart_view.table.set_state({"selected_path": "['Dense_0']['kernel']"})
    assert mlp.selected_path == "['Dense_0']['kernel']" and shown(mlp)[-9:][0] == "params['Dense_1']['kernel'][0,0]"
    # a leaf with some of its elements shown is shown: a click on a bar never moves the bars
    assert sorted(mlp.chart_view.bars.selected) == list(range(15))


@mlp_broadcasts
def test_labels_tell_the_two_kernels_apart(mlp):
    mlp.selected_path = "['Dense_1']['kernel']"
    labels = ticks(mlp)
    assert len(set(labels)) == len(labels)
    at = shown(mlp).index("params['Dense_1']['kernel'][0,0]")
    assert labels[0] == "Dense_0/kernel[0,0]" and labels[at] == "Dense_1/kernel[0,0]"
    # the table shows the full label of each bar, and its tooltip path is the x value
    assert mlp.chart_view.table.rows[at][0] == "Dense_1/kernel[0,0]"


def test_tick_labels_keep_what_tells_two_leaves_apart():
    # a long name keeps its start and its last key, as much of its start as tells them apart
    long = ["encoder_block_0/attention/query/kernel[0,0]", "encoder_block_1/attention/query/kernel[0,0]"]
    assert short_labels(long, TICK_CHARS) == ["encoder_block_0…/kernel[0,0]", "encoder_block_1…/kernel[0,0]"]
    # a key with '/' in it (['a/w']) prints as ['a']['w'] does: the two ticks still differ
    assert short_labels(["a/w[0]", "a/w[0]"], TICK_CHARS) == ["a/w[0] #0", "a/w[0] #1"]


def test_ticks_are_unique_and_cut_in_the_middle():
    def fit_ticks(ticks):
        return short_labels(ticks, TICK_CHARS)

    assert fit_ticks(["w", "w", "b"]) == ["w #0", "w #1", "b"]
    assert fit_ticks(["a_really_long_parameter_name_for_a_lecture[0]", "short"]) == [
        "a_reall…e_for_a_lecture[0]",  # its first 7 and last 18 characters
        "short",
    ]
    # whole keys go from the middle: the block and the layer's own name both stay (27 characters:
    # at 26, `blocks[0]/…/kernel[0,1]` would be both)
    two_blocks = ["blocks[0]/mlp/fc1/kernel[0,1]", "blocks[0]/mlp/fc2/kernel[0,1]", "blocks[1]/mlp/fc1/kernel[0,1]"]
    assert fit_ticks(two_blocks) == [
        "blocks[0]/…/fc1/kernel[0,1]",
        "blocks[0]/…/fc2/kernel[0,1]",
        "blocks[1]/…/fc1/kernel[0,1]",
    ]
    # keys every tick shares go first where the ticks would be cut (issue 44): one block's two layers
    assert fit_ticks(["blocks[0]/mlp/fc1/kernel[0,1]", "blocks[0]/mlp/fc2/kernel[0,1]"]) == [
        "mlp/fc1/kernel[0,1]",
        "mlp/fc2/kernel[0,1]",
    ]
    # cuts that would make two labels one keep both whole
    same_end = ["first_very_long_module_name_x/kernel[0,0]", "first_very_long_module_name_y/kernel[0,0]"]
    assert fit_ticks(same_end) == same_end


def test_a_ticks_room_is_its_width_in_the_wider_of_two_common_fonts():
    # advance widths in thousandths of an em: DejaVu Sans (D 770, e 615, ...) and Liberation Sans
    # (Arial's metrics: D 722, e 556, ...), from their fonts; the estimate takes the wider of each
    dejavu = {
        "D": 770,
        "e": 615,
        "n": 634,
        "s": 521,
        "_": 500,
        "0": 636,
        "/": 337,
        "k": 579,
        "r": 411,
        "l": 278,
        "[": 390,
        ",": 318,
        "]": 390,
    }
    liberation = {
        "D": 722,
        "e": 556,
        "n": 556,
        "s": 500,
        "_": 556,
        "0": 556,
        "/": 278,
        "k": 500,
        "r": 333,
        "l": 222,
        "[": 278,
        ",": 278,
        "]": 278,
    }
    label = "Dense_0/kernel[0,0]"
    widest = sum(max(dejavu[c], liberation[c]) for c in label) * TICK_FONT_PX / 1000
    assert tick_width(label) == pytest.approx(widest)
    # Chromium draws it 98.5 px long in Liberation Sans; the old flat estimate (6.4 px a
    # character) gave it 122 px of room
    assert 98.5 < tick_width(label) < 6.4 * len(label)
    assert tick_width("ключ") == 4 * TICK_FONT_PX  # any other character: a whole em


def test_the_bars_plot_height_is_settable_and_the_figure_keeps_its_tick_room():
    chart = BeforeAfterChart(["a/kernel[0,0]", "b/kernel[0,0]"] * 6, ["a", "b"] * 6, paths=[f"p{i}" for i in range(12)])
    tall = int(chart.figure.layout.height.removesuffix("px"))
    margin = dict(chart.figure.fig_margin)
    chart.plot_px = 150
    assert int(chart.figure.layout.height.removesuffix("px")) == tall - (230 - 150)
    assert chart.figure.fig_margin == margin  # the ticks' room and the axis title stay where they were
    chart.set_elements(["w"], ["w"])  # short ticks lie flat: the figure shrinks, the plot stays 150 px
    assert chart.x_axis.tick_rotate == 0
    assert int(chart.figure.layout.height.removesuffix("px")) == 150 + 40 + 35 + 12


@pytest.fixture(scope="module")
def transformer():
    params = transformer_params()
    assert len(jax.tree.leaves(params)) == 37
    return StepExplorer(transformer_loss, params, {"tokens": TOKENS}, learning_rate=0.1)


@transformer_broadcasts
def test_transformer_default_bars_and_a_selected_output_layer(transformer):
    ex = transformer
    # 23 sliders beside the learning rate, spread over the 21 kinds of leaves (issue 44: all 23 sat
    # in the embedding): one element of each of block_0's 16 leaves, the embedding, ln_f's two,
    # out's two, then block_1's first two; each with a gradient that is not zero here
    slid = [el for el, _ in ex.param_sliders]
    leaves = [el.leaf.path for el in slid]
    assert len(slid) == 23 and len(set(leaves)) == 23
    block_0 = [leaf for leaf in leaves if leaf.startswith("['block_0']")]
    assert len(block_0) == 16 and "['block_1']['ln1']['scale']" in leaves and "['block_1']['ln1']['bias']" in leaves
    assert {"['embedding']", "['ln_f']['scale']", "['ln_f']['bias']", "['out']['w']", "['out']['b']"} <= set(leaves)
    grads = jax.tree.leaves(ex.result.grads)
    assert all(float(np.ravel(grads[el.flat_index])[el.position]) != 0.0 for el in slid)
    assert [str(el.path) for el in slid] == shown(ex)[:23] and len(shown(ex)) == 24  # the bars: these, one more
    assert "23 parameter elements from 23 leaves" in ex.text()
    before = shown(ex)
    ex.selected_path = "['out']['w']"  # it has a bar already: the bars stay (a click on a bar never moves them)
    assert shown(ex) == before
    # a container of 16 leaves and 172 values (norms 2 x 8, attention 4 x 20, mlp 32 + 8 + 32 + 4)
    ex.selected_path = "['block_1']"
    assert shown(ex) == element_paths("['block_1']['ln1']['scale']", (D,)) + element_paths(
        "['block_1']['ln1']['bias']", (D,)
    ) + element_paths("['block_1']['attn']['q']['w']", (D, D))
    assert "the first 24 of its 172 values" in ex.chart_view.note
    labels = ticks(ex)
    assert len(set(labels)) == 24
    assert labels[0] == "block_1/ln1/scale[0]" and labels[8] == "block_1/attn/q/w[0,0]"
    assert "Bars (before and after the step): block_1/ln1/scale (4 values)" in ex.text()


@transformer_broadcasts
def test_transformer_bars_keyword_two_layers_labels_unique():
    ex = StepExplorer(
        transformer_loss,
        transformer_params(),
        {"tokens": TOKENS},
        bars=["block_0/attn/q/w", "['block_1']['attn']['q']['w']"],
    )
    q0, q1 = (
        element_paths("['block_0']['attn']['q']['w']", (D, D)),
        element_paths("['block_1']['attn']['q']['w']", (D, D)),
    )
    assert shown(ex) == q0 + q1[:8]
    assert "first 24" in ex.chart_view.note
    labels = ticks(ex)
    assert len(set(labels)) == 24 and labels[0] == "block_0/attn/q/w[0,0]" and labels[16] == "block_1/attn/q/w[0,0]"


# ---------------------------------------------------------------- the loss line


def _integers(values) -> bool:
    return all(float(v) == int(v) for v in values)


@pytest.mark.parametrize("bad", ["raises", "nan"])
def test_a_failed_first_step_draws_no_loss_point_and_whole_number_ticks(bad):
    def loss(params, x):
        if bad == "raises":
            raise ValueError("the loss failed on purpose")
        return jnp.sum(params["w"] * x) * jnp.nan

    ex = StepExplorer(loss, {"w": jnp.array([1.0, 2.0])}, {"x": jnp.array([1.0, 1.0])})
    assert ex.result is None and ex.history == []
    line = ex.history_view
    assert len(line.line.x) == 0 and len(line.line.y) == 0
    assert len(line.point.x) == 0 and len(line.point.y) == 0
    assert line.x_axis.tick_values is not None and _integers(line.x_axis.tick_values)
    assert line.x_axis.tick_format == "d"
    assert "Loss at each point" not in ex.text()
    ex.set_loss(lambda params, x: jnp.sum((params["w"] * x) ** 2))  # fixed: the first point is step 0
    assert ex.history == [5.0]
    np.testing.assert_allclose(np.asarray(line.point.x), [0.0])
    np.testing.assert_allclose(np.asarray(line.point.y), [5.0])
    ex.step(3)
    assert list(line.x_axis.tick_values) == [0.0, 1.0, 2.0, 3.0]


def test_loss_line_ticks_are_whole_steps_at_every_length():
    chart = LossHistoryChart()
    for n in (0, 1, 2, 3, 9, 17, 101, 1_000, 5_001):
        chart.show([1.0 / (k + 1) for k in range(n)])
        t = list(chart.x_axis.tick_values)
        assert t and _integers(t) and t[0] == 0 and len(t) <= 11, (n, t)
        assert len(chart.point.x) == (1 if n else 0)


def flax_params():
    """A flax.linen MLP's params as flax writes them: {"params": {"Dense_0": {"kernel", "bias"}, ...}}."""
    keys = jax.random.split(jax.random.PRNGKey(2), 3)
    sizes = [(2, 8), (8, 8), (8, 1)]
    layers = {
        f"Dense_{i}": {"kernel": jax.random.normal(k, s) * 0.5, "bias": jnp.full(s[1], 0.1)}
        for i, (k, s) in enumerate(zip(keys, sizes))
    }
    return {"params": layers}


def flax_loss(variables, x):
    h = x
    for i in range(3):
        layer = variables["params"][f"Dense_{i}"]
        h = h @ layer["kernel"] + layer["bias"]
        h = jnp.tanh(h) if i < 2 else h
    return jnp.mean((h[:, 0] - Y) ** 2)


@mlp_broadcasts
def test_flax_labels_keep_the_layer_that_tells_them_apart():
    """Issue 44: every visible slider read `params/…/kernel[0,0]` (the cut dropped `Dense_2`)."""
    last = ["params/Dense_0/kernel[0,0]", "params/Dense_1/kernel[0,0]", "params/Dense_2/kernel[0,0]"]
    ex = StepExplorer(flax_loss, flax_params(), {"x": X}, 0.1, sliders=[*last, "params/Dense_2/bias[0]"])
    try:
        shown_labels = [s.description for s in ex.sliders.values()]
        # the shared `params/` goes before the layer's name; nothing is cut, no two alike
        assert shown_labels == ["Dense_0/kernel[0,0]", "Dense_1/kernel[0,0]", "Dense_2/kernel[0,0]", "Dense_2/bias[0]"]
        assert ex.sliders["params/Dense_2/kernel[0,0]"].path == "params['params']['Dense_2']['kernel'][0,0]"
    finally:
        ex.close()
    ex = StepExplorer(flax_loss, flax_params(), {"x": X}, 0.1)  # the default sliders and bars
    try:
        described = [s.description for label, s in ex.sliders.items() if label != "learning_rate"]
        assert len(described) >= 8 and len(set(described)) == len(described), described
        # one form for all: each the layer, the leaf and the element, none cut, none with `params/`
        assert all(re.fullmatch(r"Dense_\d/(kernel|bias)\[[\d,]+\]", d) for d in described), described
        labels = ticks(ex)  # 26 characters fit the ticks: `params/` stays there
        assert len(set(labels)) == len(labels) and all(
            re.fullmatch(r"params/Dense_\d/(kernel|bias)\[[\d,]+\]", t) for t in labels
        ), labels
    finally:
        ex.close()


@mlp_broadcasts
def test_equinox_mlp_labels_are_whole_and_distinct():
    eqx = pytest.importorskip("equinox")
    model = eqx.nn.MLP(2, 1, width_size=8, depth=2, key=jax.random.PRNGKey(0))
    params, static = eqx.partition(model, eqx.is_inexact_array)

    def loss(p, x):
        return jnp.mean((jax.vmap(eqx.combine(p, static))(x)[:, 0] - Y) ** 2)

    ex = StepExplorer(
        loss,
        params,
        {"x": X},
        0.1,
        sliders=["layers[0]/weight[0,0]", "layers[1]/weight[0,0]", "layers[2]/weight[0,0]", "layers[2]/bias[0]"],
    )
    try:
        assert [s.description for s in ex.sliders.values()] == [
            "layers[0]/weight[0,0]",
            "layers[1]/weight[0,0]",
            "layers[2]/weight[0,0]",
            "layers[2]/bias[0]",
        ]
        labels = ticks(ex)
        assert len(set(labels)) == len(labels) and all("…" not in t for t in labels), labels
    finally:
        ex.close()
