"""A value exercise's cases decide right and wrong: the exercise cell is run again at other lesson
parameters, in a copy of the notebook's namespace (`CheckContext.rerun`), and its answer must follow
them; a near-miss (a typical slip: the sign flipped, a square missing) is said only when it explains
the answer at every case, and the cases are drawn so that each near-miss differs from the right
answer at some case."""

from __future__ import annotations

import ast
import copy
import dataclasses
from collections.abc import Callable, Iterator
from typing import Any

from ... import lesson
from ...exercises import Case, CheckContext, Exercise, Outcome, cell_python, close, describe_failure, run_guarded, tools
from .common import _same_tree, lesson_point

RERUNS = 2  # other parameter points per check
RERUN_BUDGET = 10.0


def variant_changes(namespace: dict, loaded: set[str], names: dict, lesson_trees: dict) -> dict:
    """What a rerun changes in the notebook's namespace: the case's `names`, and any other name the
    cell reads that holds one of the lesson's trees (grads_apart = grads) given the case's tree; the
    other containers the cell reads are deep-copied, so a rerun cannot change the student's data
    (`loaded`: the names the cell's code uses). Values decide, never which object a name holds."""
    changes = {}
    for name in loaded - set(names):
        value = namespace.get(name)
        swapped = next((names[k] for k, tree in lesson_trees.items() if _same_tree(value, tree)), None)
        if swapped is not None:
            changes[name] = swapped
        elif isinstance(value, (dict, list, set)):
            run = run_guarded(copy.deepcopy, value, budget=2.0)
            if run.ok:
                changes[name] = run.value
    return {**changes, **names}


Near = Callable[[dict], list]  # a case's names -> its near-misses [(value or tree, sentence)]


def other_point(rng, lesson_right: dict[str, list[Any]], right_at: Callable[[dict], dict], near: Near) -> dict:
    """Parameters away from the lesson's, on a grid of halves: the residual w·x + b − 3 is then a
    multiple of 1/2, so every gradient and the squared norm are whole numbers, held exactly in
    float32 (an answer rounded with int() or round() is as right there as at the lesson's point).
    No answer there may equal the lesson's, nor any near-miss the right answer, nor the gradient be 0."""
    jnp, np = tools.jnp, tools.np
    for _ in range(100):
        weight, bias = rng.integers(-6, 7, size=2) / 2, rng.integers(-6, 7) / 2
        params = {"weight": jnp.asarray(weight.astype(np.float32)), "bias": jnp.asarray(np.float32(bias))}
        point = lesson_point(params)
        if not any(np.asarray(g).any() for g in tools.jax.tree.leaves(point["grads"])):
            continue
        right = [(name, r) for name, answers in right_at(point).items() for r in answers]
        if not any(_same_tree(r, ours) for name, r in right for ours in lesson_right[name]) and not any(
            _same_tree(value, r) for value, _ in near(point) for _, r in right
        ):
            return point
    raise RuntimeError("no parameter point away from the lesson's was found")  # pragma: no cover


def lesson_cases(right_at: Callable[[dict], dict[str, list]], near: Near = lambda names: [], derived=None):
    """A value exercise's cases (`Exercise.cases`): the lesson's parameters, then `RERUNS` other
    points drawn from `rng` (`other_point`). Each sets the lesson's trees and loss value (and what
    `derived(point)` adds: repair_update's `broken`); `right_at(point)` is what is right there, and
    `near(names)` the near-misses the exercise names (each differs from the right answer there)."""

    def cases(rng) -> Iterator[Case]:
        first = lesson_point(lesson.lesson_params())
        points = [first] + [other_point(rng, right_at(first), right_at, near) for _ in range(RERUNS)]
        for index, point in enumerate(points):
            names = {k: point[k] for k in ("params", "grads", "value", "updated")} | (derived or dict)(point)
            label = f"hidden case {index} (other lesson parameters)" if index else "the lesson's values"
            yield Case(label, right_at(point), names=names)

    return cases


def rerun_at(context: CheckContext, case: Case, lesson_case: Case, budget: float = RERUN_BUDGET):
    """The exercise cell run again at `case` (`CheckContext.rerun`: (the run, its namespace), or
    None): the case's names set, and any other name the cell reads that holds a lesson tree given the
    case's. The practice check and nbgrader's grader both rerun this way."""
    try:
        loaded = {n.id for n in ast.walk(ast.parse(cell_python(context.cell) or "")) if isinstance(n, ast.Name)}
    except SyntaxError:
        return None
    trees = {k: v for k, v in lesson_case.names.items() if isinstance(v, dict)}
    names = context.cell.names() if context.cell is not None else {}
    return context.rerun(variant_changes(names, loaded, case.names, trees), budget=budget)


@dataclasses.dataclass
class Seen:
    """A value answer at the exercise's cases: (the case, {answer name: value}), the lesson's first
    (the answer checked), then each hidden case where the exercise cell, run again, finished;
    `failed`: how a rerun failed, when one did (the cases after it are not run)."""

    samples: list[tuple[Case, dict]]
    failed: str | None = None
    assigned: frozenset[str] = frozenset()  # the answer names the exercise cell assigns

    @property
    def lesson(self) -> dict:
        """The names of the lesson's case (its trees)."""
        return self.samples[0][0].names

    def near(self, near: Near, name: str) -> list:
        """`near`'s near-misses at the lesson's case, each leaf kept where it explains `name`'s value
        at every case (else NaN, which nothing equals): a diagnosis is said only when it holds there."""
        lesson_case, *others = self.samples
        kept = near(lesson_case[0].names)
        for case, answers in others if name in self.assigned else ():
            got = answers.get(name)
            kept = [(_masked(v, got, there), s) for (v, s), (there, _) in zip(kept, near(case.names))]
        return kept if self.failed is None else [(_masked(v, None, v), s) for v, s in kept]


def _masked(value, got, there):
    if isinstance(value, dict):
        got = got if isinstance(got, dict) else {}
        return {k: _masked(v, got.get(k), there[k]) for k, v in value.items()}
    np = tools.np
    try:  # the same values in any order and shape: the check's own comparison decides at the lesson's case
        a, b = np.asarray(got, dtype=float).ravel(), np.asarray(there, dtype=float).ravel()
        same = a.size == b.size and close(np.sort(a), np.sort(b))
    except Exception:  # noqa: BLE001 - a value that is not numbers explains nothing
        same = False
    return value if same else np.full(np.shape(value), np.nan)


def at_cases(ex: Exercise, answer, context: CheckContext) -> Seen:
    """`answer` at each of `ex`'s cases (`Seen`): the exercise cell run again at each hidden one."""
    every = ex.answer_names
    answers = answer if isinstance(answer, dict) and len(every) > 1 else {every[0]: answer}
    cases = ex.cases(context.rng)  # type: ignore[misc]  # a value exercise declares its cases
    lesson_case = next(cases)
    seen = Seen([(lesson_case, answers)])
    try:
        tree = ast.parse(cell_python(context.cell) or "")
    except SyntaxError:
        return seen
    stored = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    seen.assigned = frozenset(stored & set(every))
    for case in cases if seen.assigned else ():
        rerun = rerun_at(context, case, lesson_case)
        if rerun is None:
            break
        run, ns = rerun
        if not run.ok:
            seen.failed = (describe_failure(run, what="it", budget=RERUN_BUDGET, hidden=True) or "").removeprefix("it ")
            break
        seen.samples.append((case, {name: ns.get(name) for name in every}))
    return seen


def follows_the_lesson(
    outcome: Outcome, seen: Seen, name: str, changes: str, move: str, near: Near = lambda names: []
) -> Outcome:
    """`outcome` (answer `name` graded at the lesson's case), unless it passed and the cell's `name`
    is wrong at a hidden case (`changes`: the names that change; `move` says how to compute it): then
    a near-miss that explains every case is said, else that the value does not follow them."""
    (_, answers), *others = seen.samples
    if not outcome.passed or name not in seen.assigned:
        return outcome
    wrong = [got for case, got in others if not any(_same_tree(got[name], r) for r in case.right[name])]
    slip = next((s for v, s in seen.near(near, name) if _same_tree(answers.get(name), v)), None)
    if seen.failed is not None:
        problem = (
            f"{name}: your cell, run again with other values in {changes} (to see that the answer is computed "
            f"from them), {seen.failed.rstrip('.')}. Compute the answer from {changes}, not from the lesson's numbers."
        )
    elif not wrong:
        return outcome
    elif slip is not None:
        problem = f"{name}: right at the lesson's values, but not at others: {slip}"
    elif _same_tree(wrong[0][name], answers.get(name)):
        changing = f"{changes} change" if " and " in changes else f"`{changes}` changes"
        problem = f"{name}: this value does not change when {changing}: {move}."
    else:
        problem = (
            f"{name}: right for the lesson's {changes}, but not when {changes} hold other values: {move}, "
            "without numbers of the lesson written in."
        )
    return Outcome(0, outcome.total_cases, [problem], unit=outcome.unit)
