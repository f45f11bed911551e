"""The value exercises' graders (squared_norm, nested_scale_grad, repair_update) and the lesson
model they grade against (`pytree_lab.lesson`): every expected value is computed with `jax.grad`
of a reference loss when a check runs."""

from __future__ import annotations

import math

from .. import lesson
from ..exercises._grading import (
    Outcome,
    _as_number_array,
    _close,
    _fmt,
    _fmt_num,
    _fmt_shape,
    _grade_number,
    _jax,
    _jnp,
    _np,
    _type_name,
)
from ..exercises._guard import run_guarded
from ..exercises._tree_grading import _grade_tree, _TreeSpec


def _lesson_setup():
    """The lesson model's params, x, target and learning rate (pytree_lab.lesson)."""
    inputs = lesson.lesson_inputs()
    return lesson.lesson_params(), inputs["x"], inputs["target"], lesson.LEARNING_RATE


def _lesson_loss(p, x, target):
    jnp = _jnp()
    return (jnp.dot(p["weight"], x) + p["bias"] - target) ** 2


def _nested_params():
    return {"layer": lesson.lesson_params(), "scale": _jnp().array(1.0)}


def _nested_loss(p, x, target):
    jnp = _jnp()
    prediction = p["scale"] * (jnp.dot(p["layer"]["weight"], x) + p["layer"]["bias"])
    return (prediction - target) ** 2


def _lesson_step():
    """params, grads, updated and both losses for the lesson's model, computed with jax."""
    jax = _jax()
    params, x, target, lr = _lesson_setup()
    loss, grads = jax.value_and_grad(_lesson_loss)(params, x, target)
    updated = jax.tree.map(lambda p, g: p - lr * g, params, grads)
    return params, grads, updated, float(loss), float(_lesson_loss(updated, x, target))


def _same_tree(a, b) -> bool:
    if isinstance(b, dict):
        return isinstance(a, dict) and set(a) == set(b) and all(_same_tree(a[k], b[k]) for k in b)
    arr, want = _as_number_array(a), _np().asarray(b)
    return arr is not None and arr.shape == want.shape and bool(_close(arr, want))


def _squared_norm_parts():
    jax, jnp = _jax(), _jnp()
    params, grads, updated, _, _ = _lesson_step()
    leaves = jax.tree.leaves(grads)
    expected = float(sum(jnp.sum(g**2) for g in leaves))
    weight_part = float(jnp.sum(grads["weight"] ** 2))
    bias_part = float(grads["bias"] ** 2)
    total = float(sum(jnp.sum(g) for g in leaves))
    n_values = sum(int(g.size) for g in leaves)
    variants = [
        (math.sqrt(expected), "That is the norm; the exercise asks for the squared norm (no square root)."),
        (weight_part, "That is the weight leaf alone: the bias gradient's square is missing."),
        (bias_part, "That is the bias leaf alone: add the weight leaf's squares too."),
        (
            weight_part + float(grads["bias"]),
            "The bias gradient was added without squaring it: square every leaf's values, the bias too.",
        ),
        (
            float(sum(jnp.sum(jnp.abs(g)) for g in leaves)),
            "That is the sum of absolute gradients: square each value before adding.",
        ),
        (total, "That is the sum of the gradients: square each value before adding."),
        (total**2, "You squared the sum; sum the squares instead."),
        (expected / n_values, f"That is a mean over the {n_values} values (jnp.mean); the exercise asks for a sum."),
        (
            float(sum(jnp.mean(g**2) for g in leaves)),
            "You averaged inside each leaf (jnp.mean); add every value's square instead (jnp.sum).",
        ),
        (
            float(sum(jnp.sum(p**2) for p in jax.tree.leaves(params))),
            "That is the squared norm of the parameters, not of the gradient leaves.",
        ),
        (
            float(sum(jnp.sum(p**2) for p in jax.tree.leaves(updated))),
            "That is the squared norm of the updated parameters, not of the gradient leaves.",
        ),
    ]
    per_value = jnp.concatenate([jnp.ravel(g**2) for g in leaves])
    per_leaf = jnp.stack([jnp.sum(g**2) for g in leaves])
    # sum(g**2 for g in leaves) without a reduction inside each leaf: the bias's square is
    # broadcast onto every weight entry, giving a weight-shaped array
    broadcast = grads["weight"] ** 2 + grads["bias"] ** 2
    return expected, variants, per_value, per_leaf, broadcast


def _grade_one_norm(answer, name: str, parts) -> Outcome:
    np = _np()
    expected, variants, per_value, per_leaf, broadcast = parts
    arr = _as_number_array(answer)
    if arr is not None and arr.shape == tuple(broadcast.shape) and _close(arr, broadcast):
        return Outcome(
            0,
            1,
            [
                f"{name} has shape {_fmt_shape(arr.shape)}, not one number: adding whole leaves "
                "(`sum(g**2 for g in leaves)`) broadcasts the bias's square onto each weight entry. "
                "Reduce inside each leaf first: `jnp.sum(g**2)`, then add the leaves."
            ],
        )
    if isinstance(answer, (list, tuple)) and answer and all(_as_number_array(v) is not None for v in answer):
        try:
            values = np.asarray([float(np.asarray(v).sum()) for v in answer])
        except (TypeError, ValueError):
            values = None
        if values is not None and values.shape == tuple(per_leaf.shape) and _close(np.sort(values), np.sort(per_leaf)):
            return Outcome(
                0,
                1,
                [
                    f"{name} is {_type_name(answer)}, one sum per leaf ({_fmt(values)}): right so far. "
                    "Add the leaves' sums into one number."
                ],
            )
    outcome = _grade_number(
        answer,
        expected,
        variants,
        what="the squared norm of all gradient leaves",
        per_value=per_value,
        per_leaf=per_leaf,
    )
    outcome.lines = [f"{name}: {line}" for line in outcome.lines]
    return outcome


def _grade_squared_norm(answer, rng=None) -> Outcome:
    """`norm_squared` alone, or {"norm_squared": ..., "manual": ...}: each graded."""
    parts = _squared_norm_parts()
    if isinstance(answer, dict) and set(answer) <= {"norm_squared", "manual"} and answer:
        outcomes = []
        for name in ("norm_squared", "manual"):
            if name not in answer or answer[name] is None or answer[name] is Ellipsis:
                outcomes.append(Outcome(0, 1, [f"{name}: not answered yet (replace its `...`)."]))
            else:
                outcomes.append(_grade_one_norm(answer[name], name, parts))
        passed = sum(o.passed_cases for o in outcomes)
        lines = [line for o in outcomes for line in o.lines]
        return Outcome(passed, 2, [f"{passed} of 2 values right."] + lines)
    return _grade_one_norm(answer, "norm_squared", parts)


def _residual_loss(p, x, target):
    jnp = _jnp()
    return p["scale"] * (jnp.dot(p["layer"]["weight"], x) + p["layer"]["bias"]) - target


def _whole_tree(answer, trees) -> str | None:
    """The sentence of the first (tree, sentence) the whole answer equals, leaf for leaf."""
    for tree, sentence in trees:
        found = run_guarded(_same_tree, answer, tree, budget=2.0)
        if found.ok and found.value:
            return sentence
    return None


def _grade_nested_scale_grad(answer, rng=None) -> Outcome:
    jax, jnp = _jax(), _jnp()
    nested = _nested_params()
    _, x, target, _ = _lesson_setup()
    grads = jax.grad(_nested_loss)(nested, x, target)
    # mistakes recognised by the whole tree, never by one leaf that happens to equal a value
    whole = _whole_tree(
        answer,
        (
            (
                nested,
                "g holds the parameter value, not its gradient, at every leaf: g = jax.grad(nested_loss)(nested).",
            ),
            (
                jax.grad(_residual_loss)(nested, x, target),
                "g is the gradient of the residual pred − 3, not of the squared error: nested_loss must return "
                "(pred - 3.) ** 2.",
            ),
        ),
    )
    if whole is not None:
        return Outcome(0, 3, ["0 of 3 leaves of the gradient tree are right.", f"- {whole}"])
    spec = _TreeSpec(
        expected=grads,
        name="the gradient tree",
        related=(
            (
                jax.tree.map(lambda g: -g, grads),
                "the sign is flipped. The residual is prediction − target, which is negative here.",
            ),
            (
                jax.tree.map(jnp.zeros_like, grads),
                "is 0: the loss does not depend on this leaf. Does nested_loss read it through its argument p "
                "(not from params outside the function)?",
            ),
        ),
        hints={
            "['scale']": "At the start the prediction is 1 and the residual is −2; d/dscale multiplies "
            "the derivative of the squared loss by w·x + b.",
            "['layer']['weight']": "Each weight's gradient is the derivative of the loss with respect to "
            "the prediction, times scale, times its input.",
            "['layer']['bias']": "The bias gradient is the derivative with respect to the prediction, times scale.",
        },
    )
    outcome = _grade_tree(answer, spec)
    if outcome.passed:
        outcome.lines.append(
            f"d loss / d scale: {_fmt_num(grads['scale'])}, as derived by hand "
            "(residual −2, times 2, times w·x + b = 1)."
        )
    return outcome


_SWAPPED = (
    "the gradient leaves are swapped: weight was stepped with the bias gradient and bias with the "
    "weight gradient (so bias became an array of 2 values). Pair each parameter with its own gradient "
    "by path: jax.tree.map(lambda p, g: p - 0.05 * g, params, grads)."
)
_ZIP = (
    "your zip pairs leaves by position, and the positions disagree: params' values come in the order "
    "written (weight, bias), the gradients in flatten order (bias, weight: keys sorted, as "
    "jax.tree.leaves(grads) and JAX's gradient dict give them). So weight was stepped with the bias gradient "
    "and bias with the weight gradient. Pair by path instead: jax.tree.map(lambda p, g: p - 0.05 * g, "
    "params, grads)."
)
_KEYS_SWAPPED = (
    "the updated values are right but under each other's keys: weight holds the updated bias and "
    "bias the updated weight, as zipping params' keys (weight, bias: the order written) with "
    "leaves in flatten order (bias, weight) does. Keep the structure: jax.tree.map(lambda p, g: "
    "p - 0.05 * g, params, grads)."
)

_ZIP_KEYS = (
    "your zip put the updated values under each other's keys: it pairs params' keys in the order "
    "written (weight, bias) with leaves in flatten order (bias, weight: keys sorted), so weight holds "
    "the updated bias and bias the updated weight. Keep the structure: jax.tree.map(lambda p, g: "
    "p - 0.05 * g, params, grads)."
)


def _grade_repair_update(answer, rng=None) -> Outcome:
    jax, jnp = _jax(), _jnp()
    params, grads, updated, loss_before, loss_after = _lesson_step()
    spec = _TreeSpec(
        expected=updated,
        name="the updated parameter tree",
        related=(
            (
                params,
                "still holds the original parameter: it was not updated. Every parameter leaf needs "
                "its own gradient leaf in tree.map.",
            ),
            (grads, "holds the gradient, not the updated parameter (p − learning_rate · g)."),
            (
                jax.tree.map(lambda p, g: p + lesson.LEARNING_RATE * g, params, grads),
                "holds p + learning_rate · g, a step uphill; subtract the gradient.",
            ),
        ),
        hints={
            "['weight']": "Use p − 0.05 · g with the weight gradient from value_and_grad.",
            "['bias']": "Use p − 0.05 · g with the bias gradient; restore bias in the gradient tree first.",
        },
    )
    lr = lesson.LEARNING_RATE
    whole = _whole_tree(
        answer,
        (
            (
                {"weight": params["weight"] - lr * grads["bias"], "bias": params["bias"] - lr * grads["weight"]},
                _SWAPPED,
            ),
            ({"weight": updated["bias"], "bias": updated["weight"]}, _KEYS_SWAPPED),
        ),
    )
    if whole is not None:
        return Outcome(0, 2, ["0 of 2 leaves of the updated parameter tree are right.", f"- {whole}"])
    outcome = _grade_tree(answer, spec)
    # The loss at the student's tree: the lesson's evidence that the repair worked.
    try:
        leaves = {k: _as_number_array(v) for k, v in answer.items()} if isinstance(answer, dict) else {}
        if set(leaves) == {"weight", "bias"} and all(v is not None for v in leaves.values()):
            _, x, target, _ = _lesson_setup()
            candidate = {k: jnp.asarray(v, dtype=jnp.float32) for k, v in leaves.items()}
            loss = float(_lesson_loss(candidate, x, target))
            outcome.lines.append(
                f"Loss at your updated tree: {_fmt_num(loss)} (before the step: "
                f"{_fmt_num(loss_before)}; the repaired update gives {_fmt_num(loss_after)})."
            )
    except Exception:  # a malformed tree already has its feedback above
        pass
    return outcome
