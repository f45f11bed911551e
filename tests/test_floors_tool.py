"""tools/floors.py (the floors job) never deletes a folder it did not make."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))

import floors  # noqa: E402 - the tool is a script in tools/, not a package


def test_an_existing_folder_it_did_not_make_is_refused_and_kept(tmp_path):
    mine = tmp_path / "my-venv"
    mine.mkdir()
    (mine / "notes.txt").write_text("my work")
    with pytest.raises(SystemExit, match="was not made by the floors job"):
        floors.main(["--venv", str(mine), "--python", sys.executable])
    assert (mine / "notes.txt").read_text() == "my work"


def test_a_symlink_to_a_venv_it_made_is_refused_and_its_target_kept(tmp_path):
    target = tmp_path / "made"
    target.mkdir()
    (target / floors.MARK).write_text("")
    link = tmp_path / "link"
    link.symlink_to(target)
    with pytest.raises(SystemExit, match="was not made by the floors job"):
        floors.main(["--venv", str(link), "--python", sys.executable])
    assert (target / floors.MARK).exists() and link.is_symlink()


def test_the_floors_are_read_from_pyproject():
    version, pins = floors.floors()
    assert version == "3.11"
    assert "jax==0.4.30" in pins and any(p.startswith("numpy==") for p in pins)


@pytest.mark.install
def test_the_floors_job_passes(tmp_path):
    """The floors job itself: the oldest versions pyproject.toml allows, on the oldest Python it
    allows, in a fresh venv; its kernel tests and the course notebooks pass there."""
    import subprocess

    env = {k: v for k, v in __import__("os").environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    proc = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "floors.py"), "--venv", str(tmp_path / "venv")],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=1500,
    )
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-6000:]
    version, pins = floors.floors()
    assert f"floors on Python {version}: " + ", ".join(pins) in out, out[-3000:]
    summary = proc.stdout.strip().splitlines()[-1]  # pytest's last line
    assert " passed" in summary and "failed" not in summary and "error" not in summary, summary
