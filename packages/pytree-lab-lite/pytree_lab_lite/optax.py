"""Optimizers for the Lite engine: optax's sgd, momentum and adam, on numpy.

optax needs jaxlib, which a JupyterLite (Pyodide) kernel cannot install. These follow optax's
update rules operation by operation, with its state types and field names
(`ScaleByAdamState(count, mu, nu)`, `TraceState(trace)`, `EmptyState()`): the tests compare
every step, params and state, with optax itself. `learning_rate` is a number (no schedules);
everything else needs JAX and optax.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as _np

from . import tree_util as _tu
from .jax._config import refusing as _refusing

__getattr__ = _refusing(__name__, globals())  # a name optax has and this subset lacks: says so

__all__ = [
    "GradientTransformation",
    "EmptyState",
    "TraceState",
    "ScaleByAdamState",
    "identity",
    "scale",
    "scale_by_learning_rate",
    "trace",
    "scale_by_adam",
    "chain",
    "sgd",
    "momentum",
    "adam",
    "apply_updates",
]


class GradientTransformation(NamedTuple):
    """`init(params) -> state`, `update(updates, state, params=None) -> (updates, state)`."""

    init: Callable
    update: Callable


# marks a Lite-engine optimizer (the explorer refuses to mix it with real JAX)
GradientTransformation.__pytree_lab_lite__ = True  # type: ignore[attr-defined]


class EmptyState(NamedTuple):
    """The state of a transformation that keeps none."""


class TraceState(NamedTuple):
    """Momentum's state: the trace of past updates, one leaf per parameter."""

    trace: Any


class ScaleByAdamState(NamedTuple):
    """Adam's state: step count (int32), first moment `mu`, second moment `nu`."""

    count: Any
    mu: Any
    nu: Any


def _const(value: float, like: Any) -> Any:
    """A Python constant in the dtype of the array it meets (JAX's weak typing)."""
    return _np.asarray(value, dtype=_np.asarray(like).dtype)


def _zeros_like(tree: Any) -> Any:
    return _tu.tree_map(lambda x: _np.zeros_like(_np.asarray(x)), tree)


def _init_empty(params: Any) -> EmptyState:
    del params
    return EmptyState()


def identity() -> GradientTransformation:
    def update(updates, state, params=None):
        del params
        return updates, state

    return GradientTransformation(_init_empty, update)


def scale(step_size: float) -> GradientTransformation:
    """updates · step_size."""

    def update(updates, state, params=None):
        del params
        return _tu.tree_map(lambda g: _const(step_size, g) * g, updates), state

    return GradientTransformation(_init_empty, update)


def scale_by_learning_rate(learning_rate: float, *, flip_sign: bool = True) -> GradientTransformation:
    """updates · (−learning_rate), as optax does for a constant rate."""
    if callable(learning_rate):
        raise NotImplementedError("Schedules need optax (JAX); the Lite engine takes a number as learning_rate.")
    m = -1 if flip_sign else 1
    return scale(m * learning_rate)


def trace(decay: float, nesterov: bool = False) -> GradientTransformation:
    """trace ← g + decay · trace; updates = trace (or g + decay · trace with Nesterov)."""

    def init(params):
        return TraceState(trace=_zeros_like(params))

    def update(updates, state, params=None):
        del params
        f = lambda g, t: g + _const(decay, t) * t  # noqa: E731
        new_trace = _tu.tree_map(f, updates, state.trace)
        updates = _tu.tree_map(f, updates, new_trace) if nesterov else new_trace
        return updates, TraceState(trace=new_trace)

    return GradientTransformation(init, update)


def _bias_correction(moment: Any, decay: float, count: Any) -> Any:
    # 1 − decay**count in float32 (a weak float to an int32 power), as optax computes it
    correction = _np.asarray(1, _np.float32) - _np.power(
        _np.asarray(decay, _np.float32), _np.asarray(count, _np.float32)
    )
    return _tu.tree_map(lambda t: t / correction.astype(_np.asarray(t).dtype), moment)


def scale_by_adam(
    b1: float = 0.9, b2: float = 0.999, eps: float = 1e-8, eps_root: float = 0.0
) -> GradientTransformation:
    """Adam's rescaling: bias-corrected first moment over the root of the second moment."""

    def init(params):
        return ScaleByAdamState(count=_np.zeros((), _np.int32), mu=_zeros_like(params), nu=_zeros_like(params))

    def update(updates, state, params=None):
        del params
        mu = _tu.tree_map(lambda g, t: _const(1 - b1, g) * g + _const(b1, t) * t, updates, state.mu)
        nu = _tu.tree_map(lambda g, t: _const(1 - b2, g) * (g**2) + _const(b2, t) * t, updates, state.nu)
        count = _np.asarray(state.count)
        top = _np.asarray(_np.iinfo(count.dtype).max, count.dtype)
        count = _np.where(count < top, count + _np.asarray(1, count.dtype), top)  # optax's safe increment
        mu_hat = _bias_correction(mu, b1, count)
        nu_hat = _bias_correction(nu, b2, count)
        new = _tu.tree_map(lambda m, v: m / (_np.sqrt(v + _const(eps_root, v)) + _const(eps, v)), mu_hat, nu_hat)
        return new, ScaleByAdamState(count=count, mu=mu, nu=nu)

    return GradientTransformation(init, update)


def chain(*transformations: GradientTransformation) -> GradientTransformation:
    """Apply transformations in order; the state is the tuple of their states."""

    def init(params):
        return tuple(t.init(params) for t in transformations)

    def update(updates, state, params=None):
        new_states = []
        for t, s in zip(transformations, state):
            updates, s = t.update(updates, s, params)
            new_states.append(s)
        return updates, tuple(new_states)

    return GradientTransformation(init, update)


def sgd(learning_rate: float, momentum: float | None = None, nesterov: bool = False) -> GradientTransformation:
    first = trace(decay=momentum, nesterov=nesterov) if momentum is not None else identity()
    return chain(first, scale_by_learning_rate(learning_rate))


def momentum(learning_rate: float, decay: float = 0.9, nesterov: bool = False) -> GradientTransformation:
    """sgd with momentum `decay` (optax spells it `optax.sgd(lr, momentum=0.9)`)."""
    return sgd(learning_rate, momentum=decay, nesterov=nesterov)


def adam(
    learning_rate: float, b1: float = 0.9, b2: float = 0.999, eps: float = 1e-8, eps_root: float = 0.0
) -> GradientTransformation:
    return chain(scale_by_adam(b1=b1, b2=b2, eps=eps, eps_root=eps_root), scale_by_learning_rate(learning_rate))


def apply_updates(params: Any, updates: Any) -> Any:
    """params + updates, each leaf kept in its parameter's dtype."""
    return _tu.tree_map(lambda p, u: _np.asarray(p + u).astype(_np.asarray(p).dtype), params, updates)
