"""Training steps with an optimizer: the lesson's hand-derived numbers, optax itself as the
oracle (leaf by leaf, params and state, on the lesson's model and on hypothesis trees), one
compile per (loss, optimizer), honest learning rates, and the optimizer state split into
moment trees aligned with params and the rest."""

from __future__ import annotations

import math
import subprocess
import sys
import textwrap

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from pytree_lab import lesson
from pytree_lab.optimizer_state import decompose_state
from pytree_lab.training import CHUNK, OptimizerError, TrainingStep

# optax's own code is not strict about dtypes: the tests that run it do so under JAX's default
# dtype promotion (the lesson's model and the library's step are strict as everywhere).
optax_adam = pytest.mark.jax_promotion(
    dtype="optax's adam raises a float to its int32 step count (bias correction); "
    "MultiSteps mixes bool, int32 and float32 counters"
)


def lesson_params():
    return {"weight": np.array([1.0, -1.0], np.float32), "bias": np.array(0.0, np.float32)}


def lesson_inputs():
    return {"x": np.array([2.0, 1.0], np.float32), "target": np.array(3.0, np.float32)}


def direct_loss(p, x, target):
    return (jnp.dot(p["weight"], x) + p["bias"] - target) ** 2


def assert_leaves_close(actual, expected, rtol=1e-6, atol=1e-7):
    """Same structure (jax.tree_util), and every leaf equal within float32 rounding."""
    a_flat, a_def = jax.tree_util.tree_flatten_with_path(actual)
    e_flat, e_def = jax.tree_util.tree_flatten_with_path(expected)
    assert a_def == e_def
    for (path, a), (_, e) in zip(a_flat, e_flat):
        assert np.shape(a) == np.shape(e), jax.tree_util.keystr(path)
        assert np.asarray(a).dtype == np.asarray(e).dtype, jax.tree_util.keystr(path)
        np.testing.assert_allclose(
            np.asarray(a), np.asarray(e), rtol=rtol, atol=atol, err_msg=jax.tree_util.keystr(path)
        )


def optax_loop(opt, params, inputs, n, loss=direct_loss):
    """The hand-written training loop: optax called directly, eagerly, n times."""
    state = opt.init(params)
    losses = []
    for _ in range(n):
        value, grads = jax.value_and_grad(loss)(params, **inputs)
        losses.append(float(value))
        updates, state = opt.update(grads, state, params)
        params = optax.apply_updates(params, updates)
    return params, state, losses


# ------------------------------------------------------------------ the lesson's hand numbers
def test_two_plain_sgd_steps_reproduce_the_hand_derivation():
    # Step 1 (the lesson): prediction 1, residual -2, loss 4, grads [-8, -4], -4
    #   -> w = [1, -1] - 0.05 * [-8, -4] = [1.4, -0.8], b = 0.2.
    # Step 2: prediction 1.4*2 - 0.8 + 0.2 = 2.2, residual -0.8, loss 0.64, dL/dy -1.6,
    #   grads [-3.2, -1.6], -1.6 -> w = [1.56, -0.72], b = 0.28; prediction 3.12 - 0.72 + 0.28
    #   = 2.68, residual -0.32, loss 0.1024.
    ts = TrainingStep(lesson.lesson_loss)
    params = lesson_params()
    run = ts.run(params, None, lesson_inputs(), 0.05, n=2)
    assert run.steps == 2 and run.stopped_loss is None and run.opt_state is None
    np.testing.assert_allclose(np.asarray(run.params["weight"]), [1.56, -0.72], rtol=1e-6)
    np.testing.assert_allclose(float(run.params["bias"]), 0.28, rtol=1e-6)
    final = ts.step(run.params, run.opt_state, lesson_inputs(), 0.05)
    history = run.losses + [final.loss]
    assert history[0] == 4.0
    assert history == pytest.approx([4.0, 0.64, 0.1024], rel=1e-5)
    # the single step from the start is the lesson's step exactly (the seed's float32 value)
    first = ts.step(params, None, lesson_inputs(), 0.05)
    assert first.loss_after == 0.6399999260902405
    np.testing.assert_allclose(np.asarray(first.grads["weight"]), [-8.0, -4.0])
    np.testing.assert_allclose(np.asarray(first.updates["weight"]), [0.4, 0.2], rtol=1e-6)
    # second step's grads, from the hand derivation
    second = ts.step(first.updated, None, lesson_inputs(), 0.05)
    np.testing.assert_allclose(np.asarray(second.grads["weight"]), [-3.2, -1.6], rtol=1e-5)
    np.testing.assert_allclose(float(second.grads["bias"]), -1.6, rtol=1e-5)


@optax_adam
def test_the_users_trees_are_not_changed():
    params, inputs = lesson_params(), lesson_inputs()
    copies = jax.tree.map(np.copy, (params, inputs))
    ts = TrainingStep(lesson.lesson_loss, optax.adam(0.1))
    state = ts.init(params)
    ts.step(params, state, inputs)
    ts.run(params, state, inputs, n=5)
    for a, b in zip(jax.tree.leaves((params, inputs)), jax.tree.leaves(copies)):
        np.testing.assert_array_equal(a, b)


# ------------------------------------------------------------------ optax as the oracle
OPTIMIZERS = {
    "adam": lambda: optax.adam(0.1),
    "momentum": lambda: optax.sgd(0.1, momentum=0.9),
    "nesterov": lambda: optax.sgd(0.05, momentum=0.9, nesterov=True),
    "clip+adam": lambda: optax.chain(optax.clip_by_global_norm(1.0), optax.adam(0.1)),
    "adamw": lambda: optax.adamw(0.1, weight_decay=0.1),
    "multisteps": lambda: optax.MultiSteps(optax.adam(0.1), every_k_schedule=2),
    "inject": lambda: optax.inject_hyperparams(optax.adam)(learning_rate=0.1),
}
# all but plain sgd's run optax's adam
OPTIMIZER_CASES = [
    name if name in ("momentum", "nesterov") else pytest.param(name, marks=optax_adam) for name in OPTIMIZERS
]


@pytest.mark.parametrize("name", OPTIMIZER_CASES)
def test_one_step_equals_optax_leaf_by_leaf(name):
    opt = OPTIMIZERS[name]()
    params, inputs = lesson_params(), lesson_inputs()
    ts = TrainingStep(lesson.lesson_loss, opt)
    state = ts.init(params)
    assert_leaves_close(state, opt.init(params))
    lr = 0.1 if ts.lr_adjustable else None
    r = ts.step(params, state, inputs, lr)
    value, grads = jax.value_and_grad(direct_loss)(params, **inputs)
    updates, new_state = opt.update(grads, opt.init(params), params)
    updated = optax.apply_updates(params, updates)
    assert r.loss == float(value) == 4.0
    assert_leaves_close(r.grads, grads)
    assert_leaves_close(r.updates, updates)
    assert_leaves_close(r.updated, updated)
    assert_leaves_close(r.opt_state_after, new_state)
    assert r.loss_after == pytest.approx(float(direct_loss(updated, **inputs)), rel=1e-6)


@pytest.mark.parametrize("name", OPTIMIZER_CASES)
def test_n_steps_equal_a_hand_written_optax_loop(name):
    opt = OPTIMIZERS[name]()
    params, inputs = lesson_params(), lesson_inputs()
    ts = TrainingStep(lesson.lesson_loss, opt)
    state = ts.init(params)
    lr = 0.1 if ts.lr_adjustable else None
    run = ts.run(params, state, inputs, lr, n=12)
    want_params, want_state, want_losses = optax_loop(opt, params, inputs, 12)
    assert run.steps == 12
    np.testing.assert_allclose(run.losses, want_losses, rtol=1e-5, atol=1e-6)
    assert_leaves_close(run.params, want_params, rtol=1e-5, atol=1e-6)
    assert_leaves_close(run.opt_state, want_state, rtol=1e-5, atol=1e-6)


@optax_adam
def test_adam_moments_are_the_update_rule_by_hand():
    # Adam's first step from zero moments: mu = 0.1 g, nu = 0.001 g^2, m_hat = g, v_hat = g^2,
    # step = -lr * g / (|g| + eps) = -lr * sign(g): every parameter moves by exactly 0.1.
    ts = TrainingStep(lesson.lesson_loss, optax.adam(0.1))
    r = ts.step(lesson_params(), ts.init(lesson_params()), lesson_inputs())
    adam = r.opt_state_after[0]
    assert int(adam.count) == 1
    np.testing.assert_allclose(np.asarray(adam.mu["weight"]), [-0.8, -0.4], rtol=1e-6)
    np.testing.assert_allclose(np.asarray(adam.nu["weight"]), [0.064, 0.016], rtol=1e-5)
    np.testing.assert_allclose(float(adam.nu["bias"]), 0.016, rtol=1e-5)
    np.testing.assert_allclose(np.asarray(r.updated["weight"]), [1.1, -0.9], rtol=1e-6)
    np.testing.assert_allclose(float(r.updated["bias"]), 0.1, rtol=1e-5)  # float32 roundings of m̂, v̂


# hypothesis trees: nested dicts / lists / tuples of float32 arrays of small shapes
_shapes = st.sampled_from([(), (1,), (2,), (3,), (2, 2), (1, 3)])
_leaf = st.tuples(_shapes, st.integers(0, 2**31 - 1)).map(
    lambda t: np.random.default_rng(t[1]).normal(size=t[0]).astype(np.float32)
)
_trees = st.recursive(
    _leaf,
    lambda children: st.one_of(
        st.dictionaries(st.text("abcxyz", min_size=1, max_size=3), children, min_size=1, max_size=3),
        st.lists(children, min_size=1, max_size=3),
        st.lists(children, min_size=1, max_size=2).map(tuple),
    ),
    max_leaves=6,
)


def tree_loss(p, target):
    # a loss touching every leaf differently, so moments differ leaf by leaf
    leaves = jax.tree.leaves(p)
    return sum(jnp.sum((leaf - target) ** 2 * (i + 1)) + jnp.sum(jnp.sin(leaf)) for i, leaf in enumerate(leaves))


@optax_adam
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(tree=_trees, which=st.sampled_from(["adam", "momentum", "clip+adam"]))
def test_steps_on_hypothesis_trees_equal_optax(tree, which):
    opt = OPTIMIZERS[which]()
    inputs = {"target": np.float32(0.5)}
    ts = TrainingStep(tree_loss, opt)
    state = ts.init(tree)
    run = ts.run(tree, state, inputs, n=3)
    want_params, want_state, want_losses = optax_loop(opt, tree, inputs, 3, loss=tree_loss)
    np.testing.assert_allclose(run.losses, want_losses, rtol=1e-5, atol=1e-5)
    assert_leaves_close(run.params, want_params, rtol=1e-5, atol=1e-5)
    assert_leaves_close(run.opt_state, want_state, rtol=1e-5, atol=1e-5)
    # one step with every intermediate value, from where the loop ended
    r = ts.step(run.params, run.opt_state, inputs)
    value, grads = jax.value_and_grad(tree_loss)(want_params, **inputs)
    updates, new_state = opt.update(grads, want_state, want_params)
    np.testing.assert_allclose(float(r.loss), float(value), rtol=1e-4, atol=1e-5)
    assert_leaves_close(r.updates, updates, rtol=1e-4, atol=1e-5)
    assert_leaves_close(r.opt_state_after, new_state, rtol=1e-4, atol=1e-5)
    view = decompose_state(r.opt_state_after, tree)
    for moment in view.moments.values():
        assert jax.tree.structure(moment) == jax.tree.structure(tree)


# ------------------------------------------------------------------ compiled once, compiled loop
@optax_adam
def test_one_compile_per_loss_and_optimizer():
    ts = TrainingStep(lesson.lesson_loss, optax.adam(0.1))
    params, inputs = lesson_params(), lesson_inputs()
    state = ts.init(params)
    r = ts.step(params, state, inputs)
    run = ts.run(params, state, inputs, n=1)
    for n in (10, 3, CHUNK + 7):  # every n, and more than one buffer, reuse the same code
        run = ts.run(run.params, run.opt_state, inputs, n=n)
        r = ts.step(run.params, run.opt_state, inputs)
    assert ts.traces == {"step": 1, "run": 1}
    assert int(run.opt_state[0].count) == 1 + 10 + 3 + CHUNK + 7
    assert math.isfinite(r.loss)


def test_a_long_run_crosses_buffers_without_losing_a_step():
    ts = TrainingStep(lesson.lesson_loss)
    params, inputs = lesson_params(), lesson_inputs()
    n = CHUNK + 3
    run = ts.run(params, None, inputs, 0.01, n=n)
    p = params
    losses = []
    for _ in range(n):
        r = ts.step(p, None, inputs, 0.01)
        losses.append(r.loss)
        p = r.updated
    assert run.steps == n and len(run.losses) == n
    np.testing.assert_allclose(run.losses, losses, rtol=1e-6, atol=1e-7)
    assert_leaves_close(run.params, p)


def test_a_run_stops_before_a_step_that_is_not_finite():
    # learning rate 10 on the lesson's model: the residual grows x 49 each step, float32 overflows
    ts = TrainingStep(lesson.lesson_loss)
    run = ts.run(lesson_params(), None, lesson_inputs(), 10.0, n=100)
    assert 5 < run.steps < 100
    assert len(run.losses) == run.steps
    assert all(math.isfinite(v) for v in run.losses)
    assert all(np.all(np.isfinite(np.asarray(x))) for x in jax.tree.leaves(run.params))
    assert run.stopped_loss is not None
    assert not math.isfinite(run.stopped_loss)
    # it stopped on the point after exactly `steps` steps, the last one whose step is not finite
    p = lesson_params()
    for _ in range(run.steps):
        p = ts.step(p, None, lesson_inputs(), 10.0).updated
    assert_leaves_close(run.params, p, rtol=1e-5)
    last = ts.step(run.params, None, lesson_inputs(), 10.0)
    assert math.isfinite(last.loss) and not math.isfinite(last.loss_after)
    # the Lite engine's loop stops at the same point
    from pytree_lab.engine import Engine
    from pytree_lab_lite import jax as lite_jax

    def lite_loss(p, x, target):
        return (lite_jax.numpy.dot(p["weight"], x) + p["bias"] - target) ** 2

    lite = TrainingStep(lite_loss, engine=Engine(lite_jax))
    with np.errstate(over="ignore", invalid="ignore"):
        lite_run = lite.run(lesson_params(), None, lesson_inputs(), 10.0, n=100)
    assert lite_run.steps == run.steps


# ------------------------------------------------------------------ learning rates, honestly
@optax_adam
def test_a_fixed_optimizer_refuses_a_learning_rate():
    ts = TrainingStep(lesson.lesson_loss, optax.adam(0.1))
    assert not ts.lr_adjustable and ts.lr_source == "fixed"
    state = ts.init(lesson_params())
    with pytest.raises(OptimizerError, match="inject_hyperparams"):
        ts.step(lesson_params(), state, lesson_inputs(), 0.3)
    assert math.isnan(ts.step(lesson_params(), state, lesson_inputs()).learning_rate)


@optax_adam
def test_a_function_of_the_learning_rate_uses_the_rate_given():
    ts = TrainingStep(lesson.lesson_loss, lambda lr: optax.adam(lr))
    assert ts.lr_adjustable and ts.lr_source == "argument"
    params, inputs = lesson_params(), lesson_inputs()
    state = ts.init(params, 0.1)
    for lr in (0.1, 0.3):
        r = ts.step(params, state, inputs, lr)
        _, _, _ = optax_loop(optax.adam(lr), params, inputs, 1)
        want, _, _ = optax_loop(optax.adam(lr), params, inputs, 1)
        assert_leaves_close(r.updated, want)
        assert r.learning_rate == pytest.approx(lr)
    assert ts.traces["step"] == 1


@optax_adam
def test_inject_hyperparams_takes_the_rate_into_its_state():
    opt = optax.inject_hyperparams(optax.adam)(learning_rate=0.1)
    ts = TrainingStep(lesson.lesson_loss, opt)
    params, inputs = lesson_params(), lesson_inputs()
    state = ts.init(params)
    assert ts.lr_source == "state" and ts.learning_rate_of(state) == pytest.approx(0.1)
    r = ts.step(params, state, inputs, 0.25)
    # the oracle holds its hyperparameters in float32 too (1 - b2 rounds differently from optax.adam's)
    want, _, _ = optax_loop(optax.inject_hyperparams(optax.adam)(learning_rate=0.25), params, inputs, 1)
    assert_leaves_close(r.updated, want)
    assert ts.learning_rate_of(r.opt_state_after) == pytest.approx(0.25)
    assert r.learning_rate == pytest.approx(0.25)
    # no rate given: the one in the state stays (a fresh TrainingStep, a state it did not make)
    other = TrainingStep(lesson.lesson_loss, opt)
    run = other.run(params, opt.init(params), inputs, n=4)
    want, _, _ = optax_loop(opt, params, inputs, 4)
    assert_leaves_close(run.params, want, rtol=1e-5)


def test_a_schedule_is_not_an_adjustable_rate():
    opt = optax.inject_hyperparams(optax.adam)(learning_rate=optax.linear_schedule(0.1, 0.01, 10))
    ts = TrainingStep(lesson.lesson_loss, opt)
    ts.init(lesson_params())
    assert ts.lr_source == "fixed"


def test_a_wrong_optimizer_is_named():
    with pytest.raises(OptimizerError, match="GradientTransformation"):
        TrainingStep(lesson.lesson_loss, "adam")
    ts = TrainingStep(lesson.lesson_loss, lambda lr: 0.1)
    with pytest.raises(OptimizerError, match="returned float"):
        ts.init(lesson_params(), 0.1)


@pytest.mark.usefixtures("cpu_reference")
def test_x64_keeps_every_update_in_float64():
    with jax.enable_x64(True):
        params = {"weight": np.array([1.0, -1.0]), "bias": np.array(0.0)}
        inputs = {"x": np.array([2.0, 1.0]), "target": np.array(3.0)}
        r = TrainingStep(lesson.lesson_loss).step(params, None, inputs, 0.1)
        assert np.asarray(r.updated["bias"]).dtype == np.float64
        assert float(r.updated["bias"]) == 0.4  # 0 - 0.1 * (-4), exactly, in float64
        ts = TrainingStep(lesson.lesson_loss, optax.sgd(0.1, momentum=0.9))
        run = ts.run(params, ts.init(params), inputs, n=2)
        assert all(np.asarray(x).dtype == np.float64 for x in jax.tree.leaves((run.params, run.opt_state)))


# ------------------------------------------------------------------ the state, as the lesson shows it
def _params():
    return lesson_params()


def test_adam_state_splits_into_moments_and_a_count():
    state = optax.adam(0.1).init(_params())
    view = decompose_state(state, _params())
    assert list(view.moments) == ["adam mu", "adam nu"]
    assert view.moments["adam mu"] is state[0].mu and view.moments["adam nu"] is state[0].nu
    assert list(view.rest) == ["adam count", "empty"]
    assert view.where == {"adam count": "[0].count", "adam mu": "[0].mu", "adam nu": "[0].nu", "empty": "[1]"}


def test_chained_clip_and_adam():
    opt = optax.chain(optax.clip_by_global_norm(1.0), optax.adam(0.1))
    view = decompose_state(opt.init(_params()), _params())
    assert list(view.moments) == ["adam mu", "adam nu"]
    assert view.where["adam mu"] == "[1][0].mu"
    assert set(view.rest) == {"adam count", "empty (state[0])", "empty (state[1][1])"}


def test_momentum_trace_and_adamw():
    view = decompose_state(optax.sgd(0.1, momentum=0.9).init(_params()), _params())
    assert list(view.moments) == ["momentum trace"] and list(view.rest) == ["empty"]
    view = decompose_state(optax.adamw(0.1).init(_params()), _params())
    assert list(view.moments) == ["adam mu", "adam nu"]
    assert set(view.rest) == {"adam count", "empty (state[1])", "empty (state[2])"}


def test_multisteps_and_inject_hyperparams_wrappers():
    opt = optax.MultiSteps(optax.sgd(0.1, momentum=0.9), every_k_schedule=3)
    view = decompose_state(opt.init(_params()), _params())
    assert list(view.moments) == ["momentum trace", "multisteps acc_grads"]
    assert {"multisteps mini_step", "multisteps gradient_step"} <= set(view.rest)
    assert view.where["momentum trace"] == ".inner_opt_state[0].trace"
    opt = optax.inject_hyperparams(optax.adam)(learning_rate=0.1)
    view = decompose_state(opt.init(_params()), _params())
    assert list(view.moments) == ["adam mu", "adam nu"]
    assert float(view.rest["learning_rate"]) == pytest.approx(0.1)
    assert "inject_hyperparams count" in view.rest and "adam count" in view.rest


def test_a_scalar_parameter_does_not_turn_counts_into_moments():
    params = np.float32(2.0)
    view = decompose_state(optax.adam(0.1).init(params), params)
    assert list(view.moments) == ["adam mu", "adam nu"]
    assert "adam count" in view.rest


def test_two_adams_are_told_apart_by_where_they_are():
    opt = optax.chain(optax.adam(0.1), optax.adam(0.2))
    view = decompose_state(opt.init(_params()), _params())
    assert list(view.moments) == [
        "adam mu (state[0][0].mu)",
        "adam nu (state[0][0].nu)",
        "adam mu (state[1][0].mu)",
        "adam nu (state[1][0].nu)",
    ]


# ------------------------------------------------------------------ the Lite engine's optimizers
def _lite():
    from pytree_lab.engine import Engine
    from pytree_lab_lite import jax as lite_jax, optax as lite_optax

    return Engine(lite_jax), lite_jax, lite_optax


LITE_PAIRS = {
    "sgd": ("sgd", dict(learning_rate=0.05), optax.sgd),
    "momentum": ("sgd", dict(learning_rate=0.1, momentum=0.9), optax.sgd),
    "nesterov": ("sgd", dict(learning_rate=0.1, momentum=0.9, nesterov=True), optax.sgd),
    "adam": ("adam", dict(learning_rate=0.1), optax.adam),
    "adam-b": ("adam", dict(learning_rate=0.01, b1=0.5, b2=0.9, eps=1e-3, eps_root=1e-4), optax.adam),
}


def _leaves_in_order(tree, tu):
    flat, _ = tu.tree_flatten_with_path(tree)
    return [(tu.keystr(p), np.asarray(x)) for p, x in flat]


@pytest.mark.parametrize(
    "name", [pytest.param(name, marks=optax_adam) if LITE_PAIRS[name][0] == "adam" else name for name in LITE_PAIRS]
)
@pytest.mark.usefixtures("cpu_reference")
def test_lite_optimizers_follow_optax_step_by_step(name):
    _eng, lite_jax, lite_optax = _lite()
    fn, kwargs, real = LITE_PAIRS[name]
    lite_opt, real_opt = getattr(lite_optax, fn)(**kwargs), real(**kwargs)
    params = {"w": np.array([[0.3, -1.2], [2.0, 0.1]], np.float32), "b": np.array([0.5, -0.25], np.float32)}
    rng = np.random.default_rng(0)
    lite_state, real_state = lite_opt.init(params), real_opt.init(params)
    lite_p, real_p = params, params
    for step in range(6):
        grads = {k: rng.normal(size=v.shape).astype(np.float32) for k, v in params.items()}
        lu, lite_state = lite_opt.update(grads, lite_state, lite_p)
        ru, real_state = real_opt.update(grads, real_state, real_p)
        lite_p, real_p = lite_optax.apply_updates(lite_p, lu), optax.apply_updates(real_p, ru)
        for tree_l, tree_r in ((lu, ru), (lite_p, real_p), (lite_state, real_state)):
            left = _leaves_in_order(tree_l, lite_jax.tree_util)
            right = _leaves_in_order(tree_r, jax.tree_util)
            assert [p for p, _ in left] == [p for p, _ in right]
            for (path, a), (_, b) in zip(left, right):
                assert a.dtype == b.dtype and a.shape == b.shape, path
                np.testing.assert_allclose(a, b, rtol=2e-6, atol=1e-7, err_msg=f"step {step} {path}")
    # the same type names, so the state reads the same in the diagram
    assert [type(s).__name__ for s in lite_state] == [type(s).__name__ for s in real_state]


@optax_adam
@pytest.mark.usefixtures("cpu_reference")
def test_lite_training_step_runs_the_lesson_like_optax():
    eng, lite_jax, lite_optax = _lite()

    def loss(p, x, target):
        return (lite_jax.numpy.dot(p["weight"], x) + p["bias"] - target) ** 2

    ts = TrainingStep(loss, lite_optax.adam(0.1), engine=eng)
    run = ts.run(lesson_params(), ts.init(lesson_params()), lesson_inputs(), n=10)
    _, _, want_losses = optax_loop(optax.adam(0.1), lesson_params(), lesson_inputs(), 10)
    np.testing.assert_allclose(run.losses, want_losses, rtol=1e-5)
    view = decompose_state(run.opt_state, lesson_params(), eng)
    assert list(view.moments) == ["adam mu", "adam nu"] and int(view.rest["adam count"]) == 10
    # plain SGD in the Lite engine: the hand numbers
    run = TrainingStep(loss, engine=eng).run(lesson_params(), None, lesson_inputs(), 0.05, n=2)
    np.testing.assert_allclose(np.asarray(run.params["weight"]), [1.56, -0.72], rtol=1e-6)
    assert run.losses == pytest.approx([4.0, 0.64], rel=1e-6)
    # a function of the rate works there too
    ts = TrainingStep(loss, lambda lr: lite_optax.sgd(lr, momentum=0.9), engine=eng)
    assert ts.lr_adjustable


def test_lite_engine_refuses_optax_and_jax_refuses_lite_optimizers():
    eng, _lite_jax, lite_optax = _lite()
    with pytest.raises(OptimizerError, match="needs JAX"):
        TrainingStep(lesson.lesson_loss, optax.adam(0.1), engine=eng)
    ts = TrainingStep(lesson.lesson_loss, lambda lr: optax.adam(lr), engine=eng)
    with pytest.raises(OptimizerError, match="needs JAX"):
        ts.init(lesson_params(), 0.1)
    with pytest.raises(OptimizerError, match="use optax itself") as refused:
        TrainingStep(lesson.lesson_loss, lite_optax.adam(0.1))
    # it says what to install, not only what is wrong
    assert "pip install optax" in str(refused.value) and 'pip install "pytree-lab[jax]"' in str(refused.value)
    # a function of the rate that builds a Lite optimizer (the notebooks' browser fallback, run
    # in a JAX kernel without optax) is refused as it is built, before any step runs
    ts = TrainingStep(lesson.lesson_loss, lambda lr: lite_optax.adam(lr))
    with pytest.raises(OptimizerError, match=r"use optax itself.*pip install optax"):
        ts.init(lesson_params(), 0.1)


def test_lite_optimizers_run_in_a_kernel_without_jax():
    code = textwrap.dedent(
        """
        import sys
        class _Block:
            def find_spec(self, name, path=None, target=None):
                if name.split(".")[0] in ("jax", "jaxlib", "optax"):
                    raise ImportError(f"{name} is not installed here")
        sys.meta_path.insert(0, _Block())
        import numpy as np
        from pytree_lab import lesson
        from pytree_lab_lite import optax
        from pytree_lab.engine import get_engine
        from pytree_lab.optimizer_state import decompose_state
        from pytree_lab.training import TrainingStep
        assert get_engine().is_lite
        p = lesson.lesson_params()
        ts = TrainingStep(lesson.lesson_loss, optax.sgd(0.1, momentum=0.9))
        run = ts.run(p, ts.init(p), lesson.lesson_inputs(), n=3)
        print(run.steps, list(decompose_state(run.opt_state, p).moments))
        """
    )
    out = subprocess.run([sys.executable, "-W", "error", "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "3 ['momentum trace']"


def test_adams_constants_are_read_from_the_optimizer_as_built():
    from pytree_lab.optimizer_state import adam_hyperparameters
    from pytree_lab_lite import optax as lite_optax

    assert adam_hyperparameters(optax.adam(0.1)) == {
        "b1": 0.9,
        "b2": 0.999,
        "eps": 1e-8,
        "eps_root": 0.0,
        "learning_rate": 0.1,
    }
    clipped = optax.chain(optax.clip_by_global_norm(1.0), optax.adam(0.2, b1=0.8))
    assert adam_hyperparameters(clipped)["b1"] == 0.8
    assert adam_hyperparameters(optax.MultiSteps(optax.adam(0.3), 2))["learning_rate"] == 0.3
    assert adam_hyperparameters(lite_optax.adam(0.1, b2=0.99))["b2"] == 0.99
    # not one plain Adam: nothing is claimed
    assert adam_hyperparameters(optax.sgd(0.1, momentum=0.9)) is None
    assert adam_hyperparameters(optax.chain(optax.adam(0.1), optax.adam(0.2))) is None
    assert adam_hyperparameters(optax.adam(0.1, nesterov=True)) is None
    # a schedule: b1, b2 known, no single learning rate
    assert "learning_rate" not in adam_hyperparameters(optax.adam(optax.linear_schedule(0.1, 0.01, 10)))
