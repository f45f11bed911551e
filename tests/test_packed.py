"""PackedView: each packed position linked to the element it holds, and each leaf to all of its
positions (ravel_pytree's layout), for a dict layout beside a tuple layout."""

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
    # the positions are integer indices; the values are shown beside them, not instead of them
    cells = view.layouts_data[0]["positions"]
    assert [c["i"] for c in cells] == [0, 1, 2] and all(isinstance(c["i"], int) for c in cells)
    assert [c["value"] for c in cells] == ["0.5", "1", "2"]


def test_a_leaf_lights_all_its_positions_and_a_position_one_element():
    view = PackedView(PARAMS)
    view.select_leaf("['w']")
    assert view.highlight == {"layout": 0, "positions": [1, 2], "elements": ["params['w'][0]", "params['w'][1]"]}
    assert view.readout == "params['w'] occupies packed positions [1, 2]"
    view.select_position(2)
    assert view.highlight == {"layout": 0, "positions": [2], "elements": ["params['w'][1]"]}
    assert view.readout == "packed[2] holds params['w'][1]"


def test_dict_layout_beside_tuple_layout():
    view = PackedView(PARAMS, layouts={"(w, b)": (PARAMS["w"], PARAMS["b"])})
    names = [layout["name"] for layout in view.layouts_data]
    assert names == ["params", "(w, b)"]
    assert [p["value"] for p in view.layouts_data[1]["positions"]] == ["1", "2", "0.5"]  # weights first
    view.select_position(2, layout=1)
    assert view.highlight["elements"] == ["(w, b)[1][0]"]
    view.select_leaf("[0]", layout=1)
    assert view.highlight["positions"] == [0, 1]


def test_the_page_writes_only_the_selection():
    view = PackedView(PARAMS)
    view.set_state({"highlight": {"layout": 0, "positions": [0, 1, 2]}, "readout": "x"})
    assert view.highlight == {} and view.readout == ""
    view.set_state({"selected": {"layout": 0, "kind": "position", "key": 0}})
    assert view.readout == "packed[0] holds params['b'][0]"
    view.set_state({"selected": {"layout": 9, "kind": "leaf", "key": "nope"}})  # nonsense is ignored
    assert view.readout == "packed[0] holds params['b'][0]"


def test_hostile_keys_are_text():
    view = PackedView({"<img src=x onerror=alert(1)>": jnp.array([1.0])})
    view.select_position(0)
    assert view.readout == "packed[0] holds params['<img src=x onerror=alert(1)>'][0]"
    assert "&lt;img" in view._repr_mimebundle_()[0]["text/html"]


class _CountingEngine:
    """The real engine, with every tree operation the view asks of it counted."""

    def __init__(self, engine):
        self._engine = engine
        self.calls: list[str] = []

    def __getattr__(self, name):
        attr = getattr(self._engine, name)
        if callable(attr):

            def counted(*args, **kwargs):
                self.calls.append(name)
                return attr(*args, **kwargs)

            return counted
        return attr


def test_packed_view_goes_through_the_engine_seam():
    from pytree_lab.engine import get_engine

    eng = _CountingEngine(get_engine())
    view = PackedView(PARAMS, layouts={"(w, b)": (PARAMS["w"], PARAMS["b"])}, engine=eng)
    assert eng.calls.count("ravel_pytree") == 2  # one per layout
    assert eng.calls.count("tree_flatten_with_path") == 2
    assert "keystr" in eng.calls
    assert view.packed.tolist() == [0.5, 1.0, 2.0]
    assert view.label(0, layout=1) == "(w, b)[0][0]"


def test_packed_view_with_the_lite_engine_matches_jax():
    from pytree_lab.engine import Engine
    from pytree_lab_lite import jax as lite_jax

    lite = Engine(lite_jax)
    assert lite.is_lite
    params = {"w": np.array([1.0, 2.0]), "b": np.array([0.5])}
    view = PackedView(params, engine=lite)
    packed, _ = ravel_pytree({"w": jnp.array([1.0, 2.0]), "b": jnp.array([0.5])})
    assert np.asarray(view.packed).tolist() == np.asarray(packed).tolist() == [0.5, 1.0, 2.0]
    view.select_position(2)
    assert view.readout == "packed[2] holds params['w'][1]"
    view.select_leaf("['w']")
    assert view.highlight["positions"] == [1, 2]


def test_the_text_form_shows_complex_values_and_stays_short_for_a_big_leaf():
    import jax.numpy as jnp
    import numpy as np

    z = PackedView({"z": jnp.array([1 + 2j, -0.5 - 1j])})
    text = z.text()
    assert "params: packed [(1+2j), (-0.5-1j)]" in text and "packed[1] <- params['z'][1]" in text
    assert "text/plain" in z._repr_mimebundle_()[0]
    big = PackedView({"w": np.arange(50_000, dtype=np.float32).reshape(250, 200), "b": np.zeros(3, np.float32)})
    text = big.text()
    assert "… (49,803 more)" in text and "… 49,803 more positions" in text
    assert "packed[199] <- params['b'][0]" not in text and len(text) < 20_000
    assert "packed[0] <- params['b'][0]" in text  # JAX's order: 'b' before 'w'


def test_a_big_tree_draws_at_most_max_drawn_positions_and_python_keeps_them_all():
    w = np.arange(250 * 200, dtype=np.float32).reshape(250, 200) / 100
    view = PackedView({"w": w, "b": np.zeros(3, np.float32)})
    cap = PackedView.MAX_DRAWN
    (layout,) = view.layouts_data
    assert len(layout["positions"]) == cap and layout["more"] == 50_003 - cap
    b, wl = layout["leaves"]  # flatten order: 'b' first
    assert (len(b["elements"]), b["hidden"]) == (3, 0)
    assert len(wl["elements"]) == cap - 3 and wl["hidden"] == 50_000 - (cap - 3)
    assert "positions" not in wl  # every position index is not sent to the page
    # Python still knows every position
    assert view.label(50_002) == "params['w'][249,199]" and view.packed[50_002] == w[249, 199]
    view.select_position(50_002)
    assert view.readout == "packed[50002] holds params['w'][249,199]"
    view.select_leaf("['w']")
    assert view.readout == "params['w'] occupies packed positions 3 to 50002 (50,000 values)"
    assert view.highlight["positions"] == list(range(3, cap))  # what the page draws, lit
