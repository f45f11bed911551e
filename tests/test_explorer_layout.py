"""The explorer's layouts (issue 22 §1, §3): compact by default, the long form on request; the worked
calculation folded to the selected leaf (every leaf one click away, the text form complete); the
diagram's big containers and the optimizer's moment columns folded; and Adam's formula shown only
where it is the update the optimizer applied. Oracles: optax called directly, step by step."""

from __future__ import annotations

import html
import re

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from pytree_lab import StepExplorer
from pytree_lab.calculation import SHORT_VALUE, CalcRow, _compact_table, fmt_value
from pytree_lab.explorer.layout import check_layout, fold_plan
from pytree_lab.trees import describe


def mlp_start():
    rng = np.random.default_rng(0)
    return {
        "Dense_0": {"kernel": rng.normal(size=(2, 8)).astype(np.float32), "bias": np.zeros(8, np.float32)},
        "Dense_1": {"kernel": (rng.normal(size=(8, 1)) / 3).astype(np.float32), "bias": np.zeros(1, np.float32)},
    }


def xor():
    return {
        "x": np.array([[0, 0], [0, 1], [1, 0], [1, 1]], np.float32),
        "target": np.array([[0], [1], [1], [0]], np.float32),
    }


def mlp_loss(p, x, target):
    h = jnp.tanh(x @ p["Dense_0"]["kernel"] + p["Dense_0"]["bias"])
    return jnp.mean((h @ p["Dense_1"]["kernel"] + p["Dense_1"]["bias"] - target) ** 2)


# The instructor's MLP broadcasts as written and optax's optimizers are not strict about dtypes:
# the tests that run them do so under JAX's defaults for that.
mlp_broadcasts = pytest.mark.jax_promotion(rank="mlp_loss adds each layer's bias to the batch: x @ kernel + bias")
optax_adam = pytest.mark.jax_promotion(
    dtype="optax's adam raises a float to its int32 step count (bias correction); "
    "MultiSteps mixes bool, int32 and float32 counters"
)


def optax_updates(opt, n):
    """The update optax returns on step n + 1 from the start (steps 1..n applied first), and the
    state after it: the oracle for what the explorer shows after `step(n)`."""
    params, state = mlp_start(), opt.init(mlp_start())
    for _ in range(n + 1):
        grads = jax.grad(mlp_loss)(params, **xor())
        updates, state = opt.update(grads, state, params)
        last, params = updates, optax.apply_updates(params, updates)
    return last, state


def folded_rows(ex):
    """The folded form's own rows (outside the every-leaf disclosure): (data-path, text) each."""
    page = ex.calculation.value
    head = page.split('<details class="ptl-calc-all">')[0]
    return [(html.unescape(path), text) for path, text in re.findall(r'<tr data-path="([^"]*)">(.*?)</tr>', head)]


def shown_values(html_text):
    return re.findall(r'class="ptl-grid-cell" role="cell">([^<]*)<', html_text)


# ------------------------------------------------------------------ the layout keyword
def test_compact_is_the_default_and_long_is_todays_form():
    ex = StepExplorer()
    assert ex.layout_form == "compact" and "ptl-compact" in ex._dom_classes
    long = StepExplorer(layout="long")
    assert long.layout_form == "long" and "ptl-compact" not in long._dom_classes
    # the long form: status, buttons, the sliders' row, then every part below (as before)
    assert long.children[:2] == (long.status, long.controls)
    assert long.children[-3:] == (long.diagram, long.calculation, long.debug.widget)  # then the output area
    assert not long.calculation.folded and long.diagram.foldable_open
    # the text form is the same in both
    assert ex.text() == long.text()


def test_compact_puts_the_bars_table_in_the_left_column_and_long_under_the_chart():
    ex, long = StepExplorer(), StepExplorer(layout="long")
    top = next(c for c in ex.children if "ptl-ex-top" in c._dom_classes)
    left = top.children[0]
    assert "ptl-ex-left" in left._dom_classes
    assert ex.chart_view.table in left.children and ex.chart_view.box.children == (ex.chart,)
    assert long.chart_view.box.children == (long.chart, long.chart_view.table)
    # the bars' plot is shorter in compact (a projected screen's third), the figure says so
    assert ex.chart_view.plot_px < long.chart_view.plot_px
    height = int(ex.chart.layout.height.removesuffix("px")) - int(long.chart.layout.height.removesuffix("px"))
    assert height == ex.chart_view.plot_px - long.chart_view.plot_px


@mlp_broadcasts
@optax_adam
def test_the_diagrams_caption_names_the_moments_only_while_they_show():
    ex = StepExplorer(mlp_loss, mlp_start(), xor(), optimizer=optax.adam(0.05))
    ex.step()
    assert ex.diagram.foldable and not ex.diagram.foldable_open
    assert "optax.apply_updates" in ex.diagram.caption and "moment columns" not in ex.diagram.caption
    ex.diagram.foldable_open = True
    assert "moment columns and the optimizer state panel are the state after this step" in ex.diagram.caption
    long = StepExplorer(mlp_loss, mlp_start(), xor(), optimizer=optax.adam(0.05), layout="long")
    long.step()
    assert "moment columns" in long.diagram.caption


def test_the_layout_keyword_still_takes_a_widget_layout_and_refuses_unknown_names():
    ex = StepExplorer(layout={"width": "900px"})
    assert ex.layout_form == "compact" and ex.layout.width == "900px"
    with pytest.raises(ValueError, match="'compact' and 'long'"):
        StepExplorer(layout="wide")
    with pytest.raises(TypeError, match="layout"):
        check_layout(3, {})
    assert check_layout(None) == "compact"


# ------------------------------------------------------------------ the worked calculation, folded
def test_a_folded_table_keeps_its_name_beside_a_group_of_rows():
    rows = [
        CalcRow("update", "w + update", "1", "['w']"),
        CalcRow("optimizer", "mu[w]", "0.5", "['w']", group="adam <mu>"),
    ]
    page = _compact_table(rows, "worked calculation for w")
    assert page.startswith('<table class="ptl-calc ptl-calc-compact" aria-label="worked calculation for w">')
    assert '<table class="ptl-calc ptl-calc-compact" aria-label="adam &lt;mu&gt;">' in page


@mlp_broadcasts
@optax_adam
def test_the_folded_calculation_shows_the_selected_leaf_and_every_leaf_one_click_away():
    ex = StepExplorer(mlp_loss, mlp_start(), xor(), 0.05, optimizer=lambda lr: optax.adam(lr))
    leaves = ["['Dense_0']['kernel']", "['Dense_0']['bias']", "['Dense_1']['kernel']", "['Dense_1']['bias']"]
    # nothing selected: the first leaf, and the model-wide rows (loss, new loss)
    assert ex.calculation.folded and ex.calculation.focus == leaves[0]
    assert {path for path, _ in folded_rows(ex)} == {"", leaves[0]}
    # every leaf's gradient and update in the disclosure below
    every = ex.calculation.value.split('<details class="ptl-calc-all">')[1]
    assert all(f'data-path="{p.replace(chr(39), "&#x27;")}"' in every for p in leaves[1:])
    # the picker lists every leaf and follows the selection; choosing in it selects
    picker = ex.leaf_picker.dropdown
    assert [v for _, v in picker.options] == leaves and picker.value == leaves[0]
    ex.selected_path = leaves[3]
    assert picker.value == leaves[3] and ex.calculation.focus == leaves[3]
    assert {path for path, _ in folded_rows(ex)} == {"", leaves[3]}
    picker.value = leaves[2]
    assert ex.selected_path == leaves[2] and ex.diagram.selected_path == leaves[2]
    # a container selected: its first leaf; the selection stays the container
    ex.selected_path = "['Dense_0']"
    assert ex.calculation.focus == leaves[0] and picker.value == leaves[0] and ex.selected_path == "['Dense_0']"
    # the text form keeps everything: every leaf's gradient and update, Adam's rows for the selected one
    text = ex.text()
    for name in ("Dense_0/kernel", "Dense_0/bias", "Dense_1/kernel", "Dense_1/bias"):
        assert f"∂L/∂{name}" in text and f"{name} + update" in text
    assert "adam mu[Dense_0/kernel]" in text and "m̂ = mu" in text
    # a short value is never broken across lines (its name wraps beside it); a long one wraps
    cells = re.findall(r'<td class="ptl-calc-value( ptl-calc-short)?">([^<]*)</td>', ex.calculation.value)
    assert {bool(short) for short, _ in cells} == {True, False}
    assert all(bool(short) == (len(html.unescape(value)) <= SHORT_VALUE) for short, value in cells)


@mlp_broadcasts
@optax_adam
def test_the_page_may_choose_the_leaf_and_nothing_else_of_the_picker():
    ex = StepExplorer(mlp_loss, mlp_start(), xor(), 0.05, optimizer=lambda lr: optax.adam(lr))
    picker = ex.leaf_picker.dropdown
    picker.set_state({"index": 1})
    assert ex.selected_path == "['Dense_0']['bias']"
    picker.set_state({"options": ["x"], "description": "hacked", "_options_labels": ["x"]})
    assert picker.description == "worked calculation for" and len(picker.options) == 4


def test_a_small_model_keeps_its_whole_calculation():
    ex = StepExplorer()  # the lesson's two leaves: the worked calculation is the lesson's figure
    assert "ptl-calc-folded" not in ex.calculation.value
    assert "weight − 0.05·∂L/∂weight" in ex.calculation.value and "bias − 0.05·∂L/∂bias" in ex.calculation.value


def test_a_selected_leaf_past_the_first_24_still_has_its_rows():
    params = {f"p{i:02d}": np.float32(i) for i in range(30)}
    ex = StepExplorer(lambda p: sum(v**2 for v in p.values()), params, {})
    ex.selected_path = "['p29']"
    rows = [r for r in ex.calculation.rows() if r.path == "['p29']"]
    assert [r.section for r in rows] == ["backward", "update"]
    assert rows[0].value == "58"  # d(p²)/dp = 2p at p = 29
    assert "∂L/∂p29" in ex.calculation.value


# ------------------------------------------------------------------ the diagram, folded
@mlp_broadcasts
@optax_adam
def test_the_optimizers_columns_and_panel_fold_behind_one_toggle():
    ex = StepExplorer(mlp_loss, mlp_start(), xor(), 0.05, optimizer=lambda lr: optax.adam(lr))
    d = ex.diagram
    assert d.columns == ["params", "grads", "adam mu", "adam nu", "updated"]
    assert d.foldable == ["adam mu", "adam nu", "optimizer state"] and d.foldable_open is False
    d.set_state({"foldable_open": True})  # the page's toggle: an intent
    assert d.foldable_open is True
    d.set_state({"foldable": []})  # the group is the kernel's
    assert d.foldable == ["adam mu", "adam nu", "optimizer state"]
    assert d.refused_page_writes == {"foldable": 1}
    # folded or not, the text form has every column and the state
    assert "adam mu" in d.text() and "adam count" in d.text()
    assert StepExplorer().diagram.foldable == []  # no optimizer: nothing to fold


def transformer_like():
    rng = np.random.default_rng(1)

    def dense(m, n):
        return rng.normal(size=(m, n)).astype(np.float32)

    def layer():
        attention = {name: dense(8, 8) for name in "qkvo"} | {f"b{name}": np.zeros(8, np.float32) for name in "qkvo"}
        return {
            "attention": attention,
            "mlp": {
                "w1": dense(8, 16),
                "b1": np.zeros(16, np.float32),
                "w2": dense(16, 8),
                "b2": np.zeros(8, np.float32),
            },
            "ln1": {"scale": np.ones(8, np.float32), "bias": np.zeros(8, np.float32)},
            "ln2": {"scale": np.ones(8, np.float32), "bias": np.zeros(8, np.float32)},
        }

    return {
        "embedding": dense(16, 8),
        "position": dense(4, 8),
        "layers": [layer(), layer()],
        "ln_f": {"scale": np.ones(8, np.float32), "bias": np.zeros(8, np.float32)},
        "out_bias": np.zeros(16, np.float32),
    }


@optax_adam
def test_big_containers_start_folded_small_ones_open():
    tree = transformer_like()
    assert len(jax.tree_util.tree_leaves(tree)) == 37
    folded = fold_plan(describe(tree))
    assert "['layers'][1]" in folded and "['layers'][0]['attention']" in folded
    assert "['layers']" not in folded and "['ln_f']" not in folded
    assert fold_plan(describe(mlp_start())) == []  # an MLP's two layers fit: nothing folded

    def loss(p):
        return sum(jnp.sum(leaf**2) for leaf in jax.tree_util.tree_leaves(p))

    ex = StepExplorer(loss, tree, {}, optimizer=optax.adam(0.01))
    assert set(folded) <= set(ex.diagram.collapsed)
    assert not StepExplorer(loss, tree, {}, layout="long").diagram.collapsed
    # a leaf selected inside a folded container: the calculation follows it, the page opens to it
    ex.selected_path = "['layers'][1]['mlp']['w2']"
    assert ex.calculation.focus == "['layers'][1]['mlp']['w2']"
    assert ex.leaf_picker.dropdown.value == "['layers'][1]['mlp']['w2']"


# ------------------------------------------------------------------ Adam's formula, only where it is the update
@mlp_broadcasts
@optax_adam
def test_plain_adam_shows_the_formula_and_it_is_optaxs_update():
    ex = StepExplorer(mlp_loss, mlp_start(), xor(), optimizer=optax.adam(0.05))
    ex.step(2)
    expected, _ = optax_updates(optax.adam(0.05), 2)
    leaf = expected["Dense_0"]["kernel"]
    formula = next(r for r in ex.calculation.rows() if r.what.startswith("−η·m̂/(√v̂ + ε)"))
    assert "the update applied" in formula.what
    assert formula.value == fmt_value(leaf)[0]  # every number as optax returned it
    # the folded form shows it (and m̂, v̂ one click away inside the moments' disclosure)
    shown = "".join(t for _, t in folded_rows(ex))
    assert "the update applied" in shown and "m̂ = mu" in shown
    assert not any(r.note for r in ex.calculation.rows())


@mlp_broadcasts
@optax_adam
def test_adamw_shows_the_update_it_returned_and_why_not_the_formula():
    opt = optax.adamw(0.05, weight_decay=0.1)
    ex = StepExplorer(mlp_loss, mlp_start(), xor(), optimizer=opt)
    ex.step(2)
    expected, _ = optax_updates(opt, 2)
    rows = ex.calculation.rows()
    assert not any(r.what.startswith(("−η", "m̂", "v̂")) for r in rows)
    update = next(r for r in rows if r.what.startswith("update[Dense_0/kernel]"))
    assert update.value == fmt_value(expected["Dense_0"]["kernel"])[0]
    why = next(r for r in rows if r.note)
    assert (
        why.value.endswith(".")
        and ". " not in why.value
        and "decays the weights" in why.value
        and "λ = 0.1" in why.value
    )
    # on screen: the returned update (not folded away) and the sentence
    shown = "".join(t for _, t in folded_rows(ex))
    assert "update[Dense_0/kernel] returned by the optimizer" in shown and "decays the weights" in shown
    assert shown_values(shown.split("returned by the optimizer")[-1])[:16] == [
        c for r in fmt_value(expected["Dense_0"]["kernel"])[1] for c in r
    ]


@pytest.mark.parametrize("n", [0, 1, 2, 3, 4])
@mlp_broadcasts
@optax_adam
def test_multisteps_shows_zero_on_a_mini_step_and_the_formula_only_when_it_applies(n):
    opt = optax.MultiSteps(optax.adam(0.05), every_k_schedule=3)
    ex = StepExplorer(mlp_loss, mlp_start(), xor(), optimizer=opt)
    if n:
        ex.step(n)
    expected, state = optax_updates(opt, n)
    rows = ex.calculation.rows()
    update = next(r for r in rows if r.what.startswith("update[Dense_0/kernel]"))
    assert update.value == fmt_value(expected["Dense_0"]["kernel"])[0]  # what optax returned
    formula = [r for r in rows if r.what.startswith("−η")]
    if (n + 1) % 3:  # a mini-step: optax returns zeros, and the page says why
        assert not np.any(np.asarray(expected["Dense_0"]["kernel"])) and not formula
        why = next(r for r in rows if r.note).value
        assert f"mini-step {int(state.mini_step)} of 3" in why and "the update is 0" in why
        assert not update.minor  # shown, not folded away
    else:  # the third: the inner Adam's step is the update applied
        assert formula and formula[0].value == fmt_value(expected["Dense_0"]["kernel"])[0]
        assert not any(r.note for r in rows)


@mlp_broadcasts
def test_a_model_of_many_leaves_lists_the_first_and_the_selected_one(monkeypatch):
    from pytree_lab.explorer import layout

    monkeypatch.setattr(layout, "MAX_PICKER", 3)
    ex = StepExplorer(mlp_loss, mlp_start(), xor(), 0.05)
    picker = ex.leaf_picker.dropdown
    assert [v for _, v in picker.options] == ["['Dense_0']['kernel']", "['Dense_0']['bias']", "['Dense_1']['kernel']"]
    ex.selected_path = "['Dense_1']['bias']"  # past the list: added to it, and shown
    assert picker.value == "['Dense_1']['bias']" and len(picker.options) == 4
    assert ex.calculation.focus == "['Dense_1']['bias']"


@mlp_broadcasts
def test_slider_labels_are_short_and_no_two_alike():
    # the XOR MLP: Dense_0 and Dense_1 both have kernel[0,0]; cut to the end alone they read alike
    from pytree_lab.formatting import elide, short_labels

    ex = StepExplorer(
        mlp_loss,
        mlp_start(),
        xor(),
        0.05,
        sliders=["Dense_0/kernel[0,0]", "Dense_1/kernel[0,0]", "Dense_0/bias[0]", "Dense_1/bias[0]"],
    )
    try:
        shown = {label: s.description for label, s in ex.sliders.items()}
        assert len(set(shown.values())) == len(shown), shown
        assert shown["Dense_0/kernel[0,0]"] == "Dense_0/kernel[0,0]"  # 19 characters: whole
        assert shown["Dense_1/kernel[0,0]"] == "Dense_1/kernel[0,0]"
        assert shown["Dense_0/bias[0]"] == "Dense_0/bias[0]"
        assert "Dense_1" in ex.sliders["Dense_1/kernel[0,0]"].path  # the full path: the slider's title
    finally:
        ex.close()
    # unique labels stay as elide makes them; clashing ones grow only until they differ
    long_a, long_b = "encoder/block_0/attention/q[0,0]", "decoder/block_0/attention/q[0,0]"
    out = short_labels([long_a, long_b, "encoder/block_0/mlp/w1[3,2]"])
    assert out[2] == elide("encoder/block_0/mlp/w1[3,2]", 24) == "encoder/…/mlp/w1[3,2]"
    assert out[:2] == ["encoder/block_0/…/q[0,0]", "decoder/block_0/…/q[0,0]"]  # 24 characters: the longest cut
    assert len(out[0]) <= len(long_a)


def test_presenter_mode_sizes_what_python_draws_and_goes_back():
    """presenter=True: the class the page's CSS sizes under (24 px text), and what Python sizes:
    the charts' margins and heights at 24/13 of their own (40 px top -> 74, 70 px left -> 129, the
    loss line's 50 px bottom -> 92, its 260 px height -> 390, at most 1.5 times), the bars' legend
    as their axis title, the loss axis in round ticks, the left column 450 px. Off: as before."""
    ex = StepExplorer(presenter=True)
    assert "ptl-presenter" in ex._dom_classes
    assert ex.history_chart.fig_margin == {"top": 74, "bottom": 92, "left": 129, "right": 20}
    assert ex.history_chart.layout.height == "390px"
    assert ex.chart.fig_margin["top"] == 74 and ex.chart.fig_margin["left"] == 129
    assert ex.chart_view.bars.display_legend is False
    assert ex.chart_view.x_axis.label == "blue: before, orange: after"
    # the lesson's loss 4, on [0, 4 + 0.08 * 4]: 4.32 / 5 = 0.864 rounds up to a tick every 1
    assert ex.history_chart.axes[1].tick_values.tolist() == [0.0, 1.0, 2.0, 3.0, 4.0]
    assert ex.left_column.layout.flex == "0 0 450px"
    ex.presenter = False
    assert "ptl-presenter" not in ex._dom_classes
    assert ex.history_chart.fig_margin == {"top": 40, "bottom": 50, "left": 70, "right": 20}
    assert ex.history_chart.layout.height == "260px"
    assert ex.chart.fig_margin["top"] == 40 and ex.chart.fig_margin["left"] == 70
    assert ex.chart_view.bars.display_legend is True and ex.chart_view.x_axis.label == "parameter element"
    assert ex.history_chart.axes[1].tick_values is None
    assert ex.left_column.layout.flex == "0 0 342px"
    ex.close()
