"""Reference solution for "Gradient of packed parameters" (content: the packed-parameters exercise)."""

import jax
import jax.numpy as jnp


def grad_over_flat_params(flat_params, x):
    def loss(flat):
        weights, bias = flat[:-1], flat[-1]
        predictions = x @ weights + bias
        return jnp.sum(predictions**2)

    return jax.grad(loss, argnums=0)(flat_params)


ANSWERS = {"grad_over_flat_params": grad_over_flat_params}
