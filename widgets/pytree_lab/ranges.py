"""Slider ranges that follow a value's scale, and the charts' round steps (no widgets here: the
slider plan uses them without importing anywidget); `slider` re-exports `span`."""

from __future__ import annotations

import math

__all__ = ["span", "nice"]


def nice(x: float) -> float:
    """1, 2 or 5 times a power of ten, at least `x` (a step a reader can add up; 1 for no number)."""
    if not math.isfinite(x) or x <= 0:
        return 1.0
    power = 10.0 ** math.floor(math.log10(x))
    return _round(next((m * power for m in (1, 2, 5) if x <= m * power * (1 + 1e-12)), 10 * power))


def _round(x: float) -> float:
    """A power-of-ten multiple written as the decimal it means (1e-05, not 1.0000000000000001e-05)."""
    return float(f"{x:.12g}")


def span(value: float) -> tuple[float, float, float]:
    """Slider (min, max, step) around a starting value, following its scale.

    Values of magnitude 0.1 or more (and exact zeros) keep the lesson's ranges: width
    max(2, 2|v|) on each side, rounded out to integers, step 0.01 (coarser for wide ranges).
    Smaller values are log-aware: the range is the next power of ten on each side and the
    step a thousandth of it, so -0.0026 gets [-0.01, 0.01] in steps of 0.00001.
    """
    v = float(value)
    if not math.isfinite(v):
        return -1.0, 1.0, 0.01
    m = abs(v)
    if m == 0 or m >= 0.1:
        width = max(2.0, 2 * m)
        step = 0.01 if width <= 10 else nice(width / 500)
        return float(math.floor(v - width)), float(math.ceil(v + width)), step
    top = _round(10.0 ** math.ceil(math.log10(m) + 1e-12))
    if top < 2 * m:  # keep the value away from the ends
        top = _round(top * 10)
    return -top, top, _round(top / 1000)
