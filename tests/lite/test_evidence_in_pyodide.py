"""Pyodide's fcntl has no flock (seen on the built site: saving the evidence raised
AttributeError); the evidence is then saved with the lock-file fallback. Reproduced in CPython
with a fcntl module as Pyodide's: without flock."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

CODE = r'''
import sys, types, os
sys.modules["fcntl"] = types.ModuleType("fcntl")  # Pyodide's fcntl: no flock
from pytree_lab.exercises import Evidence, save_evidence
os.chdir(sys.argv[1])
saved = save_evidence("lesson-evidence.md", evidence=Evidence())
print("SAVED", saved.markdown.name, saved.json.name)
'''


def test_evidence_is_saved_where_fcntl_has_no_flock(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-c", CODE, str(tmp_path)], capture_output=True, text=True, cwd=ROOT, timeout=120
    )
    assert proc.stdout.strip() == "SAVED lesson-evidence.md lesson-evidence.json", proc.stdout + proc.stderr
    assert (tmp_path / "lesson-evidence.md").exists() and (tmp_path / "lesson-evidence.json").exists()
    assert not (tmp_path / ".pytree-lab-evidence.lock").exists()  # the fallback's lock file is gone after
