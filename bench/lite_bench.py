"""JupyterLite site numbers, old build vs new: size, page open -> first diagram, kernel ready, live diagram.

    python bench/lite_bench.py [--runs 5] [--variants old,new,lean] [--json FILE]
    python -m bench --only lite     # the same, as section 5 of `make bench`

Builds the site from the checkout (plus one small notebook: the setup cell, then a
`PytreeDiagram` of the lesson's params), serves it on 127.0.0.1 and opens it in Debian's
Chromium with a fresh profile each run (a student's first visit: nothing cached). Outside
requests are refused, as in the browser test, so the setup cell's numpy/pandas download
from Pyodide's CDN fails fast here; online, that download comes on top of the setup time.
Times are medians over the runs; each run is listed too.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from lite_build import browse  # noqa: E402
from lite_build.build import build_site  # noqa: E402
from lite_build.serve import SiteServer  # noqa: E402

NOTEBOOK = "lite_bench.ipynb"
DIAGRAM_CELL = """\
from pytree_lab import PytreeDiagram
PytreeDiagram({"weight": [1.0, -1.0], "bias": 0.0})
"""


def write_notebook(folder: Path) -> Path:
    import nbformat

    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(DIAGRAM_CELL)]  # the build puts the setup cell first
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
    """Bytes of the site's files the page fetched (each file once)."""
    total = 0
    for path in set(net.local_paths()):
        f = site / path.lstrip("/")
        if f.is_file():
            total += f.stat().st_size
    return total


# When a diagram is first on screen (the build's stored one, or else the live one): milliseconds
# from the page's navigation start, kept by the page itself.
FIRST_DIAGRAM = """
new MutationObserver((_, observer) => {
    const item = document.querySelector('[role=tree] [role=treeitem]');
    if (item && item.checkVisibility()) { window.ptlFirstDiagram = performance.now(); observer.disconnect(); }
}).observe(document, { childList: true, subtree: true });
"""


def one_run(browser, site: Path, url: str) -> dict:
    context, net = browse.offline_context(browser)
    context.add_init_script(FIRST_DIAGRAM)
    try:
        page = context.new_page()
        browse.open_notebook(page, url, NOTEBOOK, net)
        browse.wait_kernel_ready(page)
        kernel_ready = time.monotonic() - net.started
        kernel_bytes = loaded_bytes(site, net)
        browse.run_cell(page, 0)
        setup_done = time.monotonic() - net.started
        target = browse.cell(page, 1)
        target.locator(".jp-InputPrompt").first.click()
        page.keyboard.press("Shift+Enter")
        target.locator("[role=tree] [role=treeitem]").first.wait_for(timeout=browse.Timeouts.ms(browse.Timeouts.CELL))
        diagram = time.monotonic() - net.started
        first_visible = page.evaluate("window.ptlFirstDiagram") / 1000.0
        return {
            "first_diagram_visible_s": round(first_visible, 2),
            "kernel_ready_s": round(kernel_ready, 2),
            "setup_cell_done_s": round(setup_done, 2),
            "first_diagram_s": round(diagram, 2),
            "bytes_to_kernel_ready": kernel_bytes,
            "bytes_to_first_diagram": loaded_bytes(site, net),
            "refused": sorted(set(net.refused)),
        }
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
}
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


def run(runs: int = RUNS, variants: tuple[str, ...] = tuple(VARIANTS)) -> dict:
    """Build the variants, then open them in turn, the order rotating each round (old, new,
    lean; new, lean, old; ...), so load on the machine falls on all alike; medians per variant
    and ratios to the old build, from one run. The load average is taken before and after."""
    from playwright.sync_api import sync_playwright

    load_before = load_average()
    with tempfile.TemporaryDirectory(prefix="pytree-lab-lite-bench-") as tmp:
        tmp = Path(tmp)
        sites, manifests, build_s, rebuild_s = build_and_rebuild(tmp, variants)
        results = {name: [] for name in variants}
        with contextlib.ExitStack() as stack, sync_playwright() as pw:
            servers = {name: stack.enter_context(SiteServer(sites[name])) for name in variants}
            browser = browse.launch(pw)
            try:
                for i in range(runs):
                    order = list(variants[i % len(variants) :]) + list(variants[: i % len(variants)])
                    for name in order:
                        results[name].append(one_run(browser, sites[name], servers[name].url))
            finally:
                browser.close()

    def median(name, key):
        return statistics.median(r[key] for r in results[name])

    out = {
        "load_average_before": load_before,
        "load_average_after": load_average(),
        "load_average_1min": load_average()[0] if load_average() else None,
        "runs_per_variant": runs,
        "cores": os.cpu_count(),
        "variants": {},
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
            "runs": results[name],
            "median_kernel_ready_s": median(name, "kernel_ready_s"),
            "median_setup_cell_done_s": median(name, "setup_cell_done_s"),
            "median_first_diagram_s": median(name, "first_diagram_s"),
            "median_first_diagram_visible_s": median(name, "first_diagram_visible_s"),
            "median_bytes_to_kernel_ready": median(name, "bytes_to_kernel_ready"),
            "median_bytes_to_first_diagram": median(name, "bytes_to_first_diagram"),
        }
    keys = (
        "median_kernel_ready_s",
        "median_first_diagram_visible_s",
        "median_first_diagram_s",
        "median_bytes_to_first_diagram",
        "site_bytes",
    )
    if "old" in out["variants"]:
        old = out["variants"]["old"]
        out["ratio_to_old"] = {
            name: {key: round(v[key] / old[key], 2) for key in keys}
            for name, v in out["variants"].items()
            if name != "old"
        }
        if "new" in out["ratio_to_old"]:
            out["ratio_new_over_old"] = out["ratio_to_old"]["new"]
    return out


def report(r: dict) -> str:
    mb = lambda n: f"{n / 1e6:.1f} MB"  # noqa: E731
    names = list(r["variants"])
    fmt_load = lambda load: ", ".join(f"{v:.2f}" for v in load) or "?"  # noqa: E731
    lines = [
        "JupyterLite site (Debian Chromium, fresh profile per run, served on 127.0.0.1, outside requests refused;",
        f"  {', '.join(names)} opened in turn, order rotating, {r['runs_per_variant']} runs each, medians; "
        f"{r.get('cores') or os.cpu_count()} cores;",
        f"  load average (1, 5, 15 min) before: {fmt_load(r.get('load_average_before', []))}, "
        f"after: {fmt_load(r.get('load_average_after', []))}: on a busy machine compare the ratios, not the times)",
        "  "
        + f"{'':32}"
        + "".join(f"{n:>12}" for n in names)
        + "".join(f"{n + '/old':>11}" for n in names if n != "old" and "old" in names),
    ]
    rows = [
        ("page open -> kernel ready", "median_kernel_ready_s", lambda v: f"{v:.1f} s"),
        ("page open -> setup cell done", "median_setup_cell_done_s", lambda v: f"{v:.1f} s"),
        ("page open -> first diagram visible", "median_first_diagram_visible_s", lambda v: f"{v:.1f} s"),
        ("page open -> first live diagram", "median_first_diagram_s", lambda v: f"{v:.1f} s"),
        ("loaded until kernel ready", "median_bytes_to_kernel_ready", mb),
        ("loaded until first diagram", "median_bytes_to_first_diagram", mb),
        ("site size", "site_bytes", mb),
        ("first build", "build_s", lambda v: f"{v:.1f} s"),
        ("rebuild after a notebook edit", "rebuild_after_notebook_edit_s", lambda v: f"{v:.1f} s"),
    ]
    ratios = r.get("ratio_to_old", {})
    for label, key, fmt in rows:
        text = "".join(f"{fmt(r['variants'][n][key]):>12}" for n in names)
        text += "".join(
            f"{ratios[n][key]:>11.2f}" if key in ratios.get(n, {}) else f"{'':>11}"
            for n in names
            if n != "old" and "old" in names
        )
        lines.append(f"  {label:32}{text}")
    for name in names:
        lines.append(
            f"  {name} runs (diagram visible / kernel / setup / live diagram, s): "
            + "; ".join(
                f"{x['first_diagram_visible_s']} / {x['kernel_ready_s']} / {x['setup_cell_done_s']} / "
                f"{x['first_diagram_s']}"
                for x in r["variants"][name]["runs"]
            )
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=RUNS, help=f"runs per variant (default {RUNS})")
    parser.add_argument(
        "--variants",
        default=",".join(VARIANTS),
        help=f"which builds to open, comma-separated, from {', '.join(VARIANTS)}",
    )
    parser.add_argument("--json", type=Path, help="also write the numbers here")
    args = parser.parse_args(argv)
    variants = tuple(v.strip() for v in args.variants.split(",") if v.strip())
    unknown = [v for v in variants if v not in VARIANTS]
    if unknown:
        parser.error(f"unknown variants {unknown}; choose from {', '.join(VARIANTS)}")
    result = run(args.runs, variants)
    print()
    print(report(result))
    if args.json:
        args.json.write_text(json.dumps(result, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
