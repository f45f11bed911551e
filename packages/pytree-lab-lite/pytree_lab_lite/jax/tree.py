"""`jax.tree` for the Lite engine: short names for the `jax.tree_util` functions."""

from .. import tree_util as _tree_util

__all__ = "all flatten flatten_with_path leaves leaves_with_path map map_with_path reduce structure unflatten".split()
for _name in __all__:
    globals()[_name] = getattr(_tree_util, "tree_" + _name)
del _name
