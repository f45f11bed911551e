"""Presenter mode in a real JupyterLab: `StepExplorer(..., presenter=True)` makes every text of
the explorer (the sliders, the buttons, the data, the bars and the loss line with their ticks and
titles, the diagram, the worked calculation) at least 20 px at 1440 px wide and at 1920, light
and dark, with no two texts overlapping (counted from the DOM) and the compact layout kept: the
sliders' column, the bars and the loss line side by side; under them the diagram the whole width
(params, grads and updated all in view, none scrolled away) and the worked calculation under it.
Screenshots go to artifacts/presenter/.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from .harness import DARK, LIGHT, set_theme

pytestmark = pytest.mark.browser

SHOTS = Path(__file__).resolve().parents[2] / "artifacts" / "presenter"

CELLS = [
    "from pytree_lab import StepExplorer\nex = StepExplorer(presenter=True)\nex",
    "'end'",
]

# Every text of the explorer that is drawn (not hidden, not in a folded disclosure): its box
# (clipped by its boxes that scroll or clip it), its font size; pairs of texts whose boxes overlap
# by more than 2 px each way.
TEXTS = """
(root) => {
  const clip = (el) => {
    let r = {l: -1e9, t: -1e9, r: 1e9, b: 1e9};
    for (let n = el.parentElement; n && n !== root.parentElement; n = n.parentElement) {  // inside the explorer
      const cs = getComputedStyle(n);
      if (cs.overflowX === 'visible' && cs.overflowY === 'visible') continue;
      const q = n.getBoundingClientRect();
      r = {l: Math.max(r.l, q.left), t: Math.max(r.t, q.top), r: Math.min(r.r, q.right), b: Math.min(r.b, q.bottom)};
    }
    return r;
  };
  const items = [];
  for (const el of root.querySelectorAll('*')) {
    const texts = [...el.childNodes].filter(n => n.nodeType === 3 && n.textContent.trim());
    if (!texts.length || el.closest('.bqplot-tooltip, [hidden], option, style, script')) continue;
    const cs = getComputedStyle(el);
    // (a folded disclosure's content keeps its boxes: checkVisibility says it is not drawn)
    if (!el.checkVisibility({visibilityProperty: true})) continue;
    const c = clip(el);
    for (const t of texts) {
      const range = document.createRange();
      range.selectNodeContents(t);
      const rects = el instanceof SVGElement ? [el.getBoundingClientRect()] : [...range.getClientRects()];
      for (const q of rects) {
        // the text's em box (its font size high, centred on its line), clipped
        const size = parseFloat(cs.fontSize), mid = (q.top + q.bottom) / 2;
        const box = {l: Math.max(q.left, c.l), t: Math.max(mid - size / 2, c.t),
                     r: Math.min(q.right, c.r), b: Math.min(mid + size / 2, c.b)};
        if (box.r - box.l < 1 || box.b - box.t < 1) continue;
        items.push({el, text: t.textContent.trim().slice(0, 40), size, ...box});
      }
    }
  }
  const small = items.filter(i => i.size < 20)
    .map(i => `${i.text} (${i.size}px, ${i.el.getAttribute('class') || i.el.tagName})`);
  const overlaps = [];
  for (let i = 0; i < items.length; i++) {
    for (let j = i + 1; j < items.length; j++) {
      const a = items[i], b = items[j];
      if (a.el === b.el) continue;
      const w = Math.min(a.r, b.r) - Math.max(a.l, b.l), h = Math.min(a.b, b.b) - Math.max(a.t, b.t);
      if (w > 2 && h > 2) overlaps.push(`${a.text} / ${b.text}`);
    }
  }
  return {count: items.length, small: [...new Set(small)], overlaps};
}
"""

LAYOUT = """
(root) => {
  const box = (sel) => {
    const r = root.querySelector(sel).getBoundingClientRect();
    return [r.left, r.top, r.right, r.bottom];
  };
  return {left: box('.ptl-ex-left'), bars: box('.ptl-bars-box'), loss: box('.bqplot.figure:not(.ptl-bars-box *)'),
          diagram: box('.ptl-ex-main > :first-child'), calc: box('.ptl-ex-calc'),
          columns: [...root.querySelectorAll('.ptl-head > .ptl-colname')].map((c) => c.getBoundingClientRect().right)};
}
"""


@pytest.fixture(scope="module")
def presenter_nb(open_module_nb, lab_page):
    page = lab_page
    before = page.viewport_size
    left_open = not page.evaluate("() => window.jupyterapp.shell.leftCollapsed")
    page.evaluate("() => { window.jupyterapp.shell.collapseLeft(); window.jupyterapp.shell.collapseRight(); }")
    nb = open_module_nb(CELLS, wait_for=".ptl-calc")
    nb.panel.locator(".bqplot rect.bar").first.wait_for(state="attached")
    nb.panel.locator("[role='figure'][aria-label='Loss at each step']").wait_for()
    yield nb
    page.set_viewport_size(before)
    if left_open:
        page.evaluate("() => window.jupyterapp.shell.expandLeft()")


@pytest.mark.parametrize("theme", [LIGHT, DARK])
@pytest.mark.parametrize("size", [(1440, 900), (1920, 1080)], ids=["1440x900", "1920x1080"])
def test_presenter_mode_text_is_20px_and_more_with_no_overlap_and_the_layout_kept(presenter_nb, size, theme):
    nb = presenter_nb
    page = nb.page
    page.set_viewport_size({"width": size[0], "height": size[1]})
    if page.evaluate("() => document.body.dataset.jpThemeName") != theme:
        set_theme(page, theme)
    page.wait_for_timeout(600)  # the figures lay out again at the new width
    explorer = nb.panel.locator(".pytree-lab-explorer")
    SHOTS.mkdir(parents=True, exist_ok=True)
    slug = f"{size[0]}x{size[1]}-{'light' if theme == LIGHT else 'dark'}"
    for part in ("top", "main"):  # the explorer is taller than the window: its two halves
        explorer.locator(f".ptl-ex-{part}").evaluate("(el) => el.scrollIntoView({block: 'start'})")
        page.wait_for_timeout(200)
        page.screenshot(path=str(SHOTS / f"explorer-{slug}-{part}.png"))

    texts = explorer.evaluate(TEXTS)
    assert texts["count"] > 60  # the sliders, buttons, ticks, diagram and calculation were measured
    assert texts["small"] == []
    assert texts["overlaps"] == [], texts["overlaps"]
    boxes = explorer.evaluate(LAYOUT)
    left, bars, loss, diagram, calc = (boxes[k] for k in ("left", "bars", "loss", "diagram", "calc"))
    # one row: the sliders' column, then the bars, then the loss line; the diagram under them the
    # whole width, its three columns in view; the calculation under the diagram
    assert left[2] <= bars[0] and bars[2] <= loss[0] and abs(left[1] - bars[1]) < 5 and abs(bars[1] - loss[1]) < 5
    assert diagram[0] <= left[0] + 1 and diagram[2] >= loss[2] - 1 and diagram[3] <= calc[1] + 1, boxes
    assert len(boxes["columns"]) == 3 and max(boxes["columns"]) <= diagram[2] + 1, boxes


def test_presenter_mode_goes_off_again(presenter_nb):
    nb = presenter_nb
    nb.run("ex.presenter = False")
    label = nb.panel.locator(".ptl-slider-label").first
    nb.page.wait_for_function("(l) => getComputedStyle(l).fontSize === '13px'", arg=label.element_handle())
    nb.run("ex.presenter = True")
    nb.page.wait_for_function("(l) => getComputedStyle(l).fontSize === '24px'", arg=label.element_handle())
