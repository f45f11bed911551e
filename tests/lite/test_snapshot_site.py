"""The start snapshot (`build.py --snapshot`) in Debian's Chromium: the kernel starts from the
interpreter memory made at build time (no wheel is fetched or installed, by the kernel's start or
by the setup cell), and the probe notebook runs as on the regular site: the setup cell, an inline
anywidget click, a pytree diagram whose leaf click reaches Python, a student's endless loop stopped."""

from __future__ import annotations

import json

import pytest

from lite_build.serve import SiteServer

from .conftest import BOOT, BUDGET, COUNTER_READ, DIAGRAM_READ, SETUP, build_probe_site, drive_probe

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def snapshot_run(tmp_path_factory, pw):
    site = build_probe_site(tmp_path_factory, "--snapshot", "--no-stored-outputs")  # first paint: test_lite_offline
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
