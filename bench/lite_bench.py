"""JupyterLite site numbers, old build vs new: size, page open -> first diagram, kernel ready, live
diagram, first slider move; on this machine, with a 4x slower CPU, on a 10 Mbit/s link; a second visit.

    python bench/lite_bench.py [--runs 5] [--variants old,new,lean,snapshot,stock]
                                [--conditions machine,cpu4x,10mbit] [--json FILE]
    python -m bench --only lite     # the same, as section 5 of `make bench`

Builds the site from the checkout (plus one small notebook: the setup cell, a `PytreeDiagram` of
the lesson's params, then a `Slider` of the bias with a diagram it redraws), serves it on 127.0.0.1
and opens it in Debian's Chromium with a fresh profile on disk each run (a student's first
visit: nothing cached). The student runs the three cells in turn and presses the right arrow key
on the slider; then reloads the page (the second visit: same profile, its HTTP cache warm).
Outside requests fail at the browser's resolver and are recorded (not routed as in the browser
tests: Playwright turns the HTTP cache off in a context that routes requests), so the setup
cell's numpy/pandas download from Pyodide's CDN fails fast here; online, that download comes on
top of the setup time. Times are medians over
the runs; each run is listed too.

Conditions (`CONDITIONS`):
- machine: as served here, nothing slowed.
- cpu4x: DevTools' `Emulation.setCPUThrottlingRate` 4 on the page. Chromium throttles only the
  page's main thread (JupyterLab, the widgets' drawing): it answers "Operation is only supported
  for pages, not workers" for a worker, so Pyodide in the kernel's web worker runs at full speed
  and this condition understates a slow laptop's kernel start.
- 10mbit: the local server sends every response through one shared link of 10 Mbit/s
  (lite_build/serve.py `--mbit`), not DevTools' `Network.emulateNetworkConditions`: that is set
  per browser target, and most bytes (Pyodide's core, the wheels) are fetched by the kernel's
  web worker and go through the site's service worker, other targets than the page; a limit
  in the server holds for every request alike, as a school's link does.
The second visit is timed in each condition; the server sends the cache headers of
docs/hosting.md (content-named files kept a year, everything else asked again: 304 when unchanged).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import urlsplit

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.stats import cpu_share, cpu_ticks, verdict  # noqa: E402
from lite_build import browse  # noqa: E402
from lite_build.build import build_site  # noqa: E402
from lite_build.serve import SiteServer  # noqa: E402

NOTEBOOK = "lite_bench.ipynb"
DIAGRAM_CELL = """\
from pytree_lab import PytreeDiagram
PytreeDiagram({"weight": [1.0, -1.0], "bias": 0.0})
"""
# a student's slider: each move redraws the diagram beside it with the new bias
SLIDER_CELL = """\
from pytree_lab.slider import Slider
bias = Slider(0.5, description="bias")
moved = PytreeDiagram({"weight": [1.0, -1.0], "bias": 0.5})
bias.observe(lambda change: moved.set_trees({"params": {"weight": [1.0, -1.0], "bias": change["new"]}}), "value")
display(bias, moved)
"""
SETUP, DIAGRAM, SLIDER = range(3)  # cell indices in the built notebook (the build puts the setup cell first)


def write_notebook(folder: Path) -> Path:
    import nbformat

    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(DIAGRAM_CELL), nbformat.v4.new_code_cell(SLIDER_CELL)]
    path = folder / NOTEBOOK
    nbformat.write(nb, path)
    return path


def edit_notebook(path: Path) -> None:
    """What an instructor does between two builds: one more cell in one notebook."""
    import nbformat

    nb = nbformat.read(path, as_version=4)
    nb.cells.append(nbformat.v4.new_markdown_cell(f"Edited ({len(nb.cells)} cells now)."))
    nbformat.write(nb, path)


def loaded_bytes(site: Path, net: browse.NetLog) -> int:
    """Bytes of the site's files the page fetched (each file once; not the HEAD requests of the
    page's check of the site)."""
    total = 0
    for path in {urlsplit(url).path for url in net.gets}:
        f = site / path.lstrip("/")
        if f.is_file():
            total += f.stat().st_size
    return total


# When a diagram is first on screen (the build's stored one, or else the live one), and when
# JupyterLab has drawn the notebook's first cell (its own, not the preview the pages draw before
# it): milliseconds from the page's navigation start, kept by the page itself (again after a reload).
FIRST_DIAGRAM = """
new MutationObserver((_, observer) => {
    const item = document.querySelector('[role=tree] [role=treeitem]');
    if (item && item.checkVisibility()) { window.ptlFirstDiagram = performance.now(); observer.disconnect(); }
}).observe(document, { childList: true, subtree: true });
new MutationObserver((_, observer) => {
    const cell = document.querySelector('#jp-main-dock-panel .jp-NotebookPanel .jp-Cell');
    if (cell && cell.checkVisibility()) { window.ptlNotebookDrawn = performance.now(); observer.disconnect(); }
}).observe(document, { childList: true, subtree: true });
"""
DRAWN = "() => window.ptlNotebookDrawn"
# The live slider of a cell (not a stored one: the build's outputs are inert) and the text of the
# diagram after it, as a student sees them.
LIVE_SLIDER = """(cell) => {
    const input = [...cell.querySelectorAll('input[type=range]')].find((e) => !e.closest('.ptl-stored'));
    const trees = [...cell.querySelectorAll('[role=tree]')].filter((e) => !e.closest('.ptl-stored'));
    return input && trees.length ? trees[trees.length - 1].textContent : null;
}"""
SHOWS = """([cell, value]) => {
    const trees = [...cell.querySelectorAll('[role=tree]')].filter((e) => !e.closest('.ptl-stored'));
    return trees.length > 0 && trees[trees.length - 1].textContent.includes(value);
}"""


def move_slider(page, index: int) -> str:
    """Run the slider's cell, press the right arrow key on its live slider; return the new value
    once the diagram beside it shows it."""
    browse.run_cell(page, index)
    cell = browse.cell(page, index).element_handle()
    wait = browse.Timeouts.ms(browse.Timeouts.WIDGET)
    page.wait_for_function(LIVE_SLIDER, arg=cell, timeout=wait, polling=50)
    slider = page.locator(".jp-NotebookPanel:not(.lm-mod-hidden) .jp-Cell").nth(index).locator("input[type=range]")
    slider = slider.last
    before = slider.input_value()
    slider.focus()
    page.keyboard.press("ArrowRight")  # as a student would: the keyboard on the focused slider
    page.wait_for_function("([el, v]) => el.value !== v", arg=[slider.element_handle(), before], timeout=wait)
    value = slider.input_value()
    page.wait_for_function(SHOWS, arg=[cell, value], timeout=browse.Timeouts.ms(browse.Timeouts.ROUND_TRIP), polling=20)
    return value


def one_run(playwright, site: Path, server: SiteServer, cpu: float = 1.0, stock: bool = False) -> dict:
    """A student's first visit (a fresh profile on disk), then a reload of the page (the second
    visit: the same profile, its HTTP cache warm). On the stock site (no kernel, no extension)
    only JupyterLab's drawing of the notebook is timed."""
    with tempfile.TemporaryDirectory(prefix="pytree-lab-lite-profile-") as profile:
        return _one_run(playwright, site, server, cpu, Path(profile), stock)


def _drawn(page) -> float:
    """Seconds from the page's navigation to JupyterLab's first drawn cell of the notebook."""
    return round(page.wait_for_function(DRAWN, timeout=browse.Timeouts.ms(browse.Timeouts.PAGE)).json_value() / 1000, 2)


def _one_run(playwright, site: Path, server: SiteServer, cpu: float, profile: Path, stock: bool = False) -> dict:
    context, net = browse.cached_profile(playwright, profile)
    context.add_init_script(FIRST_DIAGRAM)
    since = lambda: round(time.monotonic() - net.started, 2)  # noqa: E731
    try:
        page = context.pages[0] if context.pages else context.new_page()
        devtools = context.new_cdp_session(page)  # held for the run: the throttle lasts while it is attached
        devtools.send("Emulation.setCPUThrottlingRate", {"rate": cpu})
        sent_at_open = server.sent
        browse.open_notebook(page, server.url, NOTEBOOK, net)
        if stock:
            first = {"notebook_drawn_s": _drawn(page)}
            # opened again by its address: a reload this soon can come before JupyterLab has
            # saved the workspace that reopens the notebook
            browse.open_notebook(page, server.url, NOTEBOOK, net)
            return {**first, "second_visit_notebook_drawn_s": _drawn(page)}
        browse.wait_kernel_ready(page)
        kernel_ready = since()
        kernel_bytes = loaded_bytes(site, net)
        browse.run_cell(page, SETUP)
        setup_done = since()
        target = browse.cell(page, DIAGRAM)
        target.locator(".jp-InputPrompt").first.click()
        page.keyboard.press("Shift+Enter")
        target.locator("[role=tree] [role=treeitem]").first.wait_for(timeout=browse.Timeouts.ms(browse.Timeouts.CELL))
        diagram = since()
        diagram_bytes = loaded_bytes(site, net)
        first_visible = page.evaluate("window.ptlFirstDiagram") / 1000.0
        paint_bytes = server.sent_before(net.started + first_visible) - sent_at_open
        value = move_slider(page, SLIDER)
        slider = since()
        first = {
            "first_diagram_visible_s": round(first_visible, 2),
            "notebook_drawn_s": _drawn(page),
            "kernel_ready_s": kernel_ready,
            "setup_cell_done_s": setup_done,
            "first_diagram_s": diagram,
            "slider_answered_s": slider,
            "slider_value": value,
            "bytes_to_first_paint": paint_bytes,
            "bytes_to_kernel_ready": kernel_bytes,
            "bytes_to_first_diagram": diagram_bytes,
            "refused": sorted(set(net.refused)),
        }
        # the second visit: the same profile, its cache warm
        sent = server.sent
        net.started = time.monotonic()
        page.reload(timeout=browse.Timeouts.ms(browse.Timeouts.PAGE))
        browse.show_notebook(page, NOTEBOOK)
        browse.wait_kernel_ready(page)
        first["second_visit_kernel_ready_s"] = since()
        first["second_visit_notebook_drawn_s"] = _drawn(page)
        first["second_visit_bytes_sent"] = server.sent - sent
        return first
    finally:
        context.close()


VARIANTS = {
    # what the build made before bytecode and preloading: the kernel compiles IPython & co.
    # from source at every start and installs its packages one by one after Pyodide booted
    "old": {"fast_start": False},
    # bytecode compiled by Pyodide's own Python, start packages preloaded with Pyodide, the
    # notebooks' outputs stored by the build (first paint; the command line's default)
    "new": {"fast_start": True, "stored_outputs": True},
    # the same without the .py sources the bytecode replaces (`build.py --lean`)
    "lean": {"fast_start": True, "lean": True, "stored_outputs": True},
    # the kernel started from a memory snapshot made at build time (`build.py --snapshot`,
    # experimental): opened only when asked for (--variants)
    "snapshot": {"fast_start": True, "stored_outputs": True, "snapshot": True},
    # JupyterLite's own site with the notebook and nothing else (no extension, no kernel, no
    # preview: `jupyter lite build --ignore-sys-prefix`): how soon JupyterLab alone draws the
    # notebook here, the floor under every "kernel ready" (a kernel is ready only in a drawn
    # notebook); opened in every run of the bench by default (seconds a run)
    "stock": {"stock": True},
}
DEFAULT_VARIANTS = ("old", "new", "lean", "stock")


def is_stock(name: str) -> bool:
    """The floor (JupyterLite's own site), not a build of the course."""
    return VARIANTS.get(name, {}).get("stock", False)


RUNS = 5  # per variant; medians


def load_average() -> list[float]:
    try:
        return [round(v, 2) for v in os.getloadavg()]
    except OSError:
        return []


def build_and_rebuild(tmp: Path, variants: tuple[str, ...]) -> tuple[dict, dict, dict, dict]:
    """Each variant's first build (an empty bytecode cache: every archive compiled), then its
    rebuild into the same folder after one notebook edit; seconds, rounded to 0.1."""
    from lite_build import build as lite_build_module

    notebook = write_notebook(tmp)
    sites, manifests, build_s, rebuild_s = {}, {}, {}, {}
    saved_cache = lite_build_module.BYTECODE_CACHE
    lite_build_module.BYTECODE_CACHE = tmp / "bytecode-cache"  # a first build finds nothing compiled
    try:
        for name in variants:
            sites[name] = tmp / f"site-{name}"
            if is_stock(name):
                manifests[name] = build_stock(sites[name], notebook)
                build_s[name] = rebuild_s[name] = None
                continue
            started = time.monotonic()
            manifests[name] = build_site(sites[name], [notebook], **VARIANTS[name])
            build_s[name] = round(time.monotonic() - started, 1)
            # an instructor edits one notebook and builds again (the same output folder)
            edit_notebook(notebook)
            started = time.monotonic()
            manifests[name] = build_site(sites[name], [notebook], **VARIANTS[name])
            rebuild_s[name] = round(time.monotonic() - started, 1)
    finally:
        lite_build_module.BYTECODE_CACHE = saved_cache
    return sites, manifests, build_s, rebuild_s


def build_stock(site: Path, notebook: Path) -> dict:
    """JupyterLite's own build of the notebook, with none of the extensions installed here; the
    totals of a build's manifest (no Pyodide, no wheels: the site has no kernel)."""
    work = site.with_name(site.name + "-work")
    work.mkdir()
    jupyter = Path(sys.executable).with_name("jupyter")
    command = [
        str(jupyter),
        "lite",
        "build",
        "--ignore-sys-prefix",
        "--contents",
        str(notebook),
        "--output-dir",
        str(site),
    ]
    subprocess.run(command, cwd=work, check=True, capture_output=True)
    files = [p for p in site.rglob("*") if p.is_file()]
    return {
        "total_bytes": sum(p.stat().st_size for p in files),
        "total_files": len(files),
        "pyodide_core": [],
        "lock_wheels": [],
        "index_wheels": [],
    }


CONDITIONS = {
    "machine": {"label": "this machine", "cpu": 1, "mbit": None},
    "cpu4x": {
        "label": "CPU 4x slower (Emulation.setCPUThrottlingRate 4: the page's main thread only)",
        "cpu": 4,
        "mbit": None,
    },
    "10mbit": {"label": "the server limited to 10 Mbit/s (one link shared by all requests)", "cpu": 1, "mbit": 10},
}
# (key of a run, label, seconds or bytes): the rows of each condition's table, in order
ROWS = (
    ("first_diagram_visible_s", "page open -> first diagram visible", "s"),
    ("notebook_drawn_s", "page open -> JupyterLab drew the notebook", "s"),
    ("kernel_ready_s", "page open -> kernel ready", "s"),
    ("setup_cell_done_s", "page open -> setup cell done", "s"),
    ("first_diagram_s", "page open -> first live diagram", "s"),
    ("slider_answered_s", "page open -> first slider move answered", "s"),
    ("second_visit_notebook_drawn_s", "second visit: reload -> notebook drawn", "s"),
    ("second_visit_kernel_ready_s", "second visit: reload -> kernel ready", "s"),
    ("bytes_to_first_paint", "sent by the server before first paint", "B"),
    ("bytes_to_kernel_ready", "loaded until kernel ready", "B"),
    ("bytes_to_first_diagram", "loaded until first live diagram", "B"),
    ("second_visit_bytes_sent", "second visit: sent until kernel ready", "B"),
)
# The targets, judged per build: (condition, key of a run, bound, floor, what). The floor is the
# stock site's median of that key in the same condition and run (JupyterLite alone draws the
# notebook then, and no kernel is ready before its notebook is drawn): "+" a bound in seconds
# after it, "x" a multiple of it; None an absolute bound in seconds.
TARGETS = (
    ("machine", "first_diagram_visible_s", 2.0, None, "page open -> first diagram visible"),
    ("machine", "kernel_ready_s", 1.0, ("+", "notebook_drawn_s"), "page open -> kernel ready"),
    ("machine", "slider_answered_s", 2.0, ("+", "notebook_drawn_s"), "page open -> first slider move answered"),
    (
        "machine",
        "second_visit_kernel_ready_s",
        1.0,
        ("+", "second_visit_notebook_drawn_s"),
        "second visit: reload -> kernel ready",
    ),
    *(
        (cond, "notebook_drawn_s", 1.2, ("x", "notebook_drawn_s"), "page open -> JupyterLab drew the notebook")
        for cond in ("machine", "cpu4x", "10mbit")
    ),
    ("cpu4x", "first_diagram_s", 8.0, None, "page open -> first live diagram"),
)


def target_text(bound: float, floor) -> str:
    if floor is None:
        return f"<= {bound:g} s"
    how, key = floor
    name = "stock 2nd-visit drawn" if key.startswith("second_visit") else "stock drawn"
    return f"<= {name} + {bound:g} s" if how == "+" else f"<= {bound:g} x {name}"


def median(runs: list[dict], key: str) -> float | None:
    values = [r[key] for r in runs if r.get(key) is not None]
    return statistics.median(values) if values else None


def measure(playwright, sites: dict, servers: dict, variants: tuple[str, ...], conditions: dict, runs: int) -> dict:
    """Open each built site `runs` times per condition, the builds in turn, the order rotating each
    round (old, new, lean; new, lean, old; ...) so load on the machine falls on all alike; medians
    per build, ratios to the old build, and the load and CPU share of each condition."""
    out = {}
    for cond, setting in conditions.items():
        load, ticks = load_average(), cpu_ticks()
        results = {name: [] for name in variants}
        try:
            for server in servers.values():
                server.limit(setting["mbit"])
            for i in range(runs):
                order = list(variants[i % len(variants) :]) + list(variants[: i % len(variants)])
                for name in order:
                    results[name].append(
                        one_run(playwright, sites[name], servers[name], setting["cpu"], is_stock(name))
                    )
        finally:
            for server in servers.values():
                server.limit(None)
        medians = {name: {key: median(results[name], key) for key, _, _ in ROWS} for name in variants}
        out[cond] = {
            "label": setting["label"],
            "cpu_throttling_rate": setting["cpu"],
            "server_mbit": setting["mbit"],
            "load_average_before": load,
            "load_average_after": load_average(),
            "cpu": cpu_share(ticks, cpu_ticks()),
            "runs": results,
            "medians": medians,
        }
        if "old" in variants:
            old = medians["old"]
            out[cond]["ratio_to_old"] = {
                name: {k: round(v / old[k], 2) for k, v in medians[name].items() if v is not None and old[k]}
                for name in variants
                if name != "old"
            }
    return out


def judge(conditions: dict) -> list[dict]:
    """Each target beside each build's median, met or not (conditions not measured are left out; a
    target on the stock floor is unjudged where the floor was not measured)."""
    judged = []
    for cond, key, bound, floor, what in TARGETS:
        if cond not in conditions:
            continue
        medians_of = conditions[cond]["medians"]
        stock = next((m for name, m in medians_of.items() if is_stock(name)), {})
        if floor is None:
            limit = bound
        else:
            base = stock.get(floor[1])
            limit = None if base is None else round(base + bound if floor[0] == "+" else base * bound, 2)
        for name, medians in medians_of.items():
            if is_stock(name):
                continue
            value = medians.get(key)
            judged.append(
                {
                    "condition": cond,
                    "what": what,
                    "target": target_text(bound, floor),
                    "target_s": limit,
                    "variant": name,
                    "value_s": value,
                    "met": None if value is None or limit is None else value <= limit,
                }
            )
    return judged


def run(
    runs: int = RUNS, variants: tuple[str, ...] = DEFAULT_VARIANTS, conditions: tuple[str, ...] = tuple(CONDITIONS)
) -> dict:
    """Build the variants, then measure them in each condition (`measure`). The load average is
    taken before and after."""
    from playwright.sync_api import sync_playwright

    load_before = load_average()
    with tempfile.TemporaryDirectory(prefix="pytree-lab-lite-bench-") as tmp:
        tmp = Path(tmp)
        sites, manifests, build_s, rebuild_s = build_and_rebuild(tmp, variants)
        with contextlib.ExitStack() as stack, sync_playwright() as pw:
            servers = {name: stack.enter_context(SiteServer(sites[name])) for name in variants}
            measured = measure(pw, sites, servers, variants, {c: CONDITIONS[c] for c in conditions}, runs)

    out = {
        "load_average_before": load_before,
        "load_average_after": load_average(),
        "runs_per_variant": runs,
        "cores": os.cpu_count(),
        "variants": {},
        "conditions": measured,
        "targets": judge(measured),
    }
    for name in variants:
        manifest = manifests[name]
        bench_nb = (
            (sites[name] / "files" / NOTEBOOK).stat().st_size if (sites[name] / "files" / NOTEBOOK).exists() else 0
        )
        out["variants"][name] = {
            "build_s": build_s[name],
            "rebuild_after_notebook_edit_s": rebuild_s[name],
            "site_bytes": manifest["total_bytes"] - bench_nb,
            "site_files": manifest["total_files"] - 1,
            "pyodide_core_bytes": sum(e["bytes"] for e in manifest["pyodide_core"]),
            "wheel_bytes": sum(e["bytes"] for e in manifest["lock_wheels"] + manifest["index_wheels"]),
        }
    return out


def report(r: dict) -> str:
    mb = lambda n: f"{n / 1e6:.1f} MB"  # noqa: E731
    fmt = {"s": lambda v: f"{v:.1f} s", "B": mb}
    names = list(r["variants"])
    with_old = "old" in names
    ratio_names = [n for n in names if n != "old"] if with_old else []
    fmt_load = lambda load: ", ".join(f"{v:.2f}" for v in load) or "?"  # noqa: E731
    head = "  " + f"{'':46}" + "".join(f"{n:>12}" for n in names) + "".join(f"{n + '/old':>11}" for n in ratio_names)
    lines = [
        "JupyterLite site (Debian Chromium, a fresh profile on disk per run, served on 127.0.0.1, no outside requests;",
        f"  {', '.join(names)} opened in turn, order rotating, {r['runs_per_variant']} runs each, medians; "
        f"{r.get('cores') or os.cpu_count()} cores;",
        f"  load average (1, 5, 15 min) before: {fmt_load(r.get('load_average_before', []))}, "
        f"after: {fmt_load(r.get('load_average_after', []))}: on a busy machine compare the ratios, not the times)",
    ]
    for cond, c in r.get("conditions", {}).items():
        lines += [
            "",
            f"  {cond}: {c['label']}",
            f"  (load average before {fmt_load(c['load_average_before'])}, after {fmt_load(c['load_average_after'])}"
            + (f"; {c['cpu']}" if c.get("cpu") else "")
            + ")",
            head,
        ]
        ratios = c.get("ratio_to_old", {})
        for key, label, unit in ROWS:
            values = [c["medians"][n].get(key) for n in names]
            text = "".join(f"{'—' if v is None else fmt[unit](v):>12}" for v in values)
            text += "".join(
                f"{ratios[n][key]:>11.2f}" if key in ratios.get(n, {}) else f"{'':>11}" for n in ratio_names
            )
            lines.append(f"  {label:46}{text}")
        for name in names:
            lines.append(
                f"  {name} runs (diagram visible / notebook drawn / kernel / setup / live diagram / slider / "
                "2nd visit notebook drawn / kernel, s): "
                + "; ".join(
                    " / ".join(
                        str(x.get(k))
                        for k in (
                            "first_diagram_visible_s",
                            "notebook_drawn_s",
                            "kernel_ready_s",
                            "setup_cell_done_s",
                            "first_diagram_s",
                            "slider_answered_s",
                            "second_visit_notebook_drawn_s",
                            "second_visit_kernel_ready_s",
                        )
                    )
                    for x in c["runs"][name]
                )
            )
    lines += ["", head]
    builds = (
        ("site size", "site_bytes", mb),
        ("first build", "build_s", lambda v: f"{v:.1f} s"),
        ("rebuild after a notebook edit", "rebuild_after_notebook_edit_s", lambda v: f"{v:.1f} s"),
    )
    for label, key, f in builds:
        values = [r["variants"][n].get(key) for n in names]
        text = "".join(f"{'—' if v is None else f(v):>12}" for v in values)
        if with_old and r["variants"]["old"].get(key):
            text += "".join(
                f"{'':>11}"
                if r["variants"][n].get(key) is None
                else f"{r['variants'][n][key] / r['variants']['old'][key]:>11.2f}"
                for n in ratio_names
            )
        lines.append(f"  {label:46}{text}")
    if r.get("targets"):
        lines += ["", "  targets (medians; judged per build):"]
        for t in r["targets"]:
            value = "—" if t["value_s"] is None else f"{t['value_s']:.1f} s"
            limit = "—" if t["target_s"] is None else f"{t['target_s']:.1f} s"
            lines.append(
                f"  {t['condition']:8} {t['what']:42} {t['target']:31} = {limit:>7} "
                f"{t['variant']:>8} {value:>8}  {verdict(t['met'])}"
            )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=RUNS, help=f"runs per variant and condition (default {RUNS})")
    parser.add_argument(
        "--variants",
        default=",".join(DEFAULT_VARIANTS),
        help=f"which builds to open, comma-separated, from {', '.join(VARIANTS)}",
    )
    parser.add_argument(
        "--conditions",
        default=",".join(CONDITIONS),
        help=f"in which conditions, comma-separated, from {', '.join(CONDITIONS)} (default all)",
    )
    parser.add_argument("--json", type=Path, help="also write the numbers here")
    args = parser.parse_args(argv)
    variants = tuple(v.strip() for v in args.variants.split(",") if v.strip())
    unknown = [v for v in variants if v not in VARIANTS]
    if unknown:
        parser.error(f"unknown variants {unknown}; choose from {', '.join(VARIANTS)}")
    conditions = tuple(c.strip() for c in args.conditions.split(",") if c.strip())
    unknown = [c for c in conditions if c not in CONDITIONS]
    if unknown or not conditions:
        parser.error(f"unknown conditions {unknown}; choose from {', '.join(CONDITIONS)}")
    result = run(args.runs, variants, conditions)
    print()
    print(report(result))
    if args.json:
        args.json.write_text(json.dumps(result, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
