"""Every timing constant of a slider move in the kernel, in one place (seconds).

A move travels: the page (static/slider.js) keeps one move in flight and holds the newest
position until the kernel acknowledges the last (or `PAGE_HOLD`, should an ack be lost);
`Slider` (slider.py) applies the newest of the moves the kernel has read, coalescing a burst;
the explorer's `Schedule` (explorer/schedule.py) draws the fast views (the bars) with every
applied move and the slow ones (diagram, worked calculation, loss line) when a drag pauses.
The classes read their constants from here (as class attributes, which a test may change for
one object); tests/test_timing.py checks the relations the comments below rely on.
"""

from __future__ import annotations

# ---- the page (static/slider.js; written here so the kernel's numbers can be checked against it)
PAGE_HOLD = 0.25  # slider.js HOLD_MS: a held position goes out after this even without an ack

# ---- Slider: applying the page's moves (slider.py, `_schedule_flush`)
SLIDER_LEAD_GAP = 0.03  # a move this long after the previous move and flush is applied at once
SLIDER_QUIET = 0.001  # otherwise applied once no move came for this long (queued moves collapse) ...
SLIDER_MAX_QUIET = 0.02  # ... or a quarter of the last step when that was slow, at most this
SLIDER_MAX_WAIT = 0.05  # a steady stream of moves is applied at least this often

# ---- Schedule: when the explorer's views are drawn (explorer/schedule.py)
DRAG_GAP = 0.2  # between two slider moves' steps: they are one drag
VIEWS_TRAIL = 0.15  # of pause in a drag after which the slow views follow
VIEWS_EVERY = 0.5  # the slow views follow a long drag at least this often
VIEWS_SOON = 0.04  # after a single move's fast views, its slow views follow

# ---- Player: steps played one after another (explorer/play.py)
PLAY_ACK_TIMEOUT = 5.0  # a shown explorer waits this long for the page's answer to a played frame
