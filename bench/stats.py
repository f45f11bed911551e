"""Summary statistics and the printed tables."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any


def quantile(values: Sequence[float], q: float) -> float:
    """Linear-interpolated quantile (numpy's default), without numpy."""
    xs = sorted(v for v in values if v is not None and math.isfinite(v))
    if not xs:
        return math.nan
    pos = (len(xs) - 1) * q
    lo = math.floor(pos)
    hi = math.ceil(pos)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


def summary(values: Sequence[float]) -> dict:
    xs = [v for v in values if v is not None and math.isfinite(v)]
    return {
        "n": len(xs),
        "median": quantile(xs, 0.5),
        "p95": quantile(xs, 0.95),
        "min": min(xs) if xs else math.nan,
        "max": max(xs) if xs else math.nan,
    }


def cpu_ticks() -> list[int]:
    """/proc/stat's whole-machine CPU ticks: user nice system idle iowait irq softirq steal ([] elsewhere)."""
    try:
        with open("/proc/stat") as f:
            return [int(v) for v in f.readline().split()[1:9]]
    except (OSError, ValueError):
        return []


def cpu_share(before: list[int], after: list[int]) -> str:
    """Between two `cpu_ticks()`: how busy the cores were, and how much of their time the host took
    (steal: a shared virtual machine's CPUs are not all ours; timings stretch with it)."""
    d = [a - b for a, b in zip(after, before)]
    total = sum(d)
    if len(d) < 8 or total <= 0:
        return ""
    busy = total - d[3] - d[4] - d[7]
    return f"CPU busy {100 * busy / total:.0f}%, stolen by the host {100 * d[7] / total:.0f}%"


def fmt(v: Any, unit: str = "", digits: int = 3) -> str:
    if v is None:
        return "—"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, int):
        return f"{v}{unit}"
    if isinstance(v, float):
        if math.isnan(v):
            return "—"
        return f"{v:.{digits}g}{unit}" if abs(v) < 10**digits else f"{v:.0f}{unit}"
    return str(v)


def verdict(ok: bool | None) -> str:
    return "" if ok is None else ("ok" if ok else "MISSED")


@dataclass
class Table:
    title: str
    columns: list[str]
    rows: list[list[str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def add(self, *cells: Any) -> None:
        self.rows.append([c if isinstance(c, str) else fmt(c) for c in cells])

    def render(self) -> str:
        widths = [len(c) for c in self.columns]
        for row in self.rows:
            for i, cell in enumerate(row):
                widths[i] = max(widths[i], len(cell))
        line = "  ".join("-" * w for w in widths)
        out = [self.title, "=" * len(self.title)]
        out.append("  ".join(c.ljust(w) for c, w in zip(self.columns, widths)))
        out.append(line)
        for row in self.rows:
            out.append("  ".join(c.ljust(w) for c, w in zip(row, widths)))
        for note in self.notes:
            out.append(f"  · {note}")
        return "\n".join(out)
