"""A run's record: `ex.history` as data a lecturer can plot.

`History` is the list of losses it always was (``ex.history == [4.0]``, ``len``, indexing, numpy
and ``pytest.approx`` all work as before) with the step numbers and learning rates beside it:

    ex.history                 [loss at step 0, loss at step 1, ...]
    ex.history.steps           [0, 1, 2, ...]  the number of steps taken to reach each point
    ex.history.learning_rates  the rate of the step taken *from* each point (the step the
                               explorer shows there); NaN where the rate is fixed inside the
                               optimizer (e.g. optax.adam(0.1))
    ex.history_dict()          {"step": [...], "loss": [...], "learning_rate": [...]}
    ex.to_dataframe()          the same as a pandas DataFrame (pandas is optional)

A slider move moves the current point (its loss and rate are replaced, no step is counted); a
step, Step ×10, a played step or `step(n)` adds points; `reset()` starts the record again.
"""

from __future__ import annotations

import math
from typing import Any

__all__ = ["History", "history_dict", "to_dataframe"]


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

    @property
    def losses(self) -> list[float]:
        return list(self)

    def as_dict(self) -> dict[str, list]:
        """{"step", "loss", "learning_rate"}: plain lists of equal length."""
        return {"step": self.steps, "loss": list(self), "learning_rate": list(self.learning_rates)}

    def __repr__(self) -> str:
        return list.__repr__(self)


def history_dict(session: Any) -> dict[str, list]:
    return History(session.history, session.rates).as_dict()


def to_dataframe(session: Any) -> Any:
    try:
        import pandas as pd
    except ImportError as err:
        raise ImportError(
            "to_dataframe() needs pandas, which is not installed (pip install pandas). "
            "ex.history_dict() gives the same record as plain lists: "
            "{'step': [...], 'loss': [...], 'learning_rate': [...]}."
        ) from err
    return pd.DataFrame(history_dict(session)).set_index("step")
