"""Optimizers compared side by side in a real JupyterLab (issue 34 §3): sgd, momentum and adam on
one 2-8-1 MLP, stepped by a click on Step and played from the page's Play button; each
optimizer's losses (read in the kernel, and as shown in the page's table) are those of its own
optax loop, written by hand and run here in the test process, bit for bit, and its update of a
leaf, as the page's diagram shows it, is that loop's. Adam's learning-rate slider, moved by
keyboard in the page, runs adam again with that rate, bit for bit that rate's optax loop; the
legend is the table beside the chart (no bqplot legend over the lines). Screenshots, light
and dark, at 1440 px (docs/img/optimizer-comparison.png is the light one)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from pytree_lab.formatting import fmt_number

from .harness import DARK, LIGHT, Timeouts, set_theme
from .test_browser_play import MODEL

pytestmark = pytest.mark.browser

SHOTS = Path(__file__).resolve().parents[2] / "artifacts" / "screenshots"
OPTIMIZERS = (
    "{'sgd': lambda lr: optax.sgd(lr), 'momentum': lambda lr: optax.sgd(lr, momentum=0.9), "
    "'adam': lambda lr: optax.adam(lr)}"
)
RATES = {"sgd": 0.1, "momentum": 0.1, "adam": 0.05}
CELLS = [
    MODEL,
    "from pytree_lab import OptimizerComparison\n"
    f"cmp = OptimizerComparison(mlp_loss, mlp_params(), {{'x': X, 'y': Y}}, {OPTIMIZERS}, learning_rate={RATES})\n"
    "cmp",
]


def optax_loop(name: str, n: int, rate: float | None = None) -> tuple[list[float], float]:
    """`name`'s loss at each of the first n + 1 points and the update of Dense_1's bias from the
    last: optax's loop written by hand, its step jitted."""
    import jax
    import optax

    ns: dict = {"optax": optax}
    exec(MODEL, ns)
    opt = eval(OPTIMIZERS, ns)[name](RATES[name] if rate is None else rate)

    @jax.jit
    def step(params, state):
        value, grads = jax.value_and_grad(ns["mlp_loss"])(params, ns["X"], ns["Y"])
        updates, state = opt.update(grads, state, params)
        return value, updates, optax.apply_updates(params, updates), state

    params = ns["mlp_params"]()
    state, losses = opt.init(params), []
    for _ in range(n + 1):
        value, updates, params, state = step(params, state)
        losses.append(float(value))
    return losses, float(updates["Dense_1"]["bias"][0])


@pytest.fixture(scope="module")
def nb(open_module_nb):
    nb = open_module_nb(CELLS, wait_for=".ptl-compare")
    nb.panel.locator(".pytree-lab-comparison .bqplot path.line").first.wait_for(state="attached")
    return nb


def shown_table(nb) -> dict[str, tuple[int, str]]:
    rows = nb.panel.locator(".ptl-compare tbody tr")
    return {
        rows.nth(i).locator("td").nth(0).text_content().strip(): (
            int(rows.nth(i).locator(".ptl-compare-step").text_content()),
            rows.nth(i).locator(".ptl-compare-loss").text_content(),
        )
        for i in range(rows.count())
    }


def wait_table_step(nb, n: int) -> None:
    nb.page.wait_for_function(
        "n => [...document.querySelectorAll('.ptl-compare .ptl-compare-step')]"
        ".every(td => Number(td.textContent) >= n)",
        arg=n,
        timeout=Timeouts.ms(Timeouts.ROUND_TRIP * 4),
    )


@pytest.mark.jax_promotion("the oracle runs the notebook's MLP (x @ kernel + bias) and optax's adam as the kernel does")
def test_step_and_play_from_the_page_are_each_optimizers_own_optax_loop(nb):
    names = ["sgd", "momentum", "adam"]
    box = nb.panel.locator(".pytree-lab-comparison").first
    assert box.locator(".bqplot .legendtext").count() == 0  # no legend over the lines: the table is it
    swatches = box.locator(".ptl-compare tbody td:first-child span").evaluate_all(
        "ss => ss.map(s => getComputedStyle(s).backgroundColor)"
    )
    assert swatches == ["rgb(31, 119, 180)", "rgb(255, 127, 14)", "rgb(44, 160, 44)"]  # LINE_COLORS
    box.locator(".pytree-lab-step-button", has_text="Step").first.click()
    wait_table_step(nb, 1)
    box.locator(".ptl-play-select").first.select_option("10")
    nb.kernel.wait_for("cmp.play_control.steps_per_second", lambda v: v == 10)
    box.locator(".ptl-play-button").first.click()
    nb.kernel.wait_for("cmp.playing", bool)
    wait_table_step(nb, 6)
    box.locator(".ptl-play-button").first.click()  # Pause
    nb.kernel.wait_for("cmp.playing", lambda v: v is False)
    steps = nb.value("cmp.control_step()")
    wait_table_step(nb, steps)
    histories = nb.value("{name: list(h) for name, h in cmp.histories.items()}")
    table = shown_table(nb)
    assert list(table) == names and steps >= 6
    for name in names:
        losses, update = optax_loop(name, steps)
        assert np.array_equal(np.asarray(histories[name]), np.asarray(losses)), name  # bit for bit
        assert table[name] == (steps, fmt_number(losses[-1]))  # what the page shows
        row = box.locator(""".ptl-item[data-path="['Dense_1']['bias']"]""")
        cell = row.locator(f'.ptl-cell[data-column="{name} update"] .ptl-val')
        assert cell.text_content() == f"[{fmt_number(update)}]", name
    # the diagram: one update column per optimizer, rows aligned by path
    assert box.locator(".ptl-head .ptl-colname").all_text_contents() == [f"{n} update" for n in names]
    # adam's rate slider, two keys to the right: adam's run again, that rate's optax loop
    rates = box.locator(".ptl-slider")
    assert rates.locator("label").all_text_contents() == [f"{n} rate" for n in names]
    rates.nth(2).locator("input[type=range]").focus()
    nb.page.keyboard.press("ArrowRight")
    nb.page.keyboard.press("ArrowRight")
    rate = nb.kernel.wait_for("cmp.sessions['adam'].learning_rate", lambda v: v > 0.0551)
    losses, _ = optax_loop("adam", steps, rate)
    assert rate == pytest.approx(0.06)
    nb.kernel.wait_for("list(cmp.histories['adam'])", lambda v: v == losses)  # bit for bit
    assert nb.value("list(cmp.histories['sgd'])") == histories["sgd"]
    # the log-scale box: the chart's loss axis on a log scale
    box.locator(".widget-checkbox input").first.check()
    nb.kernel.wait_for("cmp.loss_chart.y_axis.scale is cmp.loss_chart.y_log", bool)
    SHOTS.mkdir(parents=True, exist_ok=True)
    size = nb.page.viewport_size
    try:
        nb.page.set_viewport_size({"width": 1440, "height": 1100})  # the whole comparison in view
        for theme, label in ((LIGHT, "light"), (DARK, "dark")):
            set_theme(nb.page, theme)
            nb.page.locator("#jupyterlab-splash").wait_for(state="detached")
            box.scroll_into_view_if_needed()
            nb.page.mouse.move(0, 0)  # no hover: bqplot's toolbar stays hidden
            path = SHOTS / f"compare-{label}.png"
            box.screenshot(path=str(path))
            assert path.stat().st_size > 10_000
    finally:
        nb.page.set_viewport_size(size)
        set_theme(nb.page, LIGHT)
    assert not nb.page.pytree_lab_errors
