"""Summative grading of the course's exercises, for nbgrader's autograder (`pytree-lab nbgrader`).

The in-notebook checks (`check_cell`) are practice: they run in the student's kernel, their
hidden cases come from the operating system's randomness, and a student can read their code.
The summative score here is what the autograder records. It runs in the kernel nbgrader starts
for the submitted notebook, from the hidden-test region of a test cell that only the grading
side has (nbgrader removes that region from the released notebooks), with a `seed` written into
that region by `pytree-lab nbgrader`: the hidden cases are drawn from it at grading time, so
nothing installed in a student's environment holds or predicts them.

Each exercise is graded on the lesson's own values (the practice check's grader, with its
partial credit) and on hidden cases:

- a function answer (`grad_over_flat_params`) is called on cases drawn from the seed;
- a value answer (`norm_squared`, `g`, `fixed`) is recomputed by running the student's exercise
  cell again, guarded, in a copy of the notebook's namespace in which the lesson's parameters
  (and the gradients that belong to them) are replaced by values drawn from the seed. An answer
  typed in as numbers passes the lesson's case and fails the hidden ones. `assert` statements in
  the cell check the lesson's own numbers, so they are left out of these reruns.

`summative(...)` returns the points earned (a float, which nbgrader reads as partial credit),
prints one line per case (sizes, never a hidden case's values), and never raises: a broken,
hostile or missing answer scores 0 for its exercise and the notebook's next cells still run.
"""

from __future__ import annotations

import ast
import math
from typing import Any

from .. import lesson
from ..exercises import (
    Evidence,
    as_number_array,
    bind_tools,
    close,
    describe_failure,
    exception_text,
    last_run,
    run_guarded,
    tools,
)

__all__ = ["HIDDEN_RERUNS", "POINTS", "summative"]

# points per exercise in the nbgrader assignment
POINTS = {"squared_norm": 2, "nested_scale_grad": 2, "repair_update": 2, "grad_over_flat_params": 4}
HIDDEN_RERUNS = 2  # hidden cases per value exercise (the function exercise has the catalogue's own)
RERUN_BUDGET = 10.0  # seconds per rerun of the student's cell


def _user_ns() -> dict | None:
    try:
        from IPython import get_ipython
    except ImportError:  # pragma: no cover - the autograder always runs an IPython kernel
        return None
    shell = get_ipython()
    return None if shell is None else shell.user_ns


def _cell_code(exercise_id: str) -> str | None:
    """The code of the student's last run of the exercise cell, as Python (magics transformed)."""
    run = last_run(exercise_id)
    if run is None or not run.code.strip():
        return None
    code = run.code
    if code.lstrip().startswith("%%exercise"):
        code = code.lstrip().split("\n", 1)[1] if "\n" in code.lstrip() else ""
    try:
        from IPython import get_ipython

        shell = get_ipython()
        if shell is not None:
            code = shell.transform_cell(code)
    except Exception:  # noqa: BLE001 - plain Python is compiled as it is
        pass
    return code


class _NoAsserts(ast.NodeTransformer):
    def visit_Assert(self, node):  # noqa: N802 - ast's naming
        return ast.copy_location(ast.Pass(), node)


def _compile_without_asserts(code: str):
    tree = _NoAsserts().visit(ast.parse(code))
    ast.fix_missing_locations(tree)
    return compile(tree, "<your exercise cell, on a hidden case>", "exec")


def _same(answer: Any, expected: Any) -> bool:
    """Same tree structure (dict keys) and leaves within the checks' tolerance."""
    if isinstance(expected, dict):
        if not isinstance(answer, dict) or set(answer) != set(expected):
            return False
        return all(_same(answer[k], expected[k]) for k in expected)
    arr = as_number_array(answer)
    want = tools.np.asarray(expected)
    return arr is not None and arr.shape == want.shape and bool(close(arr, want))


def _rerun_case(exercise_id: str, code, source: str, namespace: dict, rng, index: int) -> tuple[float, str]:
    """The cell run again at other lesson parameters, as the check's reruns do (`exercises.reruns`):
    the lesson's trees and their leaves swapped wherever the cell reads them, parameters on a grid
    of halves, and every right model taken."""
    from .exercises import nested_scale_grad, repair_update, reruns, squared_norm

    right_at = {m.EXERCISE.id: m.right_at for m in (squared_norm, nested_scale_grad, repair_update)}[exercise_id]
    lesson_trees = reruns.lesson_point(lesson.lesson_params())
    point = reruns.other_point(rng, right_at(lesson_trees), right_at)
    trees = {k: lesson_trees[k] for k in ("params", "grads", "updated")}
    ns = {**namespace, **reruns.variant_changes(namespace, source, point, trees)}
    run = run_guarded(exec, code, ns, budget=RERUN_BUDGET)
    label = f"hidden case {index} (other lesson parameters)"
    tampered = [n for n in run.replaced if n.split(".")[0] not in ("jax", "numpy", "builtins")]
    if tampered:
        return 0.0, f"{label}: your cell changed the checker ({', '.join(tampered)}); 0."
    if not run.ok:
        return 0.0, f"{label}: " + (describe_failure(run, what="your cell", budget=RERUN_BUDGET, hidden=True) or "")
    expected = right_at(point)
    right = []
    for name, wants in expected.items():
        if name not in ns:
            continue
        if any(run_guarded(_same, ns[name], want, budget=RERUN_BUDGET).value for want in wants):
            right.append(name)
    score = len(right) / len(expected)
    if score == 1:
        return 1.0, f"{label}: right."
    wrong = [n for n in expected if n not in right]
    return score, f"{label}: {', '.join(wrong)} not right for these values."


def _answer(exercise_id: str, namespace: dict) -> Any:
    from .catalogue import exercise

    names = [n.strip() for n in exercise(exercise_id).answer_name.split(",") if n.strip()]
    if len(names) == 1:
        return namespace.get(names[0])
    return {name: namespace.get(name) for name in names}


def _grade(exercise_id: str, seed: int) -> tuple[float, list[str]]:
    from .catalogue import check, exercise

    ex = exercise(exercise_id)
    bind_tools()
    namespace = _user_ns() or {}
    run = last_run(exercise_id)
    stale = run.error_text if run is not None and run.error_text else None
    rng = tools.np.random.default_rng(seed)
    answer = _answer(exercise_id, namespace)
    first = check(exercise_id, answer, rng=rng, evidence=Evidence(), stale=stale)
    if ex.answer_kind == "function":
        cases = f" ({first.cases_passed} of {first.cases_total} cases)" if first.cases_total else ""
        return first.score, [f"the worked example and hidden cases{cases}: score {first.score:.2f}."]
    scores = [first.score]
    lines = [f"the lesson's values: score {first.score:.2f}."]
    code = _cell_code(exercise_id)
    if stale or code is None or first.score == 0:
        why = (
            "the exercise cell's last run failed"
            if stale
            else ("no run of the exercise cell was found" if code is None else "the lesson's case scored 0")
        )
        lines.append(f"hidden cases not run ({why}): 0.")
        return first.score / (1 + HIDDEN_RERUNS), lines
    try:
        compiled = _compile_without_asserts(code)
    except SyntaxError as exc:
        lines.append(f"hidden cases: the cell does not compile ({exc.msg}): 0.")
        return sum(scores) / (1 + HIDDEN_RERUNS), lines
    for index in range(1, HIDDEN_RERUNS + 1):
        score, line = _rerun_case(exercise_id, compiled, code, namespace, rng, index)
        scores.append(score)
        lines.append(line)
    return sum(scores) / len(scores), lines


def summative(exercise_id: str, *, seed: int, points: float | None = None) -> float:
    """The points the student's answer to `exercise_id` earns (0 .. points); never raises."""
    points = float(POINTS.get(exercise_id, 1) if points is None else points)
    try:
        fraction, lines = _grade(exercise_id, seed)
    except BaseException as exc:  # noqa: BLE001 - nothing a submission does may stop the grader
        if isinstance(exc, KeyboardInterrupt):  # nbgrader's time-out interrupts the cell
            raise
        fraction, lines = 0.0, [f"grading failed ({exception_text(exc)}): 0."]
    if not math.isfinite(fraction):
        fraction = 0.0
    fraction = min(max(fraction, 0.0), 1.0)
    earned = round(points * fraction, 3)
    print(f"Graded {exercise_id}: {earned:g} of {points:g} points")
    for line in lines:
        print("  - " + line)
    return earned
