"""Training that plays, in a real JupyterLab (issue 22 §4): Play an Adam XOR MLP from the page,
Pause it by keyboard, and check that `ex.history` grew by exactly the steps the page drew (its
step number), that the kernel was never more than one step ahead of the page while it played,
and that the losses are optax's, called directly in this test process. A huge learning rate
makes the steps diverge: playing stops with the message on screen. Screenshots, light and dark,
at 1024 and 1440 px."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from .harness import DARK, LIGHT, Timeouts, set_theme

pytestmark = pytest.mark.browser

SHOTS = Path(__file__).resolve().parents[2] / "artifacts" / "screenshots"

MODEL = (
    "import numpy as np\n"
    "import jax, jax.numpy as jnp, optax\n"
    "X = np.array([[0, 0], [0, 1], [1, 0], [1, 1]], np.float32)\n"
    "Y = np.array([0, 1, 1, 0], np.float32)\n"
    "def mlp_params():\n"
    "    rng = np.random.default_rng(0)\n"
    "    return {'Dense_0': {'kernel': rng.normal(size=(2, 8)).astype(np.float32), 'bias': np.zeros(8, np.float32)},\n"
    "            'Dense_1': {'kernel': rng.normal(size=(8, 1)).astype(np.float32), 'bias': np.zeros(1, np.float32)}}\n"
    "def mlp_loss(p, x, y):\n"
    "    h = jnp.tanh(x @ p['Dense_0']['kernel'] + p['Dense_0']['bias'])\n"
    "    out = h @ p['Dense_1']['kernel'] + p['Dense_1']['bias']\n"
    "    return jnp.mean((out[:, 0] - y) ** 2)\n"
)

CELLS = [
    MODEL,
    "from pytree_lab import StepExplorer\n"
    "def loss(p, x, y):\n"
    "    value = mlp_loss(p, x, y)\n"
    "    jax.debug.print('loss at this point: {v}', v=value)\n"
    "    return value\n"
    "ex = StepExplorer(loss, mlp_params(), {'x': X, 'y': Y}, optimizer=lambda lr: optax.adam(lr), learning_rate=0.05)\n"
    "ex",
    # the lesson's model with plain steps of rate 10: each step multiplies the loss by 119², so
    # float32 overflows within ten steps
    "ex2 = StepExplorer(learning_rate=10.0)\nex2",
]


def optax_losses(n: int) -> list[float]:
    """Adam on the XOR MLP, optax called directly here: the loss at each of the first n + 1 points."""
    import jax
    import optax

    namespace: dict = {}
    exec(MODEL, namespace)
    opt, params = optax.adam(0.05), namespace["mlp_params"]()
    state = opt.init(params)
    losses = []
    for _ in range(n + 1):
        value, grads = jax.value_and_grad(namespace["mlp_loss"])(params, namespace["X"], namespace["Y"])
        losses.append(float(value))
        updates, state = opt.update(grads, state, params)
        params = optax.apply_updates(params, updates)
    return losses


@pytest.fixture(scope="module")
def nb(open_module_nb):
    nb = open_module_nb(CELLS, wait_for=".ptl-play-button")
    nb.panel.locator(".bqplot path.line").first.wait_for(state="attached")
    return nb


def page_step(nb) -> int:
    return int(nb.panel.locator(".ptl-play-step").first.get_attribute("data-step"))


def wait_page_step(nb, predicate: str, arg) -> None:
    nb.page.wait_for_function(
        "([el, n]) => { const s = Number(el.dataset.step); return " + predicate + "; }",
        arg=[nb.panel.locator(".ptl-play-step").first.element_handle(), arg],
        timeout=Timeouts.ms(Timeouts.ROUND_TRIP * 4),
    )


def screenshots(nb, name: str, explorer, parts: tuple[str, ...]) -> None:
    """The page at 1024 and 1440 px, light and dark, with each of `parts` (selectors inside
    `explorer`) scrolled into view in turn."""
    SHOTS.mkdir(parents=True, exist_ok=True)
    size = nb.page.viewport_size
    try:
        for width in (1024, 1440):
            nb.page.set_viewport_size({"width": width, "height": 900})
            for theme, label in ((LIGHT, "light"), (DARK, "dark")):
                set_theme(nb.page, theme)
                nb.page.locator("#jupyterlab-splash").wait_for(state="detached")  # the theme's splash is gone
                for part in parts:
                    explorer.locator(part).first.scroll_into_view_if_needed()
                    slug = part.strip(".").split(" ")[0].replace("pytree-lab-", "")
                    path = SHOTS / f"play-{name}-{slug}-{width}-{label}.png"
                    nb.page.screenshot(path=str(path))
                    assert path.stat().st_size > 10_000
    finally:
        nb.page.set_viewport_size(size)
        set_theme(nb.page, LIGHT)


@pytest.mark.jax_promotion(
    "the oracle runs the notebook's MLP (a bias added to a batch) and optax's adam as the kernel does"
)
def test_play_then_pause_by_keyboard_grows_history_by_the_steps_drawn(nb):
    assert nb.value("(ex.playing, len(ex.history), ex.shown)") == [False, 1, 1]
    play = nb.panel.locator(".ptl-play-button").first
    assert play.get_attribute("aria-label").startswith("Play training")
    nb.panel.locator(".ptl-play-select").first.select_option("10")
    nb.kernel.wait_for("ex.play_control.steps_per_second", lambda v: v == 10)
    play.click()
    nb.kernel.wait_for("ex.playing", bool)
    # while it plays: the kernel's count, read before the page's, is never more than one ahead
    leads = []
    for _ in range(12):
        computed = nb.value("len(ex.history) - 1")
        drawn = page_step(nb)
        leads.append(computed - drawn)
    assert max(leads) <= 1, leads
    wait_page_step(nb, "s >= n", 12)
    assert play.get_attribute("aria-label") == "Pause training"
    play.focus()
    nb.page.keyboard.press("Enter")  # Pause, by keyboard
    nb.kernel.wait_for("ex.playing", lambda v: v is False)
    steps = nb.value("len(ex.history) - 1")
    wait_page_step(nb, "s === n", steps)  # the page shows the step the kernel stopped at
    stats = nb.value(
        "{'played': ex.player.steps, 'lead': ex.player.max_lead, 'late': ex.player.late,"
        " 'frame': ex.play_control.frame, 'acked': ex.player.acked}"
    )
    assert stats["played"] == steps and steps >= 12
    assert stats["lead"] == 1 and stats["late"] == 0  # each step computed after the page drew the last
    nb.kernel.wait_for("ex.player.acked", lambda a: a == stats["frame"])  # and the page drew the last one
    # the record: optax's numbers, step numbers, the learning rate of each step
    record = nb.value("ex.history_dict()")
    assert record["step"] == list(range(steps + 1))
    assert record["loss"] == pytest.approx(optax_losses(steps), rel=1e-4)
    assert record["learning_rate"] == pytest.approx([0.05] * (steps + 1))
    assert nb.value("ex.history") == record["loss"]
    # nothing moves after Pause
    nb.page.wait_for_timeout(500)
    assert nb.value("len(ex.history) - 1") == steps
    # the played steps' jax.debug.print, as text under the explorer
    out = nb.panel.locator(".pytree-lab-debug pre.ptl-debug-out").first
    out.wait_for(state="visible")
    assert "loss at this point:" in out.text_content()
    # from Python in a cell: it returns at once, the kernel answers while it plays
    nb.run(f"ex.play(steps_per_second=20, until={steps + 5})")
    assert nb.value("ex.playing") is True and nb.value("1 + 1") == 2
    assert nb.kernel.wait_for("ex.playing", lambda v: v is False, timeout=Timeouts.ROUND_TRIP * 4) is False
    wait_page_step(nb, "s === n", steps + 5)
    assert nb.value("(len(ex.history), ex.player.steps, ex.player.max_lead, ex.player.late)") == [steps + 6, 5, 1, 0]
    assert nb.value("ex.history") == pytest.approx(optax_losses(steps + 5), rel=1e-4)
    assert "Played to step" in nb.panel.locator(".ptl-play-message").first.text_content()
    print(
        "play stats",
        nb.value("{'compute_s': ex.player.compute_s, 'wait_s': ex.player.wait_s, 'steps': ex.player.steps}"),
    )
    screenshots(
        nb, "paused", nb.panel.locator(".pytree-lab-explorer").first, (".pytree-lab-controls", ".pytree-lab-debug-area")
    )
    assert not nb.page.pytree_lab_errors


def test_a_diverging_play_stops_with_its_message_on_screen(nb):
    explorer = nb.panel.locator(".pytree-lab-explorer").nth(1)
    explorer.locator(".ptl-play-button").first.click()
    assert nb.kernel.wait_for("ex2.playing or len(ex2.history) > 1", bool)
    assert nb.kernel.wait_for("ex2.playing", lambda v: v is False, timeout=Timeouts.ROUND_TRIP * 4) is False
    history = nb.value("ex2.history")
    assert all(math.isfinite(v) for v in history) and len(history) > 3
    # the lesson by hand: the residual is multiplied by 1 - 2·η·(|x|² + 1) = -119 at every step
    assert history == pytest.approx([4.0 * 119.0 ** (2 * k) for k in range(len(history))], rel=1e-3)
    assert 4.0 * 119.0 ** (2 * len(history)) > 3.4e38  # the next point's loss overflows float32
    message = nb.value("ex2.play_control.message")
    assert message.startswith(f"Stopped playing at step {len(history) - 1}") and "diverge" in message
    status = explorer.locator(".pytree-lab-status [role=alert]").first
    status.wait_for(state="visible")
    assert "diverge" in status.text_content() and "inf" in status.text_content()
    assert "diverge" in explorer.locator(".ptl-play-message").first.text_content()
    assert int(explorer.locator(".ptl-play-step").first.get_attribute("data-step")) == len(history) - 1
    screenshots(nb, "diverged", explorer, (".pytree-lab-status",))
    assert not nb.page.pytree_lab_errors


def test_a_failed_step_from_the_page_shows_its_traceback_on_demand(nb):
    nb.run(
        "ex2.reset()\n"
        "def broken(p, x, target):\n"
        "    print('about to fail <b>not bold</b>')\n"
        "    raise ValueError('the loss broke here')\n"
        "ex2.set_loss(broken)"
    )
    nb.kernel.wait_for("ex2.result is None or ex2.session.good_now", lambda v: v is False)
    explorer = nb.panel.locator(".pytree-lab-explorer").nth(1)
    explorer.get_by_role("button", name="Step", exact=True).click()
    details = explorer.locator(".ptl-debug-traceback")
    details.wait_for(state="attached", timeout=Timeouts.ms(Timeouts.ROUND_TRIP))
    assert details.get_attribute("open") is None  # closed until asked for
    assert not details.locator("pre").is_visible()
    details.locator("summary").focus()
    nb.page.keyboard.press("Enter")
    details.locator("pre").wait_for(state="visible")
    shown = details.locator("pre").text_content()
    assert "ValueError: the loss broke here" in shown and "Traceback (most recent call last)" in shown
    assert "in broken" in shown and "pytree_lab/" not in shown  # the person's frame, not the library's
    assert shown == nb.value("ex2.last_traceback")
    out = explorer.locator(".ptl-debug-out").text_content()
    assert "about to fail <b>not bold</b>" in out  # text, not markup
    assert explorer.locator(".pytree-lab-debug b").count() == 0
    screenshots(nb, "traceback", explorer, (".pytree-lab-debug-area",))
    assert not nb.page.pytree_lab_errors
