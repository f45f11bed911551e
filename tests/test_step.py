"""`gradient_step` and the compiled step: the lesson's hand-derived numbers, and JAX itself."""

from __future__ import annotations

import dataclasses
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from pytree_lab import gradient_step
from pytree_lab.step import pin_dtypes
from pytree_lab.training import CompiledStep

X = jnp.array([2.0, 1.0])


def lesson_params():
    return {"weight": jnp.array([1.0, -1.0]), "bias": jnp.array(0.0)}


def loss(p):
    prediction = jnp.dot(p["weight"], X) + p["bias"]
    return (prediction - 3.0) ** 2


def test_lesson_step_reproduces_the_hand_derivation():
    r = gradient_step(loss, lesson_params(), learning_rate=0.05)
    # prediction 1, residual -2: loss 4; dL/dprediction -4 times x = [-8, -4]; bias -4
    assert r.loss == 4.0
    np.testing.assert_allclose(r.grads["weight"], [-8.0, -4.0])
    np.testing.assert_allclose(r.grads["bias"], -4.0)
    np.testing.assert_allclose(r.updated["weight"], [1.4, -0.8], rtol=1e-6)
    np.testing.assert_allclose(r.updated["bias"], 0.2, rtol=1e-6)
    assert r.loss_after == pytest.approx(0.64, abs=1e-6)
    # the seed's recorded float32 run prints this exact value
    assert r.loss_after == 0.6399999260902405
    assert r.grads.keys() == r.params.keys()


def test_nested_model_scale_derivative():
    nested = {"layer": lesson_params(), "scale": jnp.array(1.0)}

    def nested_loss(p):
        pred = p["scale"] * (jnp.dot(p["layer"]["weight"], X) + p["layer"]["bias"])
        return (pred - 3.0) ** 2

    r = gradient_step(nested_loss, nested)
    assert jax.tree.structure(r.grads) == jax.tree.structure(nested)
    np.testing.assert_allclose(r.grads["scale"], -4.0)  # residual -2 times 2 times prediction 1
    np.testing.assert_allclose(r.grads["layer"]["weight"], [-8.0, -4.0])


def test_extra_arguments_reach_the_loss():
    def loss_xy(p, x, target=3.0):
        return (jnp.dot(p["weight"], x) + p["bias"] - target) ** 2

    r = gradient_step(loss_xy, lesson_params(), X, target=jnp.array(3.0), learning_rate=0.05)
    assert r.loss == 4.0 and r.loss_after == pytest.approx(0.64, abs=1e-6)


@jax.tree_util.register_dataclass
@dataclasses.dataclass
class Dense:
    w: jax.Array
    b: jax.Array


_shapes = st.lists(st.integers(1, 3), min_size=0, max_size=2).map(tuple)


@st.composite
def param_trees(draw):
    def arr():
        shape = draw(_shapes)
        vals = draw(st.lists(st.floats(-2, 2, width=32), min_size=int(np.prod(shape)), max_size=int(np.prod(shape))))
        return jnp.asarray(np.array(vals, np.float32).reshape(shape))

    kind = draw(st.sampled_from(["dict", "list", "tuple", "nested", "dataclass"]))
    if kind == "dict":
        return {k: arr() for k in draw(st.lists(st.sampled_from("abcdwxyz"), min_size=1, max_size=4, unique=True))}
    if kind == "list":
        return [arr() for _ in range(draw(st.integers(1, 3)))]
    if kind == "tuple":
        return tuple(arr() for _ in range(draw(st.integers(1, 3))))
    if kind == "dataclass":
        return Dense(arr(), arr())
    return {"layer": [arr(), {"w": arr()}], "scale": arr()}


@settings(max_examples=60, deadline=None)
@given(param_trees(), st.floats(0.001, 0.5), st.integers(0, 2))
def test_gradient_step_is_value_and_grad_then_tree_map(params, lr, which):
    losses = [
        lambda p: sum(jnp.sum(jnp.sin(x) * x) for x in jax.tree.leaves(p)),
        lambda p: sum(jnp.sum((x - 0.5) ** 2) for x in jax.tree.leaves(p)),
        lambda p: jnp.tanh(sum(jnp.sum(x) for x in jax.tree.leaves(p))),
    ]
    f = losses[which]
    r = gradient_step(f, params, learning_rate=lr)
    value, grads = jax.value_and_grad(f)(params)
    updated = jax.tree.map(lambda p, g: p - lr * g, params, grads)
    assert jax.tree.structure(r.grads) == jax.tree.structure(params)
    assert r.loss == pytest.approx(float(value), rel=1e-6, abs=1e-6)
    for a, b in zip(jax.tree.leaves(r.updated), jax.tree.leaves(updated)):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-6)
    assert r.loss_after == pytest.approx(float(f(updated)), rel=1e-5, abs=1e-6)


def test_compiled_step_matches_and_never_retraces_for_new_values():
    def loss_in(p, x, target):
        return (jnp.dot(p["weight"], x) + p["bias"] - target) ** 2

    step = CompiledStep(loss_in)
    params = pin_dtypes({"weight": [1.0, -1.0], "bias": 0.0})
    params = {"weight": np.asarray(params["weight"], np.float32), "bias": params["bias"]}
    inputs = pin_dtypes({"x": np.array([2.0, 1.0]), "target": 3.0})
    r = step(params, inputs, 0.05)
    assert r.loss == 4.0 and r.loss_after == pytest.approx(0.64, abs=1e-6)
    rng = np.random.default_rng(0)
    for _ in range(20):
        x = rng.normal(size=2).astype(np.float32)
        t = np.float32(rng.normal())
        lr = float(rng.uniform(0, 0.3))
        r = step(params, {"x": x, "target": t}, lr)
        oracle = gradient_step(
            lambda p: loss_in(p, jnp.asarray(x), jnp.asarray(t)), params, learning_rate=np.float32(lr)
        )
        assert r.loss == pytest.approx(oracle.loss, rel=1e-5, abs=1e-6)
        np.testing.assert_allclose(r.updated["weight"], oracle.updated["weight"], rtol=1e-5, atol=1e-6)
    assert step.traces == 1


def test_pin_dtypes_gives_float32_for_python_floats():
    pinned = pin_dtypes({"a": 1.0, "b": [2, True], "c": np.zeros(2)})
    assert pinned["a"].dtype == np.float32
    assert pinned["b"][0].dtype == np.int32
    assert pinned["b"][1].dtype == np.bool_
    assert pinned["c"].dtype == np.float32  # float64 numpy would be float32 in JAX too


def test_a_compile_gives_the_memory_the_compiler_freed_back():
    """After XLA compiles a step, the heap memory the compiler freed goes back to the operating
    system (glibc's malloc_trim; about 25 MB per explorer in a lesson kernel)."""
    import sys
    import time

    import jax.numpy as jnp

    from pytree_lab import step as step_module

    before = step_module.TRIMS

    def loss(p, x):  # a new function: a new compile
        return jnp.sum((p["w"] * x) ** 2)

    compiled = CompiledStep(loss)
    result = compiled({"w": jnp.array([1.0, 2.0])}, {"x": jnp.array([3.0, 4.0])}, 0.1)
    # w * x = [3, 8]: loss 9 + 64, gradient 2 (w x) x = [18, 64]
    assert float(result.loss) == 73.0
    assert [float(g) for g in result.grads["w"]] == [18.0, 64.0]
    if sys.platform.startswith("linux"):
        deadline = time.monotonic() + 120  # a background compile may still be running
        while step_module.TRIMS == before and time.monotonic() < deadline:
            time.sleep(0.05)
        assert step_module.TRIMS > before
    else:
        assert step_module.return_freed_memory() is False


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc_trim")
def test_a_run_that_compiled_gives_the_freed_memory_back_and_a_second_run_does_not():
    """`run(n)` compiles its loop once per shapes: the trim follows that compile (about 6 MB of
    an Adam explorer's step(3) in a lesson kernel), not every run."""
    import jax.numpy as jnp
    import optax

    from pytree_lab import step as step_module
    from pytree_lab.training import TrainingStep

    train = TrainingStep(lambda p, x: jnp.sum((p["w"] * x) ** 2), optax.sgd(0.1))
    params, inputs = {"w": jnp.array([1.0, 2.0])}, {"x": jnp.array([3.0, 4.0])}
    state = optax.sgd(0.1).init(params)
    before = step_module.TRIMS
    first = train.run(params, state, inputs, n=2)
    assert step_module.TRIMS == before + 1
    second = train.run(params, state, inputs, n=2)
    assert step_module.TRIMS == before + 1
    # w x = [3, 8], gradient 2 (w x) x = [18, 64]: w -> [-0.8, -4.4]; then w x = [-2.4, -17.6],
    # gradient [-14.4, -140.8]: w -> [0.64, 9.68]
    np.testing.assert_allclose(np.asarray(first.params["w"]), [0.64, 9.68], rtol=1e-6)
    np.testing.assert_array_equal(np.asarray(second.params["w"]), np.asarray(first.params["w"]))
