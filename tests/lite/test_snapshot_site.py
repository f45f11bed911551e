"""The start snapshot (`build.py --snapshot`) in Debian's Chromium: the kernel starts from the
interpreter memory made at build time (no wheel is fetched or installed, by the kernel's start or
by the setup cell), and the probe notebook runs as on the regular site: the setup cell, an inline
anywidget click, a pytree diagram whose leaf click reaches Python, a student's endless loop stopped.
On a slow link the page leaves the snapshot out: the kernel boots as on a site without one."""

from __future__ import annotations

import json

import pytest

from lite_build import browse
from lite_build.serve import SiteServer

from .conftest import BOOT, BUDGET, COUNTER_READ, DIAGRAM_READ, PROBE_NOTEBOOK, SETUP, build_probe_site, drive_probe

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def snapshot_run(tmp_path_factory, pw):
    site = build_probe_site(tmp_path_factory, "--snapshot")  # as published: the page starts the kernel
    with SiteServer(site) as server:
        yield site, drive_probe(pw, server, "lite-snapshot-failure.png")


def test_the_kernel_starts_from_the_snapshot_and_runs_the_probe_notebook(snapshot_run):
    site, run = snapshot_run
    run.check()
    paths = run.net.local_paths()
    assert "/static/pyodide/kernel.snap.gz" in paths and "/static/pyodide/kernel.snap.files.gz" in paths, paths
    fetched = [u.split("?")[0].rsplit("/", 1)[-1] for u in run.net.gets if ".whl" in u]
    # the interpreter, the kernel and the setup cell's packages came from the snapshot: no wheel is
    # fetched at start nor by the setup cell (it finds them installed), but numpy from Pyodide's CDN
    assert [w for w in fetched if not w.startswith("numpy-")] == [], fetched
    manifest = json.loads((site / "pytree-lab-site.json").read_text())
    assert manifest["snapshot"]["python"] == "3.14.2" and manifest["snapshot"]["files"] > 1000, manifest["snapshot"]

    assert run.outputs[SETUP].startswith("numpy and pandas are loading in the background"), run.outputs[SETUP]
    boot = run.probes(BOOT)
    assert (boot["platform"], boot["pyodide"], boot["ipython-pyc-flags"]) == ("emscripten", "314.0.6", "1"), boot
    assert run.counter_text == "clicked 1" and run.probes(COUNTER_READ)["count"] == "1"
    assert run.probes(DIAGRAM_READ)["selected"] == "['bias']"
    assert run.probes(BUDGET)["budget-stopped"] == "True True True" and not run.errors[BUDGET], run.outputs[BUDGET]


def test_on_a_slow_link_the_kernel_boots_without_the_snapshot(snapshot_run, pw, tmp_path):
    """At 20 Mbit/s (the page's files come slower than its 30) the snapshot's 23 MB would cost more
    than the imports it saves: the kernel loads the wheels a site without a snapshot loads, and runs;
    on the second visit too, whose files come from the cache (the page keeps the link it saw)."""
    site, _ = snapshot_run
    with SiteServer(site) as server:
        server.limit(20)
        context, net = browse.cached_profile(pw, tmp_path / "profile")
        try:
            page = context.pages[0] if context.pages else context.new_page()
            browse.open_notebook(page, server.url, PROBE_NOTEBOOK, net)
            browse.wait_kernel_ready(page, timeout=300)
            late = page.evaluate("performance.getEntriesByName('ptl-kernel-late').length")
            said = browse.run_cell(page, SETUP)
            first = list(net.gets)
            net.gets.clear()
            page.reload()
            browse.show_notebook(page, PROBE_NOTEBOOK)
            browse.wait_kernel_ready(page, timeout=300)
            again = page.evaluate("document.documentElement.dataset.ptlKernel")  # (for the message)
        finally:
            context.close()
    fetched = [u.split("?")[0].rsplit("/", 1)[-1] for u in first]  # (the page's check asks for HEADs of all)
    assert late == 1 and not [f for f in fetched if f.startswith("kernel.snap")], fetched
    assert [f for f in fetched if f.startswith("ipython-")], fetched  # preloaded, as without a snapshot
    assert said.startswith("numpy and pandas are loading in the background"), said
    # the second visit (its files from the cache, nothing tells the link): still without the snapshot
    assert not [u for u in net.gets if "kernel.snap" in u], (again, net.gets)
    assert [u for u in net.gets if "/ipython-" in u], net.gets
