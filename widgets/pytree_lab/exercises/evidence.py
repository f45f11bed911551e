"""The evidence log: what a student keeps from the lesson, saved as Markdown and JSON.

The Markdown page is written by `_evidence_markdown`; this module keeps the log, its JSON and the
saving (merged with what is on disk, under a folder lock)."""

from __future__ import annotations

import contextlib
import datetime
import inspect
import itertools
import json
import math
import os
import pathlib
import textwrap
import time
import uuid
from typing import Any, NamedTuple

from ._evidence_markdown import _MARK, _now, _scored_quiz, render_markdown
from ._grading import _as_number_array, answer_names, tree_problem
from ._guard import exception_text, run_guarded

RECORD_BUDGET = 2.0  # s of the student's own code (an answer's __array__, a .text()) while recording


def _plain(value, depth: int = 0):
    """A JSON-ready copy of an answer or output: arrays become lists, trees nested dicts."""
    if depth > 8:
        return str(value)
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if isinstance(value, dict):
        return {str(k): _plain(v, depth + 1) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v, depth + 1) for v in value]
    if callable(value):
        return _source_of(value)
    arr = _as_number_array(value)
    if arr is not None:
        if arr.size > 1000:
            return f"<array of shape {tuple(arr.shape)}>"
        return _plain(arr.tolist(), depth + 1)
    return str(value)


def _source_of(fn) -> str:
    """A function answer as its source code (an exercise cell registers its code for this), or
    its name when Python has no source for it; never its memory address."""
    try:
        return textwrap.dedent(inspect.getsource(fn)).rstrip("\n")
    except (OSError, TypeError):
        name = getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None) or type(fn).__name__
        return f"{name} (a function whose source code Python does not have)"


def _recorded(fn, value, name: str = "the value"):
    """`fn(value)` for the record, run as student code: an answer's own methods (its __array__, a
    .text()) may loop, exit or patch jax while they are read, as they may while graded. A tree
    that contains itself or nests too deeply is recorded as the sentence that refuses it."""
    looked = run_guarded(tree_problem, value, name, budget=RECORD_BUDGET)
    if looked.ok and looked.value:
        return f"<not recorded: {looked.value}>"
    run = run_guarded(fn, value, budget=RECORD_BUDGET)
    if run.timed_out:
        return f"<not recorded: reading it ran past {RECORD_BUDGET:g} s>"
    if run.error is not None:
        return f"<not recorded: {exception_text(run.error)}>"
    return run.value


def _answer_name(exercise, answer) -> str:
    """The notebook name the answer is held under (`g`), as the check's feedback names it."""
    names = answer_names(getattr(exercise, "answer_name", ""))
    if len(names) > 1 and isinstance(answer, dict) and set(answer) <= set(names):
        return "your answers"
    return names[0] if names else "the answer"


def _text_of(value) -> str:
    if hasattr(value, "text") and callable(value.text):
        return value.text()
    if callable(value) and not isinstance(value, type):
        return _source_of(value)
    return str(value)


class SavedEvidence(NamedTuple):
    markdown: pathlib.Path
    json: pathlib.Path

    def counts(self) -> dict[str, int]:
        """What the saved file holds, every session merged into it (not only this kernel's)."""
        record = json.loads(self.json.read_text(encoding="utf-8"))
        quiz = _scored_quiz(record.get("quiz", []))
        return {
            "predictions": len(record.get("predictions", [])),
            "checks": len(record.get("checks", [])),
            "quiz answers": sum(1 for _, first, _ in quiz if first is not None),
            "practice answers": sum(len(practice) for _, _, practice in quiz),
            "key outputs": len(record.get("outputs", [])),
            "reference solutions shown": len(record.get("reveals", [])),
            "sessions": len(record.get("sessions", [])),
        }

    def summary(self) -> str:
        """One sentence for the save message: the file's names and everything in it."""
        c = self.counts()

        def n(plural: str, one: str) -> str:
            return f"{c[plural]} {one if c[plural] == 1 else plural}"

        parts = [n("predictions", "prediction"), n("checks", "check"), n("quiz answers", "quiz answer")]
        if c["practice answers"]:
            parts[-1] += f" (and {c['practice answers']} practice)"
        parts.append(n("key outputs", "key output"))
        if c["reference solutions shown"]:
            parts.append(n("reference solutions shown", "reference solution shown"))
        where = f"Saved {self.markdown.name} and {self.json.name} in {self.markdown.parent}"
        return f"{where}: the file now holds {', '.join(parts)}, from {n('sessions', 'session')}."


FORMAT = "pytree-lab-evidence/1"
KINDS = ("predictions", "checks", "quiz", "outputs", "reveals")


def _hub_user() -> dict[str, str]:
    """The JupyterHub user this kernel's server belongs to, as a record's field (none outside a JupyterHub)."""
    user = os.environ.get("JUPYTERHUB_USER", "").strip()
    return {"jupyterhub_user": user} if user else {}


class Evidence:
    """The student's record for "Keep your evidence": predictions beside the computed answers,
    checks (with the code that was checked), quiz answers and key outputs.

    Saving never destroys: the Markdown and JSON files carry a mark; saving to files this log
    wrote merges the records of every session into them, and a path it did not write is left
    alone (the evidence goes to a new, dated file beside it). Kernels saving into the same folder
    at once take turns (a lock on the folder), so every record of each is kept; text with a lone
    surrogate is written escaped.
    """

    def __init__(self, autosave: str | pathlib.Path | None = None) -> None:
        # where each record is merged as it happens (None: only at an explicit save)
        self.autosave = autosave
        self.autosave_error = ""  # why the last automatic save failed ("" when it worked)
        self._targets: dict[pathlib.Path, pathlib.Path] = {}  # path asked for -> file written
        self.session = uuid.uuid4().hex[:12]
        self.predictions: list[dict] = []
        self.checks: list[dict] = []
        self.quiz: list[dict] = []
        self.outputs: list[dict] = []
        self.reveals: list[dict] = []  # reference solutions shown, one entry per reveal
        self.expected: dict[str, str] = {}  # exercise id -> title, for the summary

    def __len__(self) -> int:
        return sum(len(getattr(self, kind)) for kind in KINDS)

    def clear(self) -> None:
        for kind in KINDS:
            getattr(self, kind).clear()

    def _kept(self) -> None:
        """A record was added: merge it into the autosave file now, so a kernel restart loses
        nothing. A failed write is remembered (`autosave_error`) and never fails the check."""
        if self.autosave is None:
            return
        try:
            self.save(self.autosave)
            self.autosave_error = ""
        except Exception as exc:  # noqa: BLE001 - a full disk, a read-only folder: the record stays here
            self.autosave_error = exception_text(exc)

    def _add(self, entries: list[dict], **entry: Any) -> None:
        """Record one entry (stamped with its time, session, user and id) and keep it."""
        entries.append(entry | {"time": _now(), "session": self.session, **_hub_user(), "id": uuid.uuid4().hex})
        self._kept()

    def expect(self, exercises) -> None:
        """List these exercises in the summary even before they are tried ((id, title) pairs)."""
        for exercise_id, title in exercises:
            self.expected.setdefault(exercise_id, title)

    def add_check(self, exercise, result, answer, code: str | None = None, error: str = "") -> None:
        """One check; `error` is what the exercise cell's last run raised (its answer is then an
        earlier run's leftover, not recorded)."""
        self.expected.setdefault(exercise.id, exercise.title)
        self._add(
            self.checks,
            exercise_id=exercise.id,
            title=exercise.title,
            passed=result.passed,
            score=round(result.score, 4),
            feedback=result.feedback,
            answer=None if error else _recorded(_plain, answer, _answer_name(exercise, answer)),
            code=code or "",
            **({"error": error} if error else {}),
        )

    def add_prediction(self, prompt: str, prediction: str, answer: str, prediction_id: str = "") -> None:
        """A revealed prediction; the student's rating of it comes later (`rate_prediction`)."""
        self._add(
            self.predictions,
            prediction_id=prediction_id,
            prompt=prompt,
            prediction=prediction,
            answer=answer,
            self_rating="",
        )

    def rate_prediction(self, prediction_id: str, rating: str) -> None:
        for entry in reversed(self.predictions):
            if entry["prediction_id"] == prediction_id:
                entry["self_rating"] = rating
                self._kept()
                return

    def add_quiz(self, question: str, choice: str, correct: bool, explanation: str, quiz_id: str = "") -> None:
        """One answer to a quiz question. The first answer to a question is its score; any later
        one (the cell run again) is recorded as practice."""
        practice = self.quiz_answer(quiz_id or question) is not None
        self._add(
            self.quiz,
            quiz_id=quiz_id or question,
            question=question,
            choice=choice,
            correct=correct,
            explanation=explanation,
            practice=practice,
        )

    def quiz_answer(self, quiz_id: str) -> dict | None:
        """The scored (first) answer to a question in this log, or None."""
        return next((entry for entry in self.quiz if entry.get("quiz_id", entry.get("question")) == quiz_id), None)

    def add_reveal(self, exercise, solution: str) -> None:
        """A reference solution was shown: listed in the summary, its text kept as a key output."""
        self.expected.setdefault(exercise.id, exercise.title)
        self._add(self.reveals, exercise_id=exercise.id, title=exercise.title)
        self.add_output(f"reference solution revealed: {exercise.title}", solution)

    def add_output(self, label: str, value) -> None:
        """A key output; recorded again under the same label, it replaces the earlier copy."""
        text = _recorded(_text_of, value, str(label))
        self.outputs[:] = [entry for entry in self.outputs if entry["label"] != label]
        self._add(self.outputs, label=label, value=_recorded(_plain, value, str(label)), text=str(text))

    def to_json(self) -> dict:
        record = {"format": FORMAT, "saved": _now(), "sessions": [self.session], "expected": dict(self.expected)}
        return record | {kind: getattr(self, kind) for kind in KINDS} | _hub_user()

    def to_markdown(self, record: dict | None = None) -> str:
        return render_markdown(record if record is not None else self.to_json())

    def save(self, path: str | pathlib.Path | None = None) -> SavedEvidence:
        markdown = pathlib.Path(path) if path is not None else pathlib.Path("pytree-lab-evidence.md")
        if markdown.suffix.lower() != ".md":
            markdown = markdown.with_suffix(".md")
        markdown = markdown if markdown.is_absolute() else pathlib.Path.cwd() / markdown
        markdown.parent.mkdir(parents=True, exist_ok=True)
        # another kernel may be saving into the same folder: read, merge and write as one step
        with _folder_locked(markdown.parent):
            # a path that held another file went to a dated file: later saves go on there
            saved = self._save_locked(self._targets.get(markdown, markdown))
        self._targets[markdown] = saved.markdown
        return saved

    def _save_locked(self, markdown: pathlib.Path) -> SavedEvidence:
        record = self.to_json()
        target, earlier = markdown, _ours(markdown)
        if earlier is None:  # a file there that this log did not write: keep it, use a new dated name
            stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
            names = (markdown.with_name(f"{markdown.stem}-{stamp}{f'-{n}' if n else ''}.md") for n in itertools.count())
            target = next(t for t in names if not t.exists() and not t.with_suffix(".json").exists())
        record = _merge(earlier, record) if earlier else record
        json_path = target.with_suffix(".json")
        _write_new(json_path, json.dumps(record, indent=2, ensure_ascii=False) + "\n")
        _write_new(target, render_markdown(record))
        return SavedEvidence(target, json_path)


def _ours(markdown: pathlib.Path) -> dict | None:
    """{} when neither file exists, the earlier record when both are this log's, else None."""
    json_path = markdown.with_suffix(".json")
    if not markdown.exists() and not json_path.exists():
        return {}
    try:
        head = markdown.read_text(encoding="utf-8")[:400] if markdown.exists() else _MARK
        record = json.loads(json_path.read_text(encoding="utf-8")) if json_path.exists() else None
    except (OSError, ValueError, UnicodeDecodeError):
        return None
    if _MARK not in head or not isinstance(record, dict) or record.get("format") != FORMAT:
        return None
    return record


def _merge(earlier: dict, now: dict) -> dict:
    merged = dict(now)
    merged["sessions"] = list(dict.fromkeys([*earlier.get("sessions", []), *now["sessions"]]))
    merged["expected"] = {**earlier.get("expected", {}), **now["expected"]}
    for kind in KINDS:
        now.setdefault(kind, [])
        seen = {entry.get("id") for entry in now[kind]}
        older = [entry for entry in earlier.get(kind, []) if entry.get("id") not in seen]
        merged[kind] = sorted(older + now[kind], key=lambda entry: entry.get("time", ""))
    # a key output recorded again (in any session) replaces its earlier copy: the latest is kept
    latest = {entry.get("label"): entry for entry in merged["outputs"]}
    merged["outputs"] = [entry for entry in merged["outputs"] if latest[entry.get("label")] is entry]
    return merged


def _write_new(path: pathlib.Path, text: str) -> None:
    """Write through a temporary file, so a failed write leaves the earlier file whole and no
    temporary file behind. A lone surrogate (half an emoji, a file name that was not UTF-8) is
    written as its escape, `\\udcff`, which JSON reads back as the same character."""
    data = text.encode("utf-8", "backslashreplace")
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex[:8]}.tmp")
    try:
        with open(tmp, "xb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise


LOCK_TIMEOUT = 30.0  # seconds a save waits for another kernel's save of the same folder
_LOCK_NAME = ".pytree-lab-evidence.lock"
_STALE_LOCK = 120.0  # a lock file this old was left by a save that died (fallback only)


@contextlib.contextmanager
def _folder_locked(folder: pathlib.Path):
    """Hold the folder's evidence lock: `fcntl.flock` on the folder itself where there is one
    (nothing is written; the lock ends with the process, however it ends), else a lock file
    created exclusively beside the evidence and removed after."""
    deadline = time.monotonic() + LOCK_TIMEOUT
    try:
        import fcntl

        fd: int | None = os.open(folder, os.O_RDONLY)
    except (ImportError, OSError):  # no fcntl (Windows), or a folder that cannot be opened
        fd = None
    lock = folder / _LOCK_NAME
    while True:
        try:
            if fd is not None:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            else:
                os.close(os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
            break
        except (BlockingIOError, FileExistsError):  # another save holds it
            with contextlib.suppress(OSError):  # (a lock file gone meanwhile: try again)
                if fd is None and time.time() - lock.stat().st_mtime > _STALE_LOCK:
                    lock.unlink()
                    continue
        except (AttributeError, OSError):  # no flock here (Pyodide's fcntl, some file systems): a lock file
            if fd is None:
                raise
            os.close(fd)
            fd = None
            continue
        if time.monotonic() > deadline:
            raise TimeoutError(f"another save into {folder} did not finish within {LOCK_TIMEOUT:g} s")
        time.sleep(0.01)
    try:
        yield
    finally:
        if fd is not None:
            os.close(fd)  # releases the lock
        else:
            with contextlib.suppress(OSError):
                lock.unlink()


_DEFAULT_EVIDENCE = Evidence()


def default_evidence(given: Evidence | None = None) -> Evidence:
    """`given` (even empty), or for None the log the notebook's checks and widgets write to."""
    return given if given is not None else _DEFAULT_EVIDENCE


def clear_evidence() -> None:
    _DEFAULT_EVIDENCE.clear()


def record_output(label: str, value: Any, *, evidence: Evidence | None = None) -> Any:
    """Keep a key output (a tree, a diagram's text, a loss) for the evidence file; returns `value`."""
    default_evidence(evidence).add_output(label, value)
    return value


def save_evidence(path: str | pathlib.Path | None = None, *, evidence: Evidence | None = None) -> SavedEvidence:
    """Write the evidence recorded so far: Markdown at `path` (default `pytree-lab-evidence.md` in
    the notebook's folder) and the same content as JSON beside it."""
    return default_evidence(evidence).save(path)


def aligned_trees(**trees: Any) -> str:
    """Trees side by side, one row per leaf path, with the values (for the evidence file):

        path        params        grads       updated
        ['bias']    0             -4          0.2
        ['weight']  [1, -1]       [-8, -4]    [1.4, -0.8]

    A path missing from one tree shows "(missing)"; values are printed in full precision up to
    16 elements per leaf. A tree that contains itself or nests too deeply raises
    `pytree_lab.trees.TreeError`, its path named.
    """
    import numpy as np

    from ..engine import get_engine

    engine = get_engine()
    for name, tree in trees.items():  # refused before JAX's flatten sees it (path named)
        engine.check_tree(tree, name)
    columns = {
        name: {engine.keystr(p): leaf for p, leaf in engine.tree_flatten_with_path(tree)[0]}
        for name, tree in trees.items()
    }
    paths = list(dict.fromkeys(path for leaves in columns.values() for path in leaves))

    def cell(value) -> str:
        if value is None:
            return "(missing)"
        arr = np.asarray(value)
        if arr.dtype.kind not in "biuf":
            return repr(value)
        if arr.size > 16:
            return f"{arr.dtype}{list(arr.shape)}"
        return np.array2string(arr, separator=", ", precision=8, suppress_small=False, max_line_width=200)

    rows = [["path", *trees]] + [[path, *(cell(columns[name].get(path)) for name in trees)] for path in paths]
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(text.ljust(width) for text, width in zip(row, widths)).rstrip() for row in rows)
