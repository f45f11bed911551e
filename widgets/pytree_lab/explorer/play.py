"""Training that plays: steps one after another while every view follows, at a pace the page shows.

`Player` takes one real step (`StepExplorer.step(1)`: params, optimizer state, history, sliders
and every view move there) per turn, on the kernel's event loop (a timer, never a loop inside a
cell: the person can run other cells while it plays). Its pace:

- at most `steps_per_second`;
- when the explorer is shown in a page, the next step is computed only after the page says it
  drew the last one (`PlayControl`'s ``drawn`` message, sent after the paint that follows the
  step's views): the kernel is never more than one step ahead of the screen and nothing queues
  up. A page that does not answer within `ACK_TIMEOUT` (a lost message) gets the next step
  anyway; such steps are counted in `late`. With no page (a script, a test) the timer alone paces.

When it stops: `Playing.play`. Played steps' output (`print`, `jax.debug.print`) goes to the
explorer's output area (debug.py).

`PlayMixin` gives StepExplorer its play / pause / history / output methods (kept out of
widget.py, whose class has a line budget); `Playing`, the part of them OptimizerComparison
shares.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import time
from collections.abc import Iterator
from typing import Any

from .. import timing
from ..page import is_number
from . import record
from .debug import DebugArea, captured
from .messages import fmt_number, status_html
from .playbar import PlayControl

__all__ = ["Player", "Playing", "PlayMixin", "MAX_RATE"]

MAX_RATE = 60.0  # steps per second at most: a screen shows no more


class Player:
    """Plays `ex` (see the module doc). `steps`, `late` and `max_lead` say how the last play went:
    steps taken, steps taken without the page's answer, the most steps computed ahead of the
    page's drawing (1 when the page kept up); `compute_s` and `wait_s` the seconds spent
    computing steps (views sent included) and waiting for the page's answers."""

    ACK_TIMEOUT = timing.PLAY_ACK_TIMEOUT  # s: a shown explorer waits this long for the page's answer

    def __init__(self, ex: Any, control: PlayControl):
        self.ex, self.control = ex, control
        self.until: int | None = None
        self.steps = self.late = self.max_lead = 0
        self.compute_s = self.wait_s = 0.0
        self.frame = self.acked = 0  # the played step sent to the page, and the newest it drew
        self._loop: asyncio.AbstractEventLoop | None = None
        self._timer: Any = None
        self._next_at = self._sent_at = 0.0
        control.on_intent = self._intent

    def play(self, steps_per_second: float | None = None, until: int | None = None) -> None:
        if steps_per_second is not None:
            if not is_number(steps_per_second) or not 0 < steps_per_second <= MAX_RATE:  # NaN and inf fail the range
                raise ValueError(
                    f"steps_per_second is a number above 0 and at most {MAX_RATE:g}, not {steps_per_second!r}."
                )
        if until is not None and (not is_number(until, int) or until < 0):
            raise ValueError(f"until is a step number (a whole number, 0 or more), not {until!r}.")
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            raise RuntimeError(
                "play() runs on the event loop of a Jupyter kernel (or of asyncio), so that other "
                "cells can run while it plays; there is none here. Use ex.step(n)."
            ) from None
        if self.ex.closed:
            return
        if steps_per_second is not None:
            self.control.steps_per_second = float(steps_per_second)
        at = self.ex.control_step()
        if until is not None and until <= at:
            self._say(f"Already at step {at} (until={until}): nothing to play.")
            return
        self.until = until
        self.steps = self.late = self.max_lead = 0
        self.compute_s = self.wait_s = 0.0
        self.acked = self.frame  # nothing outstanding
        self._cancel()  # a turn waiting on another thread's loop (played from the page before)
        self._loop = loop
        self._next_at = loop.time()
        self.control.message = ""
        self.control.playing = True
        self._arm(0.0)

    def stop(self, message: str = "", alert: str = "") -> None:
        """Stop playing; `message` said beside the button, `alert` in the explorer's status line."""
        was = self.control.playing
        self.control.playing = False
        self._cancel()
        if message and (was or alert):
            self._say(message, alert)

    # ------------------------------------------------------------------ the page's intents
    def _intent(self, kind: str, value: Any) -> None:
        if kind == "drawn":
            if value > self.frame:
                return  # a frame never sent: crafted, ignored
            if value > self.acked and value == self.frame and self._loop is not None:
                self.wait_s += max(self._loop.time() - self._sent_at, 0.0)
            self.acked = max(self.acked, value)
            loop = self._loop
            if self.control.playing and loop is not None:
                with contextlib.suppress(RuntimeError):  # the loop is closed
                    loop.call_soon_threadsafe(self._turn)
            return
        with self.ex.lock, self.ex._from_page():
            if kind == "play" and not self.control.playing:
                self.ex.play()
            elif kind == "pause":
                self.ex.pause()
            elif kind == "rate":
                self.control.steps_per_second = float(value)

    # ------------------------------------------------------------------ turns
    def _arm(self, delay: float) -> None:
        self._cancel()
        if self._loop is not None:
            self._timer = (self._loop, self._loop.call_later(max(delay, 0.0), self._turn))

    def _cancel(self) -> None:
        """The waiting turn, cancelled on its own loop's thread (pause may come from another)."""
        timer, self._timer = self._timer, None
        if timer is not None:
            with contextlib.suppress(RuntimeError):  # its loop is closed
                timer[0].call_soon_threadsafe(timer[1].cancel)

    def _turn(self) -> None:
        loop = self._loop
        if not self.control.playing or loop is None:
            return
        ex = self.ex
        with ex.lock:
            if not self.control.playing:
                return
            if ex.closed:
                self.stop()
                return
            now = loop.time()
            waiting = self.frame > self.acked and self.ex.shown > 0
            if waiting and now < self._sent_at + self.ACK_TIMEOUT:
                self._arm(self._sent_at + self.ACK_TIMEOUT - now)  # or sooner: the answer calls _turn
                return
            if now < self._next_at:
                self._arm(self._next_at - now)
                return
            if waiting:
                self.late += 1
            self._next_at = now + 1.0 / self.control.steps_per_second
            self._take_step()
            if self.control.playing:
                self._arm(self._next_at - loop.time())

    def _take_step(self) -> None:
        ex = self.ex
        at = ex.control_step()
        r = ex.result
        if r is not None and not math.isfinite(r.loss_after):
            self.stop(
                f"Stopped playing at step {at}: the steps diverge.",
                alert=f"Stopped playing at step {at}: the next step's loss would be {fmt_number(r.loss_after)} "
                "(the steps diverge). Try a smaller learning rate.",
            )
            return
        started = time.monotonic()
        with ex._from_page():
            result = ex.step(1)
        if result is None:
            self.stop(f"Stopped playing at step {at}: the step failed (the message above says why).")
            ex.control_step_changed()
            return
        self.steps += 1
        if self.ex.shown > 0:
            self.max_lead = max(self.max_lead, self.frame + 1 - self.acked)
        self.frame = self.frame + 1
        self.compute_s += time.monotonic() - started
        self._sent_at = self._loop.time() if self._loop is not None else 0.0
        self.control.frame = self.frame  # after the step's views: the page answers once it drew them
        now = ex.control_step()
        if self.until is not None and now >= self.until:
            self.stop(f"Played to step {now}.")

    def _say(self, text: str, alert: str = "") -> None:
        self.control.message = text
        if alert:
            with contextlib.suppress(Exception):
                self.ex._note(alert, "error")


class Playing:
    """Play / Pause, the step number shown and the output of steps run from the page: what
    StepExplorer (`PlayMixin`) and OptimizerComparison share. `_sessions()` gives the sessions a
    step moves (the explorer's one, or one per optimizer); `lock` is theirs."""

    lock: Any
    play_control: PlayControl
    status: Any
    diagram: Any
    debug: DebugArea
    player: Player

    def _sessions(self) -> list:
        raise NotImplementedError

    # ------------------------------------------------------------------ play
    def play(self, steps_per_second: float | None = None, until: int | None = None) -> None:
        """Take steps one after another, every view following, without blocking the kernel (other
        cells run meanwhile): at most `steps_per_second` (default: the speed chosen in the page,
        10 at first; at most 60), and, when the explorer is shown, never more than one step ahead
        of what the page has drawn. Stops at step number `until` (see `history.steps`; None: goes
        on), on `pause()` or the Pause button, a slider moved by hand, Reset, or a step that
        fails; a loss that would become NaN or Inf stops it before that step, with a message.
        Needs a running event loop (a Jupyter kernel has one). An OptimizerComparison steps every
        optimizer at once, and stops before a step where any one's next loss would be NaN or Inf."""
        with self.lock:
            self.player.play(steps_per_second, until)

    def pause(self) -> None:
        """Stop playing (the explorer, or every optimizer compared, stays at the step it reached)."""
        self.player.stop("Paused.")

    @property
    def playing(self) -> bool:
        """Whether steps are being played (the kernel's; the page asks through Play / Pause)."""
        return self.play_control.playing

    # ------------------------------------------------------------------ output of steps from the page
    @property
    def output(self) -> str:
        """What the steps run from the page (sliders, buttons, played steps) printed: the last lines kept."""
        return self.debug.text

    @contextlib.contextmanager
    def _from_page(self) -> Iterator[None]:
        """A step the page asked for: its output to the output area, a failed step's traceback kept."""
        for s in self._sessions():
            s.last_traceback = ""
        try:
            with captured(self.debug.write):
                yield
        finally:
            self.debug.failed(next((s.last_traceback for s in self._sessions() if not s.good_now), ""))

    def _clicked(self, method: Any, *args: Any) -> None:
        """A button's step (Step, Step ×10, Reset), run as a step from the page; Reset stops playing."""
        if method.__name__ == "reset" and self.playing:
            self.player.stop("Paused: reset.")
        with self._from_page():
            method(*args)

    # ------------------------------------------------------------------ the step number shown
    def control_step(self) -> int:
        """The step number shown: that of the point the explorer stands on (the count in
        `history.steps`); in a comparison, the most steps any optimizer has taken."""
        return max(s.step_number for s in self._sessions())

    def control_step_changed(self) -> None:
        self.play_control.step = self.control_step()

    def _note(self, text: str, kind: str = "info") -> None:
        """`text` in the status line and above the diagram: information beside a good step (the
        step is shown), or an error (`kind` "error")."""
        self.status.value = status_html(text, kind) if text else ""
        self.diagram.show_message(text, kind=kind)


class PlayMixin(Playing):
    """StepExplorer's Play / Pause, run record and output area (see the module doc)."""

    # the widget this mixes into (StepExplorer, an ipywidgets.VBox) has these
    session: Any
    children: Any
    observe: Any

    def _sessions(self) -> list:
        return [self.session]

    def _start_play(self) -> None:
        """Called once the explorer's children are set: the output area goes under them."""
        self.lock = self.session.lock  # one change at a time: the player takes it for a step
        self.debug = DebugArea()
        self.player = Player(self, self.play_control)
        self.children = [*self.children, self.debug.widget]
        self.observe(lambda _: self.control_step_changed(), "result")

    # ------------------------------------------------------------------ the record
    @property
    def history(self) -> record.History:
        """The loss at every point visited, starting with the first; the last is `result.loss`.
        A list of floats, with `.steps` (the step number of each point) and `.learning_rates`
        (the rate of the step from each point; NaN where the optimizer fixes it); see record.py."""
        return record.History(self.session.history, self.session.rates)

    def history_dict(self) -> dict[str, list]:
        """The run's record as plain lists: {"step": [...], "loss": [...], "learning_rate": [...]}."""
        return record.history_dict(self.session)

    def to_dataframe(self) -> Any:
        """The run's record as a pandas DataFrame indexed by step (columns loss, learning_rate).
        Needs pandas; `history_dict()` gives the same as plain lists."""
        return record.to_dataframe(self.session)

    def save(self, path: Any) -> Any:
        """Keep this demo in a file (.npz): params, inputs, optimizer state, the record with every
        trajectory, the sliders, the bars and the boxes. A file there that this explorer did not
        write is kept (the demo goes to `name-2.npz`, ...). Returns the path written."""
        with self.session.lock:
            return record.save(self, path, self.__dict__.setdefault("_written", {}))

    def export_html(self, path: Any) -> Any:
        """Keep this run as one HTML file that replays it offline, in any browser, with no kernel
        and no network: a step slider, the bars, the loss line, the diagram's values and every other
        view's text at each point of the record (export.py). A file there that this explorer did not write is kept
        (the page goes to `name-2.html`, ...). Returns the path written."""
        from . import export

        with self.session.lock:
            return export.export_html(self, path, self.__dict__.setdefault("_written", {}))

    @classmethod
    def load(cls, path: Any, loss_fn: Any, params: Any, inputs: Any = None, **kwargs: Any) -> Any:
        """The explorer of a saved demo, at the same step with the same numbers, bit for bit:
        `loss_fn`, `params` (for its structure), `inputs` and keywords (`optimizer=`, ...) as given
        to `StepExplorer`; the numbers, sliders and bars come from the file."""
        return record.load(cls, path, loss_fn, params, inputs, **kwargs)

    @property
    def last_traceback(self) -> str:
        """The traceback of the last step from the page that failed ("" after a good one)."""
        return self.debug.traceback
