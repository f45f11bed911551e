"""The pytree-lab Lite engine: the part of JAX the course uses, on numpy + autograd.

JAX cannot be installed in a JupyterLite (Pyodide) kernel: jaxlib is compiled XLA code with no
WebAssembly build. This package offers the same names (`grad`, `value_and_grad`, `jit`,
`jax.numpy`, `jax.tree`, `jax.tree_util`, `jax.flatten_util`) so lesson code runs unchanged in the
browser, with gradients from autograd (a real reverse-mode autodiff library) and tree operations
that follow `jax.tree_util` exactly. It is not JAX: `__version__` says so, and there is no
compiler, no `vmap`, no random keys and no devices. `pytree_lab.compat.install_as_jax()` makes it
importable as ``jax`` only where real JAX cannot be imported.
"""

from __future__ import annotations

from ... import __version__ as _package_version
from . import flatten_util, numpy, tree, tree_util
from ._autodiff import block_until_ready, config, grad, jit, value_and_grad
from .numpy import Array

# A local version label: it sorts near the package version and never claims to be a JAX release.
__version__ = f"{_package_version}+pytree-lab-lite"
__pytree_lab_lite__ = True

__all__ = [
    "Array",
    "block_until_ready",
    "config",
    "flatten_util",
    "grad",
    "jit",
    "numpy",
    "tree",
    "tree_util",
    "value_and_grad",
]
