"""`grad`, `value_and_grad` and `jit` for the Lite engine, on autograd's reverse mode.

The arguments selected by `argnums` are flattened with `jax.tree_util` rules; each leaf is traced
by autograd and the gradient comes back as a tree of the same structure, each leaf with its
parameter's dtype (autograd may widen intermediate values; JAX never changes a float32 to float64).
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Callable, Sequence
from typing import Any

import autograd.numpy as _anp
import numpy as _np
from autograd.core import make_vjp as _make_vjp
from autograd.extend import vspace as _vspace
from autograd.numpy.numpy_boxes import ArrayBox as _ArrayBox
from autograd.tracer import getval as _getval

from .. import tree_util as _tu
from . import numpy as _jnp
from .lax import _stacked


def _as_primal(leaf: Any) -> Any:
    """A leaf we differentiate with respect to, as JAX would store it (float32 by default)."""
    if isinstance(leaf, _ArrayBox):  # a gradient of a gradient: keep tracing through it
        value = leaf
    elif isinstance(leaf, (_np.ndarray, _np.generic, bool, int, float, complex)) or hasattr(leaf, "__array__"):
        value = _jnp.asarray(leaf)
    else:
        raise TypeError(f"Argument '{leaf}' of type {type(leaf)} is not a valid JAX type.")
    dt = value.dtype
    if not _np.issubdtype(dt, _np.inexact):
        raise TypeError(
            "grad requires real- or complex-valued inputs (input dtype that is a sub-dtype of "
            f"np.inexact), but got {dt.name}. If you want to use Boolean- or integer-valued "
            "inputs, use vjp or set allow_int to True."
        )
    return value


def _check_output(out: Any) -> _np.ndarray:
    raw = _getval(out)
    if raw is None or isinstance(raw, (tuple, list, dict)):  # no return, or a pair without has_aux
        shown = repr(_unbox(raw))
        shown = shown if len(shown) <= 200 else shown[:199] + "…"
        raise TypeError(f"Gradient only defined for scalar-output functions. Output was {shown}.")
    value = _jnp.asarray(raw)
    if value.shape != ():
        raise TypeError(f"Gradient only defined for scalar-output functions. Output had shape: {value.shape}.")
    if not _np.issubdtype(value.dtype, _np.floating):
        raise TypeError(
            "grad requires real-valued outputs (output dtype that is a sub-dtype of np.floating), "
            f"but got {value.dtype.name}. For differentiation of functions with integer outputs, "
            "use jax.vjp directly."
        )
    return value


def _like_primal(g: Any, primal: Any) -> Any:
    if isinstance(g, _ArrayBox) or isinstance(primal, _ArrayBox):
        return g if g.dtype == primal.dtype else g.astype(primal.dtype)
    return _jnp._lite(_np.asarray(g, dtype=primal.dtype).reshape(_np.shape(primal)))


def _unbox(tree: Any) -> Any:
    return _tu.tree_map(_getval, tree)


def _traced(fun: Callable, argnums: Any, has_aux: bool, args: tuple, kwargs: dict, flat_out: Any = None) -> tuple:
    """Trace ``fun`` at `args` with respect to the arguments at `argnums`: (vjp, out, primals,
    their treedef, aux). `flat_out` turns the output into what is differentiated."""
    positions: tuple[int, ...] = (argnums,) if isinstance(argnums, int) else tuple(argnums)
    if positions and max(positions) >= len(args):
        raise TypeError(
            f"differentiating with respect to argnums={argnums} requires at least "
            f"{max(positions) + 1} positional arguments to be passed by the caller, "
            f"but got only {len(args)} positional arguments."
        )
    leaves, treedef = _tu.tree_flatten(tuple(args[i] for i in positions))
    primals = tuple(_as_primal(leaf) for leaf in leaves)
    aux_out: list = []

    def flat_fun(traced: Any) -> Any:
        chosen = _tu.tree_unflatten(treedef, [traced[i] for i in range(len(primals))])
        call_args = list(args)
        for position, value in zip(positions, chosen):
            call_args[position] = value
        out = fun(*call_args, **kwargs)
        if has_aux:
            if not (isinstance(out, (tuple, list)) and len(out) == 2):
                raise TypeError(
                    "value_and_grad with has_aux=True requires the function to return a "
                    f"pair (output, auxiliary data); got {type(out).__name__}"
                )
            out, aux = out
            aux_out.append(aux)
        return out if flat_out is None else flat_out(out)

    if primals:
        with warnings.catch_warnings(), _np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            # a constant function has a zero gradient in JAX, without a warning
            warnings.filterwarnings("ignore", "Output seems independent of input", UserWarning)
            vjp, out = _make_vjp(flat_fun, primals)
    else:  # nothing to differentiate: an empty gradient tree
        vjp, out = None, flat_fun(())
    return vjp, out, primals, treedef, (_unbox(aux_out[0]) if has_aux else None)


def _pull(vjp: Any, cotangent: Any, primals: tuple) -> list:
    with _np.errstate(divide="ignore", invalid="ignore", over="ignore", under="ignore"):
        # JAX gives inf or nan silently where a derivative is infinite (sqrt, norm at 0)
        cotangents = vjp(cotangent) if primals else ()
    return [_like_primal(g, p) for g, p in zip(cotangents, primals)]


def value_and_grad(
    fun: Callable,
    argnums: int | Sequence[int] = 0,
    has_aux: bool = False,
    holomorphic: bool = False,
    allow_int: bool = False,
    reduce_axes: Sequence = (),
) -> Callable:
    """``fun``'s value and its gradient with respect to the arguments at `argnums`."""
    several = not isinstance(argnums, int)

    @functools.wraps(fun)
    def value_and_grad_f(*args: Any, **kwargs: Any) -> Any:
        vjp, out, primals, treedef, aux = _traced(fun, argnums, has_aux, args, kwargs)
        value = _check_output(out)
        if isinstance(out, _ArrayBox):  # inside an outer grad: keep the outer trace
            value = _jnp.asarray(out)
        elif type(out) in (int, float):  # a Python constant, returned as written (as JAX does);
            # a numpy scalar (`x.mean()` on numpy data) is a value like any other: float32 below
            value = out
        grad_tree = _tu.tree_unflatten(treedef, _pull(vjp, _vspace(out).ones(), primals))
        if not several:
            grad_tree = grad_tree[0]
        return ((value, aux) if has_aux else value), grad_tree

    return value_and_grad_f


def jacrev(
    fun: Callable,
    argnums: int | Sequence[int] = 0,
    has_aux: bool = False,
    holomorphic: bool = False,
    allow_int: bool = False,
) -> Callable:
    """The Jacobian of `fun` (its output a tree of arrays): for each output leaf of shape S, a
    tree like the argument(s) at `argnums` whose leaves have shape S + the leaf's shape, as in
    JAX. One reverse pass per output element (autograd), so a Jacobian of a Jacobian works."""
    several = not isinstance(argnums, int)

    @functools.wraps(fun)
    def jacfun(*args: Any, **kwargs: Any) -> Any:
        layout: list = []

        def flat_out(out: Any) -> Any:
            leaves, out_def = _tu.tree_flatten(out)
            leaves = [_jnp.asarray(leaf) for leaf in leaves]
            for leaf in leaves:
                if not _np.issubdtype(leaf.dtype, _np.floating):
                    raise TypeError(
                        "jacrev requires real-valued outputs (output dtype that is a sub-dtype of "
                        f"np.floating), but got {leaf.dtype.name}. For holomorphic differentiation, "
                        "pass holomorphic=True. For differentiation of non-holomorphic functions "
                        "involving complex outputs, or function with integer outputs, use jax.vjp directly."
                    )
            layout[:] = [out_def, [tuple(leaf.shape) for leaf in leaves]]
            return _anp.concatenate([_anp.ravel(leaf) for leaf in leaves]) if leaves else _np.zeros(0, _np.float32)

        vjp, out, primals, treedef, aux = _traced(fun, argnums, has_aux, args, kwargs, flat_out)
        out_def, shapes = layout
        n = int(_np.shape(_getval(out))[0])
        basis = _np.eye(n, dtype=_getval(out).dtype)
        rows = [_pull(vjp, basis[k], primals) for k in range(n)]
        per_output, start = [], 0
        for shape in shapes:
            size = int(_np.prod(shape, dtype=int))
            blocks = [
                _jnp._canon(
                    _anp.reshape(_anp.stack([rows[k][i] for k in range(start, start + size)]), shape + _np.shape(p))
                    if size
                    else _np.zeros(shape + _np.shape(p), _np.float32)
                )
                for i, p in enumerate(primals)
            ]
            tree = _tu.tree_unflatten(treedef, blocks)
            per_output.append(tree if several else tree[0])
            start += size
        jac = _tu.tree_unflatten(out_def, per_output)
        return (jac, aux) if has_aux else jac

    return jacfun


jacfwd = jacrev  # the Jacobian as jax.jacfwd gives it, computed by reverse mode: the same values, another cost


def hessian(
    fun: Callable,
    argnums: int | Sequence[int] = 0,
    has_aux: bool = False,
    holomorphic: bool = False,
) -> Callable:
    """The Hessian of a scalar `fun`: the Jacobian of its gradient (JAX's layout: for an
    argument of shape P, an array of shape P + P)."""
    return jacrev(jacrev(fun, argnums, has_aux=has_aux), argnums, has_aux=has_aux)


def grad(
    fun: Callable,
    argnums: int | Sequence[int] = 0,
    has_aux: bool = False,
    holomorphic: bool = False,
    allow_int: bool = False,
    reduce_axes: Sequence = (),
) -> Callable:
    """The gradient of a scalar `fun`: a tree shaped like the argument(s) at `argnums`."""
    value_and_grad_f = value_and_grad(fun, argnums, has_aux=has_aux)

    @functools.wraps(fun)
    def grad_f(*args: Any, **kwargs: Any) -> Any:
        result, g = value_and_grad_f(*args, **kwargs)
        return (g, result[1]) if has_aux else g

    return grad_f


def jit(fun: Callable | None = None, /, **options: Any) -> Any:
    """No compiler here: `fun` runs as written (numpy is already vectorised); `jax.jit`'s
    arguments (static_argnums, static_argnames, ...) are accepted, so lesson code runs unchanged."""
    if fun is None:
        return functools.partial(jit, **options)

    @functools.wraps(fun)
    def jitted(*args: Any, **kwargs: Any) -> Any:
        return fun(*args, **kwargs)

    return jitted


def block_until_ready(x: Any) -> Any:
    """Computation is eager here, so results are always ready."""
    return x


def _axis_leaves(axis: Any, arg: Any) -> list:
    """One axis (int or None) per leaf of `arg`, from an int/None or a tree prefix of it."""
    if axis is None or isinstance(axis, int):
        return [axis] * len(_tu.tree_leaves(arg))
    axes, axes_def = _tu.tree_flatten(axis, is_leaf=lambda x: x is None)
    return [ax for ax, child in zip(axes, axes_def.flatten_up_to(arg)) for _ in _tu.tree_leaves(child)]


def vmap(
    fun: Callable,
    in_axes: Any = 0,
    out_axes: Any = 0,
    axis_name: Any = None,
    axis_size: int | None = None,
    spmd_axis_name: Any = None,
) -> Callable:
    """`fun` mapped over an axis of its arguments: called once per index (a Python loop here,
    traceable by autograd, so `grad` of a vmapped function works) and the results stacked."""
    if not (isinstance(out_axes, int) or out_axes is None):
        raise ValueError("vmap out_axes: only an int or None is supported by the Lite engine")

    @functools.wraps(fun)
    def vmapped(*args: Any, **kwargs: Any) -> Any:
        axes = tuple(in_axes) if isinstance(in_axes, (list, tuple)) else (in_axes,) * len(args)
        if len(axes) != len(args):
            raise ValueError(
                "vmap in_axes must be an int, None, or a tuple of entries corresponding to the "
                "positional arguments passed to the function, but got "
                f"len(in_axes)={len(axes)}, len(args)={len(args)}"
            )
        leaves, treedef = _tu.tree_flatten(args)
        leaf_axes = [ax for arg, axis in zip(args, axes) for ax in _axis_leaves(axis, arg)]
        sizes = set() if axis_size is None else {axis_size}
        for leaf, ax in zip(leaves, leaf_axes):
            if ax is not None:
                shape = _np.shape(_getval(leaf))
                if not -len(shape) <= ax < len(shape):
                    raise ValueError(
                        f"vmap was requested to map its argument along axis {ax}, which implies "
                        f"that its rank should be at least {ax + 1 if ax >= 0 else -ax}, "
                        f"but is only {len(shape)} (its shape is {shape})"
                    )
                sizes.add(shape[ax])
        if not sizes:
            raise ValueError("vmap must have at least one non-None value in in_axes")
        if len(sizes) > 1:
            raise ValueError(f"vmap got inconsistent sizes for array axes to be mapped: {sorted(sizes)}")
        n = sizes.pop()
        if n == 0:
            raise ValueError("vmap over an axis of size 0 is not supported by the Lite engine")

        def pick(leaf: Any, ax: Any, i: int) -> Any:
            return leaf if ax is None else leaf[(slice(None),) * (ax % _np.ndim(_getval(leaf))) + (i,)]

        results = [
            fun(*_tu.tree_unflatten(treedef, [pick(leaf, ax, i) for leaf, ax in zip(leaves, leaf_axes)]), **kwargs)
            for i in range(n)
        ]
        return results[0] if out_axes is None else _stacked(results, out_axes)

    return vmapped
