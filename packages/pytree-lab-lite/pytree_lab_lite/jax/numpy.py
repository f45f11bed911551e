"""`jax.numpy` for the Lite engine: numpy arrays, autograd-traceable, JAX's 32-bit dtypes.

Every function goes through ``autograd.numpy`` (so it works on values traced inside `jax.grad`)
and applies JAX's default dtype rules (x64 off): float64 becomes float32, int64 int32,
complex128 complex64; Python scalars are weak, so ``float32_array - 0.05 * grad`` stays float32.
Arrays are `ArrayImpl` (a numpy.ndarray subclass with JAX's ``.at[i].set(v)`` functional
updates, operators and errors); traced values get the same (`_TracedArray`).

Known differences from JAX: arrays are mutable (``x[i] = v`` works outside `grad`); with a
repeated index ``.at[...].multiply`` (divide, power, min, max) applies once, where JAX applies it
per repetition (``.add`` accumulates repeats, as in JAX).
"""

from __future__ import annotations

import builtins
import functools
import math
from types import SimpleNamespace
from typing import Any

import autograd.numpy as _anp
import numpy as _np
from autograd.extend import VSpace as _VSpace, defvjp as _defvjp, primitive as _primitive
from autograd.numpy.numpy_boxes import ArrayBox as _ArrayBox
from autograd.tracer import Box as _Box, getval as _getval

from ._config import refusing as _refusing
from ._scatter import _clamped, _concrete_index, _drops_update, _scatter_add, _scatter_set, _warn_unsafe_scatter

__getattr__ = _refusing(__name__, globals())  # a name JAX has and this engine lacks: says so


class _ArrayType(type):
    def __instancecheck__(cls, obj: Any) -> bool:
        return isinstance(obj, (_np.ndarray, _np.generic, _ArrayBox))


class Array(metaclass=_ArrayType):
    """`jax.Array` for isinstance checks and annotations: numpy arrays, numpy scalars (the 0-d
    results of numpy arithmetic) and values traced inside `grad`."""


ndarray = Array
_NUMPY_TYPES = "dtype issubdtype generic number inexact floating integer signedinteger unsignedinteger complexfloating"
for _name in _NUMPY_TYPES.split():
    globals()[_name] = getattr(_np, _name)  # numpy's, as jax.numpy's are
pi, e, inf, nan, newaxis = math.pi, math.e, math.inf, math.nan, None

# JAX with 64-bit types disabled (its default) stores these as their 32-bit counterparts.
_CANONICAL: dict[Any, Any] = {
    _np.dtype(_np.float64): _np.dtype(_np.float32),
    _np.dtype(_np.int64): _np.dtype(_np.int32),
    _np.dtype(_np.uint64): _np.dtype(_np.uint32),
    _np.dtype(_np.complex128): _np.dtype(_np.complex64),
}


def canonicalize_dtype(dt: Any) -> _np.dtype:
    """The dtype JAX would use for `dt` (float64 -> float32, int64 -> int32, ...)."""
    d = _np.dtype(dt)
    return _CANONICAL.get(d, d)


def _canon(x: Any) -> Any:
    """Bring a value (array, numpy scalar, traced value, or tuple of them) to JAX dtypes. Arguments
    are narrowed too (as JAX would have stored them); Python scalars stay weakly typed, so they
    adopt the other operand's dtype."""
    if isinstance(x, (_np.ndarray, _np.generic, _ArrayBox)):
        target = _CANONICAL.get(x.dtype)
        return _lite(x if target is None else x.astype(target))
    if type(x) is tuple or type(x) is list:
        return type(x)(_canon(v) for v in x)
    return x


def _lite(x: Any) -> Any:
    """A plain numpy array as this engine's array (a view: no copy); anything else unchanged."""
    return x.view(ArrayImpl) if type(x) is _np.ndarray else x


def _wrap(fn: Any) -> Any:
    @functools.wraps(fn)
    def wrapped(*args: Any, **kwargs: Any) -> Any:
        if kwargs.get("dtype") is not None:
            kwargs["dtype"] = canonicalize_dtype(kwargs["dtype"])
        # JAX computes inf and nan silently (log(0), sqrt at 0 in a gradient): so does this engine
        with _np.errstate(divide="ignore", invalid="ignore", over="ignore", under="ignore"):
            return _canon(fn(*(_canon(a) for a in args), **kwargs))

    return wrapped


# --------------------------------------------------------------------------- dtypes


class _ScalarType:
    """`jnp.float32` and friends: usable as a dtype, and callable to make a 0-d array."""

    def __init__(self, name: str):
        self.dtype = _np.dtype(name)
        self.__name__ = name

    def __call__(self, x: Any) -> Any:
        return array(x, dtype=self.dtype)

    def __eq__(self, other: object) -> bool:
        try:
            return self.dtype == _np.dtype(other)  # type: ignore[call-overload]  # not a dtype: TypeError
        except TypeError:
            return False

    def __hash__(self) -> int:
        return hash(self.dtype)

    def __repr__(self) -> str:
        return f"jnp.{self.__name__}"


for _name in "float16 float32 float64 int8 int16 int32 int64 uint8 uint32 complex64".split():
    globals()[_name] = _ScalarType(_name)
bool_ = _ScalarType("bool")


def result_type(*args: Any) -> _np.dtype:
    """The dtype of combining `args`, JAX style: Python scalars are weak, floats beat ints."""
    strong = []
    weak_kinds = set()
    for a in args:
        if isinstance(a, (builtins.bool, builtins.int, builtins.float, builtins.complex)):
            weak_kinds.add(type(a))
        else:
            strong.append(_np.dtype(getattr(a, "dtype", a)))
    if not strong:
        return canonicalize_dtype(_np.result_type(*[t(0) for t in weak_kinds] or [0.0]))
    kinds = {d.kind for d in strong}
    for kind in ("c", "f"):
        if kind in kinds:
            widest = builtins.max((d for d in strong if d.kind == kind), key=lambda d: d.itemsize)
            return canonicalize_dtype(widest)
    if complex in weak_kinds:
        return _np.dtype(_np.complex64)
    if float in weak_kinds:
        return _np.dtype(_np.float32)
    if int in weak_kinds and kinds == {"b"}:
        return _np.dtype(_np.int32)
    return canonicalize_dtype(_np.result_type(*strong))


# --------------------------------------------------------------------------- creation


def array(object: Any, dtype: Any = None, copy: bool = True, order: Any = None, ndmin: int = 0) -> Any:
    """An array with JAX's default dtypes: ``jnp.array([1., -1.])`` is float32."""
    if dtype is not None:
        dtype = canonicalize_dtype(dtype)
    if isinstance(object, (_np.ndarray, _np.generic)) and dtype is None and not copy:
        out = object
    else:
        out = _anp.array(object, dtype=dtype)
    if ndmin and _anp.ndim(out) < ndmin:
        out = _anp.reshape(out, (1,) * (ndmin - _anp.ndim(out)) + _anp.shape(out))
    return _canon(out)


def asarray(a: Any, dtype: Any = None, order: Any = None, copy: Any = None) -> Any:
    if type(a) is list or type(a) is tuple:  # may hold traced values: build it like `array`
        return array(a, dtype=dtype)
    if isinstance(a, _ArrayBox):
        return _canon(a) if dtype is None else a.astype(canonicalize_dtype(dtype))
    if dtype is None:
        return _canon(_np.asarray(a))
    return _lite(_np.asarray(a, dtype=canonicalize_dtype(dtype)))


def _default_float(dtype: Any) -> _np.dtype:
    return _np.dtype(_np.float32) if dtype is None else canonicalize_dtype(dtype)


# numpy's, in JAX's dtypes (their default float64 becomes float32)
zeros, ones, eye, identity = map(_wrap, (_anp.zeros, _anp.ones, _anp.eye, _anp.identity))


def full(shape: Any, fill_value: Any, dtype: Any = None) -> _np.ndarray:
    if dtype is None:
        dtype = result_type(fill_value)
    return _lite(_np.full(shape, _getval(fill_value), dtype=canonicalize_dtype(dtype)))


def full_like(a: Any, fill_value: Any, dtype: Any = None, shape: Any = None) -> _np.ndarray:
    base = _np.asarray(_getval(a))
    dt = canonicalize_dtype(base.dtype if dtype is None else dtype)
    return _lite(_np.full(base.shape if shape is None else shape, _getval(fill_value), dtype=dt))


def zeros_like(a: Any, dtype: Any = None, shape: Any = None) -> _np.ndarray:
    return full_like(a, 0, dtype, shape)


def ones_like(a: Any, dtype: Any = None, shape: Any = None) -> _np.ndarray:
    return full_like(a, 1, dtype, shape)


empty, empty_like = zeros, zeros_like  # JAX arrays are never uninitialised


def arange(start: Any, stop: Any = None, step: Any = None, dtype: Any = None) -> _np.ndarray:
    args = [v for v in (start, stop, step) if v is not None]
    out = _np.arange(*args)
    return _lite(out.astype(canonicalize_dtype(out.dtype if dtype is None else dtype)))


def linspace(start: Any, stop: Any, num: int = 50, endpoint: bool = True, dtype: Any = None, axis: int = 0) -> Any:
    out = _anp.linspace(start, stop, num, endpoint=endpoint, axis=axis)
    return _lite(out.astype(_default_float(dtype)))


# --------------------------------------------------------------------------- comparisons and shapes (never traced)


def _compared(fn: Any) -> Any:
    """numpy's comparison `fn` of the values of traced arguments, in JAX dtypes first (the values
    JAX would compare); its answer an array."""

    @functools.wraps(fn)
    def compared(a: Any, b: Any, *args: Any, **kwargs: Any) -> Any:
        return _np.asarray(fn(asarray(_getval(a)), asarray(_getval(b)), *args, **kwargs))

    return compared


for _name in "allclose isclose array_equal".split():
    globals()[_name] = _compared(getattr(_np, _name))
shape, ndim, size = _np.shape, _np.ndim, _np.size  # numpy's read a traced value's .shape, .ndim, .size


# --------------------------------------------------------------------------- traced functions

# Everything below comes from autograd.numpy (so gradients flow) with JAX dtypes applied.
_TRACED = """
abs absolute add subtract multiply divide true_divide floor_divide power negative positive
square sqrt cbrt exp exp2 expm1 log log1p log2 log10 logaddexp reciprocal sign
sin cos tan arcsin arccos arctan arctan2 sinh cosh tanh hypot sinc deg2rad rad2deg
maximum minimum clip where floor ceil round nan_to_num real imag conj fabs
dot vdot outer inner tensordot einsum cross
sum mean prod max min amax amin var std cumsum cumprod average
argmax argmin sort
reshape ravel transpose swapaxes moveaxis squeeze expand_dims broadcast_to atleast_1d
stack concatenate hstack vstack take diag trace triu tril flip roll select
isnan isfinite equal not_equal less greater less_equal greater_equal
logical_and logical_or logical_not
""".split()

for _name in _TRACED:
    globals()[_name] = _wrap(getattr(_anp, _name))
del _name


@_primitive
def _abs_real(x: Any) -> Any:
    return _np.abs(x)


# JAX's derivative of |x| is sign(x) with 1 at exactly 0 (autograd gives 0 there)
_defvjp(_abs_real, lambda ans, x: lambda g: g * _np.where(_np.asarray(x) >= 0, 1.0, -1.0).astype(_np.result_type(x)))


def _abs(x: Any) -> Any:
    value = _getval(x)
    if _np.iscomplexobj(value):
        return _anp.abs(x)
    return _abs_real(x)


abs = absolute = _wrap(_abs)  # noqa: A001 - numpy's names


def _jax_shape_errors(fn: Any, name: str) -> Any:
    """numpy's ValueError for operands that do not line up, as JAX's TypeError (and its words)."""

    @functools.wraps(fn)
    def checked(a: Any, b: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return fn(a, b, *args, **kwargs)
        except ValueError as err:
            if name == "matmul" and (_np.ndim(_getval(a)) == 0 or _np.ndim(_getval(b)) == 0):
                operand = 0 if _np.ndim(_getval(a)) == 0 else 1  # JAX keeps ValueError here
                raise ValueError(
                    f"matmul input operand {operand} must have ndim at least 1, but it has ndim 0"
                ) from None
            sa, sb = _np.shape(_getval(a)), _np.shape(_getval(b))
            left, right = sa[-1:], (sb[-2:-1] if len(sb) >= 2 else sb[-1:])
            raise TypeError(
                f"dot_general requires contracting dimensions to have the same shape, got {left} and {right}."
            ) from err

    return checked


for _name in ("dot", "inner", "vdot"):
    globals()[_name] = _jax_shape_errors(globals()[_name], _name)
matmul = _jax_shape_errors(_wrap(_anp.matmul), "matmul")
_LINALG = "norm inv det solve slogdet cholesky eigh svd".split()
linalg = SimpleNamespace(**{n: _wrap(getattr(_anp.linalg, n)) for n in _LINALG if hasattr(_anp.linalg, n)})


# --------------------------------------------------------------------------- x.at[i]: functional updates
# (the scatter primitives and their gradients: _scatter.py)


class _AtIndex:
    """``x.at[idx]``: JAX's functional updates. Each returns a new array; `x` is unchanged."""

    __slots__ = ("_x", "_idx")

    def __init__(self, x: Any, idx: Any):
        self._x = x
        self._idx = _concrete_index(idx)

    def _update(self, kind: Any, values: Any) -> Any:
        if type(values) is list or type(values) is tuple:
            values = array(values)
        if values is not None:
            _warn_unsafe_scatter(self._x, values)
        with _np.errstate(divide="ignore", invalid="ignore", over="ignore", under="ignore"):
            if _drops_update(self._idx, _np.shape(_getval(self._x))):
                return self._x if isinstance(self._x, _ArrayBox) else _lite(_np.array(self._x))
            return _canon(kind(self._x, self._idx, values))

    def _combine(self, op: Any, values: Any, **_: Any) -> Any:
        """``x`` with ``x[idx]`` replaced by ``op(x[idx], values)``: multiply, divide, power, min, max."""
        return self._update(lambda x, idx, v: _scatter_set(x, idx, op(x[idx], v)), values)

    def set(
        self, values: Any, *, indices_are_sorted: bool = False, unique_indices: bool = False, mode: Any = None
    ) -> Any:
        """``x`` with ``x[idx]`` replaced by `values` (cast to x's dtype)."""
        return self._update(_scatter_set, values)

    def add(self, values: Any, **_: Any) -> Any:
        """``x`` with `values` added at `idx` (a repeated index adds each time, as in JAX)."""
        return self._update(_scatter_add, values)

    def subtract(self, values: Any, **_: Any) -> Any:
        return self._update(lambda x, idx, v: _scatter_add(x, idx, _anp.negative(v)), values)

    multiply = mul = functools.partialmethod(_combine, _anp.multiply)
    divide = functools.partialmethod(_combine, _anp.true_divide)
    power = functools.partialmethod(_combine, _anp.power)
    min = functools.partialmethod(_combine, _anp.minimum)
    max = functools.partialmethod(_combine, _anp.maximum)

    def apply(self, func: Any, **_: Any) -> Any:
        return self._update(lambda x, idx, v: _scatter_set(x, idx, func(x[idx])), None)

    def get(self, **_: Any) -> Any:
        return _canon(self._x[self._idx])


class _At:
    __slots__ = ("_x",)

    def __init__(self, x: Any):
        self._x = x

    def __getitem__(self, idx: Any) -> _AtIndex:
        return _AtIndex(self._x, idx)


class _JaxArrayMethods:  # for ArrayImpl and _TracedArray
    __slots__ = ()
    shape: tuple

    @property
    def at(self) -> _At:
        return _At(self)

    def __getitem__(self, idx: Any) -> Any:
        return super().__getitem__(_clamped(_concrete_index(idx), self.shape))  # type: ignore[misc]

    def __iter__(self) -> Any:  # its own: iterating by __getitem__ would never reach an end (reads clamp)
        if not self.shape:
            raise TypeError("iteration over a 0-d array")
        return (super(_JaxArrayMethods, self).__getitem__(i) for i in range(self.shape[0]))  # type: ignore[misc]

    def __matmul__(self, other: Any) -> Any:
        return matmul(self, other)

    def __rmatmul__(self, other: Any) -> Any:
        return matmul(other, self)


class ArrayImpl(_JaxArrayMethods, _np.ndarray):
    """The arrays this engine makes: numpy arrays with JAX's ``.at`` and JAX's ``@`` errors.
    Named as JAX's concrete array type is (``type(x).__name__`` reads the same); they print as
    numpy arrays do. Operators give JAX's dtypes (``int32 / 2`` is float32, ``bool + 1`` int32),
    a 0-d result stays a 0-d array, shapes that do not broadcast raise JAX's TypeError, and an
    index past the end reads the last value (JAX clamps)."""

    def __repr__(self) -> str:
        return repr(self.view(_np.ndarray))

    def __pow__(self, other: Any, mod: Any = None) -> Any:  # numpy's x ** 2 is square(x): bool ** 2 stays bool
        return _np.power(self, other) if mod is None else NotImplemented

    def __rpow__(self, other: Any, mod: Any = None) -> Any:
        return _np.power(other, self) if mod is None else NotImplemented

    def __array_ufunc__(self, ufunc: Any, method: str, *inputs: Any, **kwargs: Any) -> Any:
        with _np.errstate(divide="ignore", invalid="ignore", over="ignore", under="ignore"):  # JAX: inf, nan
            plain = tuple(x.view(_np.ndarray) if isinstance(x, ArrayImpl) else x for x in inputs)
            if method == "__call__" and builtins.any(isinstance(x, _Box) for x in inputs):
                return _canon(getattr(_anp, ufunc.__name__)(*plain, **kwargs))  # a traced operand: trace it
            if "out" in kwargs:  # in place (x += 1): numpy's own casting rules, nothing to canonicalise
                kwargs["out"] = tuple(o.view(_np.ndarray) if isinstance(o, ArrayImpl) else o for o in kwargs["out"])
                getattr(ufunc, method)(*plain, **kwargs)
                return kwargs["out"][0] if len(kwargs["out"]) == 1 else kwargs["out"]
            try:
                result = getattr(ufunc, method)(*plain, **kwargs)
            except ValueError as err:
                if "could not be broadcast" in str(err):
                    shapes = ", ".join(str(_np.shape(_getval(x))) for x in inputs)
                    raise TypeError(f"{ufunc.__name__} got incompatible shapes for broadcasting: {shapes}.") from None
                raise
            if type(result) is tuple:
                return _canon(tuple(_np.asarray(r) for r in result))
            result = _np.asarray(result)
            if method == "__call__" and result.dtype != bool:
                target = result_type(*inputs)  # JAX's promotion: bool + 1 is int32, not numpy's int8/int64
                if not (result.dtype.kind in "fc" and target.kind in "biu"):  # int / int: numpy's float
                    result = result.astype(target)
            return _canon(result)


class _TracedArray(_JaxArrayMethods, _ArrayBox):
    """A value traced inside `grad`: autograd's ArrayBox with ``.at``, JAX's ``@`` errors, JAX's
    clamped reads and JAX's refusals (``x[i] = v``, ``float(x)``). Named, in messages, as JAX
    names its tracer inside `grad`."""

    __slots__: list = []

    def __setitem__(self, idx: Any, value: Any) -> None:
        raise TypeError(
            "JAX arrays are immutable and do not support in-place item assignment. Instead of "
            "x[idx] = y, use x = x.at[idx].set(y) or another .at[] method."
        )

    def _concrete(self, what: str) -> Any:
        raise TypeError(
            "Abstract tracer value encountered where concrete value is expected: traced array with "
            f"shape {self.dtype}{list(self.shape)}. The problem arose with the `{what}` function: "
            "inside jax.grad the value is traced, and turning it into a Python number would cut it "
            "off from the gradient. Keep it an array (jnp functions), or use jax.lax.stop_gradient."
        )

    __float__ = functools.partialmethod(_concrete, "float")
    __int__ = functools.partialmethod(_concrete, "int")
    __complex__ = functools.partialmethod(_concrete, "complex")

    def __repr__(self) -> str:
        return f"Traced<{self.dtype}{list(self.shape)}>(value={_np.asarray(_getval(self)).tolist()!r})"

    def __getattr__(self, name: str) -> Any:
        raise AttributeError(f"{type(self).__name__} has no attribute {name}", name=name, obj=self)


_TracedArray.__name__ = _TracedArray.__qualname__ = "LinearizeTracer"


# autograd picks a box class by the exact type of the value it traces
for _value_type, _box in list(_Box.type_mappings.items()):
    if _box is _ArrayBox and _value_type is not _ArrayBox:
        _Box.type_mappings[_value_type] = _TracedArray
_TracedArray.register(ArrayImpl)
_VSpace.mappings[ArrayImpl] = _VSpace.mappings[_np.ndarray]
