"""The evidence log as Markdown: the file a student hands in (its JSON twin is what a later save
merges from), every answer and feedback escaped or fenced so that nothing in them changes the page."""

from __future__ import annotations

import datetime
import re

_MARK = "<!-- written by pytree-lab's evidence log: saving again merges into this file -->"


def _now() -> str:
    return datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")


def escape_markdown(text: str) -> str:
    """Student text as literal Markdown text: markup characters escaped, HTML as text."""
    text = str(text)
    text = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    text = re.sub(r"([\\`*_\[\]#!|~])", r"\\\1", text)
    # a line that would start a list or a heading still reads as text
    return re.sub(r"^(\s*)([-+>=]|\d+\.)", r"\1\\\2", text, flags=re.M)


def _cell(text: str) -> str:
    """One table cell: escaped, on one line."""
    return escape_markdown(" ".join(str(text).split())) or " "


def render_markdown(record: dict) -> str:
    out = [
        _MARK,
        "",
        "# Pytree lab: my evidence",
        "",
        f"Saved {record.get('saved', _now())}, {len(record.get('sessions', []))} session(s).",
        "",
    ]
    if record.get("jupyterhub_user"):
        out[-1:] = [f"JupyterHub user: {escape_markdown(str(record['jupyterhub_user']))}", ""]
    # summary first: every exercise, passed or not yet, and how many checks it took
    out += ["## Summary", "", "| Exercise | Status | Checks | Reference solution |", "|---|---|---|---|"]
    reveals = _grouped(record.get("reveals", []), "exercise_id")
    by_exercise = _grouped(record.get("checks", []), "exercise_id")
    titles = dict(record.get("expected", {}))
    for exercise_id, entries in [*by_exercise.items(), *reveals.items()]:
        titles.setdefault(exercise_id, entries[0].get("title", exercise_id))
    for exercise_id, title in titles.items():
        entries, shown = by_exercise.get(exercise_id, []), reveals.get(exercise_id, [])
        status = "passed" if any(e["passed"] for e in entries) else "not yet"
        times = ", ".join(_cell(e.get("time", "")) for e in shown)
        shown_text = f"shown {'once' if len(shown) == 1 else f'{len(shown)} times'}, {times}" if shown else "not shown"
        out.append(f"| {_cell(title)} (`{exercise_id}`) | {status} | {len(entries)} | {shown_text} |")
    if not titles:
        out.append("| (no exercises checked yet) | | | |")
    out.append("")
    out += ["## Predictions", ""]
    predictions = record.get("predictions", [])
    if not predictions:
        out += ["(none revealed yet)", ""]
    else:
        out += ["| Question | My prediction | Computed answer | My rating |", "|---|---|---|---|"]
        for entry in predictions:
            out.append(
                f"| {_cell(entry['prompt'])} | {_cell(entry['prediction'])} | "
                f"{_cell(entry['answer'])} | {_cell(entry.get('self_rating', ''))} |"
            )
        out.append("")
    out += ["## Checks", ""]
    if not record.get("checks"):
        out += ["(no checks yet)", ""]
    for entry in record.get("checks", []):
        verdict = "passed" if entry["passed"] else "not yet"
        out += [
            f"### {escape_markdown(entry['title'])} (`{entry['exercise_id']}`): {verdict}, score {entry['score']:.2f}",
            "",
            f"Checked {entry.get('time', '')}.",
            "",
        ]
        if entry.get("code"):
            out += ["My code:", "", _fence(entry["code"], "python"), ""]
        if entry.get("error"):
            out += ["The cell's last run raised:", "", _fence(entry["error"]), ""]
        out += ["Feedback:", "", _fence(entry["feedback"]), ""]
    out += ["## Check your understanding", ""]
    quiz = _scored_quiz(record.get("quiz", []))
    if not quiz:
        out += ["(not answered yet)", ""]
    else:
        out += [
            "The first answer to each question is its score; later answers are practice.",
            "",
            "| Question | First answer (score) | Practice |",
            "|---|---|---|",
        ]

        def said(entry):
            return f"{_cell(entry['choice'])} ({'correct' if entry['correct'] else 'not correct'})"

        for question, first, practice in quiz:
            out.append(
                f"| {_cell(question)} | {said(first) if first else '(none)'} | "
                f"{'; '.join(said(e) for e in practice) or 'none'} |"
            )
        out.append("")
        out += [f"- {_cell(question)} {_cell((first or later[0])['explanation'])}" for question, first, later in quiz]
        out.append("")
    out += ["## Key outputs", ""]
    if not record.get("outputs"):
        out += ["(none recorded yet)", ""]
    for entry in record.get("outputs", []):
        out += [f"### {escape_markdown(entry['label'])}", "", _fence(entry["text"]), ""]
    return "\n".join(out).rstrip() + "\n"


def _scored_quiz(entries: list[dict]) -> list[tuple[str, dict | None, list[dict]]]:
    """(question, first answer, practice answers) per question, in order of first appearance:
    the earliest answer not marked practice is the score, every other answer is practice."""
    grouped = _grouped(sorted(entries, key=lambda e: e.get("time", "")), "quiz_id")
    out = []
    for group in grouped.values():
        first = next((e for e in group if not e.get("practice")), None)
        out.append((group[0].get("question", ""), first, [e for e in group if e is not first]))
    return out


def _grouped(entries: list[dict], key: str) -> dict[str, list[dict]]:
    """Entries by `key` (a quiz answer without a quiz_id by its question), in order of first appearance."""
    groups: dict[str, list[dict]] = {}
    for entry in entries:
        groups.setdefault(entry.get(key) or entry.get("question", ""), []).append(entry)
    return groups


def _fence(text: str, language: str = "text") -> str:
    # a fence longer than any backtick run in the text keeps student text from closing it
    longest = max((len(run) for run in re.findall(r"`+", text or "")), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}{language}\n{text}\n{fence}"
