"""`OptimizerComparison` (issue 34 §3): several optimizers on one model, stepped and played
together, each bit-equal to its own hand-written optax loop (`jax.value_and_grad`,
`opt.update`, `optax.apply_updates`, the step compiled with `jax.jit` as such a loop's is), on a
flax-style 2-8-1 MLP; the loss lines, the table and the diagram show those numbers."""

from __future__ import annotations

import asyncio

import jax
import numpy as np
import optax
import pytest
from test_play import X, Y, mlp_loss, mlp_params  # the flax-style 2-8-1 MLP the player is tested on

import pytree_lab
from pytree_lab import OptimizerComparison
from pytree_lab.chart import LINE_COLORS
from pytree_lab.formatting import fmt_number
from pytree_lab.training import OptimizerError


def optimizers():
    return {
        "sgd": optax.sgd(0.1),
        "momentum": optax.sgd(0.1, momentum=0.9),
        "adam": optax.adam(0.05),
        "adam halved": optax.adam(optax.piecewise_constant_schedule(0.1, {4: 0.5})),
    }


def hand_loop(opt, n):
    """optax's loop as written by hand: (losses at the n + 1 points, params at each, the update
    from the last point and the state the step from there starts from)."""

    @jax.jit
    def step(params, state):
        value, grads = jax.value_and_grad(mlp_loss)(params, X, Y)
        updates, state = opt.update(grads, state, params)
        return value, updates, optax.apply_updates(params, updates), state

    params = mlp_params()
    state = opt.init(params)
    losses, points = [], [params]
    for _ in range(n + 1):
        value, updates, new_params, new_state = step(params, state)
        losses.append(float(value))
        if len(losses) <= n:
            params, state = new_params, new_state
            points.append(params)
    return losses, points, updates, state


def leaves_equal(a, b) -> bool:
    fa, da = jax.tree.flatten(a)
    fb, db = jax.tree.flatten(b)
    return da == db and all(np.array_equal(np.asarray(x), np.asarray(y)) for x, y in zip(fa, fb))


def comparison(**kw):
    return OptimizerComparison(mlp_loss, mlp_params(), {"x": X, "y": Y}, optimizers(), **kw)


strict_off = pytest.mark.jax_promotion(
    rank="the MLP adds each layer's bias to the batch: x @ kernel + bias",
    dtype="optax's adam raises a float to its int32 step count (bias correction)",
)


@strict_off
def test_steps_and_a_play_are_each_optimizers_own_optax_loop_bit_for_bit():
    cmp = comparison()
    assert cmp.step(3) is not None and cmp.step(1) is not None
    cmp.step_button.click()  # a click is a step too

    async def main():
        cmp.play(steps_per_second=60, until=9)
        assert cmp.playing
        while cmp.playing:
            await asyncio.sleep(0.005)

    asyncio.run(main())
    assert cmp.player.steps == 4 and "Played to step 9" in cmp.play_control.message and cmp.play_control.step == 9
    histories, records = cmp.histories, cmp.history_dict()
    for name, opt in optimizers().items():
        losses, points, updates, state = hand_loop(opt, 9)
        assert np.array_equal(np.asarray(histories[name]), np.asarray(losses, np.float64)), name
        assert histories[name].steps == list(range(10))
        assert leaves_equal(cmp.params[name], points[-1])
        # the step shown from there (the diagram's update column) is one program with the loss
        # after it: XLA fuses it otherwise, so adam's update can differ in its last bits
        for shown, hand in zip(jax.tree.leaves(cmp.results[name].updates), jax.tree.leaves(updates)):
            np.testing.assert_array_max_ulp(np.asarray(shown), np.asarray(hand), maxulp=4)
        assert leaves_equal(cmp.opt_states[name], state)
        # the record: every parameter's trajectory, point by point
        kernel = np.array(records[name]["params['Dense_0']['kernel'][0, 3]"], np.float32)
        assert np.array_equal(kernel, [np.asarray(p["Dense_0"]["kernel"])[0, 3] for p in points]), name
    df = cmp.to_dataframe()
    assert list(df.index) == list(range(10))
    assert np.array_equal(df[("adam", "loss")].to_numpy(), np.asarray(histories["adam"]))


@strict_off
def test_the_views_show_each_optimizers_numbers():
    names = ["sgd", "adam"]
    cmp = OptimizerComparison(
        mlp_loss, mlp_params(), {"x": X, "y": Y}, {n: optimizers()[n] for n in names}, columns=["params", "update"]
    )
    cmp.step(2)
    assert cmp.diagram.columns == [f"{n} {c}" for n in names for c in ("params", "update")]
    # the loss lines: one per optimizer, its history, in its own colour; no legend over them (it
    # covered sgd's line): the table beside the chart is the legend, a swatch of each line's colour
    lines = cmp.loss_chart.lines
    assert [(line.labels, line.colors, line.display_legend) for line in lines] == [
        ([name], [color], False) for name, color in zip(names, LINE_COLORS)
    ]
    assert not cmp.loss_chart.figure.marks[0].display_legend
    for name, color in zip(names, LINE_COLORS):
        assert f"background:{color}\"></span> {name}</td>" in cmp.table.value
    for line, name in zip(lines, names):
        assert np.array_equal(line.y, np.asarray(cmp.histories[name])) and np.array_equal(line.x, [0, 1, 2])
        assert f"{name}</td><td class=\"ptl-compare-step\">2</td><td class=\"ptl-compare-loss\">" in cmp.table.value
        assert f">{fmt_number(cmp.histories[name][-1])}<" in cmp.table.value
    text = cmp.text()
    assert text.startswith("Optimizer comparison\nsgd: step 2, loss " + fmt_number(cmp.histories["sgd"][-1]))
    assert "adam update" in text and "sgd params" in text
    cmp.reset()
    assert {n: len(h) for n, h in cmp.histories.items()} == dict.fromkeys(names, 1)
    # each update cell is that optimizer's update, rows aligned by path: adam's first is -lr·sign(g)
    row = next(r for r in cmp.diagram.rows if r["p"] == "['Dense_1']['bias']")
    sgd_update = float(np.asarray(cmp.results["sgd"].updates["Dense_1"]["bias"])[0])
    assert [c["v"] for c in row["c"]] == ["[0]", f"[{fmt_number(sgd_update)}]", "[0]", "[-0.05]"]
    grads = np.asarray(cmp.results["sgd"].grads["Dense_1"]["bias"])
    assert np.array_equal(np.asarray(cmp.results["sgd"].updates["Dense_1"]["bias"]), -0.1 * grads)
    assert leaves_equal(cmp.params["adam"], mlp_params()) and cmp.play_control.step == 0


@strict_off
def test_a_diverging_optimizer_is_named_and_the_others_go_on():
    cmp = OptimizerComparison(
        mlp_loss, mlp_params(), {"x": X, "y": Y}, {"wild": optax.sgd(1e30), "adam": optax.adam(0.05)}
    )
    assert cmp.step(3) is not None
    assert len(cmp.histories["adam"]) == 4 and len(cmp.histories["wild"]) == 1
    assert "wild: Stopped after 0 of 3 steps" in cmp.status.value
    losses, *_ = hand_loop(optax.adam(0.05), 3)
    assert np.array_equal(np.asarray(cmp.histories["adam"]), np.asarray(losses, np.float64))

    async def main():  # Play stops before stepping into the NaN, naming the loss ahead
        cmp.play(steps_per_second=60)
        while cmp.playing:
            await asyncio.sleep(0.005)

    asyncio.run(main())
    assert "Stopped playing at step 3: the steps diverge." == cmp.play_control.message
    assert "wild: Stopped playing at step 3: the next step&#x27;s loss would be inf" in cmp.status.value
    assert len(cmp.histories["adam"]) == 4


def test_a_loss_that_raises_is_said_with_the_optimizer_and_nothing_escapes():
    def loss(p, x):
        raise ValueError("my model broke")

    w, x = {"w": np.ones(2, np.float32)}, {"x": np.ones(2, np.float32)}
    cmp = OptimizerComparison(loss, w, x, {"<i>sgd</i>": optax.sgd(0.1)})  # a name is text, never HTML
    assert cmp.results == {"<i>sgd</i>": None}
    assert "&lt;i&gt;sgd&lt;/i&gt;: " in cmp.status.value and 'role="alert"' in cmp.status.value
    assert "my model broke" in cmp.status.value and "<i>" not in cmp.status.value + cmp.table.value
    assert cmp.step(2) is None and cmp.histories == {"<i>sgd</i>": []}
    assert cmp.diagram.columns == ["params"]
    cmp.close()
    assert cmp.closed and cmp.step(1) is None


def test_wrong_arguments_are_said():
    p, i = {"w": np.ones(2, np.float32)}, {"x": np.ones(2, np.float32)}
    with pytest.raises(TypeError, match="a dict of names to optimizers"):
        OptimizerComparison(mlp_loss, p, i)
    with pytest.raises(ValueError, match=r"columns= takes some of \['params', 'grads', 'update', 'updated'\], not 'm"):
        OptimizerComparison(mlp_loss, p, i, {"sgd": optax.sgd(0.1)}, columns=["update", "moments"])
    with pytest.raises(ValueError, match="At most 6 optimizers"):
        OptimizerComparison(mlp_loss, p, i, {str(k): optax.sgd(0.1) for k in range(7)})
    with pytest.raises(OptimizerError, match=r"^'momentum': optimizer must be None, an optax GradientTransformation"):
        OptimizerComparison(mlp_loss, p, i, {"sgd": optax.sgd(0.1), "momentum": "sgd with momentum"})
    with pytest.raises(TypeError, match="did you mean 'columns'"):
        OptimizerComparison(mlp_loss, p, i, {"sgd": optax.sgd(0.1)}, column=["update"])
    assert "OptimizerComparison" in pytree_lab.__all__


@strict_off
def test_a_rate_slider_runs_its_optimizer_again_with_that_rate_as_optax_does(cpu_reference):
    """A learning-rate slider per optimizer whose rate slides (a function of the rate, or
    inject_hyperparams): a move runs that optimizer again from the start, as many steps as it
    had taken, bit for bit its own optax loop with the new rate; the others stay where they were.
    A rate fixed inside its optimizer gets no slider, and a line says so. The log-scale box puts
    every line on one log scale, as the explorer's box does."""
    opts = {
        "sgd": lambda lr: optax.sgd(lr),
        "adam": lambda lr: optax.adam(lr),
        "injected": optax.inject_hyperparams(optax.adam)(learning_rate=0.05),
        "momentum": optax.sgd(0.1, momentum=0.9),
    }
    cmp = OptimizerComparison(mlp_loss, mlp_params(), {"x": X, "y": Y}, opts, learning_rate={"sgd": 0.1, "adam": 0.05})
    assert list(cmp.rate_sliders) == ["sgd", "adam", "injected"]
    assert [cmp.rate_sliders[n].value for n in ("sgd", "adam")] == [0.1, 0.05]
    assert [s.description for s in cmp.rate_sliders.values()] == ["sgd rate", "adam rate", "injected rate"]
    side = cmp.children[2].children[1]
    assert side.children[-1].value.startswith("momentum: the learning rate is fixed inside the optimizer")
    cmp.step(4)
    before = {n: list(h) for n, h in cmp.histories.items()}
    cmp.rate_sliders["sgd"].value = 0.3  # as a move from the page sets it
    cmp.set_rate("injected", 0.2)  # from Python: the slider follows
    cmp.rate_sliders["adam"].value = 0.12
    assert cmp.rate_sliders["injected"].value == pytest.approx(0.2)
    expected = {
        "sgd": optax.sgd(0.3),
        "adam": optax.adam(0.12),
        "injected": optax.inject_hyperparams(optax.adam)(learning_rate=0.2),
    }
    for name, opt in expected.items():
        losses, points, _, state = hand_loop(opt, 4)
        assert np.array_equal(np.asarray(cmp.histories[name]), np.asarray(losses, np.float64)), name
        assert leaves_equal(cmp.opt_states[name], state), name
        for shown, hand in zip(jax.tree.leaves(cmp.params[name]), jax.tree.leaves(points[-1])):
            # the rate injected into the state as the step's argument: XLA may fuse its last bits otherwise
            np.testing.assert_array_max_ulp(np.asarray(shown), np.asarray(hand), maxulp=0 if name != "injected" else 2)
        assert cmp.histories[name] != before[name]
    assert list(cmp.histories["momentum"]) == before["momentum"]  # the others stay
    assert cmp.play_control.step == 4 and "</td><td class=\"ptl-compare-step\">4</td>" in cmp.table.value
    cmp.step(1)  # on from there with the new rate
    losses, *_ = hand_loop(optax.sgd(0.3), 5)
    assert np.array_equal(np.asarray(cmp.histories["sgd"]), np.asarray(losses, np.float64))
    cmp.reset()  # back to the start, the slid rate kept
    assert cmp.rate_sliders["sgd"].value == 0.3 and len(cmp.histories["sgd"]) == 1
    with pytest.raises(ValueError, match="keeps its learning rate inside it"):
        cmp.set_rate("momentum", 0.2)
    # the log-scale box: every line on the one log scale while every loss is positive
    cmp.step(3)
    cmp.log_scale_box.value = True
    chart = cmp.loss_chart
    assert chart.y_log is not None and chart.y_axis.scale is chart.y_log
    assert all(line.scales["y"] is chart.y_log for line in chart.lines)
    low = min(min(h) for h in cmp.histories.values())
    assert chart.y_log.min <= low and chart.y_log.min == 10 ** np.floor(np.log10(low))
    cmp.log_scale_box.value = False
    assert chart.y_axis.scale is chart.y_linear and all(line.scales["y"] is chart.y_linear for line in chart.lines)
    cmp.close()
