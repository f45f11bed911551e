"""`jax.random` for the Lite engine: keys, `split`, `normal`, `uniform` and friends, with JAX's
shapes and dtypes (a key is uint32[2]; draws are float32 by default).

The values differ from JAX's: JAX's counter-based generator (threefry) is not reproduced; a key
seeds numpy's generator instead. Like JAX, the same key always gives the same numbers, and a
key never changes when it is used (split it to get new ones).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

import numpy as _np

from . import numpy as _jnp
from ._config import refusing as _refusing

__getattr__ = _refusing(__name__, globals())  # a name JAX has and this engine lacks: says so

__all__ = [
    "PRNGKey",
    "key",
    "split",
    "fold_in",
    "normal",
    "uniform",
    "randint",
    "bernoulli",
    "permutation",
    "choice",
    "key_data",
    "categorical",
]


def PRNGKey(seed: int) -> _np.ndarray:  # noqa: N802 - JAX's name
    """A key: uint32[2] made from the seed, as in JAX (`PRNGKey(7)` is `[0, 7]`)."""
    seed = int(_np.asarray(_jnp._getval(seed)))
    # with 64-bit types off (JAX's default) only the seed's low 32 bits count
    return _np.array([0, seed & 0xFFFFFFFF], dtype=_np.uint32)


def key_data(keys: Any) -> _np.ndarray:
    return _np.asarray(keys, dtype=_np.uint32)


def _rng(k: Any, name: str, salt: int = 0) -> _np.random.Generator:
    """numpy's generator, seeded by a single key and `salt` (one per function)."""
    k = _np.asarray(_jnp._getval(k))
    valid = k.dtype == _np.uint32 and k.shape[-1:] == (2,)
    if k.ndim > 1:  # a batch of keys (JAX names its shape without the key's own axis)
        raise TypeError(
            f"{name} accepts a single key, but was given a key array of shape {k.shape[:-1] if valid else k.shape} "
            "!= (). Use jax.vmap for batching."
        )
    if not valid:
        raise TypeError(f"JAX encountered invalid PRNG key data: expected key_data.dtype = uint32; got dtype={k.dtype}")
    return _np.random.default_rng([int(k[0]), int(k[1]), salt])


def split(k: Any, num: int = 2) -> _np.ndarray:
    """`num` new keys, uint32[num, 2]."""
    return _rng(k, "split", 1).integers(0, 2**32, size=(int(num), 2), dtype=_np.uint32)


def fold_in(k: Any, data: int) -> _np.ndarray:
    return _rng(k, "fold_in", 2 + (int(data) & 0xFFFFFFFF)).integers(0, 2**32, size=(2,), dtype=_np.uint32)


def _shape(shape: Any) -> tuple:
    if shape is None:
        return ()
    if isinstance(shape, int):
        raise TypeError(f"shape must be a sequence of integers, got {shape!r}: write ({shape},)")
    return tuple(int(d) for d in shape)


def _float(dtype: Any) -> _np.dtype:
    dt = _jnp._default_float(dtype)
    if not _np.issubdtype(dt, _np.floating):
        raise ValueError(f"dtype argument to `normal`/`uniform` must be a float dtype, got {dt}")
    return dt


def normal(k: Any, shape: Sequence[int] = (), dtype: Any = None) -> _np.ndarray:
    return _np.asarray(_rng(k, "normal", 3).standard_normal(_shape(shape)), dtype=_float(dtype))


def uniform(k: Any, shape: Sequence[int] = (), dtype: Any = None, minval: Any = 0.0, maxval: Any = 1.0) -> _np.ndarray:
    dt = _float(dtype)
    u = _rng(k, "uniform", 4).random(_shape(shape))
    return _np.asarray(minval + (_np.asarray(maxval) - minval) * u, dtype=dt)


def randint(k: Any, shape: Sequence[int], minval: int, maxval: int, dtype: Any = None) -> _np.ndarray:
    dt = _jnp.canonicalize_dtype(_np.int32 if dtype is None else dtype)
    return _rng(k, "randint", 5).integers(minval, maxval, size=_shape(shape)).astype(dt)


def bernoulli(k: Any, p: Any = 0.5, shape: Sequence[int] | None = None) -> _np.ndarray:
    p = _np.asarray(p)
    return _rng(k, "bernoulli", 6).random(_shape(shape) if shape is not None else p.shape) < p


def permutation(k: Any, x: Any, axis: int = 0) -> _np.ndarray:
    gen = _rng(k, "permutation", 7)
    if isinstance(x, int) or _np.ndim(x) == 0:
        return gen.permutation(int(x)).astype(_np.int32)
    return _jnp._canon(gen.permutation(_np.asarray(x), axis=axis))


def choice(
    k: Any, a: Any, shape: Sequence[int] = (), replace: bool = True, p: Any = None, axis: int = 0
) -> _np.ndarray:
    gen = _rng(k, "choice", 8)
    out = gen.choice(a if isinstance(a, int) else _np.asarray(a), size=_shape(shape), replace=replace, p=p, axis=axis)
    return _jnp._canon(_np.asarray(out))


def categorical(k: Any, logits: Any, axis: int = -1, shape: Sequence[int] | None = None, replace: bool = True) -> Any:
    """Indices drawn with probabilities softmax(logits) along `axis` (int32), as in JAX: by the
    Gumbel trick, the argmax of logits plus Gumbel noise."""
    logits = _np.asarray(_jnp._getval(logits), _np.float64)
    batch = _np.delete(logits.shape, axis % max(logits.ndim, 1)) if logits.ndim else ()
    out_shape = tuple(batch) if shape is None else _shape(shape)
    moved = _np.moveaxis(logits, axis, -1)
    noise = _rng(k, "categorical", 9).gumbel(size=out_shape + moved.shape[-1:])
    return _np.argmax(moved + noise, axis=-1).astype(_np.int32)


for _name in set(__all__) - {"key", "choice"}:  # as the engine's arrays (``.at``, JAX's ``@`` errors), as jnp's
    _fn = globals()[_name]
    globals()[_name] = functools.wraps(_fn)(lambda *a, _f=_fn, **k: _jnp._lite(_f(*a, **k)))
key = PRNGKey  # JAX's new-style key maker; here the same uint32[2] (JAX's key is a typed scalar)
del _name, _fn
