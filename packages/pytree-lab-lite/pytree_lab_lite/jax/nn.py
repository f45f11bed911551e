"""`jax.nn` for the Lite engine: the activations and reductions lessons use, traceable by autograd.

Values and gradients follow JAX's definitions: `relu`'s gradient at exactly 0 is 0, `softmax`
and `log_softmax` subtract the maximum first (no overflow), `logsumexp` likewise.
"""

from __future__ import annotations

from typing import Any

import autograd.numpy as _anp
import numpy as _np

from . import numpy as _jnp, random as _random
from ._config import refusing as _refusing

__getattr__ = _refusing(__name__, globals())  # a name JAX has and this engine lacks: says so

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
    "elu",
    "leaky_relu",
    "initializers",
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


tanh = _jnp.tanh  # made by numpy.py's loop over _TRACED


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
    x = _np.asarray(_jnp._getval(x))
    out = (x[..., None] == _np.arange(num_classes)).astype(_jnp._default_float(dtype))
    return _np.moveaxis(out, -1, axis) if axis != -1 else out


def elu(x: Any, alpha: Any = 1.0) -> Any:
    x = _jnp.asarray(x)
    safe = _anp.where(x > 0, _anp.zeros_like(x), x)  # no overflow of exp where x is large
    return _jnp._canon(_anp.where(x > 0, x, alpha * _anp.expm1(safe)))


def leaky_relu(x: Any, negative_slope: Any = 1e-2) -> Any:
    x = _jnp.asarray(x)
    return _jnp._canon(_anp.where(x >= 0, x, negative_slope * x))


def _make_initializers() -> Any:
    """`jax.nn.initializers`: each makes ``init(key, shape, dtype=float32)``, with JAX's scales
    (fan-in / fan-out from the last two axes); the numbers are drawn by this engine's
    `jax.random`, so they differ from JAX's, with the same distribution."""
    import functools
    import types

    def _fans(shape: tuple) -> tuple[float, float]:
        if len(shape) < 1:
            return 1.0, 1.0
        if len(shape) == 1:
            return float(shape[0]), float(shape[0])
        field = float(_np.prod(shape[:-2])) if len(shape) > 2 else 1.0
        return shape[-2] * field, shape[-1] * field

    def variance_scaling(scale: float, mode: str, distribution: str, in_axis: int = -2, out_axis: int = -1,
                         batch_axis: Any = (), dtype: Any = None) -> Any:  # fmt: skip
        if (in_axis, out_axis, batch_axis) != (-2, -1, ()):
            raise NotImplementedError(
                "The browser engine's initializers take their fans from a shape's last two axes "
                "(in_axis=-2, out_axis=-1, no batch_axis); in a JAX kernel other axes work."
            )

        def init(key: Any, shape: Any, dtype: Any = dtype) -> Any:
            shape = tuple(int(d) for d in shape)
            fan_in, fan_out = _fans(shape)
            denominator = {"fan_in": fan_in, "fan_out": fan_out, "fan_avg": (fan_in + fan_out) / 2}[mode]
            variance = scale / denominator
            if distribution == "truncated_normal":  # JAX's: a standard normal cut at +-2, rescaled
                draws = _np.asarray(_random.normal(key, (max(4 * int(_np.prod(shape)), 16),)), _np.float64)
                kept = draws[_np.abs(draws) < 2][: int(_np.prod(shape))]
                values = kept.reshape(shape) * _np.sqrt(variance) / 0.87962566103423978
            elif distribution == "normal":
                values = _np.asarray(_random.normal(key, shape), _np.float64) * _np.sqrt(variance)
            elif distribution == "uniform":
                limit = _np.sqrt(3 * variance)
                values = _np.asarray(_random.uniform(key, shape, minval=-1.0, maxval=1.0), _np.float64) * limit
            else:
                raise ValueError(f"invalid distribution for variance scaling initializer: {distribution}")
            return _jnp.asarray(values, dtype=_jnp._default_float(dtype))

        return init

    def constant(value: Any, dtype: Any = None) -> Any:
        return lambda key, shape, dtype=dtype: _jnp.full(shape, value, dtype=_jnp._default_float(dtype))

    def normal(stddev: float = 1e-2, dtype: Any = None) -> Any:
        return lambda key, shape, dtype=dtype: _jnp.asarray(
            _np.asarray(_random.normal(key, shape)) * stddev, dtype=_jnp._default_float(dtype)
        )

    def uniform(scale: float = 1e-2, dtype: Any = None) -> Any:
        return lambda key, shape, dtype=dtype: _random.uniform(key, shape, dtype=dtype, maxval=scale)

    module = types.ModuleType("jax.nn.initializers", _make_initializers.__doc__)
    module.__dict__.update(
        zeros=lambda key, shape, dtype=None: _jnp.zeros(shape, dtype),
        ones=lambda key, shape, dtype=None: _jnp.ones(shape, dtype),
        constant=constant,
        normal=normal,
        uniform=uniform,
        variance_scaling=variance_scaling,  # the named ones are partials of it, as in JAX
        glorot_normal=functools.partial(variance_scaling, 1.0, "fan_avg", "truncated_normal"),
        glorot_uniform=functools.partial(variance_scaling, 1.0, "fan_avg", "uniform"),
        he_normal=functools.partial(variance_scaling, 2.0, "fan_in", "truncated_normal"),
        he_uniform=functools.partial(variance_scaling, 2.0, "fan_in", "uniform"),
        lecun_normal=functools.partial(variance_scaling, 1.0, "fan_in", "truncated_normal"),
        lecun_uniform=functools.partial(variance_scaling, 1.0, "fan_in", "uniform"),
    )
    module.__dict__.update(
        xavier_normal=module.glorot_normal,
        xavier_uniform=module.glorot_uniform,
        kaiming_normal=module.he_normal,
        kaiming_uniform=module.he_uniform,
    )

    module.__getattr__ = _refusing(module.__name__, module.__dict__)  # type: ignore[method-assign]
    return module


initializers = _make_initializers()
