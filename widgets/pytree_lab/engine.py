"""The compute-engine seam.

The explorer and `gradient_step` ask one object for `value_and_grad` and the tree operations.
In a live kernel that object wraps real JAX (`jax.value_and_grad`, `jax.tree.map`,
`jax.tree_util`). In a JupyterLite kernel, where jaxlib cannot be installed, it wraps the
Lite engine (`pytree_lab_lite.jax` of the pytree-lab-lite package, numpy + autograd) which offers
the same functions; pytree-lab does not depend on it, and finds it only where it is installed.
Real JAX always wins where it exists.
"""

from __future__ import annotations

import functools
import importlib
from collections.abc import Callable
from typing import Any

__all__ = ["Engine", "get_engine", "choose_device", "ACCELERATOR_PARAMS"]

# From this many parameter elements on, an explorer's step runs on the accelerator JAX sees (a
# TPU, a GPU), below it on the host's CPU. On a TPU v5e host (docs/backends.md) a move, Step or
# played step costs the chip 130-180 ms at any size, the CPU 15-23 ns an element: the chip takes
# 2x the CPU's time at 4.2M elements, the same near 8M, 0.4x at 16.8M.
ACCELERATOR_PARAMS = 10_000_000


_FROM_TREE_UTIL = frozenset(
    {"tree_map", "tree_flatten", "tree_unflatten", "tree_structure", "tree_leaves", "tree_flatten_with_path", "keystr"}
)


class Engine:
    """A jax-like module seen through the handful of calls pytree-lab needs."""

    def __init__(self, jax_module: Any):
        self.jax = jax_module

    # ---- identity
    @property
    def version(self) -> str:
        return str(getattr(self.jax, "__version__", "?"))

    @property
    def is_lite(self) -> bool:
        """True for the JupyterLite engine (numpy + autograd), False for real JAX.

        Told by the module itself (the Lite engine marks itself), never by a version string.
        """
        return bool(getattr(self.jax, "__pytree_lab_lite__", False))

    @property
    def name(self) -> str:
        if self.is_lite:
            detail = getattr(self.jax, "engine_detail", None)
            detail = detail() if callable(detail) else "numpy + autograd"
            return f"pytree-lab Lite engine {self.version} ({detail}; JAX cannot run in the browser)"
        return f"JAX {self.version}"

    @functools.cached_property
    def numpy(self) -> Any:
        return importlib.import_module(self.jax.__name__ + ".numpy")

    @functools.cached_property
    def tree_util(self) -> Any:
        return importlib.import_module(self.jax.__name__ + ".tree_util")

    # ---- forwarded as they are: jax's transformations, jax.tree_util's tree operations
    def __getattr__(self, name: str) -> Any:
        if name in _FROM_TREE_UTIL:
            return getattr(self.tree_util, name)
        if name in ("value_and_grad", "grad", "jit"):
            return getattr(self.jax, name)
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def ravel_pytree(self, tree: Any) -> tuple[Any, Callable]:
        """`flatten_util.ravel_pytree`: the tree's leaves packed into one vector, and the unravel."""
        return importlib.import_module(self.jax.__name__ + ".flatten_util").ravel_pytree(tree)

    def check_tree(self, tree: Any, name: str = "params") -> None:
        """Raise `pytree_lab.trees.TreeError` (path named) for a tree that contains itself or whose
        nodes raise, before any JAX call sees it (JAX's own recursion on a cyclic tree exhausts
        the interpreter instead of failing)."""
        from .trees import check_tree

        check_tree(tree, name)

    def __repr__(self) -> str:
        return f"<Engine {self.name}>"


def choose_device(device: Any, engine: Engine, leaves: list, *, default: Any = None) -> Any:
    """The `jax.Device` an explorer's step runs on (None on the Lite engine).

    `device`: a `jax.Device`, or a platform name ("cpu", "tpu", "gpu", ...) for its first device,
    or None: the host's CPU for a tree of fewer than `ACCELERATOR_PARAMS` parameter elements, JAX's
    default device (the accelerator, where there is one; `default` stands for it) from there on. A
    wrong value is refused with a sentence."""
    if engine.is_lite:
        if device is not None and device != "cpu":
            raise ValueError(f"device={device!r}: the Lite engine computes with numpy on this CPU only.")
        return None
    jax = engine.jax
    if device is None:
        default = default or jax.devices()[0]
        if sum(int(getattr(x, "size", 1)) for x in leaves) >= ACCELERATOR_PARAMS:
            return default
        try:
            return jax.devices("cpu")[0]
        except RuntimeError:  # JAX started without its CPU backend (JAX_PLATFORMS=tpu)
            return default
    if isinstance(device, jax.Device):
        return device
    if not isinstance(device, str):
        raise TypeError(f"device= takes a jax.Device or a platform name such as 'cpu', not {type(device).__name__}.")
    try:
        return jax.devices(device.lower())[0]
    except (RuntimeError, ValueError):
        seen = sorted({d.platform for d in jax.devices()} | {"cpu"})
        raise ValueError(
            f"device={device!r} is not a platform JAX can use here; it sees {', '.join(map(repr, seen))} "
            "(give one of these, or a jax.Device from jax.devices())."
        ) from None


def device_label(device: Any) -> str:
    """A device as the explorer names it: 'TPU 0 (TPU v5 lite)', 'CPU 0'."""
    kind = str(getattr(device, "device_kind", ""))
    name = f"{device.platform.upper()} {device.id}"
    return f"{name} ({kind})" if kind and kind.lower() != device.platform else name


@functools.cache
def get_engine() -> Engine:
    """The engine for this kernel: real JAX if importable, else the Lite engine where the
    pytree-lab-lite package is installed (the JupyterLite site installs it)."""
    try:
        import jax
    except ImportError:
        try:
            jax = importlib.import_module("pytree_lab_lite.jax")
        except ImportError as err:  # pragma: no cover - depends on the kernel
            raise ImportError("pytree-lab needs JAX to compute gradients: `pip install pytree-lab[jax]`") from err
    return Engine(jax)
