"""Paths and labels: `path_label` (``['layer']['w']`` -> ``layer/w``), `_split_path`, and the
labels of a leaf's elements (`element_labels`, ``w[0,1]``). Pure Python."""

from __future__ import annotations

import operator
from collections.abc import Iterator, Sequence

from .formatting import index_text
from .tree_model import Leaf


def path_label(path: str) -> str:
    """A short label from a keystr: `['layer']['weight']` -> `layer/weight`, `[0]['w']` -> `[0]/w`."""
    out = []
    for piece in _split_path(path):
        if piece.startswith(("['", '["')):
            out.append("/" + piece[2:-2])
        elif piece.startswith("."):
            out.append("/" + piece[1:])
        elif piece.startswith("["):
            out.append(piece)
        else:
            out.append("/" + piece)
    text = "".join(out)
    return text[1:] if text.startswith("/") else text


def _split_path(path: str) -> list[str]:
    """Split a keystr into its pieces, respecting quotes inside brackets."""
    pieces, i, n = [], 0, len(path)
    while i < n:
        c = path[i]
        if c == "[":
            j, quote, depth = i + 1, None, 1
            while j < n:
                ch = path[j]
                if quote:
                    if ch == "\\":
                        j += 1
                    elif ch == quote:
                        quote = None
                elif ch in "'\"":
                    quote = ch
                elif ch == "[":
                    depth += 1
                elif ch == "]":
                    depth -= 1
                    if depth == 0:
                        break
                j += 1
            pieces.append(path[i : j + 1])
            i = j + 1
        elif c == ".":
            j = i + 1
            while j < n and path[j] not in ".[":
                j += 1
            pieces.append(path[i:j])
            i = j
        else:
            pieces.append(path[i:])
            break
    return pieces


class ElementLabels(Sequence):
    """The labels of a leaf's elements, made on demand: `weight[0]`, `w[0,1]`, `bias`.

    A 10^7-element leaf has 10^7 labels, and a view shows a couple of dozen: iterating,
    indexing or slicing makes only the labels asked for. Equal to the list of all labels.
    """

    __slots__ = ("base", "shape", "size")

    def __init__(self, base: str, shape: tuple, size: int):
        self.base, self.shape, self.size = base, shape, size

    def __len__(self) -> int:
        return self.size if self.shape else 1

    def _label(self, flat: int) -> str:
        if not self.shape:
            return self.base
        return f"{self.base}[{index_text(flat, self.shape)}]"

    def __getitem__(self, k):
        n = len(self)
        if isinstance(k, slice):
            return [self._label(i) for i in range(*k.indices(n))]
        k = operator.index(k)
        if k < 0:
            k += n
        if not 0 <= k < n:
            raise IndexError(f"element {k} of {n}")
        return self._label(k)

    def __iter__(self) -> Iterator[str]:
        return map(self._label, range(len(self)))

    def __eq__(self, other: object) -> bool:
        if isinstance(other, (list, tuple, ElementLabels)):
            return len(self) == len(other) and all(a == b for a, b in zip(self, other))
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        head = ", ".join(repr(x) for x in self[:3])
        return f"ElementLabels([{head}{', …' if len(self) > 3 else ''}], {len(self)} labels)"


def element_labels(leaf: Leaf, limit: int | None = None) -> ElementLabels | list[str]:
    """One label per element of a leaf: `weight[0]`, `weight[1]`, `bias`, `w[0,1]`.

    Lazy (labels are made as they are read); `limit` gives a list of at most that many.
    """
    labels = ElementLabels(path_label(leaf.path), leaf.shape, leaf.size)
    return labels if limit is None else labels[:limit]
