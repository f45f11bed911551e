"""The course's own code, run once with real JAX and once with the Lite engine.

Each lesson source below is exec'd with ``import jax`` bound to one engine or the other (through
the exec namespace's ``__import__``, so ``sys.modules`` is never touched). The hand-derived numbers
of the lessons are the first oracle; real JAX is the second: every value, tree structure, key
path and exception type must agree.
"""

from __future__ import annotations

import builtins
import contextlib
import io
import types

import jax as real_jax
import jax.flatten_util  # makes real_jax.flatten_util an attribute
import numpy as np
import pytest

from pytree_lab_lite import jax as lite_jax

ENGINES = {"jax": real_jax, "lite": lite_jax}

# ---- lesson "Pytrees and structured parameters": run the example, the experiments, the exercise,
# the nested-model practice and the mismatched-tree challenge, in the lesson's order.
PYTREE_LESSON = '''
import jax
import jax.numpy as jnp
params = {"weight": jnp.array([1., -1.]), "bias": jnp.array(0.)}
x = jnp.array([2., 1.])
def loss(p):
    prediction = jnp.dot(p["weight"], x) + p["bias"]
    return (prediction - 3.) ** 2
value, grads = jax.value_and_grad(loss)(params)
updated = jax.tree.map(lambda p, g: p - 0.05 * g, params, grads)
print("Before/after:", float(value), float(loss(updated)))
assert grads.keys() == params.keys()
assert loss(updated) < value

assert jnp.allclose(grads["weight"],jnp.array([-8.,-4.]))
assert jnp.allclose(grads["bias"],-4.)
assert jnp.allclose(updated["weight"],jnp.array([1.4,-0.8]))
assert jnp.allclose(updated["bias"],0.2)
assert jnp.allclose(loss(updated),0.64,atol=1e-6)

leaves,definition=jax.tree.flatten(params)
rebuilt=jax.tree.unflatten(definition,leaves)
assert jax.tree.structure(rebuilt)==jax.tree.structure(params)
assert jnp.array_equal(rebuilt["weight"],params["weight"])
assert jnp.array_equal(rebuilt["bias"],params["bias"])

norm_squared = sum(jnp.sum(g ** 2) for g in jax.tree.leaves(grads))
manual = jnp.sum(grads["weight"] ** 2) + grads["bias"] ** 2
assert jnp.allclose(norm_squared, manual)
assert jnp.allclose(norm_squared, 96.)

nested={"layer":params,"scale":jnp.array(1.)}
def nested_loss(p):
    pred=p["scale"]*(jnp.dot(p["layer"]["weight"],x)+p["layer"]["bias"])
    return (pred-3.)**2
g=jax.grad(nested_loss)(nested)
assert jax.tree.structure(g)==jax.tree.structure(nested)
assert jnp.allclose(g["scale"],-4.)

try:
    jax.tree.map(lambda p,g:p-0.05*g,params,{"weight":grads["weight"]})
except ValueError as err:
    mismatch = err
    print("Expected tree mismatch")
else:
    raise AssertionError("Expected a missing-key failure")
fixed=jax.tree.map(lambda p,g:p-0.05*g,params,grads)
assert jnp.allclose(loss(fixed),0.64,atol=1e-6)

visual_data = {'kind': 'bar', 'labels': ['weight[0]', 'weight[1]', 'bias'], 'ylabel': 'parameter value',
               'series': [
                   {'label': 'before',
                    'y': [float(params['weight'][0]), float(params['weight'][1]), float(params['bias'])]},
                   {'label': 'after',
                    'y': [float(updated['weight'][0]), float(updated['weight'][1]), float(updated['bias'])]}]}
'''

# ---- lesson "Gradient of Packed Parameters": the dict example and the exercise (a solution
# written from the lesson's statement: weights then bias in one array, sum of squared predictions).
PACKED_LESSON = '''
import jax
import jax.numpy as jnp

params = {"w": jnp.array([1.0, 2.0]), "b": jnp.array([0.5])}
x = jnp.array([[1.0, -1.0]])

def loss(p, x):
    prediction = x @ p["w"] + p["b"]
    return jnp.sum(prediction ** 2)

grads = jax.grad(loss)(params, x)

def grad_over_flat_params(flat_params, x):
    def packed_loss(flat, data):
        weights, bias = flat[:-1], flat[-1]
        return jnp.sum((data @ weights + bias) ** 2)
    return jax.grad(packed_loss, argnums=0)(flat_params, x)

flat_grad = grad_over_flat_params(jnp.array([1.0, 0.0, 0.0]), jnp.array([[2.0, 3.0]]))
wide_grad = grad_over_flat_params(jnp.array([0.5, -1.0, 2.0, 0.25]), jnp.array([[1.0, 2.0, 3.0], [-1.0, 0.5, 0.0]]))
'''


def run_lesson(source: str, jax_module: types.ModuleType) -> tuple[dict, str]:
    """Exec `source` with `import jax...` resolved to `jax_module`; return its namespace and stdout."""
    real_import = builtins.__import__

    def lesson_import(name, globals=None, locals=None, fromlist=(), level=0):
        if level == 0 and (name == "jax" or name.startswith("jax.")):
            module = jax_module
            if fromlist:
                for part in name.split(".")[1:]:
                    module = getattr(module, part)
            return module
        return real_import(name, globals, locals, fromlist, level)

    lesson_builtins = dict(vars(builtins), __import__=lesson_import)
    namespace: dict = {"__builtins__": lesson_builtins, "__name__": "lesson"}
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(source, "<lesson>", "exec"), namespace)
    return namespace, out.getvalue()


def as_float_array(x) -> np.ndarray:
    return np.asarray(x, dtype=np.float64)


def assert_same_tree(jax_tree, lite_tree, atol=1e-6):
    """Same structure (treedef text, keystr paths), same dtypes and shapes, values within atol."""
    jax_flat, jax_def = real_jax.tree_util.tree_flatten_with_path(jax_tree)
    lite_flat, lite_def = lite_jax.tree_util.tree_flatten_with_path(lite_tree)
    assert repr(lite_def) == repr(jax_def)
    assert [lite_jax.tree_util.keystr(p) for p, _ in lite_flat] == [real_jax.tree_util.keystr(p) for p, _ in jax_flat]
    for (_, a), (_, b) in zip(jax_flat, lite_flat):
        assert np.shape(b) == np.shape(a)
        assert np.asarray(b).dtype == np.asarray(a).dtype
        np.testing.assert_allclose(as_float_array(b), as_float_array(a), rtol=1e-6, atol=atol)


@pytest.fixture(scope="module")
def pytree_runs():
    return {name: run_lesson(PYTREE_LESSON, module) for name, module in ENGINES.items()}


@pytest.fixture(scope="module")
def packed_runs():
    return {name: run_lesson(PACKED_LESSON, module) for name, module in ENGINES.items()}


@pytest.mark.parametrize("engine", ["jax", "lite"])
def test_pytree_lesson_prints_the_recorded_float32_run(pytree_runs, engine):
    # The seed's recorded CPU run (JAX, float32) printed exactly these lines.
    _, stdout = pytree_runs[engine]
    assert stdout.splitlines() == ["Before/after: 4.0 0.6399999260902405", "Expected tree mismatch"]


@pytest.mark.parametrize("engine", ["jax", "lite"])
def test_pytree_lesson_hand_derived_numbers(pytree_runs, engine):
    ns, _ = pytree_runs[engine]
    assert float(ns["value"]) == 4.0
    np.testing.assert_array_equal(np.asarray(ns["grads"]["weight"]), [-8.0, -4.0])
    assert float(ns["grads"]["bias"]) == -4.0
    np.testing.assert_allclose(np.asarray(ns["updated"]["weight"]), [1.4, -0.8], rtol=1e-6)
    np.testing.assert_allclose(float(ns["updated"]["bias"]), 0.2, rtol=1e-6)
    assert float(ns["norm_squared"]) == 96.0
    assert float(ns["g"]["scale"]) == -4.0
    assert ns["visual_data"]["series"][1]["y"] == pytest.approx([1.4, -0.8, 0.2], rel=1e-6)


def test_pytree_lesson_same_trees_and_values(pytree_runs):
    real, _ = pytree_runs["jax"]
    lite, _ = pytree_runs["lite"]
    for name in ["params", "grads", "updated", "rebuilt", "nested", "g", "fixed"]:
        assert_same_tree(real[name], lite[name])
    assert repr(lite["definition"]) == repr(real["definition"]) == "PyTreeDef({'bias': *, 'weight': *})"
    assert list(lite["grads"]) == list(real["grads"]) == ["bias", "weight"]
    for name in ["value", "norm_squared", "manual"]:
        assert np.asarray(lite[name]).dtype == np.asarray(real[name]).dtype == np.float32
        assert float(lite[name]) == float(real[name])
    assert lite["visual_data"] == real["visual_data"]


def test_pytree_lesson_missing_bias_is_the_same_error(pytree_runs):
    real, _ = pytree_runs["jax"]
    lite, _ = pytree_runs["lite"]
    assert type(lite["mismatch"]) is type(real["mismatch"]) is ValueError
    # Both name the place (the top of the tree) and the missing key.
    for message in (str(real["mismatch"]), str(lite["mismatch"])):
        assert "tree_map tree\n" in message
        assert "bias" in message and "weight" in message
    assert "missing from" in str(lite["mismatch"]) and "'bias'" in str(lite["mismatch"])


@pytest.mark.parametrize("engine", ["jax", "lite"])
def test_packed_lesson_hand_derived_numbers(packed_runs, engine):
    ns, _ = packed_runs[engine]
    # prediction -0.5: dL/dw = 2 * -0.5 * [1, -1], dL/db = 2 * -0.5
    np.testing.assert_array_equal(np.asarray(ns["grads"]["w"]), [-1.0, 1.0])
    np.testing.assert_array_equal(np.asarray(ns["grads"]["b"]), [-1.0])
    # prediction 2: weights 2*2*[2, 3], bias 2*2
    np.testing.assert_array_equal(np.asarray(ns["flat_grad"]), [8.0, 12.0, 4.0])
    assert np.asarray(ns["flat_grad"]).shape == (3,)
    assert np.asarray(ns["flat_grad"]).dtype == np.float32


def test_packed_lesson_same_trees_and_values(packed_runs):
    real, _ = packed_runs["jax"]
    lite, _ = packed_runs["lite"]
    for name in ["params", "grads", "flat_grad", "wide_grad"]:
        assert_same_tree(real[name], lite[name])
    assert repr(lite_jax.tree.structure(lite["grads"])) == "PyTreeDef({'b': *, 'w': *})"
