"""A run as one HTML file that replays it offline: `StepExplorer.export_html(path)`.

The page holds every point of the record (`session.trail`, beside `history`): a step slider, the
before/after bars of the explorer's bar elements, the loss line with a marker at the step, and
the aligned diagram drawn by the widget's own module (static/diagram.js) from a small in-page
model. No kernel, no network: the scripts, styles and numbers are in the file (its CSP allows
nothing else).

Each point's diagram is the step the live explorer shows there, computed again by the same
compiled step from the point's kept params and optimizer state (the trail keeps no gradients):
the rows are built by the diagram's own code (`PytreeDiagram.set_trees`, the explorer's
`columns`), so they are the live widget's rows at that step, text for text. The loss line is
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

__all__ = ["export_html", "page_data", "MAX_BYTES"]

MAX_BYTES = 50_000_000  # the page's data at most (a bigger run: ex.save, or a shorter one)


def _num(x: float) -> float | None:
    return x if math.isfinite(x) else None  # JSON has no NaN (a point with none: null)


def page_data(ex: Any) -> dict:
    """The numbers the page replays, by point: what `export_html` embeds (JSON-ready)."""
    from ..diagram import PytreeDiagram
    from .optimizer import columns, foldable
    from .sliders import bar_values

    s, eng = ex.session, ex.session.engine
    points = min(len(s.trail), len(s.history))
    if not points:
        raise ValueError("There is no run to export yet: the explorer has no step on record (take a step first).")
    live = ex.diagram
    diagram = PytreeDiagram()
    diagram.foldable_open = live.foldable_open
    elements = ex.views["ChartView"]._ready()
    state_def = eng.tree_structure(s.opt_state) if s.opt_state is not None else None
    _, inputs, _ = s.gather()
    steps, before, after, other = [], [], [], []
    try:  # a step that fails, or a run too big, leaves no widget behind
        for t in range(points):  # each point's numbers as arrays placed as a live step's are: no compile again
            params_leaves, state_leaves = ([s._frozen(eng.numpy.asarray(x)) for x in xs] for xs in s.trail[t])
            params = eng.tree_unflatten(s._param_def, params_leaves)
            state = eng.tree_unflatten(state_def, state_leaves) if state_def is not None else None
            try:
                result = s.step_from(params, state, inputs, s.rates[t])
            except TimeBudgetExceeded:
                raise ValueError(f"Point {t} of the run could not be computed again within the time budget.") from None
            except KeyboardInterrupt:
                raise
            except BaseException as err:  # the user's loss (SystemExit included): one sentence, not its traceback
                raise ValueError(f"Point {t} of the run could not be computed again: {short_error(err)}") from None
            if not math.isclose(result.loss, s.history[t], rel_tol=1e-4, abs_tol=1e-7):
                other.append(t)  # the inputs or the loss changed since this point
            trees, extra = columns(s, result)
            diagram.foldable = foldable(trees, extra)
            diagram.set_trees(trees, order=s.param_summary, extra=extra, fold=False)
            got = diagram.get_state(["rows", "panels", "counts"])
            if t == 0:  # the first point's rows say the page's size: a run far too big stops here
                _fits(points * (len(got["rows"]) + len(got["panels"]) + 64 * len(elements)))  # a bar: 4 numbers
            steps.append(
                {"rows": json.loads(got["rows"]), "panels": json.loads(got["panels"]), "counts": got["counts"]}
            )
            b, a = bar_values(eng, result, elements)
            before.append(b)
            after.append(a)
        fixed = diagram.get_state(["columns", "foldable", "foldable_open", "message", "message_kind"])
    finally:
        diagram.close()
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
            "steps": steps,
        },
    }


def _fits(size: int) -> None:
    if size > MAX_BYTES:
        raise ValueError(
            f"This run is too big for one page: about {size:,} bytes of numbers (at most {MAX_BYTES:,}). "
            "Export a shorter run (reset, then fewer steps), or keep it whole with ex.save(path)."
        )


def _script_safe(text: str) -> str:
    """JSON text that cannot end its <script> element: <, > and & as JSON escapes."""
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def page(data: dict) -> str:
    """The page's HTML text for `data` (from `page_data`)."""
    blob = _script_safe(json.dumps(data, allow_nan=False, separators=(",", ":")))
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
