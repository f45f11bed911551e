"""StepExplorer in a real JupyterLab: browser actions end in assertions on the Python state.

Numbers come from the lesson's hand derivation (x = [2, 1], weight = [1, -1], bias = 0,
target 3, lr 0.05: loss 4 -> 0.64, grads [-8, -4] and -4, updated [1.4, -0.8] and 0.2),
and, after a slider move, from calling jax directly in this test process.
"""

import itertools
from pathlib import Path

import pytest

from .harness import DARK, LIGHT, set_theme
from .pages import (
    contrast_ratio,
    read_bars,
    selected_paths,
    slider_aria_value,
    slider_handle,
    slider_readout,
    tree_cell,
    tree_item,
    wait_selected,
)

pytestmark = pytest.mark.browser
ARTIFACTS = Path(__file__).resolve().parents[2] / "artifacts" / "screenshots"

CELLS = [
    "from pytree_lab import StepExplorer\n"
    "ex = StepExplorer()\n"
    "INITIAL = {label: s.value for label, s in ex.sliders.items()}\n"
    "ex",
]
LABELS = ["weight[0]", "weight[1]", "bias"]


@pytest.fixture(scope="module")
def explorer_nb(open_module_nb):
    nb = open_module_nb(CELLS, wait_for='[role="tree"]')
    nb.panel.locator(".bqplot rect.bar").first.wait_for(state="attached")
    return nb


@pytest.fixture
def nb(explorer_nb):
    """The shared explorer, back at the lesson's values with nothing selected."""
    explorer_nb.run(
        "for label, value in INITIAL.items():\n    ex.sliders[label].value = value\nex.selected_path = \"['bias']\""
    )
    # kernel -> page messages arrive in order: once the marker selection shows, the
    # slider resets sent before it have reached the page too
    wait_selected(explorer_nb.panel, "['bias']")
    explorer_nb.run('ex.selected_path = ""')
    explorer_nb.page.wait_for_function(
        "(el) => !el.querySelector('[aria-selected=\"true\"]')",
        arg=explorer_nb.panel.element_handle(),
    )
    return explorer_nb


def figure(nb):
    return nb.panel.locator(".bqplot.figure").first


def python_result(nb) -> dict:
    return nb.value("vars(ex.result)")


def oracle(x0: float, x1: float, target: float, lr: float, w0: float, w1: float, b: float) -> dict:
    """One step computed with jax directly, as the lesson writes it."""
    import jax
    import jax.numpy as jnp

    def loss_fn(params, x, target):
        prediction = jnp.dot(params["weight"], x) + params["bias"]
        return (prediction - target) ** 2

    params = {"weight": jnp.array([w0, w1], jnp.float32), "bias": jnp.array(b, jnp.float32)}
    x = jnp.array([x0, x1], jnp.float32)
    t = jnp.array(target, jnp.float32)
    loss, grads = jax.value_and_grad(loss_fn)(params, x, t)
    updated = jax.tree.map(lambda p, g: p - jnp.float32(lr) * g, params, grads)
    return {
        "loss": float(loss),
        "loss_after": float(loss_fn(updated, x, t)),
        "grads": {"weight": grads["weight"].tolist(), "bias": float(grads["bias"])},
        "updated": {"weight": updated["weight"].tolist(), "bias": float(updated["bias"])},
    }


def bars_from(result: dict) -> dict:
    p, u = result["params"], result["updated"]
    return {
        "weight[0]": [p["weight"][0], u["weight"][0]],
        "weight[1]": [p["weight"][1], u["weight"][1]],
        "bias": [p["bias"], u["bias"]],
    }


def assert_bars(drawn: dict, expected: dict, pixels_per_unit: float) -> None:
    # one and a half pixels: bqplot rounds nothing, but antialiased edges do
    tol = 1.5 / pixels_per_unit
    assert sorted(drawn) == sorted(expected)
    for label, values in expected.items():
        assert drawn[label] == pytest.approx(values, abs=tol), label


def test_first_render_shows_the_lesson_numbers(nb):
    result = python_result(nb)
    assert result["loss"] == pytest.approx(4.0)
    assert result["loss_after"] == pytest.approx(0.64, rel=1e-5)
    assert result["grads"] == {"weight": pytest.approx([-8.0, -4.0]), "bias": pytest.approx(-4.0)}
    assert result["updated"]["weight"] == pytest.approx([1.4, -0.8], rel=1e-6)
    assert result["updated"]["bias"] == pytest.approx(0.2, rel=1e-6)

    drawn = read_bars(figure(nb))
    assert drawn["x_labels"] == LABELS
    assert "parameter value" in drawn["texts"]
    assert drawn["legend"] == ["before", "after"]
    # the zero line bqplot draws sits where the y ticks put zero
    assert drawn["zero_pixel"] == pytest.approx(drawn["zero_from_ticks"], abs=1.5)
    assert_bars(
        drawn["bars"],
        {"weight[0]": [1.0, 1.4], "weight[1]": [-1.0, -0.8], "bias": [0.0, 0.2]},
        drawn["pixels_per_unit"],
    )
    # the diagram's grads column shows the gradient tree
    assert "-8, -4" in tree_cell(nb.panel, "['weight']", "grads").text_content()
    assert "-4" in tree_cell(nb.panel, "['bias']", "grads").text_content()


def test_clicking_the_bias_leaf_selects_it_in_python(nb):
    tree_cell(nb.panel, "['bias']", "params").click()
    assert nb.wait_for_value("ex.selected_path", "['bias']") == "['bias']"
    assert nb.value("ex.diagram.selected_path") == "['bias']"
    # linked views: the bias bars (third x position) are the selected ones
    assert nb.wait_for_value("ex.chart.marks[0].selected", [2]) == [2]
    assert selected_paths(nb.panel) == ["['bias']"]
    assert tree_item(nb.panel, "['bias']").get_attribute("aria-selected") == "true"


def test_selection_from_python_shows_in_the_page(nb):
    nb.run("ex.selected_path = \"['weight']\"")
    wait_selected(nb.panel, "['weight']")
    assert selected_paths(nb.panel) == ["['weight']"]
    assert tree_item(nb.panel, "['bias']").get_attribute("aria-selected") == "false"
    assert nb.value("ex.diagram.selected_path") == "['weight']"


def test_slider_keys_recompute_in_python_and_redraw_bars(nb):
    handle = slider_handle(nb.panel, "x[0]")
    assert slider_aria_value(nb.panel, "x[0]") == 2.0
    handle.focus()
    handle.press("ArrowRight")
    x0 = nb.kernel.wait_for("ex.sliders['x[0]'].value", lambda v: v != 2.0)
    assert x0 == pytest.approx(2.01, abs=1e-9)  # one slider step
    want = oracle(x0, 1.0, 3.0, 0.05, 1.0, -1.0, 0.0)
    got = nb.kernel.wait_for("vars(ex.result)", lambda r: r["params"] is not None and r["loss"] != 4.0)
    assert got["loss"] == pytest.approx(want["loss"], rel=1e-5)
    assert got["updated"]["weight"] == pytest.approx(want["updated"]["weight"], rel=1e-5)

    # End jumps to the slider's maximum: a move big enough to flip weight[0]'s update
    handle.press("End")
    x0 = nb.kernel.wait_for("ex.sliders['x[0]'].value", lambda v: v == nb.value("ex.sliders['x[0]'].max"))
    assert x0 == 6.0
    got = nb.kernel.wait_for("vars(ex.result)", lambda r: r["params"] is not None and r["loss"] != want["loss"])
    want = oracle(x0, 1.0, 3.0, 0.05, 1.0, -1.0, 0.0)
    # by hand: prediction 5, residual 2, dL/dŷ 4, grads [24, 4] and 4, updated [-0.2, -1.2], -0.2
    assert want["grads"]["weight"] == pytest.approx([24.0, 4.0])
    assert got["loss"] == pytest.approx(want["loss"], rel=1e-6)
    assert got["loss_after"] == pytest.approx(want["loss_after"], rel=1e-5)
    assert got["grads"]["weight"] == pytest.approx(want["grads"]["weight"], rel=1e-6)
    assert got["grads"]["bias"] == pytest.approx(want["grads"]["bias"], rel=1e-6)
    assert got["updated"]["weight"] == pytest.approx(want["updated"]["weight"], rel=1e-5, abs=1e-6)
    assert got["updated"]["bias"] == pytest.approx(want["updated"]["bias"], rel=1e-5, abs=1e-6)

    # the bars follow: weight[0] after is now negative
    def drawn_now():
        return read_bars(figure(nb))

    expected = bars_from(got)
    nb.page.wait_for_function(
        "(fig) => [...fig.querySelectorAll('g.bargroup')][0].querySelectorAll('rect.bar')[1]"
        ".getBoundingClientRect().top >= fig.querySelector('line.zeroLine').getBoundingClientRect().top - 1",
        arg=figure(nb).element_handle(),
    )
    drawn = drawn_now()
    assert_bars(drawn["bars"], expected, drawn["pixels_per_unit"])
    assert drawn["bars"]["weight[0]"][1] == pytest.approx(-0.2, abs=1.5 / drawn["pixels_per_unit"])
    assert slider_aria_value(nb.panel, "x[0]") == 6.0


def test_clicking_a_bar_selects_its_leaf(nb):
    weight1_after = figure(nb).locator("g.bargroup").nth(1).locator("rect.bar").nth(1)
    weight1_after.click()
    assert nb.wait_for_value("ex.selected_path", "['weight']") == "['weight']"
    wait_selected(nb.panel, "['weight']")
    assert selected_paths(nb.panel) == ["['weight']"]


def test_tree_keys_move_focus_and_select(nb):
    tree = nb.panel.locator('[role="tree"]')
    # one tab stop (roving tabindex): it stays on the row last focused
    stop = tree.locator('[role="treeitem"][tabindex="0"]')
    assert stop.count() == 1
    stop.focus()
    nb.page.keyboard.press("Home")
    focused = "() => document.activeElement.dataset.path"
    assert nb.page.evaluate(focused) == "['weight']"
    nb.page.keyboard.press("ArrowDown")
    assert nb.page.evaluate(focused) == "['bias']"
    assert tree_item(nb.panel, "['bias']").get_attribute("tabindex") == "0"
    assert tree_item(nb.panel, "['weight']").get_attribute("tabindex") == "-1"
    nb.page.keyboard.press("Enter")
    assert nb.wait_for_value("ex.selected_path", "['bias']") == "['bias']"
    nb.page.keyboard.press("Home")
    nb.page.keyboard.press(" ")
    assert nb.wait_for_value("ex.selected_path", "['weight']") == "['weight']"
    wait_selected(nb.panel, "['weight']")


@pytest.mark.parametrize("theme", [LIGHT, DARK])
def test_text_reads_in_both_themes(nb, lab_page, theme):
    set_theme(lab_page, theme)
    nb.run("ex.selected_path = \"['bias']\"")
    wait_selected(nb.panel, "['bias']")
    fig = figure(nb)
    checks = {
        "selected leaf in the diagram": tree_item(nb.panel, "['bias']").locator(".ptl-val").first,
        "selected calculation line": nb.panel.locator(".ptl-calc-selected td").first,
        "slider label": nb.panel.locator("label.ptl-slider-label").first,
        "slider readout": nb.panel.locator(".ptl-slider-readout").first,
        "chart title": fig.locator("text.mainheading"),
        "axis label": fig.locator("text.axislabel").first,
        "tick label": fig.locator("g.tick text").first,
        "legend: before": fig.locator("text.legendtext").nth(0),
        "legend: after": fig.locator("text.legendtext").nth(1),
        "calculation": nb.panel.locator(".ptl-calc td").first,
        "calculation section": nb.panel.locator(".ptl-calc th").first,
    }
    ratios = {name: round(contrast_ratio(loc), 2) for name, loc in checks.items()}
    # WCAG AA for normal-size text
    too_low = {name: r for name, r in ratios.items() if r < 4.5}
    assert not too_low, f"{theme}: contrast too low {too_low} (all: {ratios})"


# --------------------------------------------------------------------------- instructors' models

FAITHFUL = '''
import jax, jax.numpy as jnp, numpy as np
from pytree_lab import StepExplorer
params = {"w": jnp.array([0.123456, -0.987654]), "b": jnp.array(0.3333333), "tiny": jnp.array([-0.0026, 0.0013])}
inputs = {"x": jnp.array([1.5, -0.25]), "target": jnp.array(2.71828)}
def loss(p, x, target):
    return (jnp.dot(p["w"], x) + p["b"] + jnp.sum(p["tiny"]) - target) ** 2
ex = StepExplorer(loss, params, inputs)
def same_as_jax(p, i):
    value, grads = jax.value_and_grad(loss)(p, **i)
    r = ex.result
    return (float(value) == r.loss
            and all(np.array_equal(np.asarray(grads[k]), np.asarray(r.grads[k])) for k in p)
            and all(np.array_equal(np.asarray(p[k]), np.asarray(r.params[k])) for k in p))
ex
'''


def test_displayed_values_are_the_persons_own_until_one_slider_moves(open_nb):
    nb = open_nb([FAITHFUL], wait_for=".bqplot rect.bar")
    nb.page.wait_for_timeout(1000)  # let every view settle: nothing may travel back
    assert nb.value("same_as_jax(params, inputs)") is True
    assert nb.value("sum(s.moves for s in ex.sliders.values())") == 0
    # the readouts show the values themselves, not the step grid
    assert slider_readout(nb.panel, "w[0]") == "0.123456"
    assert slider_readout(nb.panel, "tiny[0]") == "-0.0026"
    assert nb.value("ex.sliders['tiny[0]'].step") == 1e-05

    handle = slider_handle(nb.panel, "w[1]")
    handle.focus()
    handle.press("ArrowRight")
    moved = nb.kernel.wait_for("float(ex.result.params['w'][1])", lambda v: v != nb.value("float(params['w'][1])"))
    assert moved == pytest.approx(-0.98, abs=1e-6)  # one step on the slider's 0.01 grid
    # every other leaf is exactly the person's own
    assert nb.value("np.array_equal(np.asarray(ex.result.params['w'][0]), np.asarray(params['w'][0]))") is True
    for leaf in ("b", "tiny"):
        assert nb.value(f"np.array_equal(np.asarray(ex.result.params['{leaf}']), np.asarray(params['{leaf}']))") is True
    assert nb.value("[s.value for k, s in ex.sliders.items() if k in ('x[0]', 'x[1]', 'target')]") == nb.value(
        "[float(inputs['x'][0]), float(inputs['x'][1]), float(inputs['target'])]"
    )
    assert nb.value("same_as_jax({**params, 'w': params['w'].at[1].set(ex.result.params['w'][1])}, inputs)") is True


BATCHED = '''
import jax, jax.numpy as jnp
from pytree_lab import StepExplorer
k1, k2, k3 = jax.random.split(jax.random.PRNGKey(0), 3)
params = {"hidden": {"w": jax.random.normal(k1, (2, 8)) * 0.5, "b": jnp.zeros(8)},
          "out": {"w": jax.random.normal(k2, (8, 3)) * 0.5, "b": jnp.zeros(3)}}
x = jax.random.normal(k3, (32, 2))
labels = (x[:, 0] > 0).astype(jnp.int32) + (x[:, 1] > 0).astype(jnp.int32)
def logits(p, x):
    return jnp.tanh(x @ p["hidden"]["w"] + p["hidden"]["b"]) @ p["out"]["w"] + p["out"]["b"]
def loss(p, x, labels):
    logp = jax.nn.log_softmax(logits(p, x))
    return -jnp.mean(jnp.take_along_axis(logp, labels[:, None], axis=1))
ex = StepExplorer(loss, params, {"x": x, "labels": labels}, learning_rate=0.5, prediction_fn=logits, target="labels")
ex
'''


def _boxes_overlap(a, b) -> bool:
    return not (
        a["right"] <= b["left"] or b["right"] <= a["left"] or a["bottom"] <= b["top"] or b["bottom"] <= a["top"]
    )


@pytest.mark.parametrize("theme", [LIGHT, DARK])
def test_a_batched_mlp_slides_params_and_shows_data_readably(open_nb, lab_page, theme, tmp_path):
    nb = open_nb([BATCHED], wait_for=".bqplot rect.bar")
    set_theme(lab_page, theme)
    sliders = nb.panel.locator(".ptl-slider")
    assert sliders.count() == 24  # max_sliders caps the total
    labels = sliders.locator("label").all_text_contents()
    assert labels[0] == "learning_rate" and labels[1] == "hidden/w[0,0]"
    assert not any(t.startswith(("x", "labels")) for t in labels)  # the batch and int labels are data
    titles = sliders.evaluate_all("els => els.map(e => e.title)")
    assert titles[1] == "params['hidden']['w'][0,0]"  # the full path, as the tooltip
    # each label names its own slider (ids are unique across the page, not per module copy)
    pairs = sliders.evaluate_all("els => els.map(e => [e.querySelector('label').htmlFor, e.querySelector('input').id])")
    assert all(f == i for f, i in pairs) and len({i for _, i in pairs}) == 24
    data = nb.panel.locator(".ptl-data").text_content()
    assert "inputs['x'] float32[32,2] (batch)" in data and "inputs['labels'] int32[32] (int labels)" in data
    # 24 bars with readable, non-overlapping tick labels
    fig = figure(nb)
    ticks = fig.locator("g.axis g.tick text").evaluate_all(
        "els => els.map(e => { const r = e.getBoundingClientRect();"
        " return {text: e.textContent, left: r.left, right: r.right, top: r.top, bottom: r.bottom}; })"
    )
    xs = [t for t in ticks if "/" in t["text"] or "[" in t["text"]]
    assert len(xs) == 24
    for a, b in itertools.pairwise(xs):
        assert not _boxes_overlap(a, b), (a, b)
    assert nb.value("ex.result.loss") == pytest.approx(nb.value("float(loss(params, x, labels))"), rel=1e-6)
    checks = {
        "slider label": sliders.locator("label").first,
        "slider readout": sliders.locator("output").first,
        "data": nb.panel.locator(".ptl-data li").first,
        "tick label": fig.locator("g.tick text").first,
    }
    ratios = {name: round(contrast_ratio(loc), 2) for name, loc in checks.items()}
    assert all(r >= 4.5 for r in ratios.values()), (theme, ratios)
    shot = ARTIFACTS / f"explorer-batched-{'dark' if theme == DARK else 'light'}.png"
    shot.parent.mkdir(parents=True, exist_ok=True)
    nb.panel.locator(".pytree-lab-explorer").first.screenshot(path=str(shot))
