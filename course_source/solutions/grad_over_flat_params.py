def grad_over_flat_params(flat_params, x):
    def loss(p):
        # slice inside the loss, so JAX follows how the loss depends on flat_params
        weights, bias = p[:-1], p[-1]
        predictions = x @ weights + bias
        return jnp.sum(predictions**2)  # a sum, not a mean

    return jax.grad(loss)(flat_params)


# the task's worked example: prediction 2, so [2*2*2, 2*2*3, 2*2] = [8, 12, 4]
print(grad_over_flat_params(jnp.array([1.0, 0.0, 0.0]), jnp.array([[2.0, 3.0]])))
