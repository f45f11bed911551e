"""The one number formatter: every number pytree-lab shows goes through here.

Display only: the values themselves are never rounded (the trees and the step keep the
user's numbers). Four significant digits, ``0`` for zero (either sign), ``nan``/``inf``/``-inf``
spelled as Python prints them. numpy is imported only when an array is given, so plain-Python
trees format in a kernel without it.
"""

from __future__ import annotations

import contextlib
import functools
import math
import re
from collections import Counter
from typing import Any

__all__ = [
    "GRID_MAX",
    "visible",
    "isolate_rtl",
    "fmt_number",
    "fmt_array",
    "fmt_small",
    "fmt_value",
    "grid_rows",
    "grid_lines",
    "nested_text",
    "elide",
    "short_labels",
    "short_error",
    "clip",
    "error_name",
    "error_text",
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
_RTL = "\u0590-\u08ff\ufb1d-\ufdff\ufe70-\ufefc\U00010800-\U00010fff\U0001e800-\U0001efff"
_RTL_RUN = re.compile(f"[{_RTL}](?:[{_RTL} ]*[{_RTL}])?")


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


def index_text(position: int, shape: tuple) -> str:
    """The element at row-major `position` of an array of `shape` as its index, ``1,0,2``."""
    idx = []
    for d in reversed(shape):
        position, i = divmod(position, d)
        idx.append(str(i))
    return ",".join(reversed(idx))


def grid_rows(texts: list[str], shape: tuple) -> list[list[str]]:
    """Formatted values (row-major) as the rows of a grid, in the array's own shape: a matrix's
    rows with the last axis across ((2, 8): 2 rows of 8, never rewrapped); an array of more
    dimensions as its 2-D slices, each after a label row of one cell (`[0,:,:]`, `[1,:,:]`)."""
    width = shape[-1] if shape else 1
    if not width:
        return [[]]
    rows = [texts[k : k + width] for k in range(0, len(texts), width)]
    if len(shape) < 3 or not rows:
        return rows
    height, out = shape[-2], []
    for s in range(len(rows) // max(height, 1)):
        out.append([f"[{index_text(s, shape[:-2])},:,:]"])
        out.extend(rows[s * height : (s + 1) * height])
    return out


def is_slice_label(row: list[str] | tuple) -> bool:
    """Whether a grid row is a slice's label (`[0,:,:]`), not values."""
    return len(row) == 1 and row[0].startswith("[")


def grid_lines(rows: list | tuple) -> list[str]:
    """Grid rows as aligned text lines, one per row (a slice label on a line of its own): every
    value right-aligned to its column's widest, the text form of what the diagram draws."""
    values = [r for r in rows if not is_slice_label(r)]
    ncols = max((len(r) for r in values), default=0)
    widths = [max((len(r[j]) for r in values if j < len(r)), default=0) for j in range(ncols)]
    return [r[0] if is_slice_label(r) else "[" + "  ".join(t.rjust(w) for t, w in zip(r, widths)) + "]" for r in rows]


def nested_text(texts: list[str], shape: tuple) -> str:
    """Formatted values (row-major) as one line with numpy's nesting: ``[[1, 2], [3, 4]]``."""
    if not shape:
        return texts[0]
    for n in reversed(shape[1:]):  # nest from the last axis outwards
        texts = ["[" + ", ".join(texts[k : k + n]) + "]" for k in range(0, len(texts), n)] if n else ["[]"]
    return "[" + ", ".join(texts) + "]"


@functools.lru_cache(maxsize=512)
def small_templates(shape: tuple) -> tuple[str, str | None]:
    """printf-style (``%.4g``) templates for a small array of this shape: its one-line text and,
    for 2+ dimensions, its grid text (values by spaces, rows by newlines). One ``%`` on a tuple
    per leaf (a quarter faster than str.format, the same text: both are `format(v, ".4g")`)
    instead of a call per value: a 10k-leaf model has 80,000 values to show."""
    slots = ["%.4g"] * math.prod(shape)
    line = nested_text(slots, shape) if shape else slots[0]
    grid = "\n".join(" ".join(r) for r in grid_rows(slots, shape)) if len(shape) >= 2 else None
    return line, grid


def fmt_small_rows(rows: list[tuple], shape: tuple) -> list[tuple[str, str | None]]:
    """Small arrays of one shape (tuples of Python floats, row-major, -0.0 already made 0) as
    (one-line text, grid text or None) each, the numbers `fmt_number` gives."""
    line, grid = small_templates(shape)
    if grid is None:
        return [(line % t, None) for t in rows]
    out: list[tuple[str, str | None]] = []
    for t in rows:
        text = grid % t  # a matrix's one-line text from its grid's: no second formatting of every value
        out.append(("[[" + text.replace(" ", ", ").replace("\n", "], [") + "]]" if len(shape) == 2 else line % t, text))
    return out


def fmt_small(flat: list, shape: tuple) -> tuple[str, str | None]:
    """A small array (Python floats, row-major) as (one-line text, grid text or None), the
    numbers `fmt_number` gives (`small_templates`)."""
    if 0.0 in flat:  # -0.0 shows as 0 (adding +0.0 turns -0.0 into 0.0, nothing else changes)
        flat = [v + 0.0 for v in flat]
    return fmt_small_rows([tuple(flat)], shape)[0]


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


def fmt_array(a: Any, limit: int = HEAD) -> str:
    """An array on one line: a number for a scalar, ``[1, -1]``, ``[[1, 2], [3, 4]]`` for small
    arrays (at most GRID_MAX elements, shown whole), the first `limit` values and a count for
    bigger ones: ``[0.1, 0.2, …] (1000 values)``."""
    shape, flat = _values(a)
    if not shape:
        return fmt_number(flat[0])
    size = math.prod(shape)
    if size <= GRID_MAX:
        return nested_text([fmt_number(v) for v in flat], shape)
    head = ", ".join(fmt_number(v) for v in flat[:limit])
    return f"[{head}, …] ({size} values)"


def fmt_value(a: Any) -> tuple[str, tuple]:
    """(one-line text, grid rows) of a number or array, as the worked calculation shows it: a
    scalar and a small array whole (`fmt_array`), a small matrix or more dimensions also as its
    grid (`grid_rows`: its own shape), a bigger leaf by its first values, shape, count and mean."""
    import numpy as np

    from .summaries import _reducer, on_host, to_host

    far = not on_host(a) and a.size > GRID_MAX and a.dtype.kind in "fiub"
    arr = np.asarray(to_host(a)) if not far else a  # on an accelerator: its first values and mean come over
    if arr.dtype.kind not in "fiub":
        return str(a), ()
    if arr.size <= GRID_MAX:
        arr = arr.astype(np.float64)
        texts = [fmt_number(v) for v in arr.ravel().tolist()]
        grid = tuple(map(tuple, grid_rows(texts, arr.shape))) if arr.ndim >= 2 else ()
        return nested_text(texts, arr.shape), grid
    if far:
        bad, m, _, _, flat = to_host(_reducer(HEAD)(a))
        mean = fmt_number(float(m)) if bad < a.size else "nan"
    else:
        flat = arr.astype(np.float64).ravel()
        finite = flat[np.isfinite(flat)]
        mean = fmt_number(float(finite.mean())) if finite.size else "nan"
    shape = "" if arr.ndim == 1 else "×".join(map(str, arr.shape)) + ", "
    head = ", ".join(fmt_number(v) for v in flat[:HEAD].astype(np.float64).tolist())
    return f"[{head}, …] ({shape}{arr.size} values, mean {mean})", ()


def elide(label: str, limit: int) -> str:
    """`label` in at most about `limit` characters, cut in the middle, never at its start: whole
    keys from the middle, keeping as many at its start and end as fit, more at the end first
    (`layers[0]/…/weight[0,0]`, `encoder/layers[1]/…/weight[0,0]`); where even that is
    too long, the start of its first keys and its last key whole (`encoder_lay…/kernel[0,0]`),
    else its first and last characters (`a_really_lo…lecture[0]`)."""
    if len(label) <= limit:
        return label
    parts = label.split("/")
    n = len(parts)
    # whole keys dropped from the middle: the longest form that fits, more keys from the end first
    forms = [
        (len(text), k, text)
        for h in range(1, n - 1)
        for k in range(1, n - h)
        if len(text := "/".join(parts[:h]) + "/…/" + "/".join(parts[-k:])) <= limit
    ]
    if forms:
        return max(forms)[2]
    if len(parts) > 1 and limit - 2 - len(parts[-1]) >= 3:  # the last key whole, the start cut
        return label[: limit - 2 - len(parts[-1])] + "…/" + parts[-1]
    tail = max(limit // 2, limit - 8)
    return label[: limit - 1 - tail] + "…" + label[-tail:]


def short_labels(labels: list[str], limit: int = 24) -> list[str]:
    """`elide` of each label, no two on one screen alike, all cut to one length: the leading keys
    every label of three or more keys shares are dropped first where they would be cut, as many
    as make them fit, up to a layer's name (`params/Dense_2/kernel[0,0]` beside
    `params/Dense_0/bias[0]`: `Dense_2/kernel[0,0]`), then
    where two would read the same (`Dense_0/…/kernel[0,0]`, `Dense_1/…/kernel[0,0]`) every cut
    grows until none do. A label given twice gets its position (`w #3`)."""
    seen = Counter(labels)
    names = [f"{t} #{i}" if seen[t] > 1 else t for i, t in enumerate(labels)]
    keys = [name.split("/") for name in names if name.count("/") >= 2]
    common = min((len(k) - 2 for k in keys), default=0)
    common = next((j for j in range(common) if len({k[j] for k in keys}) > 1), common)
    # as few as make the longest fit (all it shares where none do): one cut for every label
    drop = next((j for j in range(common) if max(len("/".join(k[j:])) for k in keys) <= limit), common)
    shorter = ["/".join(name.split("/")[drop:]) if name.count("/") >= 2 else name for name in names]
    names = shorter if len(set(shorter)) == len(names) else names
    longest = max(map(len, names), default=0)
    out = [elide(name, limit) for name in names]
    while limit < longest and len(set(out)) < len(out):
        limit += 1
        out = [elide(name, limit) for name in names]
    return out if len(set(out)) == len(out) else names


def clip(text: str, limit: int) -> str:
    """`text` in at most `limit` characters, cut between words (never inside one) with " …"."""
    if len(text) <= limit:
        return text
    head = text[: limit - 1]
    return (head.rsplit(" ", 1)[0] if " " in head else head).rstrip(",;:") + " …"


def short_error(err: BaseException, limit: int = 400) -> str:
    """`Type: message` in one or two lines; a traceback embedded in the message is cut to its last line.
    A SystemError that only wraps another (a C extension returning with an exception set) says
    the exception it wraps."""
    while isinstance(err, SystemError) and err.__cause__ is not None:
        err = err.__cause__
    text = error_text(err).strip()
    if "Traceback (most recent call last)" in text:
        return clip([ln for ln in text.splitlines() if ln.strip()][-1].strip(), limit)
    name = error_name(err)
    return clip(f"{name}: {text}" if text else name, limit)


def error_name(err: BaseException) -> str:
    """The exception's class name (a class whose name cannot be read says so)."""
    try:
        name = type(err).__name__
        return name if isinstance(name, str) else "an exception"
    except BaseException:  # noqa: BLE001 - a metaclass can make even this raise
        return "an exception"


def error_text(err: BaseException) -> str:
    """`str(err)`; when the exception's own __str__ raises (or returns no str) a sentence saying
    so: the message is then said in the widget, never a second error."""
    with contextlib.suppress(BaseException):  # the user's __str__ can raise anything
        text = str(err)
        if isinstance(text, str):
            return text
    return "(its message could not be shown: the exception's __str__ failed)"
