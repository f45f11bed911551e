"""`jax.nn` for the Lite engine: the activations and reductions lessons use, traceable by autograd.

Values and gradients follow JAX's definitions: `relu`'s gradient at exactly 0 is 0, `softmax`
and `log_softmax` subtract the maximum first (no overflow), `logsumexp` likewise.
"""

from __future__ import annotations

from typing import Any

import autograd.numpy as _anp

from . import numpy as _jnp

__all__ = [
    "relu",
    "sigmoid",
    "softmax",
    "log_softmax",
    "logsumexp",
    "softplus",
    "tanh",
    "gelu",
    "silu",
    "one_hot",
    "log_sigmoid",
]


def relu(x: Any) -> Any:
    x = _jnp.asarray(x)
    return _jnp._canon(_anp.where(x > 0, x, _anp.zeros_like(x)))


def sigmoid(x: Any) -> Any:
    x = _jnp.asarray(x)
    return _jnp._canon(0.5 * (_anp.tanh(0.5 * x) + 1.0))  # stable for large |x|


def log_sigmoid(x: Any) -> Any:
    return -softplus(-_jnp.asarray(x))


def softplus(x: Any) -> Any:
    x = _jnp.asarray(x)
    return _jnp._canon(_anp.logaddexp(x, 0.0))


def silu(x: Any) -> Any:
    x = _jnp.asarray(x)
    return _jnp._canon(x * sigmoid(x))


def gelu(x: Any, approximate: bool = True) -> Any:
    x = _jnp.asarray(x)
    if approximate:
        c = _anp.sqrt(2.0 / _anp.pi)
        return _jnp._canon(0.5 * x * (1.0 + _anp.tanh(c * (x + 0.044715 * x**3))))
    from autograd.scipy.special import erf

    return _jnp._canon(0.5 * x * (1.0 + erf(x / _anp.sqrt(2.0))))


tanh = _jnp.tanh  # type: ignore[attr-defined]  # made by numpy.py's loop over _TRACED


def logsumexp(a: Any, axis: Any = None, keepdims: bool = False) -> Any:
    a = _jnp.asarray(a)
    top = _anp.max(_jnp._getval(a), axis=axis, keepdims=True)
    top = _anp.where(_anp.isfinite(top), top, 0.0)
    out = _anp.log(_anp.sum(_anp.exp(a - top), axis=axis, keepdims=True)) + top
    if not keepdims:
        out = _anp.squeeze(out, axis=axis) if axis is not None else _anp.reshape(out, ())
    return _jnp._canon(out)


def log_softmax(x: Any, axis: int = -1) -> Any:
    x = _jnp.asarray(x)
    shifted = x - _anp.max(_jnp._getval(x), axis=axis, keepdims=True)
    return _jnp._canon(shifted - _anp.log(_anp.sum(_anp.exp(shifted), axis=axis, keepdims=True)))


def softmax(x: Any, axis: int = -1) -> Any:
    x = _jnp.asarray(x)
    unnormalized = _anp.exp(x - _anp.max(_jnp._getval(x), axis=axis, keepdims=True))
    return _jnp._canon(unnormalized / _anp.sum(unnormalized, axis=axis, keepdims=True))


def one_hot(x: Any, num_classes: int, dtype: Any = None, axis: int = -1) -> Any:
    import numpy as np

    x = np.asarray(_jnp._getval(x))
    out = (x[..., None] == np.arange(num_classes)).astype(_jnp._default_float(dtype))
    return np.moveaxis(out, -1, axis) if axis != -1 else out
