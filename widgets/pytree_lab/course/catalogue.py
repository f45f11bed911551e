"""The course's exercises: graders, hints, hidden-case sizes and reference solutions.

Every expected value is computed when a check runs, with `jax.grad` of a reference loss (real
JAX; the Lite engine in a JupyterLite kernel) from the lesson model in `pytree_lab.lesson`:
nothing here is a typed-in answer. Only `_self_check` holds the lesson's hand-derived numbers,
to catch a kernel whose jax / numpy was replaced under the checker.

Function answers run on the task's worked example plus hidden cases whose values are drawn,
one case at a time and only after the previous case was graded, from a generator seeded by the
operating system; feedback may describe a hidden case's size (N examples, d features) but never
its inputs or its expected output. Each case runs guarded (`exercises.run_guarded`).

The value exercises' graders are in `_value_graders`, the packed-parameters exercise's cases in
`_flat_cases`, the re-runs of an exercise cell in `_cell_evidence`; this module holds the registry,
`check()`, the function grader and the reference solutions.
"""

from __future__ import annotations

import secrets
from typing import Any

from .. import lesson as lesson  # the lesson model the graders use (catalogue.lesson)
from ..exercises import _grading, _integrity
from ..exercises._grading import (
    CheckResult,
    Exercise,
    Outcome,
    _as_number_array,
    _close as _close,  # guarded against replacement here too
    _jnp,
    _np,
    _type_name,
    grade_answer,
)
from ..exercises._guard import describe_failure, exception_text, run_guarded
from ..exercises.evidence import Evidence, default_evidence
from ._cell_evidence import _with_cell_evidence
from ._flat_cases import (
    _FLAT_EXAMPLE_PARAMS,
    _FLAT_EXAMPLE_X,
    _HIDDEN_SIZES,
    _cases_label,
    _diagnose_flat_output,
    _flat_grad_fn,
    _FlatCase,
    _FlatReferences,
    _hidden_case,
    _worked_case,
)
from ._value_graders import _grade_nested_scale_grad, _grade_repair_update, _grade_squared_norm, _lesson_step

__all__ = ["EXERCISES", "check", "exercise"]


def _self_check() -> str | None:
    """The checker's tools against the lessons' hand derivations (loss 4, grads [-8, -4] and -4,
    the packed example's [8, 12, 4]). None when they agree."""
    try:
        _, grads, _, loss, loss_after = _lesson_step()
        weight = [float(v) for v in grads["weight"]]
        bias = float(grads["bias"])
        flat = _flat_grad_fn()(_jnp().array(_FLAT_EXAMPLE_PARAMS), _jnp().array(_FLAT_EXAMPLE_X))
        flat = [float(v) for v in flat]
    except BaseException as exc:  # noqa: BLE001
        return f"computing the lesson's worked example failed ({exception_text(exc)})."
    ok = (
        abs(loss - 4.0) < 1e-6
        and abs(weight[0] + 8) < 1e-5
        and abs(weight[1] + 4) < 1e-5
        and abs(bias + 4) < 1e-5
        and abs(loss_after - 0.64) < 1e-5
        and len(flat) == 3
        and all(abs(a - b) < 1e-4 for a, b in zip(flat, (8.0, 12.0, 4.0)))
    )
    if not ok:
        return (
            "jax or numpy in this kernel no longer computes the lesson's worked example "
            "(loss 4, gradients [-8, -4] and -4): something replaced one of their functions."
        )
    return None


CASE_BUDGET = 10.0  # seconds of student code per case (first calls compile: generous)


def _grade_grad_over_flat_params(answer, rng=None) -> Outcome:
    np = _np()
    jnp = _jnp()
    if not callable(answer):
        arr = _as_number_array(answer)
        line = f"Pass your function grad_over_flat_params itself, not {_type_name(answer)}."
        if arr is not None:
            line += (
                " It looks like the result of calling it: write check('grad_over_flat_params', "
                "grad_over_flat_params), without parentheses after the name."
            )
        return Outcome(0, 1, [line])
    # seeded by the operating system, never by numpy's global state: not predictable in the kernel
    rng = np.random.default_rng(secrets.randbits(128)) if rng is None else rng
    sizes = [None, *_HIDDEN_SIZES]
    cases: list[_FlatCase] = []
    passed = 0
    problems: dict[str, list[int]] = {}
    notes: list[str] = []
    outputs: list = []  # what the function returned, case by case (to see an answer written in)
    for index, size in enumerate(sizes):
        # each case exists only from here on: earlier answers cannot see later inputs
        case = _worked_case() if size is None else _hidden_case(rng, *size)
        cases.append(case)
        # fresh arrays per call: a function that changes its inputs cannot affect later cases
        run = run_guarded(
            answer,
            jnp.asarray(case.flat_params.copy()),
            jnp.asarray(case.x.copy()),
            budget=CASE_BUDGET,
            once_stuck=True,
        )
        tampered = [n for n in run.replaced if n.split(".")[0] not in ("jax", "numpy", "builtins")]
        if tampered:
            return Outcome(
                0,
                len(sizes),
                [
                    "Your code changed the checker itself (" + ", ".join(tampered) + "). It was put back; "
                    "this check does not count. Check again with a function that only computes."
                ],
                passed=False,
            )
        # the expected gradient is computed only after the student's code has returned, so no
        # frame or object reachable while it runs holds it
        if not run.ok:
            problem = describe_failure(run, what="your function", budget=CASE_BUDGET, hidden=case.hidden)
        else:
            looked = run_guarded(_grading.tree_problem, run.value, "your function's result", budget=CASE_BUDGET)
            problem = looked.value if looked.ok else None
            if problem is None:
                problem = _diagnose_flat_output(run.value, case, _FlatReferences(case))
            out = _as_number_array(run.value)
            if out is not None:
                outputs.append(out)
        for note in _grading_notes(run):
            if note not in notes:
                notes.append(note)
        if problem is None:
            passed += 1
        else:
            problems.setdefault(problem, []).append(index)
        if run.timed_out:  # one endless loop is enough: do not wait for it once per case
            for rest in range(index + 1, len(sizes)):
                size = sizes[rest]
                cases.append(
                    _worked_case()
                    if size is None
                    else _FlatCase(np.zeros(size[1] + 1, np.float32), np.zeros(size, np.float32), True)
                )
                problems[problem].append(rest)  # type: ignore[index]  # a timed-out case has a problem
            break
    total = len(sizes)
    hidden = total - 1
    if passed == total:
        # right numbers; the exercise asks for them from jax.grad, not from a derivation by hand
        case = _worked_case()
        run, differentiated = _grading.differentiates(
            answer, jnp.asarray(case.flat_params.copy()), jnp.asarray(case.x.copy()), budget=CASE_BUDGET
        )
        if run.ok and not differentiated:
            return Outcome(
                passed,
                total,
                [
                    f"All {total} cases give the right numbers, but your function computes them without "
                    "differentiating: no jax.grad (nor value_and_grad, vjp or jacrev) ran inside it. The "
                    "exercise asks for the gradient using jax.grad: write the loss as a function of flat_params "
                    "(the sum of squared predictions) and return jax.grad(loss)(flat_params), so JAX derives "
                    "it instead of a formula worked out by hand."
                ]
                + notes,
                passed=False,
                score=0.5,
            )
        lines = [
            f"All {total} cases pass: the worked example ([8, 12, 4] for flat_params = [1, 0, 0], "
            f"x = [[2, 3]]) and {hidden} hidden cases of other sizes."
        ]
    else:
        lines = [f"{passed} of {total} cases pass (the worked example and {hidden} hidden cases with random values)."]
        if len(outputs) > 1 and all(o.shape == outputs[0].shape and np.array_equal(o, outputs[0]) for o in outputs):
            lines.append(
                "Your function returned the same array in every case, although each case has other "
                "flat_params and x: it does not compute from its inputs (is the worked example's answer "
                "written into it?)."
            )
        for problem, indices in problems.items():
            lines.append(f"- {_cases_label(indices, cases)}: {problem}")
    return Outcome(passed, total, lines + notes)


def _grading_notes(run) -> list[str]:
    from ..exercises._guard import notes_for

    return notes_for(run)


# --------------------------------------------------------------------------- reference solutions
# Shown only after an attempt (CheckButton.reveal_solution): the seeds' own reference solutions.

_SOLUTION_NORM = """\
# Transform every leaf of the gradient pytree, then add the leaves' sums.
norm_squared = sum(jnp.sum(g ** 2) for g in jax.tree.leaves(grads))
# Aggregate the array values directly, leaf by leaf.
manual = jnp.sum(grads["weight"] ** 2) + grads["bias"] ** 2
assert jnp.allclose(norm_squared, manual)
assert jnp.allclose(norm_squared, 96.)"""

_SOLUTION_NESTED = """\
nested = {"layer": params, "scale": jnp.array(1.)}
def nested_loss(p):
    pred = p["scale"] * (jnp.dot(p["layer"]["weight"], x) + p["layer"]["bias"])
    return (pred - 3.) ** 2
g = jax.grad(nested_loss)(nested)
assert jax.tree.structure(g) == jax.tree.structure(nested)
assert jnp.allclose(g["scale"], -4.)"""

_SOLUTION_REPAIR = """\
try:
    jax.tree.map(lambda p, g: p - 0.05 * g, params, {"weight": grads["weight"]})
except ValueError:
    print("Expected tree mismatch")
else:
    raise AssertionError("Expected a missing-key failure")
fixed = jax.tree.map(lambda p, g: p - 0.05 * g, params, grads)
assert jnp.allclose(loss(fixed), 0.64, atol=1e-6)"""

_SOLUTION_PACKED = """\
def grad_over_flat_params(flat_params, x):
    def loss(p):
        # slice inside the loss, so JAX follows how the loss depends on flat_params
        weights, bias = p[:-1], p[-1]
        predictions = x @ weights + bias
        return jnp.sum(predictions ** 2)   # a sum, not a mean
    return jax.grad(loss)(flat_params)

# the task's worked example: prediction 2, so [2*2*2, 2*2*3, 2*2] = [8, 12, 4]
print(grad_over_flat_params(jnp.array([1.0, 0.0, 0.0]), jnp.array([[2.0, 3.0]])))"""


# --------------------------------------------------------------------------- registry and check()

EXERCISES: dict[str, Exercise] = {
    exercise.id: exercise
    for exercise in (
        Exercise(
            "squared_norm",
            "Make it yours",
            "Compute the squared norm of all gradient leaves (norm_squared), and again by adding the "
            "weight and bias contributions directly (manual).",
            "number",
            _grade_squared_norm,
            lesson="Pytrees and structured parameters",
            answer_name="norm_squared, manual",
            solutions=(_SOLUTION_NORM,),
            self_check=_self_check,
            unit="values",
        ),
        Exercise(
            "nested_scale_grad",
            "Extend to a nested model",
            'The gradient tree g of nested_loss at {"layer": params, "scale": 1.0}.',
            "tree",
            _grade_nested_scale_grad,
            lesson="Pytrees and structured parameters",
            answer_name="g",
            solutions=(_SOLUTION_NESTED,),
            self_check=_self_check,
            unit="leaves",
        ),
        Exercise(
            "repair_update",
            "Repair a mismatched update tree",
            "The updated parameter tree (fixed) after restoring bias in the gradient tree.",
            "tree",
            _grade_repair_update,
            lesson="Pytrees and structured parameters",
            answer_name="fixed",
            solutions=(_SOLUTION_REPAIR,),
            self_check=_self_check,
            unit="leaves",
        ),
        Exercise(
            "grad_over_flat_params",
            "Gradient of packed parameters",
            "A function grad_over_flat_params(flat_params, x) returning the gradient of the sum of "
            "squared predictions with respect to flat_params (weights, then bias).",
            "function",
            _grade_grad_over_flat_params,
            lesson="Gradient of packed parameters",
            answer_name="grad_over_flat_params",
            solutions=(_SOLUTION_PACKED,),
            self_check=_self_check,
            unit="cases",
        ),
    )
}


_integrity.seal_mapping("the exercise catalogue", EXERCISES)  # an entry replaced later is put back


def exercise(exercise_id: str) -> Exercise:
    if exercise_id not in EXERCISES:
        raise ValueError(f"unknown exercise {exercise_id!r}; the exercises are: {', '.join(EXERCISES)}")
    return EXERCISES[exercise_id]


def check(
    exercise_id: str,
    answer: Any = None,
    *,
    rng=None,
    evidence: Evidence | None = None,
    stale: str | None = None,
    code: str | None = None,
    cell=None,
    **named: Any,
) -> CheckResult:
    """Grade `answer` for the exercise `exercise_id` and record the result as evidence.

    Never raises for a wrong, broken or hostile answer: the result says what happened.
    `check("squared_norm", norm_squared, manual=manual)` grades both values of "Make it yours".
    `rng` (a numpy Generator) draws the hidden cases of function exercises; by default a fresh one
    seeded by the operating system per check.
    """
    ex = exercise(exercise_id)
    if named:
        answer = {**({ex.answer_name.split(",")[0].strip(): answer} if answer is not None else {}), **named}
    _grading.bind_tools()
    result = grade_answer(ex, answer, rng=rng, stale=stale)
    if stale is None and cell is not None and not _grading.is_unanswered(answer) and ex.answer_kind != "function":
        result = _with_cell_evidence(ex, result, answer, cell, rng)
    if stale is not None or not _grading.is_unanswered(answer):  # a cell that raised is recorded with its error
        log = evidence if evidence is not None else default_evidence()
        log.add_check(ex, result, answer, code=code, error=stale or "")
    return result
