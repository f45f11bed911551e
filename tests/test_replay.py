"""A run an instructor keeps: the record holds every parameter's and every optimizer moment's
trajectory, point by point. Oracles: the lesson's hand-derived numbers, and a hand-written optax
loop (jax.value_and_grad, opt.update, optax.apply_updates called here), compared bit for bit."""

from __future__ import annotations

import jax
import numpy as np
import optax
import pytest

from pytree_lab import StepExplorer
from pytree_lab.explorer import record

X = np.array([[0.0, 1.0], [1.0, 0.0], [1.0, 1.0]], np.float32)
Y = np.array([1.0, 2.0, 3.0], np.float32)
optax_adam = pytest.mark.jax_promotion(dtype="optax's adam raises a float to its int32 step count (bias correction)")


def loss(p, x, y):
    return ((x @ p["w"] + p["b"] - y) ** 2).mean()


def start():
    return {"w": np.array([0.5, -0.5], np.float32), "b": np.float32(0.0)}


def optax_points(opt, n, device=None):
    """The hand-written loop, one jitted step: (loss, params leaves, state leaves) at each of the first n + 1 points,
    computed on `device` (the explorer's promise is the user's own JAX on the device it ran on)."""

    @jax.jit
    def step(params, state):
        value, grads = jax.value_and_grad(loss)(params, X, Y)
        updates, new_state = opt.update(grads, state, params)
        return value, optax.apply_updates(params, updates), new_state

    with jax.default_device(device or jax.devices()[0]):
        params, points = start(), []
        state = opt.init(params)
        for _ in range(n + 1):
            value, new_params, new_state = step(params, state)
            points.append((value, jax.tree.leaves(params), jax.tree.leaves(state)))
            params, state = new_params, new_state
    return points


@optax_adam
def test_the_record_holds_every_parameter_and_moment_trajectory_bit_equal_to_optax():
    opt = optax.adam(0.3)
    ex = StepExplorer(loss, start(), {"x": X, "y": Y}, optimizer=opt, sliders=["params['w']"])
    ex.step(1)  # one step through the slider step, then 300 in compiled loops (past one CHUNK of 256)
    ex.step(300)
    df = ex.to_dataframe()
    names = ["params['b']", "params['w'][0]", "params['w'][1]"]
    moments = ["opt_state[0].count"] + [f"opt_state[0].{m}{n[6:]}" for m in ("mu", "nu") for n in names]
    assert list(df.columns) == ["loss", "learning_rate", *names, *moments] and list(df.index) == list(range(302))
    assert df["params['w'][0]"].dtype == np.float32 and df["opt_state[0].count"].dtype == np.int32
    expected = optax_points(opt, 301, ex.device)  # small trees step on the host CPU
    for step, (value, p, s) in enumerate(expected):
        assert df["loss"][step] == float(value), step
        got_p = [df[n][step] for n in names]
        want_p = [np.float32(p[0]), *np.asarray(p[1])]
        got_s = [df[m][step] for m in moments]
        want_s = [np.asarray(s[0]), np.float32(s[1]), *np.asarray(s[2]), np.float32(s[3]), *np.asarray(s[4])]
        assert [x.tobytes() for x in map(np.asarray, got_p + got_s)] == [
            x.tobytes() for x in map(np.asarray, want_p + want_s)
        ], step
    # plain lists too, the same numbers
    d = ex.history_dict()
    assert d["params['w'][1]"] == df["params['w'][1]"].tolist() and len(d["opt_state[0].nu['b']"]) == 302


def test_a_slider_move_moves_the_current_point_and_reset_starts_again():
    ex = StepExplorer()  # the lesson: weight [1, -1], bias 0, rate 0.05; grads [-8, -4], -4
    ex.step(1)  # -> weight [1.4, -0.8], bias 0.2 (the lesson's hand derivation)
    ex.sliders["bias"].value = 0.5  # the same point, moved
    d = ex.history_dict()
    assert d["step"] == [0, 1] and d["params['bias']"] == [0.0, 0.5]
    assert d["params['weight'][0]"] == [1.0, pytest.approx(1.4)]
    assert d["params['weight'][1]"] == [-1.0, pytest.approx(-0.8)]
    ex.reset()
    assert ex.history_dict() == {
        "step": [0],
        "loss": [4.0],
        "learning_rate": [pytest.approx(0.05)],
        "params['bias']": [0.0],
        "params['weight'][0]": [1.0],
        "params['weight'][1]": [-1.0],
    }


def test_a_trail_past_its_budget_keeps_the_first_points_and_says_nan_after(monkeypatch):
    monkeypatch.setattr(record, "TRAIL_NUMBERS", 3 * 4)  # 3 numbers a point: four points
    ex = StepExplorer()
    ex.step(2)
    ex.step(5)  # would pass the budget: this run keeps none
    df = ex.to_dataframe()
    assert len(df) == 8 and df["params['bias']"][:3].notna().all() and df["params['bias']"][3:].isna().all()


# ---------------------------------------------------------------------------------------- a saved demo
MODEL = '''
import numpy as np, optax
X = np.array([[0.0, 1.0], [1.0, 0.0], [1.0, 1.0]], np.float32)
Y = np.array([1.0, 2.0, 3.0], np.float32)
def loss(p, x, y):
    return ((x @ p["w"] + p["b"] - y) ** 2).mean()
start = lambda: {"w": np.array([0.5, -0.5], np.float32), "b": np.float32(0.0)}
'''
# what an explorer is, bit for bit: every number's bytes and every choice, as JSON
FINGERPRINT = '''
import json, jax
def fingerprint(ex):
    raw = lambda t: [np.asarray(x).tobytes().hex() + str(np.asarray(x).dtype) for x in jax.tree.leaves(t)]
    r = ex.result
    return json.dumps({"params": raw(ex.params), "state": raw(ex.opt_state), "grads": raw(r.grads),
        "updated": raw(r.updated), "loss": [r.loss, r.loss_after], "history": list(ex.history),
        "frame": [list(ex.to_dataframe()), ex.to_dataframe().to_numpy(float).tobytes().hex()],
        "step": ex.control_step(),
        "sliders": {k: s.value for k, s in ex.sliders.items()}, "bars": ex.chart_view.table.rows,
        "selected": ex.selected_path, "boxes": [ex.fixed_range_box.value, ex.log_scale_box.value]})
'''


@optax_adam
@pytest.mark.notebook  # a second, real kernel
def test_a_saved_demo_loads_into_a_new_kernel_at_the_same_step_bit_for_bit(tmp_path):
    import json

    from kernel_harness import real_kernel

    ns: dict = {}
    exec(MODEL + FINGERPRINT, ns)
    ex = StepExplorer(ns["loss"], ns["start"](), {"x": X, "y": Y}, optimizer=optax.adam(0.3), bars=["params['w']"])
    ex.step(12)
    ex.sliders["b"].value = 0.25  # a point moved by hand, then the boxes and the selection
    ex.log_scale_box.value = ex.fixed_range_box.value = True
    ex.selected_path = "['w']"
    mine = tmp_path / "demo.npz"
    assert ex.save(tmp_path / "demo") == mine and ex.save(mine) == mine  # its own file: written again
    (tmp_path / "notes.npz").write_bytes(b"an instructor's file")
    assert ex.save(tmp_path / "notes.npz") == tmp_path / "notes-2.npz"  # never over a file it did not write
    assert (tmp_path / "notes.npz").read_bytes() == b"an instructor's file"
    mine.write_bytes(mine.read_bytes())  # rewritten by someone else since: kept too
    assert ex.save(mine) == tmp_path / "demo-2.npz"

    outputs: list = []
    with real_kernel(tmp_path) as (_km, kc):
        code = (
            MODEL + FINGERPRINT + "import jax; jax.config.update('jax_numpy_dtype_promotion', 'standard')\n"
            "from pytree_lab import StepExplorer\n"
            "ex = StepExplorer.load('demo.npz', loss, start(), {'x': X, 'y': Y}, optimizer=optax.adam(0.3))\n"
            "fingerprint(ex)"
        )
        reply = kc.execute_interactive(code, timeout=180, output_hook=lambda msg: outputs.append(msg))
    assert reply["content"]["status"] == "ok", reply["content"]
    loaded = json.loads(
        eval(next(m["content"]["data"]["text/plain"] for m in outputs if m["msg_type"] == "execute_result"))
    )
    here = json.loads(ns["fingerprint"](ex))
    assert loaded == here and here["step"] == 12 and here["boxes"] == [True, True] and here["selected"] == "['w']"
    assert len(here["frame"][0]) == 12  # loss, rate, 3 params, count and 2 x 3 moments


# ---------------------------------------------------------------------------------------- what load refuses
def small_demo(tmp_path, **kwargs):
    """An explorer of a {"hidden": {"w", "b"}} model (the dict's order: w, then b) after 3 steps, and its demo."""
    params = {"hidden": {"w": np.array([0.5, -0.5], np.float32), "b": np.float32(0.0)}}
    ex = StepExplorer(lambda p, x, y: loss(p["hidden"], x, y), params, {"x": X, "y": Y}, **kwargs)
    ex.step(3)
    return ex, params, ex.save(tmp_path / "demo")


def test_a_failed_save_leaves_the_earlier_demo_bit_for_bit_and_no_temporary_file(tmp_path, monkeypatch):
    ex, params, path = small_demo(tmp_path)
    good = path.read_bytes()
    ex.step(2)

    def full_disk(f, **arrays):  # the disk fills after 90 kB of the new demo
        f.write(b"\0" * 90_000)
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(np, "savez", full_disk)
    with pytest.raises(OSError, match="No space left"):
        ex.save(path)
    assert path.read_bytes() == good and sorted(p.name for p in tmp_path.iterdir()) == ["demo.npz"]
    with pytest.raises(OSError):  # a first save that fails leaves no file behind either
        ex.save(tmp_path / "other")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["demo.npz"]
    monkeypatch.undo()
    back = StepExplorer.load(path, ex.session.loss_fn, params, {"x": X, "y": Y})
    assert back.history == ex.history[:4] and back.control_step() == 3  # the demo as saved, 3 steps in
    assert ex.save(path) == path and path.read_bytes() != good  # its own file, written again once there is room


def test_load_refuses_a_file_that_is_not_a_demo_in_one_sentence(tmp_path):
    ex, params, path = small_demo(tmp_path)
    text = tmp_path / "notes.npz"
    text.write_bytes(b"hello")
    crafted = tmp_path / "crafted.npz"  # a 1 MB member that claims to be the params, and a pickle
    np.savez(crafted, meta=np.asarray(str(np.load(path)["meta"])), **{"params/0": np.zeros(250_000, np.float32)})
    pickled = tmp_path / "pickled.npz"
    np.savez(pickled, meta=np.array([{"format": record.FORMAT}], dtype=object))
    for bad in (text, crafted, pickled, tmp_path / "demo-copy.txt"):
        if bad.suffix == ".txt":
            bad.write_bytes(path.read_bytes()[:5000])  # a demo cut short
        with pytest.raises(ValueError) as err:
            StepExplorer.load(bad, ex.session.loss_fn, params, {"x": X, "y": Y})
        assert str(err.value) == f"{bad} is not a pytree-lab demo: load a file that StepExplorer.save wrote."


def test_load_refuses_another_model_in_one_sentence_naming_the_leaf(tmp_path):
    ex, params, path = small_demo(tmp_path)
    wider = {"hidden": {"w": np.zeros(3, np.float32), "b": np.float32(0.0)}}
    with pytest.raises(ValueError) as err:
        StepExplorer.load(path, ex.session.loss_fn, wider, {"x": X, "y": Y})
    assert str(err.value) == (
        f"The params given do not fit the demo in {path}: the demo's params tree holds params['hidden']['w'] "
        "float32[2] where the params given hold params['hidden']['w'] float32[3]; give the params of the model "
        "the demo was saved from."
    )
    renamed = {"hidden": {"w": np.zeros(2, np.float32), "bias": np.float32(0.0)}}
    with pytest.raises(ValueError, match=r"holds params\['hidden'\]\['b'\] float32\[\] where the params given hold "):
        StepExplorer.load(path, ex.session.loss_fn, renamed, {"x": X, "y": Y})
    wrong_batch = r"The inputs given do not fit .* inputs\['x'\] float32\[3, 2\] where .*\[4, 2\]"
    with pytest.raises(ValueError, match=wrong_batch):
        StepExplorer.load(path, ex.session.loss_fn, params, {"x": np.zeros((4, 2), np.float32), "y": Y})


@optax_adam
def test_load_refuses_an_optimizer_state_of_another_type_in_one_sentence(tmp_path):
    ex, params, path = small_demo(tmp_path, optimizer=optax.inject_hyperparams(optax.adam)(learning_rate=0.3))
    for opt, makes in (
        (None, "none (no optimizer)"),
        (optax.sgd(0.3), "EmptyState, EmptyState"),
        (optax.adam(0.3), "ScaleByAdamState, EmptyState"),  # the same leaves' shapes, in other places
    ):
        with pytest.raises(ValueError) as err:
            StepExplorer.load(path, ex.session.loss_fn, params, {"x": X, "y": Y}, optimizer=opt)
        assert str(err.value) == (
            f"The demo in {path} was saved with an optimizer whose state is InjectStatefulHyperparamsState, "
            f"ScaleByAdamState, EmptyState, and the optimizer given makes {makes}: give StepExplorer.load the "
            "optimizer the demo was saved with."
        )
    back = StepExplorer.load(
        path, ex.session.loss_fn, params, {"x": X, "y": Y}, optimizer=optax.inject_hyperparams(optax.adam)(0.3)
    )
    same = lambda t: [np.asarray(x).tobytes() for x in jax.tree.leaves(t)]  # noqa: E731
    assert same(back.opt_state) == same(ex.opt_state) and same(back.params) == same(ex.params)


def test_a_reloaded_tree_keeps_the_order_it_was_written_in(tmp_path):
    ex, params, path = small_demo(tmp_path)
    back = StepExplorer.load(path, ex.session.loss_fn, params, {"x": X, "y": Y})
    rows = lambda e: [row["p"] for row in e.diagram.rows]  # noqa: E731
    assert rows(back) == rows(ex) == ["['hidden']", "['hidden']['w']", "['hidden']['b']"]  # JAX's order: b, w
    assert back.text() == ex.text() and back.data_view.value == ex.data_view.value
