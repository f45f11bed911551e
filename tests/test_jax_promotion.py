"""JAX's promotion settings: every test runs with strict rank and dtype promotion unless a
`jax_promotion` marker names what it needs (tests/conftest.py), and the library runs a user's
loss and optimizer under the user's own settings, adding none of its own."""

from __future__ import annotations

import threading

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from pytree_lab import StepExplorer, gradient_step, lesson
from pytree_lab.training import OptimizerError, TrainingStep

RANK_ERROR = "jax_numpy_rank_promotion='raise'"
DTYPE_ERROR = "jax_numpy_dtype_promotion=strict"


def broadcast():
    return jnp.ones(2) + jnp.ones((2, 2))


def mixed_dtypes():
    return jnp.ones(2, jnp.int32) + jnp.ones(2, jnp.float32)


# ------------------------------------------------------------------ what conftest sets
def test_an_ordinary_test_runs_with_strict_rank_and_dtype_promotion():
    assert jax.config.jax_numpy_rank_promotion == "raise"
    assert jax.config.jax_numpy_dtype_promotion == "strict"
    with pytest.raises(ValueError, match=RANK_ERROR):
        broadcast()
    with pytest.raises(ValueError, match=DTYPE_ERROR):
        mixed_dtypes()


def test_the_strict_settings_hold_in_a_thread_the_test_starts():
    errors: list[BaseException] = []

    def run():
        for attempt in (broadcast, mixed_dtypes):
            try:
                attempt()
            except ValueError as err:
                errors.append(err)

    thread = threading.Thread(target=run)
    thread.start()
    thread.join()
    assert [RANK_ERROR in str(errors[0]), DTYPE_ERROR in str(errors[1])] == [True, True]


@pytest.mark.jax_promotion(rank="this test adds a (2,) vector to a (2, 2) matrix")
def test_a_marked_test_gets_jax_default_for_the_setting_it_names_only():
    np.testing.assert_array_equal(np.asarray(broadcast()), [[2.0, 2.0], [2.0, 2.0]])
    with pytest.raises(ValueError, match=DTYPE_ERROR):
        mixed_dtypes()


@pytest.mark.jax_promotion("this test adds a (2,) vector to a (2, 2) matrix and int32 to float32")
def test_a_marker_with_one_reason_gives_both_defaults():
    assert (jax.config.jax_numpy_rank_promotion, jax.config.jax_numpy_dtype_promotion) == ("allow", "standard")
    assert np.asarray(mixed_dtypes()).dtype == np.float32


# ------------------------------------------------------------------ the user's settings reach the user's code
def batched_loss(p, x, y):
    """A user's linear model on a batch: (2, 1) predictions plus a bias of shape (1,) broadcast."""
    pred = x @ p["w"] + p["b"]
    return jnp.mean((pred[:, 0] - y) ** 2)


def batched_start():
    return {"w": np.zeros((2, 1), np.float32), "b": np.zeros(1, np.float32)}


def batch():
    return {"x": np.eye(2, dtype=np.float32), "y": np.array([1.0, 2.0], np.float32)}


def assert_hand_derived_step(r):
    # predictions 0 and 0, residuals -1 and -2: loss (1 + 4) / 2 = 2.5; dL/dpred = (-1, -2), so
    # dw = x^T (-1, -2) = [[-1], [-2]] and db = -3. Learning rate 0.1: w = [[0.1], [0.2]], b = 0.3;
    # predictions 0.4 and 0.5, residuals -0.6 and -1.5: loss (0.36 + 2.25) / 2 = 1.305.
    assert r.loss == 2.5
    np.testing.assert_allclose(np.asarray(r.grads["w"]), [[-1.0], [-2.0]], rtol=1e-6)
    np.testing.assert_allclose(np.asarray(r.grads["b"]), [-3.0], rtol=1e-6)
    np.testing.assert_allclose(np.asarray(r.updated["w"]), [[0.1], [0.2]], rtol=1e-6)
    np.testing.assert_allclose(np.asarray(r.updated["b"]), [0.3], rtol=1e-6)
    assert r.loss_after == pytest.approx(1.305, rel=1e-6)


def test_a_users_broadcast_is_refused_or_allowed_by_the_users_own_setting():
    # strict (this test's setting): JAX refuses the loss's own broadcast, in the compiled step,
    # the eager step and the explorer alike
    with pytest.raises(ValueError, match=RANK_ERROR):
        TrainingStep(batched_loss).step(batched_start(), None, batch(), 0.1)
    with pytest.raises(ValueError, match=RANK_ERROR):
        gradient_step(batched_loss, batched_start(), learning_rate=0.1, **batch())
    ex = StepExplorer(batched_loss, batched_start(), batch(), learning_rate=0.1)
    assert ex.result is None and "rank_promotion" in ex.status.value
    ex.close()
    # the same loss where its author allows the broadcast (JAX's `with`, this thread only): the
    # library adds no setting of its own, and the step is the hand-derived one
    with jax.numpy_rank_promotion("allow"):
        assert_hand_derived_step(TrainingStep(batched_loss).step(batched_start(), None, batch(), 0.1))
        assert_hand_derived_step(gradient_step(batched_loss, batched_start(), learning_rate=0.1, **batch()))
        ex = StepExplorer(batched_loss, batched_start(), batch(), learning_rate=0.1)
    assert_hand_derived_step(ex.result)
    ex.close()


@pytest.mark.jax_promotion(rank="batched_loss adds a bias of shape (1,) to (2, 1) predictions")
def test_a_user_who_asks_for_raise_gets_it_where_jax_would_allow():
    assert_hand_derived_step(TrainingStep(batched_loss).step(batched_start(), None, batch(), 0.1))
    with jax.numpy_rank_promotion("raise"), pytest.raises(ValueError, match=RANK_ERROR):
        TrainingStep(batched_loss).step(batched_start(), None, batch(), 0.1)


def test_the_users_optimizer_runs_under_the_users_dtype_setting():
    params, inputs = lesson.lesson_params(), lesson.lesson_inputs()
    ts = TrainingStep(lesson.lesson_loss, optax.adam(0.1))
    # strict: optax's adam raises a float to its int32 step count, which JAX refuses; the library
    # blames the optimizer
    with pytest.raises(OptimizerError, match=DTYPE_ERROR):
        ts.step(params, ts.init(params), inputs)
    # where the user asks for JAX's standard promotion, adam's first step moves every parameter by
    # the learning rate against its gradient's sign (grads [-8, -4] and -4: all negative), up to
    # eps and float32 rounding; exactly what optax called directly gives
    with jax.numpy_dtype_promotion("standard"):
        r = TrainingStep(lesson.lesson_loss, optax.adam(0.1)).step(params, ts.init(params), inputs)
        opt = optax.adam(0.1)
        grads = jax.grad(lesson.lesson_loss)(params, **inputs)
        want = optax.apply_updates(params, opt.update(grads, opt.init(params), params)[0])
    np.testing.assert_allclose(np.asarray(r.updated["weight"]), [1.1, -0.9], rtol=1e-5)
    assert float(r.updated["bias"]) == pytest.approx(0.1, rel=1e-5)
    for key in ("weight", "bias"):
        np.testing.assert_allclose(np.asarray(r.updated[key]), np.asarray(want[key]), rtol=1e-6, atol=1e-7)
