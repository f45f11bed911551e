"""Section 4 (Python side): big trees, and what building the diagram's model costs.

The trees are built the same way here and in the benchmark's kernel (seeded), as JAX
arrays, the way a model's parameters arrive:
- `layers-N`: a dict of N/2 layers, each {"weight": f32[4,4], "bias": f32[4]} (N leaves);
- `mlp-50`: a 50-layer MLP, {"layers": [{"w": f32[256,256], "b": f32[256]}, ...]};
- `transformer`: a small transformer's parameter tree (embeddings, 4 blocks of attention +
  MLP + layer norms, final norm, head).
"""

from __future__ import annotations

import cProfile
import io
import json
import pstats
import time
from collections.abc import Callable
from typing import Any

from .stats import summary

SIZES = {"layers-100": 100, "layers-1k": 1_000, "layers-10k": 10_000}
TREE_NAMES = [*SIZES, "mlp-50", "transformer"]


def _arrays(seed: int) -> Callable[[tuple], Any]:
    import jax.numpy as jnp
    import numpy as np

    rng = np.random.default_rng(seed)
    return lambda shape: jnp.asarray(rng.standard_normal(shape, dtype=np.float32) * 0.1)


def layers(n_leaves: int, seed: int = 0) -> dict:
    arr = _arrays(seed)
    return {f"layer_{i:05d}": {"weight": arr((4, 4)), "bias": arr((4,))} for i in range(n_leaves // 2)}


def mlp(depth: int = 50, width: int = 256, seed: int = 1) -> dict:
    arr = _arrays(seed)
    return {"layers": [{"w": arr((width, width)), "b": arr((width,))} for _ in range(depth)]}


def transformer(blocks: int = 4, d: int = 128, vocab: int = 1000, context: int = 128, seed: int = 2) -> dict:
    arr = _arrays(seed)

    def dense(n_in: int, n_out: int) -> dict:
        return {"kernel": arr((n_in, n_out)), "bias": arr((n_out,))}

    def norm() -> dict:
        return {"scale": arr((d,)), "bias": arr((d,))}

    return {
        "embed": {"tokens": arr((vocab, d)), "positions": arr((context, d))},
        "blocks": [
            {
                "ln_1": norm(),
                "attention": {"query": dense(d, d), "key": dense(d, d), "value": dense(d, d), "out": dense(d, d)},
                "ln_2": norm(),
                "mlp": {"fc": dense(d, 4 * d), "proj": dense(4 * d, d)},
            }
            for _ in range(blocks)
        ],
        "ln_f": norm(),
        "head": {"kernel": arr((d, vocab))},
    }


def build(name: str) -> Any:
    if name in SIZES:
        return layers(SIZES[name])
    if name == "mlp-50":
        return mlp()
    if name == "transformer":
        return transformer()
    raise KeyError(name)


def build_all() -> dict:
    return {name: build(name) for name in TREE_NAMES}


def _model(tree: Any) -> dict:
    """The diagram's model for one tree, step by step (seconds)."""
    from pytree_lab import PytreeDiagram, describe
    from pytree_lab.diagram_rows import align

    c0 = time.process_time()
    t0 = time.perf_counter()
    s = describe(tree)
    t1 = time.perf_counter()
    align([s])
    t2 = time.perf_counter()
    # the widget does all of it again (describe, align, traits) ...
    w = PytreeDiagram(tree)
    t3 = time.perf_counter()
    # ... and its state is serialised for the page
    wire = json.dumps(w.get_state())
    t4 = time.perf_counter()
    c4 = time.process_time()
    w.close()
    return {
        "describe": t1 - t0,
        "align": t2 - t1,
        "widget": t3 - t2,
        "json": t4 - t3,
        "cpu_all": c4 - c0,
        "model": (t3 - t2) + (t4 - t3),
        "bytes": len(wire),
        "leaves": s.num_leaves,
        "rows": len(w.rows),
    }


def run(trees: dict, reps: dict | None = None) -> dict:
    """describe / align / widget / JSON per tree, median of a few repetitions."""
    reps = reps or {}
    out = {}
    for name, tree in trees.items():
        runs = [_model(tree) for _ in range(reps.get(name, 3))]
        out[name] = {
            k: summary([r[k] for r in runs])["median"] if isinstance(runs[0][k], float) else runs[0][k] for k in runs[0]
        }
        out[name]["runs"] = len(runs)
    return out


def profile_model(tree: Any, top: int = 12) -> str:
    """cProfile of building the diagram's model (widget + state JSON): the top functions by own time."""
    from pytree_lab import PytreeDiagram

    prof = cProfile.Profile()
    prof.enable()
    w = PytreeDiagram(tree)
    json.dumps(w.get_state())
    prof.disable()
    w.close()
    buf = io.StringIO()
    pstats.Stats(prof, stream=buf).sort_stats("tottime").print_stats(top)
    lines = [ln for ln in buf.getvalue().splitlines() if ln.strip()]
    # keep the header line with the total and the table
    start = next((i for i, ln in enumerate(lines) if "function calls" in ln), 0)
    body = next((i for i, ln in enumerate(lines) if ln.lstrip().startswith("ncalls")), start)
    return "\n".join([lines[start].strip()] + lines[body:])


def gc_share(tree: Any, reps: int = 3) -> dict:
    """PytreeDiagram(tree) with Python's cyclic GC running and paused: how much of the time is collection."""
    import gc

    from pytree_lab import PytreeDiagram

    def once() -> float:
        t0 = time.perf_counter()
        w = PytreeDiagram(tree)
        took = time.perf_counter() - t0
        w.close()
        return took

    on, off = [], []
    for _ in range(reps):
        on.append(once())
        gc.disable()
        try:
            off.append(once())
        finally:
            gc.enable()
    return {
        "gc_on_s": summary(on)["median"],
        "gc_paused_s": summary(off)["median"],
        "tracked_objects": len(gc.get_objects()),
    }


# In a real kernel (ipykernel via jupyter_client, no page attached): where PytreeDiagram(tree)'s
# time goes, per phase, by CPU time of the kernel's main thread. The phases are timed by
# wrapping the functions the diagram calls, inside that kernel only; nothing is changed on disk.
KERNEL_PHASES = r'''
import sys, time, gc
sys.path.insert(0, {repo!r})
from bench.trees import build
import ipywidgets
import pytree_lab.diagram as _D
from pytree_lab import PytreeDiagram
_TREE = build({name!r})
PytreeDiagram({{"warm": [1.0, 2.0]}})
_ACC, _GC, _RUNS = {{}}, [], []
def _timed(name, f):
    def g(*a, **k):
        c = time.thread_time()
        try:
            return f(*a, **k)
        finally:
            _ACC[name] = _ACC.get(name, 0.0) + time.thread_time() - c
    return g
_D.describe = _timed("describe", _D.describe)
_D.align = _timed("align", _D.align)
for _tr, _f in (("rows", _D._rows_json), ("panels", _D._panels_json)):
    _D.PytreeDiagram.class_traits()[_tr].metadata["to_json"] = _timed("state JSON text", _f)
ipywidgets.Widget._send = _timed("comm message (json_clean, pack, sign, send)", ipywidgets.Widget._send)
def _gc(phase, info, _s=[0.0]):
    if phase == "start":
        _s[0] = time.thread_time()
    else:
        _GC.append(time.thread_time() - _s[0])
gc.callbacks.append(_gc)
for _ in range({runs}):
    _ACC.clear(); _GC.clear()
    _c, _t = time.process_time(), time.perf_counter()
    _d = PytreeDiagram(_TREE)
    _cpu, _wall = time.process_time() - _c, time.perf_counter() - _t
    _d.close()
    _RUNS.append(dict(_ACC, **{{"cyclic GC": sum(_GC), "process CPU (all threads)": _cpu, "wall": _wall}}))
gc.callbacks.remove(_gc)
print(__import__("json").dumps(_RUNS))
'''


def kernel_phases(name: str = "layers-10k", runs: int = 5) -> dict:
    """PytreeDiagram(tree) in a fresh ipykernel, `runs` times: median seconds per phase."""
    import json as _json
    import os
    from pathlib import Path

    from jupyter_client.manager import start_new_kernel

    repo = str(Path(__file__).resolve().parents[1])
    km, kc = start_new_kernel(kernel_name="python3", env={**os.environ, "JAX_PLATFORMS": "cpu"})
    out: list[str] = []
    try:

        def hook(msg):
            if msg["msg_type"] == "stream":
                out.append(msg["content"]["text"])
            elif msg["msg_type"] == "error":
                raise RuntimeError("\n".join(msg["content"]["traceback"]))

        kc.execute_interactive(KERNEL_PHASES.format(repo=repo, name=name, runs=runs), output_hook=hook, timeout=600)
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)
    rs = _json.loads("".join(out).strip().splitlines()[-1])
    return {k: summary([r.get(k, 0.0) for r in rs])["median"] for k in rs[0]} | {"runs": len(rs)}
