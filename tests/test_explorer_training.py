"""StepExplorer with an optimizer and real steps: step(n), reset(), params / opt_state / history,
the buttons, the loss line, the optimizer state aligned with params by path, honest learning
rates. Oracles: the lesson's hand-derived numbers and optax called directly."""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from pytree_lab import StepExplorer, lesson
from pytree_lab.training import OptimizerError

# optax's own code is not strict about dtypes: the tests that run it do so under JAX's default
# dtype promotion (the lesson's model and the library's step are strict as everywhere).
optax_adam = pytest.mark.jax_promotion(
    dtype="optax's adam raises a float to its int32 step count (bias correction); "
    "MultiSteps mixes bool, int32 and float32 counters"
)


def start():
    return {"weight": np.array([1.0, -1.0], np.float32), "bias": np.array(0.0, np.float32)}


def inputs():
    return {"x": np.array([2.0, 1.0], np.float32), "target": np.array(3.0, np.float32)}


def direct_loss(p, x, target):
    return (jnp.dot(p["weight"], x) + p["bias"] - target) ** 2


def optax_loop(opt, n):
    params, state = start(), opt.init(start())
    losses = []
    for _ in range(n):
        value, grads = jax.value_and_grad(direct_loss)(params, **inputs())
        losses.append(float(value))
        updates, state = opt.update(grads, state, params)
        params = optax.apply_updates(params, updates)
    return params, state, losses


def assert_trees_close(a, b, rtol=1e-5, atol=1e-6):
    fa, da = jax.tree_util.tree_flatten(a)
    fb, db = jax.tree_util.tree_flatten(b)
    assert da == db
    for x, y in zip(fa, fb):
        np.testing.assert_allclose(np.asarray(x), np.asarray(y), rtol=rtol, atol=atol)


def row(ex, path):
    return next(r for r in ex.diagram.rows if r["p"] == path)


def cell(ex, path, column):
    return row(ex, path)["c"][ex.diagram.columns.index(column)]["v"]


# ------------------------------------------------------------------ plain steps: the hand numbers
def test_two_steps_of_the_lesson_reach_the_hand_derived_point():
    ex = StepExplorer()
    assert ex.history == [4.0] and ex.opt_state is None
    r = ex.step()
    assert r is ex.result
    ex.step()
    np.testing.assert_allclose(np.asarray(ex.params["weight"]), [1.56, -0.72], rtol=1e-6)
    np.testing.assert_allclose(float(ex.params["bias"]), 0.28, rtol=1e-6)
    assert ex.history == pytest.approx([4.0, 0.64, 0.1024], rel=1e-5)
    # the sliders followed, and the result is the step from where the explorer stands
    assert ex.sliders["weight[0]"].value == pytest.approx(1.56, rel=1e-6)
    assert ex.sliders["bias"].value == pytest.approx(0.28, rel=1e-6)
    assert_trees_close(ex.result.params, ex.params, rtol=0, atol=0)
    assert ex.result.loss == ex.history[-1]
    # the views show that point: bars before = params, the loss line = history
    np.testing.assert_allclose(np.asarray(ex.chart_view.bars.y)[0], [1.56, -0.72, 0.28], rtol=1e-6)
    np.testing.assert_allclose(np.asarray(ex.history_view.line.y), ex.history)
    assert "0.1024" in ex.text()


def test_step_n_is_one_compiled_loop_and_equals_n_single_steps():
    ex = StepExplorer()
    ex.step(10)
    one = StepExplorer()
    for _ in range(10):
        one.step()
    assert len(ex.history) == 11
    np.testing.assert_allclose(ex.history, one.history, rtol=1e-6)
    assert_trees_close(ex.params, one.params, rtol=1e-6, atol=1e-7)
    ex.step(3)
    ex.step(25)
    assert ex.session.runner().traces == {"step": 0, "run": 1}


def test_reset_goes_back_to_the_start():
    ex = StepExplorer()
    ex.step(4)
    ex.reset()
    assert ex.history == [4.0]
    assert_trees_close(ex.params, start(), rtol=0, atol=0)
    assert ex.sliders["weight[1]"].value == -1.0
    assert ex.result.loss == 4.0


def test_buttons_take_the_same_steps():
    ex = StepExplorer()
    ex.step_button.click()
    assert len(ex.history) == 2
    ex.step10_button.click()
    assert len(ex.history) == 12
    want = StepExplorer()
    want.step(11)
    np.testing.assert_allclose(ex.history, want.history, rtol=1e-6)
    ex.reset_button.click()
    assert ex.history == [4.0]


def test_a_slider_move_moves_the_current_point():
    ex = StepExplorer()
    ex.step(2)
    ex.sliders["bias"].value = 0.5
    assert len(ex.history) == 3
    assert ex.history[-1] == ex.result.loss
    assert float(ex.params["bias"]) == 0.5
    ex.step()
    assert len(ex.history) == 4


def test_a_diverging_run_stops_with_a_message_at_a_finite_point():
    ex = StepExplorer(learning_rate=10.0)
    ex.step(100)
    assert 5 < len(ex.history) < 101
    assert all(math.isfinite(v) for v in ex.history)
    assert "Stopped after" in ex.status.value and "diverge" in ex.status.value
    assert all(np.all(np.isfinite(np.asarray(x))) for x in jax.tree.leaves(ex.params))


@optax_adam
def test_a_loss_that_fails_in_the_loop_keeps_the_last_good_state():
    calls = {"n": 0}

    def loss(p, x, target):
        return direct_loss(p, x, target)

    ex = StepExplorer(loss, start(), inputs(), optimizer=optax.adam(0.1))
    ex.step(2)
    before = (ex.params, ex.opt_state, ex.history)

    def broken(p, x, target):
        calls["n"] += 1
        raise RuntimeError("no data today")

    ex.set_loss(broken)
    assert "no data today" in ex.status.value
    assert ex.step(5) is None
    assert "no data today" in ex.status.value
    assert_trees_close(ex.params, before[0], rtol=0, atol=0)
    assert ex.opt_state is before[1]
    assert ex.history == before[2]


def test_step_refuses_a_bad_count():
    ex = StepExplorer()
    for bad in (-1, 1.5, "3", True):
        with pytest.raises(ValueError, match="whole number"):
            ex.step(bad)


def test_fixed_range_keeps_the_bars_scale_across_steps():
    big = {"weight": np.array([4.0, -4.0], np.float32), "bias": np.array(0.0, np.float32)}
    ex = StepExplorer(params=big, fixed_range=True)
    free = StepExplorer(params=big)
    lo, hi = ex.chart_view.y_scale.min, ex.chart_view.y_scale.max
    assert (free.chart_view.y_scale.min, free.chart_view.y_scale.max) == (lo, hi)
    for e in (ex, free):
        e.set_params(start())  # the lesson's start: smaller bars
        e.step(3)
    assert (ex.chart_view.y_scale.min, ex.chart_view.y_scale.max) == (lo, hi)
    assert (free.chart_view.y_scale.min, free.chart_view.y_scale.max) != (lo, hi)
    np.testing.assert_allclose(np.asarray(ex.chart_view.bars.y), np.asarray(free.chart_view.bars.y))
    # the checkbox turns it on and off
    free.fixed_range_box.value = True
    assert free.chart_view.fixed_range
    free.fixed_range_box.value = False
    assert not free.chart_view.fixed_range


# ------------------------------------------------------------------ optimizers: optax as the oracle
@pytest.mark.parametrize(
    "make",
    [
        pytest.param(lambda: optax.adam(0.1), marks=optax_adam),
        lambda: optax.sgd(0.05, momentum=0.9),
        pytest.param(lambda: optax.chain(optax.clip_by_global_norm(1.0), optax.adam(0.1)), marks=optax_adam),
        pytest.param(lambda: optax.adamw(0.1, weight_decay=0.1), marks=optax_adam),
    ],
    ids=["adam", "momentum", "clip+adam", "adamw"],
)
def test_steps_equal_optax_params_state_and_history(make):
    opt = make()
    ex = StepExplorer(direct_loss, start(), inputs(), optimizer=opt)
    ex.step(7)
    params, state, losses = optax_loop(opt, 7)
    assert_trees_close(ex.params, params)
    assert_trees_close(ex.opt_state, state)
    # a loss near 0 is the difference of numbers about 2 (the lesson's): its error, their float32
    # ulp, not a share of itself (clip+adam passes 2.5e-10; the eager loop here is not jitted)
    np.testing.assert_allclose(ex.history[:-1], losses, rtol=1e-5, atol=1e-6)
    # the step shown is the optimizer's next step from there, with its new state
    value, grads = jax.value_and_grad(direct_loss)(params, **inputs())
    updates, new_state = opt.update(grads, state, params)
    assert ex.result.loss == pytest.approx(float(value), rel=1e-5)
    assert_trees_close(ex.result.updated, optax.apply_updates(params, updates))
    assert_trees_close(ex.result.opt_state_after, new_state)


@optax_adam
def test_reset_restores_params_and_a_fresh_optimizer_state():
    opt = optax.adam(0.1)
    ex = StepExplorer(direct_loss, start(), inputs(), optimizer=opt)
    ex.step(5)
    assert int(ex.opt_state[0].count) == 5
    ex.reset()
    assert_trees_close(ex.params, start(), rtol=0, atol=0)
    assert_trees_close(ex.opt_state, opt.init(start()), rtol=0, atol=0)
    assert int(ex.opt_state[0].count) == 0
    assert ex.history == [4.0]


@optax_adam
def test_moments_sit_in_the_params_rows_and_follow_every_step_and_slider():
    ex = StepExplorer(optimizer=optax.adam(0.1))
    assert ex.diagram.columns == ["params", "grads", "adam mu", "adam nu", "updated"]
    assert [p["title"] for p in ex.diagram.panels] == ["optimizer state"]
    state_rows = {r["p"]: r for r in ex.diagram.panels[0]["rows"]}
    assert state_rows["['adam count']"]["c"][0]["v"] == "1"  # the state after the step shown
    assert "numerical parameter" not in ex.diagram.panels[0]["counts"]
    # moments are optimizer state beside the params, never counted as parameter values
    assert ex.diagram.counts == [
        "2 leaves, 3 numerical parameter values",
        "2 leaves, 3 gradient values",
        "2 leaves, 3 optimizer state values",
        "2 leaves, 3 optimizer state values",
        "2 leaves, 3 numerical parameter values",
    ]
    # first Adam step: mu = 0.1 g = [-0.8, -0.4], -0.4, in the weight and bias rows
    assert cell(ex, "['weight']", "adam mu") == "[-0.8, -0.4]"
    assert cell(ex, "['bias']", "adam mu") == "-0.4"
    ex.step(2)
    mu = ex.result.opt_state_after[0].mu
    assert int(ex.result.opt_state_after[0].count) == 3
    from pytree_lab.calculation import fmt_value

    assert cell(ex, "['weight']", "adam mu") == fmt_value(mu["weight"])[0]
    shown = cell(ex, "['weight']", "adam nu")
    ex.sliders["weight[0]"].value = 0.25  # a slider move recomputes the state panel too
    assert cell(ex, "['weight']", "adam nu") != shown
    assert cell(ex, "['weight']", "adam nu") == fmt_value(ex.result.opt_state_after[0].nu["weight"])[0]
    # the state the step starts from is unchanged by a slider move
    assert int(ex.opt_state[0].count) == 2


@optax_adam
def test_selecting_a_leaf_shows_its_adam_update_from_the_state():
    opt = optax.inject_hyperparams(optax.adam)(learning_rate=0.1)
    ex = StepExplorer(optimizer=opt)
    ex.step(3)
    ex.selected_path = "['bias']"
    rows = [r for r in ex.calculation.rows() if r.section == "optimizer"]
    assert rows and all(r.path == "['bias']" for r in rows)
    by_what = {r.what.split(" ")[0]: r.value for r in rows}
    state = ex.result.opt_state_after.inner_state[0]
    t = int(state.count)
    assert t == 4 and by_what["t"] == "4"
    m_hat = float(state.mu["bias"]) / (1 - 0.9**t)
    v_hat = float(state.nu["bias"]) / (1 - 0.999**t)
    assert float(by_what["m̂"]) == pytest.approx(m_hat, rel=1e-3)
    assert float(by_what["v̂"]) == pytest.approx(v_hat, rel=1e-3)
    step = next(r for r in rows if r.what.startswith("−η"))
    update = next(r for r in rows if r.what.startswith("update[bias]"))
    # the step from m̂ and v̂ is the optimizer's own update for that leaf
    assert float(step.value) == pytest.approx(float(ex.result.updates["bias"]), rel=1e-4)
    assert float(update.value) == pytest.approx(float(ex.result.updates["bias"]), rel=1e-3)
    # the diagram highlights the whole row: params, grads, moments and updated of that path
    assert ex.diagram.selected_path == "['bias']"
    assert len(row(ex, "['bias']")["c"]) == 5


@optax_adam
def test_a_fixed_rate_has_no_slider_an_injected_rate_has_an_honest_one():
    fixed = StepExplorer(optimizer=optax.adam(0.1))
    assert "learning_rate" not in fixed.sliders
    noted = StepExplorer(optimizer=optax.adam(0.1), learning_rate=0.3)
    assert "does nothing" in noted.status.value

    injected = StepExplorer(optimizer=optax.inject_hyperparams(optax.adam)(learning_rate=0.2))
    assert injected.sliders["learning_rate"].value == pytest.approx(0.2)
    first = injected.result.updated
    injected.sliders["learning_rate"].value = 0.4
    assert float(injected.result.opt_state_after.hyperparams["learning_rate"]) == pytest.approx(0.4)
    # Adam's first step moves every parameter by the learning rate
    np.testing.assert_allclose(np.asarray(first["weight"]), [1.2, -0.8], rtol=1e-5)
    np.testing.assert_allclose(np.asarray(injected.result.updated["weight"]), [1.4, -0.6], rtol=1e-5)

    factory = StepExplorer(optimizer=lambda lr: optax.sgd(lr, momentum=0.9), learning_rate=0.05)
    assert factory.sliders["learning_rate"].value == 0.05
    factory.step(2)
    params, state, _ = optax_loop(optax.sgd(0.05, momentum=0.9), 2)
    assert_trees_close(factory.params, params)
    assert_trees_close(factory.opt_state, state)


@optax_adam
def test_multisteps_and_inject_show_their_state_apart():
    ex = StepExplorer(optimizer=optax.MultiSteps(optax.sgd(0.1, momentum=0.9), every_k_schedule=2))
    assert ex.diagram.columns == ["params", "grads", "momentum trace", "multisteps acc_grads", "updated"]
    titles = [r["l"] for r in ex.diagram.panels[0]["rows"]]
    assert "multisteps mini_step" in titles and "multisteps gradient_step" in titles
    ex.step(3)
    params, state, _ = optax_loop(optax.MultiSteps(optax.sgd(0.1, momentum=0.9), every_k_schedule=2), 3)
    assert_trees_close(ex.params, params)
    assert_trees_close(ex.opt_state, state)


@optax_adam
def test_one_compile_for_steps_runs_and_slider_moves():
    ex = StepExplorer(optimizer=optax.adam(0.1))
    for n in (1, 10, 3):
        ex.step(n)
    ex.sliders["bias"].value = 0.3
    ex.reset()
    ex.step(10)
    assert ex.session.slider_step.traces == {"step": 1, "run": 1}


def test_a_wrong_optimizer_is_refused_at_construction():
    with pytest.raises(OptimizerError, match="GradientTransformation"):
        StepExplorer(optimizer="adam")


@optax_adam
def test_the_text_form_has_the_history_and_the_state():
    ex = StepExplorer(optimizer=optax.adam(0.1))
    ex.step(2)
    text = ex.text()
    assert "adam mu" in text and "optimizer state" in text and "adam count" in text
    assert "Loss at each point visited: 4 → 2.56 →" in text


@optax_adam
def test_close_closes_the_new_widgets_too():
    ex = StepExplorer(optimizer=optax.adam(0.1))
    ex.history_view.set_log(True)  # the log scale now on screen, the linear one not
    parts = [ex.step_button, ex.reset_button, ex.history_chart, ex.history_view.y_linear, ex.history_view.y_log]
    ex.close()
    assert all(w.comm is None for w in parts)


# ------------------------------------------------------------------ the Lite engine
@optax_adam
@pytest.mark.usefixtures("cpu_reference")
def test_the_lite_engine_explorer_runs_its_own_adam_like_optax():
    from pytree_lab.engine import Engine
    from pytree_lab_lite import jax as lite_jax, optax as lite_optax

    eng = Engine(lite_jax)

    def loss(p, x, target):
        return (lite_jax.numpy.dot(p["weight"], x) + p["bias"] - target) ** 2

    ex = StepExplorer(loss, start(), inputs(), optimizer=lite_optax.adam(0.1), engine=eng)
    assert ex.diagram.columns == ["params", "grads", "adam mu", "adam nu", "updated"]
    ex.step(5)
    params, _, losses = optax_loop(optax.adam(0.1), 5)
    assert_trees_close(ex.params, params)
    np.testing.assert_allclose(ex.history[:-1], losses, rtol=1e-5)
    with pytest.raises(OptimizerError, match="needs JAX"):
        StepExplorer(loss, start(), inputs(), optimizer=optax.adam(0.1), engine=eng)


@pytest.mark.parametrize("make", [lambda: optax.adam(0.1), lambda: lambda lr: optax.adam(lr)], ids=["fixed", "factory"])
@optax_adam
def test_plain_adam_shows_m_hat_and_v_hat_too(make):
    ex = StepExplorer(optimizer=make(), learning_rate=0.1)
    ex.step(2)
    ex.selected_path = "['weight']"
    rows = {r.what.split(" ")[0]: r for r in ex.calculation.rows() if r.section == "optimizer"}
    state = ex.result.opt_state_after[0]
    m_hat = np.asarray(state.mu["weight"], np.float64) / (1 - 0.9**3)
    assert rows["m̂"].value == "[" + ", ".join(f"{v:.4g}" for v in m_hat) + "]"
    step = next(r for r in ex.calculation.rows() if r.what.startswith("−η"))
    assert step.value == next(r for r in ex.calculation.rows() if r.what.startswith("update[weight]")).value


@optax_adam
def test_weight_decay_shows_the_update_applied_and_says_why_it_is_not_adams_formula():
    ex = StepExplorer(optimizer=optax.adamw(0.1, weight_decay=0.5))
    ex.step(2)
    ex.selected_path = "['bias']"
    # adamw adds −η·λ·p to Adam's step: Adam's formula is not the update applied, so not shown
    assert not any(r.what.startswith(("−η", "m̂", "v̂")) for r in ex.calculation.rows())
    update = next(r for r in ex.calculation.rows() if r.what.startswith("update[bias]"))
    assert float(update.value) == pytest.approx(float(ex.result.updates["bias"]), rel=1e-3)
    why = next(r for r in ex.calculation.rows() if r.note)
    assert "decays the weights" in why.value and "λ = 0.5" in why.value


def test_reset_returns_the_learning_rate_and_the_inputs_to_their_construction_values():
    ex = StepExplorer()
    ex.sliders["learning_rate"].value = 0.2
    ex.sliders["x[0]"].value = 3.0
    ex.set_inputs({"x": jnp.array([2.5, 1.0]), "target": jnp.array(5.0)})
    ex.step(3)
    assert ex.result.learning_rate == pytest.approx(0.2)
    ex.reset()
    assert ex.sliders["learning_rate"].value == lesson.LEARNING_RATE
    assert ex.sliders["x[0]"].value == 2.0 and ex.sliders["x[1]"].value == 1.0
    assert ex.sliders["target"].value == 3.0
    assert ex.history == [4.0]
    r = ex.result
    # the lesson's step by hand: prediction 1, residual -2, dL/dw = 2·(-2)·x, dL/db = -4
    assert r.learning_rate == pytest.approx(lesson.LEARNING_RATE)
    np.testing.assert_allclose(np.asarray(r.grads["weight"]), [-8.0, -4.0])
    assert float(r.grads["bias"]) == -4.0
    lr = lesson.LEARNING_RATE
    np.testing.assert_allclose(np.asarray(r.updated["weight"]), [1 + 8 * lr, -1 + 4 * lr], rtol=1e-6)
    assert "pytree-lab-alert" not in ex.status.value


def test_reset_returns_changed_static_inputs_and_data_to_their_construction_values():
    def loss(p, x, labels, sign):
        return sign * jnp.sum((p["w"] * x - labels) ** 2)

    x = jnp.arange(6.0)  # a batch: data, not sliders
    ex = StepExplorer(loss, {"w": jnp.array(1.0)}, {"x": x, "labels": jnp.zeros(6), "sign": 1.0}, static=["sign"])
    ex.set_inputs({"x": x * 2, "labels": jnp.ones(6), "sign": 2.0})
    assert ex.result.loss == pytest.approx(2 * float(jnp.sum((x * 2 - 1) ** 2)))
    ex.reset()
    assert ex.result.loss == pytest.approx(float(jnp.sum(x**2)))  # 55
    assert ex.result.loss == 55.0
    assert float(ex.result.grads["w"]) == pytest.approx(2 * float(jnp.sum(x * x)))
    assert "inputs['sign']: float (static) 1.0" in ex.text()
