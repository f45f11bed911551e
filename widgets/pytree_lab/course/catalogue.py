"""The course's exercises: graders, hints, hidden-case sizes and reference solutions.

Every expected value is computed when a check runs, with `jax.grad` of a reference loss (real
JAX; the Lite engine in a JupyterLite kernel) from the lesson model in `pytree_lab.lesson`:
nothing here is a typed-in answer. Only `_self_check` holds the lesson's hand-derived numbers,
to catch a kernel whose jax / numpy was replaced under the checker.

Function answers run on the task's worked example plus hidden cases whose values are drawn,
one case at a time and only after the previous case was graded, from a generator seeded by the
operating system; feedback may describe a hidden case's size (N examples, d features) but never
its inputs or its expected output. Each case runs guarded (`exercises.run_guarded`).
"""

from __future__ import annotations

import dataclasses
import functools
import math
import secrets
from typing import Any

from .. import lesson
from ..exercises import _grading, _integrity
from ..exercises._grading import (
    CheckResult,
    Exercise,
    Outcome,
    _all_finite,
    _as_number_array,
    _close,
    _fmt,
    _fmt_num,
    _fmt_shape,
    _grade_number,
    _grade_tree,
    _jax,
    _jnp,
    _np,
    _TreeSpec,
    _type_name,
    grade_answer,
)
from ..exercises._guard import describe_failure, exception_text, run_guarded
from ..exercises.evidence import Evidence, default_evidence

__all__ = ["EXERCISES", "check", "exercise"]

# The packed-parameters task's worked example (shown to students, so it may appear in feedback).
_FLAT_EXAMPLE_PARAMS = (1.0, 0.0, 0.0)
_FLAT_EXAMPLE_X = ((2.0, 3.0),)


def _lesson_setup():
    """The lesson model's params, x, target and learning rate (pytree_lab.lesson)."""
    inputs = lesson.lesson_inputs()
    return lesson.lesson_params(), inputs["x"], inputs["target"], lesson.LEARNING_RATE


def _lesson_loss(p, x, target):
    jnp = _jnp()
    return (jnp.dot(p["weight"], x) + p["bias"] - target) ** 2


def _nested_params():
    return {"layer": lesson.lesson_params(), "scale": _jnp().array(1.0)}


def _nested_loss(p, x, target):
    jnp = _jnp()
    prediction = p["scale"] * (jnp.dot(p["layer"]["weight"], x) + p["layer"]["bias"])
    return (prediction - target) ** 2


def _lesson_step():
    """params, grads, updated and both losses for the lesson's model, computed with jax."""
    jax = _jax()
    params, x, target, lr = _lesson_setup()
    loss, grads = jax.value_and_grad(_lesson_loss)(params, x, target)
    updated = jax.tree.map(lambda p, g: p - lr * g, params, grads)
    return params, grads, updated, float(loss), float(_lesson_loss(updated, x, target))


def _flat_loss(flat_params, x):
    # weights first, then the bias; the sum (not the mean) of squared predictions, no targets
    jnp = _jnp()
    return jnp.sum((x @ flat_params[:-1] + flat_params[-1]) ** 2)


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
    ok = (abs(loss - 4.0) < 1e-6 and abs(weight[0] + 8) < 1e-5 and abs(weight[1] + 4) < 1e-5
          and abs(bias + 4) < 1e-5 and abs(loss_after - 0.64) < 1e-5
          and len(flat) == 3 and all(abs(a - b) < 1e-4 for a, b in zip(flat, (8.0, 12.0, 4.0))))
    if not ok:
        return ("jax or numpy in this kernel no longer computes the lesson's worked example "
                "(loss 4, gradients [-8, -4] and -4): something replaced one of their functions.")
    return None


def _squared_norm_parts():
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
        (weight_part + float(grads["bias"]),
         "The bias gradient was added without squaring it: square every leaf's values, the bias too."),
        (float(sum(jnp.sum(jnp.abs(g)) for g in leaves)),
         "That is the sum of absolute gradients: square each value before adding."),
        (total, "That is the sum of the gradients: square each value before adding."),
        (total**2, "You squared the sum; sum the squares instead."),
        (expected / n_values, f"That is a mean over the {n_values} values (jnp.mean); the exercise asks for a sum."),
        (float(sum(jnp.mean(g**2) for g in leaves)),
         "You averaged inside each leaf (jnp.mean); add every value's square instead (jnp.sum)."),
        (float(sum(jnp.sum(p**2) for p in jax.tree.leaves(params))),
         "That is the squared norm of the parameters, not of the gradient leaves."),
        (float(sum(jnp.sum(p**2) for p in jax.tree.leaves(updated))),
         "That is the squared norm of the updated parameters, not of the gradient leaves."),
    ]
    per_value = jnp.concatenate([jnp.ravel(g**2) for g in leaves])
    per_leaf = jnp.stack([jnp.sum(g**2) for g in leaves])
    # sum(g**2 for g in leaves) without a reduction inside each leaf: the bias's square is
    # broadcast onto every weight entry, giving a weight-shaped array
    broadcast = grads["weight"] ** 2 + grads["bias"] ** 2
    return expected, variants, per_value, per_leaf, broadcast


def _grade_one_norm(answer, name: str, parts) -> Outcome:
    np = _np()
    expected, variants, per_value, per_leaf, broadcast = parts
    arr = _as_number_array(answer)
    if arr is not None and arr.shape == tuple(broadcast.shape) and _close(arr, broadcast):
        return Outcome(0, 1, [
            f"{name} has shape {_fmt_shape(arr.shape)}, not one number: adding whole leaves "
            "(`sum(g**2 for g in leaves)`) broadcasts the bias's square onto each weight entry. "
            "Reduce inside each leaf first: `jnp.sum(g**2)`, then add the leaves."])
    if isinstance(answer, (list, tuple)) and answer and all(_as_number_array(v) is not None for v in answer):
        try:
            values = np.asarray([float(np.asarray(v).sum()) for v in answer])
        except (TypeError, ValueError):
            values = None
        if values is not None and values.shape == tuple(per_leaf.shape) and _close(np.sort(values), np.sort(per_leaf)):
            return Outcome(0, 1, [
                f"{name} is {_type_name(answer)}, one sum per leaf ({_fmt(values)}): right so far. "
                "Add the leaves' sums into one number."])
    outcome = _grade_number(answer, expected, variants, what="the squared norm of all gradient leaves",
                            per_value=per_value, per_leaf=per_leaf)
    outcome.lines = [f"{name}: {line}" for line in outcome.lines]
    return outcome


def _grade_squared_norm(answer, rng=None) -> Outcome:
    """`norm_squared` alone, or {"norm_squared": ..., "manual": ...}: each graded."""
    parts = _squared_norm_parts()
    if isinstance(answer, dict) and set(answer) <= {"norm_squared", "manual"} and answer:
        outcomes = []
        for name in ("norm_squared", "manual"):
            if name not in answer or answer[name] is None or answer[name] is Ellipsis:
                outcomes.append(Outcome(0, 1, [f"{name}: not answered yet (replace its `...`)."]))
            else:
                outcomes.append(_grade_one_norm(answer[name], name, parts))
        passed = sum(o.passed_cases for o in outcomes)
        lines = [line for o in outcomes for line in o.lines]
        return Outcome(passed, 2, [f"{passed} of 2 values right."] + lines)
    return _grade_one_norm(answer, "norm_squared", parts)


def _residual_loss(p, x, target):
    jnp = _jnp()
    return p["scale"] * (jnp.dot(p["layer"]["weight"], x) + p["layer"]["bias"]) - target


def _whole_tree(answer, trees) -> str | None:
    """The sentence of the first (tree, sentence) the whole answer equals, leaf for leaf."""
    for tree, sentence in trees:
        found = run_guarded(_same_tree, answer, tree, budget=2.0)
        if found.ok and found.value:
            return sentence
    return None


def _grade_nested_scale_grad(answer, rng=None) -> Outcome:
    jax, jnp = _jax(), _jnp()
    nested = _nested_params()
    _, x, target, _ = _lesson_setup()
    grads = jax.grad(_nested_loss)(nested, x, target)
    # mistakes recognised by the whole tree, never by one leaf that happens to equal a value
    whole = _whole_tree(answer, (
        (nested, "g holds the parameter value, not its gradient, at every leaf: g = jax.grad(nested_loss)(nested)."),
        (jax.grad(_residual_loss)(nested, x, target),
         "g is the gradient of the residual pred − 3, not of the squared error: nested_loss must return "
         "(pred - 3.) ** 2."),
    ))
    if whole is not None:
        return Outcome(0, 3, ["0 of 3 leaves of the gradient tree are right.", f"- {whole}"])
    spec = _TreeSpec(
        expected=grads,
        name="the gradient tree",
        related=(
            (jax.tree.map(lambda g: -g, grads),
             "the sign is flipped. The residual is prediction − target, which is negative here."),
            (jax.tree.map(jnp.zeros_like, grads),
             "is 0: the loss does not depend on this leaf. Does nested_loss read it through its argument p "
             "(not from params outside the function)?"),
        ),
        hints={
            "['scale']": "At the start the prediction is 1 and the residual is −2; d/dscale multiplies "
                         "the derivative of the squared loss by w·x + b.",
            "['layer']['weight']": "Each weight's gradient is the derivative of the loss with respect to "
                                   "the prediction, times scale, times its input.",
            "['layer']['bias']": "The bias gradient is the derivative with respect to the prediction, times scale.",
        },
    )
    outcome = _grade_tree(answer, spec)
    if outcome.passed:
        outcome.lines.append(f"d loss / d scale: {_fmt_num(grads['scale'])}, as derived by hand "
                             "(residual −2, times 2, times w·x + b = 1).")
    return outcome


_SWAPPED = ("the gradient leaves are swapped: weight was stepped with the bias gradient and bias with the "
            "weight gradient (so bias became an array of 2 values). Pair each parameter with its own gradient "
            "by path: jax.tree.map(lambda p, g: p - 0.05 * g, params, grads).")
_ZIP = ("your zip pairs leaves by position, and the positions disagree: params' values come in the order "
        "written (weight, bias), the gradients in flatten order (bias, weight: keys sorted, as "
        "jax.tree.leaves(grads) and JAX's gradient dict give them). So weight was stepped with the bias gradient "
        "and bias with the weight gradient. Pair by path instead: jax.tree.map(lambda p, g: p - 0.05 * g, "
        "params, grads).")
_KEYS_SWAPPED = ("the updated values are right but under each other's keys: weight holds the updated bias and "
                 "bias the updated weight, as zipping params' keys (weight, bias: the order written) with "
                 "leaves in flatten order (bias, weight) does. Keep the structure: jax.tree.map(lambda p, g: "
                 "p - 0.05 * g, params, grads).")

_ZIP_KEYS = ("your zip put the updated values under each other's keys: it pairs params' keys in the order "
             "written (weight, bias) with leaves in flatten order (bias, weight: keys sorted), so weight holds "
             "the updated bias and bias the updated weight. Keep the structure: jax.tree.map(lambda p, g: "
             "p - 0.05 * g, params, grads).")


def _grade_repair_update(answer, rng=None) -> Outcome:
    jax, jnp = _jax(), _jnp()
    params, grads, updated, loss_before, loss_after = _lesson_step()
    spec = _TreeSpec(
        expected=updated,
        name="the updated parameter tree",
        related=(
            (params, "still holds the original parameter: it was not updated. Every parameter leaf needs "
                     "its own gradient leaf in tree.map."),
            (grads, "holds the gradient, not the updated parameter (p − learning_rate · g)."),
            (jax.tree.map(lambda p, g: p + lesson.LEARNING_RATE * g, params, grads),
             "holds p + learning_rate · g, a step uphill; subtract the gradient."),
        ),
        hints={
            "['weight']": "Use p − 0.05 · g with the weight gradient from value_and_grad.",
            "['bias']": "Use p − 0.05 · g with the bias gradient; restore bias in the gradient tree first.",
        },
    )
    lr = lesson.LEARNING_RATE
    whole = _whole_tree(answer, (
        ({"weight": params["weight"] - lr * grads["bias"], "bias": params["bias"] - lr * grads["weight"]},
         _SWAPPED),
        ({"weight": updated["bias"], "bias": updated["weight"]}, _KEYS_SWAPPED),
    ))
    if whole is not None:
        return Outcome(0, 2, ["0 of 2 leaves of the updated parameter tree are right.", f"- {whole}"])
    outcome = _grade_tree(answer, spec)
    # The loss at the student's tree: the lesson's evidence that the repair worked.
    try:
        leaves = {k: _as_number_array(v) for k, v in answer.items()} if isinstance(answer, dict) else {}
        if set(leaves) == {"weight", "bias"} and all(v is not None for v in leaves.values()):
            _, x, target, _ = _lesson_setup()
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


def _worked_case() -> _FlatCase:
    np = _np()
    return _FlatCase(np.array(_FLAT_EXAMPLE_PARAMS, np.float32), np.array(_FLAT_EXAMPLE_X, np.float32), False)


def _hidden_case(rng, n: int, d: int) -> _FlatCase:
    np = _np()
    flat = rng.normal(size=d + 1).astype(np.float32)
    x = rng.normal(size=(n, d)).astype(np.float32)
    return _FlatCase(flat, x, True)


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
    if not np.any(arr) and np.any(grad):
        return ("every entry is 0: the loss does not depend on flat_params. Take the slices "
                "(flat_params[:-1], flat_params[-1]) inside the loss function you differentiate, "
                "not outside it: JAX can only follow what the loss computes from its argument.")
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


CASE_BUDGET = 10.0  # seconds of student code per case (first calls compile: generous)


def _grade_grad_over_flat_params(answer, rng=None) -> Outcome:
    np = _np()
    jnp = _jnp()
    if not callable(answer):
        arr = _as_number_array(answer)
        line = f"Pass your function grad_over_flat_params itself, not {_type_name(answer)}."
        if arr is not None:
            line += (" It looks like the result of calling it: write check('grad_over_flat_params', "
                     "grad_over_flat_params), without parentheses after the name.")
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
        run = run_guarded(answer, jnp.asarray(case.flat_params.copy()), jnp.asarray(case.x.copy()),
                          budget=CASE_BUDGET, once_stuck=True)
        tampered = [n for n in run.replaced if n.split(".")[0] not in ("jax", "numpy", "builtins")]
        if tampered:
            return Outcome(0, len(sizes), [
                "Your code changed the checker itself (" + ", ".join(tampered) + "). It was put back; "
                "this check does not count. Check again with a function that only computes."], passed=False)
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
                cases.append(_worked_case() if sizes[rest] is None else _FlatCase(
                    np.zeros(sizes[rest][1] + 1, np.float32), np.zeros(sizes[rest], np.float32), True))  # type: ignore[index]
                problems[problem].append(rest)  # type: ignore[index]  # a timed-out case has a problem
            break
    total = len(sizes)
    hidden = total - 1
    if passed == total:
        # right numbers; the exercise asks for them from jax.grad, not from a derivation by hand
        case = _worked_case()
        run, differentiated = _grading.differentiates(
            answer, jnp.asarray(case.flat_params.copy()), jnp.asarray(case.x.copy()), budget=CASE_BUDGET)
        if run.ok and not differentiated:
            return Outcome(passed, total, [
                f"All {total} cases give the right numbers, but your function computes them without "
                "differentiating: no jax.grad (nor value_and_grad, vjp or jacrev) ran inside it. The "
                "exercise asks for the gradient using jax.grad: write the loss as a function of flat_params "
                "(the sum of squared predictions) and return jax.grad(loss)(flat_params), so JAX derives "
                "it instead of a formula worked out by hand."] + notes, passed=False, score=0.5)
        lines = [f"All {total} cases pass: the worked example ([8, 12, 4] for flat_params = [1, 0, 0], "
                 f"x = [[2, 3]]) and {hidden} hidden cases of other sizes."]
    else:
        lines = [f"{passed} of {total} cases pass (the worked example and {hidden} hidden cases with random values)."]
        if len(outputs) > 1 and all(o.shape == outputs[0].shape and np.array_equal(o, outputs[0]) for o in outputs):
            lines.append("Your function returned the same array in every case, although each case has other "
                         "flat_params and x: it does not compute from its inputs (is the worked example's answer "
                         "written into it?).")
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
            "squared_norm", "Make it yours",
            "Compute the squared norm of all gradient leaves (norm_squared), and again by adding the "
            "weight and bias contributions directly (manual).", "number",
            _grade_squared_norm, lesson="Pytrees and structured parameters",
            answer_name="norm_squared, manual", solutions=(_SOLUTION_NORM,), self_check=_self_check,
            unit="values"),
        Exercise(
            "nested_scale_grad", "Extend to a nested model",
            'The gradient tree g of nested_loss at {"layer": params, "scale": 1.0}.', "tree",
            _grade_nested_scale_grad, lesson="Pytrees and structured parameters",
            answer_name="g", solutions=(_SOLUTION_NESTED,), self_check=_self_check, unit="leaves"),
        Exercise(
            "repair_update", "Repair a mismatched update tree",
            "The updated parameter tree (fixed) after restoring bias in the gradient tree.", "tree",
            _grade_repair_update, lesson="Pytrees and structured parameters",
            answer_name="fixed", solutions=(_SOLUTION_REPAIR,), self_check=_self_check, unit="leaves"),
        Exercise(
            "grad_over_flat_params", "Gradient of packed parameters",
            "A function grad_over_flat_params(flat_params, x) returning the gradient of the sum of "
            "squared predictions with respect to flat_params (weights, then bias).", "function",
            _grade_grad_over_flat_params, lesson="Gradient of packed parameters",
            answer_name="grad_over_flat_params", solutions=(_SOLUTION_PACKED,), self_check=_self_check,
            unit="cases"),
    )
}


_integrity.seal_mapping("the exercise catalogue", EXERCISES)  # an entry replaced later is put back


def exercise(exercise_id: str) -> Exercise:
    if exercise_id not in EXERCISES:
        raise ValueError(f"unknown exercise {exercise_id!r}; the exercises are: {', '.join(EXERCISES)}")
    return EXERCISES[exercise_id]


def check(exercise_id: str, answer: Any = None, *, rng=None, evidence: Evidence | None = None,
          stale: str | None = None, code: str | None = None, cell=None, **named: Any) -> CheckResult:
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
    if stale is None and not _grading.is_unanswered(answer):
        (evidence if evidence is not None else default_evidence()).add_check(ex, result, answer, code=code)
    return result


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


def _same_tree(a, b) -> bool:
    if isinstance(b, dict):
        return isinstance(a, dict) and set(a) == set(b) and all(_same_tree(a[k], b[k]) for k in b)
    arr, want = _as_number_array(a), _np().asarray(b)
    return arr is not None and arr.shape == want.shape and bool(_close(arr, want))


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
        swapped = next((point[k] for k, tree in lesson_trees.items()
                        if isinstance(value, dict) and run_guarded(_same_tree, value, tree, budget=2.0).value), None)
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
        value = float(sum(jnp.sum(g ** 2) for g in jax.tree.leaves(point["grads"])))
        return {"norm_squared": value, "manual": value}
    _, x, target, _ = _lesson_setup()
    if exercise_id == "nested_scale_grad":
        return {"g": jax.grad(_nested_loss)({"layer": point["params"], "scale": jnp.array(1.0)}, x, target)}
    return {"fixed": point["updated"]}


def _rerun_problems(ex: Exercise, answer, cell, rng) -> dict[str, str]:
    """name -> what the reruns showed about it, for the answer names the cell assigns."""
    import ast

    from ..course.grading import _compile_without_asserts

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
        params = {"weight": jnp.asarray(rng.normal(size=2).astype(np.float32) * 1.5),
                  "bias": jnp.asarray(np.float32(rng.normal() * 1.5))}
        point = _lesson_point(params)
        ns = _variant_namespace(namespace, code, point, {k: lesson_trees[k] for k in ("params", "grads", "updated")})
        run = run_guarded(exec, compiled, ns, budget=RERUN_BUDGET)
        if not run.ok:
            why = describe_failure(run, what="it", budget=RERUN_BUDGET, hidden=True).removeprefix("it ")
            for name in names:
                problems.setdefault(name, (
                    f"{name}: your cell, run again with other values in {changes} (to see that the answer is "
                    f"computed from them), {why.rstrip('.')}. Compute the answer from {changes}, not from the "
                    "lesson's numbers."))
            break
        expected = _rerun_expected(ex.id, point)
        for name in names:
            if name in problems:
                continue
            got = ns.get(name)
            if run_guarded(_same_tree, got, expected[name], budget=2.0).value:
                continue
            if run_guarded(_same_tree, got, answers.get(name), budget=2.0).value:
                problems[name] = f"{name}: this value does not change when `{changes.split(' and ')[-1]}` changes: {move}."
                if ex.id == "repair_update":
                    problems[name] = f"{name}: this value does not change when {changes} change: {move}."
            else:
                problems[name] = (f"{name}: right for the lesson's {changes}, but not when {changes} hold other "
                                  f"values: {move}, without numbers of the lesson written in.")


def _with_cell_evidence(ex: Exercise, result: CheckResult, answer, cell, rng) -> CheckResult:
    lines = result.feedback.splitlines()
    passed_cases = result.cases_passed
    if ex.id == "nested_scale_grad" and not result.passed:
        found = run_guarded(_nested_evidence, getattr(cell, "namespace", None), budget=RERUN_BUDGET)
        if found.ok and found.value:
            # the evidence says it first; the tree-level sentences that say the same go
            same = ("holds the parameter value", "gradient of the residual", "is 0: the loss does not depend")
            lines = lines[:1] + [f"- {found.value}"] + [
                line for line in lines[1:] if not any(words in line for words in same)]
        return dataclasses.replace(result, feedback="\n".join(lines))
    if not result.passed and ex.id == "repair_update":
        code = getattr(cell, "code", "") or ""
        if "zip(" in code:
            result = dataclasses.replace(result, feedback=result.feedback.replace(
                f"- {_SWAPPED}", f"- {_ZIP}").replace(f"- {_KEYS_SWAPPED}", f"- {_ZIP_KEYS}"))
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
        return dataclasses.replace(result, passed=False, score=right / total, feedback="\n".join(lines),
                                   cases_passed=right)
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
        return ('nested is not {"layer": params, "scale": 1.0}: build it from params, with scale a float '
                "scalar equal to 1 (jnp.array(1.)).")
    value = _as_number_array(nested_loss(nested))
    _, x, target, _ = _lesson_setup()
    if value is None or value.size != 1:
        return (f"nested_loss(nested) returns {_type_name(nested_loss(nested))}; it must return one number, "
                "the squared error (pred - 3.) ** 2.")
    value = float(value.reshape(()))
    right = float(_nested_loss(want, x, target))
    if not _close(value, right):
        residual = float(_nested_loss(want, x, target) ** 0.5) * -1.0
        if _close(value, residual):
            return (f"nested_loss returns {_fmt_num(value)} at the start: that is the residual pred − 3, not the "
                    "squared error. Square it: return (pred - 3.) ** 2.")
        return (f"nested_loss returns {_fmt_num(value)} at the start; the squared error there is "
                f"{_fmt_num(right)} (prediction 1, target 3): return (pred - 3.) ** 2.")
    theirs = jax.grad(nested_loss)(nested)
    reference = jax.grad(_nested_loss)(want, x, target)
    flat_theirs, flat_ref = _leaves_paths(theirs), _leaves_paths(reference)
    unused = [path for path, ref in flat_ref.items()
              if path in flat_theirs and not _np().any(_np().asarray(flat_theirs[path]))
              and _np().any(_np().asarray(ref))]
    if unused:
        reads = ", ".join(f"p{path}" for path in unused)
        return (f"nested_loss does not depend on {reads} (its gradient there is 0): the loss reads "
                f"{'that leaf' if len(unused) == 1 else 'those leaves'} from outside (params?) instead of "
                "through its argument p. JAX differentiates only what the loss computes from p: "
                'read every leaf through p, as p["layer"]["weight"].')
    if g is not None and not _same_tree(g, theirs):
        return "g is not the gradient of your nested_loss at nested: g = jax.grad(nested_loss)(nested)."
    return None


def _leaves_paths(tree) -> dict[str, Any]:
    jax = _jax()
    flat, _ = jax.tree_util.tree_flatten_with_path(tree)
    return {jax.tree_util.keystr(path): leaf for path, leaf in flat}

