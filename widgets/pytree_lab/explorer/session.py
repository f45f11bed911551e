"""The explorer's state and rules, without widgets (this module imports no ipywidgets).

`ExplorerSession` holds the explorer's own copies of the trees, the slider values (by slider
label), the compiled step, the optimizer state, the history and the notes to say. Everything
that changes the explorer goes through it: `move` (a slider), `set_params` / `set_inputs` /
`set_loss`, `run(n)`, `reset`. `compute()` runs the step for the current values and returns a
`Computed` (a result, or the failure said in a sentence); `commit(result)` makes it the current
point and returns the notes to say beside it. It never draws: the widget shows what it returns.
The person's numbers are never changed: trees are copied on the way in (never aliased), the
loss gets its own copies, and the learning rate keeps each leaf's dtype.
"""

from __future__ import annotations

import array
import contextlib
import logging
import math
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from typing import Any, cast

from .. import lesson
from ..engine import Engine, choose_device, device_label, get_engine
from ..guard import TimeBudgetExceeded, interrupted, time_budget
from ..page import is_number
from ..step import StepResult, pin_dtypes
from ..summaries import all_finite, on_host
from ..training import CompiledStep, OptimizerError, TrainingStep
from ..trees import describe
from . import batches, messages, record
from .prediction import extras_fn, with_extras
from .sliders import LEARNING_RATE, SliderSpec, element_values, moving_positions, plan

__all__ = ["ExplorerSession", "Computed", "MAX_STEPS", "SLOW_STEP_S"]

SLOW_STEP_S = 5.0  # a step this slow, of a model of many leaves, is said with how to make it fast
MAX_STEPS = 1_000_000  # step(n) at most: history keeps every point's loss


@dataclass(frozen=True)
class Computed:
    """What `compute` gives: the step's `result`, or `failure` (a sentence) when it failed."""

    result: StepResult | None = None
    failure: str = ""
    took: float = 0.0  # seconds the step took


@contextlib.contextmanager
def _quiet_callbacks():
    """A failing `jax.debug.callback` inside a user's loss is reported in the widget, not logged too."""
    logger = logging.getLogger("jax._src.debugging")
    old, logger.disabled = logger.disabled, True
    try:
        yield
    finally:
        logger.disabled = old


def _pinned(name: str, tree: Any, eng: Engine) -> Any:
    """`pin_dtypes(tree)`; a tree too deep for JAX's flatten is refused with its depth."""
    try:
        return pin_dtypes(tree, eng)
    except (RecursionError, SystemError) as err:
        deep = messages.too_deep(name, tree, err)
        if deep is None:
            raise
        raise deep from err


class ExplorerSession:
    """The explorer without its widgets: see the module docstring. Arguments as `StepExplorer`'s."""

    def __init__(
        self,
        loss_fn: Callable | None = None,
        params: Any = None,
        inputs: dict | None = None,
        learning_rate: float | None = None,
        *,
        optimizer: Any = None,
        prediction_fn: Callable | None = None,
        target: str = "target",
        pointwise_loss: Callable | None = None,
        static: Iterable[str] = (),
        time_budget: float | None = 30.0,
        engine: Engine | None = None,
        device: Any = None,
    ):
        self.lock = threading.RLock()  # one change at a time (a cell and a slider's subshell thread)
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
        self.loss_fn, self.prediction_fn, self.target_key = loss_fn, prediction_fn, target
        self.pointwise_loss = pointwise_loss or lesson.squared_error
        inputs = dict(inputs or {})
        static = [static] if isinstance(static, str) else list(static)
        unknown = [k for k in static if k not in inputs]
        if unknown:
            raise ValueError(f"static= names {unknown[0]!r}, which is not one of the inputs {list(inputs)}.")
        self.static = {k: inputs.pop(k) for k in static}
        self.input_names = [str(k) for k in inputs] + [str(k) for k in self.static]
        self.notes: list[str] = []  # said with the next step shown (or its failure)
        self.extra: Any = None  # trees shown in their own panel (show_extra)
        # what was said once: the op-by-op program (and its failed background compile), a slow step
        self._said_staged: Any = None
        self._said_slow = False

        # Our own copies of the trees (never the caller's arrays), in the dtypes JAX gives them.
        self.params_tree = _pinned("params", params, eng)
        pinned_inputs = _pinned("inputs", inputs, eng)
        self.param_leaves, self._param_def = eng.tree_flatten(self.params_tree)
        self.input_leaves, self.input_def = eng.tree_flatten(pinned_inputs)
        # where the step runs (engine.choose_device); the copies are placed there, never the caller's arrays
        self.device = choose_device(device, eng, self.param_leaves)
        self.device_name = "" if self.device is None else device_label(self.device)
        self.param_leaves = [self._frozen(x) for x in self.param_leaves]
        self.input_leaves = [self._frozen(x) for x in self.input_leaves]
        self.inputs_tree = pinned_inputs
        self._param_objects = eng.tree_leaves(params)
        # Summaries of the trees as written: JAX returns dicts with sorted keys, but sliders,
        # bars and rows follow the person's order (flatten indices are the same either way).
        self.param_summary = describe(params, "params", values=False)
        self.input_summary = describe(inputs, "inputs", values=False)
        self.input_data = describe(inputs, "inputs")

        self.optimizer = optimizer
        self.opt_state: Any = None
        self.history = array.array("d")  # 8 bytes a point: a million steps are 8 MB
        # the learning rate of the step from each point (NaN: fixed inside the optimizer); each point's params and state
        self.rates, self.trail = array.array("d"), record.Trail()
        self.last_traceback = ""  # the traceback of the last step that raised ("" when none)
        self.new_point = True  # the next good step is a newly visited point (else the current one moved)
        self.good_now = False  # the last compute succeeded (a step can start from here)
        self.last_good: StepResult | None = None
        self.clock: Any = None  # the last step's guard.Budget (what the loss's own code used)
        # what reset goes back to
        self.initial = (list(self.param_leaves), list(self.input_leaves), dict(self.static), self.input_data)
        self.learning_rate = self._start_optimizer(learning_rate)
        self.slider_step: Any = self._compile(loss_fn)  # the step every slider move runs
        self._plain_runner: TrainingStep | None = None
        self.specs: list[SliderSpec] = []
        self.moving: dict[int, list[int]] | None = None  # leaf -> positions whose gradient moved at the start
        self.values: dict[str, float] = {}  # each slider's value, by its label

    # ------------------------------------------------------------------ copies, compile, runner
    def _frozen(self, x: Any) -> Any:
        """A leaf as the explorer stores it: immutable, never the caller's object, committed to the step's device."""
        import numpy as np

        if isinstance(x, np.ndarray) and self.engine.is_lite:
            x.setflags(write=False)  # pin_dtypes made this copy; a loss cannot write into it
            return x
        committed = getattr(x, "committed", getattr(x, "_committed", True))  # (`_committed` before jax 0.4.31)
        if isinstance(x, np.ndarray) or (hasattr(x, "devices") and (x.devices() != {self.device} or not committed)):
            return self.engine.jax.device_put(x, self.device)  # a jnp.array too (uncommitted): the same buffer
        return x

    def on_device(self) -> Any:
        """A context in which JAX computes on the explorer's device (its step, the optimizer's init)."""
        return contextlib.nullcontext() if self.device is None else self.engine.jax.default_device(self.device)

    def _failure_text(self, err: BaseException, what: str) -> str:
        """What a step (`what`) that raised `err` says."""
        if isinstance(err, TimeBudgetExceeded):
            return messages.over_budget(what, self.time_budget)
        self.last_traceback = messages.traceback_text(err)  # a user's loss or optimizer can raise anything
        return messages.explain(err, self.input_names, self.param_summary, self.input_summary)

    def _compile(self, loss_fn: Callable, with_extras: bool = True) -> Any:
        extras = extras_fn(self) if self.prediction_fn is not None and with_extras else None
        if self.optimizer is None:
            return CompiledStep(loss_fn, extras_fn=extras, engine=self.engine, static=self.static)
        step = TrainingStep(loss_fn, self.optimizer, extras_fn=extras, engine=self.engine, static=self.static)
        with self.on_device():
            step.init(self.params_tree, self.learning_rate)  # finds where the state keeps its learning rate
        return step

    def _call_step(self, step: Any, params: Any, inputs: dict, lr: float, state: Any = None) -> StepResult:
        if self.optimizer is None:
            return step(params, inputs, lr)
        state = self.opt_state if state is None else state
        return step.step(params, state, inputs, lr if self.rate_slides else None)

    def step_at(self, t: int, inputs: dict) -> StepResult:
        """The step shown at point `t` of the record (its params, optimizer state and rate, placed as a live step's):
        `compute`'s compiled step under the same guard (device, quiet callbacks, time budget), for a replay."""
        eng = self.engine
        kept = [[self._frozen(eng.numpy.asarray(x)) for x in xs] for xs in self.trail[t]]
        params = eng.tree_unflatten(self._param_def, kept[0])
        state = None if self.opt_state is None else eng.tree_unflatten(eng.tree_structure(self.opt_state), kept[1])
        with self.on_device(), _quiet_callbacks(), time_budget(self.time_budget, traced=False) as self.clock:
            return replace(self._call_step(self.slider_step, params, inputs, self.rates[t], state), params=params)

    def restore(self, state: list, history: Any, rates: Any, trail: record.Trail) -> None:
        """A saved record made the session's own (record.load), its optimizer state placed as a step's."""
        eng = self.engine
        self.opt_state = eng.tree_unflatten(eng.tree_structure(self.opt_state), [self._frozen(x) for x in state])
        self.history, self.rates, self.trail = array.array("d", history), array.array("d", rates), trail

    def runner(self) -> TrainingStep:
        """The engine of n steps for the current loss (and optimizer): with an optimizer the
        slider step itself, without one a plain `TrainingStep` sharing a big tree's program."""
        if self.optimizer is not None:
            return self.slider_step
        runner = self._plain_runner
        if runner is None or runner.loss_fn is not self.loss_fn or runner.static != self.static:
            runner = TrainingStep(self.loss_fn, None, engine=self.engine, static=self.static)
            self._plain_runner = runner
            if getattr(self.slider_step, "lean", False):  # a big tree: the slider step's traced program serves
                runner.share_value_and_grad(self.slider_step.staged)  # (tracing it again took 20 s at 10k leaves)
        return runner

    def _start_optimizer(self, learning_rate: float | None) -> float:
        """Check the optimizer, make its first state, say where the learning rate lives; returns the rate."""
        given = learning_rate is not None
        if given:
            shape = getattr(learning_rate, "shape", ())
            if shape != () or isinstance(learning_rate, (bool, str, bytes)):
                what = f"an array of shape {tuple(shape)}" if shape != () else repr(learning_rate)
                raise ValueError(f"learning_rate is one number (a float, or an array of shape ()), not {what}.")
        lr = float(learning_rate) if given else lesson.LEARNING_RATE  # type: ignore[arg-type]
        self.rate_source = "argument"
        if self.optimizer is None:
            return lr
        # a wrong optimizer is refused here, as a missing params tree is (OptimizerError says why)
        trainer = TrainingStep(self.loss_fn, self.optimizer, engine=self.engine, static=self.static)
        with self.on_device():  # committed as the step's new states are, or the second step compiles again
            self.opt_state = self.engine.tree_map(self._frozen, trainer.init(self.params_tree, lr))
        self.rate_source = trainer.lr_source
        if trainer.lr_source == "state" and not given:
            lr = cast(float, trainer.learning_rate_of(self.opt_state))  # a float: the rate is in the state
        elif trainer.lr_source == "fixed" and given:
            self.notes.append(messages.FIXED_RATE)
        return lr

    @property
    def rate_slides(self) -> bool:
        """Whether the learning rate changes the step (not fixed inside the optimizer)."""
        return self.rate_source != "fixed"

    # ------------------------------------------------------------------ sliders
    def plan_sliders(self, chosen: Iterable[str] | None, max_sliders: int) -> list[SliderSpec]:
        """Decide the sliders (sliders.plan), valued as the trees are; where not every element gets
        one, the default ones have a gradient that is not zero at the start (one step computed)."""
        if chosen is None and sum(leaf.size for leaf in self.param_summary.leaves) > max_sliders:
            computed = self.compute()
            if computed.result is not None:
                self.moving = moving_positions(self.engine, computed.result.grads)
        specs, notes = plan(self, chosen, max_sliders)
        self.notes += notes
        self.specs = specs
        self.values = {s.label: s.value for s in specs}
        return specs

    def move(self, label: str, value: float) -> None:
        """A slider moved: its element (or the learning rate) takes `value`."""
        self.values[label] = float(value)

    def _values_from_leaves(self, tree: str) -> None:
        leaves = self.input_leaves if tree == "inputs" else self.param_leaves
        pairs = [(s.label, s.element) for s in self.specs if s.element is not None and s.element.tree == tree]
        self.values.update(zip([label for label, _ in pairs], element_values(leaves, [e for _, e in pairs])))

    def gather(self) -> tuple[Any, dict, float]:
        """Params, inputs and learning rate: the stored trees with the slider values written in."""
        import numpy as np

        leaves = {"params": list(self.param_leaves), "inputs": list(self.input_leaves)}
        writes: dict[tuple, dict[int, float]] = {}
        for s in self.specs:
            if s.element is not None:
                writes.setdefault((s.element.tree, s.element.flat_index), {})[s.element.position] = self.values[s.label]
        for (tree, i), at in writes.items():
            leaf, pos = leaves[tree][i], np.fromiter(at, np.intp, len(at))
            values = np.asarray(list(at.values()), leaf.dtype)  # rounded to the leaf's dtype as numpy writes them
            if on_host(leaf):
                a = np.array(leaf, copy=True)
                a.reshape(-1)[pos] = values
            else:  # written where the leaf lives: nothing of it comes over
                a = leaf.reshape(-1).at[pos].set(values).reshape(leaf.shape)
            leaves[tree][i] = self._frozen(a)
        eng = self.engine
        params = eng.tree_unflatten(self._param_def, leaves["params"])
        inputs = eng.tree_unflatten(self.input_def, leaves["inputs"])
        return params, inputs, float(self.values.get(LEARNING_RATE, self.learning_rate))

    # ------------------------------------------------------------------ new trees or loss from Python
    def set_tree(self, name: str, tree: Any) -> str:
        """New params or inputs (same structure, shapes and dtypes): "" when taken, else why not."""
        import numpy as np

        from ..diagnose import diagnose

        current = self.params_tree if name == "params" else self.inputs_tree
        try:
            summary = describe(tree, name, values=False)
            nones = [n.path for n in summary.root.walk() if n.kind == "none"]
            if nones:  # a None where the explorer's own tree has one too is the same empty subtree
                had = {n.path for n in describe(current, name, values=False).root.walk() if n.kind == "none"}
                nones = [path for path in nones if path not in had]
            if nones:
                return (
                    f"{name}{nones[0]} is None, where a number was expected: JAX treats None as "
                    "an empty subtree with no leaves, so it cannot be a parameter or an input."
                )
            if name == "params":
                bad = summary.non_differentiable
                if bad:
                    return (
                        f"{name}{bad[0].path} is {bad[0].type_label}, not a floating-point value: "
                        f"JAX cannot differentiate it. Keep names, counts and flags outside the {name} tree."
                    )
            elif messages.not_numbers(summary):
                return messages.not_numbers(summary)
            pinned = pin_dtypes(tree, self.engine)
            fitted = batches.fit_inputs(self, pinned) if name == "inputs" else None  # a new batch: see batches.py
            if isinstance(fitted, str):
                return fitted
            if fitted is None:
                found = diagnose(
                    current, pinned, reference_name=f"the explorer's {name}", candidate_name=f"the new {name}"
                )
                if not found.ok:
                    return (
                        f"{found.message} The explorer keeps its {name} tree; "
                        "build a new StepExplorer for another model."
                    )
            new_leaves, notes = fitted or (self.engine.tree_leaves(pinned), [])
            for leaf, arr in zip(summary.leaves, new_leaves):
                values = np.asarray(arr)
                if values.dtype.kind == "f" and not np.all(np.isfinite(values)):
                    shown = ", ".join(str(v) for v in values.ravel()[~np.isfinite(values.ravel())][:3].tolist())
                    return (
                        f"{name}{leaf.path} holds a non-finite value ({shown}): a slider cannot "
                        "start there and every number computed from it would be NaN or Inf."
                    )
        except Exception as err:  # a tree the engine cannot flatten: say so, keep the last good step
            deep = messages.too_deep(name, tree, err)
            return str(deep) if deep is not None else f"The new {name} could not be used: {messages.short_error(err)}"
        leaves = self.param_leaves if name == "params" else self.input_leaves
        for i, leaf in enumerate(new_leaves):
            leaves[i] = self._frozen(leaf)
        self._values_from_leaves(name)
        if name == "inputs":  # a cast leaf is described as the explorer holds it
            self.input_data = describe(
                self.engine.tree_unflatten(self.input_def, new_leaves) if notes else tree, "inputs"
            )
            self.notes += notes
        return ""

    def set_inputs(self, inputs: dict) -> str:
        """New input values; static inputs may change value (the step recompiles)."""
        inputs = dict(inputs)
        new_static = {k: inputs.pop(k) for k in list(inputs) if k in self.static}
        missing = [k for k in self.static if k not in new_static]
        if missing:
            return f"The new inputs are missing {missing[0]!r} (a static input)."
        failure = self.set_tree("inputs", inputs)
        if not failure and any(new_static[k] is not self.static[k] for k in new_static):
            self.static = new_static
            self.slider_step = self._compile(self.loss_fn)
        return failure

    def set_loss(self, loss_fn: Callable) -> None:
        self.loss_fn = loss_fn
        self.slider_step = self._compile(loss_fn)

    # ------------------------------------------------------------------ steps, reset, history
    @property
    def params(self) -> Any:
        """Where the explorer stands now (the slider values written in)."""
        return self.gather()[0]

    def check_steps(self, n: Any) -> None:
        import numpy as np

        if not is_number(n, (int, np.integer)) or n < 0:
            raise ValueError(f"step(n) takes a whole number of steps, 0 or more, not {n!r}.")
        if n > MAX_STEPS:
            raise ValueError(
                f"step(n) takes at most {MAX_STEPS:,} steps at a time, not {int(n):,}: each step's "
                "loss is kept in `history`, and the run stops at the time budget anyway "
                f"(time_budget={self.time_budget}). Call step again to go further."
            )

    def run(self, n: int) -> str:
        """`n` real steps as one compiled loop, and move there: "" when done, else why not."""
        try:
            params, inputs, lr = self.gather()
            problem = self.check_inputs(lr)
            if problem:
                return problem
            deadline = time.monotonic() + self.time_budget if self.time_budget else None
            with self.on_device(), _quiet_callbacks(), time_budget(self.time_budget, traced=False) as self.clock:
                keep, rate = self.trail.room(int(n)), lr if self.rate_slides else None
                run = self.runner().run(params, self.opt_state, inputs, rate, int(n), deadline=deadline, keep=keep)
        except BaseException as err:  # noqa: BLE001 - said in the widget; the kernel survives it
            if interrupted(err):  # the Stop button ends the cell that runs
                raise KeyboardInterrupt from None
            return self._failure_text(err, "The steps")
        fmt = messages.fmt_number
        if run.stopped_loss is not None:
            self.notes.append(
                f"Stopped after {run.steps} of {int(n)} steps: the next point's loss would be "
                f"{fmt(run.stopped_loss)} (the steps diverge). Try a smaller learning rate."
            )
        if run.timed_out:
            self.notes.append(
                f"Stopped after {run.steps:,} of {int(n):,} steps: the run reached the time budget "
                f"({fmt(self.time_budget)} s, StepExplorer(..., time_budget=seconds)); the "
                "explorer moved to the point it got to. Call step again to go on."
            )
        if run.steps:
            self.history.extend(run.losses[1:])  # the first is the current point, already recorded
            self.trail += run.points[1:] if run.points else []
            self.rates.extend([self.rates[-1] if self.rates else math.nan] * (len(run.losses) - 1))  # the run's rate
            self.opt_state = run.opt_state
            self.new_point = True
            self._move_params(self.engine.tree_leaves(run.params))
        return ""

    def reset(self) -> str:
        """Back to the construction-time params, inputs and learning rate and a fresh optimizer
        state; history starts again. "" when done, else why not."""
        params0, inputs0, static0, data0 = self.initial
        self.input_leaves[:] = inputs0
        self._values_from_leaves("inputs")
        if LEARNING_RATE in self.values:
            self.values[LEARNING_RATE] = self.learning_rate
        if any(self.static.get(k) is not v for k, v in static0.items()):
            self.static = dict(static0)
            self.slider_step = self._compile(self.loss_fn)
        self.input_data = data0
        if self.optimizer is not None:
            try:
                with self.on_device():
                    state = self.runner().init(self.params_tree, self.learning_rate)
                self.opt_state = self.engine.tree_map(self._frozen, state)  # placed as the step's states are
            except BaseException as err:  # noqa: BLE001 - said in the widget
                return (
                    messages.error_text(err)
                    if isinstance(err, OptimizerError)
                    else f"The optimizer's init failed: {messages.short_error(err)}"
                )
        self.history, self.rates, self.trail = array.array("d"), array.array("d"), record.Trail()
        self.new_point = True
        self._move_params(params0)
        return ""

    def _move_params(self, leaves: list) -> None:
        import numpy as np

        for i, leaf in enumerate(leaves):
            self.param_leaves[i] = self._frozen(np.array(leaf)) if isinstance(leaf, np.ndarray) else leaf
        self._values_from_leaves("params")

    # ------------------------------------------------------------------ one step
    def compute(self, moving: bool = False) -> Computed:
        """The step for the current values; nothing the loss raises (BaseException included) escapes.
        `moving`: a slider move asks (a step stopped as too slow is not paid for again)."""
        try:
            params, inputs, lr = self.gather()
            problem = self.check_inputs(lr)
            if problem:
                return Computed(failure=problem)
            started = time.monotonic()
            with self.on_device(), _quiet_callbacks(), time_budget(self.time_budget, traced=False) as self.clock:
                try:
                    result = self._call_step(self.slider_step, params, inputs, lr)
                except Exception as err:
                    if self.prediction_fn is None or interrupted(err):
                        raise
                    # the loss may be fine and only prediction_fn fail: try the step without it
                    plain = self._compile(self.loss_fn, with_extras=False)
                    result = self._call_step(plain, params, inputs, lr)
                    self.notes.append(self._prediction_failed(params, inputs))
                    self.slider_step = plain
                result = replace(result, params=params)
            if self.prediction_fn is not None:
                with self.on_device(), _quiet_callbacks(), time_budget(self.time_budget, traced=False) as self.clock:
                    result = with_extras(result)
            problem = self.check_result(result)
            if problem:
                return Computed(failure=problem)
        except BaseException as err:  # noqa: BLE001 - said in the widget; the kernel survives it
            if interrupted(err):  # the Stop button ends the cell that runs
                raise KeyboardInterrupt from None
            text = self._failure_text(err, "The step")
            return Computed(failure=text)
        return Computed(result=result, took=time.monotonic() - started)

    @property
    def step_number(self) -> int:
        """The step number of the point the session stands on (its count in `history`)."""
        return len(self.history) if (self.new_point or not self.history) else len(self.history) - 1

    def commit(self, computed: Computed) -> list[str]:
        """`computed.result` (shown) is the current point now: recorded in history. Returns the notes."""
        result = computed.result
        assert result is not None
        self.last_good, self.good_now = result, True
        self.trail.put(self.new_point or not self.history, result, self.engine)
        if self.new_point or not self.history:
            self.history.append(result.loss)  # a new point after a step
            self.rates.append(result.learning_rate)
        else:
            self.history[-1] = result.loss  # the same point moved (a slider, a new input or loss)
            self.rates[-1] = result.learning_rate
        self.new_point = False
        notes, self.notes = self.notes, []
        if not self.param_summary.leaves:
            notes.append(messages.NO_LEAVES)
        elif result.learning_rate == 0 and self.rate_slides:
            notes.append(messages.ZERO_RATE)
        staged = getattr(self.slider_step, "staged", None)
        said = (staged, getattr(staged, "compile_error", None))  # said once per program, and per failed compile
        if getattr(self.slider_step, "interpreted", False) and staged is not None and said != self._said_staged:
            self._said_staged = said
            notes.append(messages.staged_note(staged))
        if computed.took >= SLOW_STEP_S and not self._said_slow and len(self.param_leaves) >= 1000:
            self._said_slow = True  # said once: every move of this model costs about as much
            notes.append(messages.slow_note(computed.took, len(self.param_leaves)))
        if self.prediction_fn is not None and self.target_key not in self.input_names:
            notes.append(messages.no_target_note(self.target_key, self.input_names))
        return [n for n in notes if n]

    def failure(self, text: str) -> str:
        """A failed step said in full: with the notes queued for it, and without promising a last
        good step when none worked yet."""
        self.good_now = False
        if self.last_good is None:
            text = messages.without_last_good(text)
        notes, self.notes = self.notes, []
        return " ".join([text, *notes]) if notes else text

    def _prediction_failed(self, params: Any, inputs: dict) -> str:
        from ..step import fresh

        try:
            rest = {k: v for k, v in {**inputs, **self.static}.items() if k != self.target_key}
            self.prediction_fn(fresh(params, self.engine), **rest)  # type: ignore[misc]
        except BaseException as err:  # noqa: BLE001 - said in the note
            return messages.prediction_failed(err, self.target_key)
        return messages.prediction_failed(None, self.target_key)

    def check_inputs(self, lr: float) -> str:
        bad = self.param_summary.non_differentiable
        if bad:
            leaf = bad[0]
            obj = self._param_objects[leaf.index] if leaf.index < len(self._param_objects) else None
            return messages.type_hint(self.params_tree, leaf, obj)
        bad_inputs = messages.not_numbers(self.input_data)
        if bad_inputs or not self.rate_slides:
            return bad_inputs
        if not math.isfinite(lr):
            return "The learning rate must be a finite number."
        if lr < 0:
            return (
                f"The learning rate is {messages.fmt_number(lr)}: a negative rate steps uphill (p + |η|·g), so "
                "the loss would grow. Use a learning rate of 0 or more."
            )
        return ""

    def check_result(self, result: StepResult) -> str:
        if not math.isfinite(result.loss):
            return (
                f"The loss is {result.loss} for these values, so this step is not shown; "
                "the last good step stays on screen."
            )
        eng = self.engine
        for name, tree in (("grads", result.grads), ("updated", result.updated)):
            flat = eng.tree_flatten_with_path(tree)[0]
            for (path, _), finite in zip(flat, all_finite([leaf for _, leaf in flat])):
                if not finite:
                    if name == "updated" and self.optimizer is not None:
                        blame = messages.optimizer_blame(result, path, self.optimizer, eng)
                        if blame:
                            return blame
                    return messages.not_finite(name, eng.keystr(path))
        return ""

    def close(self) -> None:
        """Drop the compiled programs; the numbers (params, history, last step) stay."""
        self.slider_step = self._plain_runner = None
