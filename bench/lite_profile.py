"""Where a cold start of the built Lite site goes: page open -> kernel ready, step by step.

    python bench/lite_profile.py SITE [--runs 3] [--notebook 01_pytrees.ipynb]

Serves a copy of SITE (hard links; two files rewritten) whose kernel worker and Pyodide loader
mark each step with `performance.mark`, opens the notebook in Debian's Chromium with a fresh
profile per run and outside requests refused, and prints each step's median and its median share
of page open -> kernel ready, with the load average (README: "Where a cold start goes"). The
marks match jupyterlite-pyodide-kernel 0.8.6 and Pyodide 314.0.6; a step whose mark is missing
(another version) is left out.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from lite_build import browse  # noqa: E402
from lite_build.serve import SiteServer  # noqa: E402

WORKER_MARKS = [  # the worker's start as lite_build/build.py splits it (KERNEL_WORKER_START)
    ("this._options = this._options || e;", "performance.mark('init');this._options = this._options || e;"),
    ("await this.initRuntime(e);", "await this.initRuntime(e);performance.mark('runtime');"),
    ("await this.initPackageManager(e);", "await this.initPackageManager(e);performance.mark('package-manager');"),
    (
        "await this.initKernel({ ...e, mountDrive: false });",
        "await this.initKernel({ ...e, mountDrive: false });performance.mark('kernel');",
    ),
    (
        's.push("import pyodide_kernel")',
        """s.push("import js; js.performance.mark('installs')","import pyodide_kernel")""",
    ),
]
PYODIDE_MARKS = [
    ("i=await _e(t),", "i=(performance.mark('config'),await _e(t)),"),
    ("r=await Re(i,n);", "r=(performance.mark('asm'),await Re(i,n));performance.mark('instantiated');"),
    ("return await Oe(a,t)}", "return performance.mark('bootstrapped'),await Oe(a,t)}"),
]
STEPS = [  # (what, from mark, to mark); "worker" is the worker's start, "ready" the page's kernel ready
    ("page open -> the kernel's worker starts (the page starts it)", None, "worker"),
    ("worker script -> loadPyodide called", "worker", "init"),
    ("Pyodide's config, pyodide.asm.mjs import (a snapshot's download)", "init", "asm"),
    ("pyodide.asm.wasm fetched, compiled, instantiated", "asm", "instantiated"),
    ("interpreter bootstrap (or a snapshot's restore)", "instantiated", "bootstrapped"),
    ("preloaded packages (fetch, unpack); a snapshot's files", "bootstrapped", "runtime"),
    ("micropip installs piplite", "runtime", "package-manager"),
    ("piplite installs ipykernel, comm, pyodide-kernel", "package-manager", "installs"),
    ("import pyodide_kernel", "installs", "kernel"),
    ("JupyterLab's kernel takes the worker, /drive, globals -> the page shows it idle", "kernel", "ready"),
]
READY = """(name) => {
  const panel = '.jp-NotebookPanel:not(.lm-mod-hidden)';
  const kernel = document.querySelector(panel + ' .jp-Toolbar-kernelName');
  const status = document.querySelector(panel + ' .jp-Notebook-ExecutionIndicator');
  return kernel && kernel.textContent.trim() === name && status && status.dataset.status === 'idle'
    ? performance.now() : false;
}"""


def marked_copy(site: Path, dest: Path) -> Path:
    shutil.copytree(site, dest, copy_function=os.link)
    bundles = (dest / "extensions" / "@jupyterlite" / "pyodide-kernel-extension" / "static").glob("*.js")
    targets = [(p, WORKER_MARKS) for p in bundles]
    for path, marks in [(dest / "static" / "pyodide" / "pyodide.mjs", PYODIDE_MARKS), *targets]:
        text = path.read_text()
        if not any(old in text for old, _ in marks):
            continue
        for old, new in marks:
            text = text.replace(old, new, 1)
        path.unlink()  # a hard link: the site's own file stays as it was
        path.write_text(text)
    return dest


def one_start(browser, url: str, notebook: str) -> dict[str, float]:
    """Milliseconds from page open to each mark of one cold start."""
    context, net = browse.offline_context(browser)
    workers = []
    page = context.new_page()
    page.on("worker", lambda worker: workers.append(worker))
    try:
        browse.open_notebook(page, url, notebook, net)
        ready = page.wait_for_function(READY, arg=browse.LITE_KERNEL_NAME, timeout=180000, polling=50).json_value()
        origin = page.evaluate("performance.timeOrigin")
        times = {"ready": ready}
        for worker in workers:
            info = worker.evaluate(
                "() => ({origin: performance.timeOrigin, marks: performance.getEntriesByType('mark')"
                ".map(m => [m.name, m.startTime])})"
            )
            if any(name == "init" for name, _ in info["marks"]):
                times["worker"] = info["origin"] - origin
                times.update({name: t + info["origin"] - origin for name, t in info["marks"]})
        return times
    finally:
        context.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("site", type=Path)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--notebook", default="01_pytrees.ipynb")
    args = parser.parse_args(argv)
    from playwright.sync_api import sync_playwright

    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="lite-profile-", dir=args.site.resolve().parent) as tmp:
        copy = marked_copy(args.site, Path(tmp) / "site")
        with SiteServer(copy) as server, sync_playwright() as pw:
            browser = browse.launch(pw)
            try:
                runs = [one_start(browser, server.url, args.notebook) for _ in range(args.runs)]
            finally:
                browser.close()
    print(f"{args.runs} cold starts of {args.notebook}; load average {load_before[0]:.1f} -> {os.getloadavg()[0]:.1f}")
    print(f"page open -> kernel ready: median {statistics.median(r['ready'] for r in runs) / 1000:.2f} s")
    for what, start, end in STEPS:
        if not all((start is None or start in r) and end in r for r in runs):
            continue
        spans = [(r[end] - (r[start] if start else 0.0)) for r in runs]
        share = statistics.median(s / r["ready"] for s, r in zip(spans, runs))
        print(f"  {statistics.median(spans) / 1000:6.2f} s {share:6.1%}  {what}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
