"""Comparing two trees the way the lesson does: structure, then leaf paths, shapes, dtypes
(and values, against an independently known tree).

`diagnose` describes both trees; `diagnose_summaries` compares trees already described (the
diagram reuses its summaries). Pure Python, like the tree model: numpy is used for value
comparison only when it is there.
"""

from __future__ import annotations

import math
import unicodedata
from dataclasses import dataclass
from typing import Any

from .formatting import isolate_rtl, visible
from .trees import TreeSummary, _describe, _fatal, gc_paused

__all__ = ["Diagnosis", "diagnose", "diagnose_summaries"]


@dataclass(frozen=True)
class Diagnosis:
    """The first difference between two trees, in the order the lesson teaches."""

    ok: bool
    kind: str | None = None  # None | "structure" | "shape" | "dtype" (| "value" with diagnose(values=True))
    path: str = ""
    message: str = "The trees match: same structure, leaf paths, shapes and dtypes."

    def __bool__(self) -> bool:
        return self.ok


def _sentence(name: str) -> str:
    """`the gradient tree` -> `The gradient tree` (only the first letter: names keep their case)."""
    return name[:1].upper() + name[1:]


def _shown(path: str) -> str:
    """A path in a sentence: invisible characters escaped, right-to-left keys isolated."""
    return isolate_rtl(visible(path))


def _where(path: str) -> str:
    return _shown(path) if path else "the root"


def _skeleton(path: str) -> str:
    """What a reader sees of a path: compatibility-normalised, case-folded, invisible characters
    dropped. Two different paths with the same skeleton look alike on screen."""
    text = unicodedata.normalize("NFKC", path).casefold()
    return "".join(ch for ch in text if unicodedata.category(ch) not in ("Cf", "Mn"))


def _code_points(text: str) -> str:
    return " ".join(f"U+{ord(ch):04X} {unicodedata.name(ch, 'unnamed')}" for ch in text)


def _lookalike_note(a: str, b: str, a_tree: str, b_tree: str) -> str:
    """Why two different paths can read the same, with the characters that differ; "" when
    the difference is plain to see (different ASCII letters)."""
    if a == b:
        return ""
    start = 0
    while start < min(len(a), len(b)) and a[start] == b[start]:
        start += 1
    end = 0
    while end < min(len(a), len(b)) - start and a[len(a) - 1 - end] == b[len(b) - 1 - end]:
        end += 1
    da, db = a[start : len(a) - end], b[start : len(b) - end]
    if unicodedata.normalize("NFC", a) == unicodedata.normalize("NFC", b):
        return (
            f" The two differ only in Unicode normalisation (NFC vs NFD): the same letters, written with "
            f"different code points ({a_tree}: {_code_points(da) or 'nothing'}; "
            f"{b_tree}: {_code_points(db) or 'nothing'}). "
            "unicodedata.normalize('NFC', key) on both sides makes them one key."
        )
    if (da + db).isascii():  # `w` vs `W`, or an escape such as \u200b: plain on screen
        return ""
    return (
        f" They differ in characters that can look alike: {a_tree} has "
        f"{_code_points(da) or 'nothing'} where {b_tree} has {_code_points(db) or 'nothing'}."
    )


def diagnose(
    reference: Any,
    candidate: Any,
    *,
    reference_name: str = "params",
    candidate_name: str = "the gradient tree",
    values: bool = False,
) -> Diagnosis:
    """Compare two trees: structure, then leaf paths, then shapes, then dtypes.

    Equal-shaped leaves that were swapped are not caught by those checks (nothing structural
    differs): that is why the lesson compares with an independently known update. Pass
    ``values=True`` with such a reference (e.g. the hand-derived gradients) to compare leaf
    values last (kind ``"value"``); the message says when a value belongs at another path.
    """
    with gc_paused():
        ref, ref_leaves = _describe(reference, reference_name, values)
        cand, cand_leaves = _describe(candidate, candidate_name, values)
    found = diagnose_summaries(ref, cand, reference_name, candidate_name)
    if not found.ok or not values:
        return found
    return _compare_values(ref_leaves, cand_leaves, ref, cand, reference_name, candidate_name)


def diagnose_summaries(ref: TreeSummary, cand: TreeSummary, ref_name: str, cand_name: str) -> Diagnosis:
    """`diagnose` for trees already described (the diagram reuses its summaries)."""
    # 1. structure and leaf paths: walk both node trees together.
    stack = [(ref.root, cand.root)]
    while stack:
        a, b = stack.pop()
        if a.kind != b.kind or (a.type_name != b.type_name and a.kind in ("custom", "namedtuple")):
            what_a, what_b = ("a leaf" if n.kind == "leaf" else f"a {n.type_name}" for n in (a, b))
            return Diagnosis(
                False,
                "structure",
                a.path,
                f"At {_where(a.path)}, {ref_name} has {what_a} but {cand_name} has {what_b}: "
                "the containers must agree before any leaves can be paired.",
            )
        if a.kind == "leaf":
            continue
        a_keys = {c.path: c for c in a.children}
        b_keys = {c.path: c for c in b.children}
        missing = [p for p in a_keys if p not in b_keys]
        extra = [p for p in b_keys if p not in a_keys]
        if missing or extra:
            if missing and extra:
                # a pair that reads alike (café / café, a / а) first: that is the one to explain
                pair = next(
                    ((m, e) for m in missing for e in extra if _skeleton(m) == _skeleton(e)), (missing[0], extra[0])
                )
                shown_m, shown_e = _shown(pair[0]), _shown(pair[1])
                msg = (
                    f"{_sentence(cand_name)} is missing {shown_m} and has {shown_e} instead: "
                    f"a renamed key is a different path, so {shown_m} has no partner."
                    + _lookalike_note(pair[0], pair[1], ref_name, cand_name)
                )
                path = pair[0]
            elif missing:
                msg = (
                    f"{_sentence(cand_name)} is missing {_shown(missing[0])}, which {ref_name} has: "
                    f"every leaf of {ref_name} needs a partner at the same path."
                )
                path = missing[0]
            else:
                msg = (
                    f"{_sentence(cand_name)} has {_shown(extra[0])}, which {ref_name} does not have: "
                    "an extra path has no partner."
                )
                path = extra[0]
            return Diagnosis(False, "structure", path, msg)
        stack.extend((a_keys[p], b_keys[p]) for p in reversed(list(a_keys)))

    # 2. shapes, in JAX flatten order.
    for la, lb in zip(ref.leaves, cand.leaves):
        if la.shape != lb.shape:
            return Diagnosis(
                False,
                "shape",
                la.path,
                f"{_where(la.path)} has shape {la.shape} in {ref_name} but {lb.shape} in {cand_name}: "
                "a matching structure does not prove matching shapes, and broadcasting could hide this.",
            )
    # 3. dtypes.
    for la, lb in zip(ref.leaves, cand.leaves):
        if la.dtype != lb.dtype:
            return Diagnosis(
                False,
                "dtype",
                la.path,
                f"{_where(la.path)} is {la.dtype} in {ref_name} but {lb.dtype} in {cand_name}.",
            )
    return Diagnosis(True)


def _values_close(a: Any, b: Any, atol: float = 1e-6) -> bool:
    """Equal within float tolerance (NaN equals NaN). Leaves are user objects: whatever their
    conversion or == raises (KeyboardInterrupt aside) counts as "not equal", never as a crash."""
    try:
        import numpy as np
    except ImportError:  # plain Python leaves in a kernel without numpy
        if isinstance(a, (int, float)) and isinstance(b, (int, float)):
            return math.isclose(a, b, rel_tol=1e-5, abs_tol=atol)
    else:
        try:
            x, y = np.asarray(a), np.asarray(b)
            if x.dtype.kind in "fcuib" and y.dtype.kind in "fcuib":
                return x.shape == y.shape and bool(np.allclose(x, y, rtol=1e-5, atol=atol, equal_nan=True))
        except BaseException as err:  # noqa: BLE001
            if _fatal(err):
                raise
    try:
        return bool(a == b)
    except BaseException as err:  # noqa: BLE001 - an object whose == is not a truth value, or raises
        if _fatal(err):
            raise
        return a is b


def _scale(leaves: list) -> float:
    """The largest finite magnitude among numeric leaves (0.0 when there is none)."""
    try:
        import numpy as np
    except ImportError:
        return max((abs(v) for v in leaves if isinstance(v, (int, float)) and math.isfinite(v)), default=0.0)
    top = 0.0
    for leaf in leaves:
        try:
            x = np.asarray(leaf)
            if x.dtype.kind in "fciu" and x.size:
                finite = np.abs(x[np.isfinite(x)]) if x.dtype.kind in "fc" else np.abs(x)
                if finite.size:
                    top = max(top, float(finite.max()))
        except BaseException as err:  # noqa: BLE001 - a leaf that cannot be read has no scale
            if _fatal(err):
                raise
    return top


def _compare_values(ra: list, ca: list, ref: TreeSummary, cand: TreeSummary, ref_name, cand_name) -> Diagnosis:
    # the absolute tolerance follows the trees' own scale below 1: gradients of 1e-7 swapped
    # between two leaves are as wrong as gradients of 1 swapped
    atol = 1e-6 * min(1.0, _scale(ra + ca))
    for k, (la, lb) in enumerate(zip(ref.leaves, cand.leaves)):
        if _values_close(ra[k], ca[k], atol):
            continue
        got = lb.summary or lb.type_label
        message = f"{_where(la.path)} is {got} in {cand_name} but {la.summary or la.type_label} in {ref_name}."
        owner = next(
            (
                other.path
                for j, other in enumerate(ref.leaves)
                if j != k and other.shape == lb.shape and _values_close(ra[j], ca[k], atol)
            ),
            None,
        )
        if owner is not None:
            message += (
                f" That is the value that belongs at {_shown(owner)}: equal shapes do not say which parameter "
                "a value belongs to, so keep each leaf on its path."
            )
        return Diagnosis(False, "value", la.path, message)
    return Diagnosis(True, message="The trees match: structure, leaf paths, shapes, dtypes and values.")
