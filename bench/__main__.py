"""`python -m bench` (`make bench`): every pytree-lab benchmark in one run, printed beside its target.

    python -m bench                      # everything (about 10 minutes on 2 cores)
    python -m bench --only compute,trees # some sections: compute, kernelws, roundtrip, burst, trees, lite
    python -m bench --quick              # fewer repetitions, for a smoke run
    python -m bench --servers installed  # the browser sections on the server as installed only

Sections: 1 compute per update; 2a kernel websocket round trips without a browser; 2 slider ->
chart round trip vs a no-op-kernel floor; 3 a 20-move burst; 4 big trees (Python model, first
paint, select / fold) beside treescope; 5 the JupyterLite site, old build vs new (size, page
open -> first diagram, kernel ready, first slider move answered, a second visit; on this machine,
with Chromium's CPU throttled 4x and with the server limited to 10 Mbit/s). Sections 2a, 2 and
3 run on two servers side by side: pytree-lab as installed (its jupyter_server extension sets
TCP_NODELAY on kernel websockets) and stock (the extension switched off); targets are judged on
the server as installed.
6 (training) 100 optimizer steps, compiled loop vs hand-written jitted optax loops; an explorer's
first steps (build, Step, Step, Step ×10, Reset + Step).
8 (devices) a slider move and step(100) on the host CPU and, where JAX sees one, the accelerator.
7 (hub) a class of N = 5, 10, 20 students on a real JupyterHub on 127.0.0.1 (bench/hub.py):
server start, kernel memory after lesson 01, slider round trips, hub/proxy CPU, node capacity.
Results go to artifacts/bench.json as well. A missed target gets a profile of where the
time goes (cProfile for Python, Chromium's CPU profile for the page).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import platform
import sys
import time
from pathlib import Path

from .stats import Table, cpu_share, cpu_ticks, fmt, verdict

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "artifacts" / "bench.json"
SECTIONS = ["compute", "kernelws", "roundtrip", "burst", "trees", "lite", "training", "devices"]

# Targets.
TARGET_RATIO = 1.25  # explorer p95 <= 1.25 x floor p95 (server as installed)
TARGET_P50_MS = 30.0  # explorer round trip p50 (server as installed)
TARGET_MODEL_S = 0.3  # 10k leaves: Python model
TARGET_PAINT_MS = 300.0  # 10k leaves: first paint
TARGET_CLICK_MS = 50.0  # 10k leaves: select / fold


def _print(table: Table) -> None:
    table.notes.append(f"load average (1, 5, 15 min) when this table was printed: {_load()}" + _cpu_share())
    print()
    print(table.render(), flush=True)


_LAST_CPU: list[int] = []


def _cpu_share() -> str:
    """Since the last table: how busy both cores were, and how much of their time the host took."""
    ticks = cpu_ticks()
    last = _LAST_CPU[:] or ticks
    _LAST_CPU[:] = ticks
    share = cpu_share(last, ticks)
    return f"; since the last table, {share}" if share else ""


def _load() -> list[float]:
    try:
        return [round(v, 2) for v in os.getloadavg()]
    except OSError:
        return []


def trees_tables(py: dict, br: dict | None) -> list[Table]:
    from .trees import TREE_NAMES

    t1 = Table(
        "4a. Python: the diagram's model (describe + align + widget state) vs treescope.render_to_html",
        [
            "tree",
            "leaves",
            "rows",
            "describe",
            "align",
            "widget+JSON (here)",
            "state",
            "in kernel (cpu)",
            "treescope in kernel (cpu)",
            "target",
            "ok/MISSED",
        ],
    )
    for name in TREE_NAMES:
        p = py[name]
        d = (br or {}).get("diagram", {}).get(name, {})
        ts = (br or {}).get("treescope", {}).get(name, {})
        kernel = d.get("python_s")
        is10k = name == "layers-10k"
        judged = kernel if kernel is not None else p["model"]
        t1.add(
            name,
            str(p["leaves"]),
            str(p["rows"]),
            fmt(p["describe"] * 1e3, " ms"),
            fmt(p["align"] * 1e3, " ms"),
            fmt(p["model"] * 1e3, " ms"),
            fmt(p["bytes"] / 1e6, " MB"),
            f"{fmt(kernel * 1e3, ' ms')} ({fmt(d['python_cpu_s'] * 1e3, ' ms')})" if kernel is not None else "—",
            f"{fmt(ts['python_s'] * 1e3, ' ms')} ({fmt(ts['python_cpu_s'] * 1e3, ' ms')})"
            if ts.get("python_s") is not None
            else "—",
            f"≤ {TARGET_MODEL_S * 1e3:.0f} ms" if is10k else "",
            verdict(judged <= TARGET_MODEL_S) if is10k else "",
        )
    t1.notes.append(
        "'in kernel' = PytreeDiagram(tree) in the notebook's kernel, its comm open and state "
        "serialisation included (judged, wall clock); 'here' = the same in this process plus json.dumps "
        "of the state; (cpu) = the process's CPU time, less sensitive to a busy machine"
    )
    tables = [t1]
    if br is None:
        return tables

    t2 = Table(
        "4b. First paint in JupyterLab + Chromium: display() -> rows painted (cell run -> painted in brackets)",
        ["tree", "pytree-lab diagram", "treeitems in DOM", "treescope", "treescope HTML", "target", "ok/MISSED"],
    )
    for name in TREE_NAMES:
        d = br["diagram"].get(name, {})
        ts = br["treescope"].get(name, {})
        is10k = name == "layers-10k"
        fp = d.get("first_paint_ms")

        def both(x):
            if not x or x.get("first_paint_ms") is None:
                return "—" if not x else "not painted"
            return f"{fmt(x['first_paint_ms'], ' ms')} ({fmt(x['cell_to_paint_ms'], ' ms')})"

        items = d.get("treeitems_in_dom")
        t2.add(
            name,
            both(d),
            "—" if items is None else str(round(items)),
            both(ts),
            fmt(ts["html_bytes"] / 1e6, " MB") if ts.get("html_bytes") else "—",
            f"≤ {TARGET_PAINT_MS:.0f} ms" if is10k else "",
            verdict(fp is not None and fp <= TARGET_PAINT_MS) if is10k else "",
        )
    big = br["diagram"].get("layers-10k", {})
    if big.get("state_arrival_ms") is not None and big.get("first_paint_ms") is not None:
        t2.notes.append(
            f"10k diagram: its state message ({py['layers-10k']['bytes'] / 1e6:.1f} MB) reaches the page "
            f"{big['state_arrival_ms']:.0f} ms after display(); rows painted "
            f"{big['first_paint_ms'] - big['state_arrival_ms']:.0f} ms after that"
        )
    t2.notes.append(
        "medians over the runs (diagram: 2-3 per tree; treescope: 1); widget module and treescope's "
        "elements loaded once before timing"
    )
    tables.append(t2)

    c = br["clicks_10k"]
    t3 = Table(
        f"4c. Select / fold on the 10k-leaf diagram, {c['select']['n']} clicks each: click -> aria attribute "
        "(judged), and click -> next paint",
        ["action", "-> attr p50", "-> attr p95", "-> paint p50", "-> paint p95", "target (attr p95)", "ok/MISSED"],
    )
    for kind, label in (
        ("unfold", "unfold a layer (aria-expanded)"),
        ("select", "select a leaf (aria-selected)"),
        ("fold", "fold a layer (aria-expanded)"),
    ):
        k = c[kind]
        t3.add(
            label,
            fmt(k["attr_ms"]["median"], " ms"),
            fmt(k["attr_ms"]["p95"], " ms"),
            fmt(k["event_ms"]["median"], " ms"),
            fmt(k["event_ms"]["p95"], " ms"),
            f"≤ {TARGET_CLICK_MS:.0f} ms",
            verdict(k["attr_ms"]["p95"] <= TARGET_CLICK_MS),
        )
    t3.notes.append(
        "-> paint = the browser's Event Timing duration (as INP: input to the next frame presented; "
        "8 ms steps, under 16 ms counted as 16); it includes waiting for the next frame"
    )
    t3.notes.append(
        "after the next frame (rAF + message), p50/p95: "
        + "; ".join(
            f"{kind} {c[kind]['paint_ms']['median']:.0f}/{c[kind]['paint_ms']['p95']:.0f} ms"
            for kind in ("unfold", "select", "fold")
        )
    )
    t3.notes.append(
        f"each fold sends the whole `collapsed` list to the kernel and gets it echoed back: "
        f"{c['collapsed_paths']} paths, {c['collapsed_bytes'] / 1e3:.0f} kB each way"
    )
    tables.append(t3)
    return tables


# 4c (bigleaf): one 10^7-element leaf and a tree that contains itself (bench/big_leaf.py)
SECTIONS.insert(SECTIONS.index("trees") + 1, "bigleaf")
SECTIONS.insert(SECTIONS.index("bigleaf") + 1, "explorerbig")  # 4d: big-tree StepExplorer (bench/explorer_big.py)
SECTIONS.insert(SECTIONS.index("explorerbig") + 1, "textform")  # 4e: text of three 100k-leaf trees (bench/text_form.py)
SECTIONS.insert(SECTIONS.index("textform") + 1, "lecture")  # 4f: the lecture transformer (bench/lecture.py)
SECTIONS.append("kernelmem")  # 7a: a student kernel's memory after lesson 01 (bench/kernel_memory.py)
SECTIONS.append("hub")  # 7: a class on a real JupyterHub (bench/hub.py)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench", description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", default=",".join(SECTIONS), help="comma-separated: " + ", ".join(SECTIONS))
    ap.add_argument("--quick", action="store_true", help="fewer repetitions (a smoke run, not for the README)")
    ap.add_argument("--moves", type=int, default=None, help="round-trip moves per mode (default 80; quick 20)")
    ap.add_argument(
        "--servers",
        default="stock,installed",
        help="for the round trip and burst: stock and/or installed (pytree_lab's server extension on); "
        "the trees section uses the installed one",
    )
    ap.add_argument("--no-profile", action="store_true", help="skip the profiles of missed targets")
    ap.add_argument(
        "--hub-students", default=None, help="the hub section's class sizes, comma-separated (default 5,10,20; quick 3)"
    )
    ap.add_argument(
        "--hub-seconds",
        type=float,
        default=None,
        help="the hub section: seconds of slider moves per student (default 60; quick 15)",
    )
    ap.add_argument("--json", default=str(OUT), help=f"where to write the results (default {OUT.relative_to(ROOT)})")
    args = ap.parse_args(argv)
    only = [s.strip() for s in args.only.split(",") if s.strip()]
    unknown = set(only) - set(SECTIONS)
    if unknown:
        ap.error(f"unknown sections: {', '.join(sorted(unknown))}")
    moves = args.moves or (20 if args.quick else 80)
    servers = [x.strip() for x in args.servers.split(",") if x.strip()]
    if not servers or set(servers) - {"stock", "installed"}:
        ap.error("--servers: stock, installed or both")

    platforms = os.environ.get("JAX_PLATFORMS")  # as set: the devices section sees the accelerator
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    started = time.monotonic()
    results: dict = {
        "meta": {
            "started": time.strftime("%Y-%m-%d %H:%M:%S %z"),
            "python": platform.python_version(),
            "machine": f"{platform.machine()}, {os.cpu_count()} cores",
            "load_average_at_start": _load(),
            "quick": args.quick,
            "sections": only,
            "servers": servers,
        },
        "targets": {
            "explorer_p95_over_floor_p95": TARGET_RATIO,
            "explorer_p50_ms": TARGET_P50_MS,
            "model_10k_s": TARGET_MODEL_S,
            "first_paint_10k_ms": TARGET_PAINT_MS,
            "select_fold_10k_ms": TARGET_CLICK_MS,
        },
    }
    _cpu_share()  # the first reading: each table reports the CPU since the one before
    print(
        f"pytree-lab benchmark: {', '.join(only)}; load average {results['meta']['load_average_at_start']} "
        f"on {results['meta']['machine']}; servers: {', '.join(servers)}",
        flush=True,
    )

    def save() -> None:
        results["meta"]["seconds"] = round(time.monotonic() - started, 1)
        results["meta"]["load_average_at_end"] = _load()
        path = Path(args.json)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(_clean(results), indent=1, default=_jsonable, allow_nan=False))

    if "compute" in only:
        from . import compute

        r = compute.run(*((60, 500, 60) if args.quick else ()))
        results["compute"] = r
        _print(compute.table(r))
        save()

    if "kernelws" in only:
        from . import kernelws

        print("\n2a. kernel websocket round trips without a browser (two jupyter_servers) ...", flush=True)
        kw = kernelws.run(rounds=30 if args.quick else 100)
        results["kernelws"] = kw
        _print(kernelws.table(kw))
        save()

    py_trees = None
    trees_data = None
    if "trees" in only:
        from . import trees

        print("\nbuilding trees (100 / 1k / 10k leaves, 50-layer MLP, small transformer) ...", flush=True)
        trees_data = trees.build_all()
        reps = {name: (1 if args.quick else (2 if name == "layers-10k" else 3)) for name in trees_data}
        py_trees = trees.run(trees_data, reps)
        results["trees_python"] = py_trees
        save()

    browser_sections = [s for s in ("roundtrip", "burst", "trees") if s in only]
    if browser_sections:
        from . import roundtrip
        from .lab import BenchLab, Chromium

        rt_servers = servers if ("roundtrip" in only or "burst" in only) else []
        lab_kinds = list(dict.fromkeys(rt_servers + (["installed"] if "trees" in only else [])))
        print(
            f"\nstarting JupyterLab ({', '.join(lab_kinds)}) + Chromium for: {', '.join(browser_sections)} ...",
            flush=True,
        )
        with Chromium() as browser, contextlib.ExitStack() as stack:
            labs = {kind: stack.enter_context(BenchLab(browser, kind)) for kind in lab_kinds}
            results["meta"]["browser_servers"] = {kind: lab.describe for kind, lab in labs.items()}
            if rt_servers:
                rts = {}
                try:
                    for kind in rt_servers:
                        rts[kind] = roundtrip.RoundTrip(labs[kind])
                    moves_r = None
                    if "roundtrip" in only:
                        moves_r = roundtrip.run_moves(rts, moves=moves, warmup=3 if args.quick else 5)
                        results["roundtrip"] = moves_r
                        _print(roundtrip.table_moves(moves_r))
                        save()
                    if "burst" in only:
                        b = {kind: roundtrip.run_burst(rt, repeats=2 if args.quick else 3) for kind, rt in rts.items()}
                        results["burst"] = b
                        _print(roundtrip.table_burst(b, moves_r))
                        save()
                finally:
                    for rt in rts.values():
                        rt.close()
            lab = labs.get("installed")
            if "trees" in only:
                from . import paint

                reps = {name: (1 if args.quick else (2 if name in ("layers-10k",) else 3)) for name in trees_data}
                br = paint.run(lab, reps, clicks=4 if args.quick else 10)
                results["trees_browser"] = br
                for t in trees_tables(py_trees, br):
                    _print(t)
                save()
                missed_paint = (br["diagram"]["layers-10k"].get("first_paint_ms") or math.inf) > TARGET_PAINT_MS
                if missed_paint and not args.no_profile:
                    tp = paint.TreePaint(lab)
                    try:
                        prof = paint.profile_first_paint(lab, tp, "layers-10k")
                    finally:
                        tp.close()
                    results["profile_first_paint_10k"] = prof
                    print("\nwhere the 10k first paint goes (Chromium CPU profile of one display, self time):")
                    head, rest = prof[0], prof[1:]
                    print(
                        f"  profiled run: first paint {head['self_ms']:.0f} ms, page main thread busy "
                        f"{head['busy_ms']:.0f} ms in all"
                    )
                    for row in rest:
                        print(f"  {row['self_ms']:8.1f} ms  {row['function']}  {row['where']}")
                    save()
            errors = [e for each in labs.values() for e in each.errors]
            if errors:
                results["page_errors"] = errors
                print("\npage errors during the run:\n  " + "\n  ".join(errors[:10]))
    elif py_trees is not None:
        for t in trees_tables(py_trees, None):
            _print(t)

    if py_trees is not None:
        from . import trees

        print("\n4d. the 10k-leaf model in a fresh kernel (no page attached), by phase ...", flush=True)
        kp = trees.kernel_phases("layers-10k", runs=3 if args.quick else 5)
        results["kernel_phases_10k"] = kp
        t = Table(
            "4d. PytreeDiagram(10k leaves) in a kernel: CPU time by phase (median of "
            f"{kp['runs']} runs; kernel main thread, cyclic GC apart)",
            ["phase", "CPU", "share of process CPU"],
        )
        total = kp["process CPU (all threads)"]
        for k, v in kp.items():
            if k in ("runs", "wall", "process CPU (all threads)"):
                continue
            t.add(k, fmt(v * 1e3, " ms"), f"{v / total * 100:.0f}%")
        t.add("process CPU (all threads)", fmt(total * 1e3, " ms"), "100%")
        t.add("wall clock", fmt(kp["wall"] * 1e3, " ms"), "")
        t.notes.append(
            "describe = the tree model (nodes, leaves, value summaries); align = the wire rows; state JSON "
            "text = the rows as one JSON string; comm message = ipykernel's json_clean, pack, HMAC and send"
        )
        _print(t)
        save()

    if py_trees is not None and not args.no_profile:
        judged = results.get("trees_browser", {}).get("diagram", {}).get("layers-10k", {}).get("python_s")
        if (judged if judged is not None else py_trees["layers-10k"]["model"]) > TARGET_MODEL_S:
            from . import trees

            text = trees.profile_model(trees_data["layers-10k"])
            results["profile_model_10k"] = text
            print("\nwhere the 10k Python model goes (cProfile of PytreeDiagram(tree) + state JSON, by own time):")
            print("\n".join("  " + ln for ln in text.splitlines()))
            g = trees.gc_share(trees_data["layers-10k"])
            results["gc_model_10k"] = g
            print(
                f"  PytreeDiagram(10k leaves) here: {g['gc_on_s'] * 1e3:.0f} ms with the cyclic GC running, "
                f"{g['gc_paused_s'] * 1e3:.0f} ms with it paused ({g['tracked_objects']} objects tracked): "
                "time in a list comprehension above is mostly collections it happened to trigger"
            )

    if "kernelmem" in only:
        from . import kernel_memory

        print("\n7a. a student kernel's memory through lesson 01 (three fresh kernels) ...", flush=True)
        km = kernel_memory.run()
        results["kernelmem"] = km
        for t in kernel_memory.table(km):
            _print(t)
        save()

    if "hub" in only:
        from . import hub

        ns = [int(v) for v in (args.hub_students or ("3" if args.quick else "5,10,20")).split(",") if v.strip()]
        seconds = args.hub_seconds or (15.0 if args.quick else 60.0)
        results["hub"] = {"runs": []}
        for n in ns:
            one = hub.run([n], seconds=seconds, log=lambda m: print(m, flush=True))
            results["hub"]["runs"] += one["runs"]
            save()
        _print(hub.table(results["hub"]))
        save()

    if "training" in only:
        from . import training

        r = training.run(*((15,) if args.quick else ()))
        results["training"] = r
        _print(training.table(r))
        save()
        results["explorer_first_steps"] = first = training.run_explorer(*((2,) if args.quick else ()))
        _print(training.table_explorer(first))
        save()
        from .lab import BenchLab, Chromium

        with Chromium() as browser, BenchLab(browser, "installed") as lab:
            rb = training.run_browser(lab, clicks=5 if args.quick else 15)
        results["training_browser"] = rb
        _print(training.table_browser(rb))
        save()

    if "devices" in only:
        from . import devices

        results["devices"] = devices.run_child(quick=args.quick, platforms=platforms)
        _print(devices.table(results["devices"]))
        save()

    if "lite" in only:
        from . import lite_bench

        print("\n5. building the JupyterLite site and opening it offline in Chromium ...", flush=True)
        lite = lite_bench.run(runs=1 if args.quick else lite_bench.RUNS)
        results["lite"] = lite
        print()
        print(lite_bench.report(lite), flush=True)

    if "bigleaf" in only:
        from . import big_leaf

        print("\n4c. one 10^7-element leaf, and a tree that contains itself ...", flush=True)
        results["big_leaf"] = big_leaf.run(quick=args.quick)
        _print(big_leaf.table(results["big_leaf"]))

    if "explorerbig" in only:
        from . import explorer_big

        print("\n4d. StepExplorer for 400, 2k and 10k leaves, before vs now ...", flush=True)
        results["explorer_big"] = explorer_big.run(quick=args.quick)
        _print(explorer_big.table(results["explorer_big"]))

    if "textform" in only:
        from . import text_form

        print("\n4e. the text form of three aligned 100k-leaf trees ...", flush=True)
        results["text_form"] = text_form.run(quick=args.quick)
        _print(text_form.table(results["text_form"]))

    if "lecture" in only:
        from . import lecture

        print("\n4f. the lecture transformer: build + first step, slider moves ...", flush=True)
        results["lecture"] = lecture.run(quick=args.quick)
        _print(lecture.table(results["lecture"]))

    save()
    print(
        f"\nload average at end {results['meta']['load_average_at_end']}; "
        f"{results['meta']['seconds']:.0f} s in all; results in {Path(args.json)}"
    )
    return 0


def _clean(o):
    """NaN (no data) becomes null: the file stays strict JSON."""
    if isinstance(o, float):
        return None if not math.isfinite(o) else o
    if isinstance(o, dict):
        return {str(k): _clean(v) for k, v in o.items()}
    if isinstance(o, (list, tuple)):
        return [_clean(v) for v in o]
    return o


def _jsonable(o):
    if hasattr(o, "tolist"):
        return o.tolist()
    return str(o)


if __name__ == "__main__":
    sys.exit(main())
