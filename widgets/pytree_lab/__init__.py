"""pytree-lab: interactive widgets that teach JAX pytrees and structured parameters.

`import pytree_lab`, `describe` and `PytreeDiagram` on plain Python containers work with
neither jax nor numpy installed (a JupyterLite kernel): everything that needs them is
imported on first use.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from .diagnose import Diagnosis as Diagnosis, diagnose as diagnose
from .trees import TreeSummary as TreeSummary, describe as describe

__version__ = "0.1.0"

# name -> module, imported on first access (they need numpy, jax, bqplot or ipywidgets)
_LAZY = {
    "PytreeDiagram": ".diagram",
    "StepExplorer": ".explorer",
    "OptimizerComparison": ".explorer",
    "PackedView": ".packed",
    "StepResult": ".step",
    "gradient_step": ".step",
    "get_engine": ".engine",
    "check": ".course",  # an alias of `pytree_lab.course.check`: the one name that reaches the course, when used
}

if TYPE_CHECKING:  # pragma: no cover
    from .diagram import PytreeDiagram as PytreeDiagram
    from .engine import get_engine as get_engine
    from .explorer import OptimizerComparison as OptimizerComparison, StepExplorer as StepExplorer
    from .packed import PackedView as PackedView
    from .step import StepResult as StepResult, gradient_step as gradient_step


def __getattr__(name: str):
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'pytree_lab' has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value
    return value


def _jupyter_server_extension_points() -> list[dict]:
    """`pytree_lab` is also a jupyter_server extension: TCP_NODELAY on kernel websockets (server.py)."""
    return [{"module": "pytree_lab.server"}]


def __dir__():
    return sorted(set(globals()) | set(_LAZY) - {"check"})


__all__ = ["TreeSummary", "Diagnosis", "describe", "diagnose", *(name for name in _LAZY if name != "check")]
