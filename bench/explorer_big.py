"""Section 4d: a StepExplorer for trees of 400, 2k and 10k leaves (build + first step, memory,
later steps), with the step compiled as before and as now.

before: `value_and_grad` and the update + new loss compiled as two XLA programs (the second one
holds the whole loss again). now (`pytree_lab.step.LEAN_LEAVES` leaves or more): only
`value_and_grad` is traced (compiled below `pytree_lab.step.INTERPRET_EQNS` operations, run
operation by operation past it), the new loss comes from that same program at the updated params,
and the update p − η·g is done leaf by leaf in numpy (bitwise the numbers eager JAX gives).

Each (tree, path) runs in its own Python process, so its peak RSS is its own; a run that does
not finish within the timeout is reported as such, not waited for. The model is the one a
person writes for a tree of layers: ``sum(jnp.sum((w @ x + b) ** 2) for each layer)``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

from .stats import Table, fmt, summary, verdict

SIZES = (400, 2_000, 10_000)
PATHS = ("before", "now")
TARGET_BUILD_10K_S = 20.0  # build + first step of the 10k-leaf explorer (was 46 s on a quiet machine)
TARGET_RSS_10K_MB = 1_000.0  # peak RSS of that process (was 3.9 GB)


def _loss(p, x):
    import jax.numpy as jnp

    return sum(jnp.sum((layer["weight"] @ x + layer["bias"]) ** 2) for layer in p.values())


def _one(n_leaves: int, path: str, moves: int) -> dict:
    """Runs in the child process: build the explorer, then move one slider `moves` times."""
    import resource

    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    import jax.numpy as jnp
    import numpy as np

    import pytree_lab.step
    from pytree_lab import StepExplorer

    from .trees import layers

    if path == "before":
        pytree_lab.step.LEAN_LEAVES = 10**9  # never lean: the two-program step of before
    params = layers(n_leaves)
    x = jnp.asarray(np.array([1.0, -0.5, 0.25, 2.0], np.float32))
    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e3
    c0, t0 = time.process_time(), time.perf_counter()
    ex = StepExplorer(_loss, params, {"x": x}, time_budget=None)
    build = time.perf_counter() - t0
    build_cpu = time.process_time() - c0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e3
    out = {
        "leaves": n_leaves,
        "path": path,
        "build_s": build,
        "build_cpu_s": build_cpu,
        "rss_before_mb": rss_before,
        "peak_rss_mb": peak,
        "ok": ex.result is not None,
        "lean": bool(getattr(ex.session.slider_step, "lean", False)),
        "interpreted": bool(getattr(ex.session.slider_step, "interpreted", False)),
        "eqns": int(getattr(getattr(ex.session.slider_step, "staged", None), "eqns", 0)),
    }
    if ex.result is None:
        out["message"] = ex.status.value[:300]
        return out
    _, slider = ex.param_sliders[0]
    v0 = slider.value
    times = []
    for i in range(moves):
        t = time.perf_counter()
        slider.value = v0 + 0.01 * (i + 1)
        times.append(time.perf_counter() - t)
    out["step_s"] = summary(times)
    out["steps_ok"] = ex.result is not None and ex.session.good_now
    staged = getattr(ex.session.slider_step, "staged", None)
    if staged is not None and staged.compiling:  # the background compile: when it is ready, and after
        staged.wait_compiled(900)
        out["compiled_after_build_s"] = time.perf_counter() - t0
        out["peak_rss_after_compile_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e3
        later = []
        for i in range(3):
            t = time.perf_counter()
            slider.value = v0 - 0.01 * (i + 1)
            later.append(time.perf_counter() - t)
        out["step_compiled_s"] = summary(later)
    ex.close()
    return out


def run(
    quick: bool = False, timeout: float = 1200.0, before_10k_timeout: float = 600.0, sizes=SIZES, paths=PATHS
) -> dict:
    """Every (size, path) in its own process. The old path at 10k leaves never finished in 15 min
    on 2 loaded cores, so it gets `before_10k_timeout` (and is left out with --quick)."""
    moves = 3 if quick else 7
    results: dict = {"runs": [], "timeout_s": timeout, "load_average_at_start": _load()}
    for n in sizes:
        for path in paths:
            limit = before_10k_timeout if (n >= 10_000 and path == "before") else timeout
            if quick and n >= 10_000 and path == "before":
                continue
            cmd = [sys.executable, "-m", "bench.explorer_big", "--one", str(n), path, str(moves)]
            t0 = time.perf_counter()
            try:
                proc = subprocess.run(
                    cmd,
                    capture_output=True,
                    text=True,
                    timeout=limit,
                    env={**os.environ, "JAX_PLATFORMS": "cpu"},
                    cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                )
            except subprocess.TimeoutExpired:
                results["runs"].append(
                    {"leaves": n, "path": path, "timed_out": True, "limit_s": limit, "wall_s": time.perf_counter() - t0}
                )
                print(f"  {n} leaves, {path}: not done after {limit:.0f} s", flush=True)
                continue
            line = next((ln for ln in reversed(proc.stdout.splitlines()) if ln.startswith("{")), None)
            if proc.returncode != 0 or line is None:
                results["runs"].append({"leaves": n, "path": path, "failed": True, "stderr": proc.stderr[-800:]})
                print(f"  {n} leaves, {path}: failed\n{proc.stderr[-800:]}", flush=True)
                continue
            r = json.loads(line)
            results["runs"].append(r)
            print(
                f"  {n} leaves, {path}: build + first step {r['build_s']:.1f} s, peak RSS {r['peak_rss_mb']:.0f} MB",
                flush=True,
            )
    results["load_average_at_end"] = _load()
    return results


def _load() -> list:
    try:
        return [round(v, 2) for v in os.getloadavg()]
    except OSError:
        return []


def table(r: dict) -> Table:
    t = Table(
        "4d. StepExplorer for big trees (layers of {'weight': f32[4,4], 'bias': f32[4]}): before vs now",
        [
            "leaves",
            "step compiled as",
            "build + first step",
            "cpu",
            "peak RSS",
            "later step (median)",
            "target",
            "ok/MISSED",
        ],
    )
    for run_ in r["runs"]:
        n, path = run_["leaves"], run_["path"]
        label = "before: 2 programs (loss twice)" if path == "before" else "now: value_and_grad only"
        if run_.get("compiled_after_build_s") is not None:
            label = (
                f"now: op by op, compiled in the background ({run_.get('eqns', 0):,} ops; ready at "
                f"{run_['compiled_after_build_s']:.0f} s, then steps of "
                f"{run_['step_compiled_s']['median'] * 1e3:.0f} ms, peak {run_['peak_rss_after_compile_mb']:.0f} MB)"
            )
        elif run_.get("interpreted"):
            label = f"now: value_and_grad run op by op ({run_.get('eqns', 0):,} ops)"
        elif path == "now" and run_.get("eqns"):
            label = f"now: value_and_grad compiled ({run_['eqns']:,} ops)"
        if run_.get("timed_out"):
            judged = n == 10_000 and path == "now"
            t.add(
                str(n),
                label,
                f"> {run_.get('limit_s', r['timeout_s']):.0f} s (stopped)",
                "—",
                "—",
                "—",
                f"≤ {TARGET_BUILD_10K_S:g} s, ≤ {TARGET_RSS_10K_MB:g} MB" if judged else "",
                verdict(False) if judged else "",
            )
            continue
        if run_.get("failed") or not run_.get("ok"):
            t.add(str(n), label, "failed", "—", "—", "—", "", verdict(False))
            continue
        judged = n == 10_000 and path == "now"
        ok = run_["build_s"] <= TARGET_BUILD_10K_S and run_["peak_rss_mb"] <= TARGET_RSS_10K_MB
        step = run_.get("step_s", {}).get("median")
        t.add(
            str(n),
            label,
            fmt(run_["build_s"], " s"),
            fmt(run_["build_cpu_s"], " s"),
            fmt(run_["peak_rss_mb"], " MB"),
            fmt(step * 1e3, " ms") if step is not None else "—",
            f"≤ {TARGET_BUILD_10K_S:g} s, ≤ {TARGET_RSS_10K_MB:g} MB" if judged else "",
            verdict(ok) if judged else "",
        )
    t.notes.append(
        "build + first step: StepExplorer(loss, params, {'x': x}) in a fresh process (jax imported "
        "before the clock starts), time_budget=None so a slow trace is measured, not stopped"
    )
    t.notes.append(
        "peak RSS: the process's ru_maxrss (JAX and the widgets loaded: "
        + ", ".join(f"{x['rss_before_mb']:.0f} MB" for x in r["runs"] if "rss_before_mb" in x)
        + " before the build)"
    )
    t.notes.append("later step: one slider moved from Python (value_and_grad, update, new loss, every view)")
    t.notes.append(f"load average at start {r.get('load_average_at_start')}, at end {r.get('load_average_at_end')}")
    return t


if __name__ == "__main__":
    if len(sys.argv) >= 4 and sys.argv[1] == "--one":
        print(json.dumps(_one(int(sys.argv[2]), sys.argv[3], int(sys.argv[4]) if len(sys.argv) > 4 else 5)))
    else:
        res = run(quick="--quick" in sys.argv)
        print(table(res).render())
