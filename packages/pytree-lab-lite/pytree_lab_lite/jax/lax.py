"""`jax.lax` for the Lite engine: `cond`, `select`, `stop_gradient` (and `switch`, `fori_loop`,
`while_loop`, `scan`, `map`), run eagerly in Python, traceable by autograd."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import autograd.numpy as _anp

from .. import tree_util as _tu
from . import numpy as _jnp
from ._config import refusing as _refusing

__getattr__ = _refusing(__name__, globals())  # a name JAX has and this engine lacks: says so

__all__ = ["cond", "select", "stop_gradient", "switch", "fori_loop", "while_loop", "scan", "map"]


def _scalar_pred(pred: Any, name: str) -> bool:
    value = _jnp._getval(pred)
    shape = _anp.shape(value)
    if shape != ():
        raise (
            TypeError(f"Pred must be a scalar, got {value} of shape {shape}.")
            if name == "cond"
            else TypeError(f"{name}: the index must be a scalar, got shape {shape}")
        )
    return value


def cond(pred: Any, true_fun: Callable, false_fun: Callable, *operands: Any) -> Any:
    """``true_fun(*operands)`` if pred else ``false_fun(*operands)`` (only the one taken runs)."""
    return switch(bool(_scalar_pred(pred, "cond")), (false_fun, true_fun), *operands)


def switch(index: Any, branches: Sequence[Callable], *operands: Any) -> Any:
    i = int(_scalar_pred(index, "switch"))
    return _tu.tree_map(_jnp.asarray, branches[min(max(i, 0), len(branches) - 1)](*operands))  # arrays, as JAX returns


def select(pred: Any, on_true: Any, on_false: Any) -> Any:
    """Elementwise choice; pred must be boolean and all three the same shape (as in JAX)."""
    p = _jnp._getval(pred)
    if _anp.asarray(p).dtype != bool:
        raise TypeError(f"select `which` must be boolean type, got {_anp.asarray(p).dtype}.")
    if not (_anp.shape(p) == _anp.shape(on_true) == _anp.shape(on_false)) and _anp.shape(p) != ():
        raise TypeError(f"select cases must have the same shapes, got [{_anp.shape(on_true)}, {_anp.shape(on_false)}].")
    return _jnp._canon(_anp.where(p, on_true, on_false))


def stop_gradient(x: Any) -> Any:
    """The same values; no gradient flows through them (a tree: every leaf). As in JAX, inside
    `jax.grad` they are plain values again: ``float(stop_gradient(x))`` works there."""
    return _tu.tree_map(_jnp._getval, x)


def fori_loop(lower: int, upper: int, body_fun: Callable, init_val: Any) -> Any:
    val = init_val
    for i in range(int(lower), int(upper)):
        val = body_fun(i, val)
    return val


def scan(f: Callable, init: Any, xs: Any = None, length: int | None = None, reverse: bool = False) -> Any:
    if xs is None:
        n = int(length)  # type: ignore[arg-type]  # no xs and no length: a TypeError
        items = [None] * n
    else:
        leaves, treedef = _tu.tree_flatten(xs)
        n = leaves[0].shape[0] if leaves else int(length)  # type: ignore[arg-type]  # as above
        items = [_tu.tree_unflatten(treedef, [leaf[i] for leaf in leaves]) for i in range(n)]
    order = range(n - 1, -1, -1) if reverse else range(n)
    carry, ys = init, [None] * n
    for i in order:
        carry, ys[i] = f(carry, items[i])
    return carry, (None if n == 0 or ys[0] is None else _stacked(ys))


def _stacked(trees: list, axis: int = 0) -> Any:
    """Trees of one structure stacked leaf by leaf along `axis` (scan's outputs, vmap's results)."""
    return _tu.tree_map(lambda *xs: _jnp._canon(_anp.stack([_jnp.asarray(x) for x in xs], axis=axis)), *trees)


def while_loop(cond_fun: Callable, body_fun: Callable, init_val: Any) -> Any:
    """``body_fun`` applied while ``cond_fun`` holds (its value must be a scalar, as in JAX)."""
    val = init_val
    while bool(_scalar_pred(cond_fun(val), "while_loop")):
        val = body_fun(val)
    return val


def map(f: Callable, xs: Any, *, batch_size: int | None = None) -> Any:  # noqa: A001 - JAX's name
    """``f`` applied to each slice of `xs` along its first axis, the results stacked (`batch_size`
    changes only how JAX schedules it, not the result)."""
    del batch_size
    return scan(lambda carry, x: (carry, f(x)), None, xs)[1]
