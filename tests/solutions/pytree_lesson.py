"""Reference solutions for "Pytrees and structured parameters" (content: the pytree lesson)."""

import jax
import jax.numpy as jnp

params = {"weight": jnp.array([1.0, -1.0]), "bias": jnp.array(0.0)}
x = jnp.array([2.0, 1.0])


def loss(p):
    prediction = jnp.dot(p["weight"], x) + p["bias"]
    return (prediction - 3.0) ** 2


value, grads = jax.value_and_grad(loss)(params)
updated = jax.tree.map(lambda p, g: p - 0.05 * g, params, grads)

# Make it yours: the squared norm of all gradient leaves
norm_squared = sum(jnp.sum(g**2) for g in jax.tree.leaves(grads))
manual = jnp.sum(grads["weight"] ** 2) + grads["bias"] ** 2

# Extend to a nested model
nested = {"layer": params, "scale": jnp.array(1.0)}


def nested_loss(p):
    pred = p["scale"] * (jnp.dot(p["layer"]["weight"], x) + p["layer"]["bias"])
    return (pred - 3.0) ** 2


g = jax.grad(nested_loss)(nested)

# Repair a mismatched update tree: the broken gradient tree fails, the restored one works
try:
    jax.tree.map(lambda p, g: p - 0.05 * g, params, {"weight": grads["weight"]})
except ValueError:
    missing_key_error = True
else:
    missing_key_error = False
fixed = jax.tree.map(lambda p, g: p - 0.05 * g, params, grads)

# Check your understanding: index of "A pytree corresponding to params"
quiz_answer = 1

ANSWERS = {
    "squared_norm": norm_squared,
    "nested_scale_grad": g,
    "repair_update": fixed,
}
