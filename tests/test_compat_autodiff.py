"""The Lite engine's `grad` / `value_and_grad` against real JAX.

Hypothesis builds parameter trees (dicts, lists, tuples, None, namedtuples, a registered
dataclass; float32 leaves of several shapes) and losses (sums of polynomial, trig, exp/log and
matrix terms over the leaves). Values and gradients must agree with JAX in float32, gradient
trees must have JAX's structure, paths and dtypes.
"""

from __future__ import annotations

import collections
import dataclasses
import os
import re

import jax as real_jax
import jax.numpy as real_jnp
import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings, strategies as st

from pytree_lab_lite import jax as lite_jax
from pytree_lab_lite.jax import numpy as lite_jnp

ENGINES = [(real_jax, real_jnp), (lite_jax, lite_jnp)]
# JAX's ravel_pytree joins leaves of several dtypes by its standard promotion (int32 and float32
# give float32): the result the Lite engine follows; strict promotion refuses it.
jax_mixes_dtypes = pytest.mark.jax_promotion(
    dtype="the reference is JAX's standard int32/float32 promotion (ravel_pytree of mixed leaves, int32 * 2.5)"
)

Moments = collections.namedtuple("Moments", "mu nu")


@dataclasses.dataclass
class Layer:
    weight: object
    bias: object
    activation: str = "tanh"


for tu in (real_jax.tree_util, lite_jax.tree_util):
    tu.register_dataclass(Layer, data_fields=["weight", "bias"], meta_fields=["activation"])

# ---- strategies

shapes = st.sampled_from([(), (1,), (2,), (3,), (2, 2), (1, 3), (3, 1)])
# No subnormal floats: XLA on CPU flushes them to zero (so leaky_relu(1e-45) takes the negative
# branch's slope there), numpy keeps them; a documented platform difference, not an engine bug.
values = st.floats(-2, 2, allow_nan=False, allow_subnormal=False, width=32)


@st.composite
def float_leaves(draw):
    shape = draw(shapes)
    n = int(np.prod(shape, dtype=int))
    return np.asarray(draw(st.lists(values, min_size=n, max_size=n)), dtype=np.float32).reshape(shape)


keys = st.sampled_from(["w", "b", "layer", "scale", "head"])


def containers(children):
    return st.one_of(
        st.dictionaries(keys, children, min_size=1, max_size=3),
        st.lists(children, min_size=1, max_size=3),
        st.lists(children, min_size=1, max_size=3).map(tuple),
        st.builds(Moments, children, children),
        st.builds(Layer, children, children, st.sampled_from(["tanh", "relu"])),
        st.dictionaries(keys, children, max_size=2).map(lambda d: {**d, "frozen": None}),
    )


param_trees = st.recursive(float_leaves(), containers, max_leaves=6).filter(
    lambda t: len(real_jax.tree_util.tree_leaves(t)) > 0
)

TERMS = ["square", "cube", "sin", "cos", "tanh", "exp", "log", "sqrt", "leaky", "mean", "dot", "outer", "max"]


def term(jnp, kind, x):
    if kind == "square":
        return jnp.sum(x**2)
    if kind == "cube":
        return jnp.sum(x * x * x)
    if kind == "sin":
        return jnp.sum(jnp.sin(x))
    if kind == "cos":
        return jnp.sum(jnp.cos(2.0 * x))
    if kind == "tanh":
        return jnp.sum(jnp.tanh(x))
    if kind == "exp":
        return jnp.sum(jnp.exp(0.5 * x))
    if kind == "log":
        return jnp.sum(jnp.log(1.0 + x**2))
    if kind == "sqrt":
        return jnp.sum(jnp.sqrt(x**2 + 1.0))
    if kind == "leaky":
        return jnp.sum(jnp.where(x > 0, x, 0.1 * x))
    if kind == "mean":
        return jnp.mean(x) * 3.0
    if kind == "dot":
        return jnp.dot(x.ravel(), x.ravel())
    if kind == "outer":
        return jnp.sum(x.reshape(-1, 1) @ x.reshape(1, -1))
    if kind == "max":
        return jnp.sum(jnp.maximum(x, 0.5) ** 2)
    raise AssertionError(kind)


losses = st.lists(
    st.tuples(
        st.sampled_from(TERMS), st.floats(-2, 2, allow_nan=False, allow_subnormal=False, width=32), st.integers(0, 50)
    ),
    min_size=1,
    max_size=5,
)
cross = st.one_of(st.none(), st.tuples(st.integers(0, 50), st.integers(0, 50)))


def make_loss(jax, jnp, spec, pair):
    def loss(params):
        leaves = jax.tree.leaves(params)
        total = 0.0
        for kind, coefficient, index in spec:
            total = total + coefficient * term(jnp, kind, leaves[index % len(leaves)])
        if pair is not None:
            a, b = leaves[pair[0] % len(leaves)], leaves[pair[1] % len(leaves)]
            total = total + jnp.sum(a) * jnp.sum(b)
        # a tree.map inside the traced function, as the lessons' updates do
        squares = jax.tree.map(lambda leaf: jnp.sum(leaf * leaf), params)
        return total + 0.01 * sum(jax.tree.leaves(squares))

    return loss


# PYTREE_LAB_COMPAT_EXAMPLES raises the number of examples for a longer search.
SETTINGS = settings(
    max_examples=int(os.environ.get("PYTREE_LAB_COMPAT_EXAMPLES", "60")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)


def assert_trees_close(real_tree, lite_tree, rtol=1e-6, atol=1e-6):
    r_flat, r_def = real_jax.tree_util.tree_flatten_with_path(real_tree)
    l_flat, l_def = lite_jax.tree_util.tree_flatten_with_path(lite_tree)
    assert repr(l_def) == repr(r_def)
    assert [lite_jax.tree_util.keystr(p) for p, _ in l_flat] == [real_jax.tree_util.keystr(p) for p, _ in r_flat]
    for (path, r), (_, lt) in zip(r_flat, l_flat):
        assert np.asarray(lt).dtype == np.asarray(r).dtype, path
        assert np.shape(lt) == np.shape(r), path
        np.testing.assert_allclose(np.asarray(lt, np.float64), np.asarray(r, np.float64), rtol=rtol, atol=atol)


@SETTINGS
@given(param_trees, losses, cross)
def test_value_and_grad_match_jax(params, spec, pair):
    real_value, real_grads = real_jax.value_and_grad(make_loss(real_jax, real_jnp, spec, pair))(params)
    lite_value, lite_grads = lite_jax.value_and_grad(make_loss(lite_jax, lite_jnp, spec, pair))(params)
    assert np.asarray(lite_value).dtype == np.asarray(real_value).dtype == np.float32
    np.testing.assert_allclose(float(lite_value), float(real_value), rtol=1e-6, atol=1e-6)
    assert_trees_close(real_grads, lite_grads)


@SETTINGS
@given(param_trees, losses, st.sampled_from([0.001, 0.01, 0.05, 0.1, 0.3]))
@example(
    params={"w": np.array([1.0, 0.65625, -1.5], np.float32)},
    spec=[("outer", 2.0, 0), ("outer", 1.4453125, 0)],
    learning_rate=0.05,
)  # cancellation
def test_gradient_step_matches_jax(params, spec, learning_rate):
    # the lesson's update: value_and_grad, then p - lr * g leaf by leaf, then the new loss
    results = []
    for jax, jnp in ENGINES:
        loss = make_loss(jax, jnp, spec, None)
        value, grads = jax.value_and_grad(loss)(params)
        updated = jax.tree.map(lambda p, g: p - learning_rate * g, params, grads)
        results.append((value, grads, updated, loss(updated)))
    (rv, rg, ru, rl), (lv, lg, lu, ll) = results
    np.testing.assert_allclose(float(lv), float(rv), rtol=1e-6, atol=1e-6)
    assert_trees_close(rg, lg)
    assert_trees_close(ru, lu)
    assert np.asarray(ll).dtype == np.float32
    # float32 rounding is relative to the terms summed, not to their sum: the new loss of
    # 2 * outer + 1.45 * outer at w = [1, 0.66, -1.5] is 0.037 out of terms near 30, and the
    # engines' last-bit differences in the updated params move it by 1.6e-6 (5e-8 of the terms)
    scale = float(
        make_loss(real_jax, real_jnp, [(k, abs(c), i) for k, c, i in spec], None)(real_jax.tree.map(np.abs, ru))
    )
    np.testing.assert_allclose(float(ll), float(rl), rtol=1e-6, atol=1e-6 * max(1.0, abs(scale)))


# ---- argnums, has_aux, errors, jit, ravel_pytree


def both(fn):
    """fn(jax, jnp) evaluated with each engine: (real result, lite result)."""
    return fn(real_jax, real_jnp), fn(lite_jax, lite_jnp)


@SETTINGS
@given(param_trees, float_leaves(), st.sampled_from([0, 1, 2, (0,), (1, 2), (0, 2), (2, 0, 1)]))
def test_argnums_match_jax(params, data, argnums):
    extra = {"shift": np.float32(0.5)}

    def run(jax, jnp):
        def loss(p, x, e):
            total = sum(jnp.sum(jnp.sin(leaf) * leaf) for leaf in jax.tree.leaves(p))
            return total * jnp.sum(x**2 + 1.0) + e["shift"] ** 2 * jnp.sum(x)

        return jax.value_and_grad(loss, argnums=argnums)(params, data, extra)

    (rv, rg), (lv, lg) = both(run)
    np.testing.assert_allclose(float(lv), float(rv), rtol=1e-6, atol=1e-6)
    assert_trees_close(rg, lg)


def test_has_aux_returns_aux_unchanged_in_structure():
    params = {"w": np.array([1.0, -1.0], np.float32), "b": np.float32(0.0)}

    def run(jax, jnp):
        def loss(p):
            pred = jnp.dot(p["w"], jnp.array([2.0, 1.0])) + p["b"]
            return (pred - 3.0) ** 2, {"pred": pred, "residual": pred - 3.0}

        (value, aux), grads = jax.value_and_grad(loss, has_aux=True)(params)
        grads_again, aux_again = jax.grad(loss, has_aux=True)(params)
        return value, aux, grads, grads_again, aux_again

    real, lite = both(run)
    for r, lt in zip(real, lite):
        assert_trees_close(r, lt)
    assert float(lite[1]["residual"]) == -2.0
    assert "Box" not in type(lite[1]["pred"]).__name__  # plain values, not traced boxes


def test_python_float_and_float64_inputs_give_float32_grads():
    def run(jax, jnp):
        return (
            jax.grad(lambda x: x**2)(1.5),
            jax.grad(lambda x: jnp.sum(x**2))(np.ones(2)),  # float64 numpy input
            jax.grad(lambda x: jnp.sum(x))(np.ones(3, np.float16)),
            jax.value_and_grad(lambda x, y: 3.0 * y)(np.ones(1, np.float32), 2.0),
        )

    real, lite = both(run)
    assert_trees_close(real, lite)
    assert [np.asarray(g).dtype for g in lite[:3]] == [np.float32, np.float32, np.float16]


def test_second_derivative():
    real, lite = both(lambda jax, jnp: jax.grad(jax.grad(lambda x: x**3 + jnp.sin(x)))(2.0))
    np.testing.assert_allclose(float(lite), float(real), rtol=1e-6)
    np.testing.assert_allclose(float(lite), 12.0 - np.sin(2.0), rtol=1e-6)


def test_stop_gradient_cuts_the_gradient_and_gives_a_value_float_can_read():
    # the Lite engine's message for float() on a traced value points to stop_gradient: it must work
    def loss(jax, jnp):
        return lambda x: x * float(jax.lax.stop_gradient(x)) + jax.lax.stop_gradient(x) * x**2

    real, lite = both(lambda jax, jnp: (jax.grad(loss(jax, jnp))(3.0), jax.grad(jax.grad(loss(jax, jnp)))(3.0)))
    np.testing.assert_allclose([float(v) for v in lite], [float(v) for v in real], rtol=1e-6)
    np.testing.assert_allclose([float(v) for v in lite], [3.0 + 2 * 3.0 * 3.0, 2 * 3.0], rtol=1e-6)


def test_none_and_empty_subtrees_have_matching_gradients():
    params = {"w": np.array([1.0, 2.0], np.float32), "frozen": None, "empty": {}, "list": []}

    real, lite = both(lambda jax, jnp: jax.grad(lambda p: jnp.sum(p["w"] ** 2))(params))
    assert_trees_close(real, lite)
    assert lite["frozen"] is None and lite["empty"] == {} and lite["list"] == []
    real, lite = both(lambda jax, jnp: jax.value_and_grad(lambda p: 2.5)({"nothing": None}))
    assert_trees_close(real, lite)


def error_of(call):
    try:
        call()
    except Exception as err:  # noqa: BLE001 - we compare exception types
        return type(err), str(err)
    return None, ""


@pytest.mark.parametrize(
    "case",
    [
        "int_input",
        "bool_input",
        "vector_output",
        "int_output",
        "string_leaf",
        "argnums_out_of_range",
        "tree_mismatch_in_update",
    ],
)
def test_errors_have_jax_types(case):
    def run(jax, jnp):
        calls = {
            "int_input": lambda: jax.grad(lambda x: x * 2.0)(3),
            "bool_input": lambda: jax.grad(lambda x: 1.0)(np.array(True)),
            "vector_output": lambda: jax.grad(lambda x: x * 2.0)(jnp.ones(2)),
            "int_output": lambda: jax.grad(lambda x: jnp.sum(x).astype(jnp.int32))(jnp.ones(2)),
            "string_leaf": lambda: jax.grad(lambda p: jnp.sum(p["w"]))({"w": jnp.ones(2), "name": "dense"}),
            "argnums_out_of_range": lambda: jax.grad(lambda x: x, argnums=2)(1.0),
            "tree_mismatch_in_update": lambda: jax.tree.map(
                lambda p, g: p - 0.1 * g, {"w": jnp.ones(2), "b": jnp.ones(())}, {"w": jnp.ones(2)}
            ),
        }
        return error_of(calls[case])

    (real_type, real_msg), (lite_type, lite_msg) = both(run)
    assert real_type is not None
    assert lite_type is real_type
    if case in ("int_input", "vector_output", "string_leaf", "argnums_out_of_range"):
        assert lite_msg == real_msg
    if case == "int_output":  # autograd refuses the int32 cast itself; JAX refuses the output
        assert "int32" in lite_msg


def test_jit_runs_the_function_and_accepts_jax_arguments():
    def run(jax, jnp):
        @jax.jit
        def double(x):
            return 2.0 * x

        def scaled(x, n):
            return x * n

        static = jax.jit(scaled, static_argnums=(1,))
        step = jax.jit(jax.value_and_grad(lambda p: jnp.sum(p**2)))
        return double(jnp.ones(2)), static(jnp.ones(2), 3), step(jnp.array([1.0, 2.0]))

    real, lite = both(run)
    assert_trees_close(real, lite)
    assert lite_jax.jit(scaled_doc := (lambda x: x)).__wrapped__ is scaled_doc


# JAX compiles unravel for every new tree shape (about a second each), so fewer examples here.
@settings(SETTINGS, max_examples=max(10, SETTINGS.max_examples // 4))
@given(param_trees)
def test_ravel_pytree_matches_jax(params):
    from jax.flatten_util import ravel_pytree as real_ravel

    from pytree_lab_lite.jax.flatten_util import ravel_pytree as lite_ravel

    r_flat, r_unravel = real_ravel(params)
    l_flat, l_unravel = lite_ravel(params)
    assert l_flat.dtype == r_flat.dtype and l_flat.shape == r_flat.shape
    np.testing.assert_array_equal(l_flat, np.asarray(r_flat))
    assert_trees_close(r_unravel(r_flat * 2.0), l_unravel(l_flat * 2.0))


def test_grad_through_unravel_matches_jax():
    # an optimiser over one flat vector, as in the packed-parameters lesson
    params = {"w": np.array([1.0, 2.0], np.float32), "b": np.array([0.5], np.float32), "m": np.eye(2, dtype=np.float32)}
    x = np.array([[1.0, -1.0]], np.float32)

    def run(jax, jnp):
        from importlib import import_module

        flat, unravel = import_module(jax.__name__ + ".flatten_util").ravel_pytree(params)

        def loss(v):
            p = unravel(v)
            return jnp.sum((x @ p["m"] @ p["w"] + p["b"]) ** 2) + jnp.sum(jnp.cos(v))

        return jax.value_and_grad(loss)(flat)

    real, lite = both(run)
    assert_trees_close(real, lite)


@jax_mixes_dtypes
def test_ravel_pytree_mixed_dtypes_and_empty():
    from jax.flatten_util import ravel_pytree as real_ravel

    from pytree_lab_lite.jax.flatten_util import ravel_pytree as lite_ravel

    tree = {"a": np.ones(2, np.float32), "b": np.arange(2, dtype=np.int32)}
    (r, r_un), (lt, l_un) = real_ravel(tree), lite_ravel(tree)
    assert lt.dtype == r.dtype == np.float32
    np.testing.assert_array_equal(lt, np.asarray(r))
    assert_trees_close(r_un(r), l_un(lt))
    (r, _), (lt, l_un) = real_ravel({}), lite_ravel({})
    assert lt.shape == r.shape == (0,) and lt.dtype == r.dtype
    assert l_un(lt) == {}


def test_config_reports_32_bit_mode():
    assert lite_jax.config.jax_enable_x64 is False is bool(real_jax.config.jax_enable_x64)
    lite_jax.config.update("jax_enable_x64", False)
    with pytest.raises(NotImplementedError, match="32-bit"):
        lite_jax.config.update("jax_enable_x64", True)
    assert lite_jax.config.jax_enable_x64 is False


# ---------------------------------------------------------------- student mistakes, as JAX says them


@pytest.mark.parametrize("jax, jnp", ENGINES, ids=["jax", "lite"])
@pytest.mark.parametrize(
    "returns, shown", [(lambda w: None, "None"), (lambda w: ((w**2).sum(), w), "(")]
)  # forgot has_aux
def test_a_loss_that_returns_no_number_is_told_as_jax_tells_it(jax, jnp, returns, shown):
    with pytest.raises(
        TypeError, match=r"^Gradient only defined for scalar-output functions\. Output was " + re.escape(shown)
    ):
        jax.grad(returns)(jnp.array([1.0, 2.0]))


@pytest.mark.parametrize("jax, jnp", ENGINES, ids=["jax", "lite"])
def test_a_loss_from_numpy_data_comes_back_float32(jax, jnp):
    x = np.array([1.0, 2.0, 3.0])  # float64 data, a method call on it (not jnp.mean)
    value, grad = jax.value_and_grad(lambda w: ((x * w) ** 2).mean())(jnp.float32(0.5))
    assert np.asarray(value).dtype == np.float32 and np.asarray(grad).dtype == np.float32
    assert float(value) == pytest.approx(0.25 * 14 / 3, rel=1e-6) and float(grad) == pytest.approx(14 / 3, rel=1e-6)


@pytest.mark.parametrize(
    "jax, jnp", [pytest.param(*ENGINES[0], marks=jax_mixes_dtypes), ENGINES[1]], ids=["jax", "lite"]
)
def test_unravel_casts_back_only_when_the_leaves_had_several_dtypes(jax, jnp):
    from importlib import import_module

    ravel_pytree = import_module(jax.__name__ + ".flatten_util").ravel_pytree
    flat, unravel = ravel_pytree([jnp.array([1, 2], dtype=jnp.int32)])
    assert [float(v) for v in unravel(flat * 2.5)[0]] == [2.5, 5.0]  # one dtype: nothing truncated
    flat, unravel = ravel_pytree({"a": jnp.array([1], dtype=jnp.int32), "b": jnp.array([0.5])})
    assert str(flat.dtype) == "float32"
    back = unravel(flat)
    assert str(back["a"].dtype) == "int32" and str(back["b"].dtype) == "float32"
    with pytest.raises(TypeError, match="unravel function given array of dtype int32, but expected dtype float32"):
        unravel(jnp.array([1, 2], dtype=jnp.int32))


@pytest.mark.parametrize(("value", "error"), [("a", ValueError), (object(), TypeError)])
def test_an_update_with_values_that_are_not_numbers_raises_numpys_error_and_warns_nothing(value, error):
    """The scatter warning only looks at numbers: a string is a value (not a dtype's name, so no
    NumPy deprecation warning), and what cannot be stored raises as the update always did."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(error):
            lite_jnp.array([1.0, 2.0]).at[0].set(value)
        assert np.array_equal(lite_jnp.array([1, 2]).at[0].set(3), [3, 2])  # int into int: silent
