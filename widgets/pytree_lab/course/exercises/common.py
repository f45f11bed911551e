"""What the course's exercises share: the lesson model they grade against (`pytree_lab.lesson`),
computed with `jax.grad` when a check runs, a tree comparison, and the checker's self-check."""

from __future__ import annotations

import ast
import os
import pathlib

from ... import lesson
from ...exercises import Exercise, as_number_array, close, exception_text, tools


def _lesson_setup():
    """The lesson model's params, x, target and learning rate (pytree_lab.lesson)."""
    inputs = lesson.lesson_inputs()
    return lesson.lesson_params(), inputs["x"], inputs["target"], lesson.LEARNING_RATE


def lesson_point(params=None) -> dict:
    """The lesson's trees at a parameter point (the lesson's own by default), computed with jax: what
    the notebook's names hold there."""
    jax, params = tools.jax, lesson.lesson_params() if params is None else params
    _, x, target, lr = _lesson_setup()
    value, grads = jax.value_and_grad(lesson.lesson_loss)(params, x, target)
    updated = jax.tree.map(lambda p, g: p - lr * g, params, grads)
    return {"params": params, "grads": grads, "value": value, "updated": updated}


def _same_tree(a, b, top: bool = True) -> bool:
    """`a` equals `b` leaf for leaf (an answer of one number may have any shape of one value, as the
    check reads it); False where reading `a` fails. The one comparison of the check and the grader."""
    try:
        if isinstance(b, dict):
            return isinstance(a, dict) and set(a) == set(b) and all(_same_tree(a[k], b[k], False) for k in b)
        arr, want = as_number_array(a), tools.np.asarray(b)
        if arr is not None and top and want.ndim == 0 and arr.size == 1:
            arr = arr.reshape(())
        return arr is not None and arr.shape == want.shape and bool(close(arr, want))
    except Exception:  # noqa: BLE001 - a student's object that cannot be read is not the same
        return False


# course_source/solutions/<id>.py of a checkout: outside content/ (what students open), not in the package
SOLUTIONS = pathlib.Path(__file__).resolve().parents[4] / "course_source" / "solutions"


def reference_solution(exercise_id: str) -> tuple[str, ...]:
    """The exercise's reference solution, `<id>.py` in the folder `$PYTREE_LAB_SOLUTIONS` names (the
    instructor's; `pytree-lab nbgrader --solutions` sets it) or else a checkout's
    `course_source/solutions`, where that file is found: an installed package holds none."""
    path = pathlib.Path(os.environ.get("PYTREE_LAB_SOLUTIONS") or SOLUTIONS) / f"{exercise_id}.py"
    return (path.read_text(encoding="utf-8").rstrip("\n"),) if path.is_file() else ()


def graded_exercise(exercise_id: str, title: str, task: str, answer_kind: str, grade, **fields) -> Exercise:
    """An exercise nbgrader grades (`fields`: its points, unit...), with its reference solution,
    the checker's self-check and the feedback said plainly."""
    return Exercise(
        exercise_id,
        title,
        task,
        answer_kind,
        grade,
        solutions=reference_solution(exercise_id),
        graded=True,
        explain=said_plainly,
        **fields,
    )


_JAX_HINTS = (
    (
        ("Output was None",),
        "The function returns None: did you forget `return`?",
    ),
    (
        ("scalar-output functions",),
        "jax.grad needs a loss that returns one number, and this one returns an array: add it up "
        "(jnp.sum) before returning it.",
    ),
    (
        ("contracting dimensions", "Incompatible shapes for dot", "matmul"),
        "The shapes in a product do not match: in x @ w, x's last axis and w must have the same length "
        "(in the packed lesson: x as given, not x.T, and w = flat_params[:-1], not all of flat_params).",
    ),
    (
        ("TracerArrayConversionError", "__array__() was called on traced", "ConcretizationTypeError"),
        "numpy cannot compute on the values jax.grad traces: use jnp (jax.numpy) inside the function you "
        "differentiate, not np.",
    ),
    (
        ("real- or complex-valued inputs",),
        "A leaf holds whole numbers (an int array): jax.grad differentiates floats only. Write it as a "
        "float: jnp.array(1.), with the point.",
    ),
)


def jax_hint(error: BaseException | str | None) -> str:
    """A sentence (with a leading space) on what JAX's error means for a student, or ""."""
    if error is None:
        return ""
    text = error if isinstance(error, str) else exception_text(error, limit=10_000)
    if text.startswith("KeyError: "):
        return (
            f" The dictionary it was read from has no key {text.removeprefix('KeyError: ')}: check the name, "
            "and the level of the tree it sits at (describe(tree) lists every path)."
        )
    return next((" " + hint for needles, hint in _JAX_HINTS if any(needle in text for needle in needles)), "")


def cell_hint(error: BaseException | str | None, code: str) -> str:
    """What JAX's error means for a student ("" when there is nothing to add), with the function
    named when the one function the cell defines returned None: said under the cell and on its card."""
    hint = jax_hint(error).strip()
    if hint.startswith("The function returns None"):
        body = code.split("\n", 1)[-1] if code.lstrip().startswith("%%") else code
        try:
            defined = [n.name for n in ast.walk(ast.parse(body)) if isinstance(n, ast.FunctionDef)]
        except SyntaxError:
            defined = []
        if len(defined) == 1:
            hint = hint.replace("The function", defined[0], 1)
    return hint


def said_plainly(ex, result, context) -> str | None:
    """The feedback with what the cell shows said plainly, or None when there is nothing to add:
    JAX's error explained (the function named when it returned None), and an answer name the cell
    set to None (`norm_squared = print(...)`) told so, not "replace the `...`"."""
    cell = context.cell
    code = getattr(cell, "code", "") or ""
    if context.stale is not None:
        hint = cell_hint(context.stale, code)
        return f"{result.feedback}\n{hint}" if hint else None
    namespace = getattr(cell, "namespace", None) or {}
    held = [n for n in ex.answer_names if n in namespace and namespace[n] is None]
    if not held or ex.answer_kind == "function":
        return None
    lines = result.feedback.splitlines()
    for name in held:
        why = (
            "print() shows a value but returns None"
            if "print(" in code
            else "the expression assigned to it gives nothing (a function without `return` returns None)"
        )
        sentence = f"{name} is None: {why}. Assign the value itself: {name} = <the expression>."
        lines = [
            sentence if line.startswith(("Not answered yet", f"{name}: not answered yet")) else line for line in lines
        ]
    return "\n".join(lines)
