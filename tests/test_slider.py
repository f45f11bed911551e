"""Slider in the kernel: exact values, scale-aware ranges, moves as messages, page writes refused."""

from __future__ import annotations

import asyncio

import pytest

from pytree_lab.formatting import elide, short_labels
from pytree_lab.slider import Slider, span


def move(s: Slider, value, seq) -> None:
    """What the page sends for one input event."""
    s._handle_custom_msg({"type": "move", "value": value, "seq": seq}, [])


@pytest.mark.parametrize(
    "value, lo, hi, step",
    [
        (2.0, -2.0, 6.0, 0.01),  # the lesson's x[0]: End jumps to 6
        (0.0, -2.0, 2.0, 0.01),
        (-1.0, -3.0, 1.0, 0.01),
        (3.0, -3.0, 9.0, 0.01),
        (100.0, -100.0, 300.0, 0.5),
        (-0.0026, -0.01, 0.01, 1e-05),  # small initial weights get a fine, log-aware step
        (0.05, -0.1, 0.1, 0.0001),
        (1e-7, -1e-06, 1e-06, 1e-09),
    ],
)
def test_span_follows_the_scale(value, lo, hi, step):
    assert span(value) == (lo, hi, step)
    assert lo <= value <= hi
    assert repr(step) in ("0.01", "0.5", "1e-05", "0.0001", "1e-09")  # decimals, not 1.0000000000000001e-05


def test_value_is_kept_exactly_until_moved():
    for v in (0.123456, -0.987654, 0.3333333, 2.71828, -0.0026):
        s = Slider(v, description="w")
        assert s.value == v and s.get_state()["value"] == v
        assert s.min <= v <= s.max


def test_moves_apply_the_newest_and_ignore_older():
    s = Slider(2.0, description="x[0]")
    seen = []
    s.observe(lambda c: seen.append(c["new"]), "value")
    move(s, 2.01, 1)
    assert s.value == 2.01 and s.ack == 1
    move(s, 2.0, 1)  # a repeat of seq 1 (or an older one) changes nothing
    move(s, 1.5, 0)
    assert s.value == 2.01 and seen == [2.01]
    move(s, 2.03, 3)
    assert s.value == 2.03 and s.ack == 3 and seen == [2.01, 2.03]


def test_a_burst_collapses_to_the_last_value_in_a_running_loop():
    s = Slider(0.0, description="bias")
    seen = []
    s.observe(lambda c: seen.append(c["new"]), "value")

    async def burst():
        for k in range(1, 11):
            move(s, k / 100, k)
        # the first move came after a pause and was applied at once; the others, read back
        # to back, wait: nothing computed for them while messages are still being read
        assert seen == [0.01]
        await asyncio.sleep(0.05)  # the flush waits for a quiet millisecond

    asyncio.run(burst())
    assert seen == [0.01, 0.1] and s.ack == 10 and s.moves == 2


def test_a_move_after_a_pause_is_applied_inside_its_own_message():
    s = Slider(0.0, description="bias")
    seen = []
    s.observe(lambda c: seen.append(c["new"]), "value")

    async def pauses():
        move(s, 0.5, 1)
        assert seen == [0.5]  # no wait: the views' messages leave before the kernel goes idle
        await asyncio.sleep(Slider._LEAD_GAP * 2)
        move(s, 0.25, 2)
        assert seen == [0.5, 0.25]
        move(s, 0.75, 3)  # right after the last one: deferred until the quiet interval
        assert seen == [0.5, 0.25]
        await asyncio.sleep(0.05)

    asyncio.run(pauses())
    assert seen == [0.5, 0.25, 0.75] and s.ack == 3 and s.moves == 3


@pytest.mark.parametrize(
    "content",
    [
        {"type": "move", "value": float("nan"), "seq": 1},
        {"type": "move", "value": "1.0", "seq": 1},
        {"type": "move", "value": True, "seq": 1},
        {"type": "move", "value": 1.0, "seq": "1"},
        {"type": "other"},
        ["move", 1.0],
    ],
)
def test_malformed_moves_are_ignored(content):
    s = Slider(0.5, description="w")
    s._handle_custom_msg(content, [])
    assert s.value == 0.5 and s.ack == 0


def test_a_move_outside_the_range_is_refused_but_acknowledged():
    # the page sends its next move only once the last is acknowledged: a refused move must be
    # acknowledged too, or the page would wait on it
    s = Slider(0.5, description="w")
    s._handle_custom_msg({"type": "move", "value": 99.0, "seq": 1}, [])
    assert s.value == 0.5 and s.ack == 1 and s.moves == 0
    move(s, 0.75, 2)
    assert s.value == 0.75 and s.ack == 2


def test_a_refused_move_behind_a_pending_one_acknowledges_with_the_last_good_value():
    s = Slider(0.5, description="w")
    seen = []
    s.observe(lambda c: seen.append(c["new"]), "value")

    async def queued():
        s._last_move_at = asyncio.get_running_loop().time()  # a drag in progress: moves wait
        move(s, 0.6, 1)
        s._handle_custom_msg({"type": "move", "value": -99.0, "seq": 2}, [])
        await asyncio.sleep(0.1)

    asyncio.run(queued())
    assert seen == [0.6] and s.ack == 2


@pytest.mark.parametrize(
    "trait, value",
    [
        ("value", 0.5),
        ("min", -100.0),
        ("max", 100.0),
        ("step", 0.5),
        ("description", "<b>x</b>"),
        ("path", "p"),
        ("ack", 99),
    ],
)
def test_the_page_may_not_write_any_trait(trait, value):
    s = Slider(0.123456, description="w", path="params['w'][0]")
    before = {k: getattr(s, k) for k in ("value", "min", "max", "step", "description", "path", "ack")}
    s.set_state({trait: value})  # a crafted update message from the page
    assert {k: getattr(s, k) for k in before} == before


def test_a_value_outside_the_range_from_python_widens_the_range():
    s = Slider(2.0, description="x[0]")
    assert (s.min, s.max) == (-2.0, 6.0)
    s.value = 40.0
    assert s.value == 40.0  # kept as given, never clamped
    assert s.min == -2.0 and s.max >= 40.0 and s.widened == (-2.0, 6.0)
    s.value = float("inf")  # kept too; the page gets null (strict JSON)
    assert s.get_state()["value"] is None


def test_short_labels_keep_their_start_and_end():
    # cut in the middle, whole keys first: the first key and the element stay
    assert elide("weight[0]", 18) == "weight[0]"
    assert elide("encoder/layers/3/attention/kernel[1,2]", 24) == "encoder/…/kernel[1,2]"
    assert elide("encoder/layers/3/attention/kernel[1,2]", 31) == "encoder/…/attention/kernel[1,2]"
    # no room for the first key whole: its start, then the last key whole
    assert elide("encoder_layer_number_3/kernel[1,2]", 24) == "encoder_lay…/kernel[1,2]"
    # one long key: its first 7 and last 16 characters
    assert elide("a" * 20 + "b" * 20, 24) == "a" * 7 + "…" + "b" * 16
    # two labels that would read alike grow until they differ; a repeated one gets its position
    assert short_labels(["layers[0]/attention/query/w[0,0]", "layers[1]/attention/query/w[0,0]", "w", "w"]) == [
        "layers[0]/…/query/w[0,0]",  # 24 characters: as many keys from the end as fit
        "layers[1]/…/query/w[0,0]",
        "w #2",
        "w #3",
    ]
