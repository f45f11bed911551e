"""Exercise checking inside the notebook.

`check(exercise_id, answer)` grades an answer to one of the lessons' exercises and explains what
is wrong in the lessons' terms (a missing key and its path, a wrong shape, the bias in the wrong
position, a mean where a sum was asked, a swapped leaf). Every expected value is computed when
the check runs, with `jax.grad` of a reference loss (real JAX; the Lite engine in a JupyterLite
kernel): nothing here is a typed-in answer.

Function answers run on the lesson's worked example plus hidden cases drawn from a fresh random
generator; feedback may describe a hidden case's size (N examples, d features) but never its
inputs or its expected output.

Widgets for students (one ES module, `static/exercises.js`, draws all four):
`CheckButton`, `PredictionPrompt`, `Quiz`, `EvidenceButton`. Python owns every result; the
browser only sends intents ("check", "reveal", "save") and the student's own typed input.

"Keep your evidence": checks, revealed predictions, quiz answers and outputs recorded with
`record_output` are kept in an `Evidence` log; `save_evidence()` writes it as Markdown and JSON.
"""

from __future__ import annotations

import dataclasses
import datetime
import functools
import json
import math
import pathlib
import re
from typing import Any, Callable, NamedTuple

import anywidget
import traitlets

from ._static import static_asset
from ._text import TextForm
from .trees import diagnose

__all__ = [
    "CheckButton",
    "CheckResult",
    "Evidence",
    "EvidenceButton",
    "EXERCISES",
    "Exercise",
    "PREDICTIONS",
    "PredictionPrompt",
    "Quiz",
    "SavedEvidence",
    "check",
    "clear_evidence",
    "default_evidence",
    "grad_structure_quiz",
    "lesson_prediction",
    "record_output",
    "save_evidence",
]



# --------------------------------------------------------------------------- compute helpers
# numpy and jax are imported on first use: `import pytree_lab` must work in a kernel without them.


def _np():
    import numpy

    return numpy


def _jax():
    """The engine's jax-like module: real JAX, or the Lite engine in a JupyterLite kernel."""
    from .engine import get_engine

    return get_engine().jax


def _jnp():
    from .engine import get_engine

    return get_engine().numpy


# The lesson's inputs (the hand-derivation's starting point). Only inputs live here; every
# expected output is derived from them with jax when a check runs.
_LESSON_X = (2.0, 1.0)
_LESSON_WEIGHT = (1.0, -1.0)
_LESSON_BIAS = 0.0
_LESSON_TARGET = 3.0
_LESSON_LR = 0.05
_LESSON_SCALE = 1.0
# The packed-parameters task's worked example (shown to students, so it may appear in feedback).
_FLAT_EXAMPLE_PARAMS = (1.0, 0.0, 0.0)
_FLAT_EXAMPLE_X = ((2.0, 3.0),)


def _lesson_params():
    jnp = _jnp()
    return {"weight": jnp.array(_LESSON_WEIGHT), "bias": jnp.array(_LESSON_BIAS)}


def _lesson_loss(p, x, target):
    jnp = _jnp()
    return (jnp.dot(p["weight"], x) + p["bias"] - target) ** 2


def _nested_params():
    return {"layer": _lesson_params(), "scale": _jnp().array(_LESSON_SCALE)}


def _nested_loss(p, x, target):
    jnp = _jnp()
    prediction = p["scale"] * (jnp.dot(p["layer"]["weight"], x) + p["layer"]["bias"])
    return (prediction - target) ** 2


def _lesson_step():
    """params, grads, updated and both losses for the lesson's model, computed with jax."""
    jax, jnp = _jax(), _jnp()
    params = _lesson_params()
    x, target = jnp.array(_LESSON_X), jnp.array(_LESSON_TARGET)
    loss, grads = jax.value_and_grad(_lesson_loss)(params, x, target)
    updated = jax.tree.map(lambda p, g: p - _LESSON_LR * g, params, grads)
    return params, grads, updated, float(loss), float(_lesson_loss(updated, x, target))


def _flat_loss(flat_params, x):
    # weights first, then the bias; the sum (not the mean) of squared predictions, no targets
    jnp = _jnp()
    return jnp.sum((x @ flat_params[:-1] + flat_params[-1]) ** 2)


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

    def __str__(self) -> str:
        verdict = "Passed" if self.passed else "Not yet"
        return f"{verdict} — {self.exercise_id}: score {self.score:.2f}\n{self.feedback}"

    def _repr_pretty_(self, printer, cycle) -> None:  # IPython shows the readable form
        printer.text(str(self))


@dataclasses.dataclass
class _Outcome:
    passed_cases: int
    total_cases: int
    lines: list[str]
    passed: bool | None = None  # None: passed when every case passed


@dataclasses.dataclass(frozen=True)
class Exercise:
    """One auto-checked exercise: its id, title, what the answer is and how it is graded."""

    id: str
    title: str
    task: str
    answer_kind: str  # "number", "tree" or "function"
    grade: Callable[..., _Outcome] = dataclasses.field(repr=False)
    lesson: str = ""


# --------------------------------------------------------------------------- formatting


def _fmt_num(value) -> str:
    value = float(value)
    if value == 0:
        return "0"
    return f"{value:.4g}"


def _fmt(value) -> str:
    """Lesson-style text for a number or a small array: 8, [1.4, -0.8]."""
    np = _np()
    arr = np.asarray(value)
    if arr.ndim == 0:
        return _fmt_num(arr)
    if arr.size > 12:
        return f"an array of shape {tuple(arr.shape)}"
    return "[" + ", ".join(_fmt(item) for item in arr) + "]"


def _fmt_shape(shape) -> str:
    return "(" + ", ".join(str(n) for n in shape) + ("," if len(shape) == 1 else "") + ")"


def _leaf_type(arr) -> str:
    """The lesson's notation: float32[2], float32[]."""
    return f"{arr.dtype}[{','.join(str(n) for n in arr.shape)}]"


def _type_name(value) -> str:
    if isinstance(value, bool):
        return "a bool"
    if isinstance(value, tuple):
        return f"a tuple of {len(value)} items"
    if isinstance(value, list):
        return f"a list of {len(value)} items"
    if isinstance(value, dict):
        return "a dict with keys " + ", ".join(repr(k) for k in value) if value else "an empty dict"
    if isinstance(value, str):
        return "a string"
    if value is None:
        return "None"
    if isinstance(value, (int, float)):
        return "a number"
    if callable(value):
        return "a function"
    arr = _as_number_array(value)
    if arr is not None:
        return "a number" if arr.ndim == 0 else f"an array of shape {_fmt_shape(arr.shape)}"
    return f"a {type(value).__name__}"


_FLOAT_LITERAL = re.compile(r"[-+]?(?:\d+\.\d*|\.\d+|\d+[eE][-+]?\d+)(?:[eE][-+]?\d+)?")


def _exception_text(exc: BaseException, *, hidden: bool) -> str:
    """`TypeError: first line of the message`, short. For a hidden case, decimal numbers are
    blanked out: an error message may quote the hidden inputs."""
    message = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    if hidden:
        message = _FLOAT_LITERAL.sub("…", message)
    if len(message) > 160:
        message = message[:157] + "…"
    return f"{type(exc).__name__}: {message}" if message else type(exc).__name__


def _close(actual, expected) -> bool:
    np = _np()
    actual, expected = np.asarray(actual, dtype=float), np.asarray(expected, dtype=float)
    if actual.shape != expected.shape or not np.all(np.isfinite(actual)):
        return False
    scale = max(1.0, float(np.max(np.abs(expected))) if expected.size else 1.0)
    return bool(np.allclose(actual, expected, rtol=1e-4, atol=1e-5 * scale))


def _as_number_array(value):
    """A numpy float array for a numeric leaf, else None (strings, objects, containers)."""
    np = _np()
    if isinstance(value, (str, bytes, dict, list, tuple)) or value is None or callable(value):
        return None
    try:
        arr = np.asarray(value)
    except Exception:
        return None
    if arr.dtype.kind not in "biuf":
        return None
    return arr


# --------------------------------------------------------------------------- number answers


def _grade_number(answer, expected: float, variants: list[tuple[float, str]], *, what: str,
                  per_value=None, per_leaf=None) -> _Outcome:
    np = _np()
    if callable(answer):
        return _Outcome(0, 1, [f"Pass the number itself, not a function: {what}."])
    if isinstance(answer, (dict, list, tuple)) and not isinstance(answer, str):
        return _Outcome(0, 1, [
            f"Expected one number ({what}), but you passed {_type_name(answer)}. "
            "A tree keeps the leaves apart; add up the contributions of every leaf into one number."
        ])
    arr = _as_number_array(answer)
    if arr is None:
        return _Outcome(0, 1, [f"Expected one number ({what}), but you passed {_type_name(answer)}."])
    if arr.size != 1:
        # leaf order is the student's choice here, so compare as sorted values
        if per_value is not None and arr.ndim == 1 and _close(np.sort(arr), np.sort(per_value)):
            hint = " — one square per value. Sum them into one number."
        elif per_leaf is not None and arr.ndim == 1 and _close(np.sort(arr), np.sort(per_leaf)):
            hint = " — one number per leaf. Add the leaves together."
        else:
            hint = ". Reduce it to one number."
        return _Outcome(0, 1, [f"Expected one number, but your answer has shape {_fmt_shape(arr.shape)}{hint}"])
    value = float(arr.reshape(()))
    if not math.isfinite(value):
        return _Outcome(0, 1, [f"Your answer is {value}: check for a division by zero or an overflow."])
    if _close(value, expected):
        return _Outcome(1, 1, [f"Correct: {what} is {_fmt_num(value)}."])
    matches = [message for candidate, message in variants if _close(value, candidate)]
    if matches:
        return _Outcome(0, 1, [f"You gave {_fmt_num(value)}. " + " Or: ".join(matches)])
    return _Outcome(0, 1, [f"You gave {_fmt_num(value)}, which is not {what}."])


def _grade_squared_norm(answer, rng=None) -> _Outcome:
    jax, jnp = _jax(), _jnp()
    params, grads, updated, _, _ = _lesson_step()
    leaves = jax.tree.leaves(grads)
    expected = float(sum(jnp.sum(g**2) for g in leaves))
    weight_part = float(jnp.sum(grads["weight"] ** 2))
    bias_part = float(grads["bias"] ** 2)
    total = float(sum(jnp.sum(g) for g in leaves))
    n_values = sum(int(g.size) for g in leaves)
    variants = [
        (math.sqrt(expected), "That is the norm; the exercise asks for the squared norm (no square root)."),
        (weight_part, "That is the weight leaf alone: the bias gradient's square is missing."),
        (bias_part, "That is the bias leaf alone: add the weight leaf's squares too."),
        (float(sum(jnp.sum(jnp.abs(g)) for g in leaves)),
         "That is the sum of absolute gradients: square each value before adding."),
        (total, "That is the sum of the gradients: square each value before adding."),
        (total**2, "You squared the sum; sum the squares instead."),
        (expected / n_values, f"That is a mean over the {n_values} values; the exercise asks for a sum."),
        (float(sum(jnp.mean(g**2) for g in leaves)),
         "You averaged inside each leaf; add every value's square instead."),
        (float(sum(jnp.sum(p**2) for p in jax.tree.leaves(params))),
         "That is the squared norm of the parameters, not of the gradient leaves."),
        (float(sum(jnp.sum(p**2) for p in jax.tree.leaves(updated))),
         "That is the squared norm of the updated parameters, not of the gradient leaves."),
    ]
    per_value = jnp.concatenate([jnp.ravel(g**2) for g in jax.tree.leaves(grads)])
    per_leaf = jnp.stack([jnp.sum(g**2) for g in leaves])
    return _grade_number(answer, expected, variants, what="the squared norm of all gradient leaves",
                         per_value=per_value, per_leaf=per_leaf)


# --------------------------------------------------------------------------- tree answers


def _leaves_by_path(tree) -> dict[str, Any]:
    """keystr path -> leaf, in JAX's flatten order; None counts as a leaf so it can be named."""
    jax = _jax()
    flat, _ = jax.tree_util.tree_flatten_with_path(tree, is_leaf=lambda node: node is None)
    return {jax.tree_util.keystr(path): leaf for path, leaf in flat}


_LAST_KEY = re.compile(r"(\[[^\[\]]*\]|\.[A-Za-z_]\w*)$")


def _last_key(path: str) -> str:
    found = _LAST_KEY.search(path)
    return found.group(1) if found else path


def _kind_of_container(tree) -> str:
    if isinstance(tree, dict):
        return "dict"
    if isinstance(tree, (list, tuple)):
        return "sequence"
    return "other"


@dataclasses.dataclass(frozen=True)
class _TreeSpec:
    """How to grade a tree answer: the expected tree, what it is called, trees a wrong answer
    often equals (each with a sentence explaining that mistake) and per-path hints."""

    expected: Any
    name: str  # "the gradient tree"
    related: tuple[tuple[Any, str], ...] = ()
    hints: dict[str, str] = dataclasses.field(default_factory=dict)


def _grade_tree(answer, spec: _TreeSpec) -> _Outcome:
    expected = _leaves_by_path(spec.expected)
    n_expected = len(expected)
    paths_text = ", ".join(expected)
    if callable(answer) and not isinstance(answer, (dict, list, tuple)):
        return _Outcome(0, n_expected, [f"Pass {spec.name} itself (a dictionary of arrays), not a function."])
    if hasattr(answer, "updated") and not isinstance(answer, (dict, list, tuple)):
        return _Outcome(0, n_expected, [
            f"You passed a whole step result; pass only {spec.name} (for example `result.updated`)."])
    if _kind_of_container(answer) != _kind_of_container(spec.expected):
        line = (f"Expected {spec.name}: a dictionary with the leaves {paths_text}. "
                f"You passed {_type_name(answer)}.")
        if isinstance(answer, (tuple, list)) and any(isinstance(item, dict) for item in answer):
            line += f" Pass only {spec.name}, without a tuple around it."
        return _Outcome(0, n_expected, [line])

    got = _leaves_by_path(answer)
    related = [(_leaves_by_path(tree), message) for tree, message in spec.related]
    # (path, sentence, plain): a plain sentence says only what diagnose() says for that path
    structure: list[tuple[str, str, bool]] = []
    shapes: list[tuple[str, str, bool]] = []
    reshape_hints: dict[str, str] = {}
    values: dict[str, list[str]] = {}  # explanation -> paths it applies to
    correct = 0
    consumed: set[str] = set()

    for path, reference in expected.items():
        ref = _np().asarray(reference)
        if path not in got:
            children = [p for p in got if p.startswith(path + "[") or p.startswith(path + ".")]
            if children:
                consumed.update(children)
                structure.append((path,
                    f"{path} is a container with {len(children)} leaves ({', '.join(children[:3])}"
                    f"{', …' if len(children) > 3 else ''}), not one array. In a pytree a list is part of "
                    f"the structure, so each entry becomes its own leaf: make {path} one array "
                    f"(jnp.array) of shape {_fmt_shape(ref.shape)}.", False))
                continue
            moved = [p for p in got if p not in expected and p not in consumed
                     and _last_key(p) == _last_key(path)]
            if moved:
                consumed.add(moved[0])
                arr = _as_number_array(got[moved[0]])
                right_values = arr is not None and _close(arr, ref)
                structure.append((path,
                    f"{path} is missing; your tree has {moved[0]} instead. Same name, different path: "
                    f"the leaf belongs at {path}"
                    + (" (its values are right, only its place is wrong)." if right_values else "."), False))
            else:
                structure.append((path, f"Missing leaf {path}: {spec.name} must have a {_leaf_type(ref)} "
                                        "leaf at this path.", True))
            continue
        leaf = got[path]
        arr = _as_number_array(leaf)
        if arr is None:
            if isinstance(leaf, str):
                shapes.append((path, f"{path} is text ({leaf[:20]!r}), not a number.", False))
            else:
                shapes.append((path, f"{path} is {_type_name(leaf)}, not a number.", False))
            continue
        if arr.shape != ref.shape:
            hint = ""
            if arr.size == ref.size and _close(arr.reshape(ref.shape), ref):
                hint = f" The values are right; reshape to {_fmt_shape(ref.shape)}."
                reshape_hints[path] = hint
            shapes.append((path, f"Wrong shape at {path}: expected {_leaf_type(ref)} (shape "
                                 f"{_fmt_shape(ref.shape)}), got shape {_fmt_shape(arr.shape)}.{hint}", True))
            continue
        if not _all_finite(arr):
            values.setdefault("contains NaN or inf.", []).append(path)
            continue
        if _close(arr, ref):
            correct += 1
            continue
        values.setdefault(_explain_leaf(path, arr, ref, expected, related, spec), []).append(path)

    extras = [p for p in got if p not in expected and p not in consumed]
    for path in extras:
        leaf = got[path]
        if isinstance(leaf, str):
            structure.append((path, f"Extra leaf {path} is text ({leaf[:20]!r}): a name or other metadata is "
                                    "not a parameter. Keep it apart from the tree you differentiate.", False))
        else:
            structure.append((path, f"Extra leaf {path}: {spec.name} has exactly the leaves {paths_text}.", True))

    total = n_expected + len(extras)
    passed = correct == n_expected and not extras and not structure
    if passed:
        lines = [f"All {n_expected} leaves match {spec.name}: {paths_text}."]
    else:
        lines = [f"{correct} of {n_expected} leaves of {spec.name} are right."]
        first = _first_difference(spec, answer)
        if first is not None:
            lines.append(f"- First difference: {first.message}{reshape_hints.get(first.path, '')}")
        lines += [f"- {text}" for path, text, plain in structure + shapes
                  if not (plain and first is not None and path == first.path)]
        lines += [f"- {', '.join(paths)}: {why}" for why, paths in values.items()]
    return _Outcome(correct, total, lines, passed=passed)


def _first_difference(spec: _TreeSpec, answer):
    """The tree model's diagnosis (structure, then paths, then shapes), when it finds one. Its dtype
    verdict is left out: a float64 or Python-float answer with the right values is right."""
    try:
        found = diagnose(spec.expected, answer, reference_name=spec.name, candidate_name="your tree")
    except Exception:  # an answer the tree model cannot describe still gets the per-leaf feedback
        return None
    return found if found.kind in ("structure", "shape") else None


def _all_finite(arr) -> bool:
    np = _np()
    return bool(np.all(np.isfinite(arr.astype(float))))


def _explain_leaf(path, arr, ref, expected, related, spec) -> str:
    np = _np()
    """Why the leaf at `path` is wrong, without naming `path` (the caller groups paths)."""
    for leaves, message in related:
        if path in leaves and _close(arr, leaves[path]):
            return message
    if ref.ndim == 1 and ref.size > 1 and _close(arr, ref[::-1]) and not _close(ref, ref[::-1]):
        return (f"the entries are swapped ({_fmt(arr)}). Each entry belongs to one "
                "parameter value; equal shapes do not say which.")
    for other, other_ref in expected.items():
        other_ref = np.asarray(other_ref)
        if other != path and other_ref.shape == ref.shape and _close(arr, other_ref) and not _close(ref, other_ref):
            return (f"holds the value that belongs at {other}: the two leaves have the same shape, "
                    "but shape does not identify which parameter a value belongs to. Keep each leaf on its path.")
    hint = spec.hints.get(path, "")
    return f"{_fmt(arr)} is not the right value." + (f" {hint}" if hint else "")


def _grade_nested_scale_grad(answer, rng=None) -> _Outcome:
    jax, jnp = _jax(), _jnp()
    nested = _nested_params()
    x, target = jnp.array(_LESSON_X), jnp.array(_LESSON_TARGET)
    grads = jax.grad(_nested_loss)(nested, x, target)
    spec = _TreeSpec(
        expected=grads,
        name="the gradient tree",
        related=(
            (nested, "holds the parameter value, not its gradient. Differentiate nested_loss with "
                     "respect to the nested tree (jax.grad)."),
            (jax.tree.map(lambda g: -g, grads),
             "the sign is flipped. The residual is prediction − target, which is negative here."),
        ),
        hints={
            "['scale']": "At the start the prediction is 1 and the residual is −2; d/dscale multiplies "
                         "the derivative of the squared loss by w·x + b.",
            "['layer']['weight']": "Each weight's gradient is the derivative of the loss with respect to "
                                   "the prediction, times scale, times its input.",
            "['layer']['bias']": "The bias gradient is the derivative with respect to the prediction, times scale.",
        },
    )
    return _grade_tree(answer, spec)


def _grade_repair_update(answer, rng=None) -> _Outcome:
    jax, jnp = _jax(), _jnp()
    params, grads, updated, loss_before, loss_after = _lesson_step()
    spec = _TreeSpec(
        expected=updated,
        name="the updated parameter tree",
        related=(
            (params, "still holds the original parameter: it was not updated. Every parameter leaf needs "
                     "its own gradient leaf in tree.map."),
            (grads, "holds the gradient, not the updated parameter (p − learning_rate · g)."),
            (jax.tree.map(lambda p, g: p + _LESSON_LR * g, params, grads),
             "holds p + learning_rate · g, a step uphill; subtract the gradient."),
        ),
        hints={
            "['weight']": "Use p − 0.05 · g with the weight gradient from value_and_grad.",
            "['bias']": "Use p − 0.05 · g with the bias gradient; restore bias in the gradient tree first.",
        },
    )
    outcome = _grade_tree(answer, spec)
    # The loss at the student's tree: the lesson's evidence that the repair worked.
    try:
        leaves = {k: _as_number_array(v) for k, v in answer.items()} if isinstance(answer, dict) else {}
        if set(leaves) == {"weight", "bias"} and all(v is not None for v in leaves.values()):
            x, target = jnp.array(_LESSON_X), jnp.array(_LESSON_TARGET)
            candidate = {k: jnp.asarray(v, dtype=jnp.float32) for k, v in leaves.items()}
            loss = float(_lesson_loss(candidate, x, target))
            outcome.lines.append(f"Loss at your updated tree: {_fmt_num(loss)} (before the step: "
                                 f"{_fmt_num(loss_before)}; the repaired update gives {_fmt_num(loss_after)}).")
    except Exception:  # a malformed tree already has its feedback above
        pass
    return outcome


# --------------------------------------------------------------------------- function answers


@dataclasses.dataclass(frozen=True)
class _FlatCase:
    flat_params: Any  # numpy float32 (d + 1,)
    x: Any  # numpy float32 (N, d)
    hidden: bool

    @property
    def n(self) -> int:
        return int(self.x.shape[0])

    @property
    def d(self) -> int:
        return int(self.x.shape[1])

    def label(self, index: int) -> str:
        if not self.hidden:
            return (f"Worked example (flat_params = {_fmt(self.flat_params)}, x = {_fmt(self.x)})")
        return f"Hidden case {index} (N = {self.n}, d = {self.d})"


# (N, d) of the hidden cases: several sizes; N >= 2 so a mean differs from a sum, d != 2 in most
# so a hard-coded feature count fails, and N is neither d nor d + 1 so a shape names its axes
# unambiguously. The sizes are fixed and the values random: repeated checks reuse compiled code
# for these shapes, so only the first check in a kernel pays for compiling.
_HIDDEN_SIZES = ((3, 1), (5, 2), (6, 3), (8, 4))


def _flat_cases(rng) -> list[_FlatCase]:
    """The worked example, then the hidden cases with fresh random values."""
    np = _np()
    cases = [_FlatCase(np.array(_FLAT_EXAMPLE_PARAMS, np.float32), np.array(_FLAT_EXAMPLE_X, np.float32), False)]
    for n, d in _HIDDEN_SIZES:
        flat = rng.normal(size=d + 1).astype(np.float32)
        x = rng.normal(size=(n, d)).astype(np.float32)
        cases.append(_FlatCase(flat, x, True))
    return cases


class _FlatReferences:
    """The right gradient (computed for every case) and, only when an answer is wrong, the
    gradients of typical wrong losses that explain it. All from jax.grad."""

    def __init__(self, case: _FlatCase) -> None:
        jnp = _jnp()
        self._args = (jnp.asarray(case.flat_params), jnp.asarray(case.x))
        self.grad = _flat_grad_fn()(*self._args)
        self._variants: dict[str, Any] | None = None

    def __getitem__(self, name: str):
        if name == "grad":
            return self.grad
        if self._variants is None:
            self._variants = _flat_variants_fn()(*self._args)
        return self._variants[name]


# Compiled once per (N, d). Run op by op, each new shape costs a compile per primitive: seconds.
@functools.cache
def _flat_grad_fn():
    jax = _jax()
    return jax.jit(jax.grad(_flat_loss))


@functools.cache
def _flat_variants_fn():
    jax, jnp = _jax(), _jnp()

    def bias_first_loss(p, x):
        return jnp.sum((x @ p[1:] + p[0]) ** 2)

    def no_bias_loss(p, x):
        return jnp.sum((x @ p[:-1]) ** 2)

    def sum_of_predictions(p, x):
        return jnp.sum(x @ p[:-1] + p[-1])

    def square_of_sum(p, x):
        return jnp.sum(x @ p[:-1] + p[-1]) ** 2

    def references(flat, x):
        return {
            "loss": _flat_loss(flat, x),
            "grad_x": jax.grad(_flat_loss, argnums=1)(flat, x),
            "bias_first_read": jax.grad(bias_first_loss)(flat, x),
            "no_bias": jax.grad(no_bias_loss)(flat, x),
            "sum_of_predictions": jax.grad(sum_of_predictions)(flat, x),
            "square_of_sum": jax.grad(square_of_sum)(flat, x),
        }

    return jax.jit(references)


_BIAS_FIRST = ("the bias is in the wrong position. flat_params holds the d weights first and the bias "
               "last, and the gradient keeps that order: bias last.")


def _shape_text(shape, case: _FlatCase) -> str:
    """A shape in the exercise's symbols, (N, d + 1); the worked example also gets numbers."""
    names = []
    for size in shape:
        if size == case.d + 1:
            names.append("d + 1")
        elif size == 1:
            names.append("1")
        elif size == case.d:
            names.append("d")
        elif size == case.n:
            names.append("N")
        else:
            names.append(str(size))
    symbolic = "(" + ", ".join(names) + ("," if len(names) == 1 else "") + ")"
    if case.hidden or symbolic == _fmt_shape(shape):
        return symbolic
    return f"{symbolic} = {_fmt_shape(shape)}"


def _diagnose_flat_output(out, case: _FlatCase, refs: _FlatReferences) -> str | None:
    """None when `out` is right, else one sentence in the exercise's terms. For a hidden case
    it never quotes values, only sizes in the exercise's symbols (N, d)."""
    np = _np()
    grad = np.asarray(refs["grad"])
    d, n = case.d, case.n
    want = f"one array of shape {_shape_text(grad.shape, case)}"
    if out is None:
        return "your function returned None. Did it forget to `return` the gradient?"
    if isinstance(out, tuple) and len(out) == 2:
        first, second = _as_number_array(out[0]), _as_number_array(out[1])
        if first is not None and first.size == 1 and second is not None and _close(second, grad):
            return ("you returned (loss, gradient), as value_and_grad does. Return only the gradient: "
                    f"{want}, with no tuple around it.")
    if isinstance(out, (tuple, list)):
        kind = "a tuple" if isinstance(out, tuple) else "a list"
        parts = [_as_number_array(item) for item in out]
        if parts and all(p is not None for p in parts):
            try:
                joined = np.concatenate([np.ravel(p) for p in parts])
            except ValueError:
                joined = None
            if joined is not None and _close(joined, grad):
                return (f"you returned {kind} of {len(out)} items (the gradients in pieces). A single array "
                        f"is a one-leaf pytree, and so is its gradient: return {want}.")
        return f"you returned {kind} of {len(out)} items; return {want}, with no tuple or list around it."
    if isinstance(out, dict):
        return (f"you returned a dict with keys {', '.join(repr(k) for k in out)}. This exercise packs "
                f"every parameter into one array: return {want}.")
    arr = _as_number_array(out)
    if arr is None:
        return f"you returned {_type_name(out)}; return {want}."
    if arr.shape != grad.shape:
        got = f"shape {_shape_text(arr.shape, case)}"
        if arr.ndim == 0:
            if _close(arr, refs["loss"]):
                return "you returned the loss value. Return its gradient with respect to flat_params (jax.grad)."
            return f"you returned a single number; return {want}."
        if arr.shape == (d,) and _close(arr, grad[:-1]):
            return ("the bias gradient is missing: your array holds only the d weight gradients. "
                    "Differentiate with respect to all of flat_params; the bias gradient goes last.")
        if arr.shape == (d,):
            return f"your array has {got}: one entry short. The bias gradient goes last."
        if arr.shape == tuple(case.x.shape) and _close(arr, refs["grad_x"]):
            return ("you differentiated with respect to x. Differentiate the first argument, flat_params "
                    "(argnums=0), and keep x fixed.")
        if arr.size == grad.size and _close(arr.reshape(grad.shape), grad):
            return f"the values are right but your array has {got}; return {want}."
        return f"wrong shape: expected {want}, got {got}."
    if not _all_finite(arr):
        return "your gradient contains NaN or inf."
    if _close(arr, grad):
        return None
    if _close(arr, refs["bias_first_read"]) or _close(arr, np.roll(grad, 1)):
        return _BIAS_FIRST
    denominator = float(np.dot(grad, grad))
    ratio = float(np.dot(arr, grad)) / denominator if denominator > 0 else float("nan")
    # a mean where a sum was asked: the whole gradient is N times too small
    if n > 1 and abs(ratio * n - 1) < 1e-3 and _close(arr, ratio * grad):
        return ("a mean where a sum was asked: the gradient is N times too small. The loss is the sum "
                "of the squared predictions (jnp.sum, not jnp.mean).")
    if _close(arr, -grad):
        return "the sign is flipped. The loss is the sum of squared predictions; do not negate it."
    if _close(arr, grad / 2):
        return "every entry is half the gradient. The derivative of p² is 2p: let jax.grad differentiate the square."
    if _close(arr, refs["no_bias"]):
        return "the bias is not in the predictions. Predictions are x @ weights + bias, with bias = flat_params[-1]."
    if _close(arr, refs["sum_of_predictions"]):
        return "this is the gradient of the sum of the predictions. Square each prediction, then sum."
    if _close(arr, refs["square_of_sum"]):
        return "this is the gradient of the square of the summed predictions. Square each prediction first, then sum."
    if arr.ndim == 1 and _close(np.sort(arr), np.sort(grad)):
        return "the right numbers in the wrong order. Keep flat_params' order: the d weights, then the bias."
    if math.isfinite(ratio) and abs(ratio - 1) > 1e-3 and _close(arr, ratio * grad):
        shown = f" (×{_fmt_num(ratio)})" if not case.hidden else ""
        return f"every entry is the right gradient scaled by the same constant factor{shown}."
    if not case.hidden:
        return f"you returned {_fmt(arr)}; the worked example gives {_fmt(grad)}."
    return "the values are not the gradient of the sum of squared predictions."


def _cases_label(indices: list[int], cases: list[_FlatCase]) -> str:
    if len(indices) == len(cases):
        return "Every case"
    parts = []
    if 0 in indices:
        parts.append(cases[0].label(0))
    hidden = [i for i in indices if cases[i].hidden]
    if hidden:
        sizes = [f"{i} (N = {cases[i].n}, d = {cases[i].d})" for i in hidden]
        parts.append(("hidden case " if len(hidden) == 1 else "hidden cases ") + ", ".join(sizes))
    text = "; ".join(parts)
    return text[0].upper() + text[1:]


def _grade_grad_over_flat_params(answer, rng=None) -> _Outcome:
    np = _np()
    jnp = _jnp()
    if not callable(answer):
        arr = _as_number_array(answer)
        line = f"Pass your function grad_over_flat_params itself, not {_type_name(answer)}."
        if arr is not None:
            line += (" It looks like the result of calling it: write check('grad_over_flat_params', "
                     "grad_over_flat_params), without parentheses after the name.")
        return _Outcome(0, 1, [line])
    rng = np.random.default_rng() if rng is None else rng
    cases = _flat_cases(rng)
    passed = 0
    problems: dict[str, list[int]] = {}
    for index, case in enumerate(cases):
        refs = _FlatReferences(case)
        try:
            # fresh arrays per call: a function that changes its inputs cannot affect later cases
            out = answer(jnp.asarray(case.flat_params.copy()), jnp.asarray(case.x.copy()))
            problem = _diagnose_flat_output(out, case, refs)
        except Exception as exc:  # the student's code: report briefly, never a traceback
            problem = f"your function raised {_exception_text(exc, hidden=case.hidden)}"
        if problem is None:
            passed += 1
        else:
            problems.setdefault(problem, []).append(index)
    total = len(cases)
    hidden = total - 1
    if passed == total:
        lines = [f"All {total} cases pass: the worked example ([8, 12, 4] for flat_params = [1, 0, 0], "
                 f"x = [[2, 3]]) and {hidden} hidden cases of other sizes."]
    else:
        lines = [f"{passed} of {total} cases pass (the worked example and {hidden} hidden cases with random values)."]
        for problem, indices in problems.items():
            lines.append(f"- {_cases_label(indices, cases)}: {problem}")
    return _Outcome(passed, total, lines)


# --------------------------------------------------------------------------- registry and check()

EXERCISES: dict[str, Exercise] = {
    exercise.id: exercise
    for exercise in (
        Exercise(
            "squared_norm", "Make it yours",
            "Compute the squared norm of all gradient leaves (one number).", "number",
            _grade_squared_norm, lesson="Pytrees and structured parameters"),
        Exercise(
            "nested_scale_grad", "Extend to a nested model",
            'The gradient tree of nested_loss at {"layer": params, "scale": 1.0}.', "tree",
            _grade_nested_scale_grad, lesson="Pytrees and structured parameters"),
        Exercise(
            "repair_update", "Repair a mismatched update tree",
            "The updated parameter tree after restoring bias in the gradient tree.", "tree",
            _grade_repair_update, lesson="Pytrees and structured parameters"),
        Exercise(
            "grad_over_flat_params", "Gradient of packed parameters",
            "A function grad_over_flat_params(flat_params, x) returning the gradient of the sum of "
            "squared predictions with respect to flat_params (weights, then bias).", "function",
            _grade_grad_over_flat_params, lesson="Gradient of packed parameters"),
    )
}


def check(exercise_id: str, answer: Any, *, rng=None, evidence: Evidence | None = None) -> CheckResult:
    """Grade `answer` for the exercise `exercise_id` and record the result as evidence.

    `rng` (a numpy Generator) draws the hidden cases of function exercises; by default a fresh,
    unseeded one per check.
    """
    if exercise_id not in EXERCISES:
        raise ValueError(f"unknown exercise {exercise_id!r}; the exercises are: {', '.join(EXERCISES)}")
    exercise = EXERCISES[exercise_id]
    if answer is None or answer is Ellipsis:  # the scaffold's `...`, or nothing assigned yet
        return CheckResult(
            passed=False, score=0.0, exercise_id=exercise_id, cases_passed=0, cases_total=0,
            feedback="Not answered yet: replace the `...` in the exercise cell, run it, then check again.",
        )
    outcome = exercise.grade(answer, rng)
    total = max(outcome.total_cases, 1)
    score = outcome.passed_cases / total
    passed = outcome.passed if outcome.passed is not None else outcome.passed_cases == outcome.total_cases
    result = CheckResult(
        passed=bool(passed), score=1.0 if passed else min(score, 1.0), feedback="\n".join(outcome.lines),
        exercise_id=exercise_id, cases_passed=outcome.passed_cases, cases_total=outcome.total_cases,
    )
    (evidence if evidence is not None else default_evidence()).add_check(exercise, result, answer)
    return result


# --------------------------------------------------------------------------- evidence


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
        return f"<function {getattr(value, '__name__', type(value).__name__)}>"
    arr = _as_number_array(value)
    if arr is not None:
        if arr.size > 1000:
            return f"<array of shape {tuple(arr.shape)}>"
        return _plain(arr.tolist(), depth + 1)
    return str(value)


def _now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


class SavedEvidence(NamedTuple):
    markdown: pathlib.Path
    json: pathlib.Path


class Evidence:
    """The student's record for "Keep your evidence": predictions with the revealed answers,
    check results, quiz answers and key outputs, in the order they happened."""

    def __init__(self) -> None:
        self.predictions: list[dict] = []
        self.checks: list[dict] = []
        self.quiz: list[dict] = []
        self.outputs: list[dict] = []

    def __len__(self) -> int:
        return len(self.predictions) + len(self.checks) + len(self.quiz) + len(self.outputs)

    def clear(self) -> None:
        for entries in (self.predictions, self.checks, self.quiz, self.outputs):
            entries.clear()

    def add_check(self, exercise: Exercise, result: CheckResult, answer) -> None:
        self.checks.append({
            "time": _now(), "exercise_id": exercise.id, "title": exercise.title,
            "passed": result.passed, "score": round(result.score, 4), "feedback": result.feedback,
            "answer": _plain(answer),
        })

    def add_prediction(self, prompt: str, prediction: str, answer: str, prediction_id: str = "") -> None:
        self.predictions.append({"time": _now(), "id": prediction_id, "prompt": prompt,
                                 "prediction": prediction, "answer": answer})

    def add_quiz(self, question: str, choice: str, correct: bool, explanation: str) -> None:
        self.quiz.append({"time": _now(), "question": question, "choice": choice,
                          "correct": correct, "explanation": explanation})

    def add_output(self, label: str, value) -> None:
        self.outputs.append({"time": _now(), "label": label, "value": _plain(value),
                             "text": str(value)})

    def to_json(self) -> dict:
        return {"saved": _now(), "predictions": self.predictions, "checks": self.checks,
                "quiz": self.quiz, "outputs": self.outputs}

    def to_markdown(self) -> str:
        out = ["# Pytree lab: my evidence", "", f"Saved {_now()}.", ""]
        out += ["## Predictions", ""]
        if not self.predictions:
            out += ["(none revealed yet)", ""]
        for entry in self.predictions:
            out += [f"### {entry['prompt']}", "", "My prediction:", "", _quote(entry["prediction"]), "",
                    "The answer (computed):", "", _quote(entry["answer"]), ""]
        out += ["## Checks", ""]
        if not self.checks:
            out += ["(no checks yet)", ""]
        for entry in self.checks:
            verdict = "passed" if entry["passed"] else "not yet"
            out += [f"### {entry['title']} (`{entry['exercise_id']}`): {verdict}, score {entry['score']:.2f}",
                    "", _fence(entry["feedback"]), ""]
        out += ["## Check your understanding", ""]
        if not self.quiz:
            out += ["(not answered yet)", ""]
        for entry in self.quiz:
            verdict = "correct" if entry["correct"] else "not correct"
            out += [f"- {entry['question']} My answer: {entry['choice']} ({verdict}).",
                    f"  {entry['explanation']}"]
        if self.quiz:
            out.append("")
        out += ["## Key outputs", ""]
        if not self.outputs:
            out += ["(none recorded yet)", ""]
        for entry in self.outputs:
            out += [f"### {entry['label']}", "", _fence(entry["text"]), ""]
        return "\n".join(out).rstrip() + "\n"

    def save(self, path: str | pathlib.Path | None = None) -> SavedEvidence:
        markdown = pathlib.Path(path) if path is not None else pathlib.Path("pytree-lab-evidence.md")
        if markdown.suffix.lower() != ".md":
            markdown = markdown.with_suffix(".md")
        markdown = markdown if markdown.is_absolute() else pathlib.Path.cwd() / markdown
        json_path = markdown.with_suffix(".json")
        markdown.parent.mkdir(parents=True, exist_ok=True)
        markdown.write_text(self.to_markdown(), encoding="utf-8")
        json_path.write_text(json.dumps(self.to_json(), indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
        return SavedEvidence(markdown, json_path)


def _quote(text: str) -> str:
    lines = (text or "").splitlines() or [""]
    return "\n".join(f"> {line}" for line in lines)


def _fence(text: str) -> str:
    # a fence longer than any backtick run in the text keeps student text from closing it
    longest = max((len(run) for run in re.findall(r"`+", text or "")), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}text\n{text}\n{fence}"


_DEFAULT_EVIDENCE = Evidence()


def default_evidence() -> Evidence:
    """The evidence log the notebook's checks and widgets write to."""
    return _DEFAULT_EVIDENCE


def clear_evidence() -> None:
    _DEFAULT_EVIDENCE.clear()


def record_output(label: str, value: Any, *, evidence: Evidence | None = None) -> Any:
    """Keep a key output (a tree, a diagram's text, a loss) for the evidence file; returns `value`."""
    (evidence if evidence is not None else default_evidence()).add_output(label, value)
    return value


def save_evidence(path: str | pathlib.Path | None = None, *, evidence: Evidence | None = None) -> SavedEvidence:
    """Write the evidence recorded so far: Markdown at `path` (default `pytree-lab-evidence.md` in
    the notebook's folder) and the same content as JSON beside it."""
    return (evidence if evidence is not None else default_evidence()).save(path)


# --------------------------------------------------------------------------- widgets


class _ExerciseWidget(TextForm, anywidget.AnyWidget):
    """Shared front end: `kind` picks what static/exercises.js draws."""

    _esm = static_asset("exercises.js")
    _css = static_asset("exercises.css")
    kind = traitlets.Unicode("").tag(sync=True)
    title = traitlets.Unicode("").tag(sync=True)
    # the verdict in the aria-live="polite" region (a revealed answer or explanation is read with it)
    announcement = traitlets.Unicode("").tag(sync=True)
    busy = traitlets.Bool(False).tag(sync=True)

    def __init__(self, *, evidence: Evidence | None = None, **kwargs) -> None:
        super().__init__(**kwargs)
        self._evidence = evidence
        self.on_msg(self._on_front_end_msg)

    @property
    def evidence(self) -> Evidence:
        return self._evidence if self._evidence is not None else default_evidence()

    def _on_front_end_msg(self, widget, content, buffers) -> None:
        handler = self._intents().get(content.get("type") if isinstance(content, dict) else None)
        if handler is not None:
            handler()

    def _intents(self) -> dict[str, Callable[[], Any]]:
        return {}

    def text(self) -> str:
        """What the widget says, for places with no widget front end (exports, plain consoles)."""
        parts = [self.title or type(self).__name__]
        for name in ("task", "question", "prompt"):
            value = getattr(self, name, "")
            if value:
                parts.append(value)
        for i, choice in enumerate(getattr(self, "choices", []) or [], 1):
            parts.append(f"  {i}. {choice}")
        if self.announcement:
            parts.append(self.announcement)
        feedback = getattr(self, "feedback", "")
        if feedback:
            parts.append(feedback)
        return "\n".join(parts)


def _lookup_answer(get_answer) -> Any:
    if callable(get_answer):
        return get_answer()
    try:
        from IPython import get_ipython
    except ImportError:  # pragma: no cover - ipywidgets brings IPython
        get_ipython = None
    shell = get_ipython() if get_ipython else None
    namespace = shell.user_ns if shell is not None else {}
    if get_answer not in namespace:
        raise NameError(f"name {get_answer!r} is not defined")
    return namespace[get_answer]


class CheckButton(_ExerciseWidget):
    """A "Check my answer" button for one exercise.

    `get_answer` is a function called at click time (`lambda: norm_squared`) or the name of a
    notebook variable (`"norm_squared"`), so re-running a cell and clicking again checks the new
    answer. The result is announced in an aria-live region; the feedback is shown as text.
    """

    exercise_id = traitlets.Unicode().tag(sync=True)
    task = traitlets.Unicode("").tag(sync=True)
    label = traitlets.Unicode("Check my answer").tag(sync=True)
    status = traitlets.Unicode("").tag(sync=True)  # "", "checking", "passed", "failed", "error"
    feedback = traitlets.Unicode("").tag(sync=True)
    score = traitlets.Float(0.0).tag(sync=True)
    attempts = traitlets.Int(0).tag(sync=True)

    def __init__(self, exercise_id: str, get_answer: Callable[[], Any] | str, *,
                 evidence: Evidence | None = None, rng=None, **kwargs) -> None:
        if exercise_id not in EXERCISES:
            raise ValueError(f"unknown exercise {exercise_id!r}; the exercises are: {', '.join(EXERCISES)}")
        exercise = EXERCISES[exercise_id]
        super().__init__(kind="check", exercise_id=exercise_id, title=exercise.title, task=exercise.task,
                         evidence=evidence, **kwargs)
        self._get_answer = get_answer
        self._rng = rng
        self.result: CheckResult | None = None

    def _intents(self):
        return {"check": self.check}

    def check(self) -> CheckResult | None:
        """What a click does: fetch the answer, check it, show and announce the result."""
        self.attempts += 1
        self.busy, self.status, self.announcement = True, "checking", f"Checking ({self.attempts})…"
        try:
            try:
                answer = _lookup_answer(self._get_answer)
            except Exception as exc:
                name = self._get_answer if isinstance(self._get_answer, str) else "your answer"
                self.result = None
                self.status, self.score = "error", 0.0
                self.feedback = (f"Could not get {name}: {_exception_text(exc, hidden=False)}. "
                                 "Run the cell that defines it, then check again.")
                self.announcement = f"Check {self.attempts}: no answer yet. {self.feedback}"
                return None
            result = check(self.exercise_id, answer, rng=self._rng, evidence=self.evidence)
            self.result = result
            self.status = "passed" if result.passed else "failed"
            self.score = result.score
            self.feedback = result.feedback
            verdict = "passed" if result.passed else "not yet"
            cases = (f" ({result.cases_passed} of {result.cases_total} "
                     f"{'cases' if EXERCISES[self.exercise_id].answer_kind == 'function' else 'parts'} right)"
                     if result.cases_total > 1 else "")
            self.announcement = f"Check {self.attempts}: {verdict}, score {result.score:.2f}{cases}."
            return result
        finally:
            self.busy = False


class PredictionPrompt(_ExerciseWidget):
    """Type a prediction, then reveal the answer. The answer comes from `reveal()`, a function
    that computes it when the button is pressed; the prediction is locked once revealed."""

    prompt = traitlets.Unicode("").tag(sync=True)
    prediction = traitlets.Unicode("").tag(sync=True)  # written by the student's typing
    revealed = traitlets.Bool(False).tag(sync=True)
    answer = traitlets.Unicode("").tag(sync=True)

    def __init__(self, prompt: str, reveal: Callable[[], str], *, prediction_id: str = "",
                 title: str = "Predict before running", evidence: Evidence | None = None, **kwargs) -> None:
        super().__init__(kind="predict", prompt=prompt, title=title, evidence=evidence, **kwargs)
        self._reveal = reveal
        self.prediction_id = prediction_id

    def _intents(self):
        return {"reveal": self.reveal}

    def reveal(self) -> str | None:
        if self.revealed:
            return self.answer
        if not self.prediction.strip():
            self.announcement = "Type your prediction first, then reveal the answer."
            return None
        self.busy = True
        try:
            answer = str(self._reveal())
        except Exception as exc:
            self.announcement = f"Could not compute the answer: {_exception_text(exc, hidden=False)}"
            return None
        finally:
            self.busy = False
        self.answer = answer
        self.revealed = True
        self.announcement = "Revealed. Compare it with your prediction:"
        self.evidence.add_prediction(self.prompt, self.prediction, answer, self.prediction_id)
        return answer


class Quiz(_ExerciseWidget):
    """A multiple-choice question; after an answer, the verdict and the explanation."""

    question = traitlets.Unicode("").tag(sync=True)
    choices = traitlets.List(traitlets.Unicode()).tag(sync=True)
    selected = traitlets.Int(-1).tag(sync=True)  # written by the student's choice
    answered = traitlets.Bool(False).tag(sync=True)
    correct = traitlets.Bool(False).tag(sync=True)
    explanation = traitlets.Unicode("").tag(sync=True)

    def __init__(self, question: str, choices: list[str], answer: int, explanation: str, *,
                 title: str = "Check your understanding", evidence: Evidence | None = None, **kwargs) -> None:
        if not 0 <= answer < len(choices):
            raise ValueError("answer must index one of the choices")
        super().__init__(kind="quiz", question=question, choices=list(choices), title=title,
                         evidence=evidence, **kwargs)
        self._answer = answer
        self._explanation = explanation

    def _intents(self):
        return {"check": self.submit}

    def submit(self) -> bool | None:
        if not 0 <= self.selected < len(self.choices):
            self.announcement = "Choose an answer first."
            return None
        self.correct = self.selected == self._answer
        self.answered = True
        right = self.choices[self._answer]
        self.explanation = f"The answer: {right}. {self._explanation}"
        # the explanation is shown inside the same live region, so it is read after the verdict
        self.announcement = "Correct." if self.correct else f"Not quite: you chose “{self.choices[self.selected]}”."
        self.evidence.add_quiz(self.question, self.choices[self.selected], self.correct, self._explanation)
        return self.correct


class EvidenceButton(_ExerciseWidget):
    """"Keep your evidence": one click writes the evidence file (Markdown, JSON beside it)."""

    label = traitlets.Unicode("Save my evidence").tag(sync=True)
    saved_path = traitlets.Unicode("").tag(sync=True)

    def __init__(self, path: str | pathlib.Path | None = None, *, evidence: Evidence | None = None,
                 **kwargs) -> None:
        super().__init__(kind="evidence", title="Keep your evidence", evidence=evidence, **kwargs)
        self._path = path

    def _intents(self):
        return {"save": self.save}

    def save(self) -> SavedEvidence | None:
        log = self.evidence
        try:
            saved = log.save(self._path)
        except OSError as exc:
            self.announcement = f"Could not save: {_exception_text(exc, hidden=False)}"
            return None
        self.saved_path = str(saved.markdown)
        self.announcement = (
            f"Saved {saved.markdown.name} and {saved.json.name} in {saved.markdown.parent}: "
            f"{len(log.predictions)} predictions, {len(log.checks)} checks, "
            f"{len(log.quiz)} quiz answers, {len(log.outputs)} key outputs.")
        return saved


# --------------------------------------------------------------------------- the lessons' prompts


def grad_structure_quiz(*, evidence: Evidence | None = None) -> Quiz:
    """The lesson's "Check your understanding" question."""
    return Quiz(
        "What structure does grad(loss)(params) have?",
        ["One scalar regardless of parameters", "A pytree corresponding to params",
         "A list of Python source lines"],
        1,
        "The differentiated input determines the gradient structure. Each floating-point parameter "
        "leaf gets a corresponding gradient leaf.",
        evidence=evidence,
    )


def _reveal_which_weight() -> str:
    params, grads, updated, _, _ = _lesson_step()
    change = [float(u - p) for u, p in zip(updated["weight"], params["weight"])]
    g = [float(v) for v in grads["weight"]]
    bigger = 0 if abs(change[0]) >= abs(change[1]) else 1
    return (f"weight[{bigger}] changes more: weight[0] moves by {_fmt_num(change[0])} and weight[1] by "
            f"{_fmt_num(change[1])}. Their gradients are {_fmt_num(g[0])} and {_fmt_num(g[1])}: the same "
            f"derivative of the loss with respect to the prediction, times each weight's input "
            f"x = {_fmt(_LESSON_X)}. The larger input gives the larger gradient, so the larger step.")


def _reveal_gradient_leaves() -> str:
    _, grads, _, _, _ = _lesson_step()
    return (f"grads['weight'] = {_fmt(grads['weight'])} and grads['bias'] = {_fmt(grads['bias'])}: "
            "the derivative with respect to the prediction times each input, and times 1 for the bias.")


def _reveal_treedef() -> str:
    jax = _jax()
    params = _lesson_params()
    leaves, treedef = jax.tree.flatten(params)
    rebuilt = jax.tree.unflatten(treedef, [leaf * 0 for leaf in leaves])
    keys = ", ".join(repr(k) for k in rebuilt)
    return (f"The tree definition keeps the containers and their keys: {treedef}. Replacing the "
            f"{len(leaves)} leaves with new arrays and unflattening gives back a dict with keys {keys} "
            "in the same places; the values come only from the new leaves.")


PREDICTIONS: dict[str, tuple[str, Callable[[], str]]] = {
    "which_weight_changes_more": ("Which weight changes more, and why?", _reveal_which_weight),
    "gradient_leaves": ("Predict both weight derivatives and the bias derivative from the residual "
                        "before inspecting grads.", _reveal_gradient_leaves),
    "treedef_keeps": ("What is retained by the tree definition when array values are replaced?", _reveal_treedef),
}


def lesson_prediction(prediction_id: str, *, evidence: Evidence | None = None) -> PredictionPrompt:
    """One of the lesson's "Predict" prompts, with its answer computed when revealed."""
    if prediction_id not in PREDICTIONS:
        raise ValueError(f"unknown prediction {prediction_id!r}; the prompts are: {', '.join(PREDICTIONS)}")
    prompt, reveal = PREDICTIONS[prediction_id]
    return PredictionPrompt(prompt, reveal, prediction_id=prediction_id, evidence=evidence)
