"""Section 4e: the text form of three aligned 100k-leaf trees (params | grads | updated).

`PytreeDiagram({"params": p, "grads": g, "updated": u}).text()` prints the first 200 rows and the
row count. Trees with the same paths (the usual params, grads, updated) are printed from those
rows alone; aligning every row first took 1.0-1.5 s for 100k leaves (it was 0.07 s before big
trees became lazy). Timed after a full collection (Python's GC owes a pass over the objects
`set_trees` made with the collector paused; whoever allocates next pays it, text or not); the
first text() and later ones, median of a few. Trees that differ in a path take the general
alignment: timed too, for comparison.
"""

from __future__ import annotations

import gc
import time

from .stats import Table, fmt, summary, verdict

LEAVES = 100_000
TARGET_S = 0.1  # text() of the three aligned 100k-leaf trees


def _trees(n: int, seed: int = 0) -> list[dict]:
    import numpy as np

    rng = np.random.default_rng(seed)
    return [{f"w{i:06d}": np.float32(v) for i, v in enumerate(rng.normal(size=n) * scale)} for scale in (1, 2, 3)]


def _time_text(trees: dict, reps: int) -> dict:
    from pytree_lab import PytreeDiagram

    d = PytreeDiagram()
    d.set_trees(trees)
    gc.collect()
    t0 = time.perf_counter()
    text = d.text()
    first = time.perf_counter() - t0
    later = []
    for _ in range(reps):
        t0 = time.perf_counter()
        d.text()
        later.append(time.perf_counter() - t0)
    d.close()
    return {"first_s": first, "later_s": summary(later)["median"], "chars": len(text)}


def run(quick: bool = False) -> dict:
    p, g, u = _trees(LEAVES)
    reps = 2 if quick else 5
    same = _time_text({"params": p, "grads": g, "updated": u}, reps)
    g2 = dict(g)
    g2.pop(next(iter(g2)))  # one path missing: the general alignment
    differ = _time_text({"params": p, "grads": g2, "updated": u}, 1 if quick else 2)
    return {"leaves": LEAVES, "same_paths": same, "one_path_missing": differ, "target_s": TARGET_S}


def table(r: dict) -> Table:
    t = Table(
        f"4e. Text form of three aligned {r['leaves']:,}-leaf trees (PytreeDiagram.text())",
        ["trees", "first text()", "later text()", "target", "verdict"],
    )
    s, d = r["same_paths"], r["one_path_missing"]
    t.add(
        "same paths (params, grads, updated)",
        fmt(s["first_s"] * 1e3) + " ms",
        fmt(s["later_s"] * 1e3) + " ms",
        f"≤ {r['target_s'] * 1e3:.0f} ms",
        verdict(s["first_s"] <= r["target_s"]),
    )
    t.add(
        "one path missing in grads (every row aligned)",
        fmt(d["first_s"] * 1e3) + " ms",
        fmt(d["later_s"] * 1e3) + " ms",
        "",
        "",
    )
    t.notes.append("timed after gc.collect(): the pass Python's GC owes for the objects set_trees made is not text()'s")
    return t
