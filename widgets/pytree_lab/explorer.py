"""`StepExplorer`: the lesson's interactive figure, for the lesson's model or an instructor's.

Sliders for the parameters, the learning rate and small inputs. Every move runs one compiled
`value_and_grad` + `tree.map` step in the kernel and updates every view from its result: the
aligned diagram (params | grads | updated), the before/after bars and the worked calculation.
One direction only: sliders -> step -> result -> views. No view computes numbers.

The person's numbers are never changed: trees are copied on the way in (never aliased), a slider
holds its value exactly until that slider is moved, the loss gets its own copies, and the
learning rate keeps each leaf's dtype.
"""

from __future__ import annotations

import array
import asyncio
import contextlib
import dataclasses
import html
import logging
import functools
import math
import sys
import threading
import time
import weakref
from typing import Any, Callable, Iterable

import ipywidgets
import traitlets

from . import lesson
from ._budget import TimeBudgetExceeded, user_code_budget
from ._intent import PageIntents, refuse_page_writes
from ._text import TextForm
from .calculation import WorkedCalculation, fmt_number, fmt_value
from .chart import BeforeAfterChart, LossHistoryChart
from .diagram import PytreeDiagram
from .engine import Engine, get_engine
from .slider import Slider, SliderModule, short_label, span
from .step import CompiledStep, StepResult, fresh, pin_dtypes
from .training import OptimizerError, StateView, TrainingStep, _is_transformation, adam_hyperparameters, decompose_state
from .trees import Leaf, TreeError, TreeSummary, describe, path_label

__all__ = ["StepExplorer"]

_fmt = fmt_number
# the sentences that promise the last good step, dropped when there is none
_NO_LAST_GOOD = __import__("re").compile(r"(?:;\s*|\s*\b)[Tt]he last good step (?:stays on screen|is still shown)\.")
SLOW_STEP_S = 5.0  # a step this slow, of a model of many leaves, is said with how to make it fast
MAX_STEPS = 1_000_000  # step(n) at most: history keeps every point's loss
MAX_BARS = 24  # parameter elements drawn as before/after bars
SMALL_INPUT = 4  # a 1-D float input of at most this many values gets sliders by default


def short_error(err: BaseException, limit: int = 400) -> str:
    """`Type: message` in one or two lines; a traceback embedded in the message is cut to its last line.
    A SystemError that only wraps another (a C extension returning with an exception set) says
    the exception it wraps."""
    while isinstance(err, SystemError) and err.__cause__ is not None:
        err = err.__cause__
    text = error_text(err).strip()
    if "Traceback (most recent call last)" in text:
        lines = [ln for ln in text.splitlines() if ln.strip()]
        text = lines[-1].strip() if lines else text
        return text[:limit]
    name = error_name(err)
    text = f"{name}: {text}" if text else name
    return text if len(text) <= limit else text[: limit - 1] + "…"


def error_name(err: BaseException) -> str:
    """The exception's class name (a class whose name cannot be read says so)."""
    try:
        name = type(err).__name__
        return name if isinstance(name, str) else "an exception"
    except BaseException:  # noqa: BLE001 - a metaclass can make even this raise
        return "an exception"


def error_text(err: BaseException) -> str:
    """`str(err)`; when the exception's own __str__ raises (or returns no str) a sentence saying
    so: the message is then said in the widget, never a second error."""
    try:
        text = str(err)
        if isinstance(text, str):
            return text
    except BaseException:  # noqa: BLE001 - the user's __str__ can raise anything
        pass
    return "(its message could not be shown: the exception's __str__ failed)"


def _too_deep(name: str, tree: Any, err: BaseException) -> TreeError | None:
    """A TreeError naming the depth when `err` is JAX's flatten giving up at the recursion limit."""
    chain, seen = err, set()
    while chain is not None and id(chain) not in seen and not isinstance(chain, RecursionError):
        seen.add(id(chain))
        chain = chain.__cause__ or chain.__context__
    if not isinstance(chain, RecursionError):
        return None
    try:
        depth = max(node.depth for node in describe(tree, name, values=False).root.walk())
    except BaseException:  # noqa: BLE001 - the message can do without the number
        depth = None
    levels = f"{depth} levels deep" if depth is not None else "nested too deeply"
    return TreeError(f"{name} is {levels}: more than JAX's tree functions can flatten (they stop at Python's "
                     f"recursion limit, {sys.getrecursionlimit()}). Nest it less deeply.")


def _pinned(name: str, tree: Any, eng: Engine) -> Any:
    """`pin_dtypes(tree)`; a tree too deep for JAX's flatten is refused with its depth."""
    try:
        return pin_dtypes(tree, eng)
    except (RecursionError, SystemError) as err:
        deep = _too_deep(name, tree, err)
        if deep is None:
            raise
        raise deep from err


def _one_at_a_time(method: Callable) -> Callable:
    """JupyterLab hands widget messages to a kernel subshell, a thread of its own: a slider's
    step can run while a cell calls `ex.step(10)`. Each explorer runs one change at a time."""

    @functools.wraps(method)
    def locked(self, *args, **kwargs):
        lock = self.__dict__.get("_lock")
        if lock is None:  # still being built (or a construction that failed, being closed)
            return method(self, *args, **kwargs)
        with lock:
            return method(self, *args, **kwargs)

    return locked


@contextlib.contextmanager
def _quiet_callbacks():
    """A failing `jax.debug.callback` inside a user's loss is reported in the widget, not logged too."""
    logger = logging.getLogger("jax._src.debugging")
    old = logger.disabled
    logger.disabled = True
    try:
        yield
    finally:
        logger.disabled = old


def _index_text(shape: tuple, position: int) -> str:
    idx, rem = [], position
    for d in reversed(shape):
        idx.append(rem % d)
        rem //= d
    return "[" + ",".join(str(i) for i in reversed(idx)) + "]"


class _Element:
    """One scalar element of one leaf: which tree, where it lives, what it is called."""

    __slots__ = ("tree", "leaf", "flat_index", "position", "label", "path")

    def __init__(self, tree: str, leaf: Leaf, position: int):
        self.tree, self.leaf, self.flat_index, self.position = tree, leaf, leaf.index, position
        suffix = _index_text(leaf.shape, position) if leaf.shape else ""
        self.label = (path_label(leaf.path) or tree) + suffix
        self.path = f"{tree}{leaf.path}{suffix}"  # the full path: a slider's title, a bar's tooltip


def _not_numbers(inputs: TreeSummary) -> str:
    """What to say of an input leaf JAX cannot take (a string, an object), or ""."""
    bad = [leaf for leaf in inputs.leaves if leaf.dtype in ("str", "object")]
    if not bad:
        return ""
    leaf = bad[0]
    return (f"inputs{leaf.path} is {leaf.type_label}, not a number: inputs are arrays (floats, int labels, bool "
            "masks); pass other values as static=[...] inputs.")


def _walk_leaves(summary: TreeSummary) -> Iterable[Leaf]:
    """Leaves in display order (as the person wrote the tree)."""
    for node in summary.root.walk():
        if node.leaf is not None:
            yield node.leaf


def _elements(summary: TreeSummary, tree: str, limit: int, keep=lambda leaf: True) -> list[_Element]:
    """Float elements of a tree in display order, at most `limit` (labels made only for those)."""
    out: list[_Element] = []
    for leaf in _walk_leaves(summary):
        if not leaf.differentiable or not keep(leaf):
            continue
        for pos in range(leaf.size):
            if len(out) >= limit:
                return out
            out.append(_Element(tree, leaf, pos))
    return out


def _small_input(leaf: Leaf) -> bool:
    return len(leaf.shape) == 0 or (len(leaf.shape) == 1 and leaf.size <= SMALL_INPUT)


def _type_hint(params: Any, leaf: Leaf, obj: Any) -> str:
    """Why a params leaf cannot be differentiated, in the terms of the library it came from."""
    import dataclasses

    name = f"params{leaf.path}"
    if callable(obj) and not hasattr(obj, "shape"):
        return (f"{name} is a function ({getattr(obj, '__name__', type(obj).__name__)}), not a parameter. "
                "An equinox module (eqx.nn.MLP, ...) keeps functions and sizes beside its arrays: split it with "
                "`params, static = eqx.partition(model, eqx.is_inexact_array)`, give the explorer `params`, and "
                "rebuild the model in the loss with `eqx.combine(params, static)`.")
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return (f"{name} is a {type(obj).__name__} dataclass that JAX does not know how to open, so it is one "
                "opaque leaf. Register it: decorate the class with @jax.tree_util.register_dataclass "
                "(or use a dict, a NamedTuple or an equinox Module).")
    origin = type(params).__module__.split(".")[0] if params is not None else ""
    if origin == "equinox" or type(obj).__module__.split(".")[0] == "equinox":
        return (f"{name} is {leaf.type_label}: an equinox module holds non-array fields. Split it with "
                "`params, static = eqx.partition(model, eqx.is_inexact_array)` and combine in the loss.")
    return (f"{name} is {leaf.type_label}, not a floating-point parameter: JAX cannot differentiate it. "
            "Keep metadata such as names or counts outside the params tree (or pass them as inputs, "
            "marked static=[...]).")


def _page_intents_of(widget: ipywidgets.Widget) -> frozenset:
    """What the page may write on a stock part the explorer builds: a checkbox's tick and a bqplot
    mark's click selection or hovered point; nothing else (children, text, bar heights, scales,
    labels, layouts and styles are the kernel's)."""
    import bqplot

    if isinstance(widget, ipywidgets.Checkbox):
        return frozenset({"value"})
    if isinstance(widget, bqplot.Mark):
        return frozenset({"selected", "hovered_point"})
    return frozenset()


def _guard(widget: ipywidgets.Widget) -> ipywidgets.Widget:
    return refuse_page_writes(widget, _page_intents_of(widget))


class StepExplorer(PageIntents, TextForm, ipywidgets.VBox):
    """Move a slider, watch one gradient step: loss, gradient tree, updated parameters.

    `loss_fn(params, **inputs)` is any scalar loss; with no arguments the explorer is the
    lesson's model (x = [2, 1], weight = [1, -1], bias = 0, target = 3, squared loss).

    What slides: every parameter element, the learning rate, and small float inputs (scalars
    and 1-D inputs of at most 4 values). A data batch (more values or 2+ dimensions) and
    non-float inputs (int class labels, bool masks) are shown as data, never as sliders.
    `sliders=[...]` chooses exactly (keystr paths such as ``"params['w']"`` or ``"['x']"``,
    or slider labels such as ``"weight[0]"`` and ``"learning_rate"``); `max_sliders` caps the
    total. `static=[...]` names inputs (Python ints, bools, strings) passed as they are, not
    traced: a loss may use them in Python `if` statements.

    `prediction_fn(params, **inputs_without_target)` adds the prediction (per example for a
    batch), the residual when prediction and target have the same shape, and dL/dŷ when
    `pointwise_loss(prediction, target)` adds up (sum or mean) to the loss. `target=` names
    the target input.

    `optimizer=` puts an optimizer in the step: an optax GradientTransformation runs inside the
    compiled step (``updates, state = opt.update(grads, state, params)``, then
    ``optax.apply_updates``), so `updated` is that optimizer's step; its moment trees (Adam's
    mu and nu, momentum's trace) are aligned with params row by row, and its counts and
    hyperparameters are shown apart as optimizer state. The learning-rate slider appears only
    where it changes the step: no optimizer, ``optimizer=lambda lr: optax.adam(lr)``, or
    ``optax.inject_hyperparams(optax.adam)(learning_rate=...)``; a fixed ``optax.adam(0.1)``
    keeps its rate. In the Lite engine (no JAX) use `pytree_lab.compat.optax` (sgd, momentum,
    adam with optax's rules).

    `step(n)` takes n real steps as one compiled loop and moves the explorer there (sliders
    follow; `params`, `opt_state` and `history` say where it is); `reset()` goes back to the
    construction-time params, inputs and learning rate and a fresh optimizer state. The buttons Step, Step ×10 and Reset
    do the same; the line chart beside the bars is `history`, the loss at every point visited
    (a slider move moves the current point). `fixed_range=True` (or the checkbox) keeps the bars'
    y range across steps so their motion shows.

    `set_params`, `set_inputs` and `set_loss` change the starting point or the loss from Python
    (`set_params` is also how an optimizer loop shows its new parameters). Bad input of any kind
    ends in a message inside the widget, naming the tree path where there is one; the last good
    step stays on screen until the input is fixed. Without a widget front end (a static HTML
    export) the explorer shows as text: the three trees and the worked calculation.
    """

    # The page may write one trait: `_view_count`, which the widget front end keeps (views shown
    # in the page). Every other synced trait is the kernel's (children, layout, classes).
    _page_intents = frozenset({"_view_count"})
    # Explorers alive in this kernel (weakly held: this set never keeps one alive).
    _live: "weakref.WeakSet[StepExplorer]" = weakref.WeakSet()

    selected_path = traitlets.Unicode("")
    result = traitlets.Any(None, allow_none=True)

    def __init__(
        self,
        loss_fn: Callable | None = None,
        params: Any = None,
        inputs: dict | None = None,
        learning_rate: float | None = None,
        *,
        optimizer: Any = None,
        fixed_range: bool = False,
        prediction_fn: Callable | None = None,
        target: str = "target",
        pointwise_loss: Callable | None = None,
        sliders: Iterable[str] | None = None,
        max_sliders: int = 24,
        static: Iterable[str] = (),
        extra: Any = None,
        time_budget: float | None = 30.0,
        engine: Engine | None = None,
        **kwargs: Any,
    ):
        super().__init__(**kwargs)
        self._lock = threading.RLock()
        self.add_class("pytree-lab-explorer")
        # seconds the user's own code (loss, prediction_fn) may run in one step before it is
        # stopped with a message (an endless loop); JAX's compile time never counts. None: no limit.
        self.time_budget = time_budget
        self.engine = eng = engine or get_engine()
        if loss_fn is None:
            loss_fn = lesson.lesson_loss
            prediction_fn = prediction_fn or lesson.predict
            pointwise_loss = pointwise_loss or lesson.squared_error
            params = lesson.lesson_params() if params is None else params
            inputs = lesson.lesson_inputs() if inputs is None else inputs
        if params is None:
            raise TypeError("StepExplorer needs `params` (a pytree) when you give your own `loss_fn`.")
        if not isinstance(max_sliders, int) or max_sliders < 0:
            raise ValueError(f"max_sliders must be a whole number of 0 or more, not {max_sliders!r}.")
        self.loss_fn = loss_fn
        self.prediction_fn = prediction_fn
        self.target_key = target
        self.pointwise_loss = pointwise_loss or lesson.squared_error
        inputs = dict(inputs or {})
        static = [static] if isinstance(static, str) else list(static)
        unknown = [k for k in static if k not in inputs]
        if unknown:
            raise ValueError(f"static= names {unknown[0]!r}, which is not one of the inputs {list(inputs)}.")
        self._static = {k: inputs.pop(k) for k in static}
        self._input_names = [str(k) for k in inputs] + [str(k) for k in self._static]
        self._notes: list[str] = []
        self._said_staged: Any = None  # the op-by-op program last told about (see recompute)
        self._said_compile_error: BaseException | None = None  # the failed background compile told about
        self._said_slow = False  # a slow step of a many-leaf model was explained
        self._too_slow = ""  # the message of a step stopped as too slow (not a loop); "" when none
        self._extra: Any = extra

        # Our own copies of the trees (never the caller's arrays), in the dtypes JAX gives them.
        self._params = _pinned("params", params, eng)
        self._inputs = _pinned("inputs", inputs, eng)
        self._param_leaves, self._param_def = eng.tree_flatten(self._params)
        self._input_leaves, self._input_def = eng.tree_flatten(self._inputs)
        self._param_leaves = [self._frozen(x) for x in self._param_leaves]
        self._input_leaves = [self._frozen(x) for x in self._input_leaves]
        self._param_objects = eng.tree_leaves(params)
        # Summaries of the trees as written: JAX returns dicts with sorted keys, but sliders,
        # bars and rows follow the person's order (flatten indices are the same either way).
        self._param_summary = describe(params, "params", values=False)
        self._input_summary = describe(inputs, "inputs", values=False)
        self._input_data = describe(inputs, "inputs")

        self._holding = False  # set while several sliders change at once: one recompute after
        # ---- the optimizer (None: the lesson's p − η·g) and the trajectory
        self.optimizer = optimizer
        self._trainer: TrainingStep | None = None
        self._opt_state: Any = None
        self._history = array.array("d")  # 8 bytes a point: a million steps are 8 MB
        self._new_point = True  # the next good step is a newly visited point (else the current one moved)
        self._good_now = False  # the last recompute succeeded (a step can start from here)
        self._initial_leaves = list(self._param_leaves)
        # what Reset goes back to: the inputs (and static inputs) as constructed
        self._initial_input_leaves = list(self._input_leaves)
        self._initial_static = dict(self._static)
        self._initial_input_data = self._input_data
        learning_rate = self._start_optimizer(learning_rate)
        self._step = self._compile(loss_fn)
        self._last_good: StepResult | None = None
        self._closed = False

        # ---- views
        self.status = ipywidgets.HTML(layout={"width": "100%"})
        self.status.add_class("pytree-lab-status")
        self.diagram = PytreeDiagram()
        self.diagram.set_trees({"params": self._params}, order=self._param_summary)
        if extra is not None:
            self.show_extra(extra)
        self.diagram.caption = f"computed in the kernel by {eng.name}: " + (
            "value_and_grad, then tree.map(p − η·g)" if optimizer is None else
            "value_and_grad, then opt.update(grads, state, params) and optax.apply_updates; "
            "moment columns and the optimizer state panel are the state after this step")
        self._chart_elements = _elements(self._param_summary, "params", MAX_BARS)
        self.chart_view = BeforeAfterChart(
            [e.label for e in self._chart_elements],
            [e.leaf.path for e in self._chart_elements],
            title="A gradient tree matches parameter leaves",
            paths=[e.path for e in self._chart_elements],
        )
        self.chart = self.chart_view.figure
        self.chart_view.fixed_range = bool(fixed_range)
        self.history_view = LossHistoryChart()
        self.history_chart = self.history_view.figure
        self.step_button = ipywidgets.Button(description="Step", tooltip="take one step: move to updated")
        self.step10_button = ipywidgets.Button(description="Step ×10", tooltip="take ten steps (one compiled loop)")
        self.reset_button = ipywidgets.Button(description="Reset", tooltip="back to the starting params, inputs and learning rate, and a fresh optimizer state")
        self.fixed_range_box = ipywidgets.Checkbox(value=bool(fixed_range), description="fix the bars' y range",
                                                   indent=False, layout={"width": "auto"})
        for button in (self.step_button, self.step10_button, self.reset_button):
            button.add_class("pytree-lab-step-button")
        self.step_button.on_click(lambda _: self.step(1))
        self.step10_button.on_click(lambda _: self.step(10))
        self.reset_button.on_click(lambda _: self.reset())
        self.fixed_range_box.observe(self._fixed_range_changed, "value")
        self.controls = ipywidgets.HBox(
            [self.step_button, self.step10_button, self.reset_button, self.fixed_range_box],
            layout={"flex_flow": "row wrap", "align_items": "center"},
        )
        self.controls.add_class("pytree-lab-controls")
        self.calculation = WorkedCalculation(eng)
        if optimizer is not None:
            self.calculation.optimizer_rows = self._optimizer_rows
        self.data_view = ipywidgets.HTML(layout={"width": "100%"})
        self.data_view.add_class("pytree-lab-data")
        self.sliders: dict[str, Slider] = {}
        self._input_sliders: list[tuple[_Element, Slider]] = []
        self._param_sliders: list[tuple[_Element, Slider]] = []
        self._lr = float(learning_rate)
        self._build_sliders(learning_rate, sliders, max_sliders)
        self._show_data()

        slider_box = ipywidgets.VBox(list(self.sliders.values()), layout={"min_width": "330px"})
        self.children = [
            self.status,
            self.controls,
            ipywidgets.HBox([slider_box, self.chart, self.history_chart],
                            layout={"flex_flow": "row wrap", "align_items": "center"}),
            self.chart_view.table,  # the bars as a table: their text alternative and keyboard path
            self.data_view,
            self.diagram,
            self.calculation,
        ]

        # ---- the page writes intents only: every widget built here refuses page writes of
        # kernel-owned state (children, text, bar heights, scales, labels); close() closes them all
        self._built = _descendants(self)
        for widget in self._built:
            _guard(widget)
        self.history_view.on_new_widget = self._adopt

        # ---- lifetime: a replaced explorer (its cell run again) is closed and can be collected
        self._had_views = False
        self._retire_replaced()
        StepExplorer._live.add(self)
        self.observe(self._views_changed, "_view_count")
        self._view_count = 0  # the front end now counts this explorer's views
        self._watch_comm()

        # ---- links: one selection everywhere
        traitlets.link((self, "selected_path"), (self.diagram, "selected_path"))
        self.chart_view.on_pick(self._pick)
        for slider in self.sliders.values():
            slider.observe(self._on_slider, "value")
        self.recompute()

    # ------------------------------------------------------------------ our copies
    def _frozen(self, x: Any) -> Any:
        """A leaf as the explorer stores it: immutable, never the caller's object."""
        import numpy as np

        if isinstance(x, np.ndarray):
            if self.engine.is_lite:
                x.setflags(write=False)  # pin_dtypes made this copy; a loss cannot write into it
                return x
            return self.engine.numpy.asarray(x)
        return x

    def _compile(self, loss_fn: Callable, with_extras: bool = True) -> Callable:
        extras = self._extras if self.prediction_fn is not None and with_extras else None
        if self.optimizer is None:
            return CompiledStep(loss_fn, extras_fn=extras, engine=self.engine, static=self._static)
        trainer = TrainingStep(loss_fn, self.optimizer, extras_fn=extras, engine=self.engine, static=self._static)
        trainer.init(self._params, self._lr)  # finds where the state keeps its learning rate
        return _OptimizerStep(self, trainer)

    # ------------------------------------------------------------------ sliders
    def _build_sliders(self, learning_rate: float, chosen: Iterable[str] | None, max_sliders: int) -> None:
        import numpy as np

        if chosen is None:
            inputs = _elements(self._input_summary, "inputs", max_sliders, _small_input)
            params = _elements(self._param_summary, "params", max_sliders)
            want_lr = True
        else:
            chosen = [chosen] if isinstance(chosen, str) else list(chosen)
            picked: dict[tuple, _Element] = {}
            for name in chosen:
                if not isinstance(name, str):
                    raise TypeError(f"sliders= takes paths or labels as strings, not {name!r}.")
                if name != "learning_rate":
                    for el in self._find(name, max_sliders + 1):
                        picked.setdefault((el.tree, el.flat_index, el.position), el)
            rank = {("inputs", leaf.index): k for k, leaf in enumerate(_walk_leaves(self._input_summary))}
            rank.update({("params", leaf.index): k for k, leaf in enumerate(_walk_leaves(self._param_summary))})
            ordered = sorted(picked.values(), key=lambda el: (rank[(el.tree, el.flat_index)], el.position))
            inputs = [el for el in ordered if el.tree == "inputs"]
            params = [el for el in ordered if el.tree == "params"]
            want_lr = "learning_rate" in chosen
        want_lr = want_lr and self._lr_adjustable  # never a slider that does nothing
        plan = [("inputs", el) for el in inputs] + ([("lr", None)] if want_lr else []) + [("params", el) for el in params]
        if len(plan) > max_sliders:
            if chosen is not None:
                self._notes.append(f"sliders= chose {len(plan)} values; max_sliders={max_sliders} caps the "
                                   f"total, so the last {len(plan) - max_sliders} have no slider.")
            plan = plan[:max_sliders]
        labels = [el.label for kind, el in plan if el is not None]
        clash = {lab for lab in labels if labels.count(lab) > 1} | ({"learning_rate"} & set(labels))

        module = SliderModule()  # the slider module, sent to the page once for all these sliders

        def make(el: _Element | None, value: float, lo: float, hi: float, step: float) -> Slider:
            if el is None:
                label, path = "learning_rate", "learning_rate"
            else:
                label = f"{el.tree}/{el.label}" if el.label in clash else el.label
                path = el.path
            s = Slider(value, description=short_label(label), path=path, min=lo, max=hi, step=step, module=module)
            self.sliders[label] = s
            return s

        for kind, el in plan:
            if kind == "lr":
                finite = math.isfinite(learning_rate)
                lr_max = max(0.5, 2 * learning_rate) if finite else 0.5
                # a negative rate given from Python is kept (and refused with a message), not clamped to 0
                lo = min(0.0, math.floor(learning_rate)) if finite else 0.0
                step = 0.005 if not finite or learning_rate >= 0.005 or learning_rate <= 0 else span(learning_rate)[2]
                make(None, float(learning_rate), lo, lr_max, step)
                continue
            leaves = self._input_leaves if kind == "inputs" else self._param_leaves
            v = float(np.asarray(leaves[el.flat_index]).ravel()[el.position])
            s = make(el, v, *span(v))
            (self._input_sliders if kind == "inputs" else self._param_sliders).append((el, s))

    def _find(self, name: str, limit: int) -> list[_Element]:
        """The float elements `sliders=[...]` means by `name`: a leaf (keystr path, with or without
        its tree, or its label) gives its elements, an element path or label gives one."""
        import numpy as np

        out: list[_Element] = []
        for tree, summary in (("inputs", self._input_summary), ("params", self._param_summary)):
            for leaf in _walk_leaves(summary):
                label, full = path_label(leaf.path) or tree, f"{tree}{leaf.path}"
                names = [full] + ([leaf.path, label] if leaf.path else [])
                if name in names:
                    if not leaf.differentiable:
                        raise ValueError(f"sliders= names {name!r}: {full} is {leaf.type_label}, data rather "
                                         "than a slider value (only floating-point values can slide).")
                    out.extend(_Element(tree, leaf, pos) for pos in range(min(leaf.size, limit)))
                    continue
                prefix = next((p for p in names if name.startswith(p + "[")), None)
                if prefix is None or not leaf.shape or not leaf.differentiable:
                    continue
                try:
                    index = [int(i) for i in name[len(prefix):].replace("][", ",").strip("[]").split(",")]
                    position = int(np.ravel_multi_index(tuple(index), leaf.shape))
                except (ValueError, TypeError):
                    continue
                out.append(_Element(tree, leaf, position))
        trees = {el.tree for el in out}
        if len(trees) > 1:
            raise ValueError(f"sliders= names {name!r}, which is in both params and inputs: write "
                             f"params[...] or inputs[...] with its keystr path.")
        if not out:
            examples = [el.path for el in _elements(self._param_summary, "params", 2)]
            examples += [el.path for el in _elements(self._input_summary, "inputs", 2)]
            raise ValueError(f"sliders= names {name!r}, which is no parameter or input value here. Use keystr "
                             f"paths or labels, e.g. {', '.join(map(repr, examples))}, or 'learning_rate'.")
        return out

    def _gather(self) -> tuple[Any, dict, float]:
        """Params, inputs and learning rate: the stored trees with the slider values written in."""
        import numpy as np

        def apply(leaves: list, pairs: list) -> list:
            out = list(leaves)
            copies: dict[int, Any] = {}
            for el, slider in pairs:
                i = el.flat_index
                if i not in copies:
                    copies[i] = np.array(out[i], copy=True)
                copies[i].reshape(-1)[el.position] = slider.value
            for i, a in copies.items():
                out[i] = self._frozen(a)
            return out

        eng = self.engine
        params = eng.tree_unflatten(self._param_def, apply(self._param_leaves, self._param_sliders))
        inputs = eng.tree_unflatten(self._input_def, apply(self._input_leaves, self._input_sliders))
        lr = self.sliders["learning_rate"].value if "learning_rate" in self.sliders else self._lr
        return params, inputs, float(lr)

    def _on_slider(self, change) -> None:
        slider = change["owner"]
        if slider.widened is not None:
            lo, hi = slider.widened
            slider.widened = None
            self._notes.append(f"{slider.path} = {_fmt(change['new'])} was outside its slider's range "
                               f"[{_fmt(lo)}, {_fmt(hi)}]: the value is kept and the range now reaches it.")
        if not self._holding:
            self._moving = True
            try:
                self.recompute()
            finally:
                self._moving = False

    # ------------------------------------------------------------------ new trees or loss from Python
    @_one_at_a_time
    def set_params(self, params: Any) -> StepResult | None:
        """Start from other parameter values (same structure, shapes and dtypes as before) and
        recompute: the sliders move to the new values. An optimizer loop calls this after each
        of its steps to show where it got to.

        A tree that does not fit (a missing, extra or renamed key, another shape or dtype, a
        string, int, bool or complex leaf, a None where the explorer's tree has a leaf) is refused
        with a message naming its path; the last good step stays on screen. A None where the
        explorer's tree has one too (JAX's empty subtree) is kept. Build a new StepExplorer for a
        new model.
        """
        return self._set_tree("params", params, self._params, self._param_leaves, self._param_sliders)

    @_one_at_a_time
    def set_inputs(self, inputs: dict) -> StepResult | None:
        """New input values (same keys, shapes and dtypes; int labels stay ints); refused with a
        message otherwise. Static inputs (static=[...]) may change value: the step recompiles."""
        inputs = dict(inputs)
        new_static = {k: inputs.pop(k) for k in list(inputs) if k in self._static}
        missing = [k for k in self._static if k not in new_static]
        if missing:
            return self._fail(f"The new inputs are missing {missing[0]!r} (a static input).")
        result = self._set_tree("inputs", inputs, self._inputs, self._input_leaves, self._input_sliders)
        if result is not None and any(new_static[k] is not self._static[k] for k in new_static):
            self._static = new_static
            self._step = self._compile(self.loss_fn)
            result = self.recompute()
        return result

    @_one_at_a_time
    def set_loss(self, loss_fn: Callable) -> StepResult | None:
        """Use another loss (called as `loss_fn(params, **inputs)`), compiled once.

        If it fails (raises, returns a non-scalar, NaN or Inf), the message says why and the last
        good step stays on screen; the new loss is kept, so fixing the sliders or giving a
        corrected loss recovers.
        """
        self.loss_fn = loss_fn
        self._step = self._compile(loss_fn)
        return self.recompute()

    def _set_tree(self, name: str, tree: Any, current: Any, leaves: list, sliders: list) -> StepResult | None:
        import numpy as np

        from .trees import diagnose

        try:
            summary = describe(tree, name, values=False)
            nones = [n.path for n in summary.root.walk() if n.kind == "none"]
            if nones:  # a None where the explorer's own tree has one too is the same empty subtree
                had = {n.path for n in describe(current, name, values=False).root.walk() if n.kind == "none"}
                nones = [path for path in nones if path not in had]
            if nones:
                return self._fail(f"{name}{nones[0]} is None, where a number was expected: JAX treats None as "
                                  "an empty subtree with no leaves, so it cannot be a parameter or an input.")
            if name == "params":
                bad = summary.non_differentiable
                if bad:
                    leaf = bad[0]
                    return self._fail(f"{name}{leaf.path} is {leaf.type_label}, not a floating-point value: "
                                      f"JAX cannot differentiate it. Keep names, counts and flags outside the {name} tree.")
            else:
                bad = _not_numbers(summary)
                if bad:
                    return self._fail(bad)
            pinned = pin_dtypes(tree, self.engine)
            found = diagnose(current, pinned, reference_name=f"the explorer's {name}",
                             candidate_name=f"the new {name}")
            if not found.ok:
                return self._fail(f"{found.message} The explorer keeps its {name} tree; "
                                  "build a new StepExplorer for another model.")
            new_leaves = self.engine.tree_leaves(pinned)
            for leaf, arr in zip(summary.leaves, new_leaves):
                values = np.asarray(arr)
                if values.dtype.kind == "f" and not np.all(np.isfinite(values)):
                    shown = ", ".join(str(v) for v in values.ravel()[~np.isfinite(values.ravel())][:3].tolist())
                    return self._fail(f"{name}{leaf.path} holds a non-finite value ({shown}): a slider cannot "
                                      "start there and every number computed from it would be NaN or Inf.")
        except Exception as err:  # a tree the engine cannot flatten: say so, keep the last good step
            deep = _too_deep(name, tree, err)
            return self._fail(str(deep) if deep is not None else f"The new {name} could not be used: {short_error(err)}")
        self._holding = True
        try:
            for i, leaf in enumerate(new_leaves):
                leaves[i] = self._frozen(leaf)
            for el, slider in sliders:
                slider.value = float(np.asarray(leaves[el.flat_index]).ravel()[el.position])
                slider.widened = None  # a new starting point, not a value pushed out of range
        finally:
            self._holding = False
        if name == "inputs":
            self._input_data = describe(tree, "inputs")
            self._show_data()
        return self.recompute()

    # ------------------------------------------------------------------ the step
    @_one_at_a_time
    def show_extra(self, extra: Any) -> None:
        """Show trees that are not aligned with params, e.g. `{"optimizer state": opt_state}`, in
        their own panel (a bare tree is titled "optimizer state"). Slider moves keep the panel;
        call again after your own optimizer step to show the new state."""
        self._extra = extra
        r = self._last_good
        if r is None:
            self.diagram.set_trees({"params": self._params}, extra=extra, order=self._param_summary)
            return
        trees, panels = self._trees_of(r)
        self.diagram.set_trees(trees, extra=panels, order=self._param_summary)

    # ------------------------------------------------------------------ optimizer, steps, history
    def _start_optimizer(self, learning_rate: float | None) -> float:
        """Check the optimizer, make its first state, and say where the learning rate lives."""
        given = learning_rate is not None
        if given:
            shape = getattr(learning_rate, "shape", ())
            if shape != () or isinstance(learning_rate, (bool, str, bytes)):
                what = f"an array of shape {tuple(shape)}" if shape != () else repr(learning_rate)
                raise ValueError(f"learning_rate is one number (a float, or an array of shape ()), not {what}.")
        lr = float(learning_rate) if given else lesson.LEARNING_RATE
        self._lr = lr
        self._lr_source = "argument"
        if self.optimizer is None:
            return lr
        # a wrong optimizer is refused here, as a missing params tree is (OptimizerError says why)
        trainer = TrainingStep(self.loss_fn, self.optimizer, engine=self.engine, static=self._static)
        self._opt_state = trainer.init(self._params, lr)
        self._lr_source = trainer.lr_source
        if trainer.lr_source == "state" and not given:
            lr = trainer.learning_rate_of(self._opt_state)
        elif trainer.lr_source == "fixed" and given:
            self._notes.append("learning_rate= does nothing here: this optimizer keeps its rate inside it (e.g. "
                               "optax.adam(0.1)), so there is no learning-rate slider. To slide it, pass "
                               "optimizer=lambda lr: optax.adam(lr) or "
                               "optax.inject_hyperparams(optax.adam)(learning_rate=0.1).")
        self._lr = lr
        return lr

    @property
    def _lr_adjustable(self) -> bool:
        return self._lr_source != "fixed"

    def _runner(self) -> TrainingStep:
        """The compiled n-step loop for the current loss (and optimizer)."""
        if isinstance(self._step, _OptimizerStep):
            return self._step.trainer
        runner = getattr(self, "_plain_runner", None)
        if runner is None or runner.loss_fn is not self.loss_fn or runner.static != self._static:
            runner = TrainingStep(self.loss_fn, None, engine=self.engine, static=self._static)
            self._plain_runner = runner
            if getattr(self._step, "lean", False):  # a big tree: the slider step's traced program serves
                runner.share_value_and_grad(self._step.staged)  # (tracing it again took 20 s at 10k leaves)
        return runner

    @property
    def params(self) -> Any:
        """Where the explorer stands now (the sliders' values; `result` is the step from here)."""
        return self._gather()[0]

    @property
    def opt_state(self) -> Any:
        """The optimizer state the next step starts from (None without an optimizer)."""
        return self._opt_state

    @property
    def history(self) -> list[float]:
        """The loss at every point visited, starting with the first; the last is `result.loss`."""
        return list(self._history)

    @_one_at_a_time
    def step(self, n: int = 1) -> StepResult | None:
        """Take `n` real steps (one compiled loop) and move there: params, optimizer state and the
        sliders follow, `history` grows by n points, every view is drawn once at the end.

        Steps that diverge stop at the last point whose loss is finite, with a message. Returns
        the step from the new point (as `result`), or None with a message in the widget.
        """
        import numpy as np

        if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 0:
            raise ValueError(f"step(n) takes a whole number of steps, 0 or more, not {n!r}.")
        if n > MAX_STEPS:
            raise ValueError(f"step(n) takes at most {MAX_STEPS:,} steps at a time, not {int(n):,}: each step's "
                             "loss is kept in `history`, and the run stops at the time budget anyway "
                             f"(time_budget={self.time_budget}). Call step again to go further.")
        if self._closed:
            return None
        if not self._good_now and self.recompute() is None:
            return None  # the step from here fails: its message is on screen
        try:
            params, inputs, lr = self._gather()
            problem = self._check_inputs(lr)
            if problem:
                return self._fail(problem)
            deadline = time.monotonic() + self.time_budget if self.time_budget else None
            with _quiet_callbacks(), user_code_budget(self.time_budget) as self._clock:
                run = self._runner().run(params, self._opt_state, inputs, lr if self._lr_adjustable else None, int(n),
                                         deadline=deadline)
        except TimeBudgetExceeded:
            return self._fail(self._over_budget("The steps"))
        except KeyboardInterrupt:
            return self._fail("The steps were interrupted; the explorer stays where it was.")
        except BaseException as err:  # a user's loss or optimizer can raise anything
            return self._fail(self._explain(err))
        if run.stopped_loss is not None:
            self._notes.append(f"Stopped after {run.steps} of {int(n)} steps: the next point's loss would be "
                               f"{_fmt(run.stopped_loss)} (the steps diverge). Try a smaller learning rate.")
        if run.timed_out:
            self._notes.append(f"Stopped after {run.steps:,} of {int(n):,} steps: the run reached the time budget "
                               f"({fmt_number(self.time_budget)} s, StepExplorer(..., time_budget=seconds)); the "
                               "explorer moved to the point it got to. Call step again to go on.")
        if run.steps == 0:
            return self.recompute()
        self._history.extend(run.losses[1:])  # the first is the current point, already recorded
        self._opt_state = run.opt_state
        self._new_point = True
        self._move_params(self.engine.tree_leaves(run.params))
        return self.recompute()

    @_one_at_a_time
    def reset(self) -> StepResult | None:
        """Back to where the explorer was built: the construction-time params, inputs and
        learning rate (sliders included) and a fresh optimizer state; history starts again."""
        import numpy as np

        if self._closed:
            return None
        static_changed = any(self._static.get(k) is not v for k, v in self._initial_static.items())
        self._holding = True
        try:
            self._input_leaves[:] = self._initial_input_leaves
            for el, slider in self._input_sliders:
                slider.value = float(np.asarray(self._input_leaves[el.flat_index]).ravel()[el.position])
                slider.widened = None
            if "learning_rate" in self.sliders:
                self.sliders["learning_rate"].value = self._lr
                self.sliders["learning_rate"].widened = None
        finally:
            self._holding = False
        if static_changed:
            self._static = dict(self._initial_static)
            self._step = self._compile(self.loss_fn)
        if static_changed or self._input_data is not self._initial_input_data:
            self._input_data = self._initial_input_data
            self._show_data()
        if self.optimizer is not None:
            try:
                self._opt_state = self._runner().init(self._params, self._lr)
            except BaseException as err:  # noqa: BLE001 - said in the widget
                return self._fail(error_text(err) if isinstance(err, OptimizerError)
                                  else f"The optimizer's init failed: {short_error(err)}")
        self._history = array.array("d")
        self._new_point = True
        self._move_params(self._initial_leaves)
        return self.recompute()

    def _move_params(self, leaves: list) -> None:
        """Put the explorer at other parameter values: stored leaves and sliders, one recompute after."""
        import numpy as np

        notes = list(self._notes)
        self._holding = True
        try:
            for i, leaf in enumerate(leaves):
                self._param_leaves[i] = self._frozen(np.array(leaf)) if isinstance(leaf, np.ndarray) else leaf
            for el, slider in self._param_sliders:
                slider.value = float(np.asarray(self._param_leaves[el.flat_index]).ravel()[el.position])
                slider.widened = None  # a step, not a value pushed out of range by hand
        finally:
            self._holding = False
            self._notes = notes

    def _record(self, loss: float) -> None:
        """The current point's loss in `history`: a new point after a step, the same point moved
        after a slider, a new input or a new loss."""
        if self._new_point or not self._history:
            self._history.append(loss)
        else:
            self._history[-1] = loss
        self._new_point = False

    def _fixed_range_changed(self, change) -> None:
        self.chart_view.fixed_range = bool(change["new"])

    def _trees_of(self, r: StepResult) -> tuple[dict, Any]:
        """The diagram's aligned columns (params, grads, the optimizer's moment trees, updated)
        and its side panels (the rest of the optimizer state, then anything from show_extra)."""
        trees = {"params": r.params, "grads": r.grads}
        extra = self._extra
        state = getattr(r, "opt_state_after", None)
        if self.optimizer is not None and state is not None:
            view = decompose_state(state, r.params, self.engine)
            trees.update(view.moments)
            panels = {"optimizer state": view.rest} if view.rest else {}
            if extra is not None:
                if isinstance(extra, dict) and all(isinstance(k, str) for k in extra):
                    panels.update(extra)
                else:
                    panels["extra"] = extra
            extra = panels or None
        trees["updated"] = r.updated
        return trees, extra

    def _optimizer_rows(self, r: StepResult, leaves: list, selected: str) -> list:
        """The worked calculation's optimizer rows for the selected leaf (or the first)."""
        return _optimizer_rows(self, r, leaves, selected)

    def _extras(self, params: Any, updated: Any, inputs: dict) -> dict:
        """Prediction, residual and dL/dŷ, computed inside the compiled step (per example for a batch)."""
        eng = self.engine
        jnp = eng.numpy
        key = self.target_key
        target = inputs.get(key)
        rest = {k: v for k, v in inputs.items() if k != key}
        prediction = self.prediction_fn(fresh(params, eng), **fresh(rest, eng))
        new_prediction = self.prediction_fn(fresh(updated, eng), **fresh(rest, eng))
        out = {"prediction": prediction, "new_prediction": new_prediction}
        same = (target is not None and jnp.shape(prediction) == jnp.shape(target)
                and jnp.issubdtype(jnp.result_type(target), jnp.floating))
        if same:
            out["residual"] = prediction - target
            out["new_residual"] = new_prediction - target
        if target is not None and (same or self.pointwise_loss is not lesson.squared_error):
            each = self.pointwise_loss(prediction, target)
            out["pointwise"] = each
            out["dpointwise"] = eng.grad(lambda y: jnp.sum(self.pointwise_loss(y, target)))(prediction)
        return out

    def _with_extras(self, result: StepResult) -> StepResult:
        """Decide honestly what dL/dŷ is: the pointwise losses must add up (sum or mean) to L."""
        import dataclasses

        import numpy as np

        x = dict(result.extras or {})
        each, d = x.pop("pointwise", None), x.pop("dpointwise", None)
        if each is not None and d is not None:
            each = np.asarray(each, dtype=np.float64)
            n = max(each.size, 1)
            tol = 1e-4 * max(1.0, abs(result.loss))
            if abs(each.sum() - result.loss) <= tol:
                x["dloss_dprediction"] = d
                x["dloss_label"] = "dL/dŷ" if n == 1 else "dL/dŷ per example (L = Σ ℓ)"
            elif abs(each.mean() - result.loss) <= tol:
                x["dloss_dprediction"] = np.asarray(d) / n
                x["dloss_label"] = f"dL/dŷ per example (L = mean ℓ, so ∂ℓ/∂ŷ ÷ {n})"
        return dataclasses.replace(result, extras=x)

    @_one_at_a_time
    def recompute(self) -> StepResult | None:
        """Run the step for the current slider values and update every view.

        On bad input the message appears in the widget and the last good state stays. Nothing
        the loss raises (BaseException included) escapes: the kernel stays alive.
        """
        if self._closed:
            return None
        if self._too_slow and self._moving:
            # the step was stopped as too slow (not a loop): a slider move does not pay for it again
            return self._fail(self._too_slow + " Moving a slider does not try again; ex.recompute() (or "
                              "set_loss, set_params, a Step click) does.")
        try:
            params, inputs, lr = self._gather()
            problem = self._check_inputs(lr)
            if problem:
                return self._fail(problem)
            started = time.monotonic()
            with _quiet_callbacks(), user_code_budget(self.time_budget) as self._clock:
                try:
                    result = self._step(params, inputs, lr)
                except Exception:
                    if self.prediction_fn is None:
                        raise
                    # the loss may be fine and only prediction_fn fail: try the step without it
                    plain = self._compile(self.loss_fn, with_extras=False)
                    result = plain(params, inputs, lr)
                    self._notes.append(self._prediction_failed(params, inputs))
                    self._step = plain
                result = dataclasses.replace(result, params=params)
            if self.prediction_fn is not None:
                with _quiet_callbacks(), user_code_budget(self.time_budget) as self._clock:
                    result = self._with_extras(result)
            problem = self._check_result(result)
            if problem:
                return self._fail(problem)
        except TimeBudgetExceeded:
            text = self._over_budget("The step")
            if self._clock is not None and self._clock.reason == "slow":
                self._too_slow = text
            return self._fail(text)
        except KeyboardInterrupt:
            return self._fail("The step was interrupted; the last good step stays on screen.")
        except BaseException as err:  # a user's loss can raise anything; the kernel must survive it
            return self._fail(self._explain(err))
        try:
            self._show(result)
        except BaseException as err:  # a view failed after a good step: the same as a failed step
            if self._last_good is not None:  # put every view back on the last good step
                with contextlib.suppress(BaseException):
                    self._show(self._last_good)
            return self._fail(f"The step was computed, but showing it failed: {short_error(err)}. "
                              "The last good step stays on screen.")
        self._last_good = result
        self._good_now = True
        self._too_slow = ""
        self._record(result.loss)
        if self._views_due is None:
            self.history_view.show(self._history)
        notes = self._notes
        self._notes = []
        if not self._param_summary.leaves:
            notes.append("params has no leaves: there is nothing to differentiate, so the step changes nothing.")
        elif lr == 0 and self._lr_adjustable:
            notes.append("The learning rate is 0: updated equals params, so nothing moves "
                         "(the gradients are still computed and shown).")
        staged = getattr(self._step, "staged", None)
        if getattr(self._step, "interpreted", False) and staged is not None and staged is not self._said_staged:
            self._said_staged = staged  # said once per traced program
            if staged.compiling:
                notes.append(f"This model's step is a program of {staged.eqns:,} operations: XLA is compiling it in "
                             "the background, and until that is done its operations run one by one (the numbers "
                             "JAX gives outside jit), so the first steps take longer than later ones.")
            elif staged.compile_error is None:
                notes.append(f"This model's step is a program of {staged.eqns:,} operations: compiling it would take "
                             "minutes, so its operations run one by one (the numbers JAX gives outside jit) and a "
                             "step takes longer than usual.")
        took = time.monotonic() - started
        if took >= SLOW_STEP_S and not self._said_slow and len(self._param_leaves) >= 1000:
            self._said_slow = True  # said once: every move of this model costs about as much
            notes.append(f"This step took {fmt_number(round(took))} s: the work grows with the model's "
                         f"{len(self._param_leaves):,} parameter leaves (JAX handles each leaf's operations "
                         "apart), not with your loss's own Python. Fewer, bigger leaves (stack the layers' "
                         "weights into arrays) make every move fast; sliders=[...] keeps only the sliders you need.")
        failed = getattr(staged, "compile_error", None)
        if failed is not None and failed is not self._said_compile_error:
            self._said_compile_error = failed  # said once per failure
            notes.append(f"This model's step is a program of {staged.eqns:,} operations, and XLA could not compile "
                         f"it in the background ({short_error(failed, 200)}): its operations keep running one by one "
                         "(the numbers JAX gives outside jit), so steps stay slower.")
        if self.prediction_fn is not None and self.target_key not in self._input_names:
            notes.append(f"prediction_fn is given but the inputs have no {self.target_key!r} key (inputs: "
                         f"{', '.join(self._input_names) or 'none'}): name the target with target='...' to see "
                         "the residual and dL/dŷ.")
        if notes:
            self._show_due_views()
            self._note(" ".join(notes))
        return result

    _clock: Any = None  # the last step's BudgetClock (what it saw)

    def _over_budget(self, what: str) -> str:
        clock = self._clock
        if clock is not None and clock.reason == "slow":
            leaves = len(self._param_leaves)
            return (f"{what} stopped after {fmt_number(round(clock.inside))} s, and it is not an endless loop: the "
                    f"loss's own Python ran about {fmt_number(round(clock.own, 1))} s of that; the rest was JAX "
                    f"working on what the loss asked for (tracing or running its operations one by one), which "
                    f"grows with the model: {leaves:,} parameter leaves here. Fewer, bigger leaves (stack the "
                    "layers' weights into arrays) make it fast; StepExplorer(..., time_budget=None) waits as "
                    "long as it takes, and sliders=[...] keeps only the sliders you need. The last good step "
                    "stays on screen.")
        return (f"{what} stopped: the loss (or prediction_fn) ran for more than {fmt_number(self.time_budget)} s "
                "of its own Python code, which usually means an endless loop. The last good step stays on "
                "screen. Fix the loss and call set_loss, or give StepExplorer(..., time_budget=seconds) "
                "for a loss that is just slow (None: no limit).")

    def _prediction_failed(self, params: Any, inputs: dict) -> str:
        try:
            rest = {k: v for k, v in {**inputs, **self._static}.items() if k != self.target_key}
            self.prediction_fn(fresh(params, self.engine), **rest)
        except BaseException as err:  # noqa: BLE001 - said in the note
            return (f"prediction_fn failed ({short_error(err, 200)}), so the worked calculation shows the loss "
                    f"only. It is called as prediction_fn(params, **inputs) without {self.target_key!r}; for a "
                    "batch it may return one prediction per example.")
        return "prediction_fn could not be traced with the step; the worked calculation shows the loss only."

    def _explain(self, err: BaseException) -> str:
        """The step's error in the lesson's terms, with the original error after it."""
        if isinstance(err, OptimizerError):  # the optimizer's own failure, named (training.py)
            return error_text(err)
        text = short_error(err)
        name = error_name(err)
        hint = ""
        if name in ("ConcretizationTypeError", "TracerBoolConversionError", "TracerIntegerConversionError",
                    "TracerArrayConversionError"):
            hint = ("The loss turns a traced value into a Python bool or number (an `if`, `while`, `int()` or "
                    "`float()` on an array): inside value_and_grad the arrays are tracers, not numbers. Use "
                    "jnp.where / jax.lax.cond for data-dependent choices, or pass a Python flag as a static "
                    "input (static=['name']). ")
        elif isinstance(err, TypeError) and "scalar" in error_text(err):
            hint = "The loss must return a single number (a scalar) to be differentiated. "
        elif isinstance(err, TypeError) and ("argument" in error_text(err)):
            names = ", ".join(f"{k}=…" for k in self._input_names)
            hint = f"loss_fn is called as loss_fn(params{', ' if names else ''}{names}). "
        elif not isinstance(err, Exception):
            hint = f"The loss raised {name}, which would stop the kernel; it was caught. "
        else:
            empty = [n.path for n in self._param_summary.root.walk() if n.kind == "none"]
            if empty:
                hint = (f"params{empty[0]} is None: JAX treats None as an empty subtree with no leaves, "
                        "so it is not a parameter and has no gradient. ")
        return f"{hint}The step failed: {text}"

    def _check_inputs(self, lr: float) -> str:
        bad = self._param_summary.non_differentiable
        if bad:
            leaf = bad[0]
            obj = self._param_objects[leaf.index] if leaf.index < len(self._param_objects) else None
            return _type_hint(self._params, leaf, obj)
        bad = _not_numbers(self._input_data)
        if bad:
            return bad
        if not self._lr_adjustable:
            return ""
        if not math.isfinite(lr):
            return "The learning rate must be a finite number."
        if lr < 0:
            return (f"The learning rate is {_fmt(lr)}: a negative rate steps uphill (p + |η|·g), so the loss "
                    "would grow. Use a learning rate of 0 or more.")
        return ""

    def _check_result(self, result: StepResult) -> str:
        import numpy as np

        if not math.isfinite(result.loss):
            return (f"The loss is {result.loss} for these values, so this step is not shown; "
                    "the last good step stays on screen.")
        eng = self.engine
        for name, tree in (("grads", result.grads), ("updated", result.updated)):
            flat, _ = eng.tree_flatten_with_path(tree)
            for path, leaf in flat:
                if not np.all(np.isfinite(np.asarray(leaf))):
                    if name == "updated" and self.optimizer is not None:
                        blame = self._optimizer_blame(result, path)
                        if blame:
                            return blame
                    return (f"{name}{eng.keystr(path)} is not finite (overflow or NaN) for these values; "
                            "try a smaller learning rate. The last good step is still shown.")
        return ""

    def _optimizer_blame(self, result: StepResult, path: tuple) -> str:
        """Why `updated` is not finite when the gradient is: the optimizer's state or its update."""
        import numpy as np

        from .training import optimizer_name

        eng = self.engine
        name = optimizer_name(self.optimizer)
        for which, state in (("state", getattr(result, "opt_state", None)),
                             ("state after this step", getattr(result, "opt_state_after", None))):
            if state is None:
                continue
            for spath, leaf in eng.tree_flatten_with_path(state)[0]:
                a = np.asarray(leaf)
                if a.dtype.kind in "fc" and not np.all(np.isfinite(a)):
                    bad = a.ravel()[~np.isfinite(a.ravel())][0]
                    bad_text = "NaN" if np.isnan(bad) else ("Inf" if np.real(bad) > 0 else "-Inf")
                    return (f"The optimizer's {which} holds {bad_text} at state{eng.keystr(spath)} ({name}), so its "
                            f"update of params{eng.keystr(path)} is not finite: the optimizer is at fault, not the "
                            "loss or the learning rate (the gradients are finite). Check its init and update. "
                            "The last good step is still shown.")
        updates = getattr(result, "updates", None)
        if updates is not None:
            return (f"The optimizer's update ({name}) of params{eng.keystr(path)} is not finite although the "
                    "gradient is: the optimizer is at fault (a division by zero, an overflow in its rule), "
                    "not the loss. The last good step is still shown.")
        return ""

    def _fail(self, text: str) -> None:
        self._good_now = False
        if self.__dict__.get("_last_good") is None:  # no step has worked yet: nothing "stays on screen"
            text = _NO_LAST_GOOD.sub("", text).rstrip()
            text = (text if text.endswith((".", ")")) else text + ".") + " No step has worked yet, so none is shown."
        # notes queued for this step are said with its failure, not later beside another step
        notes, self._notes = self._notes, []
        if notes:
            text = " ".join([text, *notes])
        with contextlib.suppress(BaseException):
            self._show_due_views()  # every view on the last good step, under the message
        self.status.value = f'<div role="alert" class="pytree-lab-alert">{html.escape(text)}</div>'
        self.diagram.show_message(text)
        return None

    def _note(self, text: str) -> None:
        """Information beside a good step (not an error: the step is shown)."""
        self.status.value = f'<div role="status" class="pytree-lab-note">{html.escape(text)}</div>'
        self.diagram.show_message(text, kind="info")

    # ------------------------------------------------------------------ views
    def _show(self, r: StepResult) -> None:
        import numpy as np

        eng = self.engine
        before = eng.tree_leaves(r.params)
        after = eng.tree_leaves(r.updated)
        ys0 = [float(np.asarray(before[e.flat_index]).ravel()[e.position]) for e in self._chart_elements]
        ys1 = [float(np.asarray(after[e.flat_index]).ravel()[e.position]) for e in self._chart_elements]
        dragging = self._dragging()
        # the chart first: its bars are what the eye follows while a slider moves, so its
        # message leaves the kernel before the diagram's and the calculation's bigger ones
        self.chart_view.show(ys0, ys1)
        self.chart_view.highlight(self.selected_path)
        self.status.value = ""
        self.result = r
        if dragging:
            self._defer_views(r)
        elif self._moving and self._VIEWS_SOON > 0 and self._loop_running():
            self._views_soon(r)
        else:
            self._show_views(r, history=False)  # recompute draws the loss line once it is recorded

    # While a slider is dragged, moves come faster than the page can redraw every view: the
    # chart follows each move at once, and the diagram, the worked calculation and the loss
    # line follow the newest move when the drag pauses for _VIEWS_TRAIL, and at least every
    # _VIEWS_EVERY during a long drag. A move after a pause (a key press, a click) updates the
    # chart at once and every other view _VIEWS_SOON later, so the page draws the bars before it
    # works through the bigger messages; every change from Python updates every view at once.
    # `result` is always the newest step.
    # The page sends a slider's next move only once the last is acknowledged (slider.js), so
    # the moves of a drag arrive about a round trip apart: _DRAG_GAP and _VIEWS_TRAIL are longer
    # than a round trip on a busy machine, or every move of a drag would redraw every view.
    _DRAG_GAP = 0.2  # s between two slider moves' steps that makes them one drag
    _VIEWS_TRAIL = 0.15
    _VIEWS_EVERY = 0.5
    _VIEWS_SOON = 0.04  # s after a single move's chart that its other views follow
    _moving = False  # the step in progress comes from a slider move
    _move_at = -math.inf  # loop time of the last slider move's step
    _views_at = -math.inf  # loop time every view was last drawn
    _views_due: StepResult | None = None  # a step whose slower views wait for the drag to pause
    _views_timer: Any = None

    def _dragging(self) -> bool:
        if not self._moving:
            return False
        try:
            now = asyncio.get_running_loop().time()
        except RuntimeError:  # no event loop (plain Python): nothing to wait for
            return False
        drag = now - self._move_at < self._DRAG_GAP
        self._move_at = now
        return drag and now - self._views_at < self._VIEWS_EVERY

    def _show_views(self, r: StepResult, history: bool = True) -> None:
        """The diagram, the worked calculation and the loss line, for step `r`."""
        self._views_due = None
        if self._views_timer is not None:
            self._views_timer.cancel()
            self._views_timer = None
        trees, extra = self._trees_of(r)
        self.diagram.set_trees(trees, order=self._param_summary, **({"extra": extra} if extra is not None else {}))
        self.calculation.show(r, self._param_summary, self.selected_path)
        if history:
            self.history_view.show(self._history)
        with contextlib.suppress(RuntimeError):
            self._views_at = asyncio.get_running_loop().time()

    @staticmethod
    def _loop_running() -> bool:
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return False
        return True

    def _views_soon(self, r: StepResult) -> None:
        """The slower views of a single move, `_VIEWS_SOON` after its chart: the page draws the
        bars before it works through the diagram and the worked calculation."""
        self._views_due = r
        if self._views_timer is not None:
            self._views_timer.cancel()
        self._views_timer = asyncio.get_running_loop().call_later(self._VIEWS_SOON, self._views_now)

    @_one_at_a_time
    def _views_now(self) -> None:
        self._views_timer = None
        self._draw_due_views()

    def _draw_due_views(self) -> None:
        """A timer's turn: the views left waiting, drawn; a failure said as recompute says it."""
        if self._views_due is None or self._closed:
            return
        try:
            self._show_views(self._views_due)
        except BaseException as err:  # noqa: BLE001 - as a view failing in recompute
            self._views_due = None
            self._fail(f"The step was computed, but showing it failed: {short_error(err)}.")

    def _defer_views(self, r: StepResult) -> None:
        self._views_due = r
        if self._views_timer is None:
            self._views_timer = asyncio.get_running_loop().call_later(self._VIEWS_TRAIL, self._views_tick)

    @_one_at_a_time
    def _views_tick(self) -> None:
        self._views_timer = None
        if self._views_due is None or self._closed:
            return
        loop = asyncio.get_running_loop()
        wait = self._VIEWS_TRAIL - (loop.time() - self._move_at)
        if wait > 0:  # the drag goes on: wait for its pause
            self._views_timer = loop.call_later(wait, self._views_tick)
            return
        self._draw_due_views()

    def _show_due_views(self) -> None:
        """Draw the views a drag left waiting (before a message, a text form or a close)."""
        if self._views_due is not None:
            self._show_views(self._views_due)

    def _show_data(self) -> None:
        """Inputs without sliders, as data: shape, dtype and values or a summary."""
        slid = {el.flat_index for el, _ in self._input_sliders}
        parts = []
        for leaf in _walk_leaves(self._input_data):
            if leaf.index in slid:
                continue
            why = "int labels" if leaf.dtype.startswith(("int", "uint")) else \
                "mask" if leaf.dtype == "bool" else "batch" if not _small_input(leaf) else "data"
            parts.append((f"inputs{leaf.path}", leaf.type_label, why, leaf.summary))
        for key, value in self._static.items():
            parts.append((f"inputs[{key!r}]", type(value).__name__, "static", repr(value)[:60]))
        self._data_rows = parts
        if not parts:
            self.data_view.value = ""
            return
        esc = html.escape
        items = "".join(
            f'<li title="{esc(path, quote=True)}"><code>{esc(path)}</code> {esc(ty)} ({esc(why)}): '
            f"{esc(summary)}</li>" for path, ty, why, summary in parts
        )
        self.data_view.value = (f'<div class="ptl-data" aria-label="inputs shown as data"><b>Data</b> '
                                f"(fixed; change with set_inputs): <ul>{items}</ul></div>")

    # ------------------------------------------------------------------ without a widget front end
    @_one_at_a_time
    def text(self) -> str:
        """The explorer as text: the message, the trees (params, grads, updated), the worked calculation."""
        try:
            self._show_due_views()
            parts = [self.diagram.text()]
            if getattr(self, "_data_rows", None):
                parts.append("Data (fixed):\n" + "\n".join(
                    f"  {path}: {ty} ({why}) {summary}" for path, ty, why, summary in self._data_rows))
            if self._last_good is not None:
                parts.append(self.calculation.text())
            if self._history:
                parts.append("Loss at each point visited: " + " → ".join(_fmt(v) for v in self._history[-12:])
                             + (f" ({len(self._history)} points)" if len(self._history) > 12 else ""))
            return "\n\n".join(p for p in parts if p)
        except BaseException as err:  # noqa: BLE001 - a text form must never raise
            return f"StepExplorer (its text form failed: {short_error(err, 200)})"

    # ------------------------------------------------------------------ selection
    @traitlets.validate("selected_path")
    def _valid_selection(self, proposal):
        path = proposal["value"]
        if path == "" or path in self.diagram._paths:
            return path
        # set from Python (the page's selections arrive through the diagram, already checked):
        # said in the widget, as the diagram says it, and the selection stays as it was
        from .diagram import _unknown_path_message

        self._note(_unknown_path_message(path, self.diagram._paths, self.diagram._summaries))
        return self.selected_path

    @traitlets.observe("selected_path")
    def _selection_changed(self, change) -> None:
        self.chart_view.highlight(change["new"])
        self.calculation.select(change["new"])

    def _pick(self, path: str) -> None:
        self.selected_path = path

    # ------------------------------------------------------------------ lifetime
    # ipywidgets keeps every open widget in a registry until it is closed, so an explorer that is
    # replaced without close() (`ex = StepExplorer()` run again) would stay in memory with its
    # ~70 widgets and compiled steps for the rest of the session. Two things close it:
    # - the page closing its comm (the front end disposing of the model);
    # - a new explorer being built while this one had views and now has none (the cell that
    #   showed it was run again or cleared). One still shown anywhere, or never shown (a script,
    #   a test), is left alone; a closed explorer keeps its Python state (params, history).
    def _views_changed(self, change) -> None:
        if isinstance(change["new"], int) and change["new"] > 0:
            self._had_views = True

    def _retire_replaced(self) -> None:
        for other in list(StepExplorer._live):
            if other is self or other.__dict__.get("_closed", True):
                continue
            if other._had_views and other._view_count == 0:
                with contextlib.suppress(Exception):
                    other.close()

    def _watch_comm(self) -> None:
        comm = getattr(self, "comm", None)
        if comm is None or not hasattr(comm, "on_close"):
            return
        me = weakref.ref(self)  # the comm must not keep the explorer alive

        def closed_by_page(msg: Any = None) -> None:
            ex = me()
            if ex is not None and not ex._closed:
                with contextlib.suppress(Exception):
                    ex.close()

        comm.on_close(closed_by_page)

    def _adopt(self, widget: ipywidgets.Widget) -> None:
        """A widget made after construction (the loss line's log scale): guarded and closed with the rest."""
        _guard(widget)
        self._built.append(widget)

    @_one_at_a_time
    def close(self) -> None:
        """Close the explorer and every widget it built (sliders, chart parts, diagram, views),
        whatever its children are now."""
        self._closed = True
        if self._views_timer is not None:
            self._views_timer.cancel()
            self._views_timer = None
        self._views_due = None
        with contextlib.suppress(Exception):
            self.history_view.close()  # its log scale is not reachable while the linear one is shown
        built = list(self.__dict__.get("_built", ()))
        for widget in built + _descendants(self):
            if widget is not self:
                with contextlib.suppress(Exception):
                    widget.close()
        # the compiled steps go: a closed explorer still held somewhere (IPython's Out history
        # keeps a cell's last value) keeps its numbers (params, result, history, text), not its programs
        self._step = None
        self.__dict__.pop("_plain_runner", None)
        self.calculation.optimizer_rows = None
        super().close()


def _elements_of(leaf: Leaf, tree: str) -> list[_Element]:
    return [_Element(tree, leaf, pos) for pos in range(leaf.size)]


def _descendants(root: ipywidgets.Widget) -> list[ipywidgets.Widget]:
    """Every widget reachable from `root` through its synced traits (children, marks, axes,
    scales, layouts, styles, tooltips), root first."""
    seen: dict[int, ipywidgets.Widget] = {}
    stack: list[Any] = [root]
    while stack:
        obj = stack.pop()
        if isinstance(obj, ipywidgets.Widget):
            if id(obj) in seen:
                continue
            seen[id(obj)] = obj
            for key in obj.keys:
                with contextlib.suppress(Exception):
                    stack.append(getattr(obj, key))
        elif isinstance(obj, (list, tuple)):
            stack.extend(obj)
        elif isinstance(obj, dict):
            stack.extend(obj.values())
    return list(seen.values())


class _OptimizerStep:
    """The explorer's step with an optimizer: the compiled `TrainingStep` from the explorer's
    current optimizer state, called like `CompiledStep` (params, inputs, learning rate)."""

    def __init__(self, explorer: StepExplorer, trainer: TrainingStep):
        self.explorer = explorer
        self.trainer = trainer

    @property
    def traces(self) -> int:
        return self.trainer.traces["step"]

    @property
    def staged(self) -> Any:
        """The lean step's staged value_and_grad (None before the first lean step)."""
        return self.trainer._lean_fns.get("vg")

    @property
    def interpreted(self) -> bool:
        return bool(self.trainer.lean) and self.staged is not None and self.staged.interpreted

    def __call__(self, params: Any, inputs: dict, learning_rate: float) -> StepResult:
        lr = learning_rate if self.explorer._lr_adjustable else None
        return self.trainer.step(params, self.explorer._opt_state, inputs, lr)


def _optimizer_rows(explorer: StepExplorer, r: StepResult, leaves: list, selected: str) -> list:
    """Rows of the worked calculation for one leaf: its moments after this step, and for Adam
    with visible hyperparameters (inject_hyperparams) the bias-corrected m̂, v̂ and the step."""
    import numpy as np

    from .calculation import CalcRow, fmt_value

    state = getattr(r, "opt_state_after", None)
    if state is None or not leaves:
        return []
    leaf = next((lf for lf in leaves if selected and (lf.path == selected or lf.path.startswith(selected))), leaves[0])
    eng = explorer.engine
    view = decompose_state(state, r.params, eng)
    name = path_label(leaf.path) or "params"
    rows: list = []

    def add(what: str, value: Any) -> None:
        text, grid = fmt_value(value)
        rows.append(CalcRow("optimizer", what, text, leaf.path, grid))

    def at(tree: Any) -> Any:
        return np.asarray(eng.tree_leaves(tree)[leaf.index])

    g = at(r.grads)
    for moment, tree in view.moments.items():
        add(f"{moment}[{name}] (after this step)", at(tree))
    # Adam's constants: in the state (inject_hyperparams), else from the optimizer as built
    hp = {k: float(np.asarray(v)) for k, v in view.rest.items()
          if k in ("b1", "b2", "eps", "eps_root", "learning_rate") and np.size(v) == 1}
    if not {"b1", "b2", "eps"} <= set(hp):
        opt = explorer.optimizer
        built = opt(r.learning_rate) if not _is_transformation(opt) else opt
        hp = {**(adam_hyperparameters(built) or {}), **hp}
        if "learning_rate" not in hp and explorer._lr_source == "argument":
            hp["learning_rate"] = r.learning_rate
    count = next((v for k, v in view.rest.items() if k.startswith("adam count")), None)
    mu = next((t for k, t in view.moments.items() if k.startswith("adam mu")), None)
    nu = next((t for k, t in view.moments.items() if k.startswith("adam nu")), None)
    if mu is not None and nu is not None and count is not None:
        t = int(np.asarray(count))
        add("t (adam count)", t)
        if {"b1", "b2"} <= set(hp) and t > 0:
            b1, b2 = hp["b1"], hp["b2"]
            m, v = at(mu).astype(np.float64), at(nu).astype(np.float64)
            m_hat, v_hat = m / (1 - b1 ** t), v / (1 - b2 ** t)
            add(f"m̂ = mu / (1 − {b1:.4g}^{t})", m_hat)
            add(f"v̂ = nu / (1 − {b2:.4g}^{t})", v_hat)
            if "learning_rate" in hp and "eps" in hp:
                lr, eps = hp["learning_rate"], hp["eps"]
                add(f"−η·m̂/(√v̂ + ε) with η = {lr:.4g}, ε = {eps:.3g}",
                    -lr * m_hat / (np.sqrt(v_hat + hp.get("eps_root", 0.0)) + eps))
        else:
            rows.append(CalcRow("optimizer", "m̂, v̂", "Adam's b1 and b2 could not be read from this optimizer; "
                                "optax.inject_hyperparams(optax.adam)(learning_rate=…) keeps them in the state",
                                leaf.path))
    updates = getattr(r, "updates", None)
    if updates is not None:
        add(f"update[{name}] from the optimizer (∂L/∂{name} = {fmt_value(g)[0]})", at(updates))
    return rows
