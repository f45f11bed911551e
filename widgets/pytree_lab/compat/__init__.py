"""What runs where JAX cannot: the JupyterLite engine.

* `pytree_lab.compat.tree_util` — `jax.tree_util` semantics in plain Python (no numpy needed).
* `pytree_lab.compat.jax` — the Lite engine: `grad`, `value_and_grad`, `jit`, `jax.numpy`,
  `jax.tree`, `jax.tree_util`, `jax.flatten_util` on numpy + autograd.

`install_as_jax()` lets lesson code say ``import jax`` in the browser. Importing this package
loads neither numpy nor autograd: the tree model works in a kernel that has neither.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys

__all__ = ["REAL_JAX", "LITE", "active_engine", "install_as_jax", "is_lite"]

REAL_JAX = "jax"
LITE = "lite"

_SUBMODULES = ("numpy", "tree", "tree_util", "flatten_util", "nn", "random", "lax")


def is_lite(module: object) -> bool:
    return bool(getattr(module, "__pytree_lab_lite__", False))


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
    ``sys.modules``). Returns the engine now behind ``import jax``: "jax" or "lite"."""
    current = active_engine()
    if current is not None:
        return current
    if _import_real_jax():
        return REAL_JAX
    from . import jax as lite

    sys.modules["jax"] = lite
    for name in _SUBMODULES:
        sys.modules[f"jax.{name}"] = getattr(lite, name)
    return LITE
