"""`set_inputs` with a new batch (issue 22 §4): another number of examples (mini-batches), int64
labels for an explorer holding int32 ones, and what is still refused, with the path named.

Oracles: jax.value_and_grad called directly on the new batch, a hand-written optax loop, and
JAX's own trace counts (a new shape compiles once, an old one never again)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from test_explorer_training import assert_trees_close  # the training tests' comparison, same tolerances

from pytree_lab import StepExplorer

# XOR twice over, the second copy a little noisy: 8 examples (a 1-D input of 4 values or fewer
# would get sliders, and an input with sliders keeps its shape)
X = np.array([[0, 0], [0, 1], [1, 0], [1, 1], [0.1, 0], [0, 0.9], [0.9, 0.1], [1, 0.9]], np.float32)
Y = np.array([0, 1, 1, 0, 0, 1, 1, 0], np.float32)
LABELS = Y.astype(np.int32)
LR = 0.05


def mlp_params():
    rng = np.random.default_rng(1)
    return {
        "Dense_0": {"kernel": rng.normal(size=(2, 8)).astype(np.float32), "bias": np.zeros(8, np.float32)},
        "Dense_1": {"kernel": rng.normal(size=(8, 2)).astype(np.float32), "bias": np.zeros(2, np.float32)},
    }


def logits(p, x):
    h = jnp.tanh(x @ p["Dense_0"]["kernel"] + p["Dense_0"]["bias"])
    return h @ p["Dense_1"]["kernel"] + p["Dense_1"]["bias"]


def mse(p, x, y):
    return jnp.mean((logits(p, x)[:, 0] - y) ** 2)


def xent(p, x, labels):
    return optax.softmax_cross_entropy_with_integer_labels(logits(p, x), labels).mean()


# The instructor's MLP broadcasts as written and the explorer here runs optax's adam: the tests
# that step it do so under JAX's defaults for both.
mlp_and_adam = pytest.mark.jax_promotion(
    rank="logits adds each layer's bias to the batch: x @ kernel + bias",
    dtype="optax's adam raises a float to its int32 step count (bias correction)",
)


def explorer(loss=mse, inputs=None, **kw):
    return StepExplorer(
        loss, mlp_params(), inputs or {"x": X, "y": Y}, optimizer=lambda lr: optax.adam(lr), learning_rate=LR, **kw
    )


# ------------------------------------------------------------------ another batch size
@mlp_and_adam
def test_a_mini_batch_of_another_size_compiles_once_and_gives_jax_numbers():
    ex = explorer()
    step = ex.session.slider_step
    traced = step.traces["step"]
    half = {"x": X[1:3].copy(), "y": Y[1:3].copy()}  # 2 of the 8
    r = ex.set_inputs(half)
    assert r is not None and r is ex.result
    value, grads = jax.value_and_grad(mse)(mlp_params(), half["x"], half["y"])
    assert r.loss == pytest.approx(float(value), rel=1e-6)
    assert_trees_close(r.grads, grads)
    assert step.traces["step"] == traced + 1  # compiled once for the new shape
    assert "New batch shape" in ex.status.value and "(2, 2) (was (8, 2))" in ex.status.value
    assert "compiles once" in ex.status.value and 'role="status"' in ex.status.value
    # a slider move on the new batch: no compile
    ex.sliders[next(iter(ex.sliders))].value = 0.3
    assert step.traces["step"] == traced + 1
    # back to the full batch: compiled before, nothing compiles, and it says so
    r = ex.set_inputs({"x": X, "y": Y})
    assert step.traces["step"] == traced + 1
    assert "compiled before" in ex.status.value
    p = ex.params
    value, grads = jax.value_and_grad(mse)(p, X, Y)
    assert r.loss == pytest.approx(float(value), rel=1e-6)
    assert_trees_close(r.grads, grads)
    # the data list shows the batch held
    ex.set_inputs(half)
    assert ("inputs['x']", "float32[2,2]") in [row[:2] for row in ex.views["DataView"].rows]


@mlp_and_adam
def test_steps_on_alternating_mini_batches_equal_an_optax_loop():
    ex = explorer()
    batches = [(X[:4], Y[:4]), (X[4:], Y[4:]), (X[1:7], Y[1:7])]
    opt = optax.adam(LR)
    params = mlp_params()
    state = opt.init(params)
    want = [float(mse(params, X, Y))]
    for x, y in batches:
        assert ex.set_inputs({"x": x, "y": y}) is not None
        ex.step(2)
        for _ in range(2):
            _, grads = jax.value_and_grad(mse)(params, x, y)
            updates, state = opt.update(grads, state, params)
            params = optax.apply_updates(params, updates)
        want.append(float(mse(params, x, y)))
    assert_trees_close(ex.params, params)
    assert ex.result.loss == pytest.approx(want[-1], rel=1e-5)
    assert len(ex.history) == 7  # the batch swaps moved the current point; 6 steps were taken


@mlp_and_adam
def test_the_caller_arrays_are_never_changed_or_held():
    ex = explorer()
    x = X[:3].copy()
    ex.set_inputs({"x": x, "y": Y[:3].copy()})
    x[0, 0] = 99.0  # the caller changes their array afterwards
    ex.recompute()
    assert float(np.asarray(ex.session.input_leaves[0])[0, 0]) == 0.0


# ------------------------------------------------------------------ integer labels
@mlp_and_adam
def test_int64_labels_are_cast_to_the_held_int32_when_every_value_fits():
    ex = explorer(xent, {"x": X, "labels": LABELS})
    new = (1 - LABELS).astype(np.int64)
    r = ex.set_inputs({"x": X, "labels": new})
    assert r is not None
    held = ex.session.input_leaves[0]  # sorted keys: labels, x
    assert held.dtype == np.int32 and np.asarray(held).tolist() == (1 - LABELS).tolist()
    assert new.dtype == np.int64 and new.tolist() == (1 - LABELS).tolist()  # the caller's array: unchanged
    assert "int64 labels taken as int32" in ex.status.value and "inputs[&#x27;labels&#x27;]" in ex.status.value
    value, grads = jax.value_and_grad(xent)(mlp_params(), X, new.astype(np.int32))
    assert r.loss == pytest.approx(float(value), rel=1e-6)
    assert_trees_close(r.grads, grads)
    # and a mini-batch of int64 labels at once
    r = ex.set_inputs({"x": X[:3], "labels": np.array([0, 1, 1], np.int64)})
    assert r is not None and ex.session.input_leaves[0].dtype == np.int32


@mlp_and_adam
def test_labels_that_do_not_fit_are_refused_with_the_path():
    ex = explorer(xent, {"x": X, "labels": LABELS})
    good = ex.result
    r = ex.set_inputs({"x": X, "labels": np.where(LABELS == 1, 2**40, 0).astype(np.int64)})
    assert r is None and ex.result is good
    assert "inputs[&#x27;labels&#x27;]" in ex.status.value and "do not fit" in ex.status.value
    assert str(2**40) in ex.status.value
    ex.set_inputs({"x": X, "labels": LABELS.astype(np.uint8)})  # unsigned, fits: taken
    assert ex.session.input_leaves[0].dtype == np.int32 and ex.result is not good


@pytest.mark.parametrize(
    "change, words",
    [
        ({"labels": Y}, ["inputs[&#x27;labels&#x27;]", "float32", "int"]),
        ({"x": X.astype(np.int32)}, ["inputs[&#x27;x&#x27;]", "int32", "float"]),
        ({"x": np.zeros((8, 3), np.float32)}, ["inputs[&#x27;x&#x27;]", "(8, 3)", "only the first dimension"]),
        ({"x": np.zeros((8, 2, 1), np.float32)}, ["inputs[&#x27;x&#x27;]", "(8, 2, 1)"]),
        ({"labels": LABELS[None, :]}, ["inputs[&#x27;labels&#x27;]", "(1, 8)"]),
    ],
)
@mlp_and_adam
def test_other_kinds_and_trailing_shapes_are_refused_with_the_path(change, words):
    ex = explorer(xent, {"x": X, "labels": LABELS})
    good = ex.result
    r = ex.set_inputs({"x": X, "labels": LABELS, **change})
    assert r is None and ex.result is good
    for word in words:
        assert word in ex.status.value


@mlp_and_adam
def test_a_missing_key_is_still_said_as_before():
    ex = explorer()
    assert ex.set_inputs({"x": X}) is None
    assert "y" in ex.status.value and "build a new StepExplorer" in ex.status.value


def test_an_input_with_sliders_keeps_its_shape():
    def loss(p, x, target):
        return (jnp.dot(p["w"], x) - target) ** 2

    ex = StepExplorer(
        loss,
        {"w": np.array([1.0, -1.0], np.float32)},
        {"x": np.array([2.0, 1.0], np.float32), "target": np.float32(3.0)},
    )
    assert "x[0]" in ex.sliders
    r = ex.set_inputs({"x": np.array([2.0, 1.0, 0.5], np.float32), "target": np.float32(3.0)})
    assert r is None and "with sliders" in ex.status.value and "inputs[&#x27;x&#x27;] has shape (2,)" in ex.status.value
