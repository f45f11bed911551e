"""What the course's exercises share: the lesson model they grade against (`pytree_lab.lesson`),
computed with `jax.grad` when a check runs, a tree comparison, and the checker's self-check."""

from __future__ import annotations

from ... import lesson
from ...exercises import as_number_array, close, exception_text, run_guarded, tools


def _lesson_setup():
    """The lesson model's params, x, target and learning rate (pytree_lab.lesson)."""
    inputs = lesson.lesson_inputs()
    return lesson.lesson_params(), inputs["x"], inputs["target"], lesson.LEARNING_RATE


def _lesson_loss(p, x, target):
    jnp = tools.jnp
    return (jnp.dot(p["weight"], x) + p["bias"] - target) ** 2


def _nested_params():
    return {"layer": lesson.lesson_params(), "scale": tools.jnp.array(1.0)}


def _nested_loss(p, x, target):
    jnp = tools.jnp
    prediction = p["scale"] * (jnp.dot(p["layer"]["weight"], x) + p["layer"]["bias"])
    return (prediction - target) ** 2


def _lesson_step():
    """params, grads, updated and both losses for the lesson's model, computed with jax."""
    jax = tools.jax
    params, x, target, lr = _lesson_setup()
    loss, grads = jax.value_and_grad(_lesson_loss)(params, x, target)
    updated = jax.tree.map(lambda p, g: p - lr * g, params, grads)
    return params, grads, updated, float(loss), float(_lesson_loss(updated, x, target))


def _same_tree(a, b) -> bool:
    if isinstance(b, dict):
        return isinstance(a, dict) and set(a) == set(b) and all(_same_tree(a[k], b[k]) for k in b)
    arr, want = as_number_array(a), tools.np.asarray(b)
    return arr is not None and arr.shape == want.shape and bool(close(arr, want))


def _whole_tree(answer, trees) -> str | None:
    """The sentence of the first (tree, sentence) the whole answer equals, leaf for leaf."""
    for tree, sentence in trees:
        found = run_guarded(_same_tree, answer, tree, budget=2.0)
        if found.ok and found.value:
            return sentence
    return None


def self_check() -> str | None:
    """The checker's tools against the lessons' hand derivations (loss 4, grads [-8, -4] and -4,
    the packed example's [8, 12, 4]). None when they agree."""
    from .grad_over_flat_params import _FLAT_EXAMPLE_PARAMS, _FLAT_EXAMPLE_X, _flat_grad_fn

    try:
        _, grads, _, loss, loss_after = _lesson_step()
        weight = [float(v) for v in grads["weight"]]
        bias = float(grads["bias"])
        flat = _flat_grad_fn()(tools.jnp.array(_FLAT_EXAMPLE_PARAMS), tools.jnp.array(_FLAT_EXAMPLE_X))
        flat = [float(v) for v in flat]
    except BaseException as exc:  # noqa: BLE001
        return f"computing the lesson's worked example failed ({exception_text(exc)})."
    ok = (
        abs(loss - 4.0) < 1e-6
        and abs(weight[0] + 8) < 1e-5
        and abs(weight[1] + 4) < 1e-5
        and abs(bias + 4) < 1e-5
        and abs(loss_after - 0.64) < 1e-5
        and len(flat) == 3
        and all(abs(a - b) < 1e-4 for a, b in zip(flat, (8.0, 12.0, 4.0)))
    )
    if not ok:
        return (
            "jax or numpy in this kernel no longer computes the lesson's worked example "
            "(loss 4, gradients [-8, -4] and -4): something replaced one of their functions."
        )
    return None
