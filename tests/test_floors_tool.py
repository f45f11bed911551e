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
    assert version == "3.10"
    assert "jax==0.4.30" in pins and any(p.startswith("numpy==") for p in pins)
