"""Gradient of packed parameters: a function grad_over_flat_params(flat_params, x). Its worked example
and hidden cases (drawn one at a time, only after the previous case was graded, from a generator
seeded by the operating system), its reference gradients, and what a wrong output says about the
answer (shape, order, bias position). Feedback may describe a hidden case's size, never its values."""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Iterator
from typing import Any

from ...exercises import (
    Case,
    CheckContext,
    Outcome,
    all_finite,
    as_number_array,
    close,
    describe_failure,
    fmt,
    fmt_num,
    fmt_shape,
    notes_for,
    run_guarded,
    tools,
    tree_problem,
    type_name,
)
from .common import graded_exercise, jax_hint

# The packed-parameters task's worked example (shown to students, so it may appear in feedback).
_FLAT_EXAMPLE_PARAMS = (1.0, 0.0, 0.0)
_FLAT_EXAMPLE_X = ((2.0, 3.0),)


def _flat_loss(flat_params, x):
    # weights first, then the bias; the sum (not the mean) of squared predictions, no targets
    jnp = tools.jnp
    return jnp.sum((x @ flat_params[:-1] + flat_params[-1]) ** 2)


@dataclasses.dataclass(frozen=True)
class _FlatCase:
    """One case: flat_params (d + 1,) and x (N, d) as numpy float32, whether it is hidden, its right
    gradient and, only when an answer is wrong, the gradients of typical wrong losses that explain
    it (`variants`). All from jax.grad."""

    flat_params: Any
    x: Any
    hidden: bool

    def args(self) -> tuple:
        """Fresh arrays per call: a function that changes its inputs cannot affect later cases."""
        return tools.jnp.asarray(self.flat_params.copy()), tools.jnp.asarray(self.x.copy())

    @functools.cached_property
    def grad(self) -> Any:
        return _flat_grad_fn()(*self.args())

    @functools.cached_property
    def variants(self) -> dict[str, Any]:
        return _flat_variants_fn()(*self.args())


# (N, d) of the hidden cases: several sizes; N >= 2 so a mean differs from a sum, d != 2 in most
# so a hard-coded feature count fails, and N is neither d nor d + 1 so a shape names its axes
# unambiguously. The sizes are fixed and the values random: repeated checks reuse compiled code
# for these shapes, so only the first check in a kernel pays for compiling.
_HIDDEN_SIZES = ((3, 1), (5, 2), (6, 3), (8, 4))


def _cases(rng) -> Iterator[Case]:
    """The exercise's cases (`Exercise.cases`): the worked example, then the hidden sizes with
    values drawn from `rng`, one at a time."""
    np = tools.np
    for index, size in enumerate([None, *_HIDDEN_SIZES]):
        if size is None:
            flat, x = np.array(_FLAT_EXAMPLE_PARAMS, np.float32), np.array(_FLAT_EXAMPLE_X, np.float32)
        else:
            flat = rng.normal(size=size[1] + 1).astype(np.float32)
            x = rng.normal(size=size).astype(np.float32)
        label = f"hidden case {index} (N = {size[0]})" if size else "the worked example"
        yield Case(label, {"grad_over_flat_params": [_FlatCase(flat, x, bool(size)).grad]}, args=(flat, x))


# Compiled once per (N, d). Run op by op, each new shape costs a compile per primitive: seconds.
@functools.cache
def _flat_grad_fn():
    jax = tools.jax
    return jax.jit(jax.grad(_flat_loss))


@functools.cache
def _flat_variants_fn():
    jax, jnp = tools.jax, tools.jnp

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


_BIAS_FIRST = (
    "the bias is in the wrong position. flat_params holds the d weights first and the bias "
    "last, and the gradient keeps that order: bias last."
)


def _shape_text(shape, case: _FlatCase) -> str:
    """A shape in the exercise's symbols, (N, d + 1); the worked example also gets numbers."""
    n, d = case.x.shape
    symbols = {n: "N", d: "d", 1: "1", d + 1: "d + 1"}  # a later key wins: d + 1 first, then 1, d, N
    names = [symbols.get(size, str(size)) for size in shape]
    symbolic = "(" + ", ".join(names) + ("," if len(names) == 1 else "") + ")"
    if case.hidden or symbolic == fmt_shape(shape):
        return symbolic
    return f"{symbolic} = {fmt_shape(shape)}"


def _diagnose_flat_output(out, case: _FlatCase) -> str | None:
    """None when `out` is right, else one sentence in the exercise's terms. For a hidden case
    it never quotes values, only sizes in the exercise's symbols (N, d)."""
    np = tools.np
    grad = np.asarray(case.grad)
    n, d = case.x.shape
    want = f"one array of shape {_shape_text(grad.shape, case)}"
    if out is None:
        return "your function returned None. Did it forget to `return` the gradient?"
    if isinstance(out, tuple) and len(out) == 2:
        first, second = as_number_array(out[0]), as_number_array(out[1])
        if first is not None and first.size == 1 and second is not None and close(second, grad):
            return (
                "you returned (loss, gradient), as value_and_grad does. Return only the gradient: "
                f"{want}, with no tuple around it."
            )
    if isinstance(out, (tuple, list)):
        kind = "a tuple" if isinstance(out, tuple) else "a list"
        parts = [as_number_array(item) for item in out]
        if parts and all(p is not None for p in parts):
            try:
                joined = np.concatenate([np.ravel(p) for p in parts])
            except ValueError:
                joined = None
            if joined is not None and close(joined, grad):
                return (
                    f"you returned {kind} of {len(out)} items (the gradients in pieces). A single array "
                    f"is a one-leaf pytree, and so is its gradient: return {want}."
                )
        return f"you returned {kind} of {len(out)} items; return {want}, with no tuple or list around it."
    if isinstance(out, dict):
        return (
            f"you returned a dict with keys {', '.join(repr(k) for k in out)}. This exercise packs "
            f"every parameter into one array: return {want}."
        )
    arr = as_number_array(out)
    if arr is None:
        return f"you returned {type_name(out)}; return {want}."
    if arr.shape != grad.shape:
        got = f"shape {_shape_text(arr.shape, case)}"
        if arr.ndim == 0:
            if close(arr, case.variants["loss"]):
                return "you returned the loss value. Return its gradient with respect to flat_params (jax.grad)."
            return f"you returned a single number; return {want}."
        if arr.shape == (d,) and close(arr, grad[:-1]):
            return (
                "the bias gradient is missing: your array holds only the d weight gradients. "
                "Differentiate with respect to all of flat_params; the bias gradient goes last."
            )
        if arr.shape == (d,):
            return f"your array has {got}: one entry short. The bias gradient goes last."
        if arr.shape == tuple(case.x.shape) and close(arr, case.variants["grad_x"]):
            return (
                "you differentiated with respect to x. Differentiate the first argument, flat_params "
                "(argnums=0), and keep x fixed."
            )
        if arr.size == grad.size and close(arr.reshape(grad.shape), grad):
            return f"the values are right but your array has {got}; return {want}."
        return f"wrong shape: expected {want}, got {got}."
    if not all_finite(arr):
        return "your gradient contains NaN or inf."
    if close(arr, grad):
        return None
    if not np.any(arr) and np.any(grad):
        return (
            "every entry is 0, where the gradient is not. Either the loss does not depend on flat_params "
            "(take the slices (flat_params[:-1], flat_params[-1]) inside the loss function you differentiate, "
            "not outside it: JAX can only follow what the loss computes from its argument), or nothing was "
            "differentiated (return jax.grad(loss)(flat_params), not an array of zeros)."
        )
    if close(arr, case.variants["bias_first_read"]) or close(arr, np.roll(grad, 1)):
        return _BIAS_FIRST
    denominator = float(np.dot(grad, grad))
    ratio = float(np.dot(arr, grad)) / denominator if denominator > 0 else float("nan")
    # a mean where a sum was asked: the whole gradient is N times too small
    if n > 1 and abs(ratio * n - 1) < 1e-3 and close(arr, ratio * grad):
        return (
            "a mean where a sum was asked: the gradient is N times too small. The loss is the sum "
            "of the squared predictions (jnp.sum, not jnp.mean)."
        )
    if close(arr, -grad):
        return "the sign is flipped. The loss is the sum of squared predictions; do not negate it."
    if close(arr, grad / 2):
        return "every entry is half the gradient. The derivative of p² is 2p: let jax.grad differentiate the square."
    if close(arr, case.variants["no_bias"]):
        return "the bias is not in the predictions. Predictions are x @ weights + bias, with bias = flat_params[-1]."
    if close(arr, case.variants["sum_of_predictions"]):
        return "this is the gradient of the sum of the predictions. Square each prediction, then sum."
    if close(arr, case.variants["square_of_sum"]):
        return "this is the gradient of the square of the summed predictions. Square each prediction first, then sum."
    if arr.ndim == 1 and close(np.sort(arr), np.sort(grad)):
        return "the right numbers in the wrong order. Keep flat_params' order: the d weights, then the bias."
    if math.isfinite(ratio) and abs(ratio - 1) > 1e-3 and close(arr, ratio * grad):
        shown = f" (×{fmt_num(ratio)})" if not case.hidden else ""
        return f"every entry is the right gradient scaled by the same constant factor{shown}."
    if not case.hidden:
        return f"you returned {fmt(arr)}; the worked example gives {fmt(grad)}."
    return "the values are not the gradient of the sum of squared predictions."


def _cases_label(indices: list[int], sizes: list) -> str:
    """The cases `indices` name, by their sizes (None: the worked example, else (N, d))."""
    if len(indices) == len(sizes):
        return "Every case"
    np = tools.np
    worked = fmt(np.array(_FLAT_EXAMPLE_PARAMS, np.float32)), fmt(np.array(_FLAT_EXAMPLE_X, np.float32))
    parts = [f"Worked example (flat_params = {worked[0]}, x = {worked[1]})"] if 0 in indices else []
    hidden = [f"{i} (N = {sizes[i][0]}, d = {sizes[i][1]})" for i in indices if sizes[i] is not None]
    if hidden:
        parts.append(("hidden case " if len(hidden) == 1 else "hidden cases ") + ", ".join(hidden))
    text = "; ".join(parts)
    return text[0].upper() + text[1:]


CASE_BUDGET = 10.0  # seconds of student code per case (first calls compile: generous)


def _grade_grad_over_flat_params(answer, context: CheckContext) -> Outcome:
    np = tools.np
    if not callable(answer):
        arr = as_number_array(answer)
        line = f"Pass your function grad_over_flat_params itself, not {type_name(answer)}."
        if arr is not None:
            line += (
                " It looks like the result of calling it: write check('grad_over_flat_params', "
                "grad_over_flat_params), without parentheses after the name."
            )
        return Outcome(0, 1, [line])
    passed, total = 0, 1 + len(_HIDDEN_SIZES)
    problems: dict[str, list[int]] = {}
    notes: list[str] = []
    outputs: list = []  # what the function returned, case by case (to see an answer written in)
    for index, declared in enumerate(_cases(context.rng)):  # each drawn once the one before is graded
        case = _FlatCase(declared.args[0], declared.args[1], index > 0)
        run = run_guarded(answer, *case.args(), budget=CASE_BUDGET, once_stuck=True)
        if not run.ok:
            problem = describe_failure(run, what="your function", budget=CASE_BUDGET, hidden=case.hidden)
            problem = problem and problem + jax_hint(run.error)
        else:
            looked = run_guarded(tree_problem, run.value, "your function's result", budget=CASE_BUDGET)
            problem = looked.value if looked.ok else None
            if problem is None:
                problem = _diagnose_flat_output(run.value, case)
            out = as_number_array(run.value)
            if out is not None:
                outputs.append(out)
        notes += [note for note in notes_for(run) if note not in notes]
        if problem is None:
            passed += 1
        else:
            problems.setdefault(problem, []).append(index)
        if run.timed_out:  # one endless loop is enough: do not wait for it once per case
            problems[problem].extend(range(index + 1, total))  # type: ignore[index]  # it has a problem
            break
    hidden = total - 1
    if passed == total:
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
            lines.append(f"- {_cases_label(indices, [None, *_HIDDEN_SIZES])}: {problem}")
    return Outcome(passed, total, lines + notes)


EXERCISE = graded_exercise(
    "grad_over_flat_params",
    "Gradient of packed parameters",
    "A function grad_over_flat_params(flat_params, x) returning the gradient of the sum of "
    "squared predictions with respect to flat_params (weights, then bias).",
    "function",
    _grade_grad_over_flat_params,
    lesson="Gradient of packed parameters",
    answer_name="grad_over_flat_params",
    points=4,
    unit="cases",
    cases=_cases,
)
