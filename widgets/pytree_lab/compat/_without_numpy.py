"""What the Lite engine offers when numpy cannot be loaded (a JupyterLite page offline).

The tree operations (`jax.tree`, `jax.tree_util`) are plain Python and work as usual. Every
part that computes with arrays (`grad`, `value_and_grad`, `jit`, `jax.numpy`,
`jax.flatten_util`) raises `NumpyUnavailable` with one sentence saying so, with one exception:
`jax.numpy.array` / `asarray` give Python numbers, or for sequences a read-only `Array` of the
values (one tree leaf, like a JAX array), so the lessons' trees keep their structure and can
still be built, described and drawn. An `Array` refuses arithmetic with the same sentence.
"""

from __future__ import annotations

import sys
import types
from typing import Any

__all__ = ["NumpyUnavailable", "numpy_module", "flatten_util_module", "needs_numpy"]

# Why numpy is missing, as the setup cell found out (set by pytree_lab.compat.lite_kernel).
REASON = {"text": "numpy could not be loaded in this kernel"}
# Stand-ins are for the browser kernel only: in a regular kernel without numpy, importing the
# Lite engine fails as before (`pip install` is the answer there, not a tree-only engine).
ALLOWED = {"on": sys.platform == "emscripten"}


class NumpyUnavailable(ModuleNotFoundError):
    """A part of the Lite engine that needs numpy was used where numpy could not be loaded."""

    def __init__(self, what: str):
        super().__init__(f"{what} needs numpy, and {REASON['text']}.", name="numpy")
        self.what = what


def needs_numpy(what: str) -> Any:
    """A stand-in for a function that computes with arrays: calling it says why it cannot."""

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise NumpyUnavailable(what)

    refuse.__name__ = what.rsplit(".", 1)[-1]
    refuse.__qualname__ = refuse.__name__
    refuse.__doc__ = f"{what} (needs numpy, which could not be loaded here)."
    return refuse


def _plain(value: Any, what: str) -> Any:
    """Plain Python copy of an array's values: numbers stay numbers, sequences become nested
    tuples of numbers (ints become floats, as in `jnp.array([1., 2.])`)."""
    if isinstance(value, bool):
        return value
    if isinstance(value, int):
        return float(value)
    if isinstance(value, (float, complex)):
        return value
    if isinstance(value, (list, tuple)):
        return tuple(_plain(v, what) for v in value)
    raise NumpyUnavailable(f"{what} of a {type(value).__name__}")


def _refuse_arithmetic(self: Any, *args: Any) -> Any:
    raise NumpyUnavailable("arithmetic on jax.numpy arrays")


class Array(tuple):
    """What `jax.numpy.array([...])` gives where numpy cannot be loaded: the values, read-only.

    One tree leaf (as a JAX array is), indexable and iterable, with `shape` and `tolist()`.
    It is not an array: `+`, `-`, `*`, `/`, `@`, `**` and negation refuse with one sentence
    (a tuple would silently concatenate or repeat).
    """

    __slots__ = ()

    @property
    def shape(self) -> tuple:
        shape, level = [], self
        while isinstance(level, tuple):
            shape.append(len(level))
            level = level[0] if len(level) else None
        return tuple(shape)

    def tolist(self) -> list:
        return [v.tolist() if isinstance(v, Array) else v for v in self]

    def __repr__(self) -> str:
        return f"Array({self.tolist()!r})"

    __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = _refuse_arithmetic
    __truediv__ = __rtruediv__ = __floordiv__ = __rfloordiv__ = __matmul__ = __rmatmul__ = _refuse_arithmetic
    __pow__ = __rpow__ = __mod__ = __rmod__ = __neg__ = __pos__ = __abs__ = _refuse_arithmetic


def _as_array(values: Any) -> Any:
    if isinstance(values, tuple):
        return Array(_as_array(v) for v in values)
    return values


def _array(object: Any, dtype: Any = None, copy: bool = True) -> Any:  # noqa: A002 - numpy's name
    """Numbers stay Python numbers (ints become floats); sequences become a read-only `Array`
    of their values. Only numbers, lists and tuples: anything else needs numpy."""
    if dtype is not None:
        raise NumpyUnavailable("jax.numpy.array with a dtype")
    return _as_array(_plain(object, "jax.numpy.array"))


def _asarray(a: Any, dtype: Any = None) -> Any:
    if dtype is not None:
        raise NumpyUnavailable("jax.numpy.asarray with a dtype")
    return _as_array(_plain(a, "jax.numpy.asarray"))


def _module(name: str, doc: str, members: dict[str, Any]) -> types.ModuleType:
    module = types.ModuleType(name, doc)
    module.__dict__.update(members)
    module.__pytree_lab_lite__ = True
    module.__pytree_lab_without_numpy__ = True

    def __getattr__(attr: str) -> Any:
        if attr.startswith("__"):
            raise AttributeError(attr)
        raise NumpyUnavailable(f"{name}.{attr}")

    module.__getattr__ = __getattr__
    return module


def numpy_module() -> types.ModuleType:
    """`jax.numpy` without numpy: `array`/`asarray` give plain values; the rest refuses."""
    return _module(
        "jax.numpy",
        "jax.numpy of the pytree-lab Lite engine without numpy: array() and asarray() give plain "
        "Python numbers and lists; every other name needs numpy.",
        {"array": _array, "asarray": _asarray},
    )


def flatten_util_module() -> types.ModuleType:
    return _module(
        "jax.flatten_util",
        "jax.flatten_util of the pytree-lab Lite engine without numpy: ravel_pytree needs numpy.",
        {"ravel_pytree": needs_numpy("jax.flatten_util.ravel_pytree")},
    )

