"""JupyterLite site numbers: size, page open -> kernel ready, page open -> first diagram.

    python bench/lite_bench.py [--runs 3] [--json FILE]

Builds the site from the checkout (plus one small notebook: the setup cell, then a
`PytreeDiagram` of the lesson's params), serves it on 127.0.0.1 and opens it in Debian's
Chromium with a fresh profile each run (a student's first visit: nothing cached). Outside
requests are refused, as in the browser test, so the setup cell's numpy/pandas download
from Pyodide's CDN fails fast here; online, that download comes on top of the setup time.
Times are medians over the runs; each run is listed too.
"""

from __future__ import annotations

import argparse
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


def loaded_bytes(site: Path, net: browse.NetLog) -> int:
    """Bytes of the site's files the page fetched (each file once)."""
    total = 0
    for path in set(net.local_paths()):
        f = site / path.lstrip("/")
        if f.is_file():
            total += f.stat().st_size
    return total


def one_run(browser, site: Path, url: str) -> dict:
    context, net = browse.offline_context(browser)
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
        return {
            "kernel_ready_s": round(kernel_ready, 2),
            "setup_cell_done_s": round(setup_done, 2),
            "first_diagram_s": round(diagram, 2),
            "bytes_to_kernel_ready": kernel_bytes,
            "bytes_to_first_diagram": loaded_bytes(site, net),
            "refused": sorted(set(net.refused)),
        }
    finally:
        context.close()


def run(runs: int = 3) -> dict:
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory(prefix="pytree-lab-lite-bench-") as tmp:
        tmp = Path(tmp)
        started = time.monotonic()
        manifest = build_site(tmp / "site", [write_notebook(tmp)])
        build_s = time.monotonic() - started
        site = tmp / "site"
        bench_nb = (site / "files" / NOTEBOOK).stat().st_size
        results = []
        with SiteServer(site) as server, sync_playwright() as pw:
            browser = browse.launch(pw)
            try:
                for _ in range(runs):
                    results.append(one_run(browser, site, server.url))
            finally:
                browser.close()

    load = os.getloadavg()[0]

    def median(key):
        return statistics.median(r[key] for r in results)

    return {
        "build_s": round(build_s, 1),
        "load_average_1min": round(load, 2),  # other work on the 2 cores slows every number
        # the site as `make lite-build` makes it (the bench notebook is not part of it)
        "site_bytes": manifest["total_bytes"] - bench_nb,
        "site_files": manifest["total_files"] - 1,
        "pyodide_core_bytes": sum(e["bytes"] for e in manifest["pyodide_core"]),
        "wheel_bytes": sum(e["bytes"] for e in manifest["lock_wheels"] + manifest["index_wheels"]),
        "runs": results,
        "median_kernel_ready_s": median("kernel_ready_s"),
        "median_setup_cell_done_s": median("setup_cell_done_s"),
        "median_first_diagram_s": median("first_diagram_s"),
        "median_bytes_to_first_diagram": median("bytes_to_first_diagram"),
    }


def report(r: dict) -> str:
    mb = lambda n: f"{n / 1e6:.1f} MB"  # noqa: E731
    lines = [
        "JupyterLite site (Debian Chromium, fresh profile per run, served on 127.0.0.1, outside requests refused)",
        f"  site size                      {mb(r['site_bytes'])} in {r['site_files']} files "
        f"(Pyodide core {mb(r['pyodide_core_bytes'])}, wheels {mb(r['wheel_bytes'])})",
        f"  build                          {r['build_s']:.1f} s",
        f"  machine load (1 min average)   {r['load_average_1min']:.1f} on {os.cpu_count()} cores",
        f"  page open -> kernel ready      {r['median_kernel_ready_s']:.1f} s (median of {len(r['runs'])})",
        f"  page open -> setup cell done   {r['median_setup_cell_done_s']:.1f} s",
        f"  page open -> first diagram     {r['median_first_diagram_s']:.1f} s",
        f"  loaded until first diagram     {mb(r['median_bytes_to_first_diagram'])}",
        "  runs (kernel / setup / diagram, s): "
        + "; ".join(f"{x['kernel_ready_s']} / {x['setup_cell_done_s']} / {x['first_diagram_s']}" for x in r["runs"]),
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--json", type=Path, help="also write the numbers here")
    args = parser.parse_args(argv)
    result = run(args.runs)
    print()
    print(report(result))
    if args.json:
        args.json.write_text(json.dumps(result, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
