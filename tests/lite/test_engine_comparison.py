"""Real JAX against the pytree-lab Lite engine (numpy + autograd) in CPython: the cases students
write (vmap, jax.nn, jax.random, jax.lax, abs at 0, shape errors, sqrt/norm at 0) give the same
values, shapes, dtypes and exception classes; every exercise's reference solution and its
accepted variants get the same verdict and feedback on both engines.

The Lite side runs in a subprocess where jax cannot be imported and `install_as_jax()` puts the
Lite engine behind `import jax`, as in the browser; real JAX runs in this process.
"""

from __future__ import annotations

import json
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]

# Each case: code defining `result` (a tree of arrays/numbers) from jax and jnp.
CASES = {
    "vmap_dot": "result = jax.vmap(lambda x: jnp.dot(x, jnp.array([1., 2.])))(jnp.array([[1., 2.], [3., 4.]]))",
    "vmap_in_axes_none": "result = jax.vmap(lambda x, y: x * y, in_axes=(0, None))(jnp.array([1., 2., 3.]), 2.0)",
    "vmap_axis_1": "result = jax.vmap(jnp.sum, in_axes=1)(jnp.array([[1., 2., 3.], [4., 5., 6.]]))",
    "vmap_tree_out": "result = jax.vmap(lambda x: {'a': x, 'b': 2 * x})(jnp.array([1., 2.]))",
    "grad_of_vmap": (
        "w = jnp.array([1., -1.])\nX = jnp.array([[1., 2.], [3., 4.]])\n"
        "result = jax.grad(lambda w: jnp.sum(jax.vmap(lambda x: jnp.dot(w, x))(X) ** 2))(w)"
    ),
    "vmap_of_grad": "result = jax.vmap(jax.grad(lambda x: x ** 3))(jnp.array([1., 2., 3.]))",
    "relu": "result = jax.nn.relu(jnp.array([-1., 0., 2.]))",
    "relu_grad_at_0": "result = jax.grad(lambda x: jnp.sum(jax.nn.relu(x)))(jnp.array([-1., 0., 2.]))",
    "sigmoid": "result = jax.nn.sigmoid(jnp.array([-30., -1., 0., 2., 30.]))",
    "sigmoid_grad": "result = jax.grad(lambda x: jnp.sum(jax.nn.sigmoid(x)))(jnp.array([-1., 0., 2.]))",
    "softmax": "result = jax.nn.softmax(jnp.array([[1., 2., 3.], [1000., 1000., 1000.]]))",
    "softmax_axis0": "result = jax.nn.softmax(jnp.array([[1., 2.], [3., 5.]]), axis=0)",
    "log_softmax": "result = jax.nn.log_softmax(jnp.array([1., 2., 3.]))",
    "logsumexp": "result = jax.nn.logsumexp(jnp.array([1., 2., 3.]))",
    "logsumexp_big": "result = jax.nn.logsumexp(jnp.array([1000., 1000.]))",
    "logsumexp_grad": "result = jax.grad(jax.nn.logsumexp)(jnp.array([1., 2., 3.]))",
    "cross_entropy_grad": (
        "logits = jnp.array([[2., 1., 0.], [0., 1., 3.]])\nlabels = jnp.array([0, 2])\n"
        "def loss(z):\n    lp = jax.nn.log_softmax(z)\n"
        "    return -jnp.mean(lp[jnp.arange(2), labels])\nresult = jax.grad(loss)(logits)"
    ),
    "prngkey": "result = jax.random.PRNGKey(0)",
    "prngkey_big_seed": "result = jax.random.PRNGKey(2 ** 40 + 7)",
    "prngkey_negative_seed": "result = jax.random.PRNGKey(-3)",
    "split_shape": (
        "k = jax.random.split(jax.random.PRNGKey(0), 3)\nresult = {'shape': list(k.shape), 'dtype': str(k.dtype)}"
    ),
    "normal_shape": (
        "v = jax.random.normal(jax.random.PRNGKey(1), (2, 3))\nresult = {'shape': list(v.shape), 'dtype': str(v.dtype)}"
    ),
    "uniform_shape": (
        "v = jax.random.uniform(jax.random.PRNGKey(1), (4,), minval=2., maxval=3.)\n"
        "result = {'shape': list(v.shape), 'dtype': str(v.dtype), 'in_range': bool(((v >= 2) & (v < 3)).all())}"
    ),
    "same_key_same_numbers": (
        "k = jax.random.PRNGKey(3)\nresult = bool((jax.random.normal(k, (5,)) == jax.random.normal(k, (5,))).all())"
    ),
    "split_keys_differ": (
        "k1, k2 = jax.random.split(jax.random.PRNGKey(3))\n"
        "result = bool((jax.random.normal(k1, (5,)) != jax.random.normal(k2, (5,))).any())"
    ),
    "cond": "result = jax.lax.cond(True, lambda x: x + 1, lambda x: x - 1, 1.0)",
    "cond_false": "result = jax.lax.cond(jnp.array(False), lambda x: x + 1, lambda x: x - 1, jnp.array([1., 2.]))",
    "cond_grad": "result = jax.grad(lambda x: jax.lax.cond(x > 0, lambda v: v ** 2, lambda v: -v, x))(3.0)",
    "select": "result = jax.lax.select(jnp.array([True, False]), jnp.array([1., 2.]), jnp.array([3., 4.]))",
    "stop_gradient": "result = jax.grad(lambda x: x * jax.lax.stop_gradient(x))(3.0)",
    "stop_gradient_tree": (
        "result = jax.grad(lambda p: p['a'] * jax.lax.stop_gradient(p)['b'] + p['b'])({'a': 2.0, 'b': 5.0})"
    ),
    "abs_grad_at_0": "result = [jax.grad(jnp.abs)(0.0), jax.grad(jnp.abs)(-2.0), jax.grad(jnp.abs)(3.0)]",
    "abs_grad_vector": "result = jax.grad(lambda x: jnp.sum(jnp.abs(x)))(jnp.array([-1., 0., 1.]))",
    "sqrt_grad_at_0": "result = jax.grad(jnp.sqrt)(0.0)",
    "norm_grad_at_0": "result = jax.grad(lambda x: jnp.linalg.norm(x))(jnp.zeros(2))",
    "log_0": "result = jnp.log(0.0)",
    "dot_shape_error": "result = jnp.dot(jnp.ones(2), jnp.ones(3))",
    "matmul_fn_shape_error": "result = jnp.matmul(jnp.ones((2, 3)), jnp.ones((2, 3)))",
    # the `@` operator: JAX's TypeError (numpy's would be ValueError), also inside grad and with
    # a numpy array on the left
    "matmul_op_shape_error": "result = jnp.ones((2, 3)) @ jnp.ones((2, 3))",
    "matmul_op_vector_error": "result = jnp.ones(2) @ jnp.ones(3)",
    "matmul_op_scalar_error": "result = jnp.ones(2) @ jnp.array(2.0)",
    "matmul_op_scalar_left_error": "result = jnp.array(2.0) @ jnp.ones(2)",
    "matmul_fn_scalar_error": "result = jnp.matmul(jnp.ones(2), 3.0)",
    "matmul_op_numpy_left_error": "import numpy as np\nresult = np.ones(2) @ jnp.ones(3)",
    "matmul_op_in_grad_error": "result = jax.grad(lambda w: jnp.sum(w @ jnp.ones((3, 2))))(jnp.ones(2))",
    "matmul_op_value": "result = jnp.array([[1., 2.], [3., 4.]]) @ jnp.array([1., -1.])",
    "matmul_op_grad": (
        "result = jax.grad(lambda w: jnp.sum((jnp.array([[1., 2.], [3., 4.]]) @ w) ** 2))(jnp.array([1., -1.]))"
    ),
    "sqrt_0": "result = [jnp.sqrt(0.0), jnp.linalg.norm(jnp.zeros(3))]",
    "pow_half_grad_at_0": "result = jax.grad(lambda x: x ** 0.5)(0.0)",
    "norm_of_sum_grad_at_0": "result = jax.grad(lambda x: jnp.sqrt(jnp.sum(x ** 2)))(jnp.zeros(2))",
    # x.at[i]: functional updates (the original is unchanged), and their gradients
    "at_set": "x = jnp.array([1., 2., 3.])\nresult = [x.at[1].set(5.), x]",
    "at_set_slice_broadcast": "result = jnp.zeros((2, 3)).at[:, 1:].set(jnp.array([7., 8.]))",
    "at_set_tuple_index": "result = jnp.zeros((2, 2)).at[1, 0].set(4.)",
    "at_set_index_array": "result = jnp.zeros(4).at[jnp.array([0, 2])].set(jnp.array([1., 2.]))",
    "at_set_casts_to_dtype": "result = jnp.array([1, 2, 3]).at[0].set(2.7)",
    "at_add_float_array_to_int": "result = jnp.array([1, 2]).at[1].add(jnp.array(0.5))",
    "at_set_int_into_float_is_safe": "result = jnp.array([1., 2.]).at[0].set(jnp.array(3))",
    "at_set_int_scalar_into_bool": "result = jnp.array([True, False]).at[1].set(1)",
    "at_set_out_of_bounds_dropped": "result = jnp.array([1., 2., 3.]).at[5].set(9.)",
    "at_set_negative_index": "result = jnp.array([1., 2., 3.]).at[-1].set(9.)",
    "at_add_repeated_index": "result = jnp.zeros(3).at[jnp.array([0, 0, 2])].add(1.)",
    "at_subtract": "result = jnp.ones(3).at[1:].subtract(jnp.array([1., 2.]))",
    "at_multiply": "result = jnp.array([1., 2., 3.]).at[1:].multiply(2.)",
    "at_mul_alias": "result = jnp.array([1., 2., 3.]).at[0].mul(4.)",
    "at_divide": "result = jnp.array([1., 2., 3.]).at[2].divide(2.)",
    "at_power": "result = jnp.array([1., 2., 3.]).at[1].power(3.)",
    "at_min_max": "x = jnp.array([1., 5., 3.])\nresult = [x.at[:2].min(2.), x.at[:2].max(2.)]",
    "at_get": "result = jnp.array([1., 2., 3.]).at[1:].get()",
    "at_apply": "result = jnp.array([1., 4., 9.]).at[1:].apply(jnp.sqrt)",
    "at_on_random_and_grad_output": (
        "g = jax.grad(lambda x: jnp.sum(x ** 2))(jnp.array([1., 2.]))\n"
        "k = jax.random.normal(jax.random.PRNGKey(0), (2,)).at[0].set(0.)\n"
        "result = [g.at[0].set(0.), k[0], jnp.zeros_like(g).at[1].set(1.)]"
    ),
    "at_set_grad_wrt_array": (
        "result = jax.grad(lambda x: jnp.sum(x.at[1].set(0.) * jnp.array([1., 2., 3.])))(jnp.array([1., 2., 3.]))"
    ),
    "at_set_grad_wrt_value": (
        "result = jax.grad(lambda v: jnp.sum(jnp.zeros((2, 3)).at[:, 1:].set(v) ** 2))(jnp.array(2.))"
    ),
    "at_set_grad_both": (
        "result = jax.grad(lambda x: jnp.sum(x.at[1].set(x[0] ** 2) * jnp.array([1., 2., 3.])))"
        "(jnp.array([3., 2., 1.]))"
    ),
    "at_add_grad_repeated": (
        "result = jax.grad(lambda v: jnp.sum(jnp.zeros(3).at[jnp.array([0, 0, 2])].add(v) ** 2))"
        "(jnp.array([1., 2., 3.]))"
    ),
    "at_multiply_grad": ("result = jax.grad(lambda x: jnp.sum(x.at[1:].multiply(x[0])))(jnp.array([2., 3., 4.]))"),
    "at_grad_of_grad": "result = jax.grad(jax.grad(lambda s: jnp.sum(jnp.ones(3).at[1].set(s ** 3))))(2.0)",
    "at_in_params_tree": (
        "params = {'w': jnp.array([1., -1.]), 'b': jnp.array(0.)}\n"
        "def loss(p):\n    w = p['w'].at[1].set(p['b'])\n    return jnp.sum(w ** 2) + p['b']\n"
        "result = jax.grad(loss)(params)"
    ),
    "at_vmap": "result = jax.vmap(lambda r: r.at[0].set(0.))(jnp.ones((2, 3)))",
}

LITE_SCRIPT = r'''
import json, sys, warnings
class Block:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("jax", "jaxlib", "optax"):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
sys.meta_path.insert(0, Block())
from pytree_lab_lite import install_as_jax
assert install_as_jax() == "lite"
cases = json.loads(sys.argv[1])
out = {}
for name, code in cases.items():
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        out[name] = evaluate(code)
    out[name]["warnings"] = [str(w.message) for w in seen]
print("RESULT" + json.dumps(out))
'''

EVALUATE = r'''
import numpy as _np

def describe_value(v):
    import jax
    if isinstance(v, dict):
        return {k: describe_value(x) for k, x in sorted(v.items())}
    if isinstance(v, (list, tuple)):
        return [describe_value(x) for x in v]
    if isinstance(v, (bool, str, int)) and not hasattr(v, "dtype"):
        return v
    a = _np.asarray(v)
    return {"shape": list(a.shape), "dtype": str(a.dtype),
            "values": _np.where(_np.isnan(a), -12345.0, a.astype(_np.float64)).round(4).tolist()
            if a.dtype.kind in "fiub" else a.tolist()}

def evaluate(code):
    import jax, jax.numpy as jnp
    space = {"jax": jax, "jnp": jnp}
    try:
        exec(code, space)
    except Exception as err:
        return {"error": type(err).__name__, "message": str(err).splitlines()[0]}
    return {"value": describe_value(space["result"])}
'''

_EVALUATE_SPACE: dict = {}
exec(EVALUATE, _EVALUATE_SPACE)  # the same code the Lite subprocess runs
evaluate = _EVALUATE_SPACE["evaluate"]


def lite_results(cases: dict) -> dict:
    proc = subprocess.run(
        [sys.executable, "-c", EVALUATE + LITE_SCRIPT, json.dumps(cases)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=600,
    )
    line = next((ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT")), None)
    assert line is not None, proc.stdout[-3000:] + proc.stderr[-3000:]
    return json.loads(line[len("RESULT") :])


@pytest.fixture(scope="module")
def lite():
    return lite_results(CASES)


# the values of random draws differ by design (documented): compared are shapes, dtypes and
# the properties (same key, same numbers; split keys, other numbers)
# the Lite engine is JAX as a student's notebook has it, with JAX's default promotion: real JAX
# is run the same way (under strict dtype promotion it does not warn on a lossy .at[] update)
@pytest.mark.jax_promotion("the reference is JAX with the defaults a student's notebook runs under")
@pytest.mark.parametrize("name", sorted(CASES))
def test_lite_engine_matches_jax(lite, name):
    # warnings are recorded, not raised, and must be JAX's (it warns on at[0].set(2.7) of an int
    # array: a FutureWarning that the cast will become an error); everywhere else both are silent
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        real = evaluate(CASES[name])
    assert lite[name]["warnings"] == [str(w.message) for w in seen]
    lite_case = {k: v for k, v in lite[name].items() if k != "warnings"}
    if "error" in real:
        assert lite_case.get("error") == real["error"], (real, lite_case)
        assert lite_case["message"] == real["message"]
        return
    assert lite_case == real


def test_hand_checked_values_of_the_new_parts(lite):
    """A few of the numbers above, derived by hand (so neither engine is the only oracle)."""
    assert lite["abs_grad_at_0"]["value"] == [{"shape": [], "dtype": "float32", "values": v} for v in (1.0, -1.0, 1.0)]
    assert lite["stop_gradient"]["value"]["values"] == 3.0  # d/dx [x * c] at c = 3
    assert lite["vmap_dot"]["value"]["values"] == [5.0, 11.0]
    assert lite["relu_grad_at_0"]["value"]["values"] == [0.0, 0.0, 1.0]
    assert lite["logsumexp_big"]["value"]["values"] == round(float(np.float32(1000 + np.log(2))), 4)
    assert lite["prngkey"]["value"] == {"shape": [2], "dtype": "uint32", "values": [0.0, 0.0]}
    # f(x) = x0 + 2 x0^2 + 3 x2 after x.at[1].set(x0^2): grad at (3, 2, 1) is (1 + 4 x0, 0, 3)
    assert lite["at_set_grad_both"]["value"]["values"] == [13.0, 0.0, 3.0]
    # out = (v0 + v1, 0, v2): both repeated updates get 2 (v0 + v1) = 6, v2 gets 2 v2 = 6
    assert lite["at_add_grad_repeated"]["value"]["values"] == [6.0, 6.0, 6.0]
    assert lite["at_add_repeated_index"]["value"]["values"] == [2.0, 0.0, 1.0]
    assert lite["at_set"]["value"][1]["values"] == [1.0, 2.0, 3.0]  # the original is unchanged
    assert lite["matmul_op_vector_error"]["error"] == "TypeError"


# ---------------------------------------------------------------- exercises on both engines

# Each exercise: the reference solution and the variants students write that must pass too.
EXERCISE_ANSWERS = {
    "squared_norm": {
        "reference": "answer = sum(jnp.sum(g ** 2) for g in jax.tree.leaves(grads))",
        "tree_reduce": "answer = jax.tree.reduce(lambda a, b: a + b, jax.tree.map(lambda g: jnp.sum(g ** 2), grads))",
        "manual": "answer = jnp.sum(grads['weight'] ** 2) + grads['bias'] ** 2",
        "vdot": "answer = sum(jnp.vdot(g, g) for g in jax.tree.leaves(grads))",
    },
    "nested_scale_grad": {
        "reference": "answer = jax.grad(nested_loss)(nested)",
        "value_and_grad_1": "answer = jax.value_and_grad(nested_loss)(nested)[1]",
    },
    "repair_update": {
        "reference": "answer = jax.tree.map(lambda p, g: p - 0.05 * g, params, grads)",
        "dict_comprehension": "answer = {k: params[k] - 0.05 * grads[k] for k in params}",
    },
    "grad_over_flat_params": {
        "reference": (
            "def answer(flat_params, x):\n    def loss(flat):\n        w, b = flat[:-1], flat[-1]\n"
            "        return jnp.sum((x @ w + b) ** 2)\n    return jax.grad(loss, argnums=0)(flat_params)"
        ),
        "value_and_grad_1": (
            "def answer(flat_params, x):\n    def loss(flat):\n        w, b = flat[:-1], flat[-1]\n"
            "        return jnp.sum((jnp.dot(x, w) + b) ** 2)\n"
            "    return jax.value_and_grad(loss)(flat_params)[1]"
        ),
        "vmap": (
            "def answer(flat_params, x):\n    def loss(flat):\n        w, b = flat[:-1], flat[-1]\n"
            "        predictions = jax.vmap(lambda row: jnp.dot(row, w) + b)(x)\n"
            "        return jnp.sum(predictions ** 2)\n    return jax.grad(loss)(flat_params)"
        ),
        "python_sum": (
            "def answer(flat_params, x):\n    def loss(flat):\n        w, b = flat[:-1], flat[-1]\n"
            "        return sum((jnp.dot(row, w) + b) ** 2 for row in x)\n"
            "    return jax.grad(loss)(flat_params)"
        ),
    },
}

SETUP = '''
import jax, jax.numpy as jnp
params = {"weight": jnp.array([1.0, -1.0]), "bias": jnp.array(0.0)}
x = jnp.array([2.0, 1.0])
def loss(p):
    return (jnp.dot(p["weight"], x) + p["bias"] - 3.0) ** 2
grads = jax.grad(loss)(params)
nested = {"layer": params, "scale": jnp.array(1.0)}
def nested_loss(p):
    return (p["scale"] * (jnp.dot(p["layer"]["weight"], x) + p["layer"]["bias"]) - 3.0) ** 2
'''

GRADE = r'''
def grade(answers):
    import numpy as np
    from pytree_lab.course import check
    out = {}
    for exercise_id, variants in answers.items():
        for variant, code in variants.items():
            space = {}
            exec(SETUP + code, space)
            result = check(exercise_id, space["answer"], rng=np.random.default_rng(7),
                           evidence=__import__("pytree_lab.exercises", fromlist=["Evidence"]).Evidence())
            out[f"{exercise_id}/{variant}"] = [result.passed, round(result.score, 4), result.feedback]
    return out
'''


def test_every_exercise_answer_gets_the_same_verdict_and_feedback_on_both_engines():
    script = (
        f"SETUP = {SETUP!r}\n"
        + GRADE
        + LITE_SCRIPT.split("cases = json.loads")[0]
        + "import json, sys\nprint('RESULT' + json.dumps(grade(json.loads(sys.argv[1]))))\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", script, json.dumps(EXERCISE_ANSWERS)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=600,
    )
    line = next((ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT")), None)
    assert line is not None, proc.stdout[-3000:] + proc.stderr[-3000:]
    lite = json.loads(line[len("RESULT") :])
    space: dict = {"SETUP": SETUP}
    exec(GRADE, space)
    real = space["grade"](EXERCISE_ANSWERS)
    assert sorted(lite) == sorted(real)
    for key in real:
        assert real[key][0] is True, (key, real[key])  # every reference and variant passes with JAX
        assert lite[key] == real[key], key
