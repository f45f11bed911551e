"""Where the explorer's step runs (`device=`, the default by tree size), that it says so, and that
its numbers are the ones the same step written in JAX gives on that device; the exercises'
number tolerance per dtype and matmul precision.

On a machine with an accelerator (tools/device_tier.sh) the same tests run there too: the
accelerator is then `jax.devices()[0]`. Without one, two host devices in a subprocess stand in
for "the host's CPU" and "the accelerator" so the size rule is exercised with real devices.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import subprocess
import sys
import textwrap

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from pytree_lab import StepExplorer
from pytree_lab.engine import ACCELERATOR_PARAMS, choose_device, device_label, get_engine
from pytree_lab.exercises._grading import TYPED_RTOL, _close, number_rtol
from pytree_lab.formatting import fmt_number

HOST = jax.devices("cpu")[0]
DEVICES = list(dict.fromkeys([HOST, jax.devices()[0]]))  # the host, and the accelerator where there is one


def _loss(p, x, y):
    h = jnp.tanh(x @ p["w1"] + p["b1"][None, :])
    return jnp.mean((h @ p["w2"] - y) ** 2)


def _mlp(dtype=np.float32):
    r = np.random.default_rng(0)
    params = {
        "w1": r.normal(size=(2, 8)).astype(dtype),
        "b1": np.zeros(8, dtype),
        "w2": r.normal(size=(8, 1)).astype(dtype),
    }
    inputs = {"x": r.normal(size=(16, 2)).astype(dtype), "y": r.normal(size=(16, 1)).astype(dtype)}
    return params, inputs


def _by_hand(params, inputs, lr, device):
    """The step as a person writes it in JAX, jitted, on `device`."""
    with jax.default_device(device):
        p, x = jax.device_put((params, inputs), device)
        value, grads = jax.jit(jax.value_and_grad(_loss))(p, **x)
        updated = jax.jit(lambda p, g, lr: jax.tree.map(lambda a, b: a - lr * b, p, g))(p, grads, lr)
    return float(value), grads, updated


def _same(a, b) -> bool:
    return all(
        np.asarray(u).dtype == np.asarray(v).dtype and np.array_equal(np.asarray(u), np.asarray(v))
        for u, v in zip(jax.tree.leaves(a), jax.tree.leaves(b), strict=True)
    )


# ------------------------------------------------------------------------------- the choice
def test_a_small_tree_runs_on_the_host_cpu_by_default_and_names_it():
    ex = StepExplorer()
    assert ex.device == HOST
    assert ex.session.device_name == "CPU 0"
    assert "computed in the kernel by JAX" in ex.diagram.caption and "on CPU 0" in ex.diagram.caption
    assert "on CPU 0" in ex.text()  # the text form names it too (exports, consoles)


def test_device_takes_a_device_or_a_platform_name():
    params, inputs = _mlp()
    assert StepExplorer(_loss, params, inputs, device="cpu").device == HOST
    assert StepExplorer(_loss, params, inputs, device="CPU").device == HOST
    assert StepExplorer(_loss, params, inputs, device=HOST).device == HOST


@pytest.mark.parametrize(
    ("device", "error", "words"),
    [
        ("quantum", ValueError, "device='quantum' is not a platform JAX can use here; it sees"),
        (3, TypeError, "device= takes a jax.Device or a platform name such as 'cpu', not int."),
        (["cpu"], TypeError, "not list"),
    ],
)
def test_a_wrong_device_gets_a_sentence(device, error, words):
    with pytest.raises(error) as caught:
        StepExplorer(device=device)
    assert words in str(caught.value)
    if error is ValueError:
        assert "'cpu'" in str(caught.value)  # says what it can use


def test_the_lite_engine_computes_on_the_cpu_only():
    from pytree_lab.engine import Engine
    from pytree_lab_lite import jax as lite_jax

    lite = Engine(lite_jax)
    assert choose_device(None, lite, [np.zeros(3)]) is None
    assert choose_device("cpu", lite, []) is None
    with pytest.raises(ValueError, match="the Lite engine computes with numpy on this CPU only"):
        choose_device("tpu", lite, [])


_TWO_DEVICES = textwrap.dedent(
    """
    import json, jax, numpy as np
    from pytree_lab import StepExplorer
    from pytree_lab.engine import ACCELERATOR_PARAMS, choose_device, get_engine
    host, other = jax.devices("cpu")
    eng = get_engine()
    def loss(p, x):
        return (p["w"] * x).sum()
    x = np.float32(2.0)
    out = {}
    # the size rule, with cpu:1 standing in for the accelerator (JAX's default device)
    out["small"] = str(choose_device(None, eng, [np.zeros(ACCELERATOR_PARAMS - 1)], default=other))
    out["big"] = str(choose_device(None, eng, [np.zeros(ACCELERATOR_PARAMS)], default=other))
    out["default_host"] = str(choose_device(None, eng, [np.zeros(ACCELERATOR_PARAMS)], default=host))
    # the user's JAX array stays where it was; the explorer computes on a copy on its device
    w = jax.device_put(np.arange(3, dtype=np.float32), host)
    ex = StepExplorer(loss, {"w": w}, {"x": x}, learning_rate=0.05, device=other)
    out["explorer"] = str(ex.device)
    out["user_array"] = str(w.devices())
    out["updated"] = [str(leaf.devices()) for leaf in jax.tree.leaves(ex.result.updated)]
    out["equal"] = np.asarray(ex.result.updated["w"]).tolist()
    ex.step(3)
    out["after_steps"] = [str(leaf.devices()) for leaf in jax.tree.leaves(ex.params)]
    print(json.dumps(out))
    """
)


def test_the_size_rule_and_placing_copies_with_two_real_devices():
    env = {**os.environ, "JAX_PLATFORMS": "cpu", "XLA_FLAGS": "--xla_force_host_platform_device_count=2"}
    done = subprocess.run(
        [sys.executable, "-c", _TWO_DEVICES], env=env, capture_output=True, text=True, timeout=240, check=False
    )
    assert done.returncode == 0, done.stderr[-2000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["small"] == "cpu:0"
    assert out["big"] == "cpu:1"
    assert out["default_host"] == "cpu:0"
    assert out["explorer"] == "cpu:1"
    assert out["user_array"] == "{CpuDevice(id=0)}"  # not moved
    assert out["updated"] == ["{CpuDevice(id=1)}"]
    assert out["after_steps"] == ["{CpuDevice(id=1)}"]
    # w = [0, 1, 2], dL/dw = x = 2, lr 0.05: w - 0.05 * 2
    assert out["equal"] == pytest.approx([-0.1, 0.9, 1.9], abs=1e-6)


def test_the_threshold_is_a_count_of_parameter_elements():
    eng = get_engine()
    # on a machine without an accelerator every tree stays on the host, however big
    if jax.devices()[0].platform == "cpu":
        assert choose_device(None, eng, [np.zeros(ACCELERATOR_PARAMS)]) == HOST
    else:  # on one: below the count the host, from it on the accelerator
        assert choose_device(None, eng, [np.zeros(ACCELERATOR_PARAMS - 1)]) == HOST
        assert choose_device(None, eng, [np.zeros(ACCELERATOR_PARAMS)]) == jax.devices()[0]


def test_device_label_names_platform_number_and_kind():
    assert device_label(HOST) == "CPU 0"
    for d in jax.devices():
        label = device_label(d)
        assert label.startswith(f"{d.platform.upper()} {d.id}")


# ------------------------------------------------------------------------------- the numbers
@pytest.mark.parametrize("device", DEVICES, ids=str)
def test_the_explorer_equals_the_same_step_written_in_jax_on_its_device(device):
    params, inputs = _mlp()
    ex = StepExplorer(_loss, params, inputs, learning_rate=0.05, device=device)
    value, grads, updated = _by_hand(params, inputs, 0.05, device)
    r = ex.result
    assert r.loss == value
    assert _same(r.grads, grads)
    assert _same(r.updated, updated)
    assert {d for leaf in jax.tree.leaves(r.updated) for d in leaf.devices()} == {device}
    # the user's arrays were copied, not taken: still numpy, still writable, unchanged
    fresh, _ = _mlp()
    assert all(isinstance(a, np.ndarray) and a.flags.writeable for a in params.values())
    assert _same(params, fresh)


@pytest.mark.parametrize("device", DEVICES, ids=str)
def test_float64_update_is_the_devices_own(device):
    """0 − 0.1·(−4) is 0.4 in IEEE float64 (the CPU); a TPU's float64 gives 0.3999999999999999.
    Either way the explorer shows what the same JAX gives on its device."""
    with jax.enable_x64(True):

        def loss(p, x):
            return p["b"] * x

        params, inputs = {"b": np.float64(0.0)}, {"x": np.float64(-4.0)}
        ex = StepExplorer(loss, params, inputs, learning_rate=0.1, device=device)
        with jax.default_device(device):
            p = jax.device_put(jnp.float64(0.0), device)
            g = jax.grad(lambda b: b * -4.0)(p)
            by_hand = jax.jit(lambda p, g, lr: p - lr * g)(p, g, 0.1)
        assert np.asarray(ex.result.updated["b"]).dtype == np.float64
        assert float(ex.result.updated["b"]) == float(by_hand)
        if device.platform == "cpu":
            assert float(ex.result.updated["b"]) == 0.4


def test_lean_update_of_accelerator_grads_is_done_there():
    from pytree_lab.step import sgd_update
    from pytree_lab.summaries import on_host

    assert on_host(np.zeros(2)) and on_host(jax.device_put(np.zeros(2), HOST))
    accel = jax.devices()[0]
    p = jax.device_put(np.arange(3.0, dtype=np.float32), accel)
    g = jax.device_put(np.full(3, 0.5, np.float32), accel)
    out = sgd_update({"p": p}, {"p": g}, 0.1)["p"]
    assert np.array_equal(np.asarray(out), np.asarray(p - 0.1 * g))
    if accel.platform != "cpu":
        assert not on_host(g) and out.devices() == {accel}


# ------------------------------------------------------------------------------- what crosses to the host
def _square_mlp(width, batch=8):
    """Four square tanh layers of `width` (4 x 2048 x 2048: 16,785,408 parameters) on a small batch."""
    r = np.random.default_rng(0)
    params = {
        f"l{i}": {
            "w": (r.normal(size=(width, width)) / np.sqrt(width)).astype(np.float32),
            "b": np.zeros((1, width), np.float32),
        }
        for i in range(4)
    }
    return params, {
        "x": r.normal(size=(batch, width)).astype(np.float32),
        "y": r.normal(size=(batch, width)).astype(np.float32),
    }


def _mlp_loss(p, x, y):
    h = x
    for k in sorted(p):
        h = jnp.tanh(h @ p[k]["w"] + p[k]["b"])
    return jnp.mean((h - y) ** 2)


@contextlib.contextmanager
def _host_reads_refused(accel, allowed, refused):
    """JAX's transfer guard does not watch the host's CPU devices (their arrays are host memory):
    for the second host device standing in for an accelerator, numpy's and jax.Array's conversions
    of its arrays are refused here instead (said in `refused`: the explorer says a failed view in
    its widget), but inside `jax.device_get` (`allowed()` is True)."""
    from jax._src.array import ArrayImpl

    def refuse(x):
        if isinstance(x, ArrayImpl) and not allowed() and x.devices() == {accel}:
            refused.append(f"{x.dtype}{list(x.shape)}")
            raise AssertionError(f"an implicit read of a {x.dtype}{list(x.shape)} array on {accel}")

    real = {name: getattr(np, name) for name in ("asarray", "array", "asanyarray")}
    value = ArrayImpl._value

    def wrap(f):
        return lambda x, *a, **k: (refuse(x), f(x, *a, **k))[1]

    try:
        for name, f in real.items():
            setattr(np, name, wrap(f))
        ArrayImpl._value = property(lambda self: (refuse(self), value.fget(self))[1])
        yield
    finally:
        for name, f in real.items():
            setattr(np, name, f)
        ArrayImpl._value = value


def _bytes_per_move(width: int) -> dict:
    """One slider move of a four-layer `width` MLP on the accelerator, every view drawn: the bytes
    each explicit `jax.device_get` fetched from it (an implicit read fails the move), its loss,
    the moved element after the step, and the diagram's line for the first layer's weights."""
    cpus = jax.devices("cpu")
    accel = jax.devices()[0] if jax.devices()[0].platform != "cpu" else cpus[1]
    params, inputs = _square_mlp(width)
    ex = StepExplorer(_mlp_loss, params, inputs, learning_rate=0.05, device=accel, time_budget=None)
    label, slider = next((k, v) for k, v in ex.sliders.items() if k.startswith("l0/w"))
    fetched: list = []
    refused: list = []
    inside = [0]
    real_get = jax.device_get

    def counting_get(tree):
        fetched.extend(x.nbytes for x in jax.tree.leaves(tree) if isinstance(x, jax.Array) and x.devices() == {accel})
        inside[0] += 1
        try:
            return real_get(tree)
        finally:
            inside[0] -= 1

    def guard():
        if accel.platform == "cpu":
            return _host_reads_refused(accel, lambda: inside[0] > 0, refused)
        return jax.transfer_guard_device_to_host("disallow")

    jax.device_get = counting_get
    try:
        moves = []
        span = slider.max - slider.min
        for value in (slider.value + 0.1 * span, slider.value - 0.2 * span):  # the first move, and one more
            fetched.clear()
            with guard():
                slider.value = value
            moves.append(sum(fetched))
    finally:
        jax.device_get = real_get
    el = next(s.element for s in ex.session.specs if s.label == label)
    return {
        "refused": refused,
        "status": ex.status.value,  # a view that failed says so there
        "bytes": moves,
        "model_bytes": sum(a.nbytes for a in jax.tree.leaves(params)),
        "loss": ex.result.loss,
        "value": ex.session.values[label],
        "updated": float(real_get(ex.result.updated["l0"]["w"]).reshape(-1)[el.position]),
        "position": int(el.position),
        "w_line": next(ln for ln in ex.diagram.text().splitlines() if "── w " in ln),  # l0's
    }


_MOVE_SCRIPT = (
    "import json, sys; sys.path.insert(0, 'tests'); import jax; "
    "jax.config.update('jax_numpy_rank_promotion', 'raise'); jax.config.update('jax_numpy_dtype_promotion', 'strict'); "
    "import test_devices as t; print(json.dumps([t._bytes_per_move(w) for w in (2048, 256)]))"
)


def test_a_slider_move_brings_over_what_is_drawn_not_the_model():
    """A 16,785,408-parameter model (67 MB a tree) on the accelerator, or on a second host device
    standing in for one: a slider move with every view drawn (the bars, the diagram's summaries,
    the worked calculation) fetches the same few bytes as a 263,168-parameter model of the same
    tree, and its numbers are the ones JAX gives for the moved point."""
    if jax.devices()[0].platform != "cpu":
        big, small = _bytes_per_move(2048), _bytes_per_move(256)
    else:
        env = {**os.environ, "JAX_PLATFORMS": "cpu", "XLA_FLAGS": "--xla_force_host_platform_device_count=2"}
        done = subprocess.run(
            [sys.executable, "-c", _MOVE_SCRIPT],
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
            cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
        )
        assert done.returncode == 0, done.stderr[-3000:]
        big, small = json.loads(done.stdout.strip().splitlines()[-1])
    assert big["model_bytes"] == 16_785_408 * 4
    assert big["refused"] == small["refused"] == [] and big["status"] == small["status"] == ""
    # what is drawn is the same for both: the bars' elements, four numbers a leaf for the diagram,
    # a row's first values for the calculation; nothing grows with the model
    assert big["bytes"] == small["bytes"]
    assert 0 < max(big["bytes"]) < 16_384
    # the numbers of the moved point: the slider's value written where the tree lives, one step from there
    params, inputs = _square_mlp(2048)
    w = params["l0"]["w"].reshape(-1)
    w[big["position"]] = big["value"]
    with jax.default_device(HOST):
        value, grads = jax.jit(jax.value_and_grad(_mlp_loss))(params, **inputs)
        g = np.asarray(grads["l0"]["w"])
    rtol = number_rtol("float32", jax.devices()[0].platform)  # a TPU's matmuls round their inputs to bfloat16
    assert big["loss"] == pytest.approx(float(value), rel=rtol)
    assert big["updated"] == pytest.approx(np.float32(big["value"]) - 0.05 * g.reshape(-1)[big["position"]], rel=1e-4)
    # the diagram's summaries of the big leaves, reduced on the device: what numpy says of them here
    (pm, plo, phi), (gm, glo, ghi), _ = re.findall(r"mean (\S+), min (\S+), max (\S+)", big["w_line"])
    assert "float32[2048,2048]" in big["w_line"]
    assert (plo, phi) == (fmt_number(float(w.min())), fmt_number(float(w.max())))
    # a mean of 4M numbers summed in float32 there, shown to 4 digits: within its rounding of the values' scale
    assert float(pm) == pytest.approx(w.mean(dtype=np.float64), rel=1e-3, abs=1e-6 * float(np.abs(w).max()))
    for shown, host in ((gm, g.mean(dtype=np.float64)), (glo, g.min()), (ghi, g.max())):
        assert float(shown) == pytest.approx(float(host), rel=max(rtol, 1e-3), abs=rtol * float(np.abs(g).max()))


# ------------------------------------------------------------------------------- tolerances
def test_number_rtol_per_dtype_and_matmul_precision():
    # the unit roundoff of the coarsest rounding, at least 1e-4 (five typed digits)
    assert TYPED_RTOL == 1e-4
    assert number_rtol("float32", "cpu") == 1e-4  # 2**-24 = 6e-8: the floor
    assert number_rtol("float64", "tpu") == 1e-4  # 2**-53
    assert number_rtol("float32", "tpu") == 2**-8 == 0.00390625  # bfloat16 inputs of a matmul
    assert number_rtol("float32", "gpu") == 2**-11 == 0.00048828125  # TensorFloat-32
    assert number_rtol("float32", "tpu", "highest") == 1e-4  # full float32 asked for
    assert number_rtol("float32", "gpu", "float32") == 1e-4
    assert number_rtol("bfloat16", "cpu") == 0.00390625
    assert number_rtol("float16", "cpu") == 2**-11


def test_closeness_follows_the_kernels_backend(monkeypatch):
    expected = 0.8123
    tpu_like = expected * 1.002  # an 8-wide MLP's loss at a TPU's default precision: 0.2% off
    monkeypatch.setattr(jax, "default_backend", lambda: "cpu")
    assert _close(expected * (1 + 5e-5), expected)
    assert not _close(tpu_like, expected)  # on a CPU, 0.2% is a different number
    monkeypatch.setattr(jax, "default_backend", lambda: "tpu")
    assert _close(tpu_like, expected)  # on a TPU it is the same computation
    # wrong answers still fail there: a factor, a sign, 1% off (95 for the exercises' 96)
    for wrong in (expected * 2, expected / 2, -expected, expected * 1.01, 95.0 / 96.0 * expected):
        assert not _close(wrong, expected)
    with jax.default_matmul_precision("highest"):
        assert not _close(tpu_like, expected)
