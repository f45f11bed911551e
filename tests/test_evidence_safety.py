"""Evidence is never lost: text no UTF-8 file can hold is written escaped, a failed save says so
in the widget and leaves no temporary file, and kernels saving the same file at once keep every
record (two real processes)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from pytree_lab import exercises
from pytree_lab.exercises import Evidence, EvidenceButton, PredictionPrompt, record_output, save_evidence

WIDGETS = Path(exercises.__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def _fresh_evidence():
    exercises.clear_evidence()
    yield
    exercises.clear_evidence()


def _files(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


LONE = {
    "a file name that was not UTF-8": os.fsdecode(b"data-\xff\xfe.csv"),  # surrogateescape: '\udcff\udcfe'
    "half an emoji": "my guess: \ud83d",
    "the other half": "\ude00 is next",
    "a surrogate in a key": {"w\udc80": [1.0, 2.0]},
}


@pytest.mark.parametrize("kind", list(LONE))
def test_a_lone_surrogate_is_written_escaped_and_later_saves_still_work(kind, tmp_path):
    record_output("before", "plain text, café ✓")
    value = LONE[kind]
    record_output(kind, value)
    saved = save_evidence(tmp_path / "ev.md")
    raw = saved.json.read_bytes()
    raw.decode("utf-8")  # valid UTF-8 on disk
    record = json.loads(raw)
    outputs = {o["label"]: o for o in record["outputs"]}
    assert outputs["before"]["text"] == "plain text, café ✓"  # other text stays readable, unescaped
    assert outputs[kind]["text"] == str(value)  # JSON reads the escape back as the same character
    md = saved.markdown.read_text(encoding="utf-8")
    assert "plain text, café ✓" in md and "\\ud" in md.lower()  # shown as its escape
    # the session goes on: a later save merges, nothing is lost
    record_output("after", 3.0)
    again = json.loads(save_evidence(tmp_path / "ev.md").json.read_text(encoding="utf-8"))
    assert [o["label"] for o in again["outputs"]] == ["before", kind, "after"]
    assert _files(tmp_path) == ["ev.json", "ev.md"]  # no temporary file left


def test_a_prediction_with_half_an_emoji_is_saved_from_the_widget(tmp_path):
    log = Evidence()
    prompt = PredictionPrompt("Which leaf moves most?", lambda: "weight[0]", evidence=log)
    prompt.prediction = "weight \ud83d"
    assert prompt.reveal() == "weight[0]"
    button = EvidenceButton(tmp_path / "ev.md", evidence=log)
    assert button.save() is not None
    assert button.announcement.startswith("Saved ev.md and ev.json")
    record = json.loads((tmp_path / "ev.json").read_text(encoding="utf-8"))
    assert record["predictions"][0]["prediction"] == "weight \ud83d"


def test_a_failed_save_says_so_in_the_widget_and_loses_nothing(tmp_path):
    log = Evidence()
    log.add_output("first", 1.0)
    assert EvidenceButton(tmp_path / "ev.md", evidence=log).save() is not None
    kept = (tmp_path / "ev.json").read_bytes()
    log.add_output("second", 2.0)
    (tmp_path / "course").write_text("a file where the folder should be")
    button = EvidenceButton(tmp_path / "course" / "ev.md", evidence=log)
    assert button.save() is None
    said = button.announcement
    assert said.startswith("Could not save your evidence: FileExistsError"), said
    assert "the 2 records stay in this session" in said and button.saved_path == ""
    assert (tmp_path / "ev.json").read_bytes() == kept  # the earlier file is whole
    assert _files(tmp_path) == ["course", "ev.json", "ev.md"]
    (tmp_path / "course").unlink()
    assert button.save() is not None  # once the folder can be made, both records are saved
    labels = [o["label"] for o in json.loads((tmp_path / "course" / "ev.json").read_text())["outputs"]]
    assert labels == ["first", "second"]


def test_a_write_that_fails_midway_leaves_no_temporary_file(tmp_path, monkeypatch):
    from pytree_lab.exercises import evidence

    log = Evidence()
    log.add_output("first", 1.0)
    log.save(tmp_path / "ev.md")
    before = (tmp_path / "ev.json").read_bytes()

    def full_disk(src, dst):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(evidence.os, "replace", full_disk)
    log.add_output("second", 2.0)
    button = EvidenceButton(tmp_path / "ev.md", evidence=log)
    assert button.save() is None
    assert "No space left on device" in button.announcement
    assert _files(tmp_path) == ["ev.json", "ev.md"]  # the temporary file was removed
    assert (tmp_path / "ev.json").read_bytes() == before


SAVER = textwrap.dedent("""
    import sys
    from pytree_lab.exercises import Evidence
    folder, who, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
    log = Evidence()
    print("ready", flush=True)
    sys.stdin.readline()  # both start saving together
    for i in range(count):
        log.add_output(f"{who}-{i}", i)
        log.save(folder + "/evidence.md")
    print("done", flush=True)
""")


def test_two_kernels_saving_the_same_file_at_once_keep_every_record(tmp_path):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(WIDGETS), os.environ.get("PYTHONPATH", "")]))
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", SAVER, str(tmp_path), who, "60"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        for who in ("a", "b")
    ]
    for proc in procs:
        assert proc.stdout.readline().strip() == "ready", proc.stderr.read()
    for proc in procs:
        proc.stdin.write("go\n")
        proc.stdin.flush()
    for proc in procs:
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0 and out.strip() == "done", err[-2000:]
    record = json.loads((tmp_path / "evidence.json").read_text(encoding="utf-8"))
    labels = sorted(o["label"] for o in record["outputs"])
    assert labels == sorted([f"a-{i}" for i in range(60)] + [f"b-{i}" for i in range(60)])
    assert len(record["sessions"]) == 2
    md = (tmp_path / "evidence.md").read_text(encoding="utf-8")
    assert md.count("\n### a-") == 60 and md.count("\n### b-") == 60
    assert _files(tmp_path) == ["evidence.json", "evidence.md"]  # no temporary or lock file left
