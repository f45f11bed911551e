"""The compute-engine seam.

The explorer and `gradient_step` ask one object for `value_and_grad` and the tree operations.
In a live kernel that object wraps real JAX (`jax.value_and_grad`, `jax.tree.map`,
`jax.tree_util`). In a JupyterLite kernel, where jaxlib cannot be installed, it wraps the
Lite engine (`pytree_lab.compat.jax`, numpy + autograd) which offers the same functions.
Real JAX always wins where it exists.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from functools import cached_property
from typing import Any

from ._jax_in_use import active_tree_util as active_tree_util, x64_enabled as x64_enabled
from .compat import _is_lite as _is_lite_module

__all__ = ["Engine", "get_engine", "active_tree_util", "x64_enabled"]


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
        return _is_lite_module(self.jax)

    @property
    def name(self) -> str:
        if self.is_lite:
            detail = getattr(self.jax, "engine_detail", None)
            detail = detail() if callable(detail) else "numpy + autograd"
            return f"pytree-lab Lite engine {self.version} ({detail}; JAX cannot run in the browser)"
        return f"JAX {self.version}"

    @cached_property
    def numpy(self) -> Any:
        return importlib.import_module(self.jax.__name__ + ".numpy")

    @cached_property
    def tree_util(self) -> Any:
        return importlib.import_module(self.jax.__name__ + ".tree_util")

    # ---- transformations
    def value_and_grad(self, fn: Callable, argnums: int | tuple = 0) -> Callable:
        return self.jax.value_and_grad(fn, argnums=argnums)

    def grad(self, fn: Callable, argnums: int | tuple = 0) -> Callable:
        return self.jax.grad(fn, argnums=argnums)

    def jit(self, fn: Callable) -> Callable:
        return self.jax.jit(fn)

    # ---- tree operations (jax.tree_util semantics)
    def tree_map(self, f: Callable, tree: Any, *rest: Any, is_leaf: Callable | None = None) -> Any:
        return self.tree_util.tree_map(f, tree, *rest, is_leaf=is_leaf)

    def tree_flatten(self, tree: Any) -> tuple[list, Any]:
        return self.tree_util.tree_flatten(tree)

    def tree_unflatten(self, treedef: Any, leaves: list) -> Any:
        return self.tree_util.tree_unflatten(treedef, leaves)

    def tree_structure(self, tree: Any) -> Any:
        return self.tree_util.tree_structure(tree)

    def tree_leaves(self, tree: Any) -> list:
        return self.tree_util.tree_leaves(tree)

    def tree_flatten_with_path(self, tree: Any) -> tuple[list, Any]:
        return self.tree_util.tree_flatten_with_path(tree)

    def keystr(self, path: tuple) -> str:
        return self.tree_util.keystr(path)

    def ravel_pytree(self, tree: Any) -> tuple[Any, Callable]:
        """`flatten_util.ravel_pytree`: the tree's leaves packed into one vector, and the unravel."""
        return importlib.import_module(self.jax.__name__ + ".flatten_util").ravel_pytree(tree)

    def check_tree(self, tree: Any, name: str = "params") -> None:
        """Raise `pytree_lab.trees.TreeError` (path named) for a tree that contains itself or whose
        nodes raise, before any JAX call sees it (JAX's own recursion on a cyclic tree exhausts
        the interpreter instead of failing)."""
        from .trees import check_tree

        check_tree(tree, name)

    def paths(self, tree: Any) -> list[str]:
        """Leaf paths as keystr strings, in flatten order."""
        flat, _ = self.tree_flatten_with_path(tree)
        return [self.keystr(p) for p, _ in flat]

    def __repr__(self) -> str:
        return f"<Engine {self.name}>"


_ENGINE: Engine | None = None


def get_engine() -> Engine:
    """The engine for this kernel: real JAX if importable, else the JupyterLite engine."""
    global _ENGINE
    if _ENGINE is None:
        try:
            import jax
        except ImportError:
            try:
                from .compat import jax
            except ImportError as err:  # pragma: no cover - depends on the kernel
                raise ImportError("pytree-lab needs JAX to compute gradients: `pip install pytree-lab[jax]`") from err
        _ENGINE = Engine(jax)
    return _ENGINE
