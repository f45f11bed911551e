"""Real steps in a real JupyterLab: click Step ×10, Reset and Step on an Adam explorer, read
the loss curve and the bars from the SVG, and assert the Python state against optax called
directly in this test process."""

from __future__ import annotations

from pathlib import Path

import pytest

from .harness import DARK, LIGHT, Timeouts, set_theme
from .pages import read_bars, read_line, tree_cell

pytestmark = pytest.mark.browser

SHOTS = Path(__file__).resolve().parents[2] / "artifacts" / "screenshots"

CELLS = [
    "import optax\nfrom pytree_lab import StepExplorer\nex = StepExplorer(optimizer=optax.adam(0.1))\nex",
]


def optax_reference(n: int) -> tuple[list[float], dict]:
    """n Adam steps of the lesson, optax called directly: losses at each point, final params."""
    import jax
    import jax.numpy as jnp
    import optax

    def loss(p):
        return (jnp.dot(p["weight"], jnp.array([2.0, 1.0])) + p["bias"] - 3.0) ** 2

    opt = optax.adam(0.1)
    params = {"weight": jnp.array([1.0, -1.0]), "bias": jnp.array(0.0)}
    state = opt.init(params)
    losses = []
    for _ in range(n + 1):
        value, grads = jax.value_and_grad(loss)(params)
        losses.append(float(value))
        if len(losses) > n:
            break
        updates, state = opt.update(grads, state, params)
        params = optax.apply_updates(params, updates)
    return losses, {"weight": params["weight"].tolist(), "bias": float(params["bias"])}


@pytest.fixture(scope="module")
def nb(open_module_nb):
    nb = open_module_nb(CELLS, wait_for='[role="tree"]')
    nb.panel.locator(".bqplot rect.bar").first.wait_for(state="attached")
    nb.panel.locator(".bqplot path.line").first.wait_for(state="attached")
    return nb


def figures(nb):
    figs = nb.panel.locator(".bqplot.figure")
    return figs.nth(0), figs.nth(1)  # the bars, then the loss line


def button(nb, text: str):
    return nb.panel.get_by_role("button", name=text, exact=True)


def wait_points(nb, count: int) -> None:
    """Until the loss line in the page has `count` points (the kernel's redraw arrived)."""
    nb.page.wait_for_function(
        "([fig, n]) => { const p = fig.querySelector('path.line');"
        " return p && ((p.getAttribute('d') || '').match(/[ML]/g) || []).length === n; }",
        arg=[figures(nb)[1].element_handle(), count],
        timeout=Timeouts.ms(Timeouts.ROUND_TRIP),
    )


@pytest.mark.jax_promotion(dtype="the oracle runs optax's adam (a float to the power of its int32 step count)")
def test_step_x10_then_reset_then_step(nb):
    # ---- Step ×10: ten real Adam steps in one compiled loop
    button(nb, "Step ×10").click()
    history = nb.kernel.wait_for("ex.history", lambda h: len(h) == 11)
    assert len(history) == 11
    wait_points(nb, 11)
    losses, params = optax_reference(10)
    assert history == pytest.approx(losses, rel=1e-4)
    state = nb.value("{'count': int(ex.opt_state[0].count), 'params': ex.params, 'result_from': ex.result.params}")
    assert state["count"] == 10
    assert state["params"]["weight"] == pytest.approx(params["weight"], rel=1e-4)
    assert state["params"]["bias"] == pytest.approx(params["bias"], rel=1e-4, abs=1e-6)
    assert state["result_from"] == state["params"]  # .result is the step from .params

    # the page: the loss curve has the eleven losses, the bars stand at the new params
    bars_fig, line_fig = figures(nb)
    line = read_line(line_fig)
    tol = 2.0 / line["pixels_per_unit"]
    assert [round(x) for x, _ in line["points"]] == list(range(11))
    assert [y for _, y in line["points"]] == pytest.approx(history, abs=tol)
    drawn = read_bars(bars_fig)
    bar_tol = 1.5 / drawn["pixels_per_unit"]
    updated = nb.value("ex.result.updated")
    assert drawn["bars"]["weight[0]"] == pytest.approx([params["weight"][0], updated["weight"][0]], abs=bar_tol)
    assert drawn["bars"]["bias"] == pytest.approx([params["bias"], updated["bias"]], abs=bar_tol)
    # the moments sit in the params rows: mu['weight'] beside params['weight']
    mu = nb.value("ex.result.opt_state_after[0].mu['weight']")
    text = tree_cell(nb.panel, "['weight']", "adam mu").text_content()
    assert f"{mu[0]:.4g}" in text

    # ---- Reset: the lesson's start and a fresh state
    button(nb, "Reset").click()
    nb.kernel.wait_for("ex.history", lambda h: h == [4.0])
    wait_points(nb, 1)
    state = nb.value("{'count': int(ex.opt_state[0].count), 'params': ex.params, 'history': ex.history}")
    assert state == {"count": 0, "params": {"bias": 0.0, "weight": [1.0, -1.0]}, "history": [4.0]}
    drawn = read_bars(figures(nb)[0])
    bar_tol = 1.5 / drawn["pixels_per_unit"]
    # Adam's first step moves each parameter by the learning rate, 0.1, against its gradient
    assert drawn["bars"]["weight[0]"] == pytest.approx([1.0, 1.1], abs=bar_tol)
    assert drawn["bars"]["weight[1]"] == pytest.approx([-1.0, -0.9], abs=bar_tol)
    assert drawn["bars"]["bias"] == pytest.approx([0.0, 0.1], abs=bar_tol)

    # ---- Step: one more point
    button(nb, "Step").click()
    history = nb.kernel.wait_for("ex.history", lambda h: len(h) == 2)
    wait_points(nb, 2)
    assert history == pytest.approx(optax_reference(1)[0], rel=1e-5)


def test_screenshots_light_and_dark(nb):
    """For a person to look at: the Adam explorer after steps, in both themes."""
    nb.run("ex.reset(); ex.step(6); ex.selected_path = \"['weight']\"")
    nb.kernel.wait_for("len(ex.history)", lambda n: n == 7)
    wait_points(nb, 7)
    SHOTS.mkdir(parents=True, exist_ok=True)
    explorer = nb.panel.locator(".pytree-lab-explorer").first
    size = nb.page.viewport_size
    nb.page.set_viewport_size({"width": size["width"], "height": 2600})  # the whole explorer on screen
    try:
        for theme, name in ((LIGHT, "light"), (DARK, "dark")):
            set_theme(nb.page, theme)
            explorer.scroll_into_view_if_needed()
            path = SHOTS / f"explorer-adam-steps-{name}.png"
            explorer.screenshot(path=str(path))
            assert path.stat().st_size > 10_000
    finally:
        nb.page.set_viewport_size(size)
        set_theme(nb.page, LIGHT)
