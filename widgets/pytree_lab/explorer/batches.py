"""A new batch for the explorer's inputs (`set_inputs`): mini-batches and integer labels.

A training demo feeds one batch after another. A new inputs tree is taken when it has the
explorer's structure (the same keys) and every leaf keeps its kind of number (float, int, bool)
and its trailing shape: only the first dimension, the number of examples, may change. Then:

- a leaf of another float width is cast to the width the explorer holds (as JAX would);
- integer labels of another width (int64 from numpy, int32 from JAX) are cast to the width the
  explorer holds when every value fits (a new array: the person's array is never changed), and
  refused with the values that do not fit otherwise;
- a leaf with sliders keeps its shape (its sliders are its elements);
- a batch shape not seen before compiles the step once more (JAX's jit keeps one program per
  shape, so going back to an earlier batch size compiles nothing): said in the status line.

Anything else is refused with the leaf's path named. Runs without ipywidgets (the session's side).
"""

from __future__ import annotations

from typing import Any

__all__ = ["fit_inputs"]

_KINDS = {"f": "float", "i": "int", "u": "int", "b": "bool", "c": "complex"}


def _kind(dtype: Any) -> str:
    return _KINDS.get(dtype.kind, dtype.kind)


def _shapes(leaves: list) -> tuple:
    import numpy as np

    return tuple(tuple(np.shape(x)) for x in leaves)


def fit_inputs(session: Any, pinned: Any) -> tuple[list, list[str]] | str | None:
    """`pinned` (the new inputs, dtypes pinned) as the session's input leaves: (leaves, notes),
    or why not (a sentence naming the path). None when the structure differs: the caller's
    structural diagnosis says how."""
    import numpy as np

    eng = session.engine
    flat, treedef = eng.tree_flatten_with_path(pinned)
    if treedef != session.input_def:
        return None
    slid = {s.element.flat_index for s in session.specs if s.element is not None and s.element.tree == "inputs"}
    leaves, notes, resized = [], [], []
    for i, ((path, new), held) in enumerate(zip(flat, session.input_leaves)):
        where = f"inputs{eng.keystr(path)}"
        a, want = np.asarray(new), np.asarray(held)
        if _kind(a.dtype) != _kind(want.dtype):
            return (
                f"{where} is {want.dtype} in the explorer's inputs but {a.dtype} in the new inputs: a new batch "
                f"keeps each input's kind of number ({_kind(want.dtype)}). Convert it first, e.g. "
                f"np.asarray(value).astype(np.{want.dtype})."
            )
        if a.ndim != want.ndim or a.shape[1:] != want.shape[1:]:
            return (
                f"{where} has shape {want.shape} in the explorer's inputs but {a.shape} in the new inputs: a new "
                "batch may change only the first dimension (the number of examples)."
            )
        if a.shape != want.shape and i in slid:
            return (
                f"{where} has shape {want.shape} in the explorer's inputs, with sliders on its elements, and "
                f"{a.shape} in the new inputs: an input with sliders keeps its shape. Choose sliders=[...] "
                "without it to feed batches of other sizes."
            )
        if a.dtype != want.dtype and _kind(a.dtype) == "int":
            info = np.iinfo(want.dtype)
            if a.size and (a.min() < info.min or a.max() > info.max):
                bad = a.max() if a.max() > info.max else a.min()
                return (
                    f"{where} holds {a.dtype} values such as {bad}, which do not fit the explorer's {want.dtype} "
                    f"({info.min} to {info.max}): the labels would change. Keep the values in range, or build "
                    f"the explorer with {a.dtype} labels."
                )
            notes.append(f"{where}: {a.dtype} labels taken as {want.dtype}, the explorer's type (every value fits).")
        if a.dtype != want.dtype:
            new = a.astype(want.dtype)  # a new array: the caller's is never changed
        if a.shape != want.shape:
            resized.append(f"{where} {a.shape} (was {want.shape})")
        leaves.append(new)
    if resized:
        seen = session.__dict__.setdefault("batch_shapes", {_shapes(session.initial[1])})
        shapes = _shapes(leaves)
        compiles = shapes not in seen
        seen.add(shapes)
        said = (
            "."
            if eng.is_lite
            else "; the step compiles once for this shape."
            if compiles
            else "; this shape was compiled before."
        )
        notes.append("New batch shape: " + ", ".join(resized) + said)
    return leaves, notes
