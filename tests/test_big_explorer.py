"""The lean step for big trees: value_and_grad compiled alone, the update outside it.

Its numbers must be the ones direct JAX / optax calls give: the gradients and the SGD update
leaf by leaf (the update bitwise: η in the leaf's dtype, one multiply, one subtract), Adam's
update as optax computes it. Checked on a 2k-leaf tree (ten times the lean threshold; XLA's compile
grows faster than the tree, so 10k leaves are left to `make bench`) against hand-derived gradients and on
hypothesis trees against `jax.value_and_grad` + `jax.tree.map` / optax.
"""

from __future__ import annotations

import threading

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from hypothesis import given, settings, strategies as st

from pytree_lab import StepExplorer
from pytree_lab.step import INTERPRET_EQNS, LEAN_LEAVES, pin_dtypes, sgd_update
from pytree_lab.training import CompiledStep, TrainingStep

N_BIG = 2_000
optax_adam = pytest.mark.jax_promotion(dtype="optax's adam raises a float to its int32 step count (bias correction)")


def _big_params() -> dict:
    rng = np.random.default_rng(7)
    values = rng.uniform(-2, 2, N_BIG).astype(np.float32)
    return {f"w{i:05d}": jnp.asarray(values[i]) for i in range(N_BIG)}


def _sum_of_squares(p, scale):
    # d/dw (scale · w²) = 2·scale·w; with scale = 1 that is exactly 2w in float32
    return sum((w * w) * scale for w in p.values())


@pytest.fixture(scope="module")
def big():
    params = _big_params()
    return params, {"scale": jnp.asarray(np.float32(1.0))}


def _leaves(tree):
    return [np.asarray(x) for x in jax.tree.leaves(tree)]


def test_2k_leaf_sgd_step_is_exact_leaf_by_leaf(big):
    params, inputs = big
    step = CompiledStep(_sum_of_squares)
    lr = 0.0123
    r = step(params, inputs, lr)
    assert step.lean is True  # 2k leaves >= LEAN_LEAVES: value_and_grad compiled alone
    p = _leaves(params)
    g = _leaves(r.grads)
    u = _leaves(r.updated)
    assert len(g) == len(u) == N_BIG
    hand_grads = [np.float32(2) * x for x in p]  # exact: multiplying by 2 never rounds
    hand_updated = [x - np.float32(lr) * (np.float32(2) * x) for x in p]
    assert all(a.dtype == np.float32 and np.array_equal(a, b) for a, b in zip(g, hand_grads))
    assert all(a.dtype == np.float32 and np.array_equal(a, b) for a, b in zip(u, hand_updated))
    # and what jax.tree.map(p - lr * g) gives with JAX's own float32 arithmetic, for a sample
    direct = jax.tree.map(lambda a, b: a - lr * b, params, r.grads)
    keys = list(params)[:: N_BIG // 50]
    for k in keys:
        assert np.array_equal(np.asarray(r.updated[k]), np.asarray(direct[k]))
    total = float(np.sum(np.asarray(p, np.float64) ** 2))
    assert r.loss == pytest.approx(total, rel=1e-5)
    assert r.loss_after == pytest.approx(float(np.sum(np.asarray(u, np.float64) ** 2)), rel=1e-5)
    # a second call with other values: the same compiled function, no new trace
    r2 = step(jax.tree.map(lambda x: x * 0.5, params), inputs, lr)
    assert step.traces == 1
    assert np.array_equal(np.asarray(r2.grads["w00003"]), np.float32(2) * (np.asarray(params["w00003"]) * 0.5))


@optax_adam
def test_big_tree_adam_step_matches_optax():
    # Adam on a tree past the lean threshold. (On the 10k-leaf tree XLA's compile of Adam's update
    # for 10k leaves grew past 11 GB of memory, too much for a test; see the README.)
    rng = np.random.default_rng(8)
    params = {f"w{i:04d}": jnp.asarray(np.float32(v)) for i, v in enumerate(rng.uniform(-2, 2, LEAN_LEAVES + 56))}
    inputs = {"scale": jnp.asarray(np.float32(1.0))}
    opt = optax.adam(0.05)
    ts = TrainingStep(_sum_of_squares, opt)
    state = ts.init(params)
    r = ts.step(params, state, inputs)
    assert ts.lean is True
    grads = {k: np.float32(2) * np.asarray(v) for k, v in params.items()}  # hand-derived
    updates, new_state = opt.update(grads, state, params)  # optax itself, eagerly
    updated = optax.apply_updates(params, updates)
    for k in params:
        assert np.array_equal(np.asarray(r.grads[k]), grads[k])
    np.testing.assert_allclose(np.asarray(_leaves(r.updated)), np.asarray(_leaves(updated)), rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(np.asarray(_leaves(r.updates)), np.asarray(_leaves(updates)), rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(
        np.asarray(_leaves(r.opt_state_after[0].mu)), np.asarray(_leaves(new_state[0].mu)), rtol=1e-6
    )
    assert int(r.opt_state_after[0].count) == 1
    r2 = ts.step(r.updated, r.opt_state_after, inputs)  # the next step: the same compiled code
    assert int(r2.opt_state_after[0].count) == 2
    assert ts.traces["step"] == 1 and ts.traces["update"] == 1


def test_sgd_update_is_jax_tree_map_bitwise_in_every_float_dtype():
    rng = np.random.default_rng(3)
    params = {
        "a": jnp.asarray(rng.normal(size=(3, 2)).astype(np.float32)),
        "b": jnp.asarray(np.float32(0.7)),
        "c": jnp.asarray(rng.normal(size=5).astype(jnp.bfloat16)),
    }
    grads = jax.tree.map(lambda x: x * 3.3 + 0.1, params)
    for lr in (0.1, 1 / 3, 1e-7, 0.0):
        ours = sgd_update(params, grads, lr)
        direct = jax.tree.map(lambda p, g: p - lr * g, params, grads)
        for k in params:
            assert np.asarray(ours[k]).dtype == np.asarray(params[k]).dtype
            assert np.array_equal(np.asarray(ours[k]), np.asarray(direct[k])), (k, lr)
    # numpy leaves come back read-only: nobody edits a step's result in place
    with pytest.raises(ValueError):
        np.asarray(sgd_update(params, grads, 0.1)["a"])[0, 0] = 1.0


@pytest.mark.usefixtures("cpu_reference")
def test_sgd_update_keeps_float64_under_x64():
    with jax.enable_x64(True):
        params = {"b": jnp.asarray(0.0, jnp.float64), "w": jnp.asarray([1.0, 2.0], jnp.float64)}
        grads = {"b": jnp.asarray(-4.0, jnp.float64), "w": jnp.asarray([0.1, 0.2], jnp.float64)}
        out = sgd_update(params, grads, 0.1)
        assert np.asarray(out["b"]).dtype == np.float64
        assert float(out["b"]) == 0.4  # 0 − 0.1·(−4) in float64, not 0.40000001
        direct = jax.tree.map(lambda p, g: p - 0.1 * g, params, grads)
        assert np.array_equal(np.asarray(out["w"]), np.asarray(direct["w"]))


_shapes = st.lists(st.integers(1, 3), min_size=0, max_size=2).map(tuple)


@st.composite
def trees(draw):
    def arr():
        shape = draw(_shapes)
        vals = draw(st.lists(st.floats(-2, 2, width=32), min_size=int(np.prod(shape)), max_size=int(np.prod(shape))))
        return jnp.asarray(np.array(vals, np.float32).reshape(shape))

    kind = draw(st.sampled_from(["dict", "list", "nested"]))
    if kind == "dict":
        return {k: arr() for k in draw(st.lists(st.sampled_from("abcdwxyz"), min_size=1, max_size=4, unique=True))}
    if kind == "list":
        return [arr() for _ in range(draw(st.integers(1, 4)))]
    return {"layer": [arr(), {"w": arr()}], "scale": arr()}


def _loss(p, x):
    return sum(jnp.sum(jnp.sin(leaf) * leaf) * x for leaf in jax.tree.leaves(p))


X = {"x": jnp.asarray(np.float32(1.5))}


@settings(max_examples=25, deadline=None)
@given(trees(), st.floats(0.001, 0.5))
def test_lean_sgd_step_equals_value_and_grad_then_tree_map(params, lr):
    r = CompiledStep(_loss, lean=True)(params, X, lr)
    value, grads = jax.value_and_grad(_loss)(params, X["x"])
    assert jax.tree.structure(r.grads) == jax.tree.structure(params)
    assert r.loss == pytest.approx(float(value), rel=1e-6, abs=1e-6)
    for a, b in zip(jax.tree.leaves(r.grads), jax.tree.leaves(grads)):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-6)
    # the update, from the step's own gradients, is jax.tree.map's bitwise
    direct = jax.tree.map(lambda p, g: p - lr * g, params, r.grads)
    for a, b in zip(jax.tree.leaves(r.updated), jax.tree.leaves(direct)):
        assert np.asarray(a).dtype == np.asarray(b).dtype and np.array_equal(np.asarray(a), np.asarray(b))
    assert r.loss_after == pytest.approx(float(_loss(direct, X["x"])), rel=1e-5, abs=1e-6)


@optax_adam
@settings(max_examples=20, deadline=None)
@given(trees(), st.floats(0.001, 0.3))
def test_lean_adam_step_equals_optax(params, lr):
    opt = optax.inject_hyperparams(optax.adam)(learning_rate=0.1)
    ts = TrainingStep(_loss, opt, lean=True)
    state = ts.init(params)
    r = ts.step(params, state, X, lr)
    value, grads = jax.value_and_grad(_loss)(params, X["x"])
    state = state._replace(hyperparams={**state.hyperparams, "learning_rate": jnp.asarray(np.float32(lr))})
    updates, new_state = opt.update(grads, state, params)
    updated = optax.apply_updates(params, updates)
    assert r.loss == pytest.approx(float(value), rel=1e-6, abs=1e-6)
    for a, b in zip(jax.tree.leaves(r.updated), jax.tree.leaves(updated)):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    for a, b in zip(jax.tree.leaves(r.opt_state_after), jax.tree.leaves(new_state)):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    assert r.learning_rate == pytest.approx(lr, rel=1e-6)


def test_lean_and_two_program_steps_agree_on_a_tree_past_the_threshold():
    rng = np.random.default_rng(11)
    n = LEAN_LEAVES
    params = {f"p{i:04d}": jnp.asarray(rng.normal(size=2).astype(np.float32)) for i in range(n)}
    lean, old = CompiledStep(_loss), CompiledStep(_loss, lean=False)
    a, b = lean(params, X, 0.05), old(params, X, 0.05)
    assert lean.lean is True and old.lean is False
    assert a.loss == pytest.approx(b.loss, rel=1e-6)
    assert a.loss_after == pytest.approx(b.loss_after, rel=1e-6)
    for x, y in zip(jax.tree.leaves(a.grads), jax.tree.leaves(b.grads)):
        np.testing.assert_allclose(x, y, rtol=1e-6, atol=1e-7)
    for x, y in zip(jax.tree.leaves(a.updated), jax.tree.leaves(b.updated)):
        np.testing.assert_allclose(x, y, rtol=1e-6, atol=1e-7)


def test_explorer_on_a_big_tree_shows_the_lean_step_and_keeps_the_callers_arrays():
    rng = np.random.default_rng(5)
    n = LEAN_LEAVES + 10
    params = {f"p{i:04d}": jnp.asarray(rng.normal(size=3).astype(np.float32)) for i in range(n)}
    before = {k: np.asarray(v).copy() for k, v in params.items()}
    ex = StepExplorer(_loss, params, {"x": 1.5}, learning_rate=0.1, time_budget=None)
    try:
        r = ex.result
        assert r is not None and ex.session.slider_step.lean is True
        value, grads = jax.value_and_grad(_loss)(params, jnp.float32(1.5))
        assert r.loss == pytest.approx(float(value), rel=1e-6)
        for k in params:
            np.testing.assert_allclose(r.grads[k], grads[k], rtol=1e-6, atol=1e-7)
            assert np.array_equal(np.asarray(r.updated[k]), np.asarray(params[k] - 0.1 * r.grads[k]))
        # one slider moved: that element changes, every other leaf is the caller's value
        _el, slider = ex.param_sliders[0]
        assert slider.path == "params['p0000'][0]"
        slider.value = slider.value + 0.25
        moved = ex.result
        assert moved is not r and moved.loss != r.loss
        changed = [k for k in params if not np.array_equal(np.asarray(moved.params[k]), before[k])]
        assert changed == ["p0000"]
        assert float(moved.params["p0000"][0]) == pytest.approx(float(before["p0000"][0]) + 0.25, abs=1e-6)
        assert np.array_equal(np.asarray(moved.params["p0000"][1:]), before["p0000"][1:])
        direct = jax.value_and_grad(_loss)(moved.params, jnp.float32(1.5))[1]
        np.testing.assert_allclose(moved.grads["p0000"], direct["p0000"], rtol=1e-6, atol=1e-7)
        assert ex.session.slider_step.traces == 1
        for k in params:  # the caller's arrays are untouched
            assert np.array_equal(np.asarray(params[k]), before[k])
    finally:
        ex.close()


def test_pin_dtypes_keeps_strong_jax_arrays_and_pins_weak_ones():
    strong = jnp.asarray(np.float32(1.5))
    weak = jnp.asarray(1.5)  # a weakly typed float: a slider's strong float32 later must not recompile
    assert weak.weak_type
    pinned = pin_dtypes({"s": strong, "w": weak})
    assert pinned["s"] is strong
    assert isinstance(pinned["w"], np.ndarray) and pinned["w"].dtype == np.float32


def _layers_loss(p, x):
    return sum(jnp.sum((layer["w"] @ x + layer["b"]) ** 2) for layer in p.values())


def _layer_tree(n_layers: int, seed: int = 5, dtype=np.float32) -> dict:
    rng = np.random.default_rng(seed)
    return {
        f"layer{i:03d}": {
            "w": jnp.asarray(rng.normal(size=(3, 3)).astype(dtype)),
            "b": jnp.asarray(rng.normal(size=3).astype(dtype)),
        }
        for i in range(n_layers)
    }


XV = {"x": jnp.asarray(np.array([1.0, -0.5, 2.0], np.float32))}


def test_a_program_past_the_limit_runs_operation_by_operation_with_eager_jaxs_numbers(monkeypatch):
    import pytree_lab.step as step_module

    monkeypatch.setattr(step_module, "INTERPRET_EQNS", 20)
    params = _layer_tree(12)
    step = CompiledStep(_layers_loss, lean=True)
    r = step(params, XV, 0.01)
    assert step.interpreted and step.staged.eqns >= 20
    value, grads = jax.value_and_grad(_layers_loss)(params, XV["x"])  # JAX outside jit: the oracle
    assert r.loss == float(value)
    for a, b in zip(jax.tree.leaves(r.grads), jax.tree.leaves(grads)):
        assert np.array_equal(np.asarray(a), np.asarray(b))
    direct = jax.tree.map(lambda p, g: p - 0.01 * g, params, grads)
    for a, b in zip(jax.tree.leaves(r.updated), jax.tree.leaves(direct)):
        assert np.array_equal(np.asarray(a), np.asarray(b))
    assert r.loss_after == float(_layers_loss(direct, XV["x"]))  # the loss alone, gradient dropped
    # later steps reuse the traced program; another signature (one layer more) is traced anew
    r2 = step(r.updated, XV, 0.01)
    assert step.traces == 1 and r2.loss == float(_layers_loss(r.updated, XV["x"]))
    bigger = _layer_tree(13)
    r3 = step(bigger, XV, 0.01)
    assert step.traces == 2 and r3.loss == float(_layers_loss(bigger, XV["x"]))


def test_below_the_limit_the_lean_step_is_compiled_once():
    params = _layer_tree(3)
    step = CompiledStep(_layers_loss, lean=True)
    r = step(params, XV, 0.01)
    assert step.lean and not step.interpreted and 0 < step.staged.eqns < INTERPRET_EQNS
    step(r.updated, XV, 0.02)
    assert step.traces == 1
    value, grads = jax.value_and_grad(_layers_loss)(params, XV["x"])
    assert r.loss == pytest.approx(float(value), rel=1e-6)
    for a, b in zip(jax.tree.leaves(r.grads), jax.tree.leaves(grads)):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-6)


@pytest.mark.usefixtures("cpu_reference")
def test_the_explorer_on_a_program_run_operation_by_operation(monkeypatch):
    import pytree_lab.step as step_module

    monkeypatch.setattr(step_module, "LEAN_LEAVES", 4)
    monkeypatch.setattr(step_module, "INTERPRET_EQNS", 20)
    params = _layer_tree(6, seed=9)
    ex = StepExplorer(_layers_loss, params, dict(XV), learning_rate=0.1)
    try:
        assert ex.session.slider_step.interpreted
        assert "operations run one by one" in ex.text()  # the instructor is told why a step is slower
        value, grads = jax.value_and_grad(_layers_loss)(params, XV["x"])
        assert ex.result.loss == float(value)
        assert np.array_equal(np.asarray(ex.result.grads["layer002"]["w"]), np.asarray(grads["layer002"]["w"]))
        # one slider move: the step from the moved value, every other leaf the user's own
        _label, slider = ex.param_sliders[0]
        slider.value = slider.value + slider.step
        moved = ex.result.params
        assert ex.session.slider_step.traces == 1
        value2, grads2 = jax.value_and_grad(_layers_loss)(moved, XV["x"])
        assert ex.result.loss == float(value2)
        assert np.array_equal(np.asarray(ex.result.grads["layer005"]["b"]), np.asarray(grads2["layer005"]["b"]))
    finally:
        ex.close()


def test_an_error_in_the_loss_of_a_big_program_is_the_losss_own(monkeypatch):
    import pytree_lab.step as step_module

    monkeypatch.setattr(step_module, "INTERPRET_EQNS", 20)

    def broken(p, x):
        raise ValueError("the student's own message")

    with pytest.raises(ValueError, match="the student's own message"):
        CompiledStep(broken, lean=True)(_layer_tree(2), XV, 0.1)


@optax_adam
def test_adam_past_the_limit_runs_operation_by_operation_with_optaxs_numbers(monkeypatch):
    import pytree_lab.step as step_module

    monkeypatch.setattr(step_module, "INTERPRET_EQNS", 20)
    params = _layer_tree(5, seed=12)
    opt = optax.adam(0.05)
    ts = TrainingStep(_layers_loss, opt, lean=True)
    state = ts.init(params)
    r = ts.step(params, state, XV)
    assert ts._lean_fns["vg"].interpreted and ts._lean_fns["update"].interpreted
    value, grads = jax.value_and_grad(_layers_loss)(params, XV["x"])
    updates, new_state = opt.update(grads, state, params)  # optax itself, outside jit
    updated = optax.apply_updates(params, updates)
    assert r.loss == float(value)
    for a, b in zip(jax.tree.leaves(r.grads), jax.tree.leaves(grads)):
        assert np.array_equal(np.asarray(a), np.asarray(b))
    for a, b in zip(jax.tree.leaves(r.updated), jax.tree.leaves(updated)):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)
    for a, b in zip(jax.tree.leaves(r.opt_state_after), jax.tree.leaves(new_state)):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)
    assert r.loss_after == pytest.approx(float(_layers_loss(updated, XV["x"])), rel=1e-6)
    r2 = ts.step(r.updated, r.opt_state_after, XV)
    assert int(r2.opt_state_after[0].count) == 2 and ts.traces["step"] == 1 and ts.traces["update"] == 1


def test_a_middle_sized_program_runs_op_by_op_until_its_background_compile_is_ready(monkeypatch):
    import pytree_lab.step as step_module

    monkeypatch.setattr(step_module, "BACKGROUND_EQNS", 20)
    params = _layer_tree(10, seed=21)
    step = CompiledStep(_layers_loss, lean=True)
    staged = step.staged
    seen = []
    use_compiled = staged._use_compiled

    def hold_then_use(compiled):  # see the op-by-op state before the compiled program lands
        seen.append(staged.interpreted)
        use_compiled(compiled)

    monkeypatch.setattr(staged, "_use_compiled", hold_then_use)
    r = step(params, XV, 0.05)
    value, grads = jax.value_and_grad(_layers_loss)(params, XV["x"])
    assert r.loss == pytest.approx(float(value), rel=1e-6)
    assert staged.wait_compiled(120) and staged.compile_error is None
    assert seen == [True]  # op by op first, then the compiled program swapped in
    assert not staged.interpreted and not staged.compiling
    r2 = step(params, XV, 0.05)  # the compiled program: the same numbers to float32's last bits
    assert step.traces == 1
    assert r2.loss == pytest.approx(r.loss, rel=1e-6)
    for a, b, c in zip(jax.tree.leaves(r2.grads), jax.tree.leaves(r.grads), jax.tree.leaves(grads)):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-6)
        np.testing.assert_allclose(a, c, rtol=1e-6, atol=1e-6)


def test_a_failed_background_compile_keeps_the_op_by_op_program(monkeypatch):
    import pytree_lab.step as step_module

    monkeypatch.setattr(step_module, "BACKGROUND_EQNS", 20)
    params = _layer_tree(8, seed=22)
    step = CompiledStep(_layers_loss, lean=True)

    def no_memory(compiled):
        raise MemoryError("XLA ran out of memory")

    monkeypatch.setattr(step.staged, "_use_compiled", no_memory)
    r = step(params, XV, 0.05)
    assert step.staged.wait_compiled(120)
    assert isinstance(step.staged.compile_error, MemoryError) and step.interpreted
    r2 = step(r.updated, XV, 0.05)
    value, _ = jax.value_and_grad(_layers_loss)(r.updated, XV["x"])
    assert r2.loss == float(value)


def test_the_explorer_says_once_when_its_background_compile_failed(monkeypatch):
    import pytree_lab.step as step_module

    monkeypatch.setattr(step_module, "LEAN_LEAVES", 4)
    monkeypatch.setattr(step_module, "BACKGROUND_EQNS", 20)

    told = threading.Event()

    def no_memory(self, compiled):
        told.wait(60)  # the compile fails once the explorer has said it is compiling
        raise MemoryError("XLA ran out of memory")

    monkeypatch.setattr(step_module.Staged, "_use_compiled", no_memory)
    ex = StepExplorer(_layers_loss, _layer_tree(6, seed=9), dict(XV), learning_rate=0.1)
    try:
        assert "XLA is compiling it in the background" in ex.status.value
        told.set()
        staged = ex.session.slider_step.staged
        assert staged.wait_compiled(120) and isinstance(staged.compile_error, MemoryError)
        _label, slider = ex.param_sliders[0]
        slider.value = slider.value + slider.step
        assert "XLA could not compile it in the background" in ex.status.value
        assert "compiling it would take" not in ex.status.value
        assert "XLA ran out of memory" in ex.status.value and 'role="status"' in ex.status.value
        value, _ = jax.value_and_grad(_layers_loss)(ex.result.params, XV["x"])
        assert ex.result.loss == float(value)  # still the op-by-op program's numbers
        slider.value = slider.value + slider.step
        assert ex.status.value == ""  # said once
    finally:
        ex.close()


def test_n_steps_on_a_big_tree_take_the_lean_programs_not_one_compiled_loop():
    # a compiled n-step loop holds the loss, its gradient and the update in one program: minutes
    # of XLA for thousands of leaves; a big tree's run takes the lean step's programs step by step
    params = _layer_tree(LEAN_LEAVES // 2 + 1, seed=31)
    ts = TrainingStep(_layers_loss, None)
    run = ts.run(params, ts.init(params), XV, 0.01, n=3)
    assert ts.lean and ts.traces["run"] == 0 and ts.traces["step"] == 1
    p, losses = params, []
    for _ in range(3):  # JAX itself, step by step
        value, grads = jax.value_and_grad(_layers_loss)(p, XV["x"])
        losses.append(float(value))
        p = jax.tree.map(lambda a, g: a - 0.01 * g, p, grads)
    assert run.steps == 3
    np.testing.assert_allclose(run.losses, losses, rtol=1e-5)
    for a, b in zip(jax.tree.leaves(run.params), jax.tree.leaves(p)):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def test_the_explorers_step_button_on_a_big_tree(monkeypatch):
    import pytree_lab.step as step_module

    monkeypatch.setattr(step_module, "LEAN_LEAVES", 4)
    params = _layer_tree(6, seed=32)
    ex = StepExplorer(_layers_loss, params, dict(XV), learning_rate=0.01)
    try:
        r = ex.step(4)
        assert r is not None and len(ex.history) == 5
        assert ex.session.runner().lean and ex.session.runner().traces["run"] == 0
        # the loss was traced once, for the slider step; Step ×10 shares that program
        assert ex.session.slider_step.traces == 1 and ex.session.runner().traces["step"] == 0
        assert ex.session.runner().staged is ex.session.slider_step.staged
        p = params
        for _ in range(4):
            _, grads = jax.value_and_grad(_layers_loss)(p, XV["x"])
            p = jax.tree.map(lambda a, g: a - 0.01 * g, p, grads)
        assert ex.history[-1] == pytest.approx(float(_layers_loss(p, XV["x"])), rel=1e-5)
    finally:
        ex.close()


EXITS_WHILE_COMPILING = """
import threading
import jax.numpy as jnp
import numpy as np
from pytree_lab import StepExplorer

rng = np.random.default_rng(4)
params = {f"layer_{i:03d}": {"w": jnp.asarray(rng.standard_normal((2, 2)), jnp.float32),
                             "b": jnp.asarray(rng.standard_normal(2), jnp.float32),
                             "a": {"z": jnp.ones(1), "y": jnp.ones(1)}} for i in range(250)}

def loss(p, x):
    return sum(jnp.sum((v["w"] @ x + v["b"]) ** 2) + jnp.sum(v["a"]["z"] * v["a"]["y"]) for v in p.values())

ex = StepExplorer(loss, params, {"x": jnp.asarray([0.5, -1.0], jnp.float32)}, learning_rate=0.1)
staged = ex.session.slider_step.staged  # a closed explorer drops its steps; the compile thread goes on
ex.close()
print("compiling at exit:", staged.compiling, flush=True)
"""


def test_a_script_that_ends_while_xla_compiles_exits_cleanly(tmp_path):
    """A script (or an nbconvert run) that ends right after making a mid-sized explorer: the
    background compile is still in XLA when Python shuts down. It used to abort (SIGABRT)."""
    import os
    import subprocess
    import sys

    script = tmp_path / "ends_while_compiling.py"
    script.write_text(EXITS_WHILE_COMPILING)
    proc = subprocess.run(
        [sys.executable, str(script)],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "JAX_PLATFORMS": "cpu"},
    )
    assert "compiling at exit: True" in proc.stdout  # the case this is about
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "terminate called" not in proc.stderr
