"""What steps run from the page print, and why a step from the page failed, under the explorer.

A slider move, a button click or a played step runs in a widget message handler (or on the
kernel's event loop), where `print` and `jax.debug.print` output belongs to no cell: Jupyter
shows it nowhere. While such a step runs, the output written by its thread goes to the
explorer's `DebugArea` instead: the last `LINES` lines, each cut at `LINE_CHARS`, shown as text
(escaped, never HTML). A step from the page that failed shows its traceback on demand: a
disclosure ("Traceback of the failed step") under the output, closed by default, gone again
after the next good step from the page.

`captured(write)` routes one thread's sys.stdout and sys.stderr writes to `write` while the
block runs; other threads' output (a cell running meanwhile in another thread) goes where it
went. JAX runs `jax.debug.print` callbacks in the thread that runs the step or in one of XLA's
own threads (a compiled loop's): output of threads Python did not start goes to the newest
capture, and the step's pending effects are waited for before the block ends.
"""

from __future__ import annotations

import contextlib
import html
import sys
import threading
from collections import deque
from collections.abc import Callable, Iterator
from typing import Any

import ipywidgets

__all__ = ["DebugArea", "captured"]

_routes: dict[int, Callable[[str], Any]] = {}
_FOREIGN = getattr(threading, "_DummyThread", ())  # threading's object for a thread it did not start
_guard = threading.Lock()


class _Router:
    """Stands in for sys.stdout / sys.stderr while some thread's output is captured."""

    def __init__(self, real: Any):
        self.real = real

    def write(self, text: str) -> int:
        sink = _routes.get(threading.get_ident())
        if sink is None and _routes and isinstance(threading.current_thread(), _FOREIGN):
            # a thread Python did not start: XLA's, running a step's jax.debug.print callback
            sink = next(reversed(_routes.values()), None)
        if sink is None:
            return self.real.write(text)
        with contextlib.suppress(Exception):
            sink(str(text))
        return len(text)

    def flush(self) -> None:
        with contextlib.suppress(Exception):
            self.real.flush()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.real, name)


def _route(on: bool) -> None:
    """Put the routers in sys.stdout / sys.stderr, or take them out (a stream someone else put
    there since is left alone)."""
    for name in ("stdout", "stderr"):
        stream = getattr(sys, name)
        if on != isinstance(stream, _Router):
            setattr(sys, name, _Router(stream) if on else stream.real)


@contextlib.contextmanager
def captured(write: Callable[[str], Any]) -> Iterator[None]:
    """This thread's writes to sys.stdout / sys.stderr go to `write` while the block runs."""
    me = threading.get_ident()
    with _guard:
        outer = _routes.get(me)
        _routes[me] = write
        _route(True)
    try:
        yield
    finally:
        jax = sys.modules.get("jax")
        if jax is not None:  # jax.debug.print output of this step, before the route closes
            with contextlib.suppress(Exception):
                jax.effects_barrier()
        with _guard:
            if outer is None:
                _routes.pop(me, None)
            else:
                _routes[me] = outer
            if not _routes:
                _route(False)


class DebugArea:
    """The bounded output area under the explorer (see the module doc). `widget` is what is shown;
    `text` the lines kept; `traceback` the failed step's traceback ("" when none is shown)."""

    LINES = 12  # all shown at once (no scroll inside: the newest line is always in view)
    LINE_CHARS = 240

    def __init__(self) -> None:
        self.html = ipywidgets.HTML(layout={"width": "100%"}).add_class("pytree-lab-debug")
        self.clear_button = ipywidgets.Button(
            description="Clear output", tooltip="clear the output of steps run from the page", layout={"width": "auto"}
        )
        self.clear_button.on_click(lambda _: self.clear())
        self.widget = ipywidgets.VBox(
            [self.html, self.clear_button], layout={"display": "none", "align_items": "flex-start"}
        ).add_class("pytree-lab-debug-area")
        self.lines: deque[str] = deque(maxlen=self.LINES)
        self.dropped = 0  # lines that scrolled out
        self._partial = ""  # the line being written (no newline yet)
        self.traceback = ""
        self._shown = ""

    @property
    def text(self) -> str:
        return "\n".join([*self.lines, *([self._partial] if self._partial else [])])

    def write(self, text: str) -> None:
        parts = (self._partial + text).split("\n")
        self._partial = parts.pop()[: self.LINE_CHARS * 4]
        for line in parts:
            if len(self.lines) == self.LINES:
                self.dropped += 1
            self.lines.append(line if len(line) <= self.LINE_CHARS else line[: self.LINE_CHARS - 1] + "…")

    def failed(self, traceback: str) -> None:
        """After a step from the page: its traceback when it failed, or "" (a good step)."""
        self.traceback = traceback
        self.show()

    def clear(self) -> None:
        self.lines.clear()
        self._partial, self.dropped, self.traceback = "", 0, ""
        self.show()

    def show(self) -> None:
        """Draw what is kept (nothing shown when there is nothing to show)."""
        esc = html.escape
        parts = []
        text = self.text
        if text:
            more = f" ({self.dropped} earlier lines not kept)" if self.dropped else ""
            parts.append(
                f'<div class="ptl-debug-title">Output of steps run from the page, last {self.LINES} lines'
                f"{more}:</div>"
                f'<pre class="ptl-debug-out" role="log" aria-label="output of steps run from the page">'
                f"{esc(text)}</pre>"
            )
        if self.traceback:
            parts.append(
                '<details class="ptl-debug-traceback"><summary>Traceback of the failed step</summary>'
                f"<pre>{esc(self.traceback)}</pre></details>"
            )
        value = "".join(parts)
        if value != self._shown:
            self._shown = value
            self.html.value = value
            self.widget.layout.display = "flex" if value else "none"
