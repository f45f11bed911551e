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


AUTOSAVE = r'''
import sys, types, os, json
sys.modules["fcntl"] = types.ModuleType("fcntl")  # Pyodide's fcntl: no flock
from pytree_lab.exercises import Evidence
os.chdir(sys.argv[1])
log = Evidence(autosave="lesson-evidence.md")  # what keep_evidence(path) sets
log.add_output("kernel " + sys.argv[2], {"loss": 4.0})
after_one = json.load(open("lesson-evidence.json"))["outputs"]
log.add_output("kernel " + sys.argv[2], {"loss": 0.64})  # re-recorded: replaces its copy
print("AUTOSAVED", len(after_one), json.dumps([o["label"] for o in json.load(open("lesson-evidence.json"))["outputs"]]))
print("ERROR", repr(log.autosave_error))
'''


def test_each_record_is_merged_as_it_happens_where_fcntl_has_no_flock(tmp_path):
    """The Lite site's kernel (Pyodide: no flock) keeps the evidence file in the browser's storage,
    in the folder it runs in: each record is merged there as it happens, with the lock-file
    fallback, and a second kernel (a restart) adds to what the first wrote."""
    said = []
    for kernel in ("1", "2"):
        proc = subprocess.run(
            [sys.executable, "-c", AUTOSAVE, str(tmp_path), kernel],
            capture_output=True,
            text=True,
            cwd=ROOT,
            timeout=120,
        )
        said.append(proc.stdout.split("\n")[:2])
    assert said[0] == ["AUTOSAVED 1 [\"kernel 1\"]", "ERROR ''"], said
    assert said[1] == ["AUTOSAVED 2 [\"kernel 1\", \"kernel 2\"]", "ERROR ''"], said
    record = __import__("json").loads((tmp_path / "lesson-evidence.json").read_text())
    assert [o["value"] for o in record["outputs"]] == [{"loss": 0.64}, {"loss": 0.64}]
    assert len(record["sessions"]) == 2
    assert not (tmp_path / ".pytree-lab-evidence.lock").exists()
