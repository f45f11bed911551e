"""`StepExplorer`: the widget that wires sliders -> session -> schedule -> views; its sliders
(`SliderPanel`) and what Python may change in it (`PythonChanges`)."""

from __future__ import annotations

import contextlib
import functools
import inspect
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

import ipywidgets
import traitlets

from ..engine import Engine
from ..formatting import short_labels
from ..page import PageIntents
from ..slider import Slider, SliderModule
from ..step import StepResult
from ..widget_common import TextForm, refuse_unknown_widget_keywords
from .layout import arrange, check_layout, present
from .lifetime import Lifetime
from .messages import INPUTS_KEPT, short_error, widened_note
from .play import PlayMixin
from .playbar import build_controls
from .schedule import Schedule
from .session import ExplorerSession
from .views import ViewSet

__all__ = ["StepExplorer", "SliderPanel", "PythonChanges", "one_at_a_time"]


def one_at_a_time(method: Callable) -> Callable:
    """One change at a time per explorer: JupyterLab hands widget messages to a kernel subshell, a
    thread of its own, so a slider's step could run while a cell calls `ex.step(10)`."""

    @functools.wraps(method)
    def locked(self, *args, **kwargs):
        session = self.__dict__.get("session")
        if session is None:  # still being built (or a construction that failed, being closed)
            return method(self, *args, **kwargs)
        with session.lock:
            return method(self, *args, **kwargs)

    return locked


def _of_session(name: str, doc: str, settable: bool = False) -> property:
    """The explorer's attribute `name`: its session's."""
    set_ = (lambda self, value: setattr(self.session, name, value)) if settable else None
    return property(lambda self: getattr(self.session, name), set_, doc=doc)


class PythonChanges:
    """What Python may change (set_params, set_inputs, set_loss, show_extra, step, reset): each goes
    through the session (its checks, the message naming the tree path), then the sliders follow
    the session and one recompute shows the new point."""

    if TYPE_CHECKING:  # what the explorer (widget.py) has
        session: Any
        views: Any
        slider_panel: Any
        diagram: Any
        closed: bool

        def recompute(self) -> StepResult | None: ...

        def _fail(self, text: str) -> None: ...

        def _note(self, text: str, kind: str = "info") -> None: ...

    @one_at_a_time
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
        return self._after_change(self.session.set_tree("params", params), keep_notes=False)

    @one_at_a_time
    def set_inputs(self, inputs: dict) -> StepResult | None:
        """New input values: the same keys; a new batch may change the first dimension (compiled once
        per shape), labels of another int width are cast when every value fits (batches.py); the
        rest is refused with the path named, and a batch whose step fails is not kept (the last good
        one stays). Static inputs (static=[...]) may change: it recompiles."""
        s = self.session
        kept = (list(s.input_leaves), s.input_data, s.static, s.slider_step, dict(s.values), s.good_now)
        failure = s.set_inputs(inputs)
        result = self._after_change(failure, keep_notes=False)  # the data line follows the step shown
        if result is None and not failure and not self.closed:  # the new batch's step failed: not taken
            s.input_leaves[:], s.input_data, s.static, s.slider_step, values, s.good_now = kept
            s.values.update(values)
            self.slider_panel.follow(False)
            self._note(f"{self.diagram.message} {INPUTS_KEPT}", "error")
        return result

    @one_at_a_time
    def set_loss(self, loss_fn: Callable) -> StepResult | None:
        """Use another loss (called as `loss_fn(params, **inputs)`), compiled once.

        If it fails (raises, returns a non-scalar, NaN or Inf), the message says why and the last
        good step stays on screen; the new loss is kept, so fixing the sliders or giving a
        corrected loss recovers.
        """
        self.session.set_loss(loss_fn)
        return self.recompute()

    @one_at_a_time
    def show_extra(self, extra: Any) -> None:
        """Show trees that are not aligned with params, e.g. `{"optimizer state": opt_state}`, in
        their own panel (a bare tree is titled "optimizer state"). Slider moves keep the panel;
        call again after your own optimizer step to show the new state."""
        self.session.extra = extra
        self.views["DiagramView"].show_extra()

    @one_at_a_time
    def step(self, n: int = 1) -> StepResult | None:
        """Take `n` real steps (one compiled loop) and move there: params, optimizer state and the
        sliders follow, `history` grows by n points, every view is drawn once at the end.

        Steps that diverge stop at the last point whose loss is finite, with a message. Returns
        the step from the new point (as `result`), or None with a message in the widget.
        """
        self.session.check_steps(n)
        if self.closed or (not self.session.good_now and self.recompute() is None):
            return None  # closed, or the step from here fails (its message is on screen)
        return self._after_change(self.session.run(n))

    @one_at_a_time
    def reset(self) -> StepResult | None:
        """Back to where the explorer was built: the construction-time params, inputs and
        learning rate (sliders included) and a fresh optimizer state; history starts again."""
        if self.closed:
            return None
        return self._after_change(self.session.reset())  # (the data line follows the step shown)

    def _after_change(self, failure: str, keep_notes: bool = True) -> StepResult | None:
        self.slider_panel.follow(keep_notes)  # the sliders show where the session is, failed or not
        return self._fail(failure) if failure else self.recompute()  # type: ignore[func-returns-value]


class SliderPanel:
    """The sliders of `session`'s slider plan (`chosen`, `max_sliders`: see StepExplorer): `sliders`
    by label, `box` the widget holding them, sharing one copy of the front-end module. Values go
    one way, sliders -> session (`take`); when the session moves from Python, `follow` moves them."""

    def __init__(self, session: Any, chosen: Iterable[str] | None, max_sliders: int):
        self.session = session
        module = SliderModule()  # the slider module, sent to the page once for all these sliders
        plan = session.plan_sliders(chosen, max_sliders)
        self.sliders: dict[str, Slider] = {
            spec.label: Slider(
                spec.value,
                description=shown,  # short (cut in the middle), no two alike
                path=spec.path,
                min=spec.min,
                max=spec.max,
                step=spec.step,
                module=module,
            )
            for spec, shown in zip(plan, short_labels([spec.label for spec in plan]))
        }
        self.box = ipywidgets.VBox(list(self.sliders.values()), layout={"min_width": "330px"})
        self.following = False  # set while the sliders follow the session

    def take(self, label: str, change: dict) -> bool:
        """The slider `label`'s new value (a traitlets change) into the session. True when it is a
        move of its own (a step to run); False while the sliders follow the session."""
        slider = change["owner"]
        if slider.widened is not None:
            self.session.notes.append(widened_note(slider.path, change["new"], *slider.widened))
            slider.widened = None
        self.session.move(label, change["new"])
        return not self.following

    def follow(self, keep_notes: bool = True) -> None:
        """The sliders move to the session's values (one recompute after, by the caller)."""
        notes = list(self.session.notes)
        self.following = True
        try:
            for label, slider in self.sliders.items():
                slider.value = self.session.values[label]
                slider.widened = None  # a new point, not a value pushed out of range by hand
        finally:
            self.following = False
            if keep_notes:
                self.session.notes = notes

    def param_sliders(self) -> list[tuple[Any, Slider]]:
        return [
            (spec.element, self.sliders[spec.label])
            for spec in self.session.specs
            if spec.element is not None and spec.element.tree == "params"
        ]


class StepExplorer(PythonChanges, PlayMixin, Lifetime, PageIntents, TextForm, ipywidgets.VBox):
    """Move a slider, watch one gradient step: loss, gradient tree, updated parameters.

    `loss_fn(params, **inputs)` is any scalar loss; with no arguments the explorer is the
    lesson's model (x = [2, 1], weight = [1, -1], bias = 0, target = 3, squared loss).

    What slides: every parameter element, the learning rate, and small float inputs (scalars
    and 1-D inputs of at most 4 values). A data batch (more values or 2+ dimensions) and
    non-float inputs (int class labels, bool masks) are shown as data, never as sliders.
    `sliders=[...]` chooses exactly (keystr paths such as ``"params['w']"`` or ``"['x']"``,
    or slider labels such as ``"weight[0]"`` and ``"learning_rate"``); `max_sliders` caps the
    total. The bars (24 at most) show the elements with sliders, or those `bars=[...]` names
    (the same names, containers too); selecting a leaf not shown brings it in. `static=[...]`
    names inputs (Python ints, bools, strings) passed as they are, not traced (for Python `if`s).

    `prediction_fn(params, **inputs_without_target)` adds the prediction (per example for a
    batch), the residual when prediction and target have the same shape, and dL/dŷ when
    `pointwise_loss(prediction, target)` adds up (sum or mean) to the loss (`target=` names it).

    `optimizer=` puts an optimizer in the step: an optax GradientTransformation runs inside the
    compiled step (``updates, state = opt.update(grads, state, params)``, then
    ``optax.apply_updates``), so `updated` is that optimizer's step; its moment trees (Adam's
    mu and nu, momentum's trace) are aligned with params row by row, and its counts and
    hyperparameters are shown apart as optimizer state. The learning-rate slider appears only
    where it changes the step: no optimizer, ``optimizer=lambda lr: optax.adam(lr)``, or
    ``optax.inject_hyperparams(optax.adam)(learning_rate=...)``; a fixed ``optax.adam(0.1)``
    keeps its rate. In the Lite engine (no JAX) `import optax` gives pytree_lab_lite.optax (sgd,
    momentum, adam with optax's rules).

    `step(n)` takes n real steps as one compiled loop and moves the explorer there (sliders
    follow; `params`, `opt_state` and `history` say where it is); `reset()` goes back to the
    construction-time params, inputs and learning rate and a fresh optimizer state. The buttons
    Step, Step ×10 and Reset do the same; the line chart beside the bars is `history`, the loss at
    every point visited (a slider move moves the current point). `fixed_range=True` (or the
    checkbox) keeps the bars' y range across steps so their motion shows. Play / Pause and
    `play(steps_per_second, until)` / `pause()` take steps one after another at the page's pace;
    `history_dict()`, `to_dataframe()`, `output` and `last_traceback`: see play.py and record.py.

    `set_params`, `set_inputs` and `set_loss` change the starting point or the loss from Python
    (`set_params` is also how an optimizer loop shows its new parameters). Bad input of any kind
    ends in a message inside the widget, naming the tree path where there is one; the last good
    step stays on screen until the input is fixed. Without a widget front end (a static HTML
    export) the explorer shows as text: the three trees and the worked calculation.

    `device=` says where the step runs: a `jax.Device`, or a platform name ("cpu", "tpu",
    "gpu"); by default the host's CPU for a small tree and the accelerator JAX sees for a big
    one (`pytree_lab.engine.ACCELERATOR_PARAMS` elements or more). The explorer places its own
    copies there and names the device under the diagram: its numbers are the ones the same step,
    written by hand in JAX, gives on that device (a TPU's float64 and matmul precision differ
    from a CPU's; docs/backends.md).

    `layout="compact"` (the default) fits a projected screen: the worked calculation folded to
    the selected leaf, big containers and the optimizer's moments folded (explorer/layout.py);
    "long" lists every part in full. `session` is the explorer without widgets; `views` its views.
    """

    selected_path = traitlets.Unicode(
        "",
        help="str, default '': the keystr path of the selected leaf "
        "(the diagram's selection, kept in step with it). Written by the kernel; "
        "the page's clicks arrive through the diagram and the bars.",
    )
    presenter = traitlets.Bool(
        False,
        help="bool, default False: presenter mode, every part's text and controls read from the back "
        "of a room (20 px text and more), the layout kept. Set by Python: StepExplorer(..., presenter=True) "
        "or ex.presenter = True; written by the kernel only.",
    )
    result = traitlets.Any(
        None,
        allow_none=True,
        help="StepResult or None, default None: the step from where "
        "the explorer stands now (None until one works). Written by the kernel; not synced.",
    )

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
        bars: Iterable[str] | None = None,
        static: Iterable[str] = (),
        extra: Any = None,
        time_budget: float | None = 30.0,
        engine: Engine | None = None,
        device: Any = None,
        layout: Any = "compact",
        **kwargs: Any,
    ):
        refuse_unknown_widget_keywords(self, kwargs)
        self.layout_form = check_layout(layout, kwargs)  # "compact" or "long" (layout.py)
        super().__init__(**kwargs)
        self.add_class("pytree-lab-explorer")
        given = locals()  # the session takes the explorer's own arguments, by the same names
        session = ExplorerSession(**{name: given[name] for name in _SESSION_KEYWORDS})
        self.views = ViewSet(session, bars=bars)
        for name, value in ((n, v) for view in self.views.values() for n, v in view.public.items()):
            setattr(self, name, value)  # each view's widgets are attributes too (diagram, chart_view, ...)
        self.session = session
        if extra is not None:
            self.show_extra(extra)
        self.chart_view.fixed_range = bool(fixed_range)
        build_controls(self, fixed_range, self._clicked)
        self.slider_panel = SliderPanel(session, sliders, max_sliders)
        self.sliders: dict[str, Slider] = self.slider_panel.sliders
        self.children = arrange(self, self.layout_form, self.slider_panel.box)
        self.views["DataView"].show()  # (the first step may fail: the data shows anyway)
        if self.presenter:
            present(self, True)
        self.observe(lambda change: present(self, change["new"]), "presenter")
        self._start_play()  # play.py: the player, and the output area under the rest
        self.schedule = Schedule(
            self.views,
            lambda err: self._fail(f"The step was computed, but showing it failed: {short_error(err)}."),
            session.lock,
        )
        self._start_lifetime()
        self.history_view.on_new_widget = self._adopt
        traitlets.link((self, "selected_path"), (self.diagram, "selected_path"))  # one selection everywhere
        self.chart_view.on_pick(lambda path: setattr(self, "selected_path", path))
        for label, slider in self.sliders.items():  # each new value, the page's moves and Python's
            slider.observe(functools.partial(self._on_slider, label), "value")
        self.recompute()

    # ------------------------------------------------------------------ what the session says
    engine = _of_session("engine", "The engine the steps run on (JAX or Lite).")
    device = _of_session("device", "The jax.Device the steps run on (None on Lite).")
    loss_fn = _of_session("loss_fn", "The loss, called as loss_fn(params, **inputs).")
    optimizer = _of_session("optimizer", "The optimizer given (None: p − η·g).")
    params = _of_session(
        "params", "Where the explorer stands now (the sliders' values; `result` is the step from here)."
    )
    opt_state = _of_session("opt_state", "The optimizer state the next step starts from (None without an optimizer).")
    time_budget = _of_session("time_budget", "Seconds the user's own code may run in one step (None: no limit).", True)
    param_sliders = property(
        lambda self: self.slider_panel.param_sliders(),
        doc="(element, Slider) of each parameter element with a slider, in order.",
    )

    # ------------------------------------------------------------------ sliders -> session
    def _on_slider(self, label: str, change: dict) -> None:
        """A slider moved (by hand, or from Python): the step from the new point, as one from the
        page (playing stops, output goes to the output area). Calls `_show_step` itself: the
        slider path (explorer/__init__.py) is six calls."""
        if not self.slider_panel.take(label, change):
            return  # the sliders follow the session: the caller recomputes once after
        if self.playing:
            self.player.stop("Paused: a slider moved.")
        with self.session.lock, self._from_page():
            self.schedule.moving = True
            try:
                self._show_step()
            finally:
                self.schedule.moving = False

    # ------------------------------------------------------------------ session -> schedule -> views
    @one_at_a_time
    def recompute(self) -> StepResult | None:
        """Run the step for the current slider values and update every view.

        On bad input the message appears in the widget and the last good state stays. Nothing
        the loss raises (BaseException included) escapes: the kernel stays alive.
        """
        return self._show_step()

    def _show_step(self) -> StepResult | None:
        if self._closed:
            return None
        computed = self.session.compute(moving=self.schedule.moving)
        if computed.result is None:
            return self._fail(computed.failure)  # type: ignore[func-returns-value]
        try:
            self.schedule.show(computed.result)
        except BaseException as err:  # a view failed after a good step: the same as a failed step
            if self.session.last_good is not None:  # put every view back on the last good step
                with contextlib.suppress(BaseException):
                    self.schedule.draw_all(self.session.last_good)
            return self._fail(
                f"The step was computed, but showing it failed: {short_error(err)}. "  # type: ignore[func-returns-value]
                "The last good step stays on screen."
            )
        self.status.value = ""
        self.result = computed.result
        notes = self.session.commit(computed)
        if self.schedule.due is None:
            self.views.show(computed.result, lambda view: view.after_record and not view.fast)
        if notes:
            self.schedule.draw_due()
            self._note(" ".join(notes))
        return computed.result

    def _fail(self, text: str) -> None:
        text = self.session.failure(text)
        with contextlib.suppress(BaseException):
            self.schedule.draw_due()  # every view on the last good step, under the message
        self._note(text, "error")

    # ------------------------------------------------------------------ text form, selection, close
    @one_at_a_time
    def text(self) -> str:
        """The explorer as text: the message, the trees (params, grads, updated), the worked calculation."""
        try:
            self.schedule.draw_due()
            return self.views.text()
        except BaseException as err:  # noqa: BLE001 - a text form must never raise
            return f"StepExplorer (its text form failed: {short_error(err, 200)})"

    @traitlets.validate("selected_path")
    def _valid_selection(self, proposal: dict) -> str:
        path = proposal["value"]
        if path == "" or self.diagram.has_path(path):
            return path
        # set from Python (the page's selections arrive through the diagram, already checked):
        # said in the widget, as the diagram says it, and the selection stays as it was
        self._note(self.diagram.unknown_path_message(path))
        return self.selected_path

    @traitlets.observe("selected_path")
    def _selection_changed(self, change: dict) -> None:
        for view in self.views.values():
            view.select(change["new"])

    @one_at_a_time
    def close(self) -> None:
        """Close the explorer and every widget it built (sliders, chart parts, diagram, views),
        whatever its children are now. A closed explorer keeps its numbers (params, result,
        history, text), not its compiled programs."""
        self._closed = True
        if "schedule" in self.__dict__:
            self.schedule.close()
        if "views" in self.__dict__:
            self.views.close()
        self._close_widgets()
        if "session" in self.__dict__:
            self.session.close()
        super().close()


_SESSION_KEYWORDS = [name for name in inspect.signature(ExplorerSession.__init__).parameters if name != "self"]
