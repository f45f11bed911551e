"""PackedView: each packed position linked to the tree path it came from (ravel_pytree's layout)."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
from jax.flatten_util import ravel_pytree

from pytree_lab import PackedView

PARAMS = {"w": jnp.array([1.0, 2.0]), "b": jnp.array([0.5])}


def test_positions_follow_ravel_pytree():
    view = PackedView(PARAMS)
    packed, _ = ravel_pytree(PARAMS)
    np.testing.assert_array_equal(view.packed, packed)
    assert view.packed.tolist() == [0.5, 1.0, 2.0]  # dict keys sorted: b first
    assert [view.label(i) for i in range(3)] == ["params['b'][0]", "params['w'][0]", "params['w'][1]"]


def test_clicks_link_both_ways():
    view = PackedView(PARAMS)
    view.buttons.value = 2  # a click on packed[2]
    assert view.diagram.selected_path == "['w']"
    assert "params[&#x27;w&#x27;][1]" in view.readout.value
    view.diagram.selected_path = "['b']"  # a click on the b leaf
    assert view.buttons.value == 0
    assert "occupies packed positions [0]" in view.readout.value


def test_hostile_keys_are_shown_as_text():
    view = PackedView({"<img src=x onerror=alert(1)>": jnp.array([1.0])})
    view.buttons.value = 0
    assert "<img" not in view.readout.value
    assert "&lt;img src=x onerror=alert(1)&gt;" in view.readout.value
