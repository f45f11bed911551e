"""Runs an instructor keeps and replays, in a real JupyterLab: the loss line's log-scale box (a
page intent; the scales stay the kernel's), checked on the axis the page draws. Screenshots,
light and dark."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from .harness import DARK, LIGHT, set_theme

pytestmark = pytest.mark.browser

SHOTS = Path(__file__).resolve().parents[2] / "artifacts" / "screenshots"

CELLS = [
    "import numpy as np, optax\n"
    "from pytree_lab import StepExplorer\n"
    "X = np.array([[0., 1.], [1., 0.], [1., 1.]], np.float32)\n"
    "Y = np.array([1., 2., 3.], np.float32)\n"
    "def loss(p, x, y):\n"
    "    return ((x @ p['w'] + p['b'] - y) ** 2).mean()\n"
    "ex = StepExplorer(loss, {'w': np.array([0.5, -0.5], np.float32), 'b': np.float32(0.0)}, {'x': X, 'y': Y},\n"
    "                  optimizer=optax.adam(0.3))\n"
    "ex.step(40)\n"
    "ex",
]

# the loss figure's y-axis ticks: (value, pixel height) read from the SVG the page drew; a tick
# d3 is still placing (entering on a redraw, no transform yet) is left out: the caller reads again
LOSS_TICKS = """panel => {
  const fig = [...panel.querySelectorAll('.bqplot')].find(f => f.textContent.includes('Loss at each step'));
  const axis = [...fig.querySelectorAll('g.axis')].find(a => a.textContent.includes('loss'));
  return [...axis.querySelectorAll('g.tick')].filter(t => t.textContent.trim() !== '').map(t => {
    const m = /translate\\(\\s*[-\\d.e]+[ ,]\\s*([-\\d.e]+)/.exec(t.getAttribute('transform') || '');
    return m && [parseFloat(t.textContent.replace('\\u2212', '-')), parseFloat(m[1])];
  }).filter(t => t !== null);
}"""


@pytest.fixture(scope="module")
def nb(open_module_nb):
    nb = open_module_nb(CELLS, wait_for=".bqplot path.line")
    nb.wait_for_value("len(ex.history)", 41)
    return nb


def ticks(nb) -> list[tuple[float, float]]:
    return [tuple(t) for t in nb.panel.evaluate(LOSS_TICKS)]


def shot(nb, name: str, down_to: str) -> None:
    """The explorer from its top down to the figure whose text holds `down_to` (docs/img takes these)."""
    top = nb.panel.locator(".pytree-lab-explorer").first.bounding_box()
    fig = nb.panel.locator(".bqplot", has_text=down_to).first.bounding_box()
    clip = {"x": top["x"], "y": top["y"], "width": top["width"], "height": fig["y"] + fig["height"] - top["y"] + 8}
    nb.page.screenshot(path=str(SHOTS / name), clip=clip)


def spread(ticks, f) -> float:
    """How far the ticks' pixel heights are from a straight line in f(value): 0 when the axis is f."""
    (v0, y0), (v1, y1) = ticks[0], ticks[-1]
    per = (y1 - y0) / (f(v1) - f(v0))
    return max(abs(y0 + per * (f(v) - f(v0)) - y) for v, y in ticks)


def test_the_log_scale_box_puts_the_loss_line_on_a_log_axis_and_back(nb):
    box = nb.panel.get_by_role("checkbox", name="log-scale loss")
    linear = ticks(nb)
    assert len(linear) >= 3 and spread(linear, lambda v: v) < 1.0  # evenly spaced values: a linear axis
    box.check()
    nb.wait_for_value("ex.history_view.on_log_scale", True)
    log = []
    for _ in range(50):  # the page redraws the axis after the kernel's scale arrives
        log = [t for t in ticks(nb) if t[0] > 0]
        if len(log) >= 3 and spread(log, math.log10) < 1.0:
            break
        nb.page.wait_for_timeout(100)
    hist = nb.value("[min(ex.history), max(ex.history)]")
    lo, hi = 10 ** math.floor(math.log10(hist[0])), 10 ** math.ceil(math.log10(hist[1]))
    assert nb.value("[ex.history_view.y_log.min, ex.history_view.y_log.max]") == [lo, hi]
    assert spread(log, math.log10) < 1.0 and spread(log, lambda v: v) > 5.0  # ticks evenly spaced in log10
    # the box is the page's intent; the scales it switches stay the kernel's
    assert nb.value("__import__('pytree_lab.page', fromlist=['x']).page_writes_refused(ex.log_scale_box)") == {}
    SHOTS.mkdir(parents=True, exist_ok=True)
    for theme in (LIGHT, DARK):
        set_theme(nb.page, theme)
        shot(nb, f"replay-log-scale-{theme.split()[-1].lower()}.png", "Loss at each step")
    box.uncheck()
    nb.wait_for_value("ex.history_view.on_log_scale", False)
