"""Section 7: a class on a real JupyterHub (127.0.0.1 only), N = 5, 10, 20 students.

One hub per N (tests/hub_harness.py): `jupyterhub` with its DummyAuthenticator and
SimpleLocalProcessSpawner, configurable-http-proxy from npm, each student's
`jupyterhub-singleuser` from this environment. Every student:

1. gets a token through the hub's REST API (the course's admin service creates the user and
   its token) and asks the hub for a server: the time until the hub says it is ready;
2. starts a kernel and runs lesson 01's code cells (content/01_pytrees.ipynb, as the students
   get it) through the kernel websocket, behind the proxy; then its kernel's memory is read;
3. once every student got there, moves the lesson explorer's x[0] slider once a second for a
   minute, with the comm message the page sends; a round trip ends when the kernel's `ack`
   for that move arrives (the explorer has recomputed and its views were sent by then).

One of the N is a real Chromium page in the same hub: it logs in on the hub's login page, runs
lesson 01 in JupyterLab (Run All) and presses ArrowRight / ArrowLeft on the explorer's x[0]
slider once a second; its round trip is key press -> the ack's comm message in the page.

Bounded: N at most 40 students, every wait has a time-out, everything listens on 127.0.0.1.
Reported per N: server start p50/p95, kernel memory after lesson 01 (RSS, and USS: the pages
this kernel alone holds), slider round trip p50/p95 (browserless, Chromium), the hub's and the
proxy's CPU, errors, and what a 24 GB, 2-core node holds by memory and by CPU.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import math
import os
import shutil
import tempfile
import threading
import time
from pathlib import Path

from .lab import FIND_PANEL, REPO  # noqa: F401  (puts the repository on sys.path)
from .stats import Table, fmt, summary

MAX_STUDENTS = 40
NODE_GB = 24.0
NODE_CORES = 2
SYSTEM_GB = 1.5  # kubelet, the OS, the image cache: not for students
CPU_SHARE = 0.7  # a node's CPU kept below 70% busy while everyone slides
CELL_TIMEOUT = 600.0  # one lesson cell, N students running theirs at once on 2 cores
ARRIVAL_TIMEOUT = 600.0  # every student at the start line; after it, those there slide anyway


def _proc_mb(pid: int | None) -> dict:
    import psutil

    if pid is None:
        return {}
    try:
        p = psutil.Process(pid)
        full = p.memory_full_info()
        return {"rss_mb": full.rss / 1e6, "uss_mb": full.uss / 1e6, "cpu_s": sum(p.cpu_times()[:2])}
    except psutil.Error:
        return {}


def _cpu_s(pid: int | None) -> float | None:
    import psutil

    if pid is None:
        return None
    try:
        t = psutil.Process(pid).cpu_times()
        return t.user + t.system
    except psutil.Error:
        return None


class _Class:
    """Shared state of one run: the start line, errors, samples."""

    def __init__(self, n: int):
        self.n = n
        self.t0 = time.perf_counter()
        self.arrived = 0
        self.lock = threading.Lock()
        self.go = threading.Event()
        self.errors: list[str] = []
        self.rows: dict[str, dict] = {}

    def arrive(self) -> None:
        with self.lock:
            self.arrived += 1
            if self.arrived >= self.n:
                self.go.set()

    def error(self, who: str, what: str) -> None:
        with self.lock:
            self.errors.append(f"{who}: {what}"[:1200])


async def _browserless(student, cells, klass: _Class, seconds: float, start_s: float) -> None:
    from tests.hub_harness import StudentKernel

    row = klass.rows.setdefault(student.name, {"kind": "websocket", "server_start_s": start_s, "rtt_ms": []})
    arrived = False
    kernel = None
    try:
        kernel_id = await asyncio.to_thread(student.start_kernel)
        kernel = await StudentKernel(student, kernel_id).connect()
        started = time.perf_counter()
        for i, code in enumerate(cells):
            out = await kernel.execute(code, timeout=CELL_TIMEOUT)
            if out["status"] != "ok":
                klass.error(student.name, f"lesson cell {i}: {out['error']}: {out['evalue']}")
        row["lesson_s"] = time.perf_counter() - started
        pid = await asyncio.to_thread(student.kernel_pid, kernel_id)
        row["kernel"] = await asyncio.to_thread(_proc_mb, pid)
        setup = await kernel.execute("_s = explorer.sliders['x[0]']\nprint(_s.model_id, _s.min, _s.max, _s.step)")
        comm_id, lo, hi, step = setup["stdout"].split()
        lo, hi, step = float(lo), float(hi), float(step)
        klass.arrive()
        arrived = True
        row["arrived_s"] = time.perf_counter() - klass.t0
        # polled on the event loop: a thread per waiting student would fill asyncio's default pool
        # (6 threads on 2 cores) and starve the students still starting their kernels
        waited = time.perf_counter()
        while not klass.go.is_set() and time.perf_counter() - waited < ARRIVAL_TIMEOUT:
            await asyncio.sleep(0.05)
        if not klass.go.is_set():
            klass.error(student.name, f"not every student reached the slider within {ARRIVAL_TIMEOUT:.0f} s")
        cpu0 = _cpu_s(pid)
        # once a second, a step up or down around 2.0 (a hand on the slider), the phase offset per student
        await asyncio.sleep((hash(student.name) % 1000) / 1000)
        t_end = time.perf_counter() + seconds
        seq, value, direction = 0, 2.0, 1
        while time.perf_counter() < t_end:
            tick = time.perf_counter()
            seq += 1
            value = value + direction * 10 * step
            if not lo <= value <= hi or abs(value - 2.0) > 1.0:
                direction = -direction
                value += 2 * direction * 10 * step
            try:
                row["rtt_ms"].append(1e3 * await kernel.move_slider(comm_id, round(value, 6), seq, timeout=30))
            except (TimeoutError, ConnectionError) as exc:
                klass.error(student.name, f"slider move {seq}: {type(exc).__name__}")
            await asyncio.sleep(max(0.0, 1.0 - (time.perf_counter() - tick)))
        cpu1 = _cpu_s(pid)
        row["moves"] = seq
        if cpu0 is not None and cpu1 is not None:
            row["kernel_cpu_per_move_ms"] = 1e3 * (cpu1 - cpu0) / max(seq, 1)
        check = await kernel.value("[explorer.sliders['x[0]'].ack, float(explorer.sliders['x[0]'].value)]")
        if check[0] != seq:
            klass.error(student.name, f"the kernel acknowledged move {check[0]}, {seq} were sent")
    except Exception as exc:  # noqa: BLE001 - counted and reported, the class goes on
        klass.error(student.name, f"{type(exc).__name__}: {exc}")
    finally:
        if not arrived:
            klass.arrive()
        if kernel is not None:
            await kernel.close()


# in the page: key presses, and the ack comm messages of one slider, with their times
INSTRUMENT = (
    """
({path, comm}) => {"""
    + FIND_PANEL
    + """
  const B = window.__hub = {keys: [], acks: []};
  find(path).sessionContext.session.kernel.iopubMessage.connect((_, msg) => {
    const c = msg.content || {};
    if (msg.header.msg_type === 'comm_msg' && c.comm_id === comm && c.data && c.data.state
        && c.data.state.ack !== undefined) B.acks.push({t: performance.now(), ack: c.data.state.ack});
  });
  document.addEventListener('keydown', (e) => {
    if (e.key === 'ArrowRight' || e.key === 'ArrowLeft') B.keys.push(performance.now());
  }, true);
}
"""
)
WAIT_ACK = """
async ({keys0, timeout}) => {
  const B = window.__hub;
  const start = performance.now();
  while (performance.now() - start < timeout) {
    if (B.keys.length > keys0) {
      const key = B.keys[B.keys.length - 1];
      const ack = B.acks.find((a) => a.t >= key);
      if (ack) return ack.t - key;
    }
    await new Promise((r) => setTimeout(r, 5));
  }
  return null;
}
"""


def _chromium(hub, student, cells, klass: _Class, seconds: float, start_s: float) -> None:
    from playwright.sync_api import sync_playwright

    from tests.browser.harness import Timeouts, launch_chromium, open_notebook
    from tests.browser.pages import slider_handle
    from tests.hub_harness import HubLab, log_in

    row = klass.rows.setdefault(
        student.name, {"kind": "chromium", "server_start_s": start_s, "rtt_ms": [], "phases": []}
    )
    t0 = time.perf_counter()
    arrived = False
    try:
        with sync_playwright() as pw:
            browser = launch_chromium(pw)
            try:
                page = browser.new_page(viewport={"width": 1400, "height": 1000})
                page.set_default_timeout(Timeouts.ms(CELL_TIMEOUT))
                log_in(page, hub, student.name, timeout_ms=Timeouts.ms(CELL_TIMEOUT))
                row["phases"].append(("logged in", round(time.perf_counter() - t0, 1)))
                started = time.perf_counter()
                nb = open_notebook(
                    page, HubLab(student), "01_pytrees.ipynb", cells, wait_for=".ptl-slider", run_all_s=CELL_TIMEOUT
                )
                row["lesson_s"] = time.perf_counter() - started
                row["phases"].append(("lesson run", round(time.perf_counter() - t0, 1)))
                try:
                    row["kernel"] = _proc_mb(student.kernel_pid(nb.kernel_id))
                    comm = nb.value("explorer.sliders['x[0]'].model_id")
                    page.evaluate(INSTRUMENT, {"path": nb.path, "comm": comm})
                    cell = nb.panel.locator(".jp-CodeCell").filter(has=page.locator(".ptl-slider")).first
                    handle = slider_handle(cell, "x[0]")
                    handle.scroll_into_view_if_needed()
                    klass.arrive()
                    arrived = True
                    row["arrived_s"] = time.perf_counter() - klass.t0
                    klass.go.wait(ARRIVAL_TIMEOUT)
                    t_end = time.perf_counter() + seconds
                    n = 0
                    while time.perf_counter() < t_end:
                        tick = time.perf_counter()
                        handle.focus()
                        keys0 = page.evaluate("() => window.__hub.keys.length")
                        page.keyboard.press("ArrowRight" if (n // 5) % 2 == 0 else "ArrowLeft")
                        n += 1
                        ms = page.evaluate(WAIT_ACK, {"keys0": keys0, "timeout": 30000})
                        if ms is None:
                            klass.error(student.name, f"key press {n}: no ack within 30 s")
                        else:
                            row["rtt_ms"].append(ms)
                        time.sleep(max(0.0, 1.0 - (time.perf_counter() - tick)))
                    row["moves"] = n
                finally:
                    nb.close()
            finally:
                browser.close()
    except Exception as exc:  # noqa: BLE001
        klass.error(student.name, f"{type(exc).__name__} after {row['phases']}: {str(exc)[:300]}")
    finally:
        if not arrived:
            klass.arrive()


def run_one(n: int, seconds: float = 60.0, chromium: bool = True) -> dict:
    from tests.hub_harness import lesson_cells, server_pid, start_hub

    if not 1 <= n <= MAX_STUDENTS:
        raise ValueError(f"N is between 1 and {MAX_STUDENTS}")
    base = Path(tempfile.mkdtemp(prefix=f"pytree-lab-bench-hub-{n}-"))
    cells = lesson_cells()
    klass = _Class(n)
    t0 = time.perf_counter()
    hub = start_hub(base)
    try:
        pids = hub.processes()
        cpu0 = {k: _cpu_s(p) for k, p in pids.items()}
        students = [hub.add_student(f"student{i:02d}") for i in range(n)]
        # the whole class asks for its servers at once
        with concurrent.futures.ThreadPoolExecutor(max_workers=n) as pool:
            futures = {s.name: pool.submit(s.start_server) for s in students}
            starts = {}
            for name, fut in futures.items():
                try:
                    starts[name] = fut.result()
                except Exception as exc:  # noqa: BLE001
                    klass.error(name, f"server start: {exc}"[:400])
        ok = [s for s in students if s.name in starts]
        klass.n = len(ok)
        browser_student = ok[-1] if (chromium and ok) else None
        thread = None
        if browser_student is not None:
            thread = threading.Thread(
                target=_chromium,
                args=(hub, browser_student, cells, klass, seconds, starts[browser_student.name]),
                daemon=True,
            )
            thread.start()

        async def everyone():
            # a thread for each student's blocking calls (REST requests, reading /proc)
            asyncio.get_running_loop().set_default_executor(concurrent.futures.ThreadPoolExecutor(n + 4))
            await asyncio.gather(
                *(_browserless(s, cells, klass, seconds, starts[s.name]) for s in ok if s is not browser_student)
            )

        asyncio.run(everyone())
        if thread is not None:
            thread.join(ARRIVAL_TIMEOUT + seconds + 120)
            if thread.is_alive():  # a page that never finished (counted; the hub is stopped below)
                klass.error(browser_student.name, "the Chromium student's page did not finish in time")
        wall = time.perf_counter() - t0
        cpu1 = {k: _cpu_s(p) for k, p in pids.items()}
        servers = [_proc_mb(server_pid(s.name)) for s in ok]
    finally:
        hub.stop()
        shutil.rmtree(base, ignore_errors=True)
    rows = klass.rows
    ws = [r for r in rows.values() if r["kind"] == "websocket"]
    br = [r for r in rows.values() if r["kind"] == "chromium"]
    kernels = [r["kernel"] for r in rows.values() if r.get("kernel")]
    return {
        "n": n,
        "seconds": seconds,
        "wall_s": wall,
        "server_start_s": summary(list(starts.values())),
        "lesson_s": summary([r["lesson_s"] for r in rows.values() if "lesson_s" in r]),
        "kernel_rss_mb": summary([k["rss_mb"] for k in kernels if "rss_mb" in k]),
        "kernel_uss_mb": summary([k["uss_mb"] for k in kernels if "uss_mb" in k]),
        "kernel_lesson_cpu_s": summary([k["cpu_s"] for k in kernels if "cpu_s" in k]),
        "server_rss_mb": summary([s["rss_mb"] for s in servers if s]),
        "server_uss_mb": summary([s["uss_mb"] for s in servers if s]),
        "rtt_ws_ms": summary([t for r in ws for t in r["rtt_ms"]]),
        "rtt_chromium_ms": summary([t for r in br for t in r["rtt_ms"]]),
        "moves": sum(r.get("moves", 0) for r in rows.values()),
        "kernel_cpu_per_move_ms": summary([r["kernel_cpu_per_move_ms"] for r in ws if "kernel_cpu_per_move_ms" in r]),
        "hub_cpu_pct": _pct(cpu0.get("hub"), cpu1.get("hub"), wall),
        "proxy_cpu_pct": _pct(cpu0.get("proxy"), cpu1.get("proxy"), wall),
        "errors": klass.errors,
        "arrived_s": summary([r["arrived_s"] for r in rows.values() if "arrived_s" in r]),
        "chromium_phases": [r.get("phases") for r in br],
        "chromium": bool(br),
    }


def _pct(a, b, wall) -> float | None:
    return None if a is None or b is None or wall <= 0 else 100 * (b - a) / wall


def capacity(r: dict) -> dict:
    """What one 24 GB, 2-core node holds, from one run's numbers."""
    per_student_mb = (r["kernel_rss_mb"]["max"] or math.nan) + (r["server_rss_mb"]["max"] or math.nan)
    by_memory = math.floor((NODE_GB - SYSTEM_GB) * 1000 / per_student_mb) if math.isfinite(per_student_mb) else None
    per_move = r["kernel_cpu_per_move_ms"]["median"]
    sliding = (
        math.floor(NODE_CORES * CPU_SHARE * 1000 / per_move)
        if per_move and math.isfinite(per_move) and per_move > 0
        else None
    )
    lesson_cpu = r["kernel_lesson_cpu_s"]["median"]
    return {
        "per_student_mb": per_student_mb,
        "by_memory": by_memory,
        "sliding_at_once": sliding,
        "lesson_cpu_s": lesson_cpu,
    }


def run(ns=(5, 10, 20), seconds: float = 60.0, chromium: bool = True, log=print) -> dict:
    out = {"runs": []}
    for n in ns:
        log(f"\n7. JupyterHub with {n} students (lesson 01, then a slider move per second for {seconds:.0f} s) ...")
        r = run_one(n, seconds, chromium)
        r["capacity"] = capacity(r)
        r["load_average"] = list(os.getloadavg())
        out["runs"].append(r)
        log(f"   N = {n}: {len(r['errors'])} errors, {r['wall_s']:.0f} s")
    return out


def table(res: dict) -> Table:
    t = Table(
        "7. A class on a real JupyterHub (DummyAuthenticator, SimpleLocalProcessSpawner, configurable-http-proxy; "
        "127.0.0.1): lesson 01, then one slider move per second per student for a minute",
        [
            "N",
            "server start p50 / p95",
            "lesson 01 run p50 / max",
            "kernel RSS median / max",
            "kernel USS median",
            "slider RTT (websocket) p50 / p95",
            "slider RTT (Chromium) p50 / p95",
            "hub CPU",
            "proxy CPU",
            "errors",
        ],
    )
    for r in res["runs"]:
        ss, ks, ku, ls = r["server_start_s"], r["kernel_rss_mb"], r["kernel_uss_mb"], r["lesson_s"]
        w, c = r["rtt_ws_ms"], r["rtt_chromium_ms"]
        t.add(
            str(r["n"]),
            f"{fmt(ss['median'], ' s')} / {fmt(ss['p95'], ' s')}",
            f"{fmt(ls['median'], ' s')} / {fmt(ls['max'], ' s')}",
            f"{fmt(ks['median'], ' MB')} / {fmt(ks['max'], ' MB')}",
            fmt(ku["median"], " MB"),
            f"{fmt(w['median'], ' ms')} / {fmt(w['p95'], ' ms')} ({w['n']})",
            (f"{fmt(c['median'], ' ms')} / {fmt(c['p95'], ' ms')} ({c['n']})" if c["n"] else "—"),
            fmt(r["hub_cpu_pct"], "%"),
            fmt(r["proxy_cpu_pct"], "%"),
            str(len(r["errors"])),
        )
    for r in res["runs"]:
        cap = r["capacity"]
        t.notes.append(
            f"N = {r['n']}: per student {fmt(cap['per_student_mb'], ' MB')} "
            "(kernel + single-user server, max RSS) -> "
            f"a {NODE_GB:g} GB node holds {cap['by_memory']} students by memory "
            f"({SYSTEM_GB:g} GB kept for the system); "
            f"kernel CPU per slider move {fmt(r['kernel_cpu_per_move_ms']['median'], ' ms')} -> "
            f"{cap['sliding_at_once']} students sliding at 1 move/s on {NODE_CORES} cores at {CPU_SHARE:.0%}; "
            f"lesson 01 costs {fmt(cap['lesson_cpu_s'], ' s')} of kernel CPU per student; "
            f"load average after: {', '.join(f'{v:.2f}' for v in r['load_average'])}"
        )
        for e in r["errors"][:5]:
            t.notes.append(f"N = {r['n']} error: {e}")
    t.notes.append(
        "CPU = share of one core over the whole run (hub start to the last move); RSS counts the shared "
        "libraries (jaxlib, XLA) each kernel maps, USS only the pages that kernel alone holds; "
        "round trip = the move's comm message sent -> the kernel's ack received (websocket), "
        "key press -> ack in the page (Chromium)"
    )
    return t
