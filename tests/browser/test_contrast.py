"""Every text of every pytree-lab widget is readable in JupyterLab's light and dark themes
(issue 18, section 3): axe-core's WCAG 2 A/AA rules over a page that shows every widget in
every state (error, warning and info banners, revealed answers, graded quizzes, selected rows
and bars, pressed buttons), and a contrast check of our own computed in the page for every
text element, so states axe leaves "incomplete" (colours mixed with color-mix, translucent
layers) are measured too.

axe-core comes from npm into tests/browser/a11y/node_modules (`make a11y-deps`, which
`make test` runs) and is injected into the page: it runs offline. Without it the test fails.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from .harness import DARK, LIGHT, set_theme

pytestmark = pytest.mark.browser

AXE = Path(__file__).resolve().parent / "a11y" / "node_modules" / "axe-core" / "axe.min.js"
SHOTS = Path(__file__).resolve().parents[2] / "artifacts" / "contrast"

# Every widget, each in the states a student meets
CELLS = [
    # 0: a revealed prediction with its rating
    """\
import jax, jax.numpy as jnp
import pytree_lab
from pytree_lab import PytreeDiagram, StepExplorer, PackedView
from pytree_lab.course import check_button, grad_structure_quiz, lesson_prediction
from pytree_lab.exercises import EvidenceButton
from pytree_lab.slider import Slider
prompt = lesson_prediction("which_weight_changes_more")
prompt.prediction = "weight[0]"
prompt.reveal()
prompt.self_rating = "partly"
prompt""",
    # 1: a quiz answered wrong (notes on every choice), 2: one answered right, 3: one not answered
    "wrong = grad_structure_quiz()\nwrong.selected = 0 if wrong._answer else 1\nwrong.submit()\nwrong",
    "right = grad_structure_quiz()\nright.selected = right._answer\nright.submit()\nright",
    "fresh = grad_structure_quiz()\nfresh",
    # 4: a failed check with its feedback and the reference solution shown; 5: a passed check
    """\
def mean_version(flat_params, x):
    return jax.grad(lambda p: jnp.mean((x @ p[:-1] + p[-1]) ** 2))(flat_params)
def sum_version(flat_params, x):
    return jax.grad(lambda p: jnp.sum((x @ p[:-1] + p[-1]) ** 2))(flat_params)
import dataclasses
from pytree_lab.course import exercise
from pytree_lab.exercises import CheckButton
practice = dataclasses.replace(exercise("grad_over_flat_params"), graded=False)  # the course's reveal nothing
failed = CheckButton(practice, lambda: mean_version)
failed.check()
failed.reveal_solution()
failed""",
    'passed = check_button("grad_over_flat_params", lambda: sum_version)\npassed.check()\npassed',
    # 6
    "EvidenceButton()",
    # 7: a diagram with a missing leaf (error banner) and a selected row; 8: a warning; 9: info
    """\
params = {"layer": {"weight": jnp.array([1.0, -1.0]), "bias": jnp.array(0.0)}, "scale": jnp.array(1.0)}
grads = {"layer": {"weight": jnp.array([-8.0, -4.0])}, "scale": jnp.array(-4.0)}
d_error = PytreeDiagram({"params": params, "grads": grads})
d_error.selected_path = "['params']['layer']['weight']"
d_error.show_message("The gradient tree is missing ['layer']['bias'].")
d_error""",
    """\
d_warn = PytreeDiagram({"params": params,
                       "grads": {"layer": {"weight": jnp.array([-8.0, -4.0]), "bias": 1}, "scale": "x"}})
d_warn.show_message("A leaf is not differentiable.", kind="warning")
d_warn""",
    'd_info = PytreeDiagram(params)\nd_info.show_message("Selected every leaf under layer.", kind="info")\nd_info',
    # 10: an explorer with a selected leaf; 11: one whose loss raises (alert); 12: one with a note
    """\
ex = StepExplorer()
ex.selected_path = "['weight']"
ex""",
    """\
bad = StepExplorer()
def broken(p, x, target):
    raise ValueError("this loss is broken on purpose")
bad.set_loss(broken)
bad""",
    'noted = StepExplorer()\nnoted.selected_path = "[\'nope\']"\nnoted',
    # 13: the packed view with a leaf selected; 14: a slider
    """\
packed = PackedView(params,
                    layouts={"(w, b, s)": (params["layer"]["weight"], params["layer"]["bias"], params["scale"])})
packed.select_leaf("['layer']['weight']")
packed""",
    "Slider(0.25, description='learning_rate', min=0.0, max=1.0, step=0.01)",
    # 15: an optimizer comparison after three steps: its legend (the table beside the chart, one
    # swatch per line), its rate sliders, the line saying a rate is fixed, the log-scale box
    """\
import optax
from pytree_lab import OptimizerComparison
def cmp_loss(p, x, y):
    return jnp.mean((x @ p["w"] + p["b"] - y) ** 2)
cmp = OptimizerComparison(
    cmp_loss, {"w": jnp.array([0.5, -0.5]), "b": jnp.array(0.0)},
    {"x": jnp.array([[1.0, 2.0], [0.0, 1.0]]), "y": jnp.array([1.0, 0.0])},
    {"sgd": lambda lr: optax.sgd(lr), "momentum": optax.sgd(0.1, momentum=0.9), "adam": lambda lr: optax.adam(lr)},
    learning_rate={"sgd": 0.1, "adam": 0.05},
)
cmp.step(3)
cmp""",
]

ROOTS = ".ptl-ex, .ptl-diagram, .pytree-lab-explorer, .ptl-packed, .ptl-slider, .pytree-lab-comparison"

# Contrast of every text element under the widget roots, computed in the page: the text colour
# (SVG text: its fill) over the backgrounds of its ancestors, composited, each colour resolved by
# the canvas (so color-mix and translucent colours count). Disabled controls are exempt (WCAG 1.4.3).
CONTRAST = """
(selector) => {
  const canvas = document.createElement('canvas');
  canvas.width = canvas.height = 1;
  const ctx = canvas.getContext('2d', {willReadFrequently: true});
  const rgba = (css) => {
    ctx.clearRect(0, 0, 1, 1);
    ctx.fillStyle = 'rgba(0, 0, 0, 0)';
    ctx.fillStyle = css;
    ctx.fillRect(0, 0, 1, 1);
    const d = ctx.getImageData(0, 0, 1, 1).data;
    return [d[0], d[1], d[2], d[3] / 255];
  };
  const over = (top, under) => {
    const a = top[3] + under[3] * (1 - top[3]);
    if (a === 0) return [0, 0, 0, 0];
    return [0, 1, 2].map(i => (top[i] * top[3] + under[i] * under[3] * (1 - top[3])) / a).concat([a]);
  };
  const background = (el) => {
    const layers = [];
    for (let n = el; n; n = n.parentElement) {
      const c = rgba(getComputedStyle(n).backgroundColor);
      if (c[3] > 0) layers.push(c);
      if (c[3] >= 1) break;
    }
    let bg = [255, 255, 255, 1];
    for (const layer of layers.reverse()) bg = over(layer, bg);
    return bg;
  };
  const lum = (c) => {
    const [r, g, b] = c.slice(0, 3).map(v => {
      v /= 255;
      return v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4;
    });
    return 0.2126 * r + 0.7152 * g + 0.0722 * b;
  };
  const ratio = (a, b) => { const [x, y] = [lum(a), lum(b)].sort((p, q) => q - p); return (x + 0.05) / (y + 0.05); };
  const out = [];
  let checked = 0;
  for (const root of document.querySelectorAll(selector)) {
    for (const el of root.querySelectorAll('*')) {
      const own = [...el.childNodes]
        .filter(n => n.nodeType === 3 && n.textContent.trim())
        .map(n => n.textContent.trim())
        .join(' ');
      if (!own) continue;
      const style = getComputedStyle(el);
      if (!el.getClientRects().length || style.visibility === 'hidden') continue;
      if (el.closest('[hidden], [aria-hidden="true"] .bqplot-tooltip')) continue;
      if (el.closest(':disabled, [aria-disabled="true"]')) continue;
      let opacity = 1;
      for (let n = el; n; n = n.parentElement) opacity *= parseFloat(getComputedStyle(n).opacity);
      const bg = background(el instanceof SVGElement ? el.closest('div') : el);
      let fg = rgba(el instanceof SVGElement ? style.fill : style.color);
      fg = over([fg[0], fg[1], fg[2], fg[3] * opacity], bg);
      const size = parseFloat(style.fontSize), bold = parseInt(style.fontWeight, 10) >= 700;
      const large = size >= 24 || (size >= 18.66 && bold);
      const r = ratio(fg, bg);
      checked++;
      if (r < (large ? 3 : 4.5)) {
        const cls = el.className && el.className.baseVal !== undefined ? el.className.baseVal : el.className;
        out.push({text: own.slice(0, 60), cls: String(cls),
                  fg: fg.map(Math.round), bg: bg.map(Math.round), ratio: Math.round(r * 100) / 100});
      }
    }
  }
  return {checked, failures: out};
}
"""


@pytest.fixture(scope="module")
def every_widget(open_module_nb):
    if not AXE.is_file():
        pytest.fail(f"{AXE} is missing: run `make a11y-deps` (npm ci in tests/browser/a11y)", pytrace=False)
    nb = open_module_nb(CELLS, wait_for=".ptl-slider")
    page = nb.page
    panel = nb.panel
    panel.locator(".pytree-lab-explorer .ptl-bars").first.wait_for()
    panel.locator(".pytree-lab-alert").wait_for()
    panel.locator(".pytree-lab-note").wait_for()
    panel.locator('.ptl-message[data-kind="error"]').first.wait_for()
    panel.locator('[role="treeitem"][aria-selected="true"]').first.wait_for()
    # the bar table opened, its selected element pressed
    panel.locator(".pytree-lab-explorer").first.locator(".ptl-bars summary").click()
    panel.locator(".ptl-bars-pick[aria-pressed='true']").first.wait_for()
    panel.locator(".pytree-lab-comparison .ptl-compare-step", has_text="3").first.wait_for()
    page.add_script_tag(content=AXE.read_text(encoding="utf-8"))
    return nb


@pytest.mark.parametrize("theme", [LIGHT, DARK])
def test_every_text_of_every_widget_reaches_wcag_aa(every_widget, theme):
    nb = every_widget
    page = nb.page
    set_theme(page, theme)
    slug = "light" if theme == LIGHT else "dark"
    SHOTS.mkdir(parents=True, exist_ok=True)
    outputs = nb.panel.locator(".jp-CodeCell .jp-OutputArea-output")
    for i in range(outputs.count()):
        outputs.nth(i).screenshot(path=str(SHOTS / f"{slug}-{i:02d}.png"))

    # axe-core: WCAG 2 A and AA rules, over the widgets only (the rest of the page is JupyterLab's)
    result = page.evaluate(
        """async (selector) => {
             const include = [...document.querySelectorAll(selector)];
             const tags = ['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa'];
             const r = await axe.run({include}, {runOnly: {type: 'tag', values: tags}, resultTypes: ['violations']});
             return r.violations.map(v => ({id: v.id, help: v.help,
               nodes: v.nodes.map(n => n.target.join(' ') + ': ' + n.failureSummary).slice(0, 8)}));
           }""",
        ROOTS,
    )
    assert result == [], f"axe-core in {theme}:\n" + json.dumps(result, indent=1, ensure_ascii=False)

    # our own measure of every text element, the states axe leaves incomplete included
    measured = page.evaluate(CONTRAST, ROOTS)
    assert measured["checked"] > 200  # every widget's text was measured, not an empty page
    assert measured["failures"] == [], f"contrast in {theme}:\n" + json.dumps(
        measured["failures"], indent=1, ensure_ascii=False
    )


def test_the_charts_have_names_and_no_serious_axe_finding(every_widget):
    """The bars chart and the loss line of each explorer, with bqplot's toolbar shown (the pointer
    over the chart): every rule of axe-core, not only WCAG's, finds nothing serious or critical;
    each chart has a name, and no element named an image holds a control (axe's
    nested-interactive: an image's content is not for the keyboard)."""
    nb = every_widget
    page = nb.page
    explorer = nb.panel.locator(".pytree-lab-explorer").first
    figures = explorer.locator(".bqplot.figure")
    explorer.locator("[role='figure'][aria-label='Loss at each step']").wait_for()
    assert figures.count() == 2
    names = figures.evaluate_all("fs => fs.map(f => [f.getAttribute('role'), f.getAttribute('aria-label')])")
    assert names == [
        ["figure", "A gradient tree matches parameter leaves: before and after value of each parameter element"],
        ["figure", "Loss at each step"],
    ]
    for i in range(2):
        figures.nth(i).hover()
        figures.nth(i).locator(".toolbar_div button").first.wait_for(state="visible")  # the toolbar, drawn
        found = page.evaluate(
            """async (figure) => {
                 const r = await axe.run({include: [figure]}, {resultTypes: ['violations']});
                 return r.violations.filter(v => v.impact === 'serious' || v.impact === 'critical')
                   .map(v => v.id + ': ' + v.nodes.map(n => n.target.join(' ')).slice(0, 4).join(', '));
               }""",
            figures.nth(i).element_handle(),
        )
        assert found == []
        nested = figures.nth(i).evaluate(
            "(f) => [...f.querySelectorAll('[role=img]')].concat(f.matches('[role=img]') ? [f] : [])"
            ".filter(img => img.querySelector('button, input, select, a[href], [tabindex]')).length"
        )
        assert nested == 0
