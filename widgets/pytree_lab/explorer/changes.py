"""What Python may change in an explorer: its parameters, inputs, loss and extra panel, steps
taken and a reset. Each goes through the session (session.py: the checks, the message naming the
tree path), then the sliders follow the session and one recompute shows the new point.

`one_at_a_time`: JupyterLab hands widget messages to a kernel subshell, a thread of its own, so a
slider's step can run while a cell calls `ex.step(10)`; each explorer runs one change at a time.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..step import StepResult

__all__ = ["PythonChanges", "one_at_a_time"]


def one_at_a_time(method: Callable) -> Callable:
    """JupyterLab hands widget messages to a kernel subshell, a thread of its own: a slider's
    step can run while a cell calls `ex.step(10)`. Each explorer runs one change at a time."""

    @functools.wraps(method)
    def locked(self, *args, **kwargs):
        session = self.__dict__.get("session")
        if session is None:  # still being built (or a construction that failed, being closed)
            return method(self, *args, **kwargs)
        with session.lock:
            return method(self, *args, **kwargs)

    return locked


class PythonChanges:
    """Mixin for StepExplorer: set_params, set_inputs, set_loss, show_extra, step and reset."""

    if TYPE_CHECKING:  # what the explorer (widget.py) has
        session: Any
        views: Any
        slider_panel: Any
        closed: bool

        def recompute(self) -> StepResult | None: ...

        def _fail(self, text: str) -> None: ...

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
        rest is refused with the path named. Static inputs (static=[...]) may change: it recompiles."""
        failure = self.session.set_inputs(inputs)
        if not failure:
            self.views["DataView"].refresh()
        return self._after_change(failure, keep_notes=False)

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
        failure = self.session.reset()
        self.views["DataView"].refresh()
        return self._after_change(failure)

    def _after_change(self, failure: str, keep_notes: bool = True) -> StepResult | None:
        self.slider_panel.follow(keep_notes)  # the sliders show where the session is, failed or not
        return self._fail(failure) if failure else self.recompute()  # type: ignore[func-returns-value]
