"""Section 4f: the lecture demo a lecturer projects, a small transformer trained with Adam.

The model is the one tests/browser/test_browser_lecture_layout.py projects, read from that test
(token and position embeddings, two blocks of causal attention and an MLP with layer norms, a
final norm, tied output weights: 37 leaves, 1,392 values). Measured in a fresh process each run (jax and pytree-lab
imported before the clock starts): `StepExplorer(...)` build + first step (the trace and XLA
compile of the step, every view filled), then slider moves from Python (value_and_grad, Adam's
update, the new loss and every view).

Beside it, this machine's floor for the same first step: in another fresh process, a
hand-written `jax.jit` of what the explorer's step computes (value_and_grad, Adam's init and
update, apply_updates, the loss at the updated parameters), first call, the clock read the same
way. The ratio of the two is what pytree-lab adds; it holds across machines, where the seconds
do not.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

from .stats import Table, fmt, summary, verdict

TARGET_BUILD_S = 2.5  # build + first step (the measure on a quiet machine)
TARGET_MOVE_S = 0.1  # one slider move, median
TARGET_RATIO = 1.5  # build + first step over the hand-written jitted step's first call


def transformer():
    """(params, loss, inputs) of the small transformer: the lecture-layout test's own model text
    (one definition: what is measured here is what that test projects)."""
    from tests.browser.test_browser_lecture_layout import MODELS

    namespace: dict = {}
    exec(MODELS, namespace)  # noqa: S102 - the repository's own test model
    return namespace["tf_params"], namespace["tf_loss"], {"tokens": namespace["tokens"], "labels": namespace["labels"]}


def _one(moves: int) -> dict:
    """In the child process: build the explorer, then move one slider `moves` times."""
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    import jax
    import optax

    from pytree_lab import StepExplorer

    params, loss, inputs = transformer()
    t0 = time.perf_counter()
    ex = StepExplorer(loss, params, inputs, 0.01, optimizer=lambda lr: optax.adam(lr))
    build = time.perf_counter() - t0
    out = {
        "leaves": len(jax.tree.leaves(params)),
        "values": sum(x.size for x in jax.tree.leaves(params)),
        "build_s": build,
        "ok": ex.result is not None,
        "sliders": len(ex.sliders),
    }
    if ex.result is None:
        out["message"] = ex.status.value[:300]
        return out
    slider = next(s for name, s in ex.sliders.items() if name != "learning_rate")
    v0, times = slider.value, []
    for i in range(moves):
        t = time.perf_counter()
        slider.value = v0 + 0.01 * (i + 1)
        times.append(time.perf_counter() - t)
    out["move_s"] = summary(times)
    out["loss_after"] = float(ex.result.loss)
    ex.close()
    return out


def _floor() -> dict:
    """In the child process: the hand-written jitted step, first call (trace + XLA compile + run)."""
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    import jax
    import optax

    params, loss, inputs = transformer()
    t0 = time.perf_counter()
    opt = optax.adam(0.01)

    @jax.jit
    def step(p, state):
        value, grads = jax.value_and_grad(loss)(p, **inputs)
        updates, state = opt.update(grads, state, p)
        new = optax.apply_updates(p, updates)
        return value, grads, new, state, loss(new, **inputs)

    out = step(params, opt.init(params))
    jax.block_until_ready(out)
    return {"floor_s": time.perf_counter() - t0, "loss_after": float(out[4])}


def _child(args: list[str], timeout: float) -> dict:
    proc = subprocess.run(
        [sys.executable, "-m", "bench.lecture", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, "JAX_PLATFORMS": "cpu"},
        cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
    )
    line = next((ln for ln in reversed(proc.stdout.splitlines()) if ln.startswith("{")), None)
    return json.loads(line) if proc.returncode == 0 and line else {"ok": False, "message": proc.stderr[-800:]}


def run(quick: bool = False, repeats: int | None = None, timeout: float = 600.0) -> dict:
    """`repeats` fresh processes (3; 1 with --quick), each building once and moving 10 times."""
    repeats = repeats or (1 if quick else 3)
    runs, floors = [], []
    for _ in range(repeats):  # alternated, so a change in the machine's load reaches both
        runs.append(_child(["--one", "10"], timeout))
        floors.append(_child(["--floor"], timeout))
    return {"runs": runs, "floors": floors}


def table(r: dict) -> Table:
    t = Table(
        "4f. The lecture transformer (37 leaves, Adam): build + first step, slider moves",
        ["measure", "median", "runs", "target", "ok/MISSED"],
    )
    good = [x for x in r["runs"] if x.get("ok")]
    if not good:
        t.add("build + first step", "failed", str(len(r["runs"])), f"≤ {TARGET_BUILD_S:g} s", verdict(False))
        t.notes.append(r["runs"][0].get("message", "")[:300] if r["runs"] else "no run")
        return t
    builds = summary([x["build_s"] for x in good])
    moves = summary([x["move_s"]["median"] for x in good])
    t.add(
        "build + first step",
        fmt(builds["median"], " s"),
        str(len(good)),
        f"≤ {TARGET_BUILD_S:g} s",
        verdict(builds["median"] <= TARGET_BUILD_S),
    )
    t.add(
        "one slider move (median of 10 per run)",
        fmt(moves["median"] * 1e3, " ms"),
        str(len(good)),
        f"≤ {TARGET_MOVE_S * 1e3:g} ms",
        verdict(moves["median"] <= TARGET_MOVE_S),
    )
    floors = [x["floor_s"] for x in r.get("floors", []) if "floor_s" in x]
    if floors:
        floor = summary(floors)["median"]
        ratio = builds["median"] / floor
        t.add("floor: hand-written jitted step, first call", fmt(floor, " s"), str(len(floors)), "", "")
        t.add("build + first step / floor", f"{ratio:.2f}×", "", f"≤ {TARGET_RATIO:g}×", verdict(ratio <= TARGET_RATIO))
    t.notes.append(
        f"{good[0]['leaves']} leaves, {good[0]['values']:,} values, {good[0]['sliders']} sliders; "
        "each run a fresh process (jax, optax and pytree-lab imported before the clock starts)"
    )
    t.notes.append("a move: one slider set from Python (value_and_grad, Adam's update, the new loss, every view)")
    return t


if __name__ == "__main__":
    if len(sys.argv) >= 3 and sys.argv[1] == "--one":
        print(json.dumps(_one(int(sys.argv[2]))))
    elif len(sys.argv) >= 2 and sys.argv[1] == "--floor":
        print(json.dumps(_floor()))
    else:
        res = run(quick="--quick" in sys.argv)
        print(table(res).render())
