"""An optimizer state read as the lesson describes it: the moment trees shaped like the params
(Adam's mu and nu, momentum's trace), by name, and the rest (counts, hyperparameters); and the
constants of the one Adam inside an optimizer, for the worked calculation."""

from __future__ import annotations

import contextlib
from collections import Counter
from dataclasses import dataclass
from typing import Any

from .engine import Engine, get_engine

__all__ = ["StateView", "decompose_state", "adam_hyperparameters"]


# ---------------------------------------------------------------------------------------- state view
@dataclass(frozen=True)
class StateView:
    """An optimizer state split as the lesson describes it.

    `moments`: name -> a tree with the params' structure and shapes ("adam mu", "adam nu",
    "momentum trace", ...), to be aligned row by row with params. `rest`: name -> everything else
    (step counts, hyperparameters, empty states), shown apart as optimizer state. `where`: name ->
    the path of that part inside the state (keystr form, e.g. "[0].mu").
    """

    moments: dict
    rest: dict
    where: dict


# Readable names for the state types optax uses (others: the type name without ScaleBy/State).
_TYPE_LABELS = {
    "TraceState": "momentum",
    "ScaleByAdamState": "adam",
    "MultiStepsState": "multisteps",
    "InjectHyperparamsState": "inject_hyperparams",
    "InjectStatefulHyperparamsState": "inject_hyperparams",
    "EmptyState": "empty",
}
# Wrappers whose inner state is a whole optimizer's state: its parts keep their own names.
_INNER_FIELDS = {"inner_state", "inner_opt_state", "inner_states"}


def _type_label(node: Any) -> str:
    name = type(node).__name__
    label = name.removeprefix("ScaleBy")
    return _TYPE_LABELS.get(name) or (label.removesuffix("State") or label).lower()


def decompose_state(state: Any, params: Any, engine: Engine | None = None) -> StateView:
    """Split `state` into moment trees shaped like `params` and the rest (see `StateView`)."""
    import numpy as np

    eng = engine or get_engine()
    params_def = eng.tree_structure(params)
    params_leaves = eng.tree_leaves(params)
    shapes = [np.shape(x) for x in params_leaves]

    def like_params(node: Any) -> bool:
        if not params_leaves:
            return False
        try:
            if eng.tree_structure(node) != params_def:
                return False
            leaves = eng.tree_leaves(node)
        except Exception:
            return False
        for leaf, shape in zip(leaves, shapes):
            if not hasattr(leaf, "dtype") or np.shape(leaf) != shape:
                return False
            if not np.issubdtype(np.asarray(leaf).dtype, np.inexact):
                return False
        return True

    found: list[tuple[str, str, Any, bool]] = []  # (name, where, value, is_moment)

    def visit(node: Any, words: list[str], where: str) -> None:
        if like_params(node):
            found.append((" ".join(words) or "state", where, node, True))
            return
        if isinstance(node, tuple) and hasattr(node, "_fields"):
            label = _type_label(node)
            if not node._fields:  # an empty state: shown apart, as what it is
                found.append((" ".join(words + [label]), where, node, False))
                return
            for field_name, child in zip(node._fields, node):
                if field_name in _INNER_FIELDS:
                    visit(child, words, f"{where}.{field_name}")
                elif label == "inject_hyperparams" and field_name == "hyperparams" and isinstance(child, dict):
                    for key, value in child.items():
                        found.append((" ".join(words + [str(key)]), f"{where}.{field_name}[{key!r}]", value, False))
                else:
                    visit(
                        child, words + [label, field_name] if label else words + [field_name], f"{where}.{field_name}"
                    )
            return
        if isinstance(node, (tuple, list)):
            if len(node) == 0:
                if words:  # an empty slot of a named state (e.g. skip_state=()): shown apart
                    found.append((" ".join(words), where, node, False))
                return
            for i, child in enumerate(node):
                visit(child, words, f"{where}[{i}]")
            return
        if isinstance(node, dict):
            for key, child in node.items():
                visit(child, words + [str(key)], f"{where}[{key!r}]")
            return
        found.append((" ".join(words) or "state", where, node, False))

    visit(state, [], "")
    # the same name twice (two Adams in a chain, several empty states): say where each one is
    counts = Counter(name for name, *_ in found)
    moments: dict = {}
    rest: dict = {}
    where: dict = {}
    for name, path, value, is_moment in found:
        if counts[name] > 1:
            name = f"{name} (state{path})"
        (moments if is_moment else rest)[name] = value
        where[name] = path
    return StateView(moments, rest, where)


# ---------------------------------------------------------------------------------------- Adam's numbers
def _closure(fn: Any) -> dict:
    cells = getattr(fn, "__closure__", None) or ()
    out = {}
    for name, cell in zip(fn.__code__.co_freevars, cells):
        with contextlib.suppress(ValueError):  # an empty cell
            out[name] = cell.cell_contents
    return out


def adam_hyperparameters(optimizer: Any) -> dict | None:
    """b1, b2, eps, eps_root and the learning rate of the one Adam inside an optax (or Lite)
    optimizer, read from the functions it was built from; None unless exactly one plain Adam
    (not Nesterov) with numeric constants is found. The worked calculation uses them to show
    m̂ and v̂; it also shows the optimizer's own update beside, so a reading that does not fit
    (weight decay, clipping after Adam) is visible rather than hidden."""
    adams: list[dict] = []
    scales: list[Any] = []
    seen: set[int] = set()

    def walk(obj: Any, depth: int) -> None:
        if depth > 10 or id(obj) in seen:
            return
        seen.add(id(obj))
        fn = getattr(obj, "__func__", obj)  # bound methods (MultiSteps.update)
        if callable(fn) and hasattr(fn, "__code__"):
            name = fn.__qualname__
            cells = _closure(fn)
            if name.startswith("scale_by_adam.<locals>.update"):
                adams.append(cells)
            elif name.startswith("scale.<locals>.update") and "step_size" in cells:
                scales.append(cells["step_size"])
            for value in cells.values():
                walk(value, depth + 1)
            owner = getattr(obj, "__self__", None)
            if owner is not None:
                walk(owner, depth + 1)
        elif isinstance(obj, (tuple, list)):
            for item in obj:
                walk(item, depth + 1)
        elif hasattr(obj, "__dict__") and type(obj).__module__.split(".")[0] in ("optax", "pytree_lab"):
            for value in vars(obj).values():
                walk(value, depth + 1)

    walk(getattr(optimizer, "update", None), 0)
    if len(adams) != 1 or adams[0].get("nesterov", False):
        return None
    found = {k: adams[0].get(k) for k in ("b1", "b2", "eps", "eps_root")}
    if len(scales) == 1:
        found["learning_rate"] = -scales[0] if isinstance(scales[0], (int, float)) else None
    if not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in found.values() if v is not None):
        return None
    return {k: float(v) for k, v in found.items() if v is not None}
