"""`OptimizerComparison`: several optimizers on one model, stepped and played together (its
docstring says what it shows). One `ExplorerSession` per optimizer (its own params, optimizer
state, compiled step, history and trajectories, and the session's guard around the user's loss),
one lock for all of them, one set of controls (playbar.py) and one `Player` (play.py) for all."""

from __future__ import annotations

import contextlib
import html
import math
import threading
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import ipywidgets

from ..chart import LINE_COLORS, LossLinesChart
from ..diagram import PytreeDiagram
from ..engine import Engine
from ..formatting import fmt_number
from ..page import PageIntents
from ..slider import Slider, SliderModule
from ..step import StepResult
from ..training import OptimizerError
from ..widget_common import TextForm, refuse_unknown_widget_keywords
from . import record
from .debug import DebugArea
from .lifetime import Lifetime
from .play import Player, Playing
from .playbar import step_controls
from .session import ExplorerSession
from .sliders import rate_range
from .views import ViewSet

__all__ = ["OptimizerComparison", "COLUMNS"]

# what each optimizer's columns may show (the step's attribute): its params, grads, the optimizer's
# updates, the params after
COLUMNS = {"params": "params", "grads": "grads", "update": "updates", "updated": "updated"}


def _check(optimizers: Any, columns: Any) -> tuple[dict[str, Any], tuple[str, ...]]:
    if not isinstance(optimizers, Mapping) or not optimizers:
        raise TypeError(
            "OptimizerComparison needs `optimizers`, a dict of names to optimizers, e.g. "
            f"{{'sgd': optax.sgd(0.1), 'adam': optax.adam(0.1)}}, not {optimizers!r}."
        )
    bad = [k for k, v in optimizers.items() if not isinstance(k, str) or not k.strip() or v is None]
    if bad:
        raise TypeError(f"Each optimizer needs a name (a non-empty str) and an optimizer, not {bad[0]!r}.")
    if len(optimizers) > len(LINE_COLORS):
        raise ValueError(
            f"At most {len(LINE_COLORS)} optimizers are compared at once (one colour each), not {len(optimizers)}."
        )
    cols = (columns,) if isinstance(columns, str) else tuple(columns)
    wrong = [c for c in cols if c not in COLUMNS]
    if wrong or not cols:
        raise ValueError(f"columns= takes some of {list(COLUMNS)}, not {wrong[0] if wrong else columns!r}.")
    return dict(optimizers), cols


class OptimizerComparison(Playing, Lifetime, PageIntents, TextForm, ipywidgets.VBox):
    """Several optimizers side by side on one model: one Play, their loss lines overlaid, their
    updates per leaf aligned.

    >>> OptimizerComparison(loss_fn, params, {"x": X, "y": Y},
    ...                     {"sgd": optax.sgd(0.1), "momentum": optax.sgd(0.1, momentum=0.9),
    ...                      "adam": optax.adam(0.1)})

    `loss_fn(params, **inputs)`, `params`, `inputs`, `static=`, `time_budget=`, `engine=` and
    `device=` are as `StepExplorer`'s; `optimizers` names each optimizer (an optax
    GradientTransformation, or ``lambda lr: ...`` with `learning_rate`, one rate or a dict of
    each one's: ``{"sgd": 0.1, "adam": 0.05}``), at most six. Every
    optimizer starts from the same params with a fresh state and takes its own steps: Step,
    Step ×10, Reset and Play / Pause (`step(n)`, `reset()`, `play()`, `pause()`) drive all of
    them at once. Each one's numbers are those of its own hand-written optax loop, bit for bit.

    The loss chart has one line per optimizer, one colour each, and beside it (never over a line)
    a table of each one's colour, name, step and loss now, and under it a learning-rate slider
    for each optimizer whose rate slides (``lambda lr: ...`` or ``optax.inject_hyperparams``):
    moving it runs that optimizer again from the start with that rate, as many steps as it had
    taken (`set_rate`); "log-scale loss" puts the chart on a log scale. The diagram puts every
    optimizer's `columns` side by side, rows aligned by path: some of "params", "grads", "update"
    (what the optimizer adds) and "updated" (default: update alone), headed ``name column``.

    `histories`, `history_dict()` and `to_dataframe()` give each optimizer's record (losses,
    learning rates, every parameter's and moment's trajectory), `params`, `opt_states` and
    `results` where each stands. A loss that raises, or a step that diverges, is said in the
    status line naming the optimizer; each keeps its last good step.
    """

    def __init__(
        self,
        loss_fn: Callable,
        params: Any,
        inputs: dict | None = None,
        optimizers: Mapping[str, Any] | None = None,
        learning_rate: float | Mapping[str, float] | None = None,
        *,
        columns: Iterable[str] = ("update",),
        static: Iterable[str] = (),
        time_budget: float | None = 30.0,
        engine: Engine | None = None,
        device: Any = None,
        **kwargs: Any,
    ):
        refuse_unknown_widget_keywords(self, kwargs)
        runs, self.columns = _check(optimizers, columns)
        super().__init__(**kwargs)
        self.add_class("pytree-lab-comparison")
        self.lock = threading.RLock()  # one change at a time, for every session
        self.sessions: dict[str, ExplorerSession] = {}
        rates = learning_rate if isinstance(learning_rate, Mapping) else dict.fromkeys(runs, learning_rate)
        for name, opt in runs.items():
            try:
                session = ExplorerSession(
                    loss_fn, params, inputs, rates.get(name), optimizer=opt, static=static,
                    time_budget=time_budget, engine=engine, device=device,
                )  # fmt: skip
            except OptimizerError as err:  # which of the optimizers it is
                raise OptimizerError(f"{name!r}: {err}") from None
            session.lock = self.lock
            self.sessions[name] = session
        self.log_scale_box = ipywidgets.Checkbox(description="log-scale loss", indent=False, layout={"width": "auto"})
        step_controls(self, self._clicked, TOOLTIPS, (self.log_scale_box,))
        self.loss_chart = LossLinesChart(list(self.sessions), title="Loss at each step, per optimizer")
        self.log_scale_box.observe(lambda change: self.loss_chart.set_log(change["new"]), "value")
        self.table = ipywidgets.HTML().add_class("ptl-compare-table")  # the chart's legend too
        module, self._following = SliderModule(), False
        self.rate_sliders = {  # each sliding rate's slider: a move runs that optimizer again (set_rate)
            name: Slider(s.learning_rate, description=f"{name} rate", path=name, module=module,
                         **dict(zip(("min", "max", "step"), rate_range(s.learning_rate))))
            for name, s in self.sessions.items() if s.rate_slides
        }  # fmt: skip
        for name, slider in self.rate_sliders.items():
            slider.observe(
                lambda c, n=name: None if self._following else self._clicked(self.set_rate, n, c["new"]), "value"
            )
        fixed = [n for n, s in self.sessions.items() if not s.rate_slides]
        note = ipywidgets.HTML(
            f"{html.escape(', '.join(fixed))}: the learning rate is fixed inside the optimizer "
            "(lambda lr: … slides it)."
        )
        side = ipywidgets.VBox([self.table, *self.rate_sliders.values(), *([note] if fixed else [])])
        self.diagram = PytreeDiagram()
        # each optimizer's views of the registry drawn in a comparison (views.py), under its name
        self.views = {name: ViewSet(s, "comparison") for name, s in self.sessions.items()}
        each = [ipywidgets.VBox([ipywidgets.Label(n), *v.parts()]) for n, v in self.views.items() if v]
        self.debug = DebugArea()
        self.player = Player(self, self.play_control)
        row = ipywidgets.HBox([self.loss_chart.figure, side], layout={"flex_flow": "row wrap", "align_items": "center"})
        self.children = [self.status, self.controls, row, self.diagram, *each, self.debug.widget]
        self._start_lifetime()
        self.recompute()

    # ------------------------------------------------------------------ where each optimizer stands
    params = property(lambda self: {n: s.params for n, s in self.sessions.items()}, doc="Each optimizer's params now.")
    opt_states = property(
        lambda self: {n: s.opt_state for n, s in self.sessions.items()},
        doc="Each optimizer's state, the one its next step starts from.",
    )
    results = property(
        lambda self: {n: s.last_good for n, s in self.sessions.items()},
        doc="Each optimizer's step from where it stands (None until one works).",
    )

    @property
    def result(self) -> StepResult | None:
        """The step Play checks before stepping on: one whose next loss is NaN or Inf, else the first's."""
        found = [r for r in self.results.values() if r is not None]
        return next((r for r in found if not math.isfinite(r.loss_after)), found[0] if found else None)

    @property
    def histories(self) -> dict[str, record.History]:
        """Each optimizer's losses at every point visited (`record.History`: `.steps`, `.learning_rates`)."""
        return {n: record.History(s.history, s.rates) for n, s in self.sessions.items()}

    def history_dict(self) -> dict[str, dict[str, list]]:
        """Each optimizer's record as plain lists (StepExplorer.history_dict's, trajectories included)."""
        return {n: record.history_dict(s) for n, s in self.sessions.items()}

    def to_dataframe(self) -> Any:
        """Every optimizer's record as one pandas DataFrame indexed by step, its columns
        (optimizer, column): ("adam", "loss"), ("adam", "params['w'][0]"), ... Needs pandas."""
        frames = {n: record.to_dataframe(s) for n, s in self.sessions.items()}
        import pandas as pd

        return pd.concat(frames, axis=1)

    # ------------------------------------------------------------------ changes
    def recompute(self, said: list[tuple[str, str]] | None = None) -> dict[str, StepResult | None]:
        """Each optimizer's step from where it stands, every view drawn; returns `results`.
        (`said`: messages of the steps before, (kind, text), shown with it.)"""
        with self.lock:
            if self.closed:
                return self.results
            said = list(said or [])
            for name, s in self.sessions.items():
                computed = s.compute()
                if computed.result is None:
                    said.append(("error", f"{name}: {s.failure(computed.failure)}"))
                else:
                    said += [("info", f"{name}: {note}") for note in s.commit(computed)]
            self._draw(said)
            return self.results

    def step(self, n: int = 1) -> dict[str, StepResult | None] | None:
        """`n` real steps of every optimizer (each one compiled loop), then every view drawn once.
        Returns `results`, or None when an optimizer's step failed (the message names it)."""
        with self.lock:
            next(iter(self.sessions.values())).check_steps(n)  # (the same check for every session)
            if self.closed:
                return None
            failed, said = [], []
            for name, s in self.sessions.items():
                if not s.good_now and s.compute().result is None:
                    failed.append(name)  # said by recompute, which tries it again
                    continue
                failure = s.run(n)  # the session's guard: a loss that raises is a sentence here
                if failure:
                    failed.append(name)
                    said.append(("error", f"{name}: {failure}"))
            results = self.recompute(said)
            return None if failed or any(r is None for r in results.values()) else results

    def set_rate(self, name: str, rate: float) -> dict[str, StepResult | None]:
        """`name`'s learning rate is `rate` (its slider follows): that optimizer runs again from the
        starting params with a fresh state, as many steps as it had taken (Reset goes back to it)."""
        with self.lock:
            s, slider = self.sessions[name], self.rate_sliders.get(name)
            if slider is None:
                raise ValueError(f"{name!r} keeps its learning rate inside it: give lambda lr: ... to slide it.")
            n, s.learning_rate = s.step_number, float(rate)
            self._following, slider.value = True, s.learning_rate
            self._following = False
            failure, computed = s.reset(), s.compute()
            if not failure and n and computed.result is not None:
                s.commit(computed)  # the starting point, then the run from it
                failure = s.run(n)
            return self.recompute([("error", f"{name}: {failure}")] if failure else [])

    def reset(self) -> dict[str, StepResult | None]:
        """Every optimizer back to the starting params with a fresh state; the histories start again."""
        with self.lock:
            if self.playing:
                self.player.stop("Paused: reset.")
            for s in self.sessions.values():
                failure = s.reset()
                if failure:
                    s.notes.append(failure)
            return self.recompute()

    # ------------------------------------------------------------------ play (play.py's Playing)
    def _sessions(self) -> list[ExplorerSession]:
        return list(self.sessions.values())

    # ------------------------------------------------------------------ drawing
    def _note(self, text: str, kind: str = "info") -> None:
        """The player's alert (Play stopped before a step into NaN), with the optimizers it names."""
        ahead = [n for n, r in self.results.items() if r is not None and not math.isfinite(r.loss_after)]
        super()._note(f"{', '.join(ahead)}: {text}" if ahead and kind == "error" else text, kind)

    def _draw(self, said: list[tuple[str, str]]) -> None:
        trees = {}
        for name, s in self.sessions.items():
            r = s.last_good
            if r is not None:
                trees.update({f"{name} {col}": getattr(r, COLUMNS[col], None) for col in self.columns})
                self.views[name].show(r)
        first = next(iter(self.sessions.values()))
        self.diagram.set_trees(trees or {"params": first.params_tree}, order=first.param_summary)
        self.diagram.caption = (
            f"computed in the kernel by {first.engine.name}, each optimizer from its own params and state: "
            "value_and_grad, then opt.update(grads, state, params) and optax.apply_updates"
        )
        self.loss_chart.show([s.history for s in self.sessions.values()])
        rows = "".join(
            f'<tr><td><span class="ptl-compare-swatch" style="{SWATCH}background:{color}"></span>'
            f" {html.escape(name)}</td>"
            f'<td class="ptl-compare-step">{s.step_number}</td>'
            f'<td class="ptl-compare-loss">{html.escape(fmt_number(s.history[-1]) if s.history else "–")}</td></tr>'
            for (name, s), color in zip(self.sessions.items(), LINE_COLORS)
        )
        self.table.value = (
            '<table class="ptl-compare" aria-label="each optimizer\'s line, step and loss now" '
            'style="border-spacing:12px 2px">'
            f"<thead><tr><th>optimizer</th><th>step</th><th>loss</th></tr></thead><tbody>{rows}</tbody></table>"
        )
        errors = [t for k, t in said if k == "error"]
        Playing._note(self, " ".join(errors or [t for _, t in said]), "error" if errors else "info")
        self.control_step_changed()

    def text(self) -> str:
        """The comparison as text: each optimizer's step and loss, then the aligned trees."""
        lines = [
            f"{name}: step {s.step_number}, loss {fmt_number(s.history[-1]) if s.history else '–'}"
            for name, s in self.sessions.items()
        ]
        each = "".join(f"\n\n{name}: {v.text()}" for name, v in self.views.items() if v.text())
        return "Optimizer comparison\n" + "\n".join(lines) + "\n\n" + self.diagram.text() + each

    def close(self) -> None:
        """Close the comparison and every widget it built; the numbers (params, histories) stay."""
        with self.__dict__.get("lock") or contextlib.nullcontext():
            self._closed = True
            if "player" in self.__dict__:
                self.player.stop()
                self.loss_chart.close()
            self._close_widgets()
            for s in [*self.__dict__.get("sessions", {}).values(), *self.__dict__.get("views", {}).values()]:
                s.close()
            super().close()


SWATCH = "display:inline-block;width:22px;height:4px;vertical-align:middle;margin-right:4px;"


TOOLTIPS = (  # of Step, Step ×10 and Reset
    "every optimizer takes one step",
    "every optimizer takes ten steps (one compiled loop each)",
    "every optimizer back to the starting params, with a fresh state",
)
