"""Trees no library can walk: one that contains itself, custom nodes whose own code raises.

Each fails at once with a message naming the path; a widget keeps its last good state.
"""

from __future__ import annotations

import html
import subprocess
import sys

import jax
import jax.numpy as jnp
import pytest

from pytree_lab import PytreeDiagram, StepExplorer, describe, diagnose
from pytree_lab.trees import TreeError

PARAMS = {"weight": jnp.array([1.0, -1.0]), "bias": jnp.array(0.0)}


def cyclic() -> dict:
    d = {"weight": jnp.array([1.0, -1.0]), "bias": jnp.array(0.0)}
    d["self"] = d
    return d


class FlattenRaises:
    def __init__(self, w):
        self.w = w


def _flatten_raises(node):
    raise RuntimeError("flatten exploded")


jax.tree_util.register_pytree_node(FlattenRaises, _flatten_raises, lambda aux, ch: FlattenRaises(*ch))


class BadKey:
    """A dict key whose repr raises (hashable and orderable, so only writing the path fails)."""

    def __repr__(self):
        raise ValueError("repr exploded")

    def __hash__(self):
        return 7

    def __lt__(self, other):
        return False


class GetattrRaises:
    def __getattr__(self, name):
        raise RuntimeError(f"no .{name} here")


class ExitsOnGetattr:
    def __getattr__(self, name):
        raise SystemExit(3)


class InterruptsOnGetattr:
    def __getattr__(self, name):
        raise KeyboardInterrupt


def test_cyclic_tree_fails_at_once_naming_the_path():
    with pytest.raises(TreeError) as found:  # was 20 s and 4 GB; `make bench` times it
        describe(cyclic())
    assert str(found.value).startswith("params['self'] refers back to params")
    assert found.value.path == "['self']"
    deeper = {"a": {"b": [1.0]}}
    deeper["a"]["b"].append(deeper["a"])
    with pytest.raises(TreeError, match=r"^grads\['a'\]\['b'\]\[1\] refers back to grads\['a'\]"):
        describe(deeper, "grads")
    with pytest.raises(TreeError, match=r"^the gradient tree\['self'\] refers back to the gradient tree"):
        diagnose(PARAMS, cyclic())


def test_shared_subtrees_are_not_cycles():
    shared = jnp.ones(2)
    both = [shared, shared]
    s = describe({"a": both, "b": both})
    assert [leaf.path for leaf in s.leaves] == ["['a'][0]", "['a'][1]", "['b'][0]", "['b'][1]"]
    assert len(jax.tree.leaves({"a": both, "b": both})) == 4


def test_diagram_with_a_cyclic_tree_keeps_its_last_good_trees():
    d = PytreeDiagram(PARAMS)
    rows, counts = d.rows, d.counts
    d.set_trees({"params": cyclic()})
    assert d.message_kind == "error"
    assert d.message.startswith("params['self'] refers back to params")
    assert "keeps the trees it showed before" in d.message
    assert d.rows == rows and d.counts == counts and d.error == d.message.split(" The diagram")[0]
    # a good tree afterwards clears it
    d.set_trees({"params": PARAMS})
    assert d.message == "" and d.error == ""
    # a cyclic tree from the start: an empty diagram that says why, no exception
    fresh = PytreeDiagram(cyclic(), grads=PARAMS)
    assert fresh.rows == [] and fresh.message.startswith("params['self'] refers back to params")
    assert "params['self'] refers back to params" in fresh.text()


def test_set_params_with_a_cyclic_tree_keeps_the_last_good_step():
    ex = StepExplorer()
    before = ex.result
    assert ex.set_params(cyclic()) is None
    assert "params['self'] refers back to params" in ex.diagram.message
    assert ex.result is before and float(ex.result.loss) == pytest.approx(4.0)


@pytest.mark.parametrize(
    ("tree", "path", "said"),
    [
        (
            {"layer": FlattenRaises(jnp.ones(2))},
            "['layer']",
            "flattening this FlattenRaises raised RuntimeError: flatten exploded",
        ),
        ({"layer": {BadKey(): jnp.ones(2)}}, "['layer']", "a key of this dict raised ValueError: repr exploded"),
        ({"m": [GetattrRaises()]}, "['m'][0]", "this GetattrRaises raised RuntimeError: no .shape here"),
        ({"m": ExitsOnGetattr()}, "['m']", "this ExitsOnGetattr raised SystemExit: 3"),
    ],
    ids=["flatten", "key-repr", "getattr", "system-exit"],
)
def test_custom_node_that_raises_is_named_by_path(tree, path, said):
    with pytest.raises(TreeError) as found:
        describe(tree)
    assert found.value.path == path and str(found.value).startswith(f"params{path}: ") and said in str(found.value)
    d = PytreeDiagram(PARAMS)
    rows = d.rows
    d.set_trees({"params": PARAMS, "grads": tree})
    assert d.message.startswith(f"grads{path}: ") and said in d.message
    assert d.rows == rows and d.columns == ["params"]


def test_keyboard_interrupt_from_a_node_still_interrupts():
    with pytest.raises(KeyboardInterrupt):
        describe({"m": InterruptsOnGetattr()})


def test_a_custom_node_that_is_its_own_child_is_a_cycle_not_a_crash():
    class Ouroboros:
        pass

    jax.tree_util.register_pytree_node(Ouroboros, lambda o: ((o,), None), lambda aux, ch: Ouroboros())
    with pytest.raises(TreeError, match=r"^params\['o'\]\[<flat index 0>\] refers back to params\['o'\]"):
        describe({"o": Ouroboros()})


def test_explorer_constructor_refuses_a_cyclic_tree_before_jax_sees_it():
    """jax.tree_util on a cyclic dict recurses until the interpreter is broken; the engine
    seam checks first. Run in a child process: a regression must not take pytest down."""
    code = (
        "import jax.numpy as jnp\n"
        "from pytree_lab import StepExplorer\n"
        "from pytree_lab.trees import TreeError\n"
        "p = {'w': jnp.ones(2)}; p['self'] = p\n"
        "try:\n"
        "    StepExplorer(lambda p, x: (p['w'] * x).sum(), p, {'x': jnp.ones(2)})\n"
        "except TreeError as e:\n"
        "    print('REFUSED', e)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert "REFUSED" in out.stdout and "['self'] refers back to" in out.stdout, out.stderr[-2000:]


def test_an_explorer_with_a_ten_million_element_leaf_builds_and_labels_what_it_shows():
    p = {"w": jnp.full(10**7, 0.001), "b": jnp.float32(0.5)}
    ex = StepExplorer(lambda p, x: jnp.mean((p["w"] * x) ** 2) + p["b"] ** 2, p, {"x": jnp.float32(2.0)})
    assert ex.result.loss == pytest.approx(0.001**2 * 4 + 0.25, rel=1e-4)
    rows = {r["p"]: r for r in ex.diagram.rows}
    assert rows["['w']"]["c"][0]["v"].startswith("mean 0.001, min 0.001, max 0.001")


def test_value_comparison_survives_leaves_whose_equality_raises():
    class Loud:
        def __eq__(self, other):
            raise SystemExit("== exploded")

        __hash__ = object.__hash__

    a, b = Loud(), Loud()
    found = diagnose({"w": a}, {"w": b}, values=True)
    assert not found.ok and found.kind == "value" and found.path == "['w']"
    assert diagnose({"w": a}, {"w": a}, values=True).ok  # the same object is equal to itself


def _nested(levels: int) -> dict:
    t = {"w": jnp.array([0.5, 1.0])}
    for _ in range(levels):
        t = {"l": t}
    return t


def test_a_tree_too_deep_for_jax_is_refused_with_its_depth_not_a_system_error():
    # describe walks it (no recursion), but JAX's flatten stops at Python's recursion limit
    deep = _nested(1200)
    with pytest.raises(TreeError, match=r"params is 1201 levels deep: more than JAX's tree functions can flatten"):
        StepExplorer(lambda p: jnp.sum(p["l"]["w"] ** 2), deep, {})
    ex = StepExplorer(lambda p: jnp.sum(p["l"]["w"] ** 2), {"l": {"w": jnp.array([0.5, 1.0])}}, {})
    good = ex.result
    assert ex.set_params(deep) is None
    said = html.unescape(ex.status.value)
    assert "params is 1201 levels deep" in said and "SystemError" not in said and ex.result is good


def test_a_dict_whose_keys_cannot_be_sorted_is_refused_as_jax_refuses_it():
    mixed = {"layer": {1: jnp.ones(2), "b": jnp.zeros(1)}}
    with pytest.raises(ValueError, match="sorting pytree dictionary keys"):
        jax.tree.leaves(mixed)  # JAX's own verdict
    with pytest.raises(TreeError, match=r"^params\['layer'\]: this dict's keys cannot be sorted") as caught:
        describe(mixed)
    assert caught.value.path == "['layer']" and "keys of one type" in str(caught.value)
    d = PytreeDiagram({"layer": {"a": jnp.ones(1)}})
    rows = d.rows
    d.set_trees({"params": mixed})
    assert d.message.startswith("params['layer']: this dict's keys cannot be sorted") and d.rows == rows
    # keys of one type, even unusual ones, still describe (ints sort, tuples sort)
    assert describe({2: jnp.ones(1), 1: jnp.zeros(1)}).leaves[0].path == "[1]"
    assert len(describe({(1, "a"): jnp.ones(1), (0, "b"): jnp.ones(1)}).leaves) == 2
