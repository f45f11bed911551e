"""Section 4 (browser side): first paint of the diagram and of treescope, select / fold latency.

One display cell is re-run per measurement (its source replaced, its old output cleared).
In the page: `exec` = the run command, `out` = the output node appears, `paint` = the first
frame whose rows are laid out (checked every animation frame) has been painted (a message
posted from that frame's rAF runs after its paint). "first paint" = the kernel's display()
call -> that paint (display -> rows visible; both clocks are the machine's wall clock):
transport of the state, parsing, the model, the view and the frame. "cell -> paint" is what
the person waits in all, the kernel's Python included.
The kernel times the Python part itself (PytreeDiagram construction including the comm
open that serialises its state; `treescope.render_to_html`).
"""

from __future__ import annotations

import time

from .lab import FIND_PANEL, BenchLab, setup_cell
from .stats import summary
from .trees import TREE_NAMES

NOTEBOOK = "bench_trees.ipynb"
SETUP = setup_cell(
    "import json, time",
    "from IPython.display import display, HTML",
    "import treescope",
    "from pytree_lab import PytreeDiagram",
    "from bench.trees import build_all",
    "TREES = build_all()",
    "BENCH = {}",
    # the widget's ES module and treescope's custom elements load once per page: not in any timing
    "display(PytreeDiagram({'warm': [1.0, 2.0]}))",
    "display(HTML(treescope.render_to_html({'warm': [1.0, 2.0]})))",
)
CELLS = [SETUP, "pass"]
DISPLAY_CELL = 1

DIAGRAM_SRC = """\
if "_d" in globals():
    _d.close()
_t0, _c0 = time.perf_counter(), time.process_time()
_d = PytreeDiagram(TREES[{name!r}])
BENCH["py"], BENCH["cpu"] = time.perf_counter() - _t0, time.process_time() - _c0
BENCH["display_at"] = time.time() * 1000
display(_d)
"""
TREESCOPE_SRC = """\
if "_d" in globals():
    _d.close()
    del _d
_t0, _c0 = time.perf_counter(), time.process_time()
_h = treescope.render_to_html(TREES[{name!r}])
BENCH["py"], BENCH["cpu"] = time.perf_counter() - _t0, time.process_time() - _c0
BENCH["bytes"] = len(_h)
BENCH["display_at"] = time.time() * 1000
display(HTML(_h))
"""

RUN_AND_PAINT = (
    """
async ({path, index, source, kind, timeout}) => {"""
    + FIND_PANEL
    + """
  const app = window.jupyterapp;
  const w = find(path);
  const nb = w.content;
  const cell = nb.widgets[index];
  cell.model.outputs.clear();
  cell.model.sharedModel.setSource(source);
  nb.activeCellIndex = index;
  app.shell.activateById(w.id);
  // let the cleared output paint first: it is not part of the measurement
  await new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r)));
  const area = cell.node.querySelector('.jp-OutputArea') || cell.node;
  const visible = (el) => el && el.getBoundingClientRect().height > 0;
  const ready = kind === 'diagram'
    ? () => visible(area.querySelector('[role="tree"] [role="treeitem"]'))
    : () => {
        const c = area.querySelector('treescope-container');
        return visible(c && c.shadowRoot && c.shadowRoot.querySelector('.treescope_root'));
      };
  const res = {exec: 0, out: null, frame: null, paint: null, origin: performance.timeOrigin, msgs: []};
  // look (and force a layout) only in frames after the output changed; treescope draws into a
  // shadow root this observer cannot see, so it is looked at every frame once its container is there
  let changed = false;
  const kernel = w.sessionContext.session.kernel;
  const onMsg = (_, msg) => {
    const c = msg.content || {};
    if (msg.header.msg_type !== 'status')
      res.msgs.push([performance.now(), msg.header.msg_type, (c.data && c.data.method) || '']);
  };
  kernel.iopubMessage.connect(onMsg);
  const mo = new MutationObserver(() => {
    changed = true;
    if (res.out === null && area.querySelector('.jp-OutputArea-output')) res.out = performance.now();
  });
  mo.observe(area, {childList: true, subtree: true});
  res.exec = performance.now();
  app.commands.execute('notebook:run-cell');
  await new Promise((resolve) => {
    const tick = () => {
      const look = changed || (kind !== 'diagram' && res.out !== null);
      changed = false;
      if (look && ready()) {
        res.frame = performance.now();
        const ch = new MessageChannel();
        ch.port1.onmessage = () => { res.paint = performance.now(); resolve(); };
        ch.port2.postMessage(0);
        return;
      }
      if (performance.now() - res.exec > timeout) return resolve();
      requestAnimationFrame(tick);
    };
    requestAnimationFrame(tick);
  });
  mo.disconnect();
  kernel.iopubMessage.disconnect(onMsg);
  res.items = area.querySelectorAll('[role="treeitem"]').length;
  return res;
}
"""
)

# Clicks on the tree: a capturing click listener starts the clock, a MutationObserver on
# aria-selected / aria-expanded stops it (the judged latency); `paint` is after the next
# frame has painted; `event` is the browser's Event Timing duration (click -> next paint).
INSTRUMENT_CLICKS = (
    """
({path, index}) => {"""
    + FIND_PANEL
    + """
  const area = find(path).content.widgets[index].node;
  if (window.__clicks) window.__clicks.mo.disconnect();
  const C = window.__clicks = {act: null, events: []};
  if (!window.__clickListener) {
    window.__clickListener = true;
    document.addEventListener('click', (e) => {
      const a = window.__clicks.act;
      if (a && a.click === null) { a.click = performance.now(); a.stamp = e.timeStamp; }
    }, true);
    // the browser's own click -> next paint (Event Timing, as INP measures it; 16 ms and up, in 8 ms steps)
    new PerformanceObserver((list) => {
      for (const e of list.getEntries()) if (e.name === 'click') window.__clicks.events.push(e.toJSON());
    }).observe({type: 'event', durationThreshold: 16});
  }
  C.mo = new MutationObserver((records) => {
    const a = C.act;
    if (!a || a.click === null || a.attr !== null) return;
    for (const r of records) {
      const el = r.target;
      if (el.dataset && el.dataset.path === a.path && el.getAttribute(a.name) === a.want) {
        a.attr = performance.now();
        const ch = new MessageChannel();
        ch.port1.onmessage = () => { a.paint = performance.now(); a.resolve(); };
        requestAnimationFrame(() => ch.port2.postMessage(0));
        return;
      }
    }
  });
  C.mo.observe(area, {subtree: true, attributes: true, attributeFilter: ['aria-selected', 'aria-expanded']});
}
"""
)
ARM = """
(a) => {
  const act = window.__clicks.act = {...a, click: null, stamp: null, attr: null, paint: null};
  act.done = new Promise((r) => { act.resolve = r; });
}
"""
WAIT_ACT = """
async (timeout) => {
  const a = window.__clicks.act;
  await Promise.race([a.done, new Promise((r) => setTimeout(r, timeout))]);
  // the Event Timing entry of this click, if it took 16 ms or more (it is reported after the paint)
  let event = null;
  for (let i = 0; i < 20 && event === null; i++) {
    event = window.__clicks.events.find((e) => a.stamp !== null && Math.abs(e.startTime - a.stamp) < 1) || null;
    if (event === null) await new Promise((r) => setTimeout(r, 10));
  }
  return {click: a.click, attr: a.attr, paint: a.paint, event: event ? event.duration : null};
}
"""


def _css(text: str) -> str:
    import json

    return json.dumps(text)


class TreePaint:
    def __init__(self, lab: BenchLab):
        self.lab = lab
        self.page = lab.page
        self.nb = lab.notebook(NOTEBOOK, CELLS, wait_for='[role="tree"]')
        self.cell = self.nb.panel.locator(".jp-CodeCell").nth(DISPLAY_CELL)

    def show(self, kind: str, name: str, timeout_s: float = 240.0) -> dict:
        src = (DIAGRAM_SRC if kind == "diagram" else TREESCOPE_SRC).format(name=name)
        r = self.page.evaluate(
            RUN_AND_PAINT,
            {"path": self.nb.path, "index": DISPLAY_CELL, "source": src, "kind": kind, "timeout": timeout_s * 1000},
        )
        # the kernel finishes the cell after display(); wait until BENCH has this run's numbers
        b = self.nb.kernel.wait_for("dict(BENCH)", lambda v: "py" in v, timeout=60.0)
        self.nb.run("BENCH.clear()")
        painted = r["paint"] is not None
        # display() in the kernel, on the page's clock (both are the machine's wall clock)
        shown = b["display_at"] - r["origin"]
        updates = [t for t, kind, method in r["msgs"] if kind == "comm_msg" and method == "update"]
        return {
            "python_s": b["py"],
            "python_cpu_s": b["cpu"],
            # the widget's state message reaching the page, after display() (it is sent just before)
            "state_arrival_ms": (updates[-1] - shown) if updates else None,
            "first_paint_ms": (r["paint"] - shown) if painted else None,
            "display_to_output_ms": (r["out"] - shown) if r["out"] is not None else None,
            "cell_to_paint_ms": (r["paint"] - r["exec"]) if painted else None,
            "treeitems_in_dom": r["items"],
            "html_bytes": b.get("bytes"),
            "painted": painted,
        }

    def clicks(self, name: str, n: int = 10) -> dict:
        """Unfold, select a leaf in, and fold `n` containers of the displayed tree."""
        self.page.evaluate(INSTRUMENT_CLICKS, {"path": self.nb.path, "index": DISPLAY_CELL})
        out: dict[str, list] = {"unfold": [], "select": [], "fold": []}
        for i in range(1, n + 1):
            layer = f"['layer_{i:05d}']"
            leaf = layer + "['weight']"
            row = self.cell.locator(f'[role="treeitem"][data-path={_css(layer)}]')
            toggle = row.locator(":scope > .ptl-line .ptl-toggle")
            leaf_line = self.cell.locator(f'[role="treeitem"][data-path={_css(leaf)}] > .ptl-line .ptl-key')
            for kind, target, attr, want in (
                ("unfold", toggle, "aria-expanded", "true"),
                ("select", leaf_line, "aria-selected", "true"),
                ("fold", toggle, "aria-expanded", "false"),
            ):
                path = leaf if kind == "select" else layer
                self.page.evaluate(ARM, {"path": path, "name": attr, "want": want})
                target.click()
                r = self.page.evaluate(WAIT_ACT, 5000)
                if r["paint"] is not None:
                    out[kind].append(
                        {
                            "attr_ms": r["attr"] - r["click"],
                            "paint_ms": r["paint"] - r["click"],
                            # no entry: under the 16 ms threshold; count it as 16 (an upper bound)
                            "event_ms": r["event"] if r["event"] is not None else 16.0,
                        }
                    )
                time.sleep(0.1)  # the kernel's echo of the change lands between clicks, not inside one
        return {
            kind: {
                "attr_ms": summary([x["attr_ms"] for x in xs]),
                "paint_ms": summary([x["paint_ms"] for x in xs]),
                "event_ms": summary([x["event_ms"] for x in xs]),
                "n": len(xs),
            }
            for kind, xs in out.items()
        }

    def close(self) -> None:
        self.nb.close()


def run(lab: BenchLab, reps: dict | None = None, treescope_names: list[str] | None = None, clicks: int = 10) -> dict:
    reps = reps or {}
    tp = TreePaint(lab)
    try:
        out: dict = {"diagram": {}, "treescope": {}}
        for name in TREE_NAMES:
            runs = [tp.show("diagram", name) for _ in range(reps.get(name, 3))]
            out["diagram"][name] = _merge(runs)
        for name in treescope_names if treescope_names is not None else TREE_NAMES:
            out["treescope"][name] = _merge([tp.show("treescope", name)])
        # select / fold on the biggest tree, displayed last
        tp.show("diagram", "layers-10k")
        out["clicks_10k"] = tp.clicks("layers-10k", clicks)
        # what one fold sends to the kernel (and the kernel echoes back): the whole folded list
        out["clicks_10k"]["collapsed_paths"], out["clicks_10k"]["collapsed_bytes"] = tp.nb.value(
            "[len(_d.collapsed), len(json.dumps(_d.collapsed))]"
        )
        return out
    finally:
        tp.close()


def _merge(runs: list[dict]) -> dict:
    """Median of each number over the runs (every run kept as well)."""
    merged: dict = {"runs": runs}
    for key in runs[0]:
        vals = [r[key] for r in runs]
        if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in vals):
            merged[key] = summary(vals)["median"]
        elif key == "painted":
            merged[key] = all(vals)
    return merged


def profile_first_paint(lab: BenchLab, tp: TreePaint, name: str, top: int = 12) -> list[dict]:
    """Chromium's CPU profile (DevTools protocol) around one display of the diagram: top functions by self time."""
    cdp = lab.page.context.new_cdp_session(lab.page)
    try:
        cdp.send("Profiler.enable")
        cdp.send("Profiler.setSamplingInterval", {"interval": 200})  # µs
        cdp.send("Profiler.start")
        r = tp.show("diagram", name)
        profile = cdp.send("Profiler.stop")["profile"]
    finally:
        cdp.detach()
    nodes = {n["id"]: n for n in profile["nodes"]}
    deltas = profile.get("timeDeltas", [])
    self_us: dict[int, float] = {}
    for sample, dt in zip(profile.get("samples", []), deltas[1:] + [0]):
        self_us[sample] = self_us.get(sample, 0.0) + dt
    agg: dict[tuple, float] = {}
    for node_id, us in self_us.items():
        f = nodes[node_id]["callFrame"]
        url = f.get("url", "").rsplit("/", 1)[-1].split("?")[0]
        key = (f.get("functionName") or "(anonymous)", f"{url}:{f.get('lineNumber', -1) + 1}" if url else "")
        agg[key] = agg.get(key, 0.0) + us
    total = sum(agg.values())
    rows = sorted(agg.items(), key=lambda kv: -kv[1])
    skip = {"(idle)", "(program)"}
    out = [{"function": fn, "where": where, "self_ms": us / 1000.0} for (fn, where), us in rows if fn not in skip][:top]
    return [
        {
            "function": "(profiled run: first paint)",
            "where": "",
            "self_ms": r["first_paint_ms"] or float("nan"),
            "busy_ms": (total - sum(us for (fn, _), us in rows if fn in skip)) / 1000.0,
        }
    ] + out
