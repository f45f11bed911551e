"""`jax.tree_util` for the Lite engine (the plain-Python implementation in pytree_lab_lite.tree_util)."""

from ..tree_util import *  # noqa: F403
from ..tree_util import __all__  # noqa: F401
