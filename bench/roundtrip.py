"""Sections 2 and 3: slider -> chart in a real JupyterLab page.

The clock is in the page: a `keydown` listener on `document` starts it (the x[0] slider's
range input focused, ArrowRight), a MutationObserver on the figure's bar `rect` height/y stops
it. Two modes per server, and two servers (pytree-lab as installed, i.e. with its server
extension, and stock jupyter_server), all four interleaved move by move in one run:

- explorer: the StepExplorer (compiled step, then diagram rows, bars and worked calculation);
- floor: the same project Slider whose observer only sets a bqplot Bars `y` (same chart, same
  shape), so the page does the same slider and bar work with a kernel that computes nothing.

A move's time is its *last* bar mutation (the explorer can redraw twice when its y scale
changes first), i.e. when the bars show the new values. A mutation that leaves every bar's y
and height as they were (bqplot redrawing the same values, e.g. when the page's layout moves
as the diagram below the chart is redrawn) is counted apart, not as a render.
"""

from __future__ import annotations

import math
import random
import re
import time
from datetime import datetime

# after .lab, which puts the repository on the path
from tests.browser.pages import read_bars as read_drawn_bars

from .lab import FIND_PANEL, BenchLab, setup_cell
from .stats import Table, fmt, summary

TARGET_P50_MS = 30.0  # explorer round trip, p50, on the server as installed
TARGET_RATIO = 1.25  # explorer p95 <= 1.25 x the no-op floor's p95, same server

NOTEBOOK = "bench_roundtrip.ipynb"
LABELS = ["weight[0]", "weight[1]", "bias"]

SETUP = setup_cell(
    "import time",
    "import ipywidgets",
    "from pytree_lab import StepExplorer",
    "from pytree_lab.slider import Slider",
    "from pytree_lab.chart import BeforeAfterChart",
    "ex = StepExplorer()",
    # kernel-side counters for the burst: value messages received, recomputes and their times
    "COUNT = {'moves': 0, 'recomputes': 0, 'times': []}",
    "def _count_move(widget, content, buffers):",
    "    COUNT['moves'] += 1",
    "def _count_result(change):",
    "    COUNT['recomputes'] += 1",
    "    COUNT['times'].append(time.time() * 1000)",
    "ex.sliders['x[0]'].on_msg(_count_move)",
    "ex.observe(_count_result, 'result')",
    # the floor: the same chart, and an observer that does nothing but set the bars' y
    "floor_chart = BeforeAfterChart(",
    "    ['weight[0]', 'weight[1]', 'bias'],",
    "    [\"['weight']\", \"['weight']\", \"['bias']\"],",
    "    title='no-op kernel floor',",
    ")",
    "floor_chart.show([1.0, -1.0, 0.0], [1.4, -0.8, 0.2])",
    "floor_slider = Slider(2.0, description='x[0]', min=-2.0, max=6.0, step=0.01)",
    "def _floor(change):",
    "    floor_chart.bars.y = [[1.0, -1.0, 0.0], [1.4 - (change['new'] - 2.0), -0.8, 0.2]]",
    "floor_slider.observe(_floor, 'value')",
    "floor = ipywidgets.HBox([floor_slider, floor_chart.figure])",
)
CELLS = [SETUP, "ex", "floor"]
CELL_OF = {"explorer": 1, "floor": 2}

INSTRUMENT = (
    """
({figs, path}) => {"""
    + FIND_PANEL
    + """
  const B = window.__bench = {keys: [], muts: {}, iopub: []};
  // every kernel -> page message, when it reached the page (to see where a round trip goes)
  find(path).sessionContext.session.kernel.iopubMessage.connect((_, msg) => {
    const c = msg.content || {};
    const data = c.data || {};
    B.iopub.push({t: performance.now(), sent: msg.header.date, type: msg.header.msg_type, comm: c.comm_id || null,
                  method: data.method || c.execution_state || null,
                  keys: data.state ? Object.keys(data.state) : []});
  });
  document.addEventListener('keydown', (e) => {
    if (e.key === 'ArrowRight') B.keys.push(performance.now());
  }, true);
  B.same = {};
  for (const [name, fig] of Object.entries(figs)) {
    B.muts[name] = [];
    B.same[name] = 0;
    let shown = '';  // the bars' y and height as last seen: a redraw to the same pixels is no render
    const isBar = (n) => n.nodeType === 1 && (n.matches('rect.bar') || !!n.querySelector('rect.bar'));
    new MutationObserver((records) => {
      const now = performance.now();
      for (const r of records) {
        if (r.type === 'attributes' ? r.target.matches('rect.bar') : [...r.addedNodes].some(isBar)) {
          const bars = [...fig.querySelectorAll('rect.bar')]
            .map((b) => b.getAttribute('y') + ',' + b.getAttribute('height'))
            .join(';');
          if (bars === shown) { B.same[name]++; return; }
          shown = bars;
          B.muts[name].push(now);
          return;
        }
      }
    }).observe(fig, {subtree: true, childList: true, attributes: true, attributeFilter: ['height', 'y']});
  }
  return performance.timeOrigin;
}
"""
)

# Resolve once the key press arrived, the kernel went idle after it (every message of the
# move has arrived) and the figure has been quiet for `quiet` ms after a bar mutation; report
# the key time and the first and last bar mutation after it.
WAIT_MOVE = """
async ({name, keys0, quiet, timeout}) => {
  const B = window.__bench;
  const start = performance.now();
  while (true) {
    await new Promise((r) => setTimeout(r, 5));
    const now = performance.now();
    if (B.keys.length > keys0) {
      const key = B.keys[B.keys.length - 1];
      const after = B.muts[name].filter((t) => t >= key);
      const idle = B.iopub.some((m) => m.t >= key && m.type === 'status' && m.method === 'idle');
      if (after.length && idle && now - after[after.length - 1] >= quiet) {
        return {key, first: after[0], last: after[after.length - 1], n: after.length};
      }
    }
    if (now - start > timeout) {
      const key = B.keys.length > keys0 ? B.keys[B.keys.length - 1] : null;
      return {key, first: null, last: null, n: 0, timeout: true};
    }
  }
}
"""


def read_bars(figure) -> tuple[list[list[float]], float]:
    """Bar values drawn in the SVG, [[before...], [after...]] in x-axis order, and pixels per unit
    (read by the browser tests' reader)."""
    drawn = read_drawn_bars(figure)
    groups = [drawn["bars"][label] for label in drawn["x_labels"] if label in drawn["bars"]]
    return [[g[k] for g in groups] for k in (0, 1)], drawn["pixels_per_unit"]


class RoundTrip:
    """The notebook with both modes on one server, instrumented; shared by sections 2 and 3."""

    def __init__(self, lab: BenchLab):
        self.lab = lab
        self.server = lab.kind
        self.page = lab.page
        self.nb = lab.notebook(NOTEBOOK, CELLS, wait_for='[role="tree"]')
        panel = self.nb.panel
        self.cells = {mode: panel.locator(".jp-CodeCell").nth(i) for mode, i in CELL_OF.items()}
        self.figures = {m: c.locator(".bqplot.figure").first for m, c in self.cells.items()}
        # the x[0] slider's native range input, found by its label text
        self.handles = {
            m: c.locator(".ptl-slider")
            .filter(has=self.page.locator("label.ptl-slider-label", has_text=re.compile(r"^x\[0\]$")))
            .locator("input[type=range]")
            .first
            for m, c in self.cells.items()
        }
        for fig in self.figures.values():
            fig.locator("rect.bar").first.wait_for(state="attached")
        self.time_origin = self.page.evaluate(
            INSTRUMENT, {"figs": {m: f.element_handle() for m, f in self.figures.items()}, "path": self.nb.path}
        )
        # which comm is which widget, to name the messages in the trace
        self.comm_names = self.nb.value(
            "{w.model_id: name for name, w in [('bars', ex.chart_view.bars), ('y scale', ex.chart_view.y_scale), "
            "('diagram', ex.diagram), ('calculation', ex.calculation), ('status', ex.status), "
            "('x[0] slider', ex.sliders['x[0]']), ('floor bars', floor_chart.bars), ('floor slider', floor_slider)]}"
        )

    def keys(self) -> int:
        return self.page.evaluate("() => window.__bench.keys.length")

    def move(self, mode: str, quiet_ms: float = 25.0, timeout_ms: float = 5000.0) -> dict:
        handle = self.handles[mode]
        handle.focus()
        keys0 = self.keys()
        self.page.keyboard.press("ArrowRight")
        return self.page.evaluate(WAIT_MOVE, {"name": mode, "keys0": keys0, "quiet": quiet_ms, "timeout": timeout_ms})

    def close(self) -> None:
        self.nb.close()


def run_moves(rts: dict[str, RoundTrip], moves: int = 60, warmup: int = 5, seed: int = 7) -> dict:
    """Section 2: `moves` per (server, mode), all interleaved in random rounds, spaced like a slow drag."""
    rng = random.Random(seed)
    keys = [(server, mode) for server in rts for mode in ("explorer", "floor")]
    schedule: list[tuple[str, str]] = []
    for _ in range(warmup + moves):
        round_ = list(keys)
        rng.shuffle(round_)
        schedule += round_
    samples: dict = {k: [] for k in keys}
    seen = dict.fromkeys(keys, 0)
    timeouts = dict.fromkeys(rts, 0)
    next_at = time.monotonic()
    for server, mode in schedule:
        # 80-150 ms between key presses, as when dragging (and never before the last move rendered)
        delay = next_at - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        pressed = time.monotonic()
        r = rts[server].move(mode)
        next_at = pressed + rng.uniform(0.080, 0.150)
        seen[(server, mode)] += 1
        if r.get("timeout"):
            timeouts[server] += 1
            continue
        if seen[(server, mode)] > warmup:
            samples[(server, mode)].append(r)
    out: dict = {"moves_per_mode": moves, "warmup_per_mode": warmup, "servers": {}}
    for server, rt in rts.items():
        o: dict = {"describe": rt.lab.describe, "timeouts": timeouts[server]}
        for mode in ("explorer", "floor"):
            rs = samples[(server, mode)]
            last = [r["last"] - r["key"] for r in rs]
            first = [r["first"] - r["key"] for r in rs]
            o[mode] = {
                "last_ms": summary(last),
                "first_ms": summary(first),
                "redraws_per_move": summary([r["n"] for r in rs])["median"],
                "samples_ms": last,
                "breakdown": _breakdown(rt, mode, rs),
            }
        o["ratio_p95"] = o["explorer"]["last_ms"]["p95"] / o["floor"]["last_ms"]["p95"]
        o["ratio_p50"] = o["explorer"]["last_ms"]["median"] / o["floor"]["last_ms"]["median"]
        out["servers"][server] = o
    return out


def _breakdown(rt: RoundTrip, mode: str, rs: list[dict]) -> dict:
    """Where a move's time goes, from the kernel messages' arrival times in the page."""
    iopub = rt.page.evaluate("() => window.__bench.iopub")
    bars = "bars" if mode == "explorer" else "floor bars"
    busy, arrive, render, sizes = [], [], [], []
    k_recv, k_work, transport = [], [], []
    orders: dict[str, int] = {}

    def sent(m: dict) -> float:
        # the kernel's own timestamp of the message, on the page's clock
        return datetime.fromisoformat(m["sent"].replace("Z", "+00:00")).timestamp() * 1000 - rt.time_origin

    for r in rs:
        window = [m for m in iopub if r["key"] <= m["t"] <= r["last"] + 0.5]
        b = [m for m in window if m["type"] == "status" and m["method"] == "busy"]
        bar_msgs = [
            m for m in window if m["type"] == "comm_msg" and rt.comm_names.get(m["comm"]) == bars and "y" in m["keys"]
        ]
        if not b or not bar_msgs:
            continue
        busy.append(b[0]["t"] - r["key"])
        if b[0].get("sent") and bar_msgs[-1].get("sent"):
            k_recv.append(sent(b[0]) - r["key"])
            k_work.append(sent(bar_msgs[-1]) - sent(b[0]))
            transport.append(bar_msgs[-1]["t"] - sent(bar_msgs[-1]))
        arrive.append(bar_msgs[-1]["t"] - r["key"])
        render.append(r["last"] - bar_msgs[-1]["t"])
        names = [
            rt.comm_names.get(m["comm"], "?") + ("(echo)" if m["method"] == "echo_update" else "")
            for m in window
            if m["type"] == "comm_msg"
        ]
        sizes.append(len(names))
        key = " > ".join(names)
        orders[key] = orders.get(key, 0) + 1
    return {
        "busy_status_ms": summary(busy),
        "bars_message_ms": summary(arrive),
        "bars_message_to_render_ms": summary(render),
        "messages_per_move": summary(sizes)["median"],
        # kernel clock: key -> kernel busy, busy -> bars message sent, sent -> arrived in the page
        "key_to_kernel_ms": summary(k_recv),
        "kernel_until_bars_sent_ms": summary(k_work),
        "bars_transport_ms": summary(transport),
        "typical_order": max(orders, key=orders.get) if orders else "",
    }


def table_moves(r: dict) -> Table:
    servers = r["servers"]
    t = Table(
        f"2. Slider -> chart round trip, real JupyterLab + Chromium ({r['moves_per_mode']} moves per mode and server, "
        "interleaved)",
        ["server", "mode", "p50", "p95", "max", "target", "ok/MISSED"],
    )
    for server, o in servers.items():
        e, f = o["explorer"]["last_ms"], o["floor"]["last_ms"]
        judged = server == "installed"
        t.add(server, "no-op kernel floor", fmt(f["median"], " ms"), fmt(f["p95"], " ms"), fmt(f["max"], " ms"), "", "")
        t.add(
            server,
            "StepExplorer",
            fmt(e["median"], " ms"),
            fmt(e["p95"], " ms"),
            fmt(e["max"], " ms"),
            f"p50 ≤ {TARGET_P50_MS:.0f} ms" if judged else "",
            ("ok" if e["median"] <= TARGET_P50_MS else "MISSED") if judged else "",
        )
        t.add(
            server,
            "ratio explorer/floor p95",
            f"{o['ratio_p95']:.2f}x",
            "",
            "",
            "≤ 1.25x" if judged else "",
            ("ok" if o["ratio_p95"] <= TARGET_RATIO else "MISSED") if judged else "",
        )
    for server, o in servers.items():
        t.notes.append(
            f"{server}: {o['describe']}; p50 ratio {o['ratio_p50']:.2f}x; explorer p95 limit = 1.25 × floor "
            f"p95 = {1.25 * o['floor']['last_ms']['p95']:.1f} ms; moves lost to a 5 s timeout: {o['timeouts']}"
        )
    if "stock" in servers and "installed" in servers:
        st, ins = servers["stock"]["explorer"]["last_ms"], servers["installed"]["explorer"]["last_ms"]
        t.notes.append(
            f"explorer, stock -> installed: p50 {st['median']:.1f} -> {ins['median']:.1f} ms, "
            f"p95 {st['p95']:.1f} -> {ins['p95']:.1f} ms"
        )
    for server, o in servers.items():
        for mode in ("floor", "explorer"):
            b = o[mode]["breakdown"]
            t.notes.append(
                f"{server} {mode} (medians): key -> kernel busy {b['key_to_kernel_ms']['median']:.1f} ms; "
                f"kernel busy -> bars message sent {b['kernel_until_bars_sent_ms']['median']:.1f} ms; "
                f"sent -> in the page {b['bars_transport_ms']['median']:.1f} ms; "
                f"-> bars redrawn +{b['bars_message_to_render_ms']['median']:.1f} ms; "
                f"first bar mutation {o[mode]['first_ms']['median']:.1f} ms; messages: {b['typical_order']}"
            )
    return t


# ---------------------------------------------------------------------------------- burst

KERNEL_STATE = (
    "{'x0': ex.sliders['x[0]'].value, 'count': COUNT, 'traces': ex.session.slider_step.traces, "
    "'before': [float(v) for v in ex.chart_view.bars.y[0]], 'after': [float(v) for v in ex.chart_view.bars.y[1]], "
    "'params': ex.result.params, 'updated': ex.result.updated, 'loss': ex.result.loss, "
    "'inputs': {k: s.value for k, s in ex.sliders.items()}}"
)


def _oracle(values: dict) -> dict:
    """The lesson's step for the final slider values, with jax called directly (eager)."""
    import jax
    import jax.numpy as jnp

    def loss_fn(params, x, target):
        return (jnp.dot(params["weight"], x) + params["bias"] - target) ** 2

    params = {
        "weight": jnp.array([values["weight[0]"], values["weight[1]"]], jnp.float32),
        "bias": jnp.array(values["bias"], jnp.float32),
    }
    x = jnp.array([values["x[0]"], values["x[1]"]], jnp.float32)
    loss, grads = jax.value_and_grad(loss_fn)(params, x, jnp.float32(values["target"]))
    lr = jnp.float32(values["learning_rate"])
    updated = jax.tree.map(lambda p, g: p - lr * g, params, grads)
    return {
        "loss": float(loss),
        "before": [float(params["weight"][0]), float(params["weight"][1]), float(params["bias"])],
        "after": [float(updated["weight"][0]), float(updated["weight"][1]), float(updated["bias"])],
    }


# What the browser does for a held ArrowRight on a focused range input (step the value, fire
# `input`, for each repeat; `keyup` when the key is let go), done by the page itself at `hz`:
# one CDP round trip per Playwright key press is too slow on a busy machine to keep 60 Hz. Each
# step's time goes where a key press's would.
BURST = """
async ({n, hz}) => {
  const input = document.activeElement;
  if (!input || !input.matches('input[type="range"]')) throw new Error('the slider input is not focused');
  const B = window.__bench;
  const t0 = performance.now();
  for (let i = 0; i < n; i++) {
    const due = t0 + (i * 1000) / hz;
    while (performance.now() < due) await new Promise((r) => setTimeout(r, Math.max(0, due - performance.now() - 1)));
    B.keys.push(performance.now());
    input.stepUp();
    input.dispatchEvent(new Event('input', {bubbles: true}));
  }
  // the key comes up one interval after its last repeat (release is still timed from that repeat)
  await new Promise((r) => setTimeout(r, 1000 / hz));
  B.up = performance.now();
  input.dispatchEvent(new KeyboardEvent('keyup', {key: 'ArrowRight', bubbles: true}));
}
"""


def run_burst(rt: RoundTrip, presses: int = 20, hz: float = 60.0, repeats: int = 3, settle_ms: float = 1000.0) -> dict:
    """Section 3: `presses` steps at `hz` on the explorer's x[0]; where does it end, how fast, what backlog?"""
    page, nb = rt.page, rt.nb
    bursts = []
    for _ in range(repeats):
        time.sleep(0.5)
        nb.run("COUNT.update(moves=0, recomputes=0, times=[])")
        start = nb.value("ex.sliders['x[0]'].value")
        rt.handles["explorer"].focus()
        keys0 = rt.keys()
        same0 = page.evaluate("() => window.__bench.same.explorer")
        page.evaluate(BURST, {"n": presses, "hz": hz})
        # quiet for `settle_ms`: nothing is left to arrive
        done = page.evaluate(
            """async ({keys0, quiet}) => {
                const B = window.__bench;
                while (true) {
                  await new Promise((r) => setTimeout(r, 20));
                  const m = B.muts.explorer;
                  const last = m.length ? m[m.length - 1] : 0;
                  if (performance.now() - Math.max(last, B.keys[B.keys.length - 1]) >= quiet) {
                    const keys = B.keys.slice(keys0);
                    return {keys, muts: m.filter((t) => t >= keys[0]), same: B.same.explorer, up: B.up};
                  }
                }
            }""",
            {"keys0": keys0, "quiet": settle_ms},
        )
        state = nb.value(KERNEL_STATE)
        drawn, ppu = read_bars(rt.figures["explorer"])
        want = _oracle(state["inputs"])
        keys, muts = done["keys"], done["muts"]
        release = keys[-1]
        # kernel recompute times are epoch ms; the page's are performance.now() since timeOrigin
        recompute_page_ms = [t - rt.time_origin for t in state["count"]["times"]]
        tol = 1.5 / ppu  # a pixel and a half
        py_bars = [state["before"], state["after"]]
        bursts.append(
            {
                "presses_seen": len(keys),
                "press_interval_ms": (keys[-1] - keys[0]) / (len(keys) - 1),
                "start": start,
                "expected_x0": round(start + 0.01 * presses, 6),
                "final_x0": state["x0"],
                "ends_on_last_value": math.isclose(state["x0"], start + 0.01 * presses, abs_tol=1e-6),
                "result_matches_jax": math.isclose(state["loss"], want["loss"], rel_tol=1e-5, abs_tol=1e-6)
                and all(
                    math.isclose(a, b, rel_tol=1e-5, abs_tol=1e-6)
                    for a, b in zip(state["after"] + state["before"], want["after"] + want["before"])
                ),
                "dom_matches_result": all(abs(d - p) <= tol for ds, ps in zip(drawn, py_bars) for d, p in zip(ds, ps)),
                "dom_bars": drawn,
                "python_bars": py_bars,
                "release_to_final_render_ms": (muts[-1] - release) if muts else math.nan,
                "key_up_to_final_render_ms": (muts[-1] - done["up"]) if muts and done.get("up") else math.nan,
                "kernel_value_messages": state["count"]["moves"],
                "kernel_recomputes": state["count"]["recomputes"],
                "recomputes_after_release": sum(1 for t in recompute_page_ms if t > release),
                "bar_redraws": len(muts),
                "same_value_redraws": done["same"] - same0,
                "traces": state["traces"],
            }
        )
    worst = max(bursts, key=lambda b: b["release_to_final_render_ms"])
    return {
        "server": rt.server,
        "describe": rt.lab.describe,
        "presses": presses,
        "hz": hz,
        "bursts": bursts,
        "all_end_on_last_value": all(
            b["ends_on_last_value"] and b["result_matches_jax"] and b["dom_matches_result"] for b in bursts
        ),
        "max_recomputes": max(b["kernel_recomputes"] for b in bursts),
        "worst_release_to_final_ms": worst["release_to_final_render_ms"],
        "median_release_to_final_ms": summary([b["release_to_final_render_ms"] for b in bursts])["median"],
        "traces": max(b["traces"] for b in bursts),
    }


def table_burst(rs: dict[str, dict], roundtrip: dict | None) -> Table:
    """`rs`: server -> run_burst result; judged on the server as installed."""
    first = next(iter(rs.values()))
    t = Table(
        f"3. Burst: {first['presses']} steps at {first['hz']:.0f} Hz on the explorer's x[0] "
        f"({len(first['bursts'])} bursts per server)",
        ["server", "check", "measured", "target", "ok/MISSED"],
    )
    for server, r in rs.items():
        judged = server == "installed"

        def verdict(ok: bool) -> str:
            return ("ok" if ok else "MISSED") if judged else ""

        bs = r["bursts"]
        t.add(
            server,
            "ends on the last value (kernel, JAX, DOM bars)",
            " / ".join(
                "yes" if (b["ends_on_last_value"] and b["result_matches_jax"] and b["dom_matches_result"]) else "NO"
                for b in bs
            ),
            "every burst",
            verdict(r["all_end_on_last_value"]),
        )
        t.add(
            server,
            "kernel recomputes per burst",
            " / ".join(str(b["kernel_recomputes"]) for b in bs),
            f"≤ {r['presses']} moves",
            verdict(r["max_recomputes"] <= r["presses"]),
        )
        t.add(
            server,
            "recomputes after release",
            " / ".join(str(b["recomputes_after_release"]) for b in bs),
            "≤ 2 (no backlog)",
            verdict(all(b["recomputes_after_release"] <= 2 for b in bs)),
        )
        rel = " / ".join(fmt(b["release_to_final_render_ms"], " ms") for b in bs)
        normal = (roundtrip or {}).get("servers", {}).get(server, {}).get("explorer", {}).get("last_ms", {}).get("p95")
        if normal is not None:
            t.add(
                server,
                "release -> final render",
                rel,
                f"≤ explorer p95 round trip ({normal:.0f} ms)",
                verdict(r["worst_release_to_final_ms"] <= normal),
            )
        else:
            t.add(server, "release -> final render", rel, "", "")
        t.add(server, "step traces (compiled once)", str(r["traces"]), "1", verdict(r["traces"] == 1))
    for server, r in rs.items():
        bs = r["bursts"]
        b = bs[-1]
        t.notes.append(
            f"{server}: release is the key's last repeat; the key comes up one step interval later and "
            "the held position goes out then: key up -> final render "
            + " / ".join(fmt(x["key_up_to_final_render_ms"], " ms") for x in bs)
        )
        t.notes.append(
            f"{server}: mean step interval {b['press_interval_ms']:.1f} ms; move messages the kernel got: "
            + " / ".join(str(x["kernel_value_messages"]) for x in bs)
            + "; bar redraws: "
            + " / ".join(str(x["bar_redraws"]) for x in bs)
            + " (+ "
            + " / ".join(str(x["same_value_redraws"]) for x in bs)
            + " to the same values)"
            + f"; last burst: x[0] {b['start']:.2f} -> {b['final_x0']:.2f} (expected {b['expected_x0']:.2f}), "
            f"DOM bars {[[round(v, 3) for v in s] for s in b['dom_bars']]} vs Python "
            f"{[[round(v, 3) for v in s] for s in b['python_bars']]}"
        )
    return t
