"""`StepExplorer`: the lesson's interactive figure, for the lesson's model or an instructor's.

Sliders for the parameters, the learning rate and small inputs. Every move runs one compiled
`value_and_grad` + update step in the kernel and updates every view from its result: the
aligned diagram (params | grads | updated), the before/after bars, the worked calculation and
the loss line. One direction only: sliders -> session -> schedule -> views. No view computes
numbers.

The parts, each with one job:

    session.py     ExplorerSession: the state and its rules, without ipywidgets; compute() a step
    sliders.py     the slider plan (which elements slide, labels, ranges) and the bar plan
    messages.py    every "this is what went wrong" sentence
    prediction.py  ŷ, the residual and dL/dŷ inside the step
    optimizer.py   the optimizer's diagram columns and panels, and worked-calculation rows
    schedule.py    Schedule: every view timer (when slow views follow a drag)
    views.py       the View interface (show, select, text) and its registry
    lifetime.py    page-write guards, and closing with the page or when replaced
    batches.py     set_inputs with a new batch: another number of examples, int labels cast
    record.py      the run's record: history with step numbers and learning rates, exports
    compare.py     OptimizerComparison: one session per optimizer, one Play, loss lines overlaid
    play.py        Player (steps on the event loop, paced by the page) and play / pause / history
    playbar.py     PlayControl (Play / Pause, speed, step number) and the row of controls
    debug.py       the output area: print / jax.debug.print of steps run from the page, tracebacks
    layout.py      where the parts go: layout="compact" or "long"
    widget.py      StepExplorer, SliderPanel (its sliders) and PythonChanges (set_params, ...)

A slider move, from the slider's value to the bars: 6 calls inside pytree-lab (measured by
tests/test_layout_budgets.py, every pytree-lab frame on the stack when the bars are set):

    1. Slider.flush()                        slider.py: the page's newest move -> `value` (observers)
    2. StepExplorer._on_slider(label, ...)   widget.py: session.move (SliderPanel.take), one step
                                             from the page (playing stops, output captured)
    3. StepExplorer._show_step()             widget.py: session.compute() runs the compiled step
    4. Schedule.show(result)                 schedule.py: the fast views now, slow ones now or later
    5. ChartView.show(result)                views.py: before/after values of the bars' elements
    6. BeforeAfterChart.show(before, after)  chart.py: the bars' heights

The person's numbers are never changed (session.py), and a slider holds its value exactly until
that slider is moved (slider.py).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from .session import MAX_STEPS, SLOW_STEP_S, Computed, ExplorerSession
from .sliders import MAX_BARS, SMALL_INPUT

# the widget side, imported on first use: the session (and `import pytree_lab.explorer.session`)
# runs without ipywidgets
_WIDGET_SIDE = {"StepExplorer": "widget", "OptimizerComparison": "compare", "View": "views", "VIEWS": "views"}

if TYPE_CHECKING:  # pragma: no cover
    from .compare import OptimizerComparison as OptimizerComparison
    from .views import VIEWS as VIEWS, View as View
    from .widget import StepExplorer as StepExplorer


def __getattr__(name: str) -> Any:
    module = _WIDGET_SIDE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = globals()[name] = getattr(importlib.import_module(f".{module}", __name__), name)
    return value


__all__ = [
    "StepExplorer",
    "OptimizerComparison",
    "ExplorerSession",
    "Computed",
    "View",
    "VIEWS",
    "MAX_STEPS",
    "SLOW_STEP_S",
    "MAX_BARS",
]
__all__ += ["SMALL_INPUT"]
