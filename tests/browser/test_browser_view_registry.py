"""A view added as docs/development.md says (the docs' code block, run as a notebook cell) is drawn
by every surface the explorer's views reach, in a real JupyterLab and Chromium: the explorer in
presenter mode (its text 20 px and more), OptimizerComparison (once for each optimizer) and the
replay page of `export_html`, opened from disk with every request refused, at each step of its
slider. The numbers are the lesson's, derived by hand (tests/test_view_registry.py). Screenshots,
light and dark, go to artifacts/screenshots/."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from .harness import DARK, LIGHT, set_theme
from .test_browser_export import open_offline

pytestmark = pytest.mark.browser

SHOTS = Path(__file__).resolve().parents[2] / "artifacts" / "screenshots"
DOCS = Path(__file__).resolve().parents[2] / "docs" / "development.md"
SECTION = DOCS.read_text(encoding="utf-8").split("### Adding a view", 1)[1].split("\n## ", 1)[0]
(VIEW,) = re.findall(r"```python\n(.*?)```", SECTION, re.S)
CELLS = [
    VIEW,
    "import optax\nfrom pytree_lab import OptimizerComparison, StepExplorer, lesson\n"
    "ex = StepExplorer(presenter=True)\nex",
    "cmp = OptimizerComparison(lesson.lesson_loss, lesson.lesson_params(), lesson.lesson_inputs(),\n"
    "                          {'sgd': optax.sgd(0.05), 'momentum': optax.sgd(0.05, momentum=0.9)})\ncmp",
]
# by hand (tests/test_view_registry.py): the start, and one and two steps of 0.05
TEXTS = [
    "Gradient norm by leaf: ['bias'] 4, ['weight'] 8.944",
    "Gradient norm by leaf: ['bias'] 1.6, ['weight'] 3.578",
    "Gradient norm by leaf: ['bias'] 0.64, ['weight'] 1.431",
]
SIZE = "(el) => [el.textContent, parseFloat(getComputedStyle(el).fontSize)]"


def test_the_docs_view_is_drawn_in_presenter_mode_the_comparison_and_the_replay_page(open_nb, browser):
    nb = open_nb(CELLS, wait_for=".pytree-lab-comparison .ptl-trees")
    page = nb.page
    explorer = nb.panel.locator(".pytree-lab-explorer.ptl-presenter")
    label = explorer.locator(".widget-html", has_text="Gradient norm by leaf")
    assert label.evaluate(SIZE) == [TEXTS[0], pytest.approx(label.evaluate(SIZE)[1])]
    assert label.evaluate(SIZE)[1] >= 20  # presenter mode: read from the back of the room
    nb.run("ex.step(1)")
    label.filter(has_text=TEXTS[1]).wait_for()
    comparison = nb.panel.locator(".pytree-lab-comparison")
    for name in ("sgd", "momentum"):  # each optimizer's view, under its name, at the common start
        box = comparison.locator(".widget-vbox", has=page.locator(".widget-label", has_text=name)).last
        assert box.locator(".widget-html").text_content() == TEXTS[0]
    nb.run("cmp.step(1)")
    # sgd(0.05) moves as the explorer; momentum's first step is sgd's (its trace starts at 0)
    comparison.locator(".widget-html", has_text=TEXTS[1]).nth(1).wait_for()
    SHOTS.mkdir(parents=True, exist_ok=True)
    for theme, slug in ((LIGHT, "light"), (DARK, "dark")):
        set_theme(page, theme)
        label.scroll_into_view_if_needed()
        page.screenshot(path=str(SHOTS / f"view-registry-presenter-{slug}.png"))
    set_theme(page, LIGHT)

    nb.run("ex.step(1)\npath = str(ex.export_html('registry.html').resolve())")
    path = Path(nb.value("path"))
    for scheme in ("light", "dark"):
        context, replay, requests, errors = open_offline(browser, path, scheme)
        try:
            shown = replay.locator("pre.ptl-replay-text[data-view='GradNormView']")
            slider = replay.locator(".ptl-replay-step")
            assert shown.text_content() == TEXTS[2]  # the page opens at the last step
            slider.focus()
            for t in (1, 0):
                replay.keyboard.press("ArrowLeft")
                assert replay.locator("#ptl-replay").get_attribute("data-step") == str(t)
                assert shown.text_content() == TEXTS[t]
            shown.scroll_into_view_if_needed()
            replay.screenshot(path=str(SHOTS / f"view-registry-replay-{scheme}.png"), full_page=True)
            assert errors == [] and all(url.startswith("file://") for url in requests), (errors, requests)
        finally:
            context.close()
