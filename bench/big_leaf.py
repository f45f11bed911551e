"""Section 4c: one big leaf (10^7 values) and a tree that contains itself.

A 10^7-element leaf once took 16 s to build an explorer for (its 10^7 element labels were
made three times, for the 24 a view shows); a dict holding itself ran for 20 s and grew to
4 GB before failing. Both are timed here, each step apart, in this process.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from .stats import Table, fmt, summary, verdict

N = 10**7
TARGET_EXPLORER_S = 3.0  # build a StepExplorer whose params hold a 10^7-element leaf
TARGET_CYCLE_MS = 10.0  # describe() refuses a tree that contains itself


def _params() -> dict:
    import jax.numpy as jnp

    return {"w": jnp.full(N, 0.001, jnp.float32), "b": jnp.float32(0.5)}


def _loss(p: dict, x: Any) -> Any:
    import jax.numpy as jnp

    return jnp.mean((p["w"] * x) ** 2) + p["b"] ** 2


def _timed(fn: Callable[[], Any], reps: int) -> dict:
    wall, cpu = [], []
    for _ in range(reps):
        c0, t0 = time.process_time(), time.perf_counter()
        out = fn()
        wall.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
        close = getattr(out, "close", None)
        if close is not None:
            close()
    return {"wall_s": summary(wall)["median"], "cpu_s": summary(cpu)["median"], "runs": reps}


def run(quick: bool = False) -> dict:
    import jax.numpy as jnp

    from pytree_lab import PytreeDiagram, StepExplorer, describe
    from pytree_lab.trees import TreeError, element_labels

    reps = 1 if quick else 3
    params = _params()
    grads = {"w": params["w"] * 2.0, "b": jnp.float32(1.0)}
    updated = {"w": params["w"] - 0.1 * grads["w"], "b": params["b"] - 0.1}
    leaf = describe(params, values=False).leaves[1]  # ['w']

    def cyclic() -> None:
        d: dict = {"w": params["w"]}
        d["self"] = d
        try:
            describe(d)
        except TreeError:
            return None
        raise AssertionError("a cyclic tree was accepted")

    out = {
        "describe": _timed(lambda: describe(params), reps),
        "labels_24": _timed(lambda: list(element_labels(leaf)[:24]), reps),
        "diagram_3_trees": _timed(lambda: PytreeDiagram(params, grads=grads, updated=updated), reps),
        "explorer": _timed(lambda: StepExplorer(_loss, params, {"x": jnp.float32(2.0)}), reps),
        "cyclic_describe": _timed(cyclic, max(reps, 5)),
    }
    return out


def table(r: dict) -> Table:
    t = Table(
        "4c. One 10^7-element leaf (params {'w': f32[10^7], 'b': f32[]}) and a tree that contains itself",
        ["what", "wall (median)", "cpu", "runs", "target", "ok/MISSED"],
    )
    names = {
        "describe": "describe(params)",
        "labels_24": "element_labels(w)[:24]",
        "diagram_3_trees": "PytreeDiagram(params, grads, updated)",
        "explorer": "StepExplorer(loss, params, inputs): build + first step",
        "cyclic_describe": "describe(d) with d['self'] = d (refused)",
    }
    for key, label in names.items():
        row = r[key]
        target, ok = "", None
        if key == "explorer":
            target, ok = f"≤ {TARGET_EXPLORER_S:g} s", row["wall_s"] <= TARGET_EXPLORER_S
        if key == "cyclic_describe":
            target, ok = f"≤ {TARGET_CYCLE_MS:g} ms", row["wall_s"] * 1e3 <= TARGET_CYCLE_MS
        t.add(
            label,
            fmt(row["wall_s"] * 1e3, " ms"),
            fmt(row["cpu_s"] * 1e3, " ms"),
            str(row["runs"]),
            target,
            verdict(ok),
        )
    t.notes.append("before: the explorer took 16 s (10^7 labels made three times); the cyclic dict 20 s and 4 GB")
    t.notes.append("the explorer's wall time includes compiling its step (XLA) once")
    return t
