"""The GitHub Pages recipe (lite_build/pages.yml) builds with the documented make target and
deploys the folder the build writes; the Makefile passes LITE_FLAGS to the build."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]


def test_pages_workflow_builds_with_make_and_deploys_the_output_folder():
    flow = yaml.safe_load((ROOT / "lite_build" / "pages.yml").read_text())
    assert flow["permissions"] == {"contents": "read", "pages": "write", "id-token": "write"}
    build = flow["jobs"]["build"]["steps"]
    runs = [step["run"] for step in build if "run" in step]
    assert runs == ['make lite-build LITE_FLAGS="${{ vars.LITE_FLAGS }}"']
    uses = [step["uses"].split("@")[0] for step in build if "uses" in step]
    assert uses == ["actions/checkout", "actions/setup-python", "actions/setup-node", "actions/upload-pages-artifact"]
    upload = next(step for step in build if step.get("uses", "").startswith("actions/upload-pages-artifact"))
    assert upload["with"]["path"] == "lite_build/_output"
    deploy = flow["jobs"]["deploy"]
    assert deploy["needs"] == "build" and deploy["steps"][0]["uses"].startswith("actions/deploy-pages@")


def test_make_passes_lite_flags_to_the_build():
    # make test runs pytest, so MAKELEVEL/MAKEFLAGS are set here: without them (and without
    # the directory lines a sub-make prints) the dry run shows the one command
    env = {k: v for k, v in os.environ.items() if k not in ("MAKELEVEL", "MAKEFLAGS", "MFLAGS")}
    out = subprocess.run(
        [
            "make",
            "--no-print-directory",
            "-n",
            "-o",
            ".venv/.installed",
            "lite-build",
            "LITE_FLAGS=--include-compiled --lean",
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert out.strip().splitlines()[-1] == ".venv/bin/python lite_build/build.py --include-compiled --lean"
