"""Section 7a: where a student kernel's memory goes during lesson 01.

A fresh ipykernel of this environment (started with jupyter_client, as a single-user server
starts it) runs lesson 01's code cells one by one; after each cell the kernel's RSS (every
page it maps, shared libraries included), its own memory (anonymous and privately written pages,
smaps' Private_Dirty: what one more kernel on a node adds, whatever else runs there) and USS
(every page no other process maps: the libraries' pages too when nothing else maps them, so it
depends on what else runs) are read. The cells that add the most are
listed, and the finished kernel is split by what the pages back (smaps: jaxlib / XLA's shared
library, other libraries, the heap and anonymous memory).

Variants, each in its own fresh kernel, so one run compares them side by side:

- `as is`: the kernel as jupyter starts it;
- `one malloc arena`: MALLOC_ARENA_MAX=2 (glibc keeps one heap per thread by default, and
  XLA's CPU client starts a thread pool per core plus its own threads).
"""

from __future__ import annotations

import os
import queue
import shutil
import tempfile
import time

from .lab import REPO  # noqa: F401  (puts the repository on sys.path)
from .stats import Table, fmt

VARIANTS = {
    "as is": {},
    "one malloc arena": {"MALLOC_ARENA_MAX": "2"},
}


def _smaps_split(pid: int) -> dict:
    """RSS by what backs it: jaxlib/XLA's shared objects, other shared objects, anonymous (heap)."""
    out = {"xla_so_mb": 0.0, "other_so_mb": 0.0, "anon_mb": 0.0, "other_mb": 0.0}
    current = None
    try:
        with open(f"/proc/{pid}/smaps") as f:
            for line in f:
                parts = line.split()
                if not parts:
                    continue
                if "-" in parts[0] and len(parts) >= 5 and not parts[0].endswith(":"):
                    path = parts[5] if len(parts) > 5 else ""
                    if "jaxlib" in path or "xla" in path.lower():
                        current = "xla_so_mb"
                    elif path.endswith(".so") or ".so." in path:
                        current = "other_so_mb"
                    elif path == "" or path.startswith(("[heap]", "[anon")):
                        current = "anon_mb"
                    else:
                        current = "other_mb"
                elif parts[0] == "Rss:" and current:
                    out[current] += int(parts[1]) / 1024
    except OSError:
        pass
    return out


def _own_mb(pid: int) -> float:
    """The kernel's own memory: pages it wrote (heap, stacks, libraries' relocated data), which no
    other kernel can share; the libraries' clean pages are shared by every kernel on the node."""
    with open(f"/proc/{pid}/smaps_rollup") as f:
        return next(int(line.split()[1]) * 1024 / 1e6 for line in f if line.startswith("Private_Dirty:"))


IMPORT_TARGET_MB = 25  # the widgets' import, after JAX's own
OWN_TARGET_MB = 220  # a student kernel's own memory after lesson 01
IMPORT_CELLS = ["import jax, jax.numpy as jnp\njnp.zeros(2).block_until_ready()", "from pytree_lab import StepExplorer"]


def measure(env_extra: dict, cells: list[str], timeout: float = 600.0) -> dict:
    import psutil
    from jupyter_client.manager import KernelManager

    env = dict(os.environ)
    env.setdefault("JAX_PLATFORMS", "cpu")
    env.update(env_extra)
    workdir = tempfile.mkdtemp(prefix="pytree-lab-bench-kernelmem-")  # the lesson saves its evidence here
    km = KernelManager(kernel_name="python3")
    km.start_kernel(env=env, cwd=workdir)
    kc = km.client()
    kc.start_channels()
    try:
        kc.wait_for_ready(timeout=120)
        pid = km.provisioner.process.pid
        proc = psutil.Process(pid)

        def mem():
            full = proc.memory_full_info()
            return full.rss / 1e6, full.uss / 1e6, _own_mb(pid)

        rss0, uss0, own0 = mem()
        steps = []
        errors = []
        for i, code in enumerate(cells):
            msg_id = kc.execute(code, store_history=True)
            deadline = time.monotonic() + timeout
            while True:
                try:
                    reply = kc.get_shell_msg(timeout=max(1.0, deadline - time.monotonic()))
                except queue.Empty:
                    errors.append(f"cell {i}: no reply")
                    break
                if reply["parent_header"].get("msg_id") == msg_id:
                    if reply["content"]["status"] != "ok":
                        errors.append(f"cell {i}: {reply['content'].get('ename')}")
                    break
            while True:  # drain iopub so it does not pile up
                try:
                    kc.get_iopub_msg(timeout=0.05)
                except queue.Empty:
                    break
            rss, uss, own = mem()
            steps.append(
                {
                    "cell": i,
                    "first_line": code.strip().splitlines()[0][:70] if code.strip() else "",
                    "rss_mb": rss,
                    "uss_mb": uss,
                    "own_mb": own,
                }
            )
        threads = proc.num_threads()
        split = _smaps_split(pid)
        return {
            "start_rss_mb": rss0,
            "start_uss_mb": uss0,
            "steps": steps,
            "errors": errors,
            "rss_mb": steps[-1]["rss_mb"] if steps else rss0,
            "uss_mb": steps[-1]["uss_mb"] if steps else uss0,
            "own_mb": steps[-1]["own_mb"] if steps else own0,
            "threads": threads,
            "split": split,
        }
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)
        shutil.rmtree(workdir, ignore_errors=True)


def run(variants=tuple(VARIANTS)) -> dict:
    from tests.hub_harness import lesson_cells

    cells = lesson_cells()
    out = {name: measure(VARIANTS[name], cells) for name in variants}
    imp = measure({}, IMPORT_CELLS)["steps"]
    out["the widgets' import"] = {
        "rss_mb": imp[1]["rss_mb"] - imp[0]["rss_mb"],
        "own_mb": imp[1]["own_mb"] - imp[0]["own_mb"],
    }
    return out


def table(r: dict) -> list[Table]:
    t = Table(
        "7a. A student kernel's memory after lesson 01 (fresh ipykernel, the lesson's code cells one by one)",
        [
            "kernel",
            "RSS at start",
            "RSS after lesson 01",
            f"own after (target {OWN_TARGET_MB} MB)",
            "USS after",
            "jaxlib/XLA .so",
            "other .so",
            "anonymous (heap)",
            "threads",
            "errors",
        ],
    )
    kernels = {name: m for name, m in r.items() if "split" in m}
    for name, m in kernels.items():
        s = m["split"]
        t.add(
            name,
            fmt(m["start_rss_mb"], " MB"),
            fmt(m["rss_mb"], " MB"),
            fmt(m["own_mb"], " MB"),
            fmt(m["uss_mb"], " MB"),
            fmt(s["xla_so_mb"], " MB"),
            fmt(s["other_so_mb"], " MB"),
            fmt(s["anon_mb"], " MB"),
            str(m["threads"]),
            str(len(m["errors"])),
        )
    t.notes.append(
        "RSS counts shared libraries' pages, which every kernel on a node maps from the same files; own "
        "(smaps' Private_Dirty) is what one more kernel adds; USS adds the libraries' pages no other process maps now"
    )
    imp = r.get("the widgets' import")
    if imp:
        t.notes.append(
            f"`from pytree_lab import StepExplorer` after JAX's import and first array: RSS +{imp['rss_mb']:.1f} MB, "
            f"own +{imp['own_mb']:.1f} MB (target {IMPORT_TARGET_MB} MB)"
        )
    first = next(iter(kernels.values()))
    prev = first["start_rss_mb"]
    growth = []
    for step in first["steps"]:
        growth.append((step["rss_mb"] - prev, step))
        prev = step["rss_mb"]
    growth.sort(key=lambda g: -g[0])
    t2 = Table(
        f"7b. Where lesson 01's RSS comes from ({next(iter(kernels))}): the cells that add the most",
        ["cell", "first line", "adds RSS", "RSS after"],
    )
    for added, step in growth[:8]:
        t2.add(str(step["cell"]), step["first_line"], fmt(added, " MB"), fmt(step["rss_mb"], " MB"))
    return [t, t2]


LESSONS = ("01_pytrees.ipynb", "02_packed_parameters.ipynb", "03_instructor_demo.ipynb")


def open_lessons(names=LESSONS, timeout: float = 900.0) -> dict:
    """Three lessons open at once, as a student who opened each in turn has them: one kernel per
    lesson, each through all its code cells, all three still running when they are measured.
    RSS counts the libraries the kernels share once per kernel; PSS shares them out (what a
    container's memory limit sees of them, with the page cache they charge once); USS is each
    kernel's own."""
    import psutil
    from jupyter_client.manager import KernelManager

    from tests.hub_harness import lesson_cells

    env = {**os.environ, "JAX_PLATFORMS": "cpu"}
    kernels = []
    try:
        for name in names:
            workdir = tempfile.mkdtemp(prefix="pytree-lab-bench-lessons-")
            km = KernelManager(kernel_name="python3")
            km.start_kernel(env=env, cwd=workdir)
            kc = km.client()
            kc.start_channels()
            kc.wait_for_ready(timeout=120)
            kernels.append((name, km, kc, workdir))
            for code in lesson_cells(name):
                reply = kc.execute_interactive(code, timeout=timeout, output_hook=lambda msg: None)
                if reply["content"]["status"] != "ok":
                    raise RuntimeError(f"{name}: {reply['content'].get('ename')}: {reply['content'].get('evalue')}")
        time.sleep(5)  # what the kernels settle at, not a peak mid-cell
        rows = {}
        for name, km, _kc, _w in kernels:
            full = psutil.Process(km.provisioner.process.pid).memory_full_info()
            rows[name] = {"rss_mb": full.rss / 1e6, "pss_mb": full.pss / 1e6, "uss_mb": full.uss / 1e6}
        total = {k: sum(r[k] for r in rows.values()) for k in ("rss_mb", "pss_mb", "uss_mb")}
        return {"kernels": rows, "total": total, "load": os.getloadavg()}
    finally:
        for _name, km, kc, workdir in kernels:
            kc.stop_channels()
            km.shutdown_kernel(now=True)
            shutil.rmtree(workdir, ignore_errors=True)
