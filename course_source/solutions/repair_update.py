try:
    jax.tree.map(lambda p, g: p - 0.05 * g, params, {"weight": grads["weight"]})
except ValueError:
    print("Expected tree mismatch")
else:
    raise AssertionError("Expected a missing-key failure")
fixed = jax.tree.map(lambda p, g: p - 0.05 * g, params, grads)
assert jnp.allclose(loss(fixed), 0.64, atol=1e-6)
