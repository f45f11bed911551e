"""pytree-lab-lite: the part of JAX (and optax) that pytree-lab's course uses, on numpy + autograd.

* `pytree_lab_lite.tree_util` — `jax.tree_util` semantics in plain Python (no numpy needed).
* `pytree_lab_lite.jax` — the Lite engine: `grad`, `value_and_grad`, `jit`, `jax.numpy`,
  `jax.tree`, `jax.tree_util`, `jax.flatten_util` on numpy + autograd.
* `pytree_lab_lite.optax` — optax's sgd, momentum and adam, on numpy.

`install_as_jax()` lets lesson code say ``import jax`` and ``import optax`` where JAX cannot
run (a JupyterLite kernel). Importing this package loads neither numpy nor autograd: the tree
model works in a kernel that has neither. README.md lists every public name the engine
offers (its scope) and how it differs from JAX; a test holds the engine to that list.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from typing import Any

__version__ = "0.1.0"

__all__ = ["REAL_JAX", "LITE", "active_engine", "install_as_jax", "is_lite", "use_stand_ins"]

REAL_JAX = "jax"
LITE = "lite"

_SUBMODULES = ("numpy", "tree", "tree_util", "flatten_util", "nn", "random", "lax")


def is_lite(module: object) -> bool:
    return bool(getattr(module, "__pytree_lab_lite__", False))


# Where numpy cannot be loaded (a JupyterLite page offline), a host may give the engine stand-ins
# for its array parts: the site's kernel glue does (lite_build/kernel). An object with `Array`,
# `module(name)`, `needs_numpy(what)` and `needs_numpy_gradient(what)`; without one, importing
# `pytree_lab_lite.jax` needs numpy and autograd.
_STAND_INS: list[Any] = []


def use_stand_ins(provider: Any) -> None:
    """Give the engine its stand-ins for where numpy is missing (see `_STAND_INS`)."""
    _STAND_INS[:] = [provider]


def stand_ins() -> Any:
    """The stand-ins a host gave (`use_stand_ins`), or None."""
    return _STAND_INS[0] if _STAND_INS else None


def _import_real_jax() -> bool:
    try:
        if importlib.util.find_spec("jax") is None:
            return False
        importlib.import_module("jax")
        return True
    except Exception:  # e.g. jax without a working jaxlib: any failure means it cannot run here
        for name in [n for n in sys.modules if n == "jax" or n.startswith("jax.")]:
            del sys.modules[name]
        return False


def active_engine() -> str | None:
    """ "jax", "lite", or None when nothing is imported as ``jax`` yet."""
    module = sys.modules.get("jax")
    if module is None:
        return None
    return LITE if is_lite(module) else REAL_JAX


def install_as_jax() -> str:
    """Make ``import jax`` work: real JAX if it can be imported, else the Lite engine (put in
    ``sys.modules``, and its optax subset as ``optax`` where numpy is there for it). Returns the
    engine now behind ``import jax``: "jax" or "lite"."""
    current = active_engine()
    if current is not None:
        return current
    if _import_real_jax():
        return REAL_JAX
    from . import jax as lite

    sys.modules["jax"] = lite
    for name in _SUBMODULES:
        sys.modules[f"jax.{name}"] = getattr(lite, name)
    try:
        sys.modules["optax"] = importlib.import_module(".optax", __name__)
    except ImportError:  # no numpy here (the tree operations only): `import optax` fails as usual
        pass
    return LITE
