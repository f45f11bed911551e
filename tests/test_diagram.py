"""PytreeDiagram's Python side: the state it sends, what it accepts back, its text form."""

from __future__ import annotations

import json

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from diagram_wire import rows_from_columns

from pytree_lab import PytreeDiagram, describe
from pytree_lab.diagram import FOLD_ABOVE, align

PARAMS = {"weight": jnp.array([1.0, -1.0]), "bias": jnp.array(0.0)}
optax_adam = pytest.mark.jax_promotion(dtype="optax's adam raises a float to its int32 step count (bias correction)")


def loss(p):
    return (jnp.dot(p["weight"], jnp.array([2.0, 1.0])) + p["bias"] - 3.0) ** 2


def test_aligned_columns_and_computed_cells():
    grads = jax.grad(loss)(PARAMS)
    updated = jax.tree.map(lambda p, g: p - 0.05 * g, PARAMS, grads)
    d = PytreeDiagram(PARAMS, grads=grads, updated=updated)
    assert d.columns == ["params", "grads", "updated"]
    # only params and updated hold parameters; a gradient tree holds derivatives
    assert d.counts == [
        "2 leaves, 3 numerical parameter values",
        "2 leaves, 3 gradient values",
        "2 leaves, 3 numerical parameter values",
    ]
    rows = {r["p"]: r for r in d.rows}
    assert [c["v"] for c in rows["['weight']"]["c"]] == ["[1, -1]", "[-8, -4]", "[1.4, -0.8]"]
    assert [c["v"] for c in rows["['bias']"]["c"]] == ["0", "-4", "0.2"]
    assert all(r["s"] == "ok" for r in d.rows)


def test_missing_gradient_is_shown_not_skipped():
    d = PytreeDiagram(PARAMS, grads={"weight": jnp.array([-8.0, -4.0])})
    rows = {r["p"]: r for r in d.rows}
    assert rows["['bias']"]["c"][1] is None and rows["['bias']"]["s"] == "missing"
    # the text export keeps the alignment: the missing cell sits in the grads column
    lines = d.text().splitlines()
    head = next(ln for ln in lines if ln.startswith("path"))
    bias = next(ln for ln in lines if ln.startswith("└── bias"))
    weight = next(ln for ln in lines if ln.startswith("├── weight"))
    assert bias.index("— missing") == head.index("grads") == weight.index("float32[2] [-8, -4]")
    assert bias.index("float32[] 0") == head.index("params") and bias.endswith("← missing in one tree")
    assert lines[-2:] == ["params: 2 leaves, 3 numerical parameter values", "grads: 1 leaf, 2 gradient values"]


def test_optimizer_state_has_its_own_panel():
    state = optax.adam(1e-3).init(PARAMS)
    d = PytreeDiagram(PARAMS, extra={"optimizer state": state})
    assert d.columns == ["params"]
    (panel,) = d.panels
    assert panel["title"] == "optimizer state"
    paths = [r["p"] for r in panel["rows"]]
    assert "[0].count" in paths and "[0].mu['weight']" in paths and "[0].nu['bias']" in paths
    s = describe(state)
    assert s.num_leaves == len(jax.tree.leaves(state))  # count + mu (2) + nu (2)
    assert panel["counts"].startswith(f"{s.num_leaves} leaves")


def test_selected_path_from_python_and_stale_paths():
    d = PytreeDiagram(PARAMS)
    d.selected_path = "['bias']"
    assert d.selected_path == "['bias']"
    d.selected_path = "['nope']"  # from Python: a message, and the selection stays
    assert d.selected_path == "['bias']"
    assert d.message_kind == "warning" and "selected_path \"['nope']\" is not a path in these trees" in d.message
    d.selected_path = "['weigth']"
    assert "Did you mean ['weight']?" in d.message and d.selected_path == "['bias']"
    d.selected_path = "['weight']"  # a good selection clears the note
    assert d.selected_path == "['weight']" and d.message == ""
    _page_writes(d, {"selected_path": "['gone']"})  # a stale page: nothing selected, no message
    assert d.selected_path == "" and d.message == ""
    d.selected_path = "['weight']"
    d.set_trees({"params": {"w": jnp.zeros(2)}})  # the tree changed: the old path is gone
    assert d.selected_path == ""
    d.collapsed = ["['gone']", "['w']"]
    assert d.collapsed == []  # unknown paths are dropped and a leaf cannot fold
    d.set_trees({"params": {"layer": {"w": jnp.zeros(2)}}})
    d.collapsed = ["['layer']", "['layer']"]
    assert d.collapsed == ["['layer']"]


def _big(n=FOLD_ABOVE):
    rng = np.random.default_rng(5)
    return {
        f"layer{i}": {
            "w": jnp.asarray(rng.normal(size=3), jnp.float32),
            "b": jnp.asarray(rng.normal(size=1), jnp.float32),
        }
        for i in range(n)
    }


def test_big_trees_start_folded_and_small_ones_open():
    big = _big()
    d = PytreeDiagram(big)
    assert set(d.collapsed) == {f"['layer{i}']" for i in range(FOLD_ABOVE)}
    # a folded container's children stay in the kernel: the page gets the top level only
    assert [r["p"] for r in d.rows] == [f"['layer{i}']" for i in range(FOLD_ABOVE)]
    assert all(r["c"][0] == {"ty": "dict", "n": 2} for r in d.rows)
    # every path is still known (selection, the text form), and the model has all of them
    assert len(d._paths) == 3 * FOLD_ABOVE and len(align(d.summaries)) == 3 * FOLD_ABOVE
    small = PytreeDiagram({"layer": {"w": jnp.zeros(3)}})
    assert small.collapsed == [] and len(small.rows) == 2


def test_opening_a_folded_container_sends_its_rows_with_the_leaves_own_values():
    big = _big()
    d = PytreeDiagram(big)
    sent = []
    d.observe(lambda ch: sent.append(len(ch["new"])), "rows")
    d.collapsed = [p for p in d.collapsed if p != "['layer7']"]  # as the page writes it on a click
    assert sent == [FOLD_ABOVE + 2]
    rows = {r["p"]: r for r in d.rows}
    w = rows["['layer7']['w']"]
    assert w["u"] == "['layer7']" and w["leaf"] == 1
    assert w["c"][0]["v"] == "[" + ", ".join(format(float(v), ".4g") for v in np.asarray(big["layer7"]["w"])) + "]"
    assert [r["p"] for r in d.rows].index("['layer7']['b']") == [r["p"] for r in d.rows].index("['layer7']") + 2
    # folding it again keeps its rows on the page (nothing is sent); opening another sends two more
    d.collapsed = d.collapsed + ["['layer7']"]
    d.collapsed = [p for p in d.collapsed if p != "['layer9']"]
    assert sent == [FOLD_ABOVE + 2, FOLD_ABOVE + 4]
    # the rows are the ones the whole alignment gives, where they are sent
    whole = {r["p"]: r for r in align(d.summaries)}
    assert all(whole[r["p"]] == r for r in d.rows)


def test_selecting_a_path_inside_folded_containers_opens_them():
    deep = {
        f"block{i}": {"attn": {"q": jnp.full(2, float(i)), "k": jnp.ones(2)}, "mlp": jnp.ones(3)} for i in range(60)
    }
    d = PytreeDiagram(deep)
    assert "['block42']" in d.collapsed and "['block42']['attn']" in d.collapsed
    d.selected_path = "['block42']['attn']['q']"
    assert d.selected_path == "['block42']['attn']['q']"
    assert "['block42']" not in d.collapsed and "['block42']['attn']" not in d.collapsed
    rows = {r["p"]: r for r in d.rows}
    assert rows["['block42']['attn']['q']"]["c"][0]["v"] == "[42, 42]"
    assert "['block41']['attn']" not in rows  # the others stay folded, in the kernel
    # an explorer step (same structure, new values) keeps what was opened
    d.set_trees({"params": {k: {**v, "mlp": v["mlp"] * 2} for k, v in deep.items()}})
    assert {r["p"]: r for r in d.rows}["['block42']['mlp']"]["c"][0]["v"] == "[2, 2, 2]"
    assert d.selected_path == "['block42']['attn']['q']"


def test_values_left_for_later_are_a_copy_of_the_users_array():
    big = {f"layer{i}": {"w": np.arange(3, dtype=np.float32) + i} for i in range(FOLD_ABOVE + 1)}
    d = PytreeDiagram(big)
    big["layer3"]["w"][:] = -1.0  # the user changes arrays in place after the diagram was made
    big["layer5"]["w"][:] = -1.0
    d.collapsed = [p for p in d.collapsed if p != "['layer3']"]
    assert {r["p"]: r for r in d.rows}["['layer3']['w']"]["c"][0]["v"] == "[3, 4, 5]"
    leaf = {leaf.path: leaf for leaf in d.summaries[0].leaves}["['layer5']['w']"]  # formatted when read
    assert leaf.summary == "[5, 6, 7]" and leaf.values == (5.0, 6.0, 7.0)


def test_text_form_for_places_without_a_widget_front_end():
    d = PytreeDiagram(PARAMS)
    bundle = d._repr_mimebundle_()
    data = bundle[0] if isinstance(bundle, tuple) else bundle
    lesson = "params\n├── weight: float32[2]\n└── bias: float32[]\n2 leaves, 3 numerical parameter values"
    assert data["text/plain"] == lesson
    assert "application/vnd.jupyter.widget-view+json" in data
    hostile = PytreeDiagram({"<img src=x onerror=alert(1)>": 1.0})
    html = (
        hostile._repr_mimebundle_()[0]
        if isinstance(hostile._repr_mimebundle_(), tuple)
        else hostile._repr_mimebundle_()
    )["text/html"]
    assert "<img" not in html and "&lt;img src=x onerror=alert(1)&gt;" in html


def test_a_message_keeps_the_trees():
    d = PytreeDiagram(PARAMS)
    rows = d.rows
    d.show_message("['bias'] is missing from the gradient tree")
    assert d.rows == rows and d.message.startswith("['bias']")


def test_a_closed_diagram_is_freed():
    """Nothing keeps a closed diagram (and the trees it summarised) alive."""
    import gc
    import weakref

    d = PytreeDiagram({"w": jnp.zeros(3)})
    ref = weakref.ref(d)
    d.close()
    del d
    gc.collect()
    assert ref() is None


def test_state_panels_count_values_and_do_not_flag_step_counts():
    state = optax.adam(1e-3).init(PARAMS)
    d = PytreeDiagram(PARAMS, extra=state)  # a bare tree is titled "optimizer state"
    (panel,) = d.panels
    assert panel["title"] == "optimizer state"
    assert panel["counts"] == "5 leaves, 7 values"  # count + mu (1 + 2) + nu (1 + 2)
    count_row = next(r for r in panel["rows"] if r["p"] == "[0].count")
    assert count_row["c"][0]["ty"] == "int32[]" and "nd" not in count_row["c"][0]
    assert "not differentiable" not in d.text().split("optimizer state")[1]


@optax_adam
def test_explorer_keeps_an_optimizer_state_panel_across_moves():
    from pytree_lab import StepExplorer
    from pytree_lab.lesson import lesson_inputs, lesson_loss

    state = optax.adam(1e-2).init(PARAMS)
    ex = StepExplorer(lesson_loss, PARAMS, lesson_inputs(), extra={"optimizer state": state})
    ex.sliders["x[0]"].value = 3.0
    assert ex.diagram.columns == ["params", "grads", "updated"]
    assert [p["title"] for p in ex.diagram.panels] == ["optimizer state"]
    new_state = optax.adam(1e-2).update(ex.result.grads, state, PARAMS)[1]
    ex.show_extra({"optimizer state": new_state})
    count = next(r for r in ex.diagram.panels[0]["rows"] if r["p"] == "[0].count")
    assert count["c"][0]["v"] == "1"  # one optax step counted


def _page_writes(widget, state: dict) -> None:
    """The comm message the front end sends when the page writes traits (model.save_changes)."""
    widget._handle_msg({"content": {"data": {"method": "update", "state": state, "buffer_paths": []}}, "buffers": []})


def test_the_page_may_write_only_selection_and_folding(caplog):
    grads = jax.grad(loss)(PARAMS)
    state = optax.sgd(0.1).init(PARAMS)
    d = PytreeDiagram(PARAMS, grads=grads, extra={"optimizer state": state})
    rows, panels, columns = d.rows, d.panels, d.columns
    sent = []
    d._send = lambda msg, buffers=None: sent.append(msg)  # what goes back to the page
    with caplog.at_level("INFO", logger="pytree_lab.page"):
        _page_writes(
            d, {"panels": "[{\"title\": \"x\"}]", "rows": "[]", "columns": ["hacked"], "selected_path": "['bias']"}
        )
        _page_writes(d, {"panels": "[]"})
    # kernel-owned traits keep the kernel's values; the intent trait is accepted
    assert d.rows == rows and d.panels == panels and d.columns == columns
    assert d.selected_path == "['bias']"
    assert d.refused_page_writes == {"panels": 2, "rows": 1, "columns": 1}
    # the kernel's values are sent back so the page shows them again
    restored = [m["state"] for m in sent if m["method"] == "update"]
    assert any(
        "panels" in s and [{**p, "rows": rows_from_columns(p["rows"])} for p in json.loads(s["panels"])] == panels
        for s in restored
    )
    # logged once per trait, quietly (INFO: no traceback, nothing printed into the notebook)
    refusals = [r for r in caplog.records if r.name == "pytree_lab.page"]
    assert len(refusals) <= 3 and all(r.levelname == "INFO" for r in refusals)
    # the diagram still works after the refused writes
    d.set_trees({"params": PARAMS, "grads": grads})
    assert [c["v"] for c in {r["p"]: r for r in d.rows}["['bias']"]["c"]] == ["0", "-4"]


def test_small_matrices_are_shown_whole_as_a_grid():
    w = jnp.array([[0.1, -0.4, 0.2], [0.3, 0.0, 0.4], [-0.0, 2.5, -3.0]])
    g = jax.grad(lambda p: jnp.sum(p["w"] ** 2))({"w": w})
    d = PytreeDiagram(
        {"w": w, "big": jnp.arange(25.0).reshape(5, 5), "v": jnp.arange(16.0)},
        grads={"w": g["w"], "big": jnp.zeros((5, 5)), "v": jnp.zeros(16)},
    )
    rows = {r["p"]: r for r in d.rows}
    params_cell, grads_cell = rows["['w']"]["c"]
    # every one of the 9 values, hand-checked: 2·w for the gradient; -0 shows as 0
    assert params_cell["g"] == "0.1 -0.4 0.2\n0.3 0 0.4\n0 2.5 -3" and "v" not in params_cell
    assert grads_cell["g"] == "0.2 -0.8 0.4\n0.6 0 0.8\n0 5 -6"
    # 25 values: a summary, as before; a 16-value vector is listed on one line
    assert rows["['big']"]["c"][0]["v"] == "mean 12, min 0, max 24" and "g" not in rows["['big']"]["c"][0]
    assert rows["['v']"]["c"][0]["v"] == "[" + ", ".join(str(i) for i in range(16)) + "]"
    leaf = {leaf.path: leaf for leaf in d.summaries[0].leaves}["['w']"]
    assert leaf.summary == "[[0.1, -0.4, 0.2], [0.3, 0, 0.4], [0, 2.5, -3]]"
    assert leaf.values[8] == -3.0 and len(leaf.values) == 9
    # a 4x4 (16 values) is still whole, and so is a (2, 2, 2): its 2-D slices, each after its label
    d.set_trees({"params": {"m": jnp.eye(4), "t": jnp.arange(8.0).reshape(2, 2, 2)}})
    rows = {r["p"]: r for r in d.rows}
    assert rows["['m']"]["c"][0]["g"] == "1 0 0 0\n0 1 0 0\n0 0 1 0\n0 0 0 1"
    assert rows["['t']"]["c"][0]["g"] == "[0,:,:]\n0 1\n2 3\n[1,:,:]\n4 5\n6 7"
    assert {leaf.path: leaf for leaf in d.summaries[0].leaves}[
        "['t']"
    ].summary == "[[[0, 1], [2, 3]], [[4, 5], [6, 7]]]"


@optax_adam
def test_a_big_optimizer_state_panel_starts_folded_and_sends_rows_as_opened():
    params = _big()
    state = optax.adam(0.1).init(params)
    d = PytreeDiagram(params, extra={"optimizer state": state})
    (panel,) = d.panels
    # the panel's own top level: (ScaleByAdamState, EmptyState), folded; nothing below is sent
    assert [r["p"] for r in panel["rows"]] == ["[0]", "[1]"]
    assert {"[0]", "[0].mu", "[0].mu['layer3']"} <= set(d.collapsed)
    d.collapsed = [p for p in d.collapsed if p not in ("[0]", "[0].mu")]
    rows = [r["p"] for r in d.panels[0]["rows"]]
    assert rows[:4] == ["[0]", "[0].count", "[0].mu", "[0].mu['layer0']"] and "[0].nu['layer0']" not in rows
    # selecting a moment from Python opens what holds it; its value is the state's own
    d.selected_path = "[0].nu['layer7']['w']"
    cells = {r["p"]: r["c"][0] for r in d.panels[0]["rows"]}
    assert cells["[0].nu['layer7']['w']"]["v"] == "[0, 0, 0]" and "[0].nu" not in d.collapsed
    # a step (new state, same structure) keeps what was opened, with the new values
    grads = jax.tree.map(jnp.ones_like, params)
    _, state = optax.adam(0.1).update(grads, state, params)
    d.set_trees({"params": params}, extra={"optimizer state": state})
    cells = {r["p"]: r["c"][0] for r in d.panels[0]["rows"]}
    assert cells["[0].nu['layer7']['w']"]["v"] == "[0.001, 0.001, 0.001]"
    assert cells["[0].count"]["v"] == "1"
    # the text form still has the whole state
    assert "nu" in d.text(max_lines=2000) and len(align([d._panel_summaries[0]])) > 3 * FOLD_ABOVE


def test_a_new_big_structure_starts_folded_and_fold_true_folds_everything():
    d = PytreeDiagram(_big())
    d.collapsed = [p for p in d.collapsed if p != "['layer1']"]
    renamed = {f"block{i}": v for i, v in enumerate(_big().values())}
    d.set_trees({"params": renamed})  # another model: its containers are new, so folded
    assert len(d.rows) == FOLD_ABOVE and set(d.collapsed) == {f"['block{i}']" for i in range(FOLD_ABOVE)}
    same = _big()
    d.set_trees({"params": same})
    d.collapsed = [p for p in d.collapsed if p != "['layer1']"]
    d.set_trees({"params": same})  # a step: what was opened stays open
    assert "['layer1']" not in d.collapsed and len(d.rows) == FOLD_ABOVE + 2
    d.set_trees({"params": same}, fold=True)
    assert len(d.collapsed) == FOLD_ABOVE
    d.set_trees({"params": same}, fold=False)  # fold=False leaves the folding as it is
    assert len(d.collapsed) == FOLD_ABOVE


def test_a_page_write_of_no_known_path_opens_nothing():
    d = PytreeDiagram(_big())
    before = list(d.collapsed)
    for junk in ([1, None, {}], ["['gone']", "['layer_x']"], [["['layer1']"]]):
        d.set_state({"collapsed": junk})  # as the page's message arrives
        assert d.collapsed == before and len(d.rows) == FOLD_ABOVE
    d.set_state({"collapsed": before[1:] + ["['gone']"]})  # a known path dropped: that one opens
    assert d.collapsed == before[1:] and len(d.rows) == FOLD_ABOVE + 2


def test_an_unknown_selection_in_a_big_tree_suggests_the_closest_path():
    layers = {f"layer_{i:04d}": {"weight": jnp.zeros(2), "bias": jnp.zeros(1)} for i in range(1500)}
    d = PytreeDiagram(layers)  # 4,500 paths: walked down piece by piece
    d.selected_path = "['layer_0042']"
    for typed in ("['layer_0042']['wieght']", "['layr_0042']['weight']", "['layer_0042']['weight']['x']"):
        d.selected_path = typed
        assert d.selected_path == "['layer_0042']" and d.message.endswith("Did you mean ['layer_0042']['weight']?")
    d.selected_path = "['zzz']"
    assert "Did you mean" not in d.message and "Paths are keystr strings such as" in d.message
