"""Which tree library and JAX settings are in use in this kernel, asked without importing any.

The tree model (trees.py) reads these; it never imports the engine, so `describe` on plain
Python containers never loads jax or numpy.
"""

from __future__ import annotations

import sys
from typing import Any

__all__ = ["active_tree_util", "x64_enabled"]


def active_tree_util() -> Any:
    """The tree library already in use in this kernel, imported by nobody here: real
    `jax.tree_util` (or the Lite engine installed as ``jax``), else the Lite `tree_util` if it
    was imported, else None. The tree model asks this for custom nodes, so a plain-Python
    diagram never loads jax, numpy or autograd."""
    jax = sys.modules.get("jax")
    if jax is not None:
        return getattr(jax, "tree_util", None) or sys.modules.get("jax.tree_util")
    return sys.modules.get("pytree_lab.compat.tree_util")


def x64_enabled() -> bool:
    """`jax_enable_x64` of the jax in use (False when none is loaded, and for the Lite engine)."""
    jax = sys.modules.get("jax")
    try:
        return bool(jax.config.jax_enable_x64) if jax is not None else False
    except AttributeError:
        return False
