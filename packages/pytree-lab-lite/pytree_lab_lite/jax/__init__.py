"""The pytree-lab Lite engine: the part of JAX the course uses, on numpy + autograd.

jaxlib has no WebAssembly build, so JAX cannot run in a JupyterLite (Pyodide) kernel. This
package offers the same names (`grad`, `value_and_grad`, `jit`, `jax.numpy`, `jax.tree`,
`jax.tree_util`, `jax.flatten_util`, ...) so lesson code runs unchanged in the browser, with
gradients from autograd. It is not JAX (`__version__` says so): `jit` runs the function as
written, `vmap` is a loop, `jax.random` draws other numbers, there are no devices.
`pytree_lab_lite.install_as_jax()` makes it ``jax`` only where real JAX cannot be imported.

The array parts are imported on first use; where numpy cannot be loaded (a Lite page offline)
they are the stand-ins a host gave `pytree_lab_lite.use_stand_ins` (the site's kernel glue).
"""

from __future__ import annotations

import functools
import importlib
from typing import Any

from .. import __version__ as _package_version, stand_ins as _stand_ins
from . import tree, tree_util
from ._config import config, missing as _missing

# A local version label: it sorts near the package version and never claims to be a JAX release.
__version__ = f"{_package_version}+pytree-lab-lite"
__pytree_lab_lite__ = True

# name -> (module, attribute or None for the module itself); these need numpy (+ autograd)
_ARRAY_PARTS: dict[str, tuple[str, str | None]] = {
    **{module: (module, None) for module in ("numpy", "flatten_util", "nn", "random", "lax")},
    "Array": ("numpy", "Array"),
    **{f: ("_autodiff", f) for f in "grad value_and_grad jit block_until_ready vmap jacrev jacfwd hessian".split()},
}


def _array_module(name: str) -> Any:
    """This package's module `name`, or None where numpy or autograd cannot be imported."""
    try:
        return importlib.import_module(f".{name}", __name__)
    except ModuleNotFoundError as err:
        if (err.name or "").split(".")[0] not in ("numpy", "autograd"):
            raise
        return None


def engine_detail() -> str:
    """What this engine computes with, for its name: numpy + autograd, or, where numpy or
    autograd could not be loaded (the array parts are stand-ins), the tree operations alone on
    plain Python values."""
    if _array_module("numpy") is None or _array_module("_autodiff") is None:
        return "tree operations only, on plain Python values: numpy could not be loaded here"
    return "numpy + autograd"


def __getattr__(name: str) -> Any:
    part = _ARRAY_PARTS.get(name)
    if part is None:
        raise _missing(__name__, name, __dir__())
    module = _array_module(part[0])
    if module is None:
        return _stand_in(name)
    value = module if part[1] is None else getattr(module, part[1])
    globals()[name] = value
    return value


# Where numpy is missing, each name's stand-in, made once: the same object at every access (the
# exercises' check compares `jax.grad` before and after a student's code by identity).
@functools.cache
def _stand_in(name: str) -> Any:
    given = _stand_ins()
    if name == "Array":
        return given.Array
    if _ARRAY_PARTS[name][1] is None:  # a module
        return given.module(f"jax.{name}")
    if name in ("grad", "value_and_grad"):
        return given.needs_numpy_gradient(f"jax.{name}")
    return given.needs_numpy(f"jax.{name}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_ARRAY_PARTS))


if _stand_ins() is None:  # with no stand-ins given (outside the browser kernel), the engine needs numpy and autograd
    importlib.import_module(".numpy", __name__)
    importlib.import_module("._autodiff", __name__)

__all__ = ["config", "tree", "tree_util", *_ARRAY_PARTS]  # (_ARRAY_PARTS: imported on first use)
