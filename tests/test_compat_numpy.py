"""`pytree_lab_lite.jax.numpy` against `jax.numpy`: JAX's dtypes and the lessons' functions.

Python floats become float32 and ints int32 (64-bit types are off in JAX by default); reductions
and mixed-kind functions give JAX's dtypes; the operators the lessons use work on the arrays.
"""

from __future__ import annotations

import jax.numpy as real_jnp
import numpy as np
import pytest

from pytree_lab_lite.jax import numpy as lite_jnp

# the Lite engine is compared with JAX on the host's CPU (numpy's arithmetic; docs/backends.md)
pytestmark = pytest.mark.usefixtures("cpu_reference")

f32 = np.array([1.5, -2.0, 0.25], np.float32)
i32 = np.array([1, 2, 3], np.int32)
m32 = np.array([[1.0, 2.0], [3.0, -1.0]], np.float32)

EXPRESSIONS = {
    "python float": lambda jnp: jnp.array(1.5),
    "python int": lambda jnp: jnp.array(3),
    "python bool": lambda jnp: jnp.array(True),
    "python complex": lambda jnp: jnp.array(1 + 2j),
    "list of floats": lambda jnp: jnp.array([1.0, -1.0]),
    "mixed list": lambda jnp: jnp.array([1, 2.5]),
    "nested list": lambda jnp: jnp.array([[1, 2], [3, 4]]),
    "float64 numpy": lambda jnp: jnp.array(np.linspace(0, 1, 4)),
    "int64 numpy": lambda jnp: jnp.asarray(np.arange(4)),
    "float16 numpy": lambda jnp: jnp.asarray(np.ones(2, np.float16)),
    "explicit dtype": lambda jnp: jnp.array([1, 2], dtype=jnp.float32),
    "scalar type call": lambda jnp: jnp.float32(2.5),
    "int32 call": lambda jnp: jnp.int32(7),
    "zeros": lambda jnp: jnp.zeros((2, 3)),
    "ones int": lambda jnp: jnp.ones(3, dtype=jnp.int32),
    "zeros_like": lambda jnp: jnp.zeros_like(i32),
    "ones_like float": lambda jnp: jnp.ones_like(f32),
    "full": lambda jnp: jnp.full((2,), 0.5),
    "arange int": lambda jnp: jnp.arange(5),
    "arange float": lambda jnp: jnp.arange(0.0, 1.0, 0.25),
    "linspace": lambda jnp: jnp.linspace(0.0, 1.0, 5),
    "eye": lambda jnp: jnp.eye(2),
    "dot": lambda jnp: jnp.dot(f32, f32),
    "dot mixed": lambda jnp: jnp.dot(f32, i32),
    "matmul operator": lambda jnp: jnp.asarray(m32) @ jnp.asarray(m32[0]),
    "sum": lambda jnp: jnp.sum(f32),
    "sum int32": lambda jnp: jnp.sum(i32),
    "mean int32": lambda jnp: jnp.mean(i32),
    "sum axis keepdims": lambda jnp: jnp.sum(m32, axis=0, keepdims=True),
    "mean method": lambda jnp: jnp.asarray(m32).mean(axis=1),
    "sqrt python float": lambda jnp: jnp.sqrt(2.0),
    "exp": lambda jnp: jnp.exp(f32),
    "log": lambda jnp: jnp.log(jnp.abs(f32)),
    "where": lambda jnp: jnp.where(f32 > 0, f32, 0.0),
    "maximum": lambda jnp: jnp.maximum(f32, 0.0),
    "minimum": lambda jnp: jnp.minimum(f32, i32),
    "square": lambda jnp: jnp.square(f32),
    "tanh": lambda jnp: jnp.tanh(f32),
    "update with weak scalar": lambda jnp: jnp.asarray(f32) - 0.05 * jnp.asarray(f32),
    "power": lambda jnp: (jnp.asarray(f32) - 3.0) ** 2,
    "concatenate": lambda jnp: jnp.concatenate([f32, jnp.array([9.0])]),
    "stack": lambda jnp: jnp.stack([f32, f32]),
    "reshape": lambda jnp: jnp.reshape(m32, (4,)),
    "transpose": lambda jnp: jnp.transpose(m32),
    "norm": lambda jnp: jnp.linalg.norm(f32),
    "allclose": lambda jnp: jnp.allclose(f32, f32 + 1e-7),
    "allclose scalar": lambda jnp: jnp.allclose(jnp.array(0.6399999), 0.64, atol=1e-6),
    "array_equal": lambda jnp: jnp.array_equal(f32, f32.copy()),
    "array_equal differs": lambda jnp: jnp.array_equal(f32, i32),
    "isclose": lambda jnp: jnp.isclose(f32, 1.5),
}
# JAX's standard promotion of int32 with float32 is the result the Lite engine follows: JAX computes
# these references with it (strict promotion refuses them).
jax_mixes_dtypes = pytest.mark.jax_promotion(dtype="the reference is JAX's standard int32 + float32 promotion")
MIXED = {"dot mixed", "minimum", "array_equal differs"}


@pytest.mark.parametrize(
    "name", [pytest.param(name, marks=jax_mixes_dtypes) if name in MIXED else name for name in sorted(EXPRESSIONS)]
)
def test_same_dtype_shape_and_values_as_jax(name):
    real = np.asarray(EXPRESSIONS[name](real_jnp))
    lite = EXPRESSIONS[name](lite_jnp)
    assert np.asarray(lite).dtype == real.dtype
    assert np.shape(lite) == real.shape
    if real.dtype == bool:
        np.testing.assert_array_equal(np.asarray(lite), real)
    else:
        np.testing.assert_allclose(np.asarray(lite), real, rtol=1e-6, atol=1e-7)


def test_scalar_types_work_as_dtypes():
    x = lite_jnp.ones(2)
    assert x.dtype == lite_jnp.float32 and lite_jnp.float32 == x.dtype
    assert np.dtype(lite_jnp.float32) == np.float32
    assert lite_jnp.zeros(1, dtype=lite_jnp.int32).dtype == np.int32
    assert lite_jnp.issubdtype(x.dtype, lite_jnp.floating)
    assert lite_jnp.float32 != lite_jnp.int32


def test_float64_requests_fall_back_to_float32_like_default_jax():
    assert lite_jnp.zeros(2, dtype=lite_jnp.float64).dtype == np.float32
    assert lite_jnp.array([1.0], dtype=np.float64).dtype == np.float32
    assert lite_jnp.canonicalize_dtype(np.int64) == np.int32


@jax_mixes_dtypes
def test_result_type_follows_jax():
    cases = [(np.float32, np.int32), (np.int32, 1.0), (np.float16, 2.0), (np.int32, 1), (np.float16, np.float32)]
    for args in cases:
        args = [np.dtype(a) if isinstance(a, type) else a for a in args]
        assert lite_jnp.result_type(*args) == real_jnp.result_type(*args), args


def test_every_listed_function_exists_in_real_jax_numpy():
    # the Lite engine must not invent names: code written against it runs on real JAX
    from pytree_lab_lite.jax.numpy import _TRACED

    assert [n for n in _TRACED if not hasattr(real_jnp, n)] == []


TRACED = {
    "asarray of traced list": lambda jnp, x: jnp.sum(jnp.asarray([x[0], 2.0 * x[1]])),
    "array of traced list": lambda jnp, x: jnp.sum(jnp.array([x[0], 2.0 * x[1]]) ** 2),
    "scalar type call": lambda jnp, x: jnp.float32(x[0]) * 3.0,
    "stack": lambda jnp, x: jnp.sum(jnp.stack([x, x * x])),
    "indexing": lambda jnp, x: (x[0] - x[1]) ** 2,
    "mean method": lambda jnp, x: x.mean() * 2.0,
    "transpose and matmul": lambda jnp, x: jnp.sum(x.reshape(2, 1).T @ x.reshape(2, 1)),
    "norm": lambda jnp, x: jnp.linalg.norm(x),
    "where": lambda jnp, x: jnp.sum(jnp.where(x > 0, x**2, 0.0)),
    "builtin abs": lambda jnp, x: jnp.sum(abs(x)),
    "reciprocal": lambda jnp, x: jnp.sum(1.0 / (1.0 + x**2)),
    "zeros_like": lambda jnp, x: jnp.sum(x + jnp.zeros_like(x)),
    "astype": lambda jnp, x: jnp.sum(x.astype(jnp.float32) * x),
    "concatenate": lambda jnp, x: jnp.sum(jnp.concatenate([x, x[:1]]) ** 3),
    "dot with constant": lambda jnp, x: jnp.dot(jnp.array([2.0, 1.0]), x),
    "ravel": lambda jnp, x: jnp.sum(jnp.ravel(jnp.tanh(x))),
}


@pytest.mark.parametrize("name", sorted(TRACED))
def test_functions_inside_grad_match_jax(name):
    import jax as real_jax

    from pytree_lab_lite import jax as lite_jax

    x = np.array([1.0, -2.0], np.float32)
    real = real_jax.value_and_grad(lambda v: TRACED[name](real_jnp, v))(x)
    lite = lite_jax.value_and_grad(lambda v: TRACED[name](lite_jnp, v))(x)
    for r, lt in zip(real, lite):
        assert np.asarray(lt).dtype == np.asarray(r).dtype == np.float32
        np.testing.assert_allclose(np.asarray(lt), np.asarray(r), rtol=1e-6, atol=1e-7)


def test_array_isinstance_covers_numpy_scalars_and_traced_values():
    from pytree_lab_lite import jax as lite_jax

    bias = lite_jnp.array(0.0) - 0.05 * lite_jnp.array(-4.0)  # numpy arithmetic gives a numpy scalar
    assert isinstance(bias, lite_jax.Array) and isinstance(bias, lite_jnp.ndarray)
    assert not isinstance([1.0], lite_jax.Array) and not isinstance(1.0, lite_jax.Array)
    seen = []
    lite_jax.grad(lambda v: seen.append(isinstance(v, lite_jax.Array)) or lite_jnp.sum(v))(lite_jnp.ones(2))
    assert seen == [True]
