# Transform every leaf of the gradient pytree, then add the leaves' sums.
norm_squared = sum(jnp.sum(g**2) for g in jax.tree.leaves(grads))
# Aggregate the array values directly, leaf by leaf.
manual = jnp.sum(grads["weight"] ** 2) + grads["bias"] ** 2
assert jnp.allclose(norm_squared, manual)
assert jnp.allclose(norm_squared, 96.0)
