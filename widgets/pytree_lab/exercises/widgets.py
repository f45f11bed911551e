"""Exercise widgets: check, prediction, quiz and evidence, drawn by one ES module.

Python owns every result: the page sends intents ("check", "reveal", "solution", "save") as
messages and writes only the student's own input (a prediction, a self-rating, a quiz choice);
a page write to any other trait is refused (`pytree_lab.page.PageIntents`).
"""

from __future__ import annotations

import asyncio
import contextlib
import pathlib
import threading
import time
from collections.abc import Callable
from typing import Any, ClassVar

import anywidget
import traitlets

from ..page import PageIntents, static_asset, synced
from ..widget_common import TextForm, refuse_unknown_widget_keywords
from ._check import CheckContext, check
from ._grading import CheckResult, Exercise, answer_names, is_unanswered
from ._guard import exception_text, run_guarded
from .cells import last_run, user_namespace
from .evidence import Evidence, SavedEvidence, default_evidence

COALESCE_DELAY = 0.05  # s without a new "check" intent before the check runs: a burst becomes one
COALESCE_MAX = 1.0  # s at most between the first intent waiting and its check


class _ExerciseWidget(PageIntents, TextForm, anywidget.AnyWidget):
    """Shared front end: `kind` picks what static/exercises.js draws."""

    _intents: ClassVar[dict[str, Callable[..., Any]]] = {}  # the page's intent -> the method it calls
    _esm = static_asset("exercises.js")
    _css = static_asset("exercises.css")
    kind = synced(traitlets.Unicode(""), 'str: what exercises.js draws: "check", "predict", "quiz", "evidence".')
    title = synced(traitlets.Unicode(""), "str, default '': the heading.")
    # the verdict in the aria-live="polite" region (a revealed answer or explanation is read with it)
    announcement = synced(traitlets.Unicode(""), "str, default '': the verdict or notice, read out (aria-live).")
    busy = synced(traitlets.Bool(False), "bool, default False: a check or reveal is running (its button waits).")

    def __init__(self, *, evidence: Evidence | None = None, **kwargs) -> None:
        refuse_unknown_widget_keywords(self, kwargs)  # a typo is an error, not a dropped argument
        self._locks: dict[str, Any] = {}  # trait -> the value it keeps from now on
        super().__init__(**kwargs)
        self._evidence = evidence
        self.on_msg(self._on_front_end_msg)

    @traitlets.validate("prediction", "selected")
    def _locked(self, proposal):
        """A revealed prediction and a quiz's first answer stay as they were (kept apart, in `_locks`:
        during a front-end update traitlets validates after the new value is already in place)."""
        return self._locks.get(proposal["trait"].name, proposal["value"])

    @property
    def evidence(self) -> Evidence:
        return default_evidence(self._evidence)

    def _on_front_end_msg(self, widget, content, buffers) -> None:
        method = self._intents.get(str(content.get("type"))) if isinstance(content, dict) else None
        if method is not None:
            self._take_input(content)
            method(self)

    def _take_input(self, content: dict) -> None:
        """An intent carries the student's input as the page had it when they pressed the button
        (the page's own trait writes are throttled by ipywidgets while a message is pending, so the
        intent can overtake them): only the page's intent traits are taken, a wrong type is left out."""
        for name in self._page_intents:
            if name in content:
                with contextlib.suppress(traitlets.TraitError):
                    setattr(self, name, content[name])

    def text(self) -> str:
        """What the widget says, for places with no widget front end (exports, plain consoles)."""
        parts = [self.title or type(self).__name__]
        parts += [getattr(self, name, "") for name in ("task", "question", "prompt")]
        parts += [f"  {i}. {choice}" for i, choice in enumerate(getattr(self, "choices", []) or [], 1)]
        parts += [self.announcement, getattr(self, "feedback", "")]
        return "\n".join(part for part in parts if part)


class CheckButton(_ExerciseWidget):
    """A "Check my answer" button for one exercise.

    `get_answer` is a function called at click time (`lambda: norm_squared`), the name of a
    notebook variable (`"norm_squared"`), or several names (`"norm_squared, manual"`: a dict of
    them is graded), so re-running a cell and clicking again checks the new answer. When the
    exercise cell's last run raised (see `exercises.cells`), that is what the check says: the value
    left from an earlier run is not graded. After a first attempt a practice exercise's reference
    solution can be revealed (`reveal_solution`), never before; a graded exercise's never.
    """

    exercise_id = synced(traitlets.Unicode(), "str: the exercise's id in the course catalogue. At construction.")
    task = synced(traitlets.Unicode(""), "str, default '': what the exercise asks.")
    label = synced(traitlets.Unicode("Check my answer"), "str, default 'Check my answer': the button's text.")
    status = synced(traitlets.Unicode(""), "str, default '': '', 'checking', 'passed', 'failed' or 'error'.")
    feedback = synced(traitlets.Unicode(""), "str, default '': what the last check found, as text.")
    score = synced(traitlets.Float(0.0), "float, default 0.0: the last check's score, 0 to 1.")
    attempts = synced(traitlets.Int(0), "int, default 0: checks run.")
    failed_attempts = synced(traitlets.Int(0), "int, default 0: checks that did not pass.")
    solution_available = synced(traitlets.Bool(False), "bool, default False: the solution may be revealed.")
    solution = synced(traitlets.Unicode(""), "str, default '': the reference solution, once revealed.")

    def __init__(
        self,
        exercise: Exercise,
        get_answer: Callable[[], Any] | str,
        *,
        evidence: Evidence | None = None,
        rng=None,
        **kwargs,
    ) -> None:
        super().__init__(
            kind="check", exercise_id=exercise.id, title=exercise.title, task=exercise.task, evidence=evidence, **kwargs
        )
        self.exercise = exercise
        self._get_answer = get_answer
        self._rng = rng
        self.result: CheckResult | None = None
        self._tried = 0  # checks of a real attempt: an answer written in, or a run that failed
        # the page's "check" intents, coalesced: one check runs at a time, and every intent that
        # arrives before it starts (a burst of clicks, a replayed message) is served by it
        self._intent_lock = threading.Lock()
        self._check_lock = threading.Lock()
        self._wanted = 0  # intents not served yet
        self._draining = False  # a check for them is scheduled or running
        self._first_intent = self._last_intent = 0.0
        self.intents_received = 0
        self.checks_run = 0

    def _check_intent(self) -> None:
        """A "check" from the page. Inside a kernel the check runs on the kernel's event loop once
        no new intent came for COALESCE_DELAY (at most COALESCE_MAX after the first): the
        messages of a burst collapse into it, and it grades the answer as it is then."""
        now = time.monotonic()
        with self._intent_lock:
            self.intents_received += 1
            self._wanted += 1
            self._last_intent = now
            if self._draining:
                return
            self._draining = True
            self._first_intent = now
        try:
            asyncio.get_running_loop().call_later(COALESCE_DELAY, self._when_quiet)
        except RuntimeError:  # no event loop (a plain script, a test): check now
            self._drain()

    def _when_quiet(self) -> None:
        """Check once the intents have stopped coming for COALESCE_DELAY (a burst is one check),
        or COALESCE_MAX after the first of them (a steady stream still gets checked)."""
        now = time.monotonic()
        with self._intent_lock:
            waiting = now - self._last_intent < COALESCE_DELAY and now - self._first_intent < COALESCE_MAX
        if waiting:
            asyncio.get_running_loop().call_later(COALESCE_DELAY, self._when_quiet)
        else:
            self._drain()

    def _drain(self) -> None:
        while True:
            with self._intent_lock:
                if not self._wanted:
                    self._draining = False
                    return
                self._wanted = 0
                self._first_intent = time.monotonic()
            try:
                self.check()
            except BaseException:  # noqa: BLE001 - check() says what went wrong; never stuck "draining"
                with self._intent_lock:
                    self._draining = False
                raise

    def read_answer(self):
        """The answer as a click reads it now (a NameError for a name not defined yet)."""
        if callable(self._get_answer):
            return self._get_answer()
        namespace = user_namespace() or {}
        names = answer_names(self._get_answer)
        if len(names) != 1:  # several names: a dict of them, None for one not defined yet
            return {name: namespace.get(name) for name in names}
        if names[0] not in namespace:
            raise NameError(f"name {names[0]!r} is not defined")
        return namespace[names[0]]

    def check(self) -> CheckResult | None:
        """What a click does: fetch the answer, check it, show and announce the result. One check
        runs at a time per button (a second caller waits for the first)."""
        with self._check_lock:
            self.checks_run += 1
            return self._check()

    def _check(self) -> CheckResult | None:
        self.attempts += 1
        self.busy, self.status, self.announcement = True, "checking", f"Checking ({self.attempts})…"
        try:
            run = last_run(self.exercise.id)
            try:
                answer = self.read_answer()
            except Exception as exc:  # noqa: BLE001 - a name not defined yet, a broken getter
                if run is not None and run.error_text:
                    answer = Ellipsis
                else:
                    name = self._get_answer if isinstance(self._get_answer, str) else "your answer"
                    self.result = None
                    self.status, self.score = "error", 0.0
                    self.feedback = (
                        f"Could not get {name}: {exception_text(exc)}. Run the cell that defines it, then check again."
                    )
                    self.announcement = f"Check {self.attempts}: no answer yet. {self.feedback}"
                    return None
            stale = run.error_text if run is not None and run.error_text else None
            code = run.code if run is not None else None
            if stale is not None or not is_unanswered(answer):
                self._tried += 1
            context = CheckContext(rng=self._rng, cell=run, stale=stale, code=code, evidence=self.evidence)
            result = check(self.exercise, answer, context)
            self.result, self.score, self.feedback = result, result.score, result.feedback
            self.status = "passed" if result.passed else "failed"
            if not result.passed:
                self.failed_attempts += 1
            verdict = "passed" if result.passed else "not yet"
            cases = (
                f" ({result.cases_passed} of {result.cases_total} {result.unit} right)"
                if result.cases_total > 1
                else ""
            )
            offer = ""
            if self.exercise.solutions and not self.exercise.graded and not self.solution and self._tried:
                self.solution_available = True
                if self.failed_attempts >= 2:
                    offer = " A reference solution is available: “Show a reference solution”."
            self.announcement = f"Check {self.attempts}: {verdict}, score {result.score:.2f}{cases}.{offer}"
            return result
        finally:
            self.busy = False
            if self.status == "checking":
                self.status = "error"

    def reveal_solution(self) -> str | None:
        """The reference solution of a practice exercise, once the student has checked at least once;
        a graded exercise never shows one (wherever its solutions can be found)."""
        if self.exercise.graded or not self.exercise.solutions:
            self.announcement = (
                "This exercise is graded: no reference solution is shown."
                if self.exercise.graded
                else "This exercise has no reference solution to show."
            )
            return None
        if not self._tried:
            self.announcement = (
                "Write your answer in the exercise cell (replace its `...`), run it and check "
                "it first; the reference solution comes after a real attempt."
            )
            return None
        text = "\n\n# Another way:\n".join(self.exercise.solutions)
        if not self.solution:
            self.evidence.add_reveal(self.exercise, text)
        self.solution = text
        self.solution_available = True
        verdict = self.announcement.split(" A reference solution is available")[0]
        self.announcement = (
            verdict + " " if verdict.startswith("Check") else ""
        ) + "Reference solution shown below your feedback: compare it with yours."
        return text

    _intents: ClassVar[dict[str, Callable[..., Any]]] = {"check": _check_intent, "solution": reveal_solution}


class PredictionPrompt(_ExerciseWidget):
    """Type a prediction, then reveal the answer. The answer comes from `reveal()`, a function
    that computes it when the button is pressed; the prediction is locked once revealed."""

    _page_intents = frozenset({"prediction", "self_rating"})
    prompt = synced(traitlets.Unicode(""), "str, default '': the question to predict.")
    prediction = synced(
        traitlets.Unicode(""), "str, default '': the student's prediction, locked once revealed.", by="page"
    )
    self_rating = synced(
        traitlets.Unicode(""), "str, default '': 'right', 'partly' or 'wrong': the student's rating.", by="page"
    )
    revealed = synced(traitlets.Bool(False), "bool, default False: the answer is shown.")
    answer = synced(traitlets.Unicode(""), "str, default '': the computed answer, empty until revealed.")

    @traitlets.observe("self_rating")
    def _rated(self, change):
        if self.revealed and change["new"]:
            self.evidence.rate_prediction(self.prediction_id, self.self_rating)

    def __init__(
        self,
        prompt: str,
        reveal: Callable[[], str],
        *,
        prediction_id: str = "",
        title: str = "Predict before running",
        evidence: Evidence | None = None,
        **kwargs,
    ) -> None:
        super().__init__(kind="predict", prompt=prompt, title=title, evidence=evidence, **kwargs)
        self._reveal = reveal
        self.prediction_id = prediction_id or prompt  # the prompt names it when no id is given

    def reveal(self) -> str | None:
        if self.revealed:
            return self.answer
        if not self.prediction.strip():
            self.announcement = "Type your prediction first, then reveal the answer."
            return None
        self.busy = True
        try:
            run = run_guarded(lambda: str(self._reveal()), budget=30.0)
        finally:
            self.busy = False
        if not run.ok:
            why = exception_text(run.error) if run.error is not None else "TimeoutError: took too long"
            self.announcement = f"Could not compute the answer: {why}"
            return None
        answer = run.value
        self._locks["prediction"] = self.prediction
        self.answer = answer
        self.revealed = True
        self.announcement = "Revealed. Compare it with your prediction:"
        self.evidence.add_prediction(self.prompt, self.prediction, answer, self.prediction_id)
        return answer

    _intents: ClassVar[dict[str, Callable[..., Any]]] = {"reveal": reveal}


class Quiz(_ExerciseWidget):
    """A multiple-choice question. The first answer counts: after it the quiz is locked, says
    whether it was right, and explains every choice (why each wrong one is wrong)."""

    _page_intents = frozenset({"selected"})
    question = synced(traitlets.Unicode(""), "str, default '': the question.")
    choices = synced(traitlets.List(traitlets.Unicode()), "list of str: the choices, in order.")
    selected = synced(
        traitlets.Int(-1), "int, default -1 (none): the chosen choice's index; the first answer counts.", by="page"
    )
    answered = synced(traitlets.Bool(False), "bool, default False: an answer was submitted (the quiz is locked).")
    correct = synced(traitlets.Bool(False), "bool, default False: the first answer was right.")
    answer_index = synced(traitlets.Int(-1), "int, default -1: the right choice's index, -1 until answered.")
    explanation = synced(traitlets.Unicode(""), "str, default '': why the answer is right, after answering.")
    choice_notes = synced(
        traitlets.List(traitlets.Unicode()), "list of str: one note per choice (why it is right or wrong)."
    )

    def __init__(
        self,
        question: str,
        choices: list[str],
        answer: int,
        explanation: str,
        *,
        why_not: dict[int, str] | list[str] | None = None,
        title: str = "Check your understanding",
        quiz_id: str = "",
        evidence: Evidence | None = None,
        **kwargs,
    ) -> None:
        if not 0 <= answer < len(choices):
            raise ValueError("answer must index one of the choices")
        super().__init__(
            kind="quiz", question=question, choices=list(choices), title=title, evidence=evidence, **kwargs
        )
        self._answer = answer
        self._explanation = explanation
        self._why_not = dict(enumerate(why_not)) if isinstance(why_not, list) else dict(why_not or {})
        self.quiz_id = quiz_id or question  # the question names it when no id is given
        earlier = self.evidence.quiz_answer(self.quiz_id)
        if earlier is not None:  # the cell was run again: this widget is for practice
            self.announcement = (
                f"You answered this question before: your first answer, “{earlier['choice']}”, "
                "is your score. This try is recorded as practice."
            )

    def submit(self) -> bool | None:
        if self.answered:
            self.announcement = "Already answered: the first answer counts. " + (
                "Correct." if self.correct else "Not quite."
            )
            return self.correct
        if not 0 <= self.selected < len(self.choices):
            self.announcement = "Choose an answer first."
            return None
        self._locks["selected"] = self.selected
        self.correct = self.selected == self._answer
        self.answered = True
        self.answer_index = self._answer
        right = self.choices[self._answer]
        self.explanation = f"The answer: {right}. {self._explanation}"
        self.choice_notes = [
            ("Right: " + self._explanation)
            if i == self._answer
            else ("Not this one: " + self._why_not.get(i, "it does not describe what grad returns."))
            for i in range(len(self.choices))
        ]
        # the explanation is shown inside the same live region, so it is read after the verdict
        self.announcement = "Correct." if self.correct else f"Not quite: you chose “{self.choices[self.selected]}”."
        earlier = self.evidence.quiz_answer(self.quiz_id)
        if earlier is not None:
            self.announcement += (
                f" Practice: your first answer, “{earlier['choice']}”"
                f" ({'correct' if earlier['correct'] else 'not correct'}), stays your score."
            )
        self.evidence.add_quiz(
            self.question,
            self.choices[self.selected],
            self.correct,
            self._explanation,
            quiz_id=self.quiz_id,
        )
        return self.correct

    _intents: ClassVar[dict[str, Callable[..., Any]]] = {"check": submit}

    def text(self) -> str:
        notes = [f"  {i}. {note}" for i, note in enumerate(self.choice_notes, 1)]
        return "\n".join([super().text(), self.explanation, *notes]) if self.answered else super().text()


class EvidenceButton(_ExerciseWidget):
    """ "Keep your evidence": one click writes the evidence file (Markdown, JSON beside it)."""

    label = synced(traitlets.Unicode("Save my evidence"), "str, default 'Save my evidence': the button's text.")
    saved_path = synced(traitlets.Unicode(""), "str, default '': the file the last save wrote.")

    def __init__(self, path: str | pathlib.Path | None = None, *, evidence: Evidence | None = None, **kwargs) -> None:
        super().__init__(kind="evidence", title="Keep your evidence", evidence=evidence, **kwargs)
        self._path = path

    def save(self) -> SavedEvidence | None:
        log = self.evidence
        try:
            saved = log.save(self._path)
        except Exception as exc:  # noqa: BLE001 - a full disk, a read-only folder, a lock held too long
            self.saved_path = ""
            self.announcement = (
                f"Could not save your evidence: {exception_text(exc)}. Nothing is lost: "
                f"the {len(log)} records stay in this session and the files saved before are "
                "unchanged; fix the cause and save again."
            )
            return None
        self.saved_path = str(saved.markdown)
        self.announcement = saved.summary()
        return saved

    _intents: ClassVar[dict[str, Callable[..., Any]]] = {"save": save}
