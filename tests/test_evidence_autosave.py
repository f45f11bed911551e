"""Every check is in the evidence file without a click: a log with an autosave file merges each
check, prediction, quiz answer and key output into it as it happens (a new log, as after a kernel
restart, adds to it); a check whose exercise cell raised is recorded with its error; a key output
recorded again replaces its earlier copy, in the file too. Oracles: the lesson's hand derivations
(norm 96; the update [1.4, -0.8] and 0.2)."""

from __future__ import annotations

import json

import jax
import jax.numpy as jnp
import pytest

from pytree_lab import course
from pytree_lab.course import catalogue
from pytree_lab.exercises import Evidence, EvidenceButton, cells

PARAMS = {"weight": jnp.array([1.0, -1.0]), "bias": jnp.array(0.0)}
X = jnp.array([2.0, 1.0])


def loss(p):
    return (jnp.dot(p["weight"], X) + p["bias"] - 3.0) ** 2


GRADS = jax.grad(loss)(PARAMS)
NS = {"jax": jax, "jnp": jnp, "params": PARAMS, "x": X, "loss": loss, "grads": GRADS}
NORM_CODE = (
    "norm_squared = sum(jnp.sum(g ** 2) for g in jax.tree.leaves(grads))\n"
    "manual = jnp.sum(grads['weight'] ** 2) + grads['bias'] ** 2"
)


@pytest.fixture(autouse=True)
def _fresh_runs():
    cells.forget()
    yield
    cells.forget()


def _record(path):
    return json.loads(path.with_suffix(".json").read_text(encoding="utf-8"))


def test_each_record_is_in_the_file_as_it_happens_and_a_restart_adds_to_it(tmp_path):
    path = tmp_path / "lesson.md"
    first = Evidence(autosave=path)
    catalogue.check("squared_norm", 96.0, manual=96.0, evidence=first)
    assert [c["exercise_id"] for c in _record(path)["checks"]] == ["squared_norm"]
    prompt = course.lesson_prediction("gradient_leaves", evidence=first)
    prompt.prediction = "[-8, -4] and -4"
    prompt.reveal()
    assert len(_record(path)["predictions"]) == 1
    prompt.self_rating = "right"
    assert _record(path)["predictions"][0]["self_rating"] == "right"
    quiz = course.grad_structure_quiz(evidence=first)
    quiz.selected = 1
    assert quiz.submit() is True
    assert [q["correct"] for q in _record(path)["quiz"]] == [True]

    after_restart = Evidence(autosave=path)  # the first log's kernel is gone; nothing was saved by hand
    catalogue.check("repair_update", {"weight": jnp.array([1.4, -0.8]), "bias": jnp.array(0.2)}, evidence=after_restart)
    record = _record(path)
    assert [(c["exercise_id"], c["passed"]) for c in record["checks"]] == [
        ("squared_norm", True),
        ("repair_update", True),
    ]
    assert record["sessions"] == [first.session, after_restart.session]
    text = path.read_text(encoding="utf-8")  # the readable page follows too
    assert "Make it yours (`squared_norm`): passed" in text and "(`repair_update`): passed" in text
    # "Save my evidence" still writes both, and counts both sessions
    button = EvidenceButton(path, evidence=after_restart)
    button.save()
    assert button.announcement == (
        f"Saved lesson.md and lesson.json in {tmp_path}: the file now holds "
        "1 prediction, 2 checks, 1 quiz answer, 0 key outputs, from 2 sessions."
    )


def test_a_check_whose_cell_raised_is_recorded_with_its_error(tmp_path):
    path = tmp_path / "lesson.md"
    log = Evidence(autosave=path)
    ns = dict(NS)
    cells.run_exercise_cell("squared_norm", NORM_CODE, ns)
    cells.run_exercise_cell("squared_norm", NORM_CODE + "\nraise ValueError('my typo')", ns)
    card = course.check_button(
        "squared_norm", lambda: {"norm_squared": ns["norm_squared"], "manual": ns["manual"]}, evidence=log
    )
    result = card.check()
    assert not result.passed
    (entry,) = _record(path)["checks"]
    assert entry["exercise_id"] == "squared_norm" and entry["passed"] is False
    assert entry["error"] == "ValueError: my typo"
    assert entry["answer"] is None  # the value left by an earlier run is not this check's answer
    assert "The cell's last run raised:\n\n```text\nValueError: my typo\n```" in path.read_text(encoding="utf-8")


def test_a_key_output_recorded_again_replaces_its_earlier_copy_in_every_session(tmp_path):
    path = tmp_path / "lesson.md"
    first = Evidence(autosave=path)
    first.add_output("the loss", 4.0)
    first.add_output("the loss", 3.0)
    first.add_output("the update", [1.4, -0.8])
    assert [(o["label"], o["value"]) for o in first.outputs] == [("the loss", 3.0), ("the update", [1.4, -0.8])]
    assert [(o["label"], o["value"]) for o in _record(path)["outputs"]] == [
        ("the loss", 3.0),
        ("the update", [1.4, -0.8]),
    ]
    later = Evidence(autosave=path)
    later.add_output("the loss", 2.5)
    assert [(o["label"], o["value"]) for o in _record(path)["outputs"]] == [
        ("the update", [1.4, -0.8]),
        ("the loss", 2.5),
    ]
    assert path.read_text(encoding="utf-8").count("### the loss") == 1


def test_a_file_it_did_not_write_is_kept_and_the_records_go_on_in_one_dated_file(tmp_path):
    path = tmp_path / "lesson.md"
    path.write_text("my own notes\n", encoding="utf-8")
    log = Evidence(autosave=path)
    log.add_output("a", 1.0)
    log.add_output("b", 2.0)
    assert path.read_text(encoding="utf-8") == "my own notes\n"
    dated = sorted(p.name for p in tmp_path.glob("lesson-*.md"))
    assert len(dated) == 1, dated
    assert [o["label"] for o in _record(tmp_path / dated[0])["outputs"]] == ["a", "b"]


def test_a_failed_automatic_save_keeps_the_record_and_says_why(tmp_path):
    folder = tmp_path / "a-file-not-a-folder"
    folder.write_text("", encoding="utf-8")
    log = Evidence(autosave=folder / "lesson.md")
    log.add_output("the loss", 4.0)
    assert len(log.outputs) == 1
    assert log.autosave_error.startswith("FileExistsError")


def test_the_rerun_probe_of_a_value_answer_leaves_nothing_in_the_file(tmp_path):
    """The check runs the exercise cell again at other parameters; what that rerun records is not
    the student's work and reaches neither the log nor the file."""
    from pytree_lab.exercises import evidence as evidence_module

    log = evidence_module.default_evidence()
    kept = log.autosave
    log.clear()
    log.autosave = tmp_path / "lesson.md"
    try:
        ns = {**NS, "record_output": course.record_output}
        cells.run_exercise_cell("squared_norm", NORM_CODE + "\nrecord_output('my norm', float(norm_squared))", ns)
        answer = {"norm_squared": ns["norm_squared"], "manual": ns["manual"]}
        result = catalogue.check("squared_norm", answer, cell=cells.last_run("squared_norm"))
        assert result.passed, result.feedback
        record = _record(tmp_path / "lesson.md")
        assert [(o["label"], o["value"]) for o in record["outputs"]] == [("my norm", 96.0)]
        assert [(o["label"], o["value"]) for o in log.outputs] == [("my norm", 96.0)]
        assert [c["exercise_id"] for c in record["checks"]] == ["squared_norm"]
    finally:
        log.autosave = kept
        log.clear()
