nested = {"layer": params, "scale": jnp.array(1.0)}


def nested_loss(p):
    pred = p["scale"] * (jnp.dot(p["layer"]["weight"], x) + p["layer"]["bias"])
    return (pred - 3.0) ** 2


g = jax.grad(nested_loss)(nested)
assert jax.tree.structure(g) == jax.tree.structure(nested)
assert jnp.allclose(g["scale"], -4.0)
