"""The explorer in a real JupyterLab: a cell run again replaces its explorer, and the old one is
closed in the kernel (the page's view count went to 0); after a long run the loss line in the
page is thinned (a bounded number of points) and ends exactly at the kernel's loss. Screenshots
of the long loss line in both themes."""

from __future__ import annotations

from pathlib import Path

import pytest

from .harness import _FIND_PANEL, DARK, LIGHT, Timeouts, set_theme
from .pages import read_line

pytestmark = pytest.mark.browser

SHOTS = Path(__file__).resolve().parents[2] / "artifacts" / "screenshots"

CELLS = [
    "import gc, weakref\n"
    "from IPython.display import display\n"
    "from pytree_lab import StepExplorer\n"
    "refs = globals().setdefault('refs', [])\n"
    "ex = StepExplorer(learning_rate=0.0005, time_budget=None)\n"
    "refs.append(weakref.ref(ex))\n"
    "display(ex)",
]


def _run_all_again(nb) -> None:
    """Run every cell again from the page (JupyterLab clears each cell's output first)."""
    nb.page.evaluate(
        "async (path) => {"
        + _FIND_PANEL
        + """
          const w = find(path);
          window.jupyterapp.shell.activateById(w.id);
          await window.jupyterapp.commands.execute('notebook:run-all-cells');
        }""",
        nb.path,
    )


def test_a_cell_run_again_closes_the_explorer_it_replaces(open_nb):
    nb = open_nb(CELLS, wait_for='[role="tree"]')
    nb.kernel.wait_for("ex.shown", lambda n: n == 1)  # the page counts its view
    _run_all_again(nb)
    nb.kernel.wait_for("len(refs)", lambda n: n == 2, Timeouts.ROUND_TRIP * 4)
    nb.kernel.wait_for("refs[1]().shown", lambda n: n == 1)
    state = nb.value(
        "{'old_closed': refs[0]() is None or refs[0]().comm is None, 'new_open': refs[1]().comm is not None}"
    )
    assert state == {"old_closed": True, "new_open": True}
    # nothing of pytree-lab keeps the replaced explorer: it is collected
    assert nb.value("(gc.collect(), refs[0]() is None)[1]") is True
    # the new one works: a move from Python, the bars follow
    nb.run("ex.sliders['bias'].value = 1.0")
    assert nb.value("float(ex.result.grads['bias'])") == pytest.approx(2 * (1 + 1 - 3))


def test_after_a_long_run_the_loss_line_is_thinned_and_ends_at_the_kernels_loss(open_nb):
    nb = open_nb(CELLS, wait_for='[role="tree"]')
    nb.panel.locator(".bqplot path.line").first.wait_for(state="attached")
    nb.run("ex.step(200_000)")
    n = nb.kernel.wait_for("len(ex.history)", lambda k: k > 1, Timeouts.ROUND_TRIP * 20)
    assert n == 200_001
    line_fig = nb.panel.locator(".bqplot.figure").nth(1)
    nb.page.wait_for_function(
        "(fig) => { const p = fig.querySelector('path.line');"
        " return p && ((p.getAttribute('d') || '').match(/[ML]/g) || []).length > 100; }",
        arg=line_fig.element_handle(),
        timeout=Timeouts.ms(Timeouts.ROUND_TRIP * 4),
    )
    line = read_line(line_fig)
    points = line["points"]
    assert 100 < len(points) <= 2_002  # thinned: not 200,001 points
    last = nb.value("ex.history[-1]")
    tol = 2.0 / line["pixels_per_unit"]
    assert points[-1][0] == pytest.approx(200_000, rel=1e-2)  # about 700 steps a pixel
    assert points[-1][1] == pytest.approx(last, abs=tol)
    assert points[0][1] == pytest.approx(4.0, abs=tol)  # the lesson's start
    # a slider move: the line's last point follows the kernel's loss
    nb.run("ex.sliders['bias'].value = ex.sliders['bias'].value + 0.5")
    moved = nb.kernel.wait_for("ex.history[-1]", lambda v: v != last)
    nb.page.wait_for_function(
        "([fig, n]) => { const p = fig.querySelector('path.line');"
        " return p && ((p.getAttribute('d') || '').match(/[ML]/g) || []).length === n; }",
        arg=[line_fig.element_handle(), len(points)],
        timeout=Timeouts.ms(Timeouts.ROUND_TRIP),
    )
    nb.page.wait_for_timeout(300)  # the redraw of the moved point (the count of points is the same)
    line = read_line(line_fig)
    assert line["points"][-1][1] == pytest.approx(moved, abs=2.0 / line["pixels_per_unit"])
    assert nb.value("len(ex.history)") == 200_001

    SHOTS.mkdir(parents=True, exist_ok=True)
    explorer = nb.panel.locator(".pytree-lab-explorer").first
    size = nb.page.viewport_size
    nb.page.set_viewport_size({"width": size["width"], "height": 2600})
    try:
        for theme, name in ((LIGHT, "light"), (DARK, "dark")):
            set_theme(nb.page, theme)
            explorer.scroll_into_view_if_needed()
            path = SHOTS / f"explorer-long-loss-line-{name}.png"
            line_fig.screenshot(path=str(path))
            assert path.stat().st_size > 5_000
    finally:
        nb.page.set_viewport_size(size)
        set_theme(nb.page, LIGHT)


def test_after_a_kernel_restart_its_old_widgets_say_so_when_used(open_nb):
    """Issue 19: after a restart the widgets of the old kernel answer no click; clicking one, or
    pressing a key in its slider, tells the student why and what to run (not silently nothing)."""
    from .pages import slider, slider_aria_value, slider_handle, tree_item, wait_selected

    nb = open_nb(CELLS, wait_for='[role="tree"]')
    notice = nb.panel.locator(".pytree-lab-kernel-gone")
    # connected: a click selects in the kernel, and no notice shows
    tree_item(nb.panel, "['bias']").first.locator(":scope > .ptl-line").click()
    wait_selected(nb.panel, "['bias']")
    assert nb.kernel.wait_for("ex.diagram.selected_path", lambda p: p == "['bias']") == "['bias']"
    assert notice.count() == 0

    # what Kernel > Restart Kernel does, without its confirmation dialog
    nb.page.evaluate(
        "async (path) => {"
        + _FIND_PANEL
        + """
        await find(path).sessionContext.session.kernel.restart();
    }""",
        nb.path,
    )
    assert nb.value("'ex' in globals()") is False  # the restart call returns with the new kernel up
    nb.panel.locator(".jupyter-widgets-disconnected").first.wait_for(
        state="attached", timeout=Timeouts.ms(Timeouts.ROUND_TRIP)
    )
    assert notice.count() == 0  # said when used, not all over the notebook at once

    tree_item(nb.panel, "['weight']").first.locator(":scope > .ptl-line").click()
    diagram_notice = nb.panel.locator(".ptl-diagram").first.locator("xpath=..").locator(".pytree-lab-kernel-gone")
    diagram_notice.wait_for(timeout=Timeouts.ms(Timeouts.ROUND_TRIP))
    handle = slider_handle(nb.panel, "bias")
    handle.focus()
    nb.page.keyboard.press("ArrowRight")
    slider_notice = slider(nb.panel, "bias").locator("xpath=..").locator(".pytree-lab-kernel-gone")
    slider_notice.wait_for(timeout=Timeouts.ms(Timeouts.ROUND_TRIP))
    assert slider_aria_value(nb.panel, "bias") == 0.0  # the slider stays where the kernel left it
    texts = notice.all_inner_texts()
    assert len(texts) == 2, texts
    for text in texts:
        assert "kernel that was restarted or stopped" in text and "Run its cell again" in text, text
    assert notice.first.get_attribute("role") == "status"
    # the new kernel heard nothing of either: it still has no explorer, and it runs code
    assert nb.value("'ex' in globals()") is False
    assert nb.value("1 + 1") == 2
