"""One check of an answer, end to end: `check(exercise, answer, context)` runs the answer's own
code and the grader guarded and records the result once. A grader (`Grader`) gets the answer and
a `CheckContext`: what it may use besides."""

from __future__ import annotations

import ast
import dataclasses
import secrets
from typing import Any, Protocol

from ._grading import NOT_ANSWERED, CheckResult, Exercise, Outcome, answer_problem, bind_tools, is_unanswered, tools
from ._guard import Guarded, describe_failure, notes_for, run_guarded
from .cells import CellRun, ipython_python
from .evidence import KINDS, Evidence, default_evidence


class Grader(Protocol):
    """How an exercise grades: `grade(answer, context) -> Outcome`. Run guarded, under the
    exercise's budget; it may call the student's code (functions, objects with their own
    `__array__`) and re-run the exercise cell through `context.rerun`."""

    def __call__(self, answer: Any, context: CheckContext, /) -> Outcome: ...


class _NoAsserts(ast.NodeTransformer):
    def visit_Assert(self, node):  # noqa: N802 - ast's naming
        return ast.copy_location(ast.Pass(), node)


@dataclasses.dataclass(frozen=True)
class CheckContext:
    """What a check knows besides the answer: `rng` (a numpy Generator for hidden cases; by
    default one seeded by the operating system per check), `cell` (the exercise cell's last run:
    its code and the namespace it ran in), `stale` (that run's failure, when it failed), `code`
    (the answer's code, recorded with it), the `evidence` log (the kernel's by default) and
    `tools` (numpy, jax and jax.numpy frozen when bound)."""

    rng: Any = None
    cell: CellRun | None = None
    stale: str | None = None
    code: str | None = None
    evidence: Evidence | None = None
    tools = tools

    def rerun(self, changes: dict[str, Any], *, budget: float = 10.0) -> tuple[Guarded, dict] | None:
        """Run the exercise cell again, guarded and without its `assert` statements, in a copy
        of its namespace updated with `changes` (other lesson values, say): (the run, the
        namespace it ran in), or None when there is no cell to run. What it records is taken
        out of the evidence again: a rerun is a probe, not the student's work."""
        code = cell_python(self.cell)
        if code is None or self.cell is None or self.cell.namespace is None:
            return None
        try:
            tree = _NoAsserts().visit(ast.parse(code))
        except SyntaxError:
            return None
        compiled = compile(ast.fix_missing_locations(tree), "<your exercise cell, on other values>", "exec")
        namespace = {**self.cell.names(), **changes}
        log = default_evidence()
        kept = {kind: list(getattr(log, kind)) for kind in KINDS}
        autosave, log.autosave = log.autosave, None  # nor does it reach the evidence file
        try:
            return run_guarded(exec, compiled, namespace, budget=budget), namespace
        finally:
            log.autosave = autosave
            for kind, entries in kept.items():
                getattr(log, kind)[:] = entries


def cell_python(cell: CellRun | None) -> str | None:
    """The Python of a cell run (its `%%exercise` line dropped, IPython's syntax transformed)."""
    code = getattr(cell, "code", "") or ""
    if code.lstrip().startswith("%%exercise"):
        code = code.lstrip().partition("\n")[2]
    return ipython_python(code) if code.strip() else None


def check(exercise: Exercise, answer: Any, context: CheckContext | None = None) -> CheckResult:
    """Grade `answer` for `exercise` and record the result in the context's evidence log once,
    never raising: a broken answer or a broken checker each end in a sentence.

    `context.stale`: what went wrong in the student's last run of the exercise cell, when it did;
    the value still in the variable is then an older attempt's, so it is not graded: the check is
    recorded with that error. `exercise.explain(exercise, result, context)` may say the feedback plainly.

    A practice check defends against mistakes, not against code that sets out to fool it
    (docs/checks.md): grades come from nbgrader's sandbox.
    """
    bind_tools()
    context = context or CheckContext()
    if context.rng is None:  # seeded by the operating system, never by numpy's global state
        context = dataclasses.replace(context, rng=tools.np.random.default_rng(secrets.randbits(128)))
    result = _grade_answer(exercise, answer, context)
    said = None
    if exercise.explain is not None:  # what the cell shows, said plainly
        said = run_guarded(exercise.explain, exercise, result, context, budget=exercise.budget).value
        if said is not None:
            result = dataclasses.replace(result, feedback=said)
    if context.stale is not None or not is_unanswered(answer) or said is not None:  # a cell that raised: with its error
        log = default_evidence(context.evidence)
        log.add_check(exercise, result, answer, code=context.code, error=context.stale or "")
    return result


def _grade_answer(exercise: Exercise, answer: Any, context: CheckContext) -> CheckResult:
    def result(passed, score, lines, cases=(0, 0), unit=exercise.unit):
        return CheckResult(bool(passed), float(score), "\n".join(lines), exercise.id, *cases, unit or exercise.unit)

    def fail(line: str) -> CheckResult:
        return result(False, 0.0, [line])

    if context.stale:
        failure = context.stale.rstrip().rstrip(".")
        failure = f"ended in {failure}" if failure.startswith("a ") else f"raised {failure}"
        return fail(
            f"Your last run of the exercise cell {failure}. The value left over from an earlier "
            "run is not graded: fix the cell, run it again, then check."
        )
    if is_unanswered(answer):
        return fail(NOT_ANSWERED)
    if exercise.answer_kind != "function":
        # one check before any JAX call: a tree that contains itself, or nests thousands of levels
        # deep, would make JAX's flatten recurse until the interpreter breaks
        looked = run_guarded(answer_problem, exercise, answer, budget=exercise.budget)
        if looked.ok and looked.value:
            return fail(looked.value + " This check looked at nothing else.")
    # The grader calls the student's code (functions, or objects with their own __array__ /
    # __eq__): everything runs guarded. Function graders guard each case themselves too.
    run = run_guarded(
        exercise.grade, answer, context, budget=None if exercise.answer_kind == "function" else exercise.budget
    )
    if not run.ok:
        said = describe_failure(run, what="it") or ""
        if run.timed_out or not isinstance(run.error, Exception):
            return fail(describe_failure(run, what="Your answer", budget=exercise.budget) or "")
        if exercise.answer_kind == "function":  # the student's calls are guarded one by one
            return fail(
                f"The check itself failed ({said.removeprefix('it raised ')}); this is not about your answer. "
                "Please tell your instructor."
            )
        # reading a value answer failed: an object that is not numbers, or a checker bug
        return fail(f"Checking this answer failed ({said.removeprefix('it ')}). Is it made of numbers and arrays only?")
    outcome: Outcome = run.value
    lines = list(outcome.lines) + notes_for(run)
    return result(outcome.passed, outcome.score, lines, (outcome.passed_cases, outcome.total_cases), outcome.unit)
