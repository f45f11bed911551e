"""Section 2a: kernel websocket round trips without a browser, stock server vs as installed.

A Python websocket client (tornado) speaks the kernel websocket protocol to a real
`jupyter_server` and times `execute_request` ("1") -> the kernel's `status: idle`, requests
spaced like slider moves. Two servers run side by side, requests alternate between them: the
server as installed (pytree_lab's extension on) and the same server started with the extension
off (stock). The servers' own view of the kernel websocket's
TCP_NODELAY (getsockopt in the server process) is reported beside the timings.
"""

from __future__ import annotations

import asyncio
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path

from .lab import REPO  # noqa: F401  (puts the repository on sys.path)
from .stats import Table, fmt, quantile, summary

STALL_MS = 38.0  # a delayed ACK on Linux holds a small segment ~40 ms


async def _run(rounds: int, interval: float, warmup: int, seed: int) -> dict:
    from tests.server_harness import EXTENSION_OFF, KernelSocket, start_server

    rng = random.Random(seed)
    bases, servers, sockets = {}, {}, {}
    try:
        for kind in ("stock", "installed"):
            base = bases[kind] = Path(tempfile.mkdtemp(prefix=f"pytree-lab-bench-ws-{kind}-"))
            servers[kind] = start_server(sys.executable, base, EXTENSION_OFF if kind == "stock" else [])
        for kind, server in servers.items():
            sockets[kind] = await KernelSocket(server, server.start_kernel()).connect()
        checks = {}
        for kind, server in servers.items():
            addr = sockets[kind].local_address
            (ws,) = [w for w in server.probe()["websockets"] if w["peer"] == addr]
            checks[kind] = {"nodelay": ws["nodelay"], "connection_class": ws["connection_mro"][0]}
        times: dict[str, list[float]] = {k: [] for k in servers}
        next_at = time.perf_counter()
        for i in range(warmup + rounds):
            order = list(servers)
            rng.shuffle(order)
            for kind in order:
                delay = next_at - time.perf_counter()
                if delay > 0:
                    await asyncio.sleep(delay)
                ks = sockets[kind]
                msgs = await ks.execute("1")
                idle = next(
                    m["arrived"]
                    for m in msgs
                    if m["msg_type"] == "status" and m["content"].get("execution_state") == "idle"
                )
                next_at = ks.sent + interval / len(servers) * rng.uniform(0.8, 1.2)
                if i >= warmup:
                    times[kind].append((idle - ks.sent) * 1e3)
        out = {"rounds": rounds, "interval_ms": interval * 1e3, "servers": {}}
        for kind, ts in times.items():
            out["servers"][kind] = {
                **checks[kind],
                "ms": summary(ts),
                "p90": quantile(ts, 0.9),
                "stalled_share": sum(1 for t in ts if t >= STALL_MS) / len(ts),
                "samples_ms": ts,
            }
        return out
    finally:
        for ks in sockets.values():
            await ks.close()
        for server in servers.values():
            server.stop()
        for base in bases.values():
            shutil.rmtree(base, ignore_errors=True)


def run(rounds: int = 100, interval: float = 0.1, warmup: int = 5, seed: int = 11) -> dict:
    return asyncio.run(_run(rounds, interval, warmup, seed))


def table(r: dict) -> Table:
    t = Table(
        f"2a. Kernel websocket round trip without a browser: execute_request -> idle, {r['rounds']} per server, "
        f"one every ~{r['interval_ms']:.0f} ms, servers alternating",
        ["server", "TCP_NODELAY (server side)", "p50", "p90", "p95", "max", f"≥ {STALL_MS:.0f} ms"],
    )
    for kind, o in r["servers"].items():
        m = o["ms"]
        t.add(
            kind,
            "on" if o["nodelay"] else "off",
            fmt(m["median"], " ms"),
            fmt(o["p90"], " ms"),
            fmt(m["p95"], " ms"),
            fmt(m["max"], " ms"),
            f"{o['stalled_share'] * 100:.0f}%",
        )
    t.notes.append(
        "TCP_NODELAY read back with getsockopt on the kernel websocket's socket in each server process; "
        "connection classes: " + "; ".join(f"{k} {o['connection_class']}" for k, o in r["servers"].items())
    )
    t.notes.append(f"≥ {STALL_MS:.0f} ms = the share of round trips held by a delayed ACK (about 40 ms on Linux)")
    return t
