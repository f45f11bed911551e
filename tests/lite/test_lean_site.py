"""The lean site (`build.py --lean`, bytecode without sources) in Debian's Chromium: the probe
notebook's setup cell, an inline anywidget click, and a pytree diagram whose leaf click reaches
Python, with IPython imported from bytecode that has no source beside it."""

from __future__ import annotations

import pytest

from lite_build.serve import SiteServer

from .conftest import BOOT, COUNTER_READ, DIAGRAM_READ, SETUP, build_probe_site, drive_probe

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def lean_run(tmp_path_factory, pw):
    site = build_probe_site(tmp_path_factory, "--lean", "--no-stored-outputs")  # first paint: test_lite_offline
    with SiteServer(site) as server:
        yield site, drive_probe(pw, server, "lite-lean-failure.png")


def test_lean_site_runs_the_probe_notebook(lean_run):
    site, run = lean_run
    run.check()
    assert run.outputs[SETUP].startswith("numpy and pandas are loading in the background"), run.outputs[SETUP]
    boot = run.probes(BOOT)
    assert boot["platform"] == "emscripten"
    # IPython came from bytecode alone: its module file is the .pyc, no source beside it
    assert boot["ipython-file"].endswith("site-packages/IPython/core/interactiveshell.pyc"), boot
    assert run.counter_text == "clicked 1" and run.probes(COUNTER_READ)["count"] == "1"
    assert run.probes(DIAGRAM_READ)["selected"] == "['bias']"
    # and the site carries no source that its bytecode replaces
    with_source = list((site / "pypi").glob("pytree_lab-*.whl"))
    assert with_source, "the project wheel is in the site"
    import zipfile

    names = zipfile.ZipFile(with_source[0]).namelist()
    assert "pytree_lab/diagram.pyc" in names and "pytree_lab/diagram.py" not in names
