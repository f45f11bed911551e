"""The in-notebook checks say they are practice; evidence records carry the JupyterHub user."""

from __future__ import annotations

import json

from pytree_lab.course import PRACTICE, check, check_cell
from pytree_lab.exercises import Evidence


def test_evidence_carries_the_jupyterhub_user_when_there_is_one(monkeypatch, tmp_path):
    monkeypatch.setenv("JUPYTERHUB_USER", "ada<b>")
    ev = Evidence()
    check("squared_norm", 96.0, manual=96.0, evidence=ev)
    record = ev.to_json()
    assert record["jupyterhub_user"] == "ada<b>"
    assert [c["jupyterhub_user"] for c in record["checks"]] == ["ada<b>"]
    saved = ev.save(tmp_path / "evidence.md")
    assert json.loads(saved.json.read_text())["jupyterhub_user"] == "ada<b>"
    text = saved.markdown.read_text()
    assert "JupyterHub user: ada\\<b\\>" in text or "JupyterHub user: ada&lt;b&gt;" in text
    assert "<b>" not in text


def test_no_user_field_outside_a_jupyterhub(monkeypatch):
    monkeypatch.delenv("JUPYTERHUB_USER", raising=False)
    ev = Evidence()
    check("squared_norm", 96.0, manual=96.0, evidence=ev)
    record = ev.to_json()
    assert "jupyterhub_user" not in record and "jupyterhub_user" not in record["checks"][0]


def test_check_cell_says_it_is_practice(capsys):
    card = check_cell("squared_norm", evidence=Evidence())  # outside a notebook: no answer to read yet
    out = capsys.readouterr().out.splitlines()
    assert out == [PRACTICE] == ["Practice check: feedback for you while you work; it does not count toward a grade."]
    # the verdict is on the card only (printed above it, it went stale after the next click)
    assert card.text().splitlines()[2].startswith("Check 1: not yet, score 0.00")
