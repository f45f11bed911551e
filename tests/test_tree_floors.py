"""Trees as every allowed JAX version flattens them (run by the floors job with jax 0.4.30 too).

jax 0.4.30's `tree_flatten_with_path` walks a tree twice (a `tree_flatten`, then the key
paths), calling `is_leaf` on the root in each walk; later versions walk once. A registered
dataclass must show its fields either way (it showed as "object (not differentiable)" on 0.4.30).
The fields are named explicitly: 0.4.30's `register_dataclass` requires them.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp

from pytree_lab import PytreeDiagram, describe


@dataclasses.dataclass
class Dense:
    weight: jax.Array
    bias: jax.Array
    name: str


jax.tree_util.register_dataclass(Dense, data_fields=["weight", "bias"], meta_fields=["name"])


def model():
    return {"layer": Dense(jnp.array([1.0, -1.0]), jnp.array(0.0), "encoder"), "scale": jnp.array(1.0)}


def test_registered_dataclass_shows_its_fields():
    assert str(describe(model())) == (
        "params\n"
        "├── layer\n"
        "│   ├── weight: float32[2]\n"
        "│   └── bias: float32[]\n"
        "└── scale: float32[]\n"
        "3 leaves, 4 numerical parameter values"
    )


def test_diagram_rows_are_the_dataclass_fields_by_path():
    grads = jax.grad(lambda p: p["scale"] * (jnp.sum(p["layer"].weight) + p["layer"].bias))(model())
    d = PytreeDiagram(model(), grads=grads)
    try:
        text = d.text()
        assert "not differentiable" not in text
        # d/dscale = sum(weight) + bias = 0; d/dweight = scale = [1, 1]; d/dbias = 1
        assert "[1, 1]" in text and "weight" in text and "bias" in text
    finally:
        d.close()
