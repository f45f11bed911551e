"""PytreeDiagram in a real JupyterLab: aligned rows, missing paths, folding, the optimizer
panel, selection across trees, and legible colours in both themes."""

from pathlib import Path

import pytest

from .harness import DARK, LIGHT, Timeouts, set_theme
from .pages import contrast_ratio, selected_paths, tree_cell, tree_item, wait_selected

pytestmark = pytest.mark.browser
ROOT = Path(__file__).resolve().parents[2]

CELLS = [
    # 0: the lesson's trees, one step computed by hand
    """\
import jax, jax.numpy as jnp, optax
from pytree_lab import PytreeDiagram
params = {"weight": jnp.array([1.0, -1.0]), "bias": jnp.array(0.0)}
grads = {"weight": jnp.array([-8.0, -4.0]), "bias": jnp.array(-4.0)}
updated = {"weight": jnp.array([1.4, -0.8]), "bias": jnp.array(0.2)}
aligned = PytreeDiagram(params, grads=grads, updated=updated)
aligned""",
    # 1: a gradient tree that lost ['bias'] and gained ['extra']
    """\
broken = PytreeDiagram(params, grads={"weight": grads["weight"], "extra": jnp.array(1.0)})
broken""",
    # 2: the lesson's nested tree with optax.adam state in its own panel
    """\
nested_params = {"layer": {"weight": jnp.array([1.0, -1.0]), "bias": jnp.array(0.0)}, "scale": jnp.array(1.0)}
nested_grads = jax.tree.map(jnp.ones_like, nested_params)
state = optax.adam(1e-2).init(nested_params)
nested = PytreeDiagram(nested_params, grads=nested_grads, extra={"optimizer state": state})
nested""",
    # 3: metadata inside params: flagged as not differentiable
    """PytreeDiagram({"weight": jnp.array([1.0, -1.0]), "name": "mlp"})""",
]
COLUMNS = ["params", "grads", "updated"]


@pytest.fixture(scope="module")
def diagrams(open_module_nb):
    nb = open_module_nb(CELLS, wait_for='[role="tree"]')
    outputs = nb.panel.locator(".jp-CodeCell .jp-OutputArea")
    outputs.nth(2).locator('[role="tree"]').first.wait_for()
    return nb, [outputs.nth(i) for i in range(len(CELLS))]


def box(locator) -> dict:
    b = locator.bounding_box()
    assert b is not None, f"{locator} is not visible"
    return b


def test_rows_are_aligned_by_path(diagrams):
    _nb, (aligned, *_) = diagrams
    tree = aligned.locator('[role="tree"]')
    assert tree.count() == 1
    head = tree.locator(".ptl-head > span").all_text_contents()
    assert head == ["path", *COLUMNS]
    head_boxes = [box(s) for s in tree.locator(".ptl-head > span").all()[1:]]

    tops = {}
    for path in ("['weight']", "['bias']"):
        cells = [box(tree_cell(aligned, path, column)) for column in COLUMNS]
        # one row: every tree's cell for this path at the same height, left to right
        assert max(c["y"] for c in cells) - min(c["y"] for c in cells) < 1
        assert [c["x"] for c in cells] == sorted(c["x"] for c in cells)
        # and under its column's heading
        for cell, heading in zip(cells, head_boxes):
            assert abs(cell["x"] - heading["x"]) < 1
        tops[path] = cells[0]["y"]
    assert tops["['bias']"] > tops["['weight']"]  # the order the params were written in

    assert "[1, -1]" in tree_cell(aligned, "['weight']", "params").text_content()
    assert "-4" in tree_cell(aligned, "['bias']", "grads").text_content()
    assert "0.2" in tree_cell(aligned, "['bias']", "updated").text_content()
    counts = tree.locator(".ptl-counts").all_text_contents()
    assert counts == [
        "2 leaves, 3 numerical parameter values",
        "2 leaves, 3 gradient values",
        "2 leaves, 3 numerical parameter values",
    ]


def test_a_missing_path_is_shown_missing(diagrams):
    nb, (_, broken, *_) = diagrams
    bias_grads = tree_cell(broken, "['bias']", "grads")
    assert "missing" in bias_grads.text_content()
    assert "ptl-absent" in bias_grads.get_attribute("class")
    assert "ptl-s-missing" in tree_item(broken, "['bias']").get_attribute("class")
    # still in the params cell's row
    assert abs(box(bias_grads)["y"] - box(tree_cell(broken, "['bias']", "params"))["y"]) < 1
    # an extra gradient leaf is a row too, missing on the params side
    assert "missing" in tree_cell(broken, "['extra']", "params").text_content()
    assert "ptl-s-missing" not in tree_item(broken, "['weight']").get_attribute("class")
    statuses = nb.value("{row['p']: row['s'] for row in broken.rows}")
    assert statuses == {"['weight']": "ok", "['bias']": "missing", "['extra']": "missing"}


def test_optimizer_state_has_its_own_panel(diagrams):
    nb, (_, _, nested, *_) = diagrams
    main = nested.locator(".ptl-trees [role='tree']")
    panel = nested.locator(".ptl-panel")
    assert panel.count() == 1
    assert panel.locator(".ptl-panel-title").text_content() == "optimizer state"
    panel_paths = nb.value("[row['p'] for row in nested.panels[0]['rows']]")
    assert any(p.endswith("['layer']['bias']") for p in panel_paths)  # adam's moments
    drawn = panel.locator('[role="treeitem"]').evaluate_all("els => els.map(e => e.dataset.path)")
    assert drawn == panel_paths
    # the main tree holds only the aligned trees
    main_paths = main.locator('[role="treeitem"]').evaluate_all("els => els.map(e => e.dataset.path)")
    assert main_paths == ["['layer']", "['layer']['weight']", "['layer']['bias']", "['scale']"]


def test_selecting_a_leaf_marks_it_in_every_tree(diagrams):
    nb, (_, _, nested, *_) = diagrams
    nb.run('nested.selected_path = ""')
    tree_cell(nested, "['layer']['bias']", "grads").click()
    assert nb.wait_for_value("nested.selected_path", "['layer']['bias']") == "['layer']['bias']"
    wait_selected(nested.locator(".ptl-trees"), "['layer']['bias']")
    assert selected_paths(nested.locator(".ptl-trees")) == ["['layer']['bias']"]
    # the optimizer's moments for the same parameter are marked in the panel
    related = nested.locator(".ptl-panel .ptl-related").evaluate_all("els => els.map(e => e.dataset.path)")
    assert related and all(p.endswith("['layer']['bias']") for p in related)
    assert len(related) == 2  # mu and nu


def test_containers_fold_from_the_page_and_from_python(diagrams):
    nb, (_, _, nested, *_) = diagrams
    layer = nested.locator(".ptl-trees").locator('[role="treeitem"][data-path="[\'layer\']"]')
    weight = tree_item(nested.locator(".ptl-trees"), "['layer']['weight']")
    assert layer.get_attribute("aria-expanded") == "true"
    assert weight.is_visible()

    layer.locator(":scope > .ptl-line .ptl-toggle").click()
    assert nb.wait_for_value("nested.collapsed", ["['layer']"]) == ["['layer']"]
    assert layer.get_attribute("aria-expanded") == "false"
    assert not weight.is_visible()

    nb.run("nested.collapsed = []")
    nb.page.wait_for_function("(el) => el.getAttribute('aria-expanded') === 'true'", arg=layer.element_handle())
    assert weight.is_visible()


@pytest.mark.parametrize("theme", [LIGHT, DARK])
def test_text_reads_in_both_themes(diagrams, lab_page, theme):
    nb, (aligned, broken, *_) = diagrams
    set_theme(lab_page, theme)
    assert lab_page.evaluate("() => document.body.dataset.jpThemeName") == theme
    nb.run("aligned.selected_path = \"['bias']\"")
    wait_selected(aligned, "['bias']")
    selected = tree_item(aligned, "['bias']")
    checks = {
        "selected leaf name": selected.locator(".ptl-key"),
        "selected value": selected.locator(".ptl-val").first,
        "leaf name": aligned.locator(".ptl-key").first,
        "value": aligned.locator(".ptl-val").first,
        "column heading": aligned.locator(".ptl-head > span").nth(1),
        "missing marker": broken.locator(".ptl-cell .ptl-missing").first,
        "dtype and shape": aligned.locator(".ptl-type").first,
        "counts line": aligned.locator(".ptl-counts").first,
        "not differentiable": nb.panel.locator(".ptl-nd").first,
        "flatten index": aligned.locator(".ptl-idx").first,
    }
    ratios = {name: round(contrast_ratio(loc), 2) for name, loc in checks.items()}
    # WCAG AA for normal-size text
    too_low = {name: r for name, r in ratios.items() if r < 4.5}
    assert not too_low, f"{theme}: contrast too low {too_low} (all: {ratios})"


# ---------------------------------------------------------------- small matrices, page writes

GRID_CELLS = [
    """\
import jax, jax.numpy as jnp, optax
from pytree_lab import PytreeDiagram
w = jnp.array([[0.1, -0.4, 0.2], [0.3, 0.0, 0.4], [-0.2, 0.25, -0.35]])
grid_params = {"dense": {"w": w, "b": jnp.array([0.1, -0.1, 0.0])}}
grid_grads = jax.grad(lambda p: jnp.sum(p["dense"]["w"] ** 2) + jnp.sum(p["dense"]["b"]))(grid_params)
state = optax.sgd(0.1, momentum=0.9).init(grid_params)
grid = PytreeDiagram(grid_params, grads=grid_grads, extra={"optimizer state": state})
grid""",
]

# The widget model behind a cell's output, as JupyterLab's widget manager holds it: what a
# crafted page (a stale view, a browser extension, the console) could write to.
_MODEL_WRITE = """
async ([path, cellIndex, state]) => {
  let panel = null;
  for (const w of window.jupyterapp.shell.widgets('main')) {
    if (w.context && w.context.path === path) panel = w;
  }
  const cell = panel.content.widgets[cellIndex];
  const outputs = cell.model.outputs;
  let modelId = null;
  for (let k = 0; k < outputs.length; k++) {
    const view = outputs.get(k).data['application/vnd.jupyter.widget-view+json'];
    if (view) modelId = view.model_id;
  }
  let manager = null;
  for (const child of cell.outputArea.widgets) {
    for (const w of child.widgets || []) if (w._manager && w._manager.promise) manager = await w._manager.promise;
  }
  const model = await manager.get_model(modelId);
  for (const [name, value] of Object.entries(state)) model.set(name, value);
  model.save_changes();
  return modelId;
}
"""

W_TEXTS = ["0.1", "-0.4", "0.2", "0.3", "0", "0.4", "-0.2", "0.25", "-0.35"]


@pytest.fixture(scope="module")
def grid_nb(open_module_nb):
    nb = open_module_nb(GRID_CELLS, wait_for=".ptl-grid")
    return nb, nb.panel.locator(".jp-CodeCell .jp-OutputArea").nth(0)


def test_a_3x3_weight_is_shown_whole_as_a_grid(grid_nb):
    nb, out = grid_nb
    main = out.locator(".ptl-trees")
    params_cell = tree_cell(main, "['dense']['w']", "params")
    cells = params_cell.locator(".ptl-grid-cell")
    assert cells.all_text_contents() == W_TEXTS  # all nine values, not mean/min/max
    assert "mean" not in params_cell.text_content()
    # the gradient of sum(w**2) is 2w: nine values derived by hand
    grads = tree_cell(main, "['dense']['w']", "grads").locator(".ptl-grid-cell").all_text_contents()
    assert grads == ["0.2", "-0.8", "0.4", "0.6", "0", "0.8", "-0.4", "0.5", "-0.7"]
    # laid out as three rows of three: equal tops along a row, equal right edges down a column
    boxes = [box(c) for c in cells.all()]
    tops = [round(b["y"]) for b in boxes]
    assert len(set(tops)) == 3 and tops[0] == tops[1] == tops[2] < tops[3] == tops[4] == tops[5] < tops[6]
    rights = [round(b["x"] + b["width"]) for b in boxes]
    assert rights[0] == rights[3] == rights[6] < rights[1] == rights[4] == rights[7] < rights[2]
    # the same numbers are what Python sent
    sent = nb.value("{r['p']: r['c'][0].get('g') for r in grid.rows}")
    assert sent["['dense']['w']"].split() == W_TEXTS
    # a vector stays on one line
    assert "[0.1, -0.1, 0]" in tree_cell(main, "['dense']['b']", "params").text_content()


def test_a_page_write_to_kernel_traits_is_refused(grid_nb):
    nb, out = grid_nb
    nb.run("panels_before, rows_before = grid.panels, grid.rows")
    forged = {"panels": '[{"title": "forged", "rows": [], "counts": ""}]', "rows": "[]", "columns": ["x"]}
    nb.page.evaluate(_MODEL_WRITE, [nb.path, 0, forged])
    refused = nb.kernel.wait_for("grid.refused_page_writes", lambda v: v == {"panels": 1, "rows": 1, "columns": 1})
    assert refused == {"panels": 1, "rows": 1, "columns": 1}
    assert nb.value("grid.panels == panels_before and grid.rows == rows_before and grid.columns")
    assert nb.value("grid.columns") == ["params", "grads"]
    # the page shows the kernel's trees again: the panel title and every row are back
    out.locator(".ptl-panel-title", has_text="optimizer state").wait_for(timeout=Timeouts.ms(Timeouts.ROUND_TRIP))
    assert out.locator(".ptl-panel-title").all_text_contents() == ["optimizer state"]
    assert (
        tree_cell(out.locator(".ptl-trees"), "['dense']['w']", "params").locator(".ptl-grid-cell").all_text_contents()
        == W_TEXTS
    )
    # and the diagram still answers the person: a click selects, in Python too
    tree_cell(out.locator(".ptl-trees"), "['dense']['b']", "grads").click()
    assert nb.wait_for_value("grid.selected_path", "['dense']['b']") == "['dense']['b']"
    # an intent write from the page is still accepted
    nb.page.evaluate(_MODEL_WRITE, [nb.path, 0, {"collapsed": ["['dense']"]}])
    assert nb.wait_for_value("grid.collapsed", ["['dense']"]) == ["['dense']"]
    assert nb.value("grid.refused_page_writes") == {"panels": 1, "rows": 1, "columns": 1}


@pytest.mark.parametrize("theme", [LIGHT, DARK])
def test_grid_screenshot_in_both_themes(grid_nb, lab_page, theme):
    nb, out = grid_nb
    nb.run('grid.collapsed = []; grid.selected_path = "[\'dense\'][\'w\']"')
    set_theme(lab_page, theme)
    tree_item(out.locator(".ptl-trees"), "['dense']['w']").and_(out.locator('[aria-selected="true"]')).wait_for(
        timeout=Timeouts.ms(Timeouts.ROUND_TRIP)
    )
    shots = ROOT / "artifacts" / "screenshots"
    shots.mkdir(parents=True, exist_ok=True)
    path = shots / f"diagram-grid-{theme.split()[-1].lower()}.png"
    out.screenshot(path=str(path))
    assert path.stat().st_size > 10_000
    grid_el = tree_cell(out.locator(".ptl-trees"), "['dense']['w']", "params").locator(".ptl-grid").first
    assert round(contrast_ratio(grid_el.locator(".ptl-grid-cell").first), 2) >= 4.5
