"""A run as one HTML file that replays it offline: `StepExplorer.export_html(path)`.

The page holds every point of the record (`session.trail`, beside `history`): a step slider, the
before/after bars of the explorer's bar elements, the loss line with a marker at the step, the
aligned diagram drawn by the widget's own module (static/diagram.js) from a small in-page model,
and the text of every other view the registry draws in a replay (views.py). No kernel, no
network: the scripts, styles and numbers are in the file (its CSP allows nothing else).

Each point is the step the live explorer shows there, computed again by the same compiled step
from the point's kept params and optimizer state (the trail keeps no gradients) and drawn by
new views of the explorer's own classes (`ViewSet.again("replay")`), each keeping its `replay()`:
the diagram's rows are the live widget's rows at that step, text for text. The loss line is
`history`, the bars' values the trail's params and the step's `updated`.

Size: about (points x the diagram rows' text) of JSON; a 100-step 2-8-2 MLP with Adam is a few
hundred kB. A run past `MAX_BYTES` is refused with what to do instead (`ex.save`).
"""

from __future__ import annotations

import json
import math
import pathlib
from typing import Any

from ..formatting import fmt_number, short_error
from ..guard import TimeBudgetExceeded
from ..page import SHARED_JS, STATIC
from . import record
from .views import ViewSet

__all__ = ["export_html", "page_data", "MAX_BYTES"]

MAX_BYTES = 50_000_000  # the page's data at most (a bigger run: ex.save, or a shorter one)


def _num(x: float) -> float | None:
    return x if math.isfinite(x) else None  # JSON has no NaN (a point with none: null)


def page_data(ex: Any) -> dict:
    """The numbers the page replays, by point: what `export_html` embeds (JSON-ready)."""
    s = ex.session
    points = min(len(s.trail), len(s.history))
    if not points:
        raise ValueError("There is no run to export yet: the explorer has no step on record (take a step first).")
    live = ex.diagram
    views = ViewSet(s, "replay", **ex.views.options)  # the explorer's views (registry), drawn here at each point
    views["DiagramView"].diagram.foldable_open = live.foldable_open
    kept: dict[str, list] = {name: [] for name in views}
    other = []
    _, inputs, _ = s.gather()
    try:  # a step that fails, or a run too big, leaves no widget behind
        for t in range(points):
            try:
                result = s.step_at(t, inputs)
            except BaseException as err:  # the user's loss (SystemExit included): one sentence, not its traceback
                if isinstance(err, KeyboardInterrupt):
                    raise
                why = " within the time budget." if isinstance(err, TimeBudgetExceeded) else f": {short_error(err)}"
                raise ValueError(f"Point {t} of the run could not be computed again{why}") from None
            if not math.isclose(result.loss, s.history[t], rel_tol=1e-4, abs_tol=1e-7):
                other.append(t)  # the inputs or the loss changed since this point
            views.show(result)
            for name, view in views.items():
                kept[name].append(view.replay())
            if t == 0:  # the first point says the page's size (a bar: 4 numbers): a run far too big stops here
                _fits(points * (len(json.dumps([v[0] for v in kept.values()])) + 64 * len(views["ChartView"].elements)))
        fixed = views["DiagramView"].diagram.get_state(
            ["columns", "foldable", "foldable_open", "message", "message_kind"]
        )
        elements = views["ChartView"].elements
    finally:
        views.close(widgets=True)
    losses = list(s.history[:points])
    cut = (
        f" The trajectories kept the first {points:,} of {len(s.history):,} points (record.TRAIL_NUMBERS)."
        if points < len(s.history)
        else ""
    )
    if other:
        cut += (
            f" At {len(other)} step(s) (first: {other[0]}) the loss recorded differs from the step computed "
            "again with the explorer's inputs and loss now (they changed during the run): the diagram and "
            "the bars' after there are the step with the inputs and loss now."
        )
    before, after = zip(*kept.pop("ChartView"))
    return {
        "title": "pytree-lab replay",
        "note": f"{points} points, recorded by StepExplorer; replayed without a kernel.{cut}",
        "start": points - 1,
        "loss": [_num(v) for v in losses],
        "loss_text": [fmt_number(v) for v in losses],
        "rate_text": ["" if math.isnan(r) else fmt_number(r) for r in s.rates[:points]],
        "log_scale": bool(ex.log_scale_box.value),
        "bars": {
            "labels": [e.label for e in elements],
            "paths": [e.path for e in elements],
            "before": [[_num(v) for v in row] for row in before],
            "after": [[_num(v) for v in row] for row in after],
            "before_text": [[fmt_number(v) for v in row] for row in before],
            "after_text": [[fmt_number(v) for v in row] for row in after],
        },
        "diagram": {
            **fixed,
            "caption": live.caption,
            "selected_path": live.selected_path,
            "collapsed": list(live.collapsed),
            "steps": kept.pop("DiagramView"),
        },
        # every other view: its text at each point (one text where it never changes), as text
        "views": [{"name": n, "text": v[0] if v.count(v[0]) == len(v) else v} for n, v in kept.items() if any(v)],
    }


def _fits(size: int) -> None:
    if size > MAX_BYTES:
        raise ValueError(
            f"This run is too big for one page: about {size:,} bytes of numbers (at most {MAX_BYTES:,}). "
            "Export a shorter run (reset, then fewer steps), or keep it whole with ex.save(path)."
        )


def page(data: dict) -> str:
    """The page's HTML text for `data` (from `page_data`)."""
    blob = json.dumps(data, allow_nan=False, separators=(",", ":"))  # < > & as JSON escapes: it cannot end its script
    blob = blob.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
    _fits(len(blob))
    module = (STATIC / "diagram.js").read_text(encoding="utf-8").replace("export default { render };", "")
    replay = (STATIC / "_replay.js").read_text(encoding="utf-8")
    code = "\n".join([SHARED_JS, module, replay, "replayPage({ render });"])
    if "</script" in code.lower():  # (never so: a test reads the modules as they ship)
        raise ValueError("a static module contains </script>")
    css = "\n".join((STATIC / name).read_text(encoding="utf-8") for name in ("diagram.css", "_replay.css"))
    return (
        '<!doctype html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        '<meta name="color-scheme" content="light dark">\n'
        '<meta http-equiv="Content-Security-Policy" content="default-src \'none\'; '
        "script-src 'unsafe-inline'; style-src 'unsafe-inline'\">\n"
        f"<title>pytree-lab replay</title>\n<style>\n{css}\n</style>\n</head>\n<body>\n"
        '<main class="ptl-replay" id="ptl-replay"></main>\n'
        f'<script type="application/json" id="ptl-replay-data">{blob}</script>\n'
        f'<script type="module">\n{code}\n</script>\n</body>\n</html>\n'
    )


def export_html(ex: Any, path: Any, written: dict) -> pathlib.Path:
    """Write the replay page of `ex`'s run to `path` (.html) by `record.write_new`."""
    text = page(page_data(ex))
    return record.write_new(path, ".html", written, lambda f: f.write(text.encode("utf-8")))
