"""Extend to a nested model: the gradient tree g of nested_loss at {"layer": params, "scale": 1.0}."""

from __future__ import annotations

from ...exercises import Exercise, Outcome, TreeSpec, fmt_num, grade_tree, tools
from .common import _lesson_setup, _nested_loss, _nested_params, _whole_tree, self_check


def _residual_loss(p, x, target):
    jnp = tools.jnp
    return p["scale"] * (jnp.dot(p["layer"]["weight"], x) + p["layer"]["bias"]) - target


def _grade_nested_scale_grad(answer, rng=None) -> Outcome:
    jax, jnp = tools.jax, tools.jnp
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
    spec = TreeSpec(
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
    outcome = grade_tree(answer, spec)
    if outcome.passed:
        outcome.lines.append(
            f"d loss / d scale: {fmt_num(grads['scale'])}, as derived by hand "
            "(residual −2, times 2, times w·x + b = 1)."
        )
    return outcome


_SOLUTION_NESTED = """\
nested = {"layer": params, "scale": jnp.array(1.)}
def nested_loss(p):
    pred = p["scale"] * (jnp.dot(p["layer"]["weight"], x) + p["layer"]["bias"])
    return (pred - 3.) ** 2
g = jax.grad(nested_loss)(nested)
assert jax.tree.structure(g) == jax.tree.structure(nested)
assert jnp.allclose(g["scale"], -4.)"""

EXERCISE = Exercise(
    "nested_scale_grad",
    "Extend to a nested model",
    'The gradient tree g of nested_loss at {"layer": params, "scale": 1.0}.',
    "tree",
    _grade_nested_scale_grad,
    lesson="Pytrees and structured parameters",
    answer_name="g",
    solutions=(_SOLUTION_NESTED,),
    self_check=self_check,
    unit="leaves",
)
