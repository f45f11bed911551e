"""`make bench` keeps working: its in-process sections run (quick) and report what they compare
as equal, and a big-tree explorer run in its own process steps. Nothing here is timed: the
numbers the bench measures are its own business; these tests check its code reads the library
through public names (it broke once when the explorer was split: `ex._step`)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _bench(*args: str, timeout: float = 900) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=ROOT,
        env={**os.environ, "JAX_PLATFORMS": "cpu"},
    )


def test_the_bench_in_process_sections_run_and_agree(tmp_path):
    out = tmp_path / "bench.json"
    done = _bench("bench", "--quick", "--only", "compute,textform,lecture,training", "--json", str(out))
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    r = json.loads(out.read_text())
    compute = r["compute"]
    assert compute["agree"] is True and compute["retraced_on_new_values"] is False
    assert compute["explorer_update"]["traces"] == 1  # a slider move never retraces the step
    assert compute["explorer_update"]["n"] > 0
    assert r["text_form"]["leaves"] == 100_000 and r["text_form"]["same_paths"]["chars"] > 0
    assert [run["ok"] for run in r["lecture"]["runs"]] == [True] * len(r["lecture"]["runs"])
    assert all(case["agree"] for case in r["training"].values())  # the same numbers as optax by hand
    first = r["explorer_first_steps"]  # an explorer's first steps: nothing compiles again after the first Step
    assert len(first) == 2 and all(v["compiles_after_first_step"] == 0 for v in first.values())
    assert all(v["steps_ok"] and v["ms"]["Reset + Step"]["n"] > 0 for v in first.values())


def test_a_big_tree_explorer_run_by_the_bench_steps(tmp_path):
    done = _bench("bench.explorer_big", "--one", "400", "now", "2", timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    line = next(ln for ln in reversed(done.stdout.splitlines()) if ln.startswith("{"))
    r = json.loads(line)
    assert r["leaves"] == 400 and r["ok"] is True and r["steps_ok"] is True
    assert r["step_s"]["n"] == 2
