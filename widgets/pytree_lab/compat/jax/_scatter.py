"""JAX's scatter for the Lite engine's ``x.at[i]`` updates (`numpy._AtIndex`): numpy updates on a
copy that autograd differentiates (their gradients written with the same primitives, so a gradient
of a gradient works too), and JAX's rules for an index: traced parts made concrete, an update at an
integer outside the array dropped."""

from __future__ import annotations

from typing import Any

import autograd.numpy as _anp
import numpy as _np
from autograd.extend import defvjp as _defvjp, primitive as _primitive
from autograd.numpy.numpy_boxes import ArrayBox as _ArrayBox
from autograd.tracer import getval as _getval


def _concrete_index(idx: Any) -> Any:
    """An index as numpy takes it: traced parts made concrete (JAX indices are concrete outside
    jit), lists of indices as integer arrays."""
    if type(idx) is tuple:
        return tuple(_concrete_index(i) for i in idx)
    if isinstance(idx, (_ArrayBox, _np.ndarray, _np.generic)) or type(idx) is list:
        return _np.asarray(_getval(idx)).view(_np.ndarray)
    return idx


def _drops_update(idx: Any, shape: tuple) -> bool:
    """True when an integer in the index is outside the array: JAX drops such an update
    (its scatter's default mode), where numpy would raise IndexError."""
    parts = idx if type(idx) is tuple else (idx,)
    if any(part is Ellipsis for part in parts):
        return False
    axis = 0
    for part in parts:
        if part is None:
            continue
        if axis >= len(shape):
            return False
        if isinstance(part, (int, _np.integer)) and not isinstance(part, bool):
            if not -shape[axis] <= int(part) < shape[axis]:
                return True
        axis += 1
    return False


@_primitive
def _scatter_set(x: Any, idx: Any, v: Any) -> Any:
    out = _np.array(x, copy=True).view(_np.ndarray)
    out[idx] = v  # numpy casts v to the array's dtype, as JAX's scatter does
    return out


@_primitive
def _scatter_add(x: Any, idx: Any, v: Any) -> Any:
    out = _np.array(x, copy=True).view(_np.ndarray)
    _np.add.at(out, idx, _np.asarray(v).astype(out.dtype, copy=False))  # repeated indices accumulate
    return out


def _sum_to_shape(t: Any, target: Any) -> Any:
    """A cotangent of the broadcast update, summed back to the shape of the value given."""
    shape = _np.shape(_getval(target))
    while _anp.ndim(t) > len(shape):
        t = _anp.sum(t, axis=0)
    for axis, size in enumerate(shape):
        if size == 1 and _anp.shape(t)[axis] != 1:
            t = _anp.sum(t, axis=axis, keepdims=True)
    return t


# written with the primitives themselves, so a gradient of a gradient works too
_defvjp(
    _scatter_set,
    lambda ans, x, idx, v: lambda g: _scatter_set(g, idx, 0),
    None,
    lambda ans, x, idx, v: lambda g: _sum_to_shape(g[idx], v),
)
_defvjp(
    _scatter_add, lambda ans, x, idx, v: lambda g: g, None, lambda ans, x, idx, v: lambda g: _sum_to_shape(g[idx], v)
)
