"""Shapes as they are, in a real JupyterLab page (issue 34 §1): a 2-8-2 MLP's (2, 8) kernel is
drawn as 2 rows of 8 and its (8, 2) kernel as 8 rows of 2, in the diagram and in the worked
calculation, at 1024 and 1440 px, light and dark. The shape is read from where the browser put
each value (distinct row tops and column lefts), not only from the markup: a row that wrapped
would add tops. Screenshots of the explorer go to artifacts/screenshots/.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from .harness import DARK, LIGHT, set_theme
from .pages import tree_cell

pytestmark = pytest.mark.browser
ARTIFACTS = Path(__file__).resolve().parents[2] / "artifacts" / "screenshots"

CELLS = [
    """\
import jax, jax.numpy as jnp, numpy as np
from pytree_lab import StepExplorer
rng = np.random.default_rng(0)
params = {"Dense_0": {"kernel": jnp.asarray(rng.normal(size=(2, 8)), jnp.float32), "bias": jnp.zeros(8)},
          "Dense_1": {"kernel": jnp.asarray(rng.normal(size=(8, 2)) / 3, jnp.float32), "bias": jnp.zeros(2)}}
x = jnp.asarray(rng.normal(size=(4, 2)), jnp.float32)
y = jnp.asarray(rng.normal(size=(4, 2)), jnp.float32)

def predict(p, x):
    return jnp.tanh(x @ p["Dense_0"]["kernel"] + p["Dense_0"]["bias"]) @ p["Dense_1"]["kernel"] + p["Dense_1"]["bias"]

def loss(p, x, target):
    return jnp.mean((predict(p, x) - target) ** 2)

ex = StepExplorer(loss, params, {"x": x, "target": y}, 0.05, prediction_fn=predict)
ex""",
]
SHAPES = {"['Dense_0']['kernel']": (2, 8), "['Dense_1']['kernel']": (8, 2)}
NAMES = {"['Dense_0']['kernel']": "Dense_0/kernel", "['Dense_1']['kernel']": "Dense_1/kernel"}

# Where a grid's values are drawn: its row elements, its cells, and the distinct tops and lefts
# of the cells on the page (a wrapped row would add tops; a rewrapped matrix changes both).
_DRAWN = """
(g) => {
  const cells = [...g.querySelectorAll('.ptl-grid-cell')];
  const boxes = cells.map((c) => c.getBoundingClientRect());
  return {rows: g.querySelectorAll(':scope > .ptl-grid-row').length, cells: cells.length,
          tops: new Set(boxes.map((b) => Math.round(b.top))).size,
          lefts: new Set(boxes.map((b) => Math.round(b.left))).size,
          visible: g.getClientRects().length > 0};
}
"""


@pytest.fixture(scope="module")
def mlp(open_module_nb, lab_page):
    page = lab_page
    before = page.viewport_size
    nb = open_module_nb(CELLS, wait_for=".ptl-calc")
    output = nb.panel.locator(".jp-CodeCell .jp-OutputArea").nth(0)
    output.locator(".bqplot rect.bar").first.wait_for(state="attached")
    yield nb, output
    page.set_viewport_size(before)


def drawn(grid) -> dict:
    grid.first.wait_for(state="visible")
    return grid.first.evaluate(_DRAWN)


@pytest.mark.parametrize("theme", [LIGHT, DARK])
@pytest.mark.parametrize("width", [1024, 1440])
def test_a_matrix_is_drawn_in_its_own_shape(mlp, width, theme):
    nb, output = mlp
    page = nb.page
    page.set_viewport_size({"width": width, "height": 900})
    if page.evaluate("() => document.body.dataset.jpThemeName") != theme:
        set_theme(page, theme)
    page.wait_for_timeout(400)
    for path, (rows, cols) in SHAPES.items():
        expected = {"rows": rows, "cells": rows * cols, "tops": rows, "lefts": cols, "visible": True}
        for column in ("params", "grads", "updated"):  # the diagram: every tree's cell
            got = drawn(tree_cell(output, path, column).locator(".ptl-grid"))
            assert got == expected, (width, theme, path, column, got)
        # the worked calculation: the gradient of the leaf it shows (the selection chooses it)
        nb.run(f"ex.selected_path = {path!r}")
        grad = output.locator(f'.ptl-calc .ptl-grid[aria-label="∂L/∂{NAMES[path]}"]')
        got = drawn(grad)
        assert got == expected, (width, theme, path, "calculation", got)
    # the screenshot of the explorer, the (2, 8) kernel selected
    nb.run("ex.selected_path = \"['Dense_0']['kernel']\"")
    page.wait_for_timeout(300)
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    tag = f"{width}-{theme.split()[-1].lower()}"
    for part, selector in (("top", ".pytree-lab-explorer"), ("calculation", ".ptl-leaf-picker")):
        output.locator(selector).first.evaluate("el => el.scrollIntoView({block: 'start'})")
        page.wait_for_timeout(300)
        path = ARTIFACTS / f"shapes-mlp-2-8-2-{tag}-{part}.png"
        page.screenshot(path=str(path))
        assert path.stat().st_size > 20_000
