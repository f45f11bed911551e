"""The one number formatter: every number pytree-lab shows goes through here.

Display only: the values themselves are never rounded (the trees and the step keep the
user's numbers). Four significant digits, ``0`` for zero (either sign), ``nan``/``inf``/``-inf``
spelled as Python prints them. numpy is imported only when an array is given, so plain-Python
trees format in a kernel without it.
"""

from __future__ import annotations

import functools
import math
import re
from typing import Any

__all__ = [
    "GRID_MAX",
    "visible",
    "isolate_rtl",
    "fmt_number",
    "fmt_array",
    "fmt_grid",
    "fmt_small",
    "grid_cells",
    "grid_rows",
    "nested_text",
]

# Characters that draw nothing or reorder what follows: C0/C1 controls (a newline in a name
# would draw a fake row), bidi marks, embeddings, overrides and isolates (U+202E turns
# `weight` into `thgiew`), zero-width characters (two keys that look equal) and the line and
# paragraph separators.
_INVISIBLE = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200b-\u200f\u2028-\u202e\u2060-\u2069\ufeff]")
_ESCAPES = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escape(match: re.Match[str]) -> str:
    ch = match.group()
    return _ESCAPES.get(ch) or (f"\\x{ord(ch):02x}" if ord(ch) < 0x100 else f"\\u{ord(ch):04x}")


def visible(text: str) -> str:
    """User text (a key, a field name, a path) as it may be shown: control, bidi and zero-width
    characters written as escapes (``\\n``, ``\\u202e``), everything else as it is. A name
    with a newline or a right-to-left override cannot draw a fake row or reverse its neighbours."""
    return _INVISIBLE.sub(_escape, text) if _INVISIBLE.search(text) else text


# A run of right-to-left letters (Hebrew, Arabic, Syriac, Thaana, N'Ko, ...) with the spaces
# and marks inside it: the part of a name to isolate.
_RTL_RUN = re.compile(
    "[\u0590-\u08ff\ufb1d-\ufdff\ufe70-\ufefc\U00010800-\U00010fff\U0001e800-\U0001efff]"
    "(?:[\u0590-\u08ff\ufb1d-\ufdff\ufe70-\ufefc\U00010800-\U00010fff\U0001e800-\U0001efff ]*"
    "[\u0590-\u08ff\ufb1d-\ufdff\ufe70-\ufefc\U00010800-\U00010fff\U0001e800-\U0001efff])?"
)


def isolate_rtl(text: str) -> str:
    """Right-to-left words inside a name put between FIRST STRONG ISOLATE (U+2068) and POP
    DIRECTIONAL ISOLATE (U+2069), for text drawn where no <bdi> can go (an SVG tick, a plain
    message): `وزن[0]` then reads `وزن` then `[0]`, not `[0]وزن`. Apply after `visible`."""
    return _RTL_RUN.sub(lambda m: "\u2068" + m.group() + "\u2069", text)


# Arrays of at most this many elements are shown whole (a 4x4 matrix, a (2, 8) weight).
GRID_MAX = 16
# Bigger arrays show their first few values and a count.
HEAD = 8


def fmt_number(v: Any) -> str:
    """One number as the widgets show it: ``0.1235``, ``-4``, ``1e-07``, ``nan``, ``-inf``."""
    if type(v) is not float:
        if isinstance(v, complex):
            return f"({fmt_number(v.real)}{'-' if v.imag < 0 else '+'}{fmt_number(abs(v.imag))}j)"
        v = float(v)
    text = format(v, ".4g")  # nan, inf and -inf come out as Python prints them
    return "0" if text == "-0" else text


def grid_rows(texts: list[str], shape: tuple) -> list[list[str]]:
    """Formatted values (row-major) cut into the rows of a grid: the last axis across."""
    width = shape[-1] if shape else 1
    if not width:
        return [[]]
    return [texts[k : k + width] for k in range(0, len(texts), width)]


def nested_text(texts: list[str], shape: tuple) -> str:
    """Formatted values (row-major) as one line with numpy's nesting: ``[[1, 2], [3, 4]]``."""
    if not shape:
        return texts[0]
    for n in reversed(shape[1:]):  # nest from the last axis outwards
        texts = ["[" + ", ".join(texts[k : k + n]) + "]" for k in range(0, len(texts), n)] if n else ["[]"]
    return "[" + ", ".join(texts) + "]"


@functools.lru_cache(maxsize=512)
def _templates(shape: tuple) -> tuple[str, str | None]:
    """str.format templates for a small array of this shape: its one-line text and, for 2+
    dimensions, its grid text (values by spaces, rows by newlines). One format call per leaf
    instead of one per value: a 10k-leaf model has 80,000 values to show."""
    slots = ["{:.4g}"] * _size(shape)
    line = nested_text(slots, shape) if shape else slots[0]
    grid = "\n".join(" ".join(r) for r in grid_rows(slots, shape)) if len(shape) >= 2 else None
    return line, grid


@functools.lru_cache(maxsize=512)
def small_templates(shape: tuple) -> tuple[str, str | None]:
    """The same templates as printf-style (``%.4g``) ones, for a tuple of values: ``%`` on a
    tuple formats a leaf's values a quarter faster than str.format, to the same text
    (both are Python's `format(v, ".4g")`)."""
    return tuple(t.replace("{:.4g}", "%.4g") if t is not None else None for t in _templates(shape))  # type: ignore[return-value]


def fmt_small(flat: list, shape: tuple) -> tuple[str, str | None]:
    """A small array (Python floats, row-major) as (one-line text, grid text or None), the same
    numbers `fmt_number` gives. The grid text has the values of a row separated by spaces and
    the rows by newlines (the diagram lays it out as a grid)."""
    if 0.0 in flat:  # -0.0 shows as 0 (adding +0.0 turns -0.0 into 0.0, nothing else changes)
        flat = [v + 0.0 for v in flat]
    line, grid = _templates(shape)
    if grid is None:
        return line.format(*flat), None
    text = grid.format(*flat)
    if len(shape) == 2:  # the one-line text from the grid's: no second formatting of every value
        return "[[" + text.replace(" ", ", ").replace("\n", "], [") + "]]", text
    return line.format(*flat), text


def _values(a: Any) -> tuple[tuple, list]:
    """(shape, flat list of Python numbers) of a scalar, a (nested) list or an array."""
    if isinstance(a, (bool, int, float, complex)):
        return (), [a]
    if isinstance(a, (list, tuple)) and not hasattr(a, "shape"):
        shape: list[int] = []
        level: Any = a
        while isinstance(level, (list, tuple)):
            shape.append(len(level))
            if not level:
                break
            level = level[0]
        flat: list = []
        stack = [a]
        while stack:  # depth-first, row-major
            item = stack.pop()
            if isinstance(item, (list, tuple)):
                stack.extend(reversed(item))
            else:
                flat.append(item)
        return tuple(shape), flat
    import numpy as np  # an array-like means numpy is there

    arr = np.asarray(a)
    if arr.dtype.kind not in "biufc":
        arr = arr.astype(np.float64)
    elif arr.dtype.kind == "f" and arr.dtype.itemsize < 4:  # float16 / bfloat16 print as floats
        arr = arr.astype(np.float32)
    return tuple(arr.shape), arr.ravel().tolist() if arr.size <= GRID_MAX else arr.ravel()[:HEAD].tolist()


def _size(shape: tuple) -> int:
    return math.prod(shape)


def grid_cells(a: Any) -> list[list[str]] | None:
    """The formatted values of a small array (at most GRID_MAX elements) as rows of a grid.

    A matrix gives its rows; an array of more dimensions gives its last axis as rows
    (row-major, like numpy prints it); a vector gives one row. None for bigger arrays.
    """
    shape, flat = _values(a)
    if _size(shape) > GRID_MAX:
        return None
    texts = [fmt_number(v) for v in flat]
    return grid_rows(texts, shape)


def fmt_grid(a: Any) -> str | None:
    """A small array (at most GRID_MAX elements) as aligned text, one line per row::

        [[0.1, -0.4, 0.2],
         [0.3,    0, 0.4]]

    None for bigger arrays (show `fmt_array`'s summary instead).
    """
    shape, _ = _values(a)
    rows = grid_cells(a)
    if rows is None:
        return None
    if len(shape) < 2:
        return fmt_array(a)
    ncols = max((len(r) for r in rows), default=0)
    widths = [max((len(r[j]) for r in rows if j < len(r)), default=0) for j in range(ncols)]
    outer = shape[:-1]  # one text line per index into these axes
    ndim = len(shape)
    lines = []
    for k, row in enumerate(rows):
        index, rem = [], k
        for d in reversed(outer):
            index.append(rem % d)
            rem //= d
        index.reverse()
        opens = next((j for j, (i, d) in enumerate(zip(reversed(index), reversed(outer))) if i != 0), len(outer))
        closes = next((j for j, (i, d) in enumerate(zip(reversed(index), reversed(outer))) if i != d - 1), len(outer))
        cells = ", ".join(t.rjust(widths[j]) for j, t in enumerate(row))
        end = "]" * (closes + 1) + ("" if k == len(rows) - 1 else ",")
        lines.append(" " * (ndim - 1 - opens) + "[" * (opens + 1) + cells + end)
    return "\n".join(lines)


def fmt_array(a: Any, limit: int = HEAD) -> str:
    """An array on one line: a number for a scalar, ``[1, -1]``, ``[[1, 2], [3, 4]]`` for small
    arrays (at most GRID_MAX elements, shown whole), the first `limit` values and a count for
    bigger ones: ``[0.1, 0.2, …] (1000 values)``."""
    shape, flat = _values(a)
    if not shape:
        return fmt_number(flat[0])
    size = _size(shape)
    if size <= GRID_MAX:
        return nested_text([fmt_number(v) for v in flat], shape)
    head = ", ".join(fmt_number(v) for v in flat[:limit])
    return f"[{head}, …] ({size} values)"
