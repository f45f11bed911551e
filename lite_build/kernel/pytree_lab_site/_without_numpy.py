"""What the Lite engine offers when numpy cannot be loaded (a JupyterLite page offline).

The tree operations (`jax.tree`, `jax.tree_util`) are plain Python and work as usual. Every
part that computes with arrays (`grad`, `value_and_grad`, `jit`, `jax.numpy`,
`jax.flatten_util`) raises `NumpyUnavailable` with one sentence saying so, with one exception:
`jax.numpy.array` / `asarray` give Python numbers, or for sequences a read-only `Array` of the
values (one tree leaf, like a JAX array), so the lessons' trees keep their structure and can
still be built, described and drawn. An `Array` refuses arithmetic with the same sentence.
"""

from __future__ import annotations

import math
import types
from collections.abc import Iterable
from typing import Any

__all__ = ["NumpyUnavailable", "module", "needs_numpy"]

# Why numpy is missing, as the setup cell found out (set by pytree_lab_site.lite_kernel).
REASON = {"text": "numpy could not be loaded in this kernel"}


class NumpyUnavailable(ModuleNotFoundError):
    """A part of the Lite engine that needs numpy was used where numpy could not be loaded."""

    def __init__(self, what: str):
        super().__init__(f"{what} needs numpy, and {REASON['text']}.", name="numpy")
        self.what = what


def needs_numpy(what: str) -> Any:
    """A stand-in for a function that computes with arrays: calling it says why it cannot."""

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise NumpyUnavailable(what)

    return _named(refuse, what)


def _named(fn: Any, what: str) -> Any:
    fn.__name__ = fn.__qualname__ = what.rsplit(".", 1)[-1]
    fn.__doc__ = f"{what} (needs numpy, which could not be loaded here)."
    return fn


def needs_numpy_gradient(what: str) -> Any:
    """`jax.grad` / `jax.value_and_grad` without numpy: the transformed function refuses when
    called, and first with JAX's own TypeError for a leaf JAX cannot differentiate (a string in
    the parameters): that answer needs no numpy, so it is the one JAX would give."""

    def transform(fun: Any, argnums: Any = 0, has_aux: bool = False, **options: Any) -> Any:
        positions = (argnums,) if isinstance(argnums, int) else tuple(argnums)

        def transformed(*args: Any, **kwargs: Any) -> Any:
            from pytree_lab_lite import tree_util

            chosen = tuple(args[i] for i in positions if i < len(args))
            for leaf in tree_util.tree_leaves(chosen):
                if not (isinstance(leaf, (bool, int, float, complex, Array)) or hasattr(leaf, "__array__")):
                    raise TypeError(f"Argument '{leaf}' of type {type(leaf)} is not a valid JAX type.")
            raise NumpyUnavailable(what)

        transformed.__name__ = getattr(fun, "__name__", "transformed")
        return transformed

    return _named(transform, what)


# dtypes the arrays take without numpy, as JAX's defaults name them (x64 off)
float32, int32, bool_, complex64 = "float32", "int32", "bool", "complex64"
_DTYPES = {  # dtype names -> the one JAX's defaults give (x64 off)
    name: kind
    for kind, names in (
        (float32, "float float64"),
        (int32, "int int64"),
        (bool_, "bool_"),
        (complex64, "complex complex128"),
    )
    for name in (kind, *names.split())
}


def _dtype_of(flat: list) -> str:
    """JAX's default dtype for Python values: bool, int32, float32 or complex64 (x64 off)."""
    if all(isinstance(v, bool) for v in flat) and flat:
        return bool_
    if any(isinstance(v, complex) for v in flat):
        return complex64
    if any(isinstance(v, float) for v in flat) or not flat:
        return float32
    return int32


def _convert(v: Any, dtype: str) -> Any:
    if dtype in (bool_, complex64):
        return bool(v) if dtype == bool_ else complex(v)
    v = v.real if isinstance(v, complex) else v  # a real dtype keeps the real part (numpy's cast)
    return float(v) if dtype == float32 else int(v)


def _flatten_values(value: Any, what: str) -> tuple[tuple, list]:
    """(shape, flat row-major list) of a number, an `Array` or nested lists/tuples of numbers;
    a ragged nesting or anything that is not a number needs numpy (JAX refuses it too)."""
    if isinstance(value, Array):
        return value.shape, list(value._flat)
    if isinstance(value, (bool, int, float, complex)):
        return (), [value]
    if isinstance(value, (list, tuple)):
        parts = [_flatten_values(v, what) for v in value]
        shapes = {shape for shape, _ in parts}
        if len(shapes) > 1:
            raise ValueError(
                f"{what}: the nested sequences have different lengths {sorted(shapes)}; "
                "an array needs a rectangular shape (JAX raises ValueError too)."
            )
        inner = shapes.pop() if shapes else ()
        return (len(value), *inner), [v for _, flat in parts for v in flat]
    raise NumpyUnavailable(f"{what} of a {type(value).__name__}")


def _refuse_arithmetic(self: Any, *args: Any) -> Any:
    raise NumpyUnavailable("arithmetic on jax.numpy arrays")


class Array:
    """What `jax.numpy.array(...)` gives where numpy cannot be loaded: the values, read-only.

    One tree leaf (as a JAX array is) with JAX's `shape`, `dtype` (bool, int32, float32 or
    complex64, as JAX picks them for Python values), `size` and `ndim`; indexable and iterable
    along its first axis, `tolist()` and `float()` work. It is not an array: `+`, `-`, `*`,
    `/`, `@`, `**` and negation refuse with one sentence.
    """

    __slots__ = ("_flat", "shape", "dtype")
    __pytree_lab_plain_array__ = True
    _flat: tuple[Any, ...]
    shape: tuple[int, ...]
    dtype: str

    def __init__(self, flat: Iterable[Any], shape: tuple, dtype: str):
        object.__setattr__(self, "_flat", tuple(flat))
        object.__setattr__(self, "shape", tuple(shape))
        object.__setattr__(self, "dtype", dtype)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("an array is read-only (JAX arrays are immutable: use x.at[i].set(v), which needs numpy)")

    @property
    def size(self) -> int:
        return len(self._flat)

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def _row(self, i: int) -> Any:
        inner = self.shape[1:]
        step = math.prod(inner)
        return Array(self._flat[i * step : (i + 1) * step], inner, self.dtype)

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of unsized object")
        return self.shape[0]

    def __getitem__(self, index: Any) -> Any:
        if not self.shape:
            raise IndexError("too many indices for array: array is 0-dimensional")
        if isinstance(index, tuple):
            if not index:
                return self
            first, rest = index[0], index[1:]
            row = self[first]
            return row[rest] if rest else row
        if isinstance(index, slice):
            rows = [self._row(i) for i in range(*index.indices(self.shape[0]))]
            return Array([v for r in rows for v in r._flat], (len(rows), *self.shape[1:]), self.dtype)
        if isinstance(index, bool) or not isinstance(index, int):
            raise NumpyUnavailable("jax.numpy array indexing with a " + type(index).__name__)
        n = self.shape[0]
        if not -n <= index < n:
            raise IndexError(f"index {index} is out of bounds for axis 0 with size {n}")
        return self._row(index % n)

    def __iter__(self) -> Any:
        if not self.shape:
            raise TypeError("iteration over a 0-d array")
        return (self._row(i) for i in range(self.shape[0]))

    def tolist(self) -> Any:
        if not self.shape:
            return self._flat[0]
        return [r.tolist() for r in self]

    def item(self) -> Any:
        if self.size != 1:
            raise ValueError("can only convert an array of size 1 to a Python scalar")
        return self._flat[0]

    def __float__(self) -> float:
        return float(self.item())

    def __int__(self) -> int:
        return int(self.item())

    def __bool__(self) -> bool:
        if self.size != 1:
            raise ValueError(
                "The truth value of an array with more than one element is ambiguous. Use a.any() or a.all()"
            )
        return bool(self._flat[0])

    def __eq__(self, other: Any) -> bool:
        if isinstance(other, Array):
            return self.shape == other.shape and self._flat == other._flat
        return NotImplemented

    def __hash__(self) -> int:
        raise TypeError("unhashable type: 'Array'")

    def __repr__(self) -> str:
        return f"Array({self.tolist()!r})" if self.shape else f"Array({self._flat[0]!r}, dtype={self.dtype})"

    __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = _refuse_arithmetic
    __truediv__ = __rtruediv__ = __floordiv__ = __rfloordiv__ = __matmul__ = __rmatmul__ = _refuse_arithmetic
    __pow__ = __rpow__ = __mod__ = __rmod__ = __neg__ = __pos__ = __abs__ = _refuse_arithmetic
    __lt__ = __le__ = __gt__ = __ge__ = _refuse_arithmetic


def _make(object: Any, dtype: Any, what: str) -> Any:  # noqa: A002 - numpy's name
    shape, flat = _flatten_values(object, what)
    if dtype is None:
        kind = object.dtype if isinstance(object, Array) else _dtype_of(flat)
    else:
        named = _DTYPES.get(dtype if isinstance(dtype, str) else getattr(dtype, "__name__", str(dtype)))
        if named is None:
            raise NumpyUnavailable(f"{what} with dtype {dtype!r}")
        kind = named
    if not shape and dtype is None and not isinstance(object, Array):
        # a Python number stays a Python number (JAX's float32[] leaf: described and counted alike)
        return _convert(flat[0], kind)
    return Array([_convert(v, kind) for v in flat], shape, kind)


def _array(object: Any, dtype: Any = None, copy: bool = True) -> Any:  # noqa: A002 - numpy's name
    """`jnp.array` without numpy: a Python number stays a number (`jnp.array(0.)` is the float
    0.0, a float32[] leaf); a (nested) list or tuple of numbers becomes a read-only `Array` with
    JAX's shape and dtype. Anything else needs numpy."""
    return _make(object, dtype, "jax.numpy.array")


def _asarray(a: Any, dtype: Any = None) -> Any:
    return _make(a, dtype, "jax.numpy.asarray")


def module(name: str) -> types.ModuleType:
    """`jax.numpy`, `jax.flatten_util`, `jax.nn`, `jax.random` or `jax.lax` without numpy: in
    `jax.numpy`, `array`/`asarray` give plain values; every other name needs numpy."""
    numpy = name == "jax.numpy"
    doc = "array() and asarray() give plain Python numbers and lists; every other name" if numpy else "every name"
    stand_in = types.ModuleType(name, f"{name} of the pytree-lab Lite engine without numpy: {doc} needs numpy.")
    if numpy:
        members = {"array": _array, "asarray": _asarray, "ndarray": Array}
        stand_in.__dict__.update(members, float32=float32, int32=int32, bool_=bool_, complex64=complex64)

    def __getattr__(attr: str) -> Any:
        # Every other name is there, as in JAX, and says when called that it needs numpy (so
        # `from jax.numpy import sum`, `hasattr` and the checker's look at the module work).
        # Made once: the same object on every access.
        if attr.startswith("__"):
            raise AttributeError(attr)
        refuse = needs_numpy(f"{name}.{attr}")
        setattr(stand_in, attr, refuse)
        return refuse

    stand_in.__dict__["__getattr__"] = __getattr__
    return stand_in
