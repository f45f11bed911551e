"""Training that plays (issue 22 §4), in the kernel: `ex.play()` / `ex.pause()` and the Play
button's messages, the page's acknowledgement (never more than one step ahead of the screen),
what stops it, the run's record (`history` with steps and learning rates, `history_dict`,
`to_dataframe`) and the output area of steps run from the page.

Oracles: a hand-written optax loop (Adam on an XOR MLP of 8 hidden units) and jax called
directly; the lesson's model for what stops."""

from __future__ import annotations

import asyncio
import math
import sys

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from pytree_lab import StepExplorer, lesson

X = np.array([[0, 0], [0, 1], [1, 0], [1, 1]], np.float32)
Y = np.array([0, 1, 1, 0], np.float32)
LR = 0.05


def mlp_params():
    rng = np.random.default_rng(0)
    return {
        "Dense_0": {"kernel": rng.normal(size=(2, 8)).astype(np.float32), "bias": np.zeros(8, np.float32)},
        "Dense_1": {"kernel": rng.normal(size=(8, 1)).astype(np.float32), "bias": np.zeros(1, np.float32)},
    }


def mlp_loss(p, x, y):
    h = jnp.tanh(x @ p["Dense_0"]["kernel"] + p["Dense_0"]["bias"])
    out = h @ p["Dense_1"]["kernel"] + p["Dense_1"]["bias"]
    return jnp.mean((out[:, 0] - y) ** 2)


# The instructor's MLP broadcasts as written and the explorers here run optax's adam: the tests
# that step them do so under JAX's defaults for that.
mlp_broadcasts = pytest.mark.jax_promotion(rank="mlp_loss adds each layer's bias to the batch: x @ kernel + bias")
optax_adam = pytest.mark.jax_promotion(dtype="optax's adam raises a float to its int32 step count (bias correction)")


def xor_explorer(**kw):
    return StepExplorer(
        mlp_loss, mlp_params(), {"x": X, "y": Y}, optimizer=lambda lr: optax.adam(lr), learning_rate=LR, **kw
    )


def optax_losses(n, x=X, y=Y):
    """The loss at each of the first n + 1 points of Adam on the XOR MLP, optax called directly."""
    opt = optax.adam(LR)
    params = mlp_params()
    state = opt.init(params)
    losses = []
    for _ in range(n + 1):
        value, grads = jax.value_and_grad(mlp_loss)(params, x, y)
        losses.append(float(value))
        updates, state = opt.update(grads, state, params)
        params = optax.apply_updates(params, updates)
    return losses


async def until_stopped(ex, timeout=60.0):
    loop = asyncio.get_running_loop()
    end = loop.time() + timeout
    while ex.playing:
        assert loop.time() < end, "still playing"
        await asyncio.sleep(0.005)


def drawn(ex, frame):
    ex.play_control._on_page_message(ex.play_control, {"type": "drawn", "frame": frame}, [])


# ------------------------------------------------------------------ play from Python
@mlp_broadcasts
@optax_adam
def test_played_steps_are_the_optax_loop_and_the_record_says_step_and_rate():
    ex = xor_explorer()

    async def main():
        ex.play(steps_per_second=60, until=12)
        assert ex.playing and ex.play_control.playing
        await until_stopped(ex)

    asyncio.run(main())
    assert not ex.playing and ex.player.steps == 12
    np.testing.assert_allclose(ex.history, optax_losses(12), rtol=2e-5)
    assert ex.history.steps == list(range(13))
    assert ex.history.learning_rates == [pytest.approx(LR)] * 13
    assert ex.play_control.step == 12 and "Played to step 12" in ex.play_control.message
    # every view follows: the loss line is the history, the result the step from step 12
    np.testing.assert_allclose(np.asarray(ex.history_view.line.y), ex.history)
    assert ex.result.loss == ex.history[-1]
    # the record as plain lists and as a DataFrame
    d = ex.history_dict()
    assert d["step"] == list(range(13)) and d["loss"] == list(ex.history)
    assert d["learning_rate"] == ex.history.learning_rates
    df = ex.to_dataframe()
    assert list(df.index) == list(range(13)) and list(df["loss"]) == list(ex.history)


def test_the_record_follows_the_learning_rate_slider_and_keeps_the_old_api():
    ex = StepExplorer()  # the lesson: no optimizer
    eta = lesson.LEARNING_RATE
    assert ex.history == [4.0] and ex.history.learning_rates == [pytest.approx(eta)]
    ex.step(2)
    ex.sliders["learning_rate"].value = 0.02  # the current point's step changes its rate
    ex.step(3)
    rates = ex.history.learning_rates
    assert rates[:2] == [pytest.approx(eta)] * 2 and rates[2:] == [pytest.approx(0.02)] * 4
    assert ex.history.steps == [0, 1, 2, 3, 4, 5] and isinstance(ex.history, list)
    assert repr(ex.history) == repr(list(ex.history))
    ex.reset()
    d = ex.history_dict()  # the record and every element's trajectory: the lesson's start again
    assert d == {"step": [0], "loss": [4.0], "learning_rate": [pytest.approx(eta)]} | {
        "params['bias']": [0.0],
        "params['weight'][0]": [1.0],
        "params['weight'][1]": [-1.0],
    }


@optax_adam
def test_a_rate_fixed_inside_the_optimizer_is_recorded_as_nan():
    ex = StepExplorer(optimizer=optax.adam(0.1))
    ex.step(2)
    assert len(ex.history.learning_rates) == 3 and all(math.isnan(r) for r in ex.history.learning_rates)


def test_to_dataframe_without_pandas_points_to_history_dict(monkeypatch):
    ex = StepExplorer()
    monkeypatch.setitem(sys.modules, "pandas", None)
    with pytest.raises(ImportError, match=r"history_dict\(\)"):
        ex.to_dataframe()


@mlp_broadcasts
@optax_adam
def test_play_does_not_block_the_loop():
    """While it plays, the event loop runs other work (a cell, a message) between steps."""
    ex = xor_explorer()
    ticks = []

    async def other_work():
        while ex.playing:
            ticks.append(ex.player.steps)
            await asyncio.sleep(0.01)

    async def main():
        ex.play(steps_per_second=20, until=8)
        await asyncio.gather(other_work(), until_stopped(ex))

    asyncio.run(main())
    assert len(ex.history) == 9
    assert len(set(ticks)) >= 4  # the other work ran between (many) different steps


def test_play_needs_an_event_loop_and_checks_its_arguments():
    ex = StepExplorer()
    with pytest.raises(RuntimeError, match="event loop"):
        ex.play()
    for bad in (0, -1, math.inf, math.nan, 61, True, "fast"):
        with pytest.raises(ValueError, match="steps_per_second"):
            ex.play(steps_per_second=bad)
    for bad in (-1, 2.5, True):
        with pytest.raises(ValueError, match="until"):
            ex.play(until=bad)
    assert not ex.playing and ex.history == [4.0]

    async def main():
        ex.play(until=0)
        assert not ex.playing

    asyncio.run(main())
    assert "Already at step 0" in ex.play_control.message


# ------------------------------------------------------------------ the page's pace
@mlp_broadcasts
@optax_adam
def test_a_shown_explorer_waits_for_the_page_to_draw_each_step():
    ex = xor_explorer()
    ex._view_count = 1  # shown in a page (the front end keeps this count)
    ex.player.ACK_TIMEOUT = 30.0

    async def main():
        ex.play(steps_per_second=60, until=4)
        await asyncio.sleep(0.5)  # 30 steps' time: the page has drawn none of them
        assert ex.player.steps == 1 and ex.play_control.frame == 1 and len(ex.history) == 2
        drawn(ex, 5)  # a frame never sent: ignored
        await asyncio.sleep(0.1)
        assert ex.player.steps == 1
        for frame in (1, 2, 3):
            drawn(ex, frame)
            await asyncio.sleep(0.3)
            assert ex.player.steps == frame + 1 and len(ex.history) == frame + 2
        drawn(ex, 4)
        await until_stopped(ex)

    asyncio.run(main())
    assert ex.player.steps == 4 and ex.player.max_lead == 1 and ex.player.late == 0
    np.testing.assert_allclose(ex.history, optax_losses(4), rtol=2e-5)


@mlp_broadcasts
@optax_adam
def test_a_page_that_never_answers_gets_a_step_per_timeout():
    ex = xor_explorer()
    ex._view_count = 1
    ex.player.ACK_TIMEOUT = 0.2

    async def main():
        ex.play(steps_per_second=60, until=3)
        await until_stopped(ex, timeout=20)

    asyncio.run(main())
    assert ex.player.steps == 3 and ex.player.late == 2


# ------------------------------------------------------------------ what stops it
@mlp_broadcasts
@optax_adam
def test_pause_a_slider_and_reset_stop_it():
    ex = xor_explorer()

    async def play_then(action, message):
        ex.play(steps_per_second=30)
        await asyncio.sleep(0.3)
        assert ex.playing
        action()
        assert not ex.playing
        steps = ex.player.steps
        await asyncio.sleep(0.2)
        assert ex.player.steps == steps  # no step after it stopped
        assert message in ex.play_control.message

    async def main():
        await play_then(ex.pause, "Paused.")
        label = next(iter(ex.sliders))
        slider = ex.sliders[label]
        seq = slider.ack + 1  # a move from the page, as static/slider.js sends it
        await play_then(
            lambda: slider._on_page_message(slider, {"type": "move", "value": 0.25, "seq": seq}, []), "a slider moved"
        )
        await play_then(ex.reset_button.click, "reset")

    asyncio.run(main())
    assert ex.history == pytest.approx([ex.result.loss])  # reset last


def test_a_diverging_play_stops_before_the_non_finite_step_with_a_message():
    ex = StepExplorer(learning_rate=10.0)  # the lesson's model: every step multiplies the loss

    async def main():
        ex.play(steps_per_second=60)
        await until_stopped(ex)

    asyncio.run(main())
    assert all(math.isfinite(v) for v in ex.history) and len(ex.history) > 5
    assert not math.isfinite(ex.result.loss_after)  # the step from here is the one that overflows
    assert ex.play_control.message.startswith(f"Stopped playing at step {len(ex.history) - 1}")
    assert "diverge" in ex.play_control.message
    assert 'role="alert"' in ex.status.value and "diverge" in ex.status.value
    assert "next step&#x27;s loss would be inf" in ex.status.value and "smaller learning rate" in ex.status.value
    assert all(np.all(np.isfinite(np.asarray(x))) for x in jax.tree.leaves(ex.params))


def test_a_failing_step_stops_it():
    calls = {"n": 0}

    def loss(p, x, target):
        calls["n"] += 1
        if calls["n"] > 3:
            raise RuntimeError("the data loader broke")
        return (jnp.dot(p["weight"], x) + p["bias"] - target) ** 2

    params = {"weight": np.array([1.0, -1.0], np.float32), "bias": np.array(0.0, np.float32)}
    ex = StepExplorer(loss, params, {"x": np.array([2.0, 1.0], np.float32), "target": np.float32(3.0)})
    ex.set_loss(loss)  # compiled again (each compile traces: calls counts traces)

    async def main():
        ex.play(steps_per_second=60)
        await until_stopped(ex)

    asyncio.run(main())
    assert not ex.playing and "the step failed" in ex.play_control.message
    assert "the data loader broke" in ex.status.value
    assert "RuntimeError: the data loader broke" in ex.last_traceback  # a step from the page


@mlp_broadcasts
@optax_adam
def test_closing_the_explorer_stops_it():
    ex = xor_explorer()

    async def main():
        ex.play(steps_per_second=30)
        await asyncio.sleep(0.2)
        ex.close()
        await until_stopped(ex, timeout=5)
        steps = ex.player.steps
        await asyncio.sleep(0.2)
        assert ex.player.steps == steps

    asyncio.run(main())
    assert len(ex.history) == ex.player.steps + 1


# ------------------------------------------------------------------ the page's messages
@mlp_broadcasts
@optax_adam
def test_the_page_asks_by_message_and_cannot_write_the_state():
    ex = xor_explorer()
    control = ex.play_control
    control.set_state({"playing": True, "frame": 99, "step": 7})  # a page writing the kernel's state
    assert not control.playing and control.frame == 0 and control.step == 0
    assert control.refused_page_writes == {"playing": 1, "frame": 1, "step": 1}
    for bad in (
        {"type": "rate", "value": 1000},
        {"type": "rate", "value": True},
        {"type": "drawn", "frame": -1},
        {"type": "drawn", "frame": "1"},
        {"type": "jump"},
        ["play"],
        None,
    ):
        control._on_page_message(control, bad, [])
    assert control.ignored == 7 and control.steps_per_second == 10

    async def main():
        control._on_page_message(control, {"type": "rate", "value": 30}, [])
        assert control.steps_per_second == 30
        control._on_page_message(control, {"type": "play"}, [])
        assert ex.playing
        await asyncio.sleep(0.4)
        control._on_page_message(control, {"type": "pause"}, [])
        assert not ex.playing

    asyncio.run(main())
    assert len(ex.history) == ex.player.steps + 1 > 2
    assert control.step == len(ex.history) - 1


# ------------------------------------------------------------------ the output of steps from the page
@mlp_broadcasts
@optax_adam
def test_prints_of_steps_from_the_page_go_to_the_bounded_output_area(capsys):
    def loss(p, x, y):
        value = mlp_loss(p, x, y)
        jax.debug.print("debug loss {v}", v=value)
        return value

    ex = StepExplorer(loss, mlp_params(), {"x": X, "y": Y}, optimizer=lambda lr: optax.adam(lr), learning_rate=LR)
    capsys.readouterr()
    ex.step()  # from a cell: its output stays the cell's
    assert "debug loss" in capsys.readouterr().out and ex.output == ""
    ex.step_button.click()  # from the page
    assert "debug loss" not in capsys.readouterr().out
    assert "debug loss" in ex.output and "debug loss" in ex.debug.html.value
    assert ex.debug.widget.layout.display != "none" and ex.debug.widget in ex.children
    for _ in range(12):
        ex.step10_button.click()
    assert len(ex.debug.lines) == ex.debug.LINES and ex.debug.dropped > 0
    assert "earlier lines not kept" in ex.debug.html.value
    ex.debug.clear_button.click()
    assert ex.output == "" and ex.debug.widget.layout.display == "none"


def test_output_is_text_never_html_and_a_failed_step_shows_its_traceback_on_demand():
    state = {"fail": False}

    def loss(p, x, target):
        print("<b>bold?</b> & <script>alert(1)</script>")
        if state["fail"]:
            raise ValueError("<img src=x onerror=alert(1)>")
        return (jnp.dot(p["weight"], x) + p["bias"] - target) ** 2

    params = {"weight": np.array([1.0, -1.0], np.float32), "bias": np.array(0.0, np.float32)}
    ex = StepExplorer(loss, params, {"x": np.array([2.0, 1.0], np.float32), "target": np.float32(3.0)})
    state["fail"] = True
    ex.set_loss(loss)  # traced again from Python: fails, no traceback shown for a cell's call
    assert ex.last_traceback == ""
    slider = ex.sliders["bias"]
    slider._on_page_message(slider, {"type": "move", "value": 0.5, "seq": slider.ack + 1}, [])
    assert "ValueError" in ex.last_traceback and "<img src=x" in ex.last_traceback
    page = ex.debug.html.value
    assert "<details" in page and "Traceback of the failed step" in page and "<details open" not in page
    assert "<img" not in page and "&lt;img src=x" in page
    assert "<b>" not in page and "&lt;b&gt;bold?&lt;/b&gt;" in page and "<script>" not in page
    state["fail"] = False
    ex.set_loss(loss)
    slider._on_page_message(slider, {"type": "move", "value": 0.25, "seq": slider.ack + 1}, [])
    assert ex.last_traceback == "" and "Traceback" not in ex.debug.html.value  # gone after a good step
