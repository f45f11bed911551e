"""An answer must be computed, and computed the way the lesson asks (issue 19, part 1), and every
diagnosis must be true (part 2): each case is the exact cell a student runs and the exact sentence
the check says. Oracles: the lessons' hand derivations (96; [-8, -4] and -4; scale -4; [8, 12, 4];
the update [1.4, -0.8] and 0.2).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from pytree_lab import course
from pytree_lab.course import catalogue
from pytree_lab.exercises import Evidence, cells

PARAMS = {"weight": jnp.array([1.0, -1.0]), "bias": jnp.array(0.0)}
X = jnp.array([2.0, 1.0])


def loss(p):
    prediction = jnp.dot(p["weight"], X) + p["bias"]
    return (prediction - 3.0) ** 2


VALUE, GRADS = jax.value_and_grad(loss)(PARAMS)
UPDATED = jax.tree.map(lambda p, g: p - 0.05 * g, PARAMS, GRADS)
NOTEBOOK = {
    "jax": jax,
    "jnp": jnp,
    "np": np,
    "params": PARAMS,
    "x": X,
    "loss": loss,
    "value": VALUE,
    "grads": GRADS,
    "updated": UPDATED,
    "broken": {"weight": GRADS["weight"]},  # the lesson's cell before the repair
}

NAMES = {"squared_norm": ("norm_squared", "manual"), "nested_scale_grad": ("g",), "repair_update": ("fixed",)}


@pytest.fixture(autouse=True)
def _fresh_runs():
    cells.forget()
    yield
    cells.forget()


def run_and_check(exercise_id: str, code: str, notebook: dict | None = None):
    """Run `code` as the exercise cell in a notebook namespace, then click the check."""
    ns = dict(NOTEBOOK if notebook is None else notebook)
    cells.run_exercise_cell(exercise_id, code, ns)
    names = NAMES[exercise_id]
    if len(names) == 1:
        card = course.check_button(exercise_id, lambda: ns.get(names[0]), evidence=Evidence())
    else:
        card = course.check_button(exercise_id, lambda: {n: ns.get(n) for n in names}, evidence=Evidence())
    return card.check(), ns


def test_the_hand_values_are_the_oracles():
    assert float(VALUE) == 4.0
    assert GRADS["weight"].tolist() == [-8.0, -4.0] and float(GRADS["bias"]) == -4.0
    assert np.allclose(UPDATED["weight"], [1.4, -0.8]) and np.isclose(float(UPDATED["bias"]), 0.2)


# --------------------------------------------------------------------------- typed-in values


@pytest.mark.parametrize(
    ("exercise_id", "code", "said"),
    [
        (
            "squared_norm",
            "norm_squared = 96.0\nmanual = 96.0",
            "0 of 2 values right.\n"
            "norm_squared: this value does not change when `grads` changes: compute it from `grads`.\n"
            "manual: this value does not change when `grads` changes: compute it from `grads`.",
        ),
        (
            "squared_norm",
            "norm_squared = sum(jnp.sum(g ** 2) for g in jax.tree.leaves(grads))\nmanual = 64. + 16 + 16",
            "1 of 2 values right.\n"
            "norm_squared: Correct: the squared norm of all gradient leaves is 96.\n"
            "manual: this value does not change when `grads` changes: compute it from `grads`.",
        ),
        (
            "nested_scale_grad",
            'g = {"layer": {"weight": jnp.array([-8., -4.]), "bias": jnp.array(-4.)}, "scale": jnp.array(-4.)}',
            "g: this value does not change when `params` changes: build nested from `params` and compute g "
            "with jax.grad.",
        ),
        (
            "repair_update",
            'fixed = {"weight": jnp.array([1.4, -0.8]), "bias": jnp.array(0.2)}',
            "fixed: this value does not change when params and grads change: compute it from `params` and `grads` "
            "with jax.tree.map.",
        ),
    ],
)
def test_a_typed_in_answer_is_told_to_compute_it(exercise_id, code, said):
    result, _ = run_and_check(exercise_id, code)
    assert (result.passed, result.feedback) == (False, said)
    assert result.score == (0.5 if "1 of 2" in said else 0.0)


def test_an_answer_right_only_at_the_lesson_point_is_named_as_such():
    # follows grads, but adds the lesson's bias gradient in by hand
    code = (
        "norm_squared = jnp.sum(grads['weight'] ** 2) + 16.0\n"
        "manual = jnp.sum(grads['weight'] ** 2) + grads['bias'] ** 2"
    )
    result, _ = run_and_check("squared_norm", code)
    assert not result.passed
    assert result.feedback.splitlines()[1] == (
        "norm_squared: right for the lesson's grads, but not when grads hold other values: compute it from "
        "`grads`, without numbers of the lesson written in."
    )


def test_the_reruns_leave_the_students_data_alone():
    code = (
        "nested = {'layer': params, 'scale': jnp.array(1.)}\n"
        "params['touched'] = True\n"  # the cell changes a dict in place
        "del params['touched']\n"
        "def nested_loss(p):\n"
        "    pred = p['scale'] * (jnp.dot(p['layer']['weight'], x) + p['layer']['bias'])\n"
        "    return (pred - 3.) ** 2\n"
        "g = jax.grad(nested_loss)(nested)\n"
        "seen.append(float(g['scale']))\n"
    )
    mine = dict(PARAMS)
    seen: list[float] = []
    result, ns = run_and_check("nested_scale_grad", code, {**NOTEBOOK, "params": mine, "seen": seen})
    assert result.passed, result.feedback
    assert ns["params"] is mine and set(mine) == {"weight", "bias"}
    assert ns["g"]["scale"] == -4.0  # the notebook's g is the student's own, not a rerun's
    assert seen == [-4.0]  # the reruns appended to copies of the list the cell names, never to it


def test_a_rerun_that_fails_is_said_without_the_hidden_values():
    code = (
        "norm_squared = sum(jnp.sum(g ** 2) for g in jax.tree.leaves(grads))\n"
        "manual = jnp.sum(grads['weight'] ** 2) + grads['bias'] ** 2\n"
        "if float(grads['bias']) != -4.0:\n    raise ValueError(f'not the lesson: {float(grads[\"bias\"])}')\n"
    )
    result, _ = run_and_check("squared_norm", code)
    assert not result.passed
    assert (
        "norm_squared: your cell, run again with other values in grads (to see that the answer is computed "
        "from them), raised ValueError: not the lesson: …. Compute the answer from grads, not from the "
        "lesson's numbers."
    ) in result.feedback


# --------------------------------------------------------------------------- accepted cell answers

ACCEPTED_CELLS = [
    (
        "squared_norm",
        "norm_squared = sum(jnp.sum(g ** 2) for g in jax.tree.leaves(grads))\n"
        "manual = jnp.sum(grads['weight'] ** 2) + grads['bias'] ** 2\n"
        "assert jnp.allclose(norm_squared, manual)\nassert jnp.allclose(norm_squared, 96.)",
    ),
    (
        "squared_norm",
        "norm_squared = jnp.sum(jax.flatten_util.ravel_pytree(grads)[0] ** 2)\n"
        "manual = float(grads['weight'][0] ** 2 + grads['weight'][1] ** 2 + grads['bias'] ** 2)",
    ),
    (
        "squared_norm",
        "norm_squared = sum(jax.tree.leaves(jax.tree.map(lambda g: jnp.sum(g ** 2), grads)))\n"
        "manual = np.sum(np.asarray(grads['weight']) ** 2) + np.asarray(grads['bias']) ** 2",
    ),
    (
        "squared_norm",
        "g2 = jax.grad(loss)(params)\nnorm_squared = sum(jnp.vdot(g, g) for g in jax.tree.leaves(g2))\n"
        "manual = jnp.dot(g2['weight'], g2['weight']) + g2['bias'] * g2['bias']",
    ),
    (
        "nested_scale_grad",
        'nested = {"layer": params, "scale": jnp.array(1.)}\n'
        "def nested_loss(p):\n"
        '    pred = p["scale"] * (jnp.dot(p["layer"]["weight"], x) + p["layer"]["bias"])\n'
        "    return (pred - 3.) ** 2\n"
        "g = jax.grad(nested_loss)(nested)\n"
        'assert jnp.allclose(g["scale"], -4.)',
    ),
    (
        "nested_scale_grad",
        'nested = {"layer": dict(params), "scale": jnp.array(1.)}\n'
        "def nested_loss(p):\n"
        '    layer = p["layer"]\n'
        '    return (p["scale"] * (layer["weight"] @ x + layer["bias"]) - 3.) ** 2\n'
        "_, g = jax.value_and_grad(nested_loss)(nested)",
    ),
    (
        "repair_update",
        "fixed = jax.tree.map(lambda p, g: p - 0.05 * g, params, grads)\n"
        "assert jnp.allclose(loss(fixed), 0.64, atol=1e-6)",
    ),
    (
        "repair_update",
        "restored = {'weight': grads['weight'], 'bias': grads['bias']}\n"
        "fixed = jax.tree.map(lambda p, g: p - 0.05 * g, params, restored)",
    ),
    ("repair_update", "fixed = jax.tree.map(lambda p, g: p - 0.05 * g, params, jax.grad(loss)(params))"),
    ("repair_update", "fixed = {k: params[k] - 0.05 * grads[k] for k in params}"),
]


@pytest.mark.parametrize(("exercise_id", "code"), ACCEPTED_CELLS)
def test_accepted_ways_to_compute_a_cell_answer(exercise_id, code):
    result, _ = run_and_check(exercise_id, code)
    assert (result.passed, result.score) == (True, 1.0), result.feedback


# Honest answers the reruns once took for typed-in numbers (issue 33), each with what it does.
HONEST = {
    "repair from broken, bias restored with **": (
        "repair_update",
        'fixed = jax.tree.map(lambda p, g: p - 0.05 * g, params, {**broken, "bias": grads["bias"]})',
    ),
    "repair from a copy of broken": (
        "repair_update",
        'repaired = dict(broken)\nrepaired["bias"] = grads["bias"]\n'
        "fixed = jax.tree_util.tree_map(lambda p, g: p - 0.05 * g, params, repaired)",
    ),
    "repair with | and a learning-rate name": (
        "repair_update",
        'lr = 0.05\nfixed = jax.tree.map(lambda p, g: p - lr * g, params, broken | {"bias": grads["bias"]})',
    ),
    "repair naming both leaves of broken and grads": (
        "repair_update",
        'fixed = jax.tree.map(lambda p, g: p - 0.05 * g, params, {"weight": broken["weight"], "bias": grads["bias"]})',
    ),
    "norm as int() of the sum": (
        "squared_norm",
        "norm_squared = int(sum(jnp.sum(g ** 2) for g in jax.tree.leaves(grads)))\n"
        'manual = int(jnp.sum(grads["weight"] ** 2) + grads["bias"] ** 2)',
    ),
    "norm rounded to 2 decimals": (
        "squared_norm",
        "norm_squared = round(float(sum(jnp.sum(g ** 2) for g in jax.tree.leaves(grads))), 2)\n"
        'manual = round(float(grads["weight"] @ grads["weight"] + grads["bias"] ** 2), 2)',
    ),
    "norm from optax.tree.norm": (
        "squared_norm",
        "import optax\nnorm_squared = optax.tree.norm(grads) ** 2\n"
        'manual = sum(float((g ** 2).sum()) for g in (grads["weight"], grads["bias"]))',
    ),
    "nested with leaves copied and (3 - pred) squared": (
        "nested_scale_grad",
        'nested = {"layer": {"weight": params["weight"], "bias": params["bias"]}, "scale": jnp.float32(1.0)}\n'
        "def nested_loss(p):\n"
        '    pred = p["scale"] * (p["layer"]["weight"] @ x + p["layer"]["bias"])\n'
        "    return jnp.square(3. - pred)\n"
        "g = jax.value_and_grad(nested_loss)(nested)[1]",
    ),
    "nested with the loss of the lesson reused": (
        "nested_scale_grad",
        'nested = {"layer": params, "scale": jnp.array(1.)}\n'
        "def nested_loss(p):\n"
        '    layer = jax.tree.map(lambda leaf: leaf * p["scale"], p["layer"])\n'
        "    return loss(layer)\n"
        "g = jax.grad(nested_loss)(nested)",
    ),
}


@pytest.mark.parametrize("variant", list(HONEST))
def test_an_honest_answer_is_never_taken_for_typed_in_numbers(variant):
    exercise_id, code = HONEST[variant]
    result, _ = run_and_check(exercise_id, code)
    assert (result.passed, result.score) == (True, 1.0), result.feedback


# --------------------------------------------------------------------------- the nested exercise

NESTED = (
    'nested = {{"layer": params, "scale": jnp.array(1.)}}\n'
    "def nested_loss(p):\n"
    '    pred = p["scale"] * (jnp.dot({weight}, x) + {bias})\n'
    "    return {ret}\n"
    "g = jax.grad(nested_loss)(nested)"
)
THROUGH_P = {"weight": 'p["layer"]["weight"]', "bias": 'p["layer"]["bias"]'}


def test_a_missing_square_is_the_residual_not_the_parameter_value():
    result, ns = run_and_check("nested_scale_grad", NESTED.format(**THROUGH_P, ret="pred - 3."))
    # the student's scale gradient is w·x + b = 1, which equals the parameter scale = 1 by coincidence
    assert float(ns["g"]["scale"]) == 1.0
    assert result.feedback == (
        "0 of 3 leaves of the gradient tree are right.\n"
        "- nested_loss returns -2 at the start: that is the residual pred − 3, not the "
        "squared error. Square it: return (pred - 3.) ** 2."
    )
    assert "holds the parameter value" not in result.feedback


def test_a_loss_that_reads_the_outer_params_does_not_depend_on_its_argument():
    code = NESTED.format(weight='params["weight"]', bias='params["bias"]', ret="(pred - 3.) ** 2")
    result, ns = run_and_check("nested_scale_grad", code)
    assert float(ns["g"]["layer"]["bias"]) == 0.0  # equals the parameter bias 0 by coincidence
    assert result.feedback == (
        "1 of 3 leaves of the gradient tree are right.\n"
        "- nested_loss does not depend on p['layer']['bias'], p['layer']['weight'] (its gradient is 0 at every "
        "point tried): the loss does not use them, or reads them from outside (params?) instead of through its "
        "argument p. JAX "
        'differentiates only what the loss computes from p: read every leaf through p, as p["layer"]["weight"].'
    )


def test_a_nested_tree_built_wrong_is_said_first():
    code = NESTED.format(**THROUGH_P, ret="(pred - 3.) ** 2").replace(
        '"scale": jnp.array(1.)', '"scale": jnp.array(2.)'
    )
    result, _ = run_and_check("nested_scale_grad", code)
    assert result.feedback.splitlines()[1] == (
        '- nested is not {"layer": params, "scale": 1.0}: build it from params, with scale a float scalar '
        "equal to 1 (jnp.array(1.))."
    )


def test_without_the_students_function_the_tree_still_gets_a_true_diagnosis():
    # check() given only the tree (no cell): judged by the whole tree, not one coincidental leaf
    residual = {"layer": {"weight": jnp.array([2.0, 1.0]), "bias": jnp.array(1.0)}, "scale": jnp.array(1.0)}
    result = catalogue.check("nested_scale_grad", residual, evidence=Evidence())
    assert result.feedback == (
        "0 of 3 leaves of the gradient tree are right.\n"
        "- g is the gradient of the residual pred − 3, not of the squared error: "
        "nested_loss must return (pred - 3.) ** 2."
    )
    outer = {"layer": {"weight": jnp.array([0.0, 0.0]), "bias": jnp.array(0.0)}, "scale": jnp.array(-4.0)}
    result = catalogue.check("nested_scale_grad", outer, evidence=Evidence())
    assert "holds the parameter value" not in result.feedback
    assert (
        "- ['layer']['bias'], ['layer']['weight']: is 0: the loss does not depend on this leaf. Does "
        "nested_loss read it through its argument p (not from params outside the function)?"
    ) in result.feedback


# --------------------------------------------------------------------------- the repair exercise


def test_swapped_gradient_leaves_are_named_as_swapped():
    result, _ = run_and_check(
        "repair_update",
        "fixed = jax.tree.map(lambda p, g: p - 0.05 * g, params, {'weight': grads['bias'], 'bias': grads['weight']})",
    )
    assert result.feedback == (
        "0 of 2 leaves of the updated parameter tree are right.\n"
        "- the gradient leaves are swapped: weight was stepped with the bias gradient and bias with the weight "
        "gradient (so bias became an array of 2 values). Pair each parameter with its own gradient by path: "
        "jax.tree.map(lambda p, g: p - 0.05 * g, params, grads)."
    )


def test_the_positional_zip_is_named_as_a_zip():
    code = "fixed = {k: p - 0.05 * g for (k, p), g in zip(params.items(), jax.tree.leaves(grads))}"
    result, ns = run_and_check("repair_update", code)
    assert np.allclose(ns["fixed"]["weight"], [1.2, -0.8])  # weight stepped with the bias gradient -4
    assert result.feedback.splitlines()[1] == (
        "- your zip pairs leaves by position, and the positions disagree: params' values come in the order "
        "written (weight, bias), the gradients in flatten order (bias, weight: keys sorted, as "
        "jax.tree.leaves(grads) and JAX's gradient dict give them). So weight was stepped with the bias gradient "
        "and bias with the weight gradient. Pair by path instead: jax.tree.map(lambda p, g: p - 0.05 * g, "
        "params, grads)."
    )
    code = "fixed = dict(zip(params, [p - 0.05 * g for p, g in zip(jax.tree.leaves(params), jax.tree.leaves(grads))]))"
    result, _ = run_and_check("repair_update", code)
    assert result.feedback.splitlines()[1].startswith(
        "- your zip put the updated values under each other's keys: it pairs params' keys in the order written "
        "(weight, bias) with leaves in flatten order (bias, weight: keys sorted)"
    )


# --------------------------------------------------------------------------- the packed exercise

PACKED_LOSS = "    def loss(p):\n        return {reduce}((x @ p[:-1] + p[-1]) ** 2)\n"


def _fn(source: str):
    ns = dict(NOTEBOOK)
    exec(compile(source, "<answer>", "exec"), ns)  # noqa: S102 - the student's cell, as the magic runs it
    return ns["grad_over_flat_params"]


NUMPY_ONLY = [
    # a derivation by hand, in numpy
    "def grad_over_flat_params(flat_params, x):\n"
    "    f, x = np.asarray(flat_params), np.asarray(x)\n"
    "    pred = x @ f[:-1] + f[-1]\n"
    "    return np.concatenate([2 * x.T @ pred, [2 * pred.sum()]])\n",
    # the same formula in jax.numpy
    "def grad_over_flat_params(flat_params, x):\n"
    "    pred = x @ flat_params[:-1] + flat_params[-1]\n"
    "    return jnp.append(2 * x.T @ pred, 2 * jnp.sum(pred))\n",
]


@pytest.mark.parametrize("source", NUMPY_ONLY, ids=["numpy", "jnp-formula"])
def test_a_gradient_derived_by_hand_is_computed_and_passes(source):
    """A formula worked out by hand computes from its inputs on every hidden case: the practice
    check passes it, as nbgrader's grader does (no count of autodiff traces decides a verdict)."""
    fn = _fn(source)
    assert np.allclose(fn(jnp.array([1.0, 0.0, 0.0]), jnp.array([[2.0, 3.0]])), [8.0, 12.0, 4.0])
    result = catalogue.check("grad_over_flat_params", fn, evidence=Evidence())
    assert (result.passed, result.score, result.cases_passed) == (True, 1.0, 5), result.feedback


ACCEPTED_FUNCTIONS = {
    "grad": "def grad_over_flat_params(flat_params, x):\n"
    + PACKED_LOSS.format(reduce="jnp.sum")
    + "    return jax.grad(loss)(flat_params)\n",
    "value_and_grad[1]": "def grad_over_flat_params(flat_params, x):\n"
    + PACKED_LOSS.format(reduce="jnp.sum")
    + "    return jax.value_and_grad(loss)(flat_params)[1]\n",
    "python sum": "def grad_over_flat_params(flat_params, x):\n"
    + PACKED_LOSS.format(reduce="sum")
    + "    return jax.grad(loss)(flat_params)\n",
    "np.sum inside the traced loss": "def grad_over_flat_params(flat_params, x):\n"
    + PACKED_LOSS.format(reduce="np.sum")
    + "    return jax.grad(loss)(flat_params)\n",
    "argnums=0 on a two-argument loss": "def grad_over_flat_params(flat_params, x):\n"
    "    def loss(p, x):\n        return jnp.sum((x @ p[:-1] + p[-1]) ** 2)\n"
    "    return jax.grad(loss, argnums=0)(flat_params, x)\n",
    "jit-compiled": "@jax.jit\ndef grad_over_flat_params(flat_params, x):\n"
    + PACKED_LOSS.format(reduce="jnp.sum")
    + "    return jax.grad(loss)(flat_params)\n",
    "vmap of per-example grads": "def grad_over_flat_params(flat_params, x):\n"
    "    one = jax.grad(lambda p, xi: (xi @ p[:-1] + p[-1]) ** 2)\n"
    "    return jnp.sum(jax.vmap(one, in_axes=(None, 0))(flat_params, x), axis=0)\n",
    "jacrev": "def grad_over_flat_params(flat_params, x):\n"
    + PACKED_LOSS.format(reduce="jnp.sum")
    + "    return jax.jacrev(loss)(flat_params)\n",
    "vjp": "def grad_over_flat_params(flat_params, x):\n"
    + PACKED_LOSS.format(reduce="jnp.sum")
    + "    value, pullback = jax.vjp(loss, flat_params)\n    return pullback(jnp.ones_like(value))[0]\n",
}


@pytest.mark.parametrize("name", list(ACCEPTED_FUNCTIONS))
def test_accepted_ways_to_write_the_packed_gradient(name):
    fn = _fn(ACCEPTED_FUNCTIONS[name])
    for _ in range(2):  # a second check (compiled code cached by now) is still seen differentiating
        result = catalogue.check("grad_over_flat_params", fn, evidence=Evidence())
        assert (result.passed, result.score) == (True, 1.0), (name, result.feedback)


def test_what_a_rerun_records_is_taken_out_of_the_evidence_again():
    from pytree_lab.exercises import default_evidence, record_output

    log = default_evidence()
    before = len(log.outputs)
    code = (
        "norm_squared = sum(jnp.sum(g ** 2) for g in jax.tree.leaves(grads))\n"
        "manual = jnp.sum(grads['weight'] ** 2) + grads['bias'] ** 2\n"
        "record_output('my squared norm', norm_squared)"
    )
    result, _ = run_and_check("squared_norm", code, {**NOTEBOOK, "record_output": record_output})
    assert result.passed, result.feedback
    assert [o["value"] for o in log.outputs[before:]] == [96.0]  # the student's run only, not the reruns'
    del log.outputs[before:]
