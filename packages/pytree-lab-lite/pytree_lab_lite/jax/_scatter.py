"""JAX's scatter for the Lite engine's ``x.at[i]`` updates (`numpy._AtIndex`) and its reads: numpy updates on a
copy that autograd differentiates (their gradients written with the same primitives, so a gradient
of a gradient works too), and JAX's rules for an index: traced parts made concrete, an update at an
integer outside the array dropped; a read at one clamped (`_clamped`)."""

from __future__ import annotations

import warnings
from typing import Any

import numpy as _np
from autograd.extend import defvjp as _defvjp, primitive as _primitive
from autograd.numpy.numpy_boxes import ArrayBox as _ArrayBox
from autograd.numpy.numpy_vjps import unbroadcast_f as _unbroadcast_f
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


# the update's cotangent is summed back to the shape of the value given (autograd's unbroadcast)
_defvjp(
    _scatter_set,
    lambda ans, x, idx, v: lambda g: _scatter_set(g, idx, 0),
    None,
    lambda ans, x, idx, v: _unbroadcast_f(v, lambda g: g[idx]),
)
_defvjp(
    _scatter_add, lambda ans, x, idx, v: lambda g: g, None, lambda ans, x, idx, v: _unbroadcast_f(v, lambda g: g[idx])
)


def _clamped(idx: Any, shape: tuple) -> Any:
    """An index with each integer (and integer array) part clamped into its axis, as JAX's
    gather does (``x[5]`` of 3 values is ``x[2]``; JAX reads, it never raises for a position)."""
    parts = idx if type(idx) is tuple else (idx,)
    used = sum(part is not None and part is not Ellipsis for part in parts)
    axis, out = 0, []
    for part in parts:
        if part is Ellipsis:
            axis += max(len(shape) - used, 0)
        elif part is not None:
            if axis >= len(shape) or not shape[axis]:
                return idx  # too many indices, an empty axis: numpy's IndexError, as in JAX
            n = shape[axis]
            if isinstance(part, (int, _np.integer)) and not isinstance(part, bool):
                part = min(max(int(part) + n if part < 0 else int(part), 0), n - 1)
            elif isinstance(part, (_np.ndarray, _ArrayBox)) and _np.asarray(_getval(part)).dtype.kind in "iu":
                raw = _np.asarray(_getval(part)).view(_np.ndarray)
                part = _np.clip(_np.where(raw < 0, raw + n, raw), 0, n - 1)
            elif isinstance(part, (_np.ndarray, list)):
                return idx  # a boolean mask: numpy's rules (JAX's too, outside jit)
            axis += 1
        out.append(part)
    return tuple(out) if type(idx) is tuple else out[0]


_KIND_ORDER = {"b": 0, "u": 1, "i": 1, "f": 2, "c": 3}
_WEAK = {
    bool: _np.dtype(bool),
    int: _np.dtype(_np.int32),
    float: _np.dtype(_np.float32),
    complex: _np.dtype(_np.complex64),
}


def _warn_unsafe_scatter(x: Any, values: Any) -> None:
    """JAX's FutureWarning for an update whose values its array cannot hold safely (a float put
    into an int array; JAX casts, and says the cast will become an error)."""
    from .numpy import canonicalize_dtype  # (numpy.py imports this module)

    v = _getval(values)
    weak = _WEAK.get(type(v))
    try:  # asarray, not result_type: a string value is a value here, not a dtype's name
        target = canonicalize_dtype(_np.asarray(_getval(x)).dtype)
        source = weak if weak is not None else canonicalize_dtype(_np.asarray(v).dtype)
    except (TypeError, ValueError):  # not an array's values: the update itself says what is wrong
        return
    s, t = _KIND_ORDER.get(source.kind), _KIND_ORDER.get(target.kind)
    if s is None or t is None:  # strings, objects, dates: left to the update's own error
        return
    # a Python scalar takes the array's dtype unless its kind is above it; an array also warns
    # when the array's dtype of the same kind cannot hold it (float32 into float16)
    if s > t or (weak is None and s == t and _np.promote_types(target, source) != target):
        warnings.warn(
            "scatter inputs have incompatible types: cannot safely cast value from "
            f"dtype={source} to dtype={target} with jax_numpy_dtype_promotion=standard. "
            "In future JAX releases this will result in an error.",
            FutureWarning,
            stacklevel=4,
        )
