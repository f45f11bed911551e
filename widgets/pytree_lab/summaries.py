"""Value summaries of array leaves: the values of small leaves, count/mean/min/max of big ones.

Computed in the kernel and never shipped whole; a leaf on an accelerator is reduced there
(`_reducer`: four numbers come back, or a small leaf's values, which are drawn). A model repeats
a few (dtype, shape) pairs thousands of times, so `summarise_arrays` reduces a stack of equal
leaves in one numpy pass instead of a handful of numpy calls per leaf. numpy is imported only
here, when an array leaf is summarised: an array leaf means numpy is there.
"""

from __future__ import annotations

import contextlib
import functools
import math
from typing import Any, NamedTuple

from .formatting import GRID_MAX, fmt_number, fmt_small, fmt_small_rows

__all__ = ["summarise_array", "summarise_arrays", "summarise_group", "all_finite", "on_host", "to_host"]

# (summary text, values or None, grid text or None): a Leaf's summary, values and grid
Found = tuple  # tuple[str, tuple | None, str | None]

_NUMERIC_KINDS = ("f", "i", "u", "b")
# Leaves bigger than this are summarised one at a time (stacking them would copy a lot).
_STACK_MAX = 4096


def _numeric(dtype: str) -> bool:
    return dtype[:1] in _NUMERIC_KINDS or dtype == "bfloat16"


def _as_floats(a: Any, dtype: str) -> Any:
    """Small arrays' values as floats: a float array as it is (its .tolist() gives the float64
    numbers astype would, without the copy), any other as float64."""
    return a if dtype[:1] == "f" and dtype != "bfloat16" else a.astype(float)


def _small(flat: list, shape: tuple) -> Found:
    text, grid = fmt_small(flat, shape)
    return text, tuple(flat), grid


def summarise_array(x: Any, size: int, dtype: str) -> tuple[str, tuple | None]:
    """(summary text, values) of one array leaf: the values of a small leaf, count, mean, min,
    max of a big one (values None)."""
    return _summarise_one(x, size, dtype)[:2]


def _stats(mean: float, low: float, high: float, bad: int, size: int) -> str:
    """A big leaf's summary: `mean 0.1, min -2, max 3`, and how many values are NaN or infinite."""
    parts = [f"mean {fmt_number(mean)}, min {fmt_number(low)}, max {fmt_number(high)}"] if bad < size else []
    return "; ".join(parts + ([f"{bad} non-finite"] if bad else []))


def _summarise_one(x: Any, size: int, dtype: str) -> Found:
    if size == 0:
        return "empty", (), None
    if not _numeric(dtype):
        return f"{dtype} values", None, None
    if getattr(type(x), "__pytree_lab_plain_array__", False):  # the Lite engine's array: no numpy
        flat = [complex(v).real if isinstance(v, complex) else float(v) for v in x._flat]
        if size <= GRID_MAX:
            return _small(flat, x.shape)
        fin = [v for v in flat if math.isfinite(v)]
        mean = math.fsum(fin) / len(fin) if fin else 0
        return _stats(mean, min(fin, default=0), max(fin, default=0), size - len(fin), size), None, None
    import numpy as np

    # array-likes that hold no values: a jax.ShapeDtypeStruct from eval_shape, a tracer inside jit
    try:
        a = np.asarray(x)
    except Exception:  # a tracer refuses conversion; its shape and dtype are still shown
        return "no values", None, None
    if a.dtype == object or a.size != size:
        return "no values", None, None
    if size <= GRID_MAX:
        return _small(_as_floats(a, dtype).ravel().tolist(), a.shape)
    # Reduce in the leaf's own dtype (no float64 copy of a 10^7-element leaf); sum in float64.
    a = a.ravel()
    if a.dtype.kind == "b" or dtype == "bfloat16":
        a = a.astype(np.float32)
    finite = np.isfinite(a)
    bad = int(size - np.count_nonzero(finite))
    if bad == size:
        return _stats(0, 0, 0, bad, size), None, None
    fv = a[finite] if bad else a
    return _stats(float(fv.mean(dtype=np.float64)), float(fv.min()), float(fv.max()), bad, size), None, None


class Copied:
    """The values of small leaves of one dtype and shape, copied into one array (a row each) when
    the tree was described, and formatted when a view shows them (`found`). Formatting is most
    of the work of describing a big model, and a diagram sends few of its leaves at first."""

    __slots__ = ("stacked", "dtype", "shape")

    def __init__(self, stacked: Any, dtype: str, shape: tuple):
        self.stacked, self.dtype, self.shape = stacked, dtype, shape

    def found(self, rows: list[int]) -> list[Found]:
        """(summary, values, grid) of these rows, the same `summarise_group` gives."""
        return _small_summaries(self.stacked[rows], self.dtype, self.shape)


class Later(NamedTuple):
    """A leaf's place in a `Copied` group: its summary is made when it is shown."""

    group: Copied
    row: int


def summarise_arrays(items: list[tuple[Any, str, tuple, int]], later: bool = False) -> list:
    """(summary, values, grid) for many leaves, given as (leaf, dtype, shape, size), in that order.

    Leaves of one dtype and shape are stacked and reduced together (`summarise_group`).
    ``later=True``: small leaves that stack are copied, not formatted; each gets a `Later`
    instead (its values are the copy's, so changing the array afterwards changes nothing shown).
    """
    out: list = [None] * len(items)
    groups: dict[tuple, list[int]] = {}
    for k, (_, dtype, shape, _) in enumerate(items):
        groups.setdefault((dtype, shape), []).append(k)
    for (dtype, shape), members in groups.items():
        objs, size = [items[k][0] for k in members], items[members[0]][3]
        for k, summary in zip(members, summarise_group(objs, dtype, shape, size, later)):
            out[k] = summary
    return out


# dtypes whose values are read straight from the arrays' buffers (numpy's own, fixed size)
_BUFFER_DTYPES = frozenset(
    {"float16", "float32", "float64", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "bool"}
)


def _stack(objs: list, dtype: str, shape: tuple, size: int) -> Any:
    """The leaves' values as one (len(objs), size) numpy array, or None when they cannot be read
    together (a tracer, a deleted array, a leaf that holds no values)."""
    import numpy as np

    n = len(objs)
    if dtype in _BUFFER_DTYPES:
        # One copy of every leaf's buffer, joined in C: no numpy array per leaf. Leaves whose
        # values are not one contiguous host buffer of that size refuse, and are read below.
        with contextlib.suppress(Exception):
            data = b"".join(objs)
            if len(data) == n * size * np.dtype(dtype).itemsize:
                return np.frombuffer(data, dtype=dtype).reshape(n, size)
    try:
        stacked = np.array([np.asarray(obj) for obj in objs])
    except Exception:  # a tracer or a deleted array among them: one at a time
        return None
    if stacked.dtype == object or stacked.shape != (n, *shape):
        return None
    return stacked.reshape(n, size)


def summarise_group(objs: list, dtype: str, shape: tuple, size: int, later: bool = False) -> list:
    """(summary, values, grid) of leaves that share a dtype and shape, in order: stacked and
    reduced together, small ones formatted with one template per shape (with `later`, copied
    and left for later: a `Later` each)."""
    if size > GRID_MAX and (dtype[:1] == "f" or dtype == "bfloat16") and not on_host(objs[0]):
        got = to_host([_reducer()(x) for x in objs])  # four numbers a leaf come over
        return [(_stats(float(m), float(lo), float(hi), int(bad), size), None, None) for bad, m, lo, hi, _ in got]
    objs = to_host(objs) if not on_host(objs[0]) else objs  # a small leaf's values are drawn
    stacked = None
    plain = any(getattr(type(obj), "__pytree_lab_plain_array__", False) for obj in objs)  # no numpy here
    if not plain and len(objs) > 1 and 0 < size <= _STACK_MAX and _numeric(dtype):
        stacked = _stack(objs, dtype, shape, size)
    if stacked is None:
        return [_summarise_one(obj, size, dtype) for obj in objs]
    if size > GRID_MAX:
        return _big_summaries(stacked, dtype, objs)
    if later:
        group = Copied(stacked, dtype, shape)
        return [Later(group, row) for row in range(len(objs))]
    return _small_summaries(stacked, dtype, shape)


def _small_summaries(stacked: Any, dtype: str, shape: tuple) -> list[Found]:
    """Small leaves of one shape, a row each in `stacked`: the same text `fmt_small` gives each."""
    floats = _as_floats(stacked, dtype)
    values = [tuple(r) for r in floats.tolist()]
    # -0.0 shows as 0 (adding +0.0 turns -0.0 into 0.0, nothing else changes); the values keep it
    shown = values if floats.all() else [tuple(r) for r in (floats + 0.0).tolist()]
    return [(line, v, grid) for v, (line, grid) in zip(values, fmt_small_rows(shown, shape))]


def _big_summaries(stacked: Any, dtype: str, objs: list) -> list[Found]:
    import numpy as np

    if stacked.dtype.kind == "b" or dtype == "bfloat16":
        stacked = stacked.astype(np.float32)
    all_finite = np.isfinite(stacked).all(axis=1).tolist()
    means = stacked.mean(axis=1, dtype=np.float64).tolist()
    lows = stacked.min(axis=1).tolist()
    highs = stacked.max(axis=1).tolist()
    out = []
    for k, ok in enumerate(all_finite):
        if ok:
            out.append((_stats(means[k], lows[k], highs[k], 0, 1), None, None))
        else:  # NaN or Inf inside: the per-leaf path counts them and summarises the rest
            out.append(_summarise_one(objs[k], stacked.shape[1], dtype))
    return out


def on_host(x: Any) -> bool:
    """Whether the values of `x` are in the host's memory: anything but a JAX array on another device
    than the host's CPU 0. What is drawn of an array elsewhere is reduced there, fetched by `to_host`."""
    devices = getattr(x, "devices", None)  # none: numpy's, the Lite engine's (no exception: 10k leaves a move)
    try:
        return devices is None or all(d.platform == "cpu" and d.id == 0 for d in devices())
    except Exception:  # noqa: BLE001 - a tracer, a deleted array
        return True


def _far(x: Any) -> bool:
    return any(map(_far, x)) if isinstance(x, (list, tuple)) else not on_host(x)


def to_host(x: Any) -> Any:
    """An array, or lists and tuples of them, with the values of those not on the host fetched by
    one `jax.device_get` (an explicit transfer, which JAX's transfer guard lets through)."""
    if not _far(x):
        return x
    import jax

    return jax.device_get(x)


def all_finite(leaves: list) -> list[bool]:
    """Whether each leaf's values are all finite (a leaf on an accelerator is checked there)."""
    import numpy as np

    bad = to_host([(~np.isfinite(np.asarray(x))).sum() if on_host(x) else _reducer()(x)[0] for x in leaves])
    return [int(b) == 0 for b in bad]


@functools.cache
def _reducer(head: int = 0) -> Any:
    """A float leaf's non-finite count, the mean, min and max of its finite values and its first
    `head` values, computed where it lives (jitted: one program per shape and dtype)."""
    import jax
    import jax.numpy as jnp

    def reduce(x: Any) -> tuple:
        flat = x.ravel()
        y = flat if x.dtype in (jnp.float32, jnp.float64) else flat.astype(jnp.float32)
        ok = jnp.isfinite(y)
        n = ok.sum()
        mean = jnp.where(ok, y, 0).sum() / jnp.maximum(n, 1).astype(y.dtype)
        return y.size - n, mean, jnp.where(ok, y, jnp.inf).min(), jnp.where(ok, y, -jnp.inf).max(), flat[:head]

    return jax.jit(reduce)
