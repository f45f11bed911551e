"""The timing constants of a slider move live in one place (pytree_lab/timing.py), the classes
read them from there, and they keep the relations the coalescing and the schedule rely on."""

from __future__ import annotations

import re
from pathlib import Path

from pytree_lab import timing
from pytree_lab.explorer.play import Player
from pytree_lab.explorer.schedule import Schedule
from pytree_lab.slider import Slider

STATIC = Path(timing.__file__).parent / "static"


def test_the_classes_read_their_constants_from_one_place():
    assert (Slider._LEAD_GAP, Slider._QUIET, Slider._MAX_QUIET, Slider._MAX_WAIT) == (
        timing.SLIDER_LEAD_GAP,
        timing.SLIDER_QUIET,
        timing.SLIDER_MAX_QUIET,
        timing.SLIDER_MAX_WAIT,
    )
    assert (Schedule.DRAG_GAP, Schedule.VIEWS_TRAIL, Schedule.VIEWS_EVERY, Schedule.VIEWS_SOON) == (
        timing.DRAG_GAP,
        timing.VIEWS_TRAIL,
        timing.VIEWS_EVERY,
        timing.VIEWS_SOON,
    )
    assert Player.ACK_TIMEOUT == timing.PLAY_ACK_TIMEOUT


def test_the_pages_hold_is_the_one_written_down():
    source = (STATIC / "slider.js").read_text(encoding="utf-8")
    (hold_ms,) = re.findall(r"const HOLD_MS = (\d+);", source)
    assert int(hold_ms) / 1000 == timing.PAGE_HOLD


def test_the_constants_keep_their_relations():
    t = timing
    # the slider's quiet interval is bounded, and a stream of moves is applied before it waits long
    assert 0 < t.SLIDER_QUIET <= t.SLIDER_MAX_QUIET < t.SLIDER_MAX_WAIT
    # a move the slider applies at once after a pause may still belong to a drag: its step comes
    # within DRAG_GAP of the last one, so the slow views are not redrawn for every move of a drag
    assert t.SLIDER_LEAD_GAP < t.DRAG_GAP
    # moves coalesced by the slider come well inside a drag's gap and pause
    assert t.SLIDER_MAX_WAIT < t.VIEWS_TRAIL < t.DRAG_GAP
    # the slow views follow a single move soon, sooner than a drag's pause, and a long drag still
    # sees them at least every VIEWS_EVERY
    assert 0 < t.VIEWS_SOON < t.VIEWS_TRAIL < t.VIEWS_EVERY
