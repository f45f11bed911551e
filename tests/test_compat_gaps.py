"""Where the Lite engine used to differ from JAX, against real JAX (on the CPU): operators' dtypes,
broadcasting's exception class, reads past the end (JAX clamps), the names students reach for
(`jax.nn.elu`, `leaky_relu`, `initializers`, `random.categorical`, `lax.while_loop`, `lax.map`,
`jacrev`, `jacfwd`, `hessian`), what a missing name says, and the messages about traced values."""

from __future__ import annotations

import operator

import jax as real_jax
import jax.numpy as real_jnp
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from pytree_lab_lite import jax as lite_jax
from pytree_lab_lite.jax import numpy as lite_jnp

ENGINES = [(real_jax, real_jnp), (lite_jax, lite_jnp)]
pytestmark = pytest.mark.usefixtures("cpu_reference")  # a TPU's pow and exp are not the CPU's to 1e-6
standard_promotion = pytest.mark.jax_promotion(
    dtype="the reference is JAX's standard promotion of an int or bool array with a Python scalar"
)

OPERATORS = {"+": operator.add, "-": operator.sub, "*": operator.mul, "/": operator.truediv, "**": operator.pow}
ARRAYS = {
    "int32": [1, 2, 3],
    "float32": [0.5, -1.5, 2.0],
    "bool": [True, False, True],
}
SCALARS = [2, 0.5, True, -3]


@standard_promotion
@settings(max_examples=60, deadline=None)
@given(
    kind=st.sampled_from(sorted(ARRAYS)),
    op=st.sampled_from(sorted(OPERATORS)),
    scalar=st.sampled_from(SCALARS),
    scalar_first=st.booleans(),
)
def test_operators_with_python_scalars_give_jaxs_dtype_and_values(kind, op, scalar, scalar_first):
    if kind == "bool" and op in ("-", "**") and isinstance(scalar, bool):
        return  # numpy and JAX both refuse boolean subtract; bool ** bool is not a lesson's
    if kind != "float32" and op == "**" and scalar == -3 and not scalar_first:
        return  # an integer to a negative integer power: numpy refuses, JAX gives 0 (left as is)
    results = []
    for _, jnp in ENGINES:
        x = jnp.array(ARRAYS[kind])
        a, b = (scalar, x) if scalar_first else (x, scalar)
        try:
            results.append(OPERATORS[op](a, b))
        except Exception as err:  # noqa: BLE001 - both engines must refuse alike
            results.append(type(err))
    real, lite = results
    if isinstance(real, type):
        assert isinstance(lite, type) and issubclass(lite, (TypeError, ValueError)), (real, lite)
        return
    assert np.asarray(lite).dtype == np.asarray(real).dtype
    np.testing.assert_allclose(np.asarray(lite), np.asarray(real), rtol=1e-6)


@standard_promotion
def test_the_issues_cases_and_zero_d_results():
    # hand-derived: [1, 2] / 2 = [0.5, 1.0] in float32, as JAX gives it
    half = lite_jnp.array([1, 2]) / 2
    assert half.dtype == np.float32 and half.tolist() == [0.5, 1.0]
    assert (lite_jnp.array([1, 2]) * 0.5).dtype == np.float32
    assert (lite_jnp.array([True, False]) + 1).dtype == np.int32
    total = lite_jnp.sum(lite_jnp.array([1, 2, 4]))
    assert np.shape(total) == () and total.dtype == np.int32
    assert (total / 2).dtype == (real_jnp.sum(real_jnp.array([1, 2, 4])) / 2).dtype == np.float32
    assert float(total / 2) == 3.5
    assert isinstance(total * 0.5, lite_jax.Array)
    mixed = lite_jnp.array([1, 2]) + lite_jnp.array([0.5, 0.25])  # int32 + float32: float32 in JAX
    assert mixed.dtype == (real_jnp.array([1, 2]) + real_jnp.array([0.5, 0.25])).dtype == np.float32


@pytest.mark.parametrize("jax, jnp", ENGINES, ids=["jax", "lite"])
def test_shapes_that_do_not_broadcast_raise_typeerror(jax, jnp):
    with pytest.raises(TypeError, match=r"add got incompatible shapes for broadcasting: \(3,\), \(2,\)"):
        jnp.ones(3) + jnp.ones(2)
    with pytest.raises(TypeError, match="incompatible shapes"):
        jax.grad(lambda x: jnp.sum(x * jnp.ones(2)))(jnp.ones(3))


READS = {
    "past the end": lambda x, m: x[5],
    "far negative": lambda x, m: x[-7],
    "index array": lambda x, m: x[np.array([0, 9, -1, -9])],
    "row and column": lambda x, m: m[1, 5],
    "ellipsis": lambda x, m: m[..., 7],
    "in range": lambda x, m: x[1],
    "slice": lambda x, m: x[1:10],
}


@pytest.mark.parametrize("name", sorted(READS))
def test_reads_past_the_end_clamp_as_in_jax(name):
    out = []
    for _, jnp in ENGINES:
        x = jnp.array([10.0, 20.0, 30.0])
        m = jnp.array([[1, 2, 3], [4, 5, 6]])
        out.append(np.asarray(READS[name](x, m)))
    real, lite = out
    assert lite.dtype == real.dtype and lite.shape == real.shape
    np.testing.assert_array_equal(lite, real)


@pytest.mark.parametrize("jax, jnp", ENGINES, ids=["jax", "lite"])
def test_iteration_ends_although_reads_clamp(jax, jnp):
    first, second = jnp.array([[1.0, 2.0], [3.0, 4.0]])
    assert np.asarray(first).tolist() == [1.0, 2.0]
    assert np.asarray(second).tolist() == [3.0, 4.0] and len(list(jnp.arange(3))) == 3
    # a Python loop over the rows inside grad: sum_rows (row . x)^2 at x = [1, 1]: the rows give 3 and 7,
    # so the gradient is 2*3*[1, 2] + 2*7*[3, 4] = [48, 68]
    m = jnp.array([[1.0, 2.0], [3.0, 4.0]])
    g = jax.grad(lambda x: sum(jnp.dot(row, x) ** 2 for row in m) + sum(v for v in x) * 0.0)(jnp.ones(2))
    assert np.asarray(g).tolist() == [48.0, 68.0]
    with pytest.raises(TypeError):
        iter(jnp.array(1.0))


def test_a_clamped_read_inside_grad_matches_jax():
    x = np.array([1.0, 2.0, 3.0], np.float32)
    grads = [jax.grad(lambda v, jnp=jnp: v[5] * 2.0 + jnp.sum(v[np.array([0, 1])]))(x) for jax, jnp in ENGINES]
    np.testing.assert_array_equal(np.asarray(grads[1]), np.asarray(grads[0]))
    assert np.asarray(grads[1]).tolist() == [1.0, 1.0, 2.0]  # hand-derived: the read at 5 is the last value


@settings(max_examples=40, deadline=None)
# no subnormals: XLA on the CPU flushes them to zero (elu's gradient at 1e-42 is alpha there, 1 in numpy)
@given(x=st.lists(st.floats(-30, 30, allow_nan=False, allow_subnormal=False, width=32), min_size=1, max_size=5))
def test_elu_and_leaky_relu_values_and_gradients_match_jax(x):
    x = np.asarray(x, np.float32)
    for name, kwargs in (
        ("elu", {}),
        ("elu", {"alpha": 0.5}),
        ("leaky_relu", {}),
        ("leaky_relu", {"negative_slope": 0.2}),
    ):
        out = []
        for jax, jnp in ENGINES:
            fn = getattr(jax.nn, name)
            out.append(jax.value_and_grad(lambda v, fn=fn, jnp=jnp: jnp.sum(fn(v, **kwargs)))(x))
            assert np.asarray(fn(x, **kwargs)).dtype == np.float32
        for real, lite in zip(*out):
            np.testing.assert_allclose(np.asarray(lite), np.asarray(real), rtol=2e-6, atol=1e-6)


def test_elu_by_hand():
    # elu(-1) = e^-1 - 1, elu(2) = 2; leaky_relu(-1) = -0.01
    out = lite_jax.nn.elu(lite_jnp.array([-1.0, 2.0]))
    np.testing.assert_allclose(out, [np.exp(-1.0) - 1.0, 2.0], rtol=1e-6)
    assert lite_jax.nn.leaky_relu(lite_jnp.array([-1.0, 3.0])).tolist() == pytest.approx([-0.01, 3.0])


def test_initializers_have_jaxs_shapes_dtypes_and_scales():
    init = lite_jax.nn.initializers
    key = lite_jax.random.PRNGKey(0)
    for name in ("zeros", "ones"):
        lite = getattr(init, name)(key, (2, 3))
        real = getattr(real_jax.nn.initializers, name)(real_jax.random.PRNGKey(0), (2, 3))
        assert lite.dtype == real.dtype == np.float32
        np.testing.assert_array_equal(lite, real)
    np.testing.assert_array_equal(init.constant(0.5)(key, (2,)), [0.5, 0.5])
    shape = (200, 100)  # fan_in 200, fan_out 100
    for name, limit in [
        ("glorot_uniform", np.sqrt(6 / 300)),
        ("he_uniform", np.sqrt(6 / 200)),
        ("lecun_uniform", np.sqrt(3 / 200)),
        # a normal truncated at two of its standard deviations, rescaled to the wanted variance
        ("glorot_normal", 2 * np.sqrt(2 / 300) / 0.87962566103423978),
        ("he_normal", 2 * np.sqrt(2 / 200) / 0.87962566103423978),
        ("lecun_normal", 2 * np.sqrt(1 / 200) / 0.87962566103423978),
    ]:
        lite = getattr(init, name)()(key, shape)
        real = getattr(real_jax.nn.initializers, name)()(real_jax.random.PRNGKey(0), shape)
        assert lite.shape == real.shape and lite.dtype == real.dtype == np.float32
        assert np.abs(lite).max() <= limit + 1e-6 and np.abs(np.asarray(real)).max() <= limit + 1e-6
        # the same variance as JAX's (20,000 draws: within 5 %)
        np.testing.assert_allclose(np.var(lite), np.var(np.asarray(real)), rtol=0.05)
    assert init.xavier_normal is init.glorot_normal and init.kaiming_uniform is init.he_uniform


def test_categorical_draws_with_softmax_probabilities():
    key = lite_jax.random.PRNGKey(3)
    logits = lite_jnp.log(lite_jnp.array([0.2, 0.8]))
    draws = lite_jax.random.categorical(key, logits, shape=(4000,))
    real = real_jax.random.categorical(
        real_jax.random.PRNGKey(3), real_jnp.log(real_jnp.array([0.2, 0.8])), shape=(4000,)
    )
    assert draws.dtype == real.dtype == np.int32 and draws.shape == real.shape
    assert 0.77 < float(np.mean(draws)) < 0.83  # P(1) = 0.8
    batch = lite_jnp.array([[0.0, -np.inf, -np.inf], [-np.inf, -np.inf, 0.0]])  # certain: 0 then 2
    assert lite_jax.random.categorical(key, batch).tolist() == [0, 2]
    assert (
        lite_jax.random.categorical(key, batch, axis=0).shape
        == real_jax.random.categorical(real_jax.random.PRNGKey(3), real_jnp.asarray(batch), axis=0).shape
    )


@pytest.mark.parametrize("jax, jnp", ENGINES, ids=["jax", "lite"])
def test_while_loop_and_map(jax, jnp):
    # doubling 1 until it passes 100: 128, in 7 steps
    doubled = jax.lax.while_loop(lambda c: c[0] < 100, lambda c: (c[0] * 2, c[1] + 1), (1, 0))
    assert tuple(int(v) for v in doubled) == (128, 7)
    out = jax.lax.map(lambda row: {"s": jnp.sum(row), "m": row * 2.0}, jnp.array([[1.0, 2.0], [3.0, 4.0]]))
    assert np.asarray(out["s"]).tolist() == [3.0, 7.0] and np.asarray(out["s"]).dtype == np.float32
    assert np.asarray(out["m"]).tolist() == [[2.0, 4.0], [6.0, 8.0]]


def _poly(jnp):
    return lambda x: jnp.sum(x**3) + x[0] * x[1] + jnp.sin(x[2])


def _vector(jnp):
    return lambda x: jnp.stack([x[0] * x[1], jnp.exp(x[2]), x[1] ** 2])


def _tree(jnp):
    return lambda p: {"a": p["w"] * 2.0 + p["b"], "b": jnp.sum(p["w"] ** 2)}


@settings(max_examples=15, deadline=None)
@given(x=st.lists(st.floats(-2, 2, allow_nan=False, width=32), min_size=3, max_size=3))
def test_jacobians_and_hessian_match_jax(x):
    x = np.asarray(x, np.float32)
    params = {"w": x[:2], "b": x[2]}
    for transform, make, arg in [
        ("jacrev", _vector, x),
        ("jacfwd", _vector, x),
        ("jacrev", _tree, params),
        ("hessian", _poly, x),
        ("hessian", _vector, x),
    ]:
        real, lite = (getattr(jax, transform)(make(jnp))(arg) for jax, jnp in ENGINES)
        assert real_jax.tree.structure(real) == real_jax.tree.structure(lite)
        for r, lt in zip(real_jax.tree.leaves(real), real_jax.tree.leaves(lite)):
            assert np.asarray(lt).dtype == np.asarray(r).dtype and np.shape(lt) == np.shape(r), transform
            np.testing.assert_allclose(np.asarray(lt), np.asarray(r), rtol=1e-5, atol=1e-5)


def test_hessian_by_hand_and_argnums():
    # f(x, y) = x0^2 y + y^3: d2f/dx2 = [[2y, 0], [0, 0]]; with argnums=1: 6y
    f = lambda x, y: x[0] ** 2 * y + y**3  # noqa: E731
    x, y = lite_jnp.array([1.0, 2.0]), lite_jnp.array(3.0)
    assert lite_jax.hessian(f)(x, y).tolist() == [[6.0, 0.0], [0.0, 0.0]]
    assert float(lite_jax.hessian(f, argnums=1)(x, y)) == 18.0
    assert lite_jax.jacrev(f, argnums=(0, 1))(x, y)[1] == pytest.approx(1.0 + 27.0)


MISSING = [
    ("jax", "pmap", "jax.vmap"),
    ("jax", "gard", "jax.grad"),
    ("jax.numpy", "histogramdd", "dir(jax.numpy)"),
    ("jax.numpy", "sums", "jax.numpy.sum"),
    ("jax.nn", "relu7", "jax.nn.relu"),
    ("jax.random", "gumbel", "dir(jax.random)"),
    ("jax.lax", "associative_scan", "dir(jax.lax)"),
    ("jax.nn.initializers", "orthogonal", "dir(jax.nn.initializers)"),
]


@pytest.mark.parametrize("module, name, instead", MISSING)
def test_a_missing_name_says_it_is_the_browser_engines_gap_and_what_works(module, name, instead):
    target = lite_jax
    for part in module.split(".")[1:]:
        target = getattr(target, part)
    assert not hasattr(target, name)
    with pytest.raises(AttributeError) as caught:
        getattr(target, name)
    text = str(caught.value)
    assert text.startswith(f"{module}.{name} is not in the pytree-lab Lite engine"), text
    assert "browser" in text and instead in text, text
    assert caught.value.name == name


@pytest.mark.parametrize("jax, jnp", ENGINES, ids=["jax", "lite"])
@pytest.mark.parametrize(
    "body, error",
    [
        (lambda x: x.foo, AttributeError),
        (lambda x: float(x), TypeError),
        (lambda x: int(x), TypeError),
        (lambda x: x.__setitem__(0, 1.0), TypeError),
    ],
    ids=["attribute", "float", "int", "item assignment"],
)
def test_traced_values_refuse_as_jax_does_and_name_no_internal_class(jax, jnp, body, error):
    with pytest.raises(error) as caught:
        jax.grad(lambda x: jnp.sum(body(x)))(jnp.array([1.5, 2.0]))
    assert "_TracedArray" not in str(caught.value) and "ArrayBox" not in str(caught.value)
