"""Section 8 (devices): a slider move (`ex.set_params`) and `ex.step(100)` on the host's CPU and,
where JAX sees one, on the accelerator, side by side, for trees from the lesson's 3 parameters
to 16M. The default placement (`pytree_lab.engine.ACCELERATOR_PARAMS`) comes from this table;
docs/backends.md keeps the TPU v5e reading.
"""

from __future__ import annotations

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


def run(moves: int = 15, quick: bool = False) -> dict:
    import jax
    import numpy as np

    from pytree_lab import StepExplorer, lesson

    devices = list(dict.fromkeys([jax.devices("cpu")[0], jax.devices()[0]]))
    models = dict(list(MODELS.items())[:3]) if quick else MODELS
    out: dict = {}
    for name, spec in models.items():
        for device in devices:
            if spec is None:
                p0 = lesson.lesson_params()
                ex = StepExplorer(time_budget=None, device=device)
            else:
                p0, inputs = _mlp(*spec)
                ex = StepExplorer(_loss, p0, inputs, time_budget=None, device=device)
            n = sum(int(np.size(leaf)) for leaf in jax.tree.leaves(p0))
            took = []
            for i in range(moves):
                moved = jax.tree.map(lambda a, i=i: np.asarray(a) * np.float32(1 + 1e-3 * i), p0)
                t0 = time.perf_counter()
                ex.set_params(moved)
                took.append(time.perf_counter() - t0)
            steps = 10 if n > 10_000_000 else 100
            ex.step(steps)  # the loop's compile
            t0 = time.perf_counter()
            ex.step(steps)
            run_s = time.perf_counter() - t0
            later = sorted(took[3:])
            out[f"{name} | {device.platform}"] = {
                "params": n,
                "device": ex.session.device_name,
                "move_ms": later[len(later) // 2] * 1e3,
                "run_ms": run_s * 1e3,
                "run_steps": steps,
            }
            ex.close()
    return out


def table(r: dict) -> Table:
    from pytree_lab.engine import ACCELERATOR_PARAMS

    t = Table(
        "8. per device: a slider move (set_params, median) and step(100), on the host CPU and the accelerator",
        ["model | platform", "parameters", "device", "set_params", "step(100)"],
    )
    for name, v in r.items():
        steps = "" if v["run_steps"] == 100 else f" (step({v['run_steps']}))"
        t.add(name, f"{v['params']:,}", v["device"], fmt(v["move_ms"], " ms"), fmt(v["run_ms"], " ms") + steps)
    t.notes.append(
        f"measured on {', '.join(sorted({name.rsplit(' | ', 1)[1] for name in r}))}; by default a tree of "
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
    done = subprocess.run(args, env=env, capture_output=True, text=True, check=False, timeout=1800)
    if done.returncode != 0:
        raise RuntimeError(f"bench.devices failed: {done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


if __name__ == "__main__":
    import json
    import sys

    print(json.dumps(run(quick="--quick" in sys.argv)))
