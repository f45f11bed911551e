"""`jax.flatten_util.ravel_pytree` for the Lite engine."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import autograd.numpy as _anp
import numpy as _np

from ..tree_util import tree_flatten as _tree_flatten, tree_unflatten as _tree_unflatten
from . import numpy as _jnp


def ravel_pytree(pytree: Any) -> tuple[Any, Callable[[Any], Any]]:
    """All leaves as one 1-D array (in flatten order), and the function that undoes it.

    As in JAX, leaves are promoted to one dtype. When the leaves had several dtypes, `unravel`
    takes only an array of that promoted dtype and casts each piece back to its leaf's dtype;
    when they shared one, it casts nothing (unravel(flat * 2.5) of int leaves gives floats).
    Both directions work inside `grad`.
    """
    leaves, treedef = _tree_flatten(pytree)
    leaves = [_jnp.asarray(leaf) for leaf in leaves]
    shapes = [_np.shape(leaf) for leaf in leaves]
    dtypes = [leaf.dtype for leaf in leaves]
    sizes = [int(_np.prod(s, dtype=int)) for s in shapes]
    flat_dtype = _jnp.result_type(*dtypes)  # of no dtypes: float32
    pieces = [_anp.ravel(leaf).astype(flat_dtype) for leaf in leaves]
    flat = _anp.concatenate(pieces) if pieces else _np.zeros((0,), dtype=flat_dtype)
    total = sum(sizes)
    one_dtype = all(dtype == flat_dtype for dtype in dtypes)

    def unravel(flat_values: Any) -> Any:
        if _np.shape(flat_values) != (total,):
            raise ValueError(
                f"The unravel function expected an array of shape {(total,)}, got shape {_np.shape(flat_values)}."
            )
        given = getattr(flat_values, "dtype", None)
        if not one_dtype and given is not None and given != flat_dtype:
            raise TypeError(f"unravel function given array of dtype {given}, but expected dtype {flat_dtype}")
        pieces, start = [], 0
        for shape, dtype, size in zip(shapes, dtypes, sizes):
            piece = _anp.reshape(flat_values[start : start + size], shape)
            if not one_dtype and piece.dtype != dtype:
                piece = piece.astype(dtype)
            pieces.append(piece)
            start += size
        return _tree_unflatten(treedef, pieces)

    return flat, unravel
