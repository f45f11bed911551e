"""A run's record: `ex.history` as data a lecturer can plot.

`History` is the list of losses it always was (``ex.history == [4.0]``, ``len``, indexing, numpy
and ``pytest.approx`` all work as before) with the step numbers and learning rates beside it:

    ex.history                 [loss at step 0, loss at step 1, ...]
    ex.history.steps           [0, 1, 2, ...]  the number of steps taken to reach each point
    ex.history.learning_rates  the rate of the step taken *from* each point (the step the
                               explorer shows there); NaN where the rate is fixed inside the
                               optimizer (e.g. optax.adam(0.1))
    ex.history_dict()          {"step": [...], "loss": [...], "learning_rate": [...], and one list per
                               element of the params and of the optimizer state at each point:
                               "params['w'][0, 1]": [...], "opt_state[0].mu['w'][0, 1]": [...]}
    ex.to_dataframe()          the same as a pandas DataFrame (pandas is optional), the
                               trajectories in their own dtypes (float32 stays float32)

The trajectories (`Trail`) are kept while they hold at most `TRAIL_NUMBERS` numbers in all (a
big model, or a very long run, keeps the first points only; the later ones are NaN).

A slider move moves the current point (its loss and rate are replaced, no step is counted); a
step, Step ×10, a played step or `step(n)` adds points; `reset()` starts the record again.
"""

from __future__ import annotations

import math
import re
from typing import Any

__all__ = ["History", "Trail", "history_dict", "to_dataframe", "TRAIL_NUMBERS"]

TRAIL_NUMBERS = 20_000_000  # numbers kept in the trajectories at most (every point's params and state)


class History(list):
    """The losses at each point visited (a list of floats), with `steps` and `learning_rates`."""

    def __init__(self, losses: Any = (), rates: Any = ()):
        super().__init__(losses)
        rates = list(rates)[: len(self)]
        self.learning_rates: list[float] = rates + [math.nan] * (len(self) - len(rates))

    @property
    def steps(self) -> list[int]:
        """The step number of each point: 0 for where the explorer started (or was reset)."""
        return list(range(len(self)))


class Trail(list):
    """Each point's (params leaves, optimizer state leaves), beside `history`,
    while they fit in `TRAIL_NUMBERS` numbers (`cut` after)."""

    cut = False
    size = 0  # numbers in one point

    def put(self, new: bool, result: Any, eng: Any) -> None:
        """The point of `result` (a step), a new one (`new`) or the last one moved (a slider). The
        step's own leaves are kept (no step changes them), read as numpy only when asked for: a
        slider move copies nothing here."""
        if self.cut:
            return
        point = tuple(list(eng.tree_leaves(t)) for t in (result.params, getattr(result, "opt_state", None)))
        self.size = sum(getattr(x, "size", 1) for leaves in point for x in leaves)
        if not new:
            self[-1] = point
        elif self.room(1):
            self.append(point)

    def room(self, n: int) -> bool:
        """Whether n more points fit (else the trail is cut from here on)."""
        self.cut = self.cut or (len(self) + n) * self.size > TRAIL_NUMBERS
        return not self.cut

    def columns(self, session: Any, points: int) -> dict[str, Any]:
        """One numpy column per element: "params['w'][0, 1]", "opt_state[0].mu['w'][0, 1]"."""
        import numpy as np

        eng, cols = session.engine, {}
        for which, (name, tree) in enumerate((("params", session.params_tree), ("opt_state", session.opt_state))):
            if tree is None or not self:
                continue
            for i, (path, _) in enumerate(eng.tree_flatten_with_path(tree)[0]):
                stacked = np.stack([point[which][i] for point in self])
                if len(self) < points:  # cut: NaN where not kept
                    stacked = np.concatenate([stacked, np.full((points - len(self), *stacked.shape[1:]), np.nan)])
                for idx in np.ndindex(stacked.shape[1:]):
                    cols[f"{name}{eng.keystr(path)}" + (str(list(idx)) if idx else "")] = stacked[(slice(None), *idx)]
        return cols


def history_dict(session: Any, lists: bool = True) -> dict[str, Any]:
    """The record: step, loss and learning rate, then the trajectories (numpy columns unless `lists`)."""
    h = History(session.history, session.rates)
    columns = session.trail.columns(session, len(h))
    return {"step": h.steps, "loss": list(h), "learning_rate": h.learning_rates} | {
        k: v.tolist() if lists else v for k, v in columns.items()
    }


def to_dataframe(session: Any) -> Any:
    try:
        import pandas as pd
    except ImportError as err:
        raise ImportError(
            "to_dataframe() needs pandas, which is not installed (pip install pandas). "
            "ex.history_dict() gives the same record as plain lists: "
            "{'step': [...], 'loss': [...], 'learning_rate': [...]}."
        ) from err
    return pd.DataFrame(history_dict(session, lists=False)).set_index("step")


# ------------------------------------------------------------------ a demo kept in a file
FORMAT = "pytree-lab demo 1"


def layout(tree: Any, eng: Any) -> list:
    """What a loaded tree must match: its structure (node types named) and each leaf's path, shape, dtype."""
    import numpy as np

    flat, treedef = eng.tree_flatten_with_path(tree)
    return [str(treedef), *([eng.keystr(p), list(np.shape(x)), str(np.asarray(x).dtype)] for p, x in flat)]


def save(ex: Any, path: Any, written: dict) -> Any:
    """Write `ex`'s demo to `path` (numpy's .npz, no pickle) by `write_new`: params, inputs,
    optimizer state, the record with its trajectories, the sliders' values, the bars and the boxes."""
    import json

    import numpy as np

    s, eng = ex.session, ex.session.engine
    trees = {"params": s.param_leaves, "inputs": s.input_leaves, "state": eng.tree_leaves(s.opt_state)}
    arrays = {f"{name}/{i}": np.asarray(x) for name, leaves in trees.items() for i, x in enumerate(leaves)}
    for which, name in enumerate(("trail_params", "trail_state")):
        for i in range(len(s.trail[0][which]) if s.trail else 0):
            arrays[f"{name}/{i}"] = np.stack([point[which][i] for point in s.trail])
    meta = {
        "format": FORMAT,
        "trees": [layout(t, eng) for t in (s.params_tree, s.inputs_tree, s.opt_state)],
        "points": [len(s.history), len(s.trail)],
        "learning_rate": None if s.rate_source == "fixed" else s.learning_rate,
        "sliders": [spec.label for spec in s.specs],
        "values": s.values,
        "bars": [e.path for e in ex.views["ChartView"].base or []],
        "selected": ex.selected_path,
        "boxes": [ex.fixed_range_box.value, ex.log_scale_box.value],
        "moved": not s.new_point,
        "cut": s.trail.cut,
    }
    arrays |= {"history": np.asarray(s.history), "rates": np.asarray(s.rates), "meta": np.asarray(json.dumps(meta))}
    # (numpy types allow_pickle beside the arrays)
    return write_new(path, ".npz", written, lambda f: np.savez(f, **arrays))  # type: ignore[arg-type]


def write_new(path: Any, suffix: str, written: dict, write: Any) -> Any:
    """`write(file)` to `path` (with `suffix`): a file there that this explorer did not write
    (`written`: its paths and their stat) is kept, the new one goes to `name-2{suffix}`, ...
    Written to a new file in the same folder, then renamed over: a failed write (a full disk)
    leaves what was there as it was. Returns the path written."""
    import os
    import pathlib
    import secrets

    p = pathlib.Path(path).with_suffix(suffix)
    stem, k = p, 1
    while p.exists() and written.get(str(p.resolve())) != (p.stat().st_mtime_ns, p.stat().st_size):
        k += 1
        p = stem.with_name(f"{stem.stem}-{k}{suffix}")
    reserved = not p.exists()
    if reserved:  # "xb": never over a file made meanwhile
        open(p, "xb").close()
    temp = p.with_name(f".{p.name}.{secrets.token_hex(4)}.tmp")
    try:
        with open(temp, "xb") as f:
            write(f)
        os.replace(temp, p)
    except BaseException:
        for made in (temp, p) if reserved else (temp,):
            made.unlink(missing_ok=True)
        raise
    written[str(p.resolve())] = (os.stat(p).st_mtime_ns, os.stat(p).st_size)
    return p


def _as_written(tree: Any, like: Any) -> Any:
    """`tree` as JAX rebuilt it (dicts in sorted key order) with its dicts in `like`'s order."""
    if type(tree) is dict and isinstance(like, dict):
        return {k: _as_written(tree[k], like[k]) for k in like}
    if type(tree) in (list, tuple) and isinstance(like, (list, tuple)):
        return type(tree)(_as_written(t, w) for t, w in zip(tree, like))
    return tree


def _read(z: Any, name: str, shape: Any, dtype: Any) -> Any:
    """The member `name` of the demo's zip `z` as an array, read only when it is stored as written
    (never compressed: no member holds more than the file) and its header declares `shape` and
    `dtype` (any text for None); never a pickle. ValueError or KeyError otherwise."""
    import zipfile

    import numpy as np
    from numpy.lib import format as npy

    info = z.getinfo(f"{name}.npy")
    if info.compress_type != zipfile.ZIP_STORED:
        raise ValueError(name)
    with z.open(info) as f:
        version = npy.read_magic(f)
        got, fortran, kind = (npy.read_array_header_1_0 if version == (1, 0) else npy.read_array_header_2_0)(f)
        if got != tuple(shape) or fortran or (kind != np.dtype(dtype) if dtype else kind.kind != "U"):
            raise ValueError(name)
        return np.frombuffer(f.read(), kind).reshape(shape)


def load(cls: Any, path: Any, loss_fn: Any, params: Any, inputs: Any = None, **kwargs: Any) -> Any:
    """A new explorer of `cls` from a saved demo: the loss, the optimizer and the trees' structure
    are the code's (as given to `StepExplorer`), the numbers and choices the file's. Each member
    of the file is checked against what the code's trees need before it is read."""
    import json
    import zipfile

    from ..engine import get_engine
    from ..step import pin_dtypes

    eng = kwargs.get("engine") or get_engine()
    static = {k: v for k, v in (inputs or {}).items() if k in set(kwargs.get("static", ()))}
    rest = {k: v for k, v in (inputs or {}).items() if k not in static}
    not_demo = ValueError(f"{path} is not a pytree-lab demo: load a file that StepExplorer.save wrote.")
    try:
        with zipfile.ZipFile(path) as z:
            meta = json.loads(str(_read(z, "meta", (), None)))
        trees, (points, kept) = meta["trees"], meta["points"]
    except (ValueError, KeyError, TypeError, zipfile.BadZipFile):
        raise not_demo from None
    for what, tree, saved in zip(("params", "inputs"), (params, rest), trees):
        given = layout(pin_dtypes(tree, eng), eng)
        if given != saved:
            raise _misfit(what, saved, given, path)
    try:
        with zipfile.ZipFile(path) as z:

            def take(name: str, saved: list, n: int | None = None) -> list:  # a tree's leaves, or n points of each
                shape = [] if n is None else [n]
                return [
                    _read(z, f"{name}/{i}", shape + leaf[1], leaf[2])
                    for i, leaf in enumerate(saved[1:] if n != 0 else [])
                ]

            leaves = {name: take(name, saved) for name, saved in zip(("params", "inputs", "state"), trees)}
            leaves |= {
                "trail_params": take("trail_params", trees[0], kept),
                "trail_state": take("trail_state", trees[2], kept),
            }
            history, rates = (_read(z, name, (points,), "float64") for name in ("history", "rates"))
    except (ValueError, KeyError, TypeError, IndexError, zipfile.BadZipFile):
        raise not_demo from None
    rebuilt = _as_written(eng.tree_unflatten(eng.tree_structure(rest), leaves["inputs"]), rest)
    ex = cls(
        loss_fn,
        _as_written(eng.tree_unflatten(eng.tree_structure(params), leaves["params"]), params),
        {k: static[k] if k in static else rebuilt[k] for k in (inputs or {})},
        meta["learning_rate"],
        sliders=meta["sliders"],
        bars=meta["bars"] or None,
        **kwargs,
    )
    s = ex.session
    if layout(s.opt_state, eng) != trees[2]:
        ex.close()
        names = lambda t: ", ".join(re.findall(r"\[(\w+)\]", t[0])) or "none (no optimizer)"  # noqa: E731
        raise ValueError(
            f"The demo in {path} was saved with an optimizer whose state is {names(trees[2])}, and the "
            f"optimizer given makes {names(layout(s.opt_state, eng))}: give StepExplorer.load the optimizer "
            "the demo was saved with."
        )
    tp, ts = leaves["trail_params"], leaves["trail_state"]
    trail = Trail(([x[t] for x in tp], [x[t] for x in ts]) for t in range(kept))
    trail.cut = meta["cut"]
    with s.lock:
        s.restore(leaves["state"], history, rates, trail)
        s.new_point = not meta["moved"]
        s.values.update(meta["values"])
    ex.fixed_range_box.value, ex.log_scale_box.value = meta["boxes"]
    ex.slider_panel.follow(False)
    ex.recompute()
    ex.selected_path = meta["selected"]
    return ex


def _misfit(what: str, saved: list, given: list, path: Any) -> ValueError:
    """The sentence for a model whose `what` tree is not the demo's: the first leaf that differs."""
    a, b = next(((a, b) for a, b in zip([*saved[1:], None], [*given[1:], None]) if a != b), (None, None))
    said = lambda leaf: f"{what}{leaf[0]} {leaf[2]}{leaf[1]}" if leaf else "no more leaves"  # noqa: E731
    differs = f"holds {said(a)} where the {what} given hold {said(b)}" if a or b else f"is {saved[0]}, not {given[0]}"
    return ValueError(
        f"The {what} given do not fit the demo in {path}: the demo's {what} tree {differs}; give the {what} of the "
        "model the demo was saved from."
    )
