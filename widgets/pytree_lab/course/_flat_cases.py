"""The packed-parameters exercise's worked example and hidden cases (drawn one at a time), its
reference gradients, and what a wrong output says about the answer (shape, order, bias
position). Its grader is `catalogue._grade_grad_over_flat_params`."""

from __future__ import annotations

import dataclasses
import functools
import math
from typing import Any

from ..exercises._grading import (
    _as_number_array,
    _close,
    _fmt,
    _fmt_num,
    _fmt_shape,
    _jax,
    _jnp,
    _np,
    _type_name,
)
from ..exercises._tree_grading import _all_finite

# The packed-parameters task's worked example (shown to students, so it may appear in feedback).
_FLAT_EXAMPLE_PARAMS = (1.0, 0.0, 0.0)
_FLAT_EXAMPLE_X = ((2.0, 3.0),)


def _flat_loss(flat_params, x):
    # weights first, then the bias; the sum (not the mean) of squared predictions, no targets
    jnp = _jnp()
    return jnp.sum((x @ flat_params[:-1] + flat_params[-1]) ** 2)


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
            return f"Worked example (flat_params = {_fmt(self.flat_params)}, x = {_fmt(self.x)})"
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


_BIAS_FIRST = (
    "the bias is in the wrong position. flat_params holds the d weights first and the bias "
    "last, and the gradient keeps that order: bias last."
)


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
            return (
                "you returned (loss, gradient), as value_and_grad does. Return only the gradient: "
                f"{want}, with no tuple around it."
            )
    if isinstance(out, (tuple, list)):
        kind = "a tuple" if isinstance(out, tuple) else "a list"
        parts = [_as_number_array(item) for item in out]
        if parts and all(p is not None for p in parts):
            try:
                joined = np.concatenate([np.ravel(p) for p in parts])
            except ValueError:
                joined = None
            if joined is not None and _close(joined, grad):
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
            return (
                "the bias gradient is missing: your array holds only the d weight gradients. "
                "Differentiate with respect to all of flat_params; the bias gradient goes last."
            )
        if arr.shape == (d,):
            return f"your array has {got}: one entry short. The bias gradient goes last."
        if arr.shape == tuple(case.x.shape) and _close(arr, refs["grad_x"]):
            return (
                "you differentiated with respect to x. Differentiate the first argument, flat_params "
                "(argnums=0), and keep x fixed."
            )
        if arr.size == grad.size and _close(arr.reshape(grad.shape), grad):
            return f"the values are right but your array has {got}; return {want}."
        return f"wrong shape: expected {want}, got {got}."
    if not _all_finite(arr):
        return "your gradient contains NaN or inf."
    if _close(arr, grad):
        return None
    if not np.any(arr) and np.any(grad):
        return (
            "every entry is 0: the loss does not depend on flat_params. Take the slices "
            "(flat_params[:-1], flat_params[-1]) inside the loss function you differentiate, "
            "not outside it: JAX can only follow what the loss computes from its argument."
        )
    if _close(arr, refs["bias_first_read"]) or _close(arr, np.roll(grad, 1)):
        return _BIAS_FIRST
    denominator = float(np.dot(grad, grad))
    ratio = float(np.dot(arr, grad)) / denominator if denominator > 0 else float("nan")
    # a mean where a sum was asked: the whole gradient is N times too small
    if n > 1 and abs(ratio * n - 1) < 1e-3 and _close(arr, ratio * grad):
        return (
            "a mean where a sum was asked: the gradient is N times too small. The loss is the sum "
            "of the squared predictions (jnp.sum, not jnp.mean)."
        )
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
