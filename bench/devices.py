"""Section 8 (devices): a slider move, Step (`ex.step(1)`), a played step (`ex.play`) and
`ex.step(100)` on the host's CPU and on the accelerator, side by side, with every view drawn,
for trees from the lesson's 3 parameters to 16M; the ratio of the default device's time to the
host CPU's per size. Where JAX sees no accelerator but several host devices
(``XLA_FLAGS=--xla_force_host_platform_device_count=2``) the second stands in for it. The
default placement (`pytree_lab.engine.ACCELERATOR_PARAMS`) comes from this table;
docs/backends.md keeps the TPU v5e reading.
"""

from __future__ import annotations

import asyncio
import itertools
import time

from .stats import Table, fmt

# (widths of a tanh MLP, batch size); None: the lesson's model
MODELS: dict = {
    "lesson (3)": None,
    "MLP 2-8-8-1": ([2, 8, 8, 1], 16),
    "4 layers 256x256": ([256] * 5, 32),
    "4 layers 512x512": ([512] * 5, 64),
    "4 layers 1024x1024": ([1024] * 5, 128),
    "4 layers 2048x2048": ([2048] * 5, 256),
}
KINDS = ("move", "step", "play")  # what the default must do within 10 % of the host CPU
SLOWER = 1.10


def _mlp(widths, batch):
    import numpy as np

    r = np.random.default_rng(0)
    params = {
        f"l{i}": {"w": (r.normal(size=(a, b)) / np.sqrt(a)).astype(np.float32), "b": np.zeros((1, b), np.float32)}
        for i, (a, b) in enumerate(itertools.pairwise(widths))
    }
    inputs = {
        "x": r.normal(size=(batch, widths[0])).astype(np.float32),
        "y": r.normal(size=(batch, widths[-1])).astype(np.float32),
    }
    return params, inputs


def _loss(p, x, y):
    import jax.numpy as jnp

    h = x
    for k in sorted(p):
        h = jnp.tanh(h @ p[k]["w"] + p[k]["b"])
    return jnp.mean((h - y) ** 2)


def accelerator():
    """JAX's default device where it is no CPU, else a second host device standing in for one (None: neither)."""
    import jax

    cpus = jax.devices("cpu")
    return jax.devices()[0] if jax.devices()[0].platform != "cpu" else (cpus[1] if len(cpus) > 1 else None)


async def _play(ex, steps: int) -> float:
    """Seconds per played step (the player's own count: the step and its views, not the pacing)."""
    ex.play(60, until=ex.control_step() + steps)
    while ex.playing:
        await asyncio.sleep(0.002)
    return ex.player.compute_s / max(ex.player.steps, 1)


def _median(xs: list) -> float:
    xs = sorted(xs)
    return xs[len(xs) // 2] * 1e3


def _measure(name: str, spec, device, moves: int) -> dict:
    import jax
    import numpy as np

    from pytree_lab import StepExplorer, lesson

    if spec is None:
        p0 = lesson.lesson_params()
        ex = StepExplorer(time_budget=None, device=device)
    else:
        p0, inputs = _mlp(*spec)
        ex = StepExplorer(_loss, p0, inputs, time_budget=None, device=device)
    n = sum(int(np.size(leaf)) for leaf in jax.tree.leaves(p0))
    slider = next(iter(ex.sliders.values()))
    took: dict = {"move": [], "step": []}
    for i in range(moves):
        t0 = time.perf_counter()
        slider.value = float(slider.value) + 1e-3 * (-1) ** i  # every view drawn (no event loop: no deferral)
        took["move"].append(time.perf_counter() - t0)
    for _ in range(max(moves // 2, 3)):
        t0 = time.perf_counter()
        ex.step(1)
        took["step"].append(time.perf_counter() - t0)
    play_s = asyncio.run(_play(ex, max(moves // 2, 3)))
    steps = 10 if n > 10_000_000 else 100
    ex.step(steps)  # the loop's compile
    t0 = time.perf_counter()
    ex.step(steps)
    run_s = time.perf_counter() - t0
    out = {
        "params": n,
        "device": ex.session.device_name,
        "move_ms": _median(took["move"][2:]),
        "step_ms": _median(took["step"][1:]),
        "play_ms": play_s * 1e3,
        "run_ms": run_s * 1e3,
        "run_steps": steps,
    }
    ex.close()
    return out


def run(moves: int = 15, quick: bool = False) -> dict:
    import jax
    import numpy as np

    from pytree_lab.engine import choose_device, get_engine

    host, accel = jax.devices("cpu")[0], accelerator()
    models = dict(list(MODELS.items())[:3]) if quick else MODELS
    out: dict = {}
    for name, spec in models.items():
        row: dict = {}
        for which, device in (("cpu", host), ("accelerator", accel)):
            if device is not None:
                row[which] = _measure(name, spec, device, moves)
        n = row["cpu"]["params"]
        default = choose_device(None, get_engine(), [np.broadcast_to(np.float32(0), (n,))], default=accel or host)
        row["default"] = "cpu" if default == host else "accelerator"
        out[name] = row
    return out


def ratios(row: dict) -> dict:
    """The default device's time over the host CPU's, per kind."""
    d = row[row["default"]]
    return {k: d[f"{k}_ms"] / row["cpu"][f"{k}_ms"] for k in KINDS}


def table(r: dict) -> Table:
    from pytree_lab.engine import ACCELERATOR_PARAMS

    t = Table(
        "8. per device: a slider move, Step, a played step (medians; every view drawn) and step(100), "
        "host CPU / accelerator, and the default's time over the host CPU's",
        ["model", "parameters", "default", "move", "Step", "Play", "step(100)", "default / CPU"],
    )
    accel = ""
    for name, row in r.items():
        cpu, acc = row["cpu"], row.get("accelerator")
        accel = acc["device"] if acc else accel

        def pair(kind: str, cpu=cpu, acc=acc) -> str:
            return fmt(cpu[kind], " ms") + (" / " + fmt(acc[kind], " ms") if acc else "")

        run = pair("run_ms") + ("" if cpu["run_steps"] == 100 else f" (step({cpu['run_steps']}))")
        worst = ratios(row)
        said = ", ".join(f"{k} {v:.2f}" for k, v in worst.items())
        over = [k for k, v in worst.items() if v > SLOWER]
        t.add(
            name,
            f"{cpu['params']:,}",
            row["default"],
            pair("move_ms"),
            pair("step_ms"),
            pair("play_ms"),
            run,
            said + (f" (over {SLOWER:.2f}: {', '.join(over)})" if over else ""),
        )
    t.notes.append(
        f"host {next(iter(r.values()))['cpu']['device']}, accelerator {accel or 'none'}; by default a tree of "
        f"{ACCELERATOR_PARAMS:,} parameter elements or more runs on the accelerator (pytree_lab.engine)"
    )
    return t


def run_child(quick: bool = False, platforms: str | None = None) -> dict:
    """`run` in a child process with JAX free to see the accelerator (the other sections pin the
    CPU): `platforms` is JAX_PLATFORMS as the person set it (None: unset)."""
    import json
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k != "JAX_PLATFORMS"}
    if platforms is not None:
        env["JAX_PLATFORMS"] = platforms
    args = [sys.executable, "-m", "bench.devices"] + (["--quick"] if quick else [])
    done = subprocess.run(args, env=env, capture_output=True, text=True, check=False, timeout=3600)
    if done.returncode != 0:
        raise RuntimeError(f"bench.devices failed: {done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


if __name__ == "__main__":
    import json
    import sys

    print(json.dumps(run(quick="--quick" in sys.argv)))
