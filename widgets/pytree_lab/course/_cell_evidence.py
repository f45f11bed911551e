"""Evidence from the exercise cell: a value answer is run again at other lesson parameters, in a
copy of the notebook's namespace, and must follow them; a function the cell defined is asked
what is wrong."""

from __future__ import annotations

import ast
import dataclasses
import secrets
from typing import Any

from .. import lesson
from ..exercises._grading import (
    CheckResult,
    Exercise,
    _as_number_array,
    _close,
    _fmt_num,
    _jax,
    _jnp,
    _np,
    _type_name,
)
from ..exercises._guard import describe_failure, run_guarded
from ..exercises.evidence import default_evidence
from ._value_graders import (
    _KEYS_SWAPPED,
    _SWAPPED,
    _ZIP,
    _ZIP_KEYS,
    _lesson_loss,
    _lesson_setup,
    _nested_loss,
    _nested_params,
    _same_tree,
)

# --------------------------------------------------------------------------- evidence from the cell
# A value answer (norm_squared, g, fixed) must be computed: the exercise cell is run again, in a
# copy of the notebook's namespace, at other lesson parameters (with their own gradients), and
# the answer must follow them. A function the cell defined (nested_loss) is asked what is wrong.

RERUNS = 2  # other parameter points per check
RERUN_BUDGET = 10.0


def _cell_python(cell) -> str | None:
    code = getattr(cell, "code", "") or ""
    if code.lstrip().startswith("%%exercise"):
        code = code.lstrip().split("\n", 1)[1] if "\n" in code.lstrip() else ""
    if not code.strip():
        return None
    try:
        from IPython import get_ipython

        shell = get_ipython()
        if shell is not None:
            code = shell.transform_cell(code)
    except Exception:  # noqa: BLE001 - plain Python is compiled as it is
        pass
    return code


def _lesson_point(params) -> dict[str, Any]:
    """The lesson's trees at a parameter point: what the notebook's names hold there."""
    jax = _jax()
    _, x, target, lr = _lesson_setup()
    value, grads = jax.value_and_grad(_lesson_loss)(params, x, target)
    updated = jax.tree.map(lambda p, g: p - lr * g, params, grads)
    return {"params": params, "grads": grads, "value": value, "updated": updated}


def _variant_namespace(namespace: dict, code: str, point: dict, lesson_trees: dict) -> dict:
    """A copy of the notebook's namespace for a rerun: the lesson's trees replaced by the other
    point's, under their names and under any other name that holds them (grads_apart = grads);
    containers the cell names are deep-copied, so a rerun cannot change the student's data."""
    import ast
    import copy

    ns = dict(namespace)
    try:
        loaded = {n.id for n in ast.walk(ast.parse(code)) if isinstance(n, ast.Name)}
    except SyntaxError:
        loaded = set()
    for name in loaded:
        if name not in ns or name in point:
            continue
        value = ns[name]
        swapped = next(
            (
                point[k]
                for k, tree in lesson_trees.items()
                if isinstance(value, dict) and run_guarded(_same_tree, value, tree, budget=2.0).value
            ),
            None,
        )
        if swapped is not None:
            ns[name] = swapped
        elif isinstance(value, (dict, list, set)):
            run = run_guarded(copy.deepcopy, value, budget=2.0)
            if run.ok:
                ns[name] = run.value
    ns.update(point)
    return ns


_MOVES = {
    "squared_norm": ("grads", "compute it from `grads`"),
    "nested_scale_grad": ("params", "build nested from `params` and compute g with jax.grad"),
    "repair_update": ("params and grads", "compute it from `params` and `grads` with jax.tree.map"),
}


def _rerun_expected(exercise_id: str, point: dict) -> dict[str, Any]:
    jax, jnp = _jax(), _jnp()
    if exercise_id == "squared_norm":
        value = float(sum(jnp.sum(g**2) for g in jax.tree.leaves(point["grads"])))
        return {"norm_squared": value, "manual": value}
    _, x, target, _ = _lesson_setup()
    if exercise_id == "nested_scale_grad":
        return {"g": jax.grad(_nested_loss)({"layer": point["params"], "scale": jnp.array(1.0)}, x, target)}
    return {"fixed": point["updated"]}


class _NoAsserts(ast.NodeTransformer):
    def visit_Assert(self, node):  # noqa: N802 - ast's naming
        return ast.copy_location(ast.Pass(), node)


def _compile_without_asserts(code: str):
    """The cell compiled with its `assert` lines left out (they check the lesson's own numbers)."""
    tree = _NoAsserts().visit(ast.parse(code))
    ast.fix_missing_locations(tree)
    return compile(tree, "<your exercise cell, on a hidden case>", "exec")


def _rerun_problems(ex: Exercise, answer, cell, rng) -> dict[str, str]:
    """name -> what the reruns showed about it, for the answer names the cell assigns."""
    namespace = getattr(cell, "namespace", None)
    code = _cell_python(cell)
    if namespace is None or code is None:
        return {}
    try:
        assigned = {n.id for n in ast.walk(ast.parse(code)) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
        compiled = _compile_without_asserts(code)
    except SyntaxError:
        return {}
    names = [n.strip() for n in ex.answer_name.split(",") if n.strip()]
    answers = answer if isinstance(answer, dict) and len(names) > 1 else {names[0]: answer}
    names = [n for n in names if n in assigned]
    if not names:
        return {}
    np = _np()
    rng = np.random.default_rng(secrets.randbits(128)) if rng is None else rng
    lesson_trees = _lesson_point(lesson.lesson_params())
    changes, move = _MOVES[ex.id]
    problems: dict[str, str] = {}
    # a rerun is a probe, not the student's work: what it records (a plain cell that calls
    # record_output, say) is taken out of the evidence again
    log = default_evidence()
    kept = {kind: len(getattr(log, kind)) for kind in ("predictions", "checks", "quiz", "outputs", "reveals")}
    try:
        _rerun_points(ex, compiled, code, namespace, names, answers, rng, lesson_trees, changes, move, problems)
    finally:
        for kind, n in kept.items():
            del getattr(log, kind)[n:]
    return problems


def _rerun_points(ex, compiled, code, namespace, names, answers, rng, lesson_trees, changes, move, problems):
    np = _np()
    for _ in range(RERUNS):
        jnp = _jnp()
        params = {
            "weight": jnp.asarray(rng.normal(size=2).astype(np.float32) * 1.5),
            "bias": jnp.asarray(np.float32(rng.normal() * 1.5)),
        }
        point = _lesson_point(params)
        ns = _variant_namespace(namespace, code, point, {k: lesson_trees[k] for k in ("params", "grads", "updated")})
        run = run_guarded(exec, compiled, ns, budget=RERUN_BUDGET)
        if not run.ok:
            why = describe_failure(run, what="it", budget=RERUN_BUDGET, hidden=True).removeprefix("it ")
            for name in names:
                problems.setdefault(
                    name,
                    (
                        f"{name}: your cell, run again with other values in {changes} (to see that the answer is "
                        f"computed from them), {why.rstrip('.')}. Compute the answer from {changes}, not from the "
                        "lesson's numbers."
                    ),
                )
            break
        expected = _rerun_expected(ex.id, point)
        for name in names:
            if name in problems:
                continue
            got = ns.get(name)
            if run_guarded(_same_tree, got, expected[name], budget=2.0).value:
                continue
            if run_guarded(_same_tree, got, answers.get(name), budget=2.0).value:
                problems[name] = (
                    f"{name}: this value does not change when `{changes.split(' and ')[-1]}` changes: {move}."
                )
                if ex.id == "repair_update":
                    problems[name] = f"{name}: this value does not change when {changes} change: {move}."
            else:
                problems[name] = (
                    f"{name}: right for the lesson's {changes}, but not when {changes} hold other "
                    f"values: {move}, without numbers of the lesson written in."
                )


def _with_cell_evidence(ex: Exercise, result: CheckResult, answer, cell, rng) -> CheckResult:
    lines = result.feedback.splitlines()
    passed_cases = result.cases_passed
    if ex.id == "nested_scale_grad" and not result.passed:
        found = run_guarded(_nested_evidence, getattr(cell, "namespace", None), budget=RERUN_BUDGET)
        if found.ok and found.value:
            # the evidence says it first; the tree-level sentences that say the same go
            same = ("holds the parameter value", "gradient of the residual", "is 0: the loss does not depend")
            lines = (
                lines[:1]
                + [f"- {found.value}"]
                + [line for line in lines[1:] if not any(words in line for words in same)]
            )
        return dataclasses.replace(result, feedback="\n".join(lines))
    if not result.passed and ex.id == "repair_update":
        code = getattr(cell, "code", "") or ""
        if "zip(" in code:
            result = dataclasses.replace(
                result,
                feedback=result.feedback.replace(f"- {_SWAPPED}", f"- {_ZIP}").replace(
                    f"- {_KEYS_SWAPPED}", f"- {_ZIP_KEYS}"
                ),
            )
        return result
    if not result.passed and ex.id != "squared_norm":
        return result
    problems = _rerun_problems(ex, answer, cell, rng)
    if not problems:
        return result
    if ex.id == "squared_norm":
        for name, problem in problems.items():
            for i, line in enumerate(lines):
                if line.startswith(f"{name}: Correct"):
                    lines[i] = problem
                    passed_cases -= 1
        right = max(passed_cases, 0)
        if lines and lines[0].endswith("values right."):
            lines[0] = f"{right} of 2 values right."
        total = max(result.cases_total, 1)
        return dataclasses.replace(
            result, passed=False, score=right / total, feedback="\n".join(lines), cases_passed=right
        )
    problem = next(iter(problems.values()))
    return dataclasses.replace(result, passed=False, score=0.0, cases_passed=0, feedback=problem)


def _nested_evidence(namespace) -> str | None:
    """The first thing wrong, found from the student's own nested and nested_loss: the tree,
    then the loss's value at the start (squared?), then which leaves it does not depend on,
    then whether g is its gradient. None when the evidence is not there."""
    if not isinstance(namespace, dict):
        return None
    jax = _jax()
    nested, nested_loss, g = namespace.get("nested"), namespace.get("nested_loss"), namespace.get("g")
    want = _nested_params()
    if nested is None or not callable(nested_loss):
        return None
    if not _same_tree(nested, want):
        return (
            'nested is not {"layer": params, "scale": 1.0}: build it from params, with scale a float '
            "scalar equal to 1 (jnp.array(1.))."
        )
    value = _as_number_array(nested_loss(nested))
    _, x, target, _ = _lesson_setup()
    if value is None or value.size != 1:
        return (
            f"nested_loss(nested) returns {_type_name(nested_loss(nested))}; it must return one number, "
            "the squared error (pred - 3.) ** 2."
        )
    value = float(value.reshape(()))
    right = float(_nested_loss(want, x, target))
    if not _close(value, right):
        residual = float(_nested_loss(want, x, target) ** 0.5) * -1.0
        if _close(value, residual):
            return (
                f"nested_loss returns {_fmt_num(value)} at the start: that is the residual pred − 3, not the "
                "squared error. Square it: return (pred - 3.) ** 2."
            )
        return (
            f"nested_loss returns {_fmt_num(value)} at the start; the squared error there is "
            f"{_fmt_num(right)} (prediction 1, target 3): return (pred - 3.) ** 2."
        )
    theirs = jax.grad(nested_loss)(nested)
    reference = jax.grad(_nested_loss)(want, x, target)
    flat_theirs, flat_ref = _leaves_paths(theirs), _leaves_paths(reference)
    unused = [
        path
        for path, ref in flat_ref.items()
        if path in flat_theirs and not _np().any(_np().asarray(flat_theirs[path])) and _np().any(_np().asarray(ref))
    ]
    if unused:
        reads = ", ".join(f"p{path}" for path in unused)
        return (
            f"nested_loss does not depend on {reads} (its gradient there is 0): the loss reads "
            f"{'that leaf' if len(unused) == 1 else 'those leaves'} from outside (params?) instead of "
            "through its argument p. JAX differentiates only what the loss computes from p: "
            'read every leaf through p, as p["layer"]["weight"].'
        )
    if g is not None and not _same_tree(g, theirs):
        return "g is not the gradient of your nested_loss at nested: g = jax.grad(nested_loss)(nested)."
    return None


def _leaves_paths(tree) -> dict[str, Any]:
    jax = _jax()
    flat, _ = jax.tree_util.tree_flatten_with_path(tree)
    return {jax.tree_util.keystr(path): leaf for path, leaf in flat}
