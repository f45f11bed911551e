"""`StepExplorer`: the lesson's interactive figure.

Sliders for the inputs, the learning rate and the initial parameters. Every move runs one
compiled `value_and_grad` + `tree.map` step in the kernel and updates every view from its
result: the aligned diagram (params | grads | updated), the before/after bars and the worked
calculation. One direction only: sliders -> step -> result -> views. No view computes numbers.
"""

from __future__ import annotations

import contextlib
import html
import logging
import math
from typing import Any, Callable

import ipywidgets
import traitlets

from . import lesson
from ._text import TextForm
from .chart import BeforeAfterChart
from .diagram import PytreeDiagram
from .engine import Engine, get_engine
from .slider import Slider, span
from .step import CompiledStep, StepResult, pin_dtypes
from .trees import Leaf, describe, element_labels, path_label

__all__ = ["StepExplorer"]


def _fmt(v: float) -> str:
    if not math.isfinite(v):
        return str(v)
    return "0" if v == 0 else f"{v:.4g}"


def _fmt_array(a: Any) -> str:
    import numpy as np

    arr = np.asarray(a, dtype=np.float64)
    if arr.ndim == 0:
        return _fmt(float(arr))
    flat = arr.ravel()
    text = ", ".join(_fmt(float(v)) for v in flat[:8])
    if flat.size > 8:
        text += f", … ({flat.size} values)"
    return f"[{text}]"


def short_error(err: BaseException, limit: int = 400) -> str:
    """`Type: message` in one or two lines; a traceback embedded in the message is cut to its last line."""
    text = str(err).strip()
    if "Traceback (most recent call last)" in text:
        lines = [ln for ln in text.splitlines() if ln.strip()]
        text = lines[-1].strip() if lines else text
        return text[:limit]
    text = f"{type(err).__name__}: {text}" if text else type(err).__name__
    return text if len(text) <= limit else text[: limit - 1] + "…"


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


class _Element:
    """One scalar element of one leaf: where it lives and what it is called."""

    __slots__ = ("leaf", "flat_index", "position", "label")

    def __init__(self, leaf: Leaf, flat_index: int, position: int, label: str):
        self.leaf, self.flat_index, self.position, self.label = leaf, flat_index, position, label


def _elements(summary, limit: int) -> list[_Element]:
    """Float elements of a tree in display order (as the user wrote it), at most `limit`."""
    out: list[_Element] = []
    for node in summary.root.walk():
        leaf = node.leaf
        if leaf is None or not leaf.differentiable:
            continue
        for pos, label in enumerate(element_labels(leaf)):
            if len(out) >= limit:
                return out
            out.append(_Element(leaf, leaf.index, pos, label))
    return out


class StepExplorer(TextForm, ipywidgets.VBox):
    """Move a slider, watch one gradient step: loss, gradient tree, updated parameters.

    `loss_fn(params, **inputs)` is any scalar loss; with no arguments the explorer is the
    lesson's model (x = [2, 1], weight = [1, -1], bias = 0, target = 3, squared loss).
    Give `prediction_fn(params, **inputs_without_target)` to show the prediction, residual and
    dL/dprediction in the worked calculation.

    `set_params`, `set_inputs` and `set_loss` change the starting point or the loss from Python.
    Bad input of any kind (a tree that does not fit, a leaf JAX cannot differentiate, a loss
    that raises or returns a non-scalar, NaN or Inf, a negative learning rate) ends in a message
    inside the widget, naming the tree path where there is one; the last good step stays on
    screen until the input is fixed. Without a widget front end (a static HTML export) the
    explorer shows as text: the three trees and the worked calculation.
    """

    selected_path = traitlets.Unicode("")
    result = traitlets.Any(None, allow_none=True)

    def __init__(
        self,
        loss_fn: Callable | None = None,
        params: Any = None,
        inputs: dict | None = None,
        learning_rate: float = lesson.LEARNING_RATE,
        *,
        prediction_fn: Callable | None = None,
        target: str = "target",
        pointwise_loss: Callable | None = None,
        max_sliders: int = 24,
        extra: Any = None,
        engine: Engine | None = None,
        **kwargs: Any,
    ):
        super().__init__(**kwargs)
        self.add_class("pytree-lab-explorer")
        self.engine = eng = engine or get_engine()
        if loss_fn is None:
            loss_fn = lesson.lesson_loss
            prediction_fn = prediction_fn or lesson.predict
            pointwise_loss = pointwise_loss or lesson.squared_error
            params = lesson.lesson_params() if params is None else params
            inputs = lesson.lesson_inputs() if inputs is None else inputs
        if params is None:
            raise TypeError("StepExplorer needs `params` (a pytree) when you give your own `loss_fn`.")
        self.loss_fn = loss_fn
        self.prediction_fn = prediction_fn
        self.target_key = target
        self.pointwise_loss = pointwise_loss or lesson.squared_error
        inputs = dict(inputs or {})
        self._input_names = [str(k) for k in inputs]

        # Pinned copies of the trees: every slider value keeps these dtypes (no retracing).
        self._params = pin_dtypes(params, eng)
        self._inputs = pin_dtypes(inputs, eng)
        self._param_leaves, self._param_def = eng.tree_flatten(self._params)
        self._input_leaves, self._input_def = eng.tree_flatten(self._inputs)
        # Summaries of the trees as written: JAX returns dicts with sorted keys, but sliders,
        # bars and rows follow the user's order (flatten indices are the same either way).
        self._param_summary = describe(params, "params", values=False)
        self._input_summary = describe(inputs, "inputs", values=False)

        self._holding = False  # set while several sliders change at once: one recompute after
        self._step = CompiledStep(loss_fn, extras_fn=self._extras if prediction_fn else None, engine=eng)
        self._last_good: StepResult | None = None

        # ---- views
        self.status = ipywidgets.HTML(layout={"width": "100%"})
        self.status.add_class("pytree-lab-status")
        self.diagram = PytreeDiagram()
        self.diagram.set_trees({"params": self._params}, order=self._param_summary)
        if extra is not None:
            self.show_extra(extra)
        self.diagram.caption = f"computed in the kernel by {eng.name}: value_and_grad, then tree.map(p − η·g)"
        chart_elements = _elements(self._param_summary, max_sliders)
        self._chart_elements = chart_elements
        self.chart_view = BeforeAfterChart(
            [e.label for e in chart_elements],
            [e.leaf.path for e in chart_elements],
            title="A gradient tree matches parameter leaves",
        )
        self.chart = self.chart_view.figure
        self.calculation = ipywidgets.HTML(layout={"width": "100%"})
        self.calculation.add_class("pytree-lab-calculation")
        self.sliders: dict[str, Slider] = {}
        self._input_sliders: list[tuple[_Element, Slider]] = []
        self._param_sliders: list[tuple[_Element, Slider]] = []
        self._build_sliders(learning_rate, max_sliders)

        slider_box = ipywidgets.VBox(list(self.sliders.values()), layout={"min_width": "330px"})
        self.children = [
            self.status,
            ipywidgets.HBox([slider_box, self.chart], layout={"flex_flow": "row wrap", "align_items": "center"}),
            self.diagram,
            self.calculation,
        ]

        # ---- links: one selection everywhere
        traitlets.link((self, "selected_path"), (self.diagram, "selected_path"))
        self.chart_view.on_pick(self._pick)
        for slider in self.sliders.values():
            slider.observe(self._on_slider, "value")
        self.recompute()

    # ------------------------------------------------------------------ sliders
    def _build_sliders(self, learning_rate: float, max_sliders: int) -> None:
        import numpy as np

        def make(label: str, value: float, lo: float, hi: float, step: float, path: str = "") -> Slider:
            s = Slider(value, description=label, path=path or label, min=lo, max=hi, step=step)
            self.sliders[label] = s
            return s

        for el in _elements(self._input_summary, max_sliders):
            v = float(np.asarray(self._input_leaves[el.flat_index]).ravel()[el.position])
            self._input_sliders.append((el, make(el.label, v, *span(v), path=f"inputs{el.leaf.path}")))
        lr_max = max(0.5, 2 * learning_rate)
        # a negative rate given from Python is kept (and refused with a message), not clamped to 0
        make("learning_rate", float(learning_rate), min(0.0, math.floor(learning_rate)), lr_max, 0.005)
        for el in _elements(self._param_summary, max_sliders):
            v = float(np.asarray(self._param_leaves[el.flat_index]).ravel()[el.position])
            self._param_sliders.append((el, make(el.label, v, *span(v), path=f"params{el.leaf.path}")))

    def _gather(self) -> tuple[Any, dict, float]:
        """Params, inputs and learning rate from the sliders, in the pinned dtypes."""
        import numpy as np

        def apply(leaves: list, pairs: list) -> list:
            out = list(leaves)
            copied: set[int] = set()
            for el, slider in pairs:
                i = el.flat_index
                if i not in copied:
                    out[i] = np.array(out[i], copy=True)
                    copied.add(i)
                out[i].reshape(-1)[el.position] = slider.value
            return out

        eng = self.engine
        params = eng.tree_unflatten(self._param_def, apply(self._param_leaves, self._param_sliders))
        inputs = eng.tree_unflatten(self._input_def, apply(self._input_leaves, self._input_sliders))
        return params, inputs, float(self.sliders["learning_rate"].value)

    def _on_slider(self, change) -> None:
        if not self._holding:
            self.recompute()

    # ------------------------------------------------------------------ new trees or loss from Python
    def set_params(self, params: Any) -> StepResult | None:
        """Start from other parameter values (same structure, shapes and dtypes as before).

        A tree that does not fit (a missing, extra or renamed key, another shape or dtype, a
        string, int, bool, complex or None leaf) is refused with a message naming its path; the
        last good step stays on screen. Build a new StepExplorer for a new model.
        """
        return self._set_tree("params", params, self._params, self._param_leaves, self._param_sliders)

    def set_inputs(self, inputs: dict) -> StepResult | None:
        """New input values (same keys, shapes and dtypes); refused with a message otherwise."""
        return self._set_tree("inputs", dict(inputs), self._inputs, self._input_leaves, self._input_sliders)

    def set_loss(self, loss_fn: Callable) -> StepResult | None:
        """Use another loss (called as `loss_fn(params, **inputs)`), compiled once.

        If it fails (raises, returns a non-scalar, NaN or Inf), the message says why and the last
        good step stays on screen; the new loss is kept, so fixing the sliders or giving a
        corrected loss recovers.
        """
        self.loss_fn = loss_fn
        extras = self._extras if self.prediction_fn is not None else None
        self._step = CompiledStep(loss_fn, extras_fn=extras, engine=self.engine)
        return self.recompute()

    def _set_tree(self, name: str, tree: Any, current: Any, leaves: list, sliders: list) -> StepResult | None:
        import numpy as np

        from .trees import diagnose

        try:
            summary = describe(tree, name, values=False)
            nones = [n.path for n in summary.root.walk() if n.kind == "none"]
            if nones:
                return self._fail(f"{name}{nones[0]} is None, where a number was expected: JAX treats None as "
                                  "an empty subtree with no leaves, so it cannot be a parameter or an input.")
            bad = summary.non_differentiable
            if bad:
                leaf = bad[0]
                return self._fail(f"{name}{leaf.path} is {leaf.type_label}, not a floating-point value: "
                                  f"JAX cannot differentiate it. Keep names, counts and flags outside the {name} tree.")
            pinned = pin_dtypes(tree, self.engine)
            found = diagnose(current, pinned, reference_name=f"the explorer's {name}",
                             candidate_name=f"the new {name}")
            if not found.ok:
                return self._fail(f"{found.message} The explorer keeps its {name} tree; "
                                  "build a new StepExplorer for another model.")
            new_leaves = self.engine.tree_leaves(pinned)
            for leaf, arr in zip(summary.leaves, new_leaves):
                values = np.asarray(arr)
                if not np.all(np.isfinite(values)):
                    shown = ", ".join(str(v) for v in values.ravel()[~np.isfinite(values.ravel())][:3].tolist())
                    return self._fail(f"{name}{leaf.path} holds a non-finite value ({shown}): a slider cannot "
                                      "start there and every number computed from it would be NaN or Inf.")
        except Exception as err:  # a tree the engine cannot flatten: say so, keep the last good step
            return self._fail(f"The new {name} could not be used: {short_error(err)}")
        self._holding = True
        try:
            for i, leaf in enumerate(new_leaves):
                leaves[i] = np.asarray(leaf)
            for el, slider in sliders:
                value = float(np.asarray(leaves[el.flat_index]).ravel()[el.position])
                if value < slider.min or value > slider.max:
                    lo, hi, _ = span(value)
                    slider.min, slider.max = min(slider.min, lo), max(slider.max, hi)
                slider.value = value
        finally:
            self._holding = False
        return self.recompute()

    # ------------------------------------------------------------------ the step
    def show_extra(self, extra: Any) -> None:
        """Show trees that are not aligned with params, e.g. `{"optimizer state": opt_state}`, in
        their own panel (a bare tree is titled "optimizer state"). Slider moves keep the panel;
        call again after your own optimizer step to show the new state."""
        r = self._last_good
        trees = {"params": self._params} if r is None else {"params": r.params, "grads": r.grads, "updated": r.updated}
        self.diagram.set_trees(trees, extra=extra, order=self._param_summary)

    def _extras(self, params: Any, updated: Any, inputs: dict) -> dict:
        """Intermediate values of the lesson's model, computed inside the compiled step."""
        eng = self.engine
        target = inputs[self.target_key]
        rest = {k: v for k, v in inputs.items() if k != self.target_key}
        prediction = self.prediction_fn(params, **rest)
        new_prediction = self.prediction_fn(updated, **rest)
        d_prediction = eng.grad(lambda yhat: self.pointwise_loss(yhat, target))(prediction)
        return {
            "prediction": prediction,
            "residual": prediction - target,
            "dloss_dprediction": d_prediction,
            "new_prediction": new_prediction,
            "new_residual": new_prediction - target,
        }

    def recompute(self) -> StepResult | None:
        """Run the step for the current slider values and update every view.

        On bad input the message appears in the widget and the last good state stays.
        """
        try:
            params, inputs, lr = self._gather()
            problem = self._check_inputs(lr)
            if problem:
                return self._fail(problem)
            with _quiet_callbacks():
                result = self._step(params, inputs, lr)
            problem = self._check_result(result)
            if problem:
                return self._fail(problem)
        except Exception as err:  # a user's loss can raise anything; the widget must survive it
            return self._fail(self._explain(err))
        self._last_good = result
        self._show(result)
        if not self._param_summary.leaves:
            self._note("params has no leaves: there is nothing to differentiate, so the step changes nothing.")
        elif lr == 0:
            self._note("The learning rate is 0: updated equals params, so nothing moves "
                       "(the gradients are still computed and shown).")
        return result

    def _explain(self, err: Exception) -> str:
        """The step's error in the lesson's terms, with the original error after it."""
        text = short_error(err)
        hint = ""
        if isinstance(err, TypeError) and "scalar" in str(err):
            hint = "The loss must return a single number (a scalar) to be differentiated. "
        elif isinstance(err, TypeError) and ("argument" in str(err)):
            names = ", ".join(f"{k}=…" for k in self._input_names)
            hint = f"loss_fn is called as loss_fn(params{', ' if names else ''}{names}). "
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
            return (f"params{leaf.path} is {leaf.type_label}, not a floating-point parameter: JAX cannot "
                    "differentiate it. Keep metadata such as names or counts outside the params tree.")
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
        for name, tree in (("grads", result.grads), ("updated", result.updated)):
            flat, _ = self.engine.tree_flatten_with_path(tree)
            for path, leaf in flat:
                if not np.all(np.isfinite(np.asarray(leaf))):
                    return (f"{name}{self.engine.keystr(path)} is not finite (overflow or NaN) for these values; "
                            "try a smaller learning rate. The last good step is still shown.")
        return ""

    def _fail(self, text: str) -> None:
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
        self.status.value = ""
        self.diagram.set_trees(
            {"params": r.params, "grads": r.grads, "updated": r.updated}, order=self._param_summary
        )
        before = eng.tree_leaves(r.params)
        after = eng.tree_leaves(r.updated)
        ys0 = [float(np.asarray(before[e.flat_index]).ravel()[e.position]) for e in self._chart_elements]
        ys1 = [float(np.asarray(after[e.flat_index]).ravel()[e.position]) for e in self._chart_elements]
        self.chart_view.show(ys0, ys1)
        self.chart_view.highlight(self.selected_path)
        self.calculation.value = self._calculation_html(r)
        self.result = r

    def _calculation_rows(self, r: StepResult) -> list[tuple[str, str, str, str]]:
        eng = self.engine
        rows: list[tuple[str, str, str, str]] = []  # (section, what, value, path)
        x = r.extras
        if x:
            rows += [
                ("forward", "prediction ŷ", _fmt_array(x["prediction"]), ""),
                ("forward", "residual ŷ − target", _fmt_array(x["residual"]), ""),
            ]
        rows.append(("forward", "loss L", _fmt(r.loss), ""))
        if x:
            rows.append(("backward", "dL/dŷ", _fmt_array(x["dloss_dprediction"]), ""))
        # gradient and update rows follow the params as written (flatten indices are shared)
        order = [n.leaf for n in self._param_summary.root.walk() if n.leaf is not None]
        grads, updated, before = (eng.tree_leaves(t) for t in (r.grads, r.updated, r.params))
        for leaf in order:
            name = path_label(leaf.path) or "params"
            rows.append(("backward", f"∂L/∂{name}", _fmt_array(grads[leaf.index]), leaf.path))
        lr = _fmt(r.learning_rate)
        for leaf in order:
            name = path_label(leaf.path) or "params"
            g = _fmt_array(grads[leaf.index])
            g = f"({g})" if g.startswith("-") else g
            rows.append(("update", f"{name} − {lr}·∂L/∂{name} = {_fmt_array(before[leaf.index])} − {lr}·{g}",
                         _fmt_array(updated[leaf.index]), leaf.path))
        if x:
            rows += [
                ("after", "new prediction", _fmt_array(x["new_prediction"]), ""),
                ("after", "new residual", _fmt_array(x["new_residual"]), ""),
            ]
        rows.append(("after", "new loss", _fmt(r.loss_after), ""))
        return rows

    def _calculation_html(self, r: StepResult) -> str:
        esc = html.escape
        sel = self.selected_path
        rows = self._calculation_rows(r)
        body = []
        last = None
        for section, what, value, path in rows:
            cls = ' class="ptl-calc-selected"' if sel and path and (path == sel or path.startswith(sel)) else ""
            head = esc(section) if section != last else ""
            last = section
            body.append(
                f'<tr{cls} data-path="{esc(path, quote=True)}"><th scope="row">{head}</th>'
                f"<td>{esc(what)}</td><td class=\"ptl-calc-value\">{esc(value)}</td></tr>"
            )
        return (
            '<table class="ptl-calc" aria-label="worked calculation">'
            "<caption>Worked calculation (numbers from the step just computed)</caption>"
            + "".join(body) + "</table>"
        )

    # ------------------------------------------------------------------ without a widget front end
    def text(self) -> str:
        """The explorer as text: the message, the trees (params, grads, updated), the worked calculation."""
        parts = [self.diagram.text()]
        r = self._last_good
        if r is not None:
            rows = self._calculation_rows(r)
            width = max(len(what) for _, what, _, _ in rows)
            lines, last = ["Worked calculation (numbers from the step just computed)"], None
            for section, what, value, _ in rows:
                head = section if section != last else ""
                last = section
                lines.append(f"{head:<9} {what:<{width}}  {value}")
            parts.append("\n".join(lines))
        return "\n\n".join(parts)

    # ------------------------------------------------------------------ selection
    @traitlets.validate("selected_path")
    def _valid_selection(self, proposal):
        path = proposal["value"]
        return path if path == "" or path in self.diagram._paths else ""

    @traitlets.observe("selected_path")
    def _selection_changed(self, change) -> None:
        self.chart_view.highlight(change["new"])
        if self._last_good is not None:
            self.calculation.value = self._calculation_html(self._last_good)

    def _pick(self, path: str) -> None:
        self.selected_path = path
