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

import array
import math
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
        "shapes": [[list(np.shape(x)), str(np.asarray(x).dtype)] for x in s.param_leaves],
        "learning_rate": None if s.rate_source == "fixed" else s.learning_rate,
        "sliders": [spec.label for spec in s.specs],
        "values": s.values,
        "bars": [e.path for e in ex.views["ChartView"].base or []],
        "selected": ex.selected_path,
        "boxes": [ex.fixed_range_box.value, ex.log_scale_box.value],
        "moved": not s._new_point,
        "cut": s.trail.cut,
    }
    arrays |= {"history": np.asarray(s.history), "rates": np.asarray(s.rates), "meta": np.asarray(json.dumps(meta))}
    # (numpy types allow_pickle beside the arrays)
    return write_new(path, ".npz", written, lambda f: np.savez(f, **arrays))  # type: ignore[arg-type]


def write_new(path: Any, suffix: str, written: dict, write: Any) -> Any:
    """`write(file)` to `path` (with `suffix`): a file there that this explorer did not write
    (`written`: its paths and their stat) is kept, the new one goes to `name-2{suffix}`, ...
    Returns the path written."""
    import os
    import pathlib

    p = pathlib.Path(path).with_suffix(suffix)
    stem, k = p, 1
    while p.exists() and written.get(str(p.resolve())) != (p.stat().st_mtime_ns, p.stat().st_size):
        k += 1
        p = stem.with_name(f"{stem.stem}-{k}{suffix}")
    with open(p, "wb" if p.exists() else "xb") as f:  # "xb": never over a file made meanwhile
        write(f)
    written[str(p.resolve())] = (os.stat(p).st_mtime_ns, os.stat(p).st_size)
    return p


def load(cls: Any, path: Any, loss_fn: Any, params: Any, inputs: Any = None, **kwargs: Any) -> Any:
    """A new explorer of `cls` from a saved demo: the loss, the optimizer and the trees' structure
    are the code's (as given to `StepExplorer`), the numbers and choices the file's."""
    import json

    import numpy as np

    with np.load(path, allow_pickle=False) as f:
        data = dict(f.items())
    meta = json.loads(str(data["meta"]))
    if meta.get("format") != FORMAT:
        raise ValueError(f"{path} is not a pytree-lab demo (StepExplorer.save writes one).")
    from ..engine import get_engine

    eng = kwargs.get("engine") or get_engine()
    leaves, treedef = eng.tree_flatten(params)
    shapes = [[list(np.shape(x)), str(np.asarray(x).dtype)] for x in leaves]
    if shapes != meta["shapes"]:
        raise ValueError(
            f"The params given do not fit the demo in {path}: its leaves are {meta['shapes']} (shape, "
            f"dtype), the params given {shapes}. Give the params of the model the demo was saved from."
        )
    take = lambda name, n: [data[f"{name}/{i}"] for i in range(n)]  # noqa: E731
    static = {k: v for k, v in (inputs or {}).items() if k in set(kwargs.get("static", ()))}
    rest = {k: v for k, v in (inputs or {}).items() if k not in static}
    rest_leaves, rest_def = eng.tree_flatten(rest)
    inputs = {**eng.tree_unflatten(rest_def, take("inputs", len(rest_leaves))), **static}
    ex = cls(
        loss_fn,
        eng.tree_unflatten(treedef, take("params", len(leaves))),
        inputs,
        meta["learning_rate"],
        sliders=meta["sliders"],
        bars=meta["bars"] or None,
        **kwargs,
    )
    s = ex.session
    with s.lock:
        state_leaves, state_def = eng.tree_flatten(s.opt_state)
        s.opt_state = eng.tree_unflatten(state_def, [s._frozen(x) for x in take("state", len(state_leaves))])
        s.history, s.rates = array.array("d", data["history"]), array.array("d", data["rates"])
        s.trail = Trail()
        if "trail_params/0" in data:
            tp, ts = take("trail_params", len(leaves)), take("trail_state", len(state_leaves))
            s.trail += [([x[t] for x in tp], [x[t] for x in ts]) for t in range(len(tp[0]))]
        s.trail.cut, s._new_point = meta["cut"], not meta["moved"]
        s.values.update(meta["values"])
    ex.fixed_range_box.value, ex.log_scale_box.value = meta["boxes"]
    ex.slider_panel.follow(False)
    ex.recompute()
    ex.selected_path = meta["selected"]
    return ex
