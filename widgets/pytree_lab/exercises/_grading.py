"""Grading helpers every exercise shares: results, number answers, lesson-style text.

Nothing here knows a course: an exercise (`Exercise`) brings its own grader, and the helpers
explain a wrong number, or a wrong tree (graded against a `_TreeSpec`), in pytree terms (a missing
key and its path, a wrong shape, a swapped leaf, a value that belongs elsewhere).
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib
import math
import re
import sys
from collections.abc import Callable, Iterator
from typing import Any

from ..diagnose import diagnose
from ..formatting import clip, fmt_array, fmt_number
from ..tree_model import dtype_shape_label
from ..trees import TreeError, check_tree

# --------------------------------------------------------------------------- compute helpers
# numpy and jax are imported on first use: `import pytree_lab` must work in a kernel without them.


_TOOLS: dict[str, Any] = {}


def bind_tools() -> None:
    """Bind numpy and the engine's jax / jax.numpy now (the course does this when imported)."""
    from ..engine import get_engine

    if "np" not in _TOOLS:
        import numpy
        import numpy.random  # a lazily loaded submodule in numpy 2

        _TOOLS["np"] = numpy
    engine = get_engine()
    if _TOOLS.get("engine") is not engine:
        jax = engine.jax
        for sub in ("tree", "tree_util", "flatten_util"):
            with contextlib.suppress(ImportError):  # every engine has them
                importlib.import_module(f"{jax.__name__}.{sub}")
        _TOOLS.update(engine=engine, jax=jax, jnp=engine.numpy)


def _tool(name: str):
    if name not in _TOOLS:
        bind_tools()
    return _TOOLS[name]


class _Tools:
    """The checker's numpy (`tools.np`), the engine's jax (`tools.jax`) and jax.numpy (`tools.jnp`),
    frozen when bound: `tools.jnp.sum` stays the real one after a notebook's `jnp.sum = ...`."""

    np = property(lambda self: _tool("np"))
    jax = property(lambda self: _tool("jax"))
    jnp = property(lambda self: _tool("jnp"))


tools = _Tools()


# --------------------------------------------------------------------------- results


@dataclasses.dataclass(frozen=True)
class CheckResult:
    """The outcome of one check: `passed`, `score` (0..1, partial credit per case or leaf) and
    `feedback` (what is right or wrong, in the lesson's terms)."""

    passed: bool
    score: float
    feedback: str
    exercise_id: str = ""
    cases_passed: int = 0
    cases_total: int = 0
    unit: str = "parts"

    def __str__(self) -> str:
        verdict = "Passed" if self.passed else "Not yet"
        return f"{verdict} — {self.exercise_id}: score {self.score:.2f}\n{self.feedback}"

    def _repr_pretty_(self, printer, cycle) -> None:  # IPython shows the readable form
        printer.text(str(self))


@dataclasses.dataclass
class Outcome:
    passed_cases: int
    total_cases: int
    lines: list[str]
    passed: bool | None = None  # None: passed when every case passed
    unit: str = ""  # what the counted parts are ("leaves", "cases"); the exercise's unit when ""
    score: float | None = None  # None: the share of parts passed (1 when passed)

    def __post_init__(self) -> None:
        if self.passed is None:
            self.passed = self.passed_cases == self.total_cases
        if self.score is None:
            self.score = 1.0 if self.passed else min(self.passed_cases / max(self.total_cases, 1), 1.0)


@dataclasses.dataclass(frozen=True)
class Case:
    """One point an exercise is graded at, declared once for the practice check and the grader:
    the notebook names set before its cell runs again (value answers) or the arguments the answer
    function is called with, and each answer name's right values (any of them is right)."""

    label: str
    right: dict[str, list] = dataclasses.field(repr=False)
    names: dict[str, Any] = dataclasses.field(default_factory=dict, repr=False)
    args: tuple = dataclasses.field(default=(), repr=False)


@dataclasses.dataclass(frozen=True)
class Exercise:
    """One auto-checked exercise: its id, title, what the answer is and how it is graded."""

    id: str
    title: str
    task: str
    answer_kind: str  # "number", "tree" or "function"
    grade: Callable[..., Outcome] = dataclasses.field(repr=False)
    lesson: str = ""
    # the notebook variable that holds the answer (`norm_squared`), for the check widget
    answer_name: str = ""

    @property
    def answer_names(self) -> tuple[str, ...]:
        """The notebook names the answer is held under: "g, fixed" -> ("g", "fixed")."""
        return tuple(answer_names(self.answer_name))

    # the reference solution(s), shown only after an attempt (`CheckButton.reveal_solution`)
    solutions: tuple[str, ...] = dataclasses.field(default=(), repr=False)
    # graded elsewhere (nbgrader, with these points): the reveal shows no solution
    graded: bool = False
    points: float = 1.0
    # the feedback said plainly from what the cell shows (its error, a name set to None), or None
    explain: Callable[[Any, Any, Any], str | None] | None = dataclasses.field(default=None, repr=False)
    # seconds of student code per case (function answers) / per check (values)
    budget: float = 10.0
    # how a count of graded parts is called in the feedback ("leaves", "cases", "parts")
    unit: str = "parts"
    # `cases(rng)`: the lesson's case, then hidden ones drawn from `rng`, one at a time (an
    # iterator): the practice check reruns the cell on them, nbgrader's grader grades on them
    cases: Callable[[Any], Iterator[Case]] | None = dataclasses.field(default=None, repr=False)


# --------------------------------------------------------------------------- formatting


def _fmt(value) -> str:
    """Lesson-style text for a number or a small array: 8, [1.4, -0.8]."""
    arr = tools.np.asarray(value)
    return f"an array of shape {tuple(arr.shape)}" if arr.size > 12 else fmt_array(arr)


def _fmt_shape(shape) -> str:
    return "(" + ", ".join(str(n) for n in shape) + ("," if len(shape) == 1 else "") + ")"


def _type_name(value) -> str:
    for kinds, name in ((bool, "a bool"), (str, "a string"), (type(None), "None"), ((int, float), "a number")):
        if isinstance(value, kinds):
            return name
    if isinstance(value, (tuple, list)):
        return f"a {'tuple' if isinstance(value, tuple) else 'list'} of {len(value)} items"
    if isinstance(value, dict):
        return "a dict with keys " + ", ".join(repr(k) for k in value) if value else "an empty dict"
    if callable(value):
        return "a function"
    arr = _as_number_array(value)
    if arr is not None:
        return "a number" if arr.ndim == 0 else f"an array of shape {_fmt_shape(arr.shape)}"
    return f"a {type(value).__name__}"


# Significand bits (the implicit one included) of each float dtype, and of the inputs of a float32
# matrix product at JAX's default precision on each backend: a TPU rounds them to bfloat16 (one
# pass), an NVIDIA GPU since Ampere to TensorFloat-32; a CPU keeps float32. "highest" / "float32"
# keeps float32 everywhere (docs/backends.md).
_SIGNIFICAND = {"bfloat16": 8, "float16": 11, "float32": 24, "float64": 53}
_MATMUL_BITS = {"tpu": 8, "gpu": 11, "cuda": 11, "rocm": 11}
_FULL_PRECISION = {"highest", "float32", "fastest_float32"}
TYPED_RTOL = 1e-4  # the least tolerance: an answer typed with five significant digits


def number_rtol(dtype: str, backend: str = "cpu", precision: str | None = None) -> float:
    """The relative tolerance for a number computed in `dtype` on `backend` at matmul `precision`.

    The unit roundoff (2**-significand bits) of the coarsest rounding in the computation (the
    dtype's, or the matrix product's inputs' at the backend's default precision), and at least
    `TYPED_RTOL`."""
    bits = _SIGNIFICAND.get(dtype, 24)
    if dtype == "float32" and str(precision or "").lower() not in _FULL_PRECISION:
        bits = min(bits, _MATMUL_BITS.get(backend, bits))
    return max(TYPED_RTOL, 2.0**-bits)


def _kernel_rtol() -> float:
    """`number_rtol` for this kernel: JAX's float dtype, default backend and matmul precision."""
    jax = sys.modules.get("jax")
    if jax is None or not hasattr(jax, "default_backend"):  # no JAX (the Lite engine: numpy on the CPU)
        return TYPED_RTOL
    x64 = bool(getattr(jax.config, "jax_enable_x64", False))
    precision = getattr(jax.config, "jax_default_matmul_precision", None)
    return number_rtol("float64" if x64 else "float32", jax.default_backend(), precision)


def _close(actual, expected) -> bool:
    np = tools.np
    actual, expected = np.asarray(actual, dtype=float), np.asarray(expected, dtype=float)
    if actual.shape != expected.shape or not np.all(np.isfinite(actual)):
        return False
    scale = max(1.0, float(np.max(np.abs(expected))) if expected.size else 1.0)
    rtol = _kernel_rtol()
    return bool(np.allclose(actual, expected, rtol=rtol, atol=rtol / 10 * scale))


def _as_number_array(value):
    """A numpy float array for a numeric leaf, else None (strings, objects, containers)."""
    np = tools.np
    if isinstance(value, (str, bytes, dict, list, tuple)) or value is None or callable(value):
        return None
    try:
        arr = np.asarray(value)
    except Exception:
        return None
    return arr if arr.dtype.kind in "biuf" else None


# --------------------------------------------------------------------------- number answers


def _grade_number(
    answer, expected: float, variants: list[tuple[float, str]], *, what: str, per_value=None, per_leaf=None
) -> Outcome:
    np = tools.np

    def wrong(line: str) -> Outcome:
        return Outcome(0, 1, [line])

    if callable(answer):
        return wrong(f"Pass the number itself, not a function: {what}.")
    if isinstance(answer, (dict, list, tuple)):
        return wrong(
            f"Expected one number ({what}), but you passed {_type_name(answer)}. "
            "A tree keeps the leaves apart; add up the contributions of every leaf into one number."
        )
    arr = _as_number_array(answer)
    if arr is None:
        return wrong(f"Expected one number ({what}), but you passed {_type_name(answer)}.")
    if arr.size != 1:
        # leaf order is the student's choice here, so compare as sorted values
        if per_value is not None and arr.ndim == 1 and _close(np.sort(arr), np.sort(per_value)):
            hint = " — one square per value. Sum them into one number."
        elif per_leaf is not None and arr.ndim == 1 and _close(np.sort(arr), np.sort(per_leaf)):
            hint = " — one number per leaf. Add the leaves together."
        else:
            hint = ". Reduce it to one number."
        return wrong(f"Expected one number, but your answer has shape {_fmt_shape(arr.shape)}{hint}")
    value = float(arr.reshape(()))
    if not math.isfinite(value):
        return wrong(f"Your answer is {value}: check for a division by zero or an overflow.")
    if _close(value, expected):
        return Outcome(1, 1, [f"Correct: {what} is {fmt_number(value)}."])
    matches = [message for candidate, message in variants if _close(value, candidate)]
    if matches:
        return wrong(f"You gave {fmt_number(value)}. " + " Or: ".join(matches))
    return wrong(f"You gave {fmt_number(value)}, which is not {what}.")


# --------------------------------------------------------------------------- tree answers


def _leaves_by_path(tree) -> dict[str, Any]:
    """keystr path -> leaf, in JAX's flatten order; None counts as a leaf so it can be named."""
    jax = tools.jax
    flat, _ = jax.tree_util.tree_flatten_with_path(tree, is_leaf=lambda node: node is None)
    return {jax.tree_util.keystr(path): leaf for path, leaf in flat}


_LAST_KEY = re.compile(r"(\[[^\[\]]*\]|\.[A-Za-z_]\w*)$")


def _last_key(path: str) -> str:
    found = _LAST_KEY.search(path)
    return found.group(1) if found else path


def _kind_of_container(tree) -> str:
    return "dict" if isinstance(tree, dict) else "sequence" if isinstance(tree, (list, tuple)) else "other"


@dataclasses.dataclass(frozen=True)
class _TreeSpec:
    """How to grade a tree answer: the expected tree, what it is called, trees a wrong answer
    often equals (each with a sentence explaining that mistake) and per-path hints."""

    expected: Any
    name: str  # "the gradient tree"
    related: tuple[tuple[Any, str], ...] = ()
    hints: dict[str, str] = dataclasses.field(default_factory=dict)


def _grade_tree(answer, spec: _TreeSpec) -> Outcome:
    expected = _leaves_by_path(spec.expected)
    n_expected = len(expected)
    paths_text = ", ".join(expected)
    if callable(answer) and not isinstance(answer, (dict, list, tuple)):
        return Outcome(0, n_expected, [f"Pass {spec.name} itself (a dictionary of arrays), not a function."])
    if hasattr(answer, "updated") and not isinstance(answer, (dict, list, tuple)):
        return Outcome(
            0, n_expected, [f"You passed a whole step result; pass only {spec.name} (for example `result.updated`)."]
        )
    if _kind_of_container(answer) != _kind_of_container(spec.expected):
        line = f"Expected {spec.name}: a dictionary with the leaves {paths_text}. You passed {_type_name(answer)}."
        if isinstance(answer, (tuple, list)) and any(isinstance(item, dict) for item in answer):
            line += f" Pass only {spec.name}, without a tuple around it."
        return Outcome(0, n_expected, [line])

    got = _leaves_by_path(answer)
    related = [(_leaves_by_path(tree), message) for tree, message in spec.related]
    # (path, sentence, plain): a plain sentence says only what diagnose() says for that path
    structure: list[tuple[str, str, bool]] = []
    shapes: list[tuple[str, str, bool]] = []
    reshape_hints: dict[str, str] = {}
    values: dict[str, list[str]] = {}  # explanation -> paths it applies to
    correct = 0
    consumed: set[str] = set()

    def note(notes: list, path: str, text: str, plain: bool = False) -> None:
        notes.append((path, text, plain))

    for path, reference in expected.items():
        ref = tools.np.asarray(reference)
        ref_type = dtype_shape_label(str(ref.dtype), ref.shape)  # the lesson's notation: float32[2], float32[]
        if path not in got:
            children = [p for p in got if p.startswith((path + "[", path + "."))]
            moved = [p for p in got if p not in expected and p not in consumed and _last_key(p) == _last_key(path)]
            if children:
                consumed.update(children)
                note(
                    structure,
                    path,
                    f"{path} is a container with {len(children)} leaves ({', '.join(children[:3])}"
                    f"{', …' if len(children) > 3 else ''}), not one array. In a pytree a list is part of "
                    f"the structure, so each entry becomes its own leaf: make {path} one array "
                    f"(jnp.array) of shape {_fmt_shape(ref.shape)}.",
                )
            elif moved:
                consumed.add(moved[0])
                arr = _as_number_array(got[moved[0]])
                right = arr is not None and _close(arr, ref)
                right_text = " (its values are right, only its place is wrong)." if right else "."
                note(
                    structure,
                    path,
                    f"{path} is missing; your tree has {moved[0]} instead. Same name, different path: "
                    f"the leaf belongs at {path}{right_text}",
                )
            else:
                missing = f"Missing leaf {path}: {spec.name} must have a {ref_type} leaf at this path."
                note(structure, path, missing, True)
            continue
        leaf = got[path]
        arr = _as_number_array(leaf)
        if arr is None:
            what = f"text ({clip(leaf, 48)!r})" if isinstance(leaf, str) else _type_name(leaf)
            note(shapes, path, f"{path} is {what}, not a number.")
        elif arr.shape != ref.shape:
            hint = ""
            if arr.size == ref.size and _close(arr.reshape(ref.shape), ref):
                hint = reshape_hints[path] = f" The values are right; reshape to {_fmt_shape(ref.shape)}."
            note(
                shapes,
                path,
                f"Wrong shape at {path}: expected {ref_type} (shape "
                f"{_fmt_shape(ref.shape)}), got shape {_fmt_shape(arr.shape)}.{hint}",
                True,
            )
        elif not _all_finite(arr):
            values.setdefault("contains NaN or inf.", []).append(path)
        elif _close(arr, ref):
            correct += 1
        else:
            values.setdefault(_explain_leaf(path, arr, ref, expected, related, spec), []).append(path)

    extras = [p for p in got if p not in expected and p not in consumed]
    for path in extras:
        leaf = got[path]
        if isinstance(leaf, str):
            note(
                structure,
                path,
                f"Extra leaf {path} is text ({clip(leaf, 48)!r}): a name or other metadata is "
                "not a parameter. Keep it apart from the tree you differentiate.",
            )
        else:
            note(structure, path, f"Extra leaf {path}: {spec.name} has exactly the leaves {paths_text}.", True)

    total = n_expected + len(extras)  # an extra leaf is one more part to get right (remove it)
    if correct == n_expected and not extras and not structure:
        return Outcome(correct, total, [f"All {n_expected} leaves match {spec.name}: {paths_text}."], True, "leaves")
    if extras:
        lines = [
            f"{correct} of {total} parts right: {correct} of {n_expected} leaves of {spec.name}, "
            f"and {len(extras)} extra {'leaves' if len(extras) > 1 else 'leaf'} to remove."
        ]
    else:
        lines = [f"{correct} of {n_expected} leaves of {spec.name} are right."]
    first = _first_difference(spec, answer)
    if first is not None:
        lines.append(f"- First difference: {first.message}{reshape_hints.get(first.path, '')}")
    # a plain sentence says only what the first difference already said for its path
    said = first.path if first is not None else None
    lines += [f"- {text}" for path, text, plain in structure + shapes if not (plain and path == said)]
    lines += [f"- {', '.join(paths)}: {why}" for why, paths in values.items()]
    return Outcome(correct, total, lines, passed=False, unit="parts" if extras else "leaves")


def _first_difference(spec: _TreeSpec, answer):
    """The tree model's diagnosis (structure, then paths, then shapes), when it finds one. Its dtype
    verdict is left out: a float64 or Python-float answer with the right values is right."""
    try:
        found = diagnose(spec.expected, answer, reference_name=spec.name, candidate_name="your tree")
    except Exception:  # an answer the tree model cannot describe still gets the per-leaf feedback
        return None
    return found if found.kind in ("structure", "shape") else None


def _all_finite(arr) -> bool:
    np = tools.np
    return bool(np.all(np.isfinite(arr.astype(float))))


def _explain_leaf(path, arr, ref, expected, related, spec) -> str:
    """Why the leaf at `path` is wrong, without naming `path` (the caller groups paths)."""
    np = tools.np
    for leaves, message in related:
        if path in leaves and _close(arr, leaves[path]):
            return message
    if ref.ndim == 1 and ref.size > 1 and _close(arr, ref[::-1]) and not _close(ref, ref[::-1]):
        return (
            f"the entries are swapped ({_fmt(arr)}). Each entry belongs to one "
            "parameter value; equal shapes do not say which."
        )
    for other, other_ref in expected.items():
        other_ref = np.asarray(other_ref)
        if other != path and other_ref.shape == ref.shape and _close(arr, other_ref) and not _close(ref, other_ref):
            return (
                f"holds the value that belongs at {other}: the two leaves have the same shape, "
                "but shape does not identify which parameter a value belongs to. Keep each leaf on its path."
            )
    hint = spec.hints.get(path, "")
    return f"{_fmt(arr)} is not the right value." + (f" {hint}" if hint else "")


# --------------------------------------------------------------------------- trees JAX must not see


def tree_problem(value, name: str) -> str | None:
    """The sentence for a tree that must not reach JAX (it refers back to itself, or nests deeper
    than JAX's flatten goes: `trees.check_tree`), else None. Plain numbers and arrays pass at once.
    Run it guarded when `value` is a student's (its nodes' own code runs)."""
    if not isinstance(value, (dict, list, tuple)) and not _is_registered_node(value):
        return None
    try:
        check_tree(value, name)
    except TreeError as problem:
        # a node whose own code raised (`from` its error) is left to the grader's feedback
        return str(problem) if problem.__cause__ is None else None
    return None


def _is_registered_node(value) -> bool:
    try:
        jax = tools.jax
        leaves = jax.tree_util.tree_leaves(value, is_leaf=lambda node: node is not value)
    except Exception:  # noqa: BLE001 - a node whose flatten raises: let check_tree say so
        return True
    return not (len(leaves) == 1 and leaves[0] is value)


def answer_names(text: str) -> list[str]:
    return [name.strip() for name in text.split(",") if name.strip()]


def answer_problem(exercise: Exercise, answer) -> str | None:
    """`tree_problem` for an answer, each named value under its notebook name (`g`, `fixed`)."""
    names = answer_names(exercise.answer_name) or ["your answer"]
    if len(names) > 1 and isinstance(answer, dict) and set(answer) <= set(names):
        return next(filter(None, (tree_problem(value, str(name)) for name, value in answer.items())), None)
    return tree_problem(answer, names[0])


# --------------------------------------------------------------------------- one check, end to end

NOT_ANSWERED = "Not answered yet: replace the `...` in the exercise cell, run it, then check again."


def _scaffold(*args): ...


def is_unanswered(answer) -> bool:
    """None or `...`; a dict of only those; a function whose whole body is still `...`."""
    if answer is None or answer is Ellipsis:
        return True
    if isinstance(answer, dict):
        return bool(answer) and all(v is None or v is Ellipsis for v in answer.values())
    code = getattr(answer, "__code__", None)
    return (
        code is not None
        and code.co_code == _scaffold.__code__.co_code
        and code.co_consts[-1:] == (None,)
        and not code.co_names
    )
