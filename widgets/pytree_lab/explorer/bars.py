"""The bar plan: which parameter elements the before/after chart shows, and their tick labels.

Pure bookkeeping on tree summaries (no widgets), like the slider plan. The chart shows at most
`MAX_BARS` elements:

- `bars=[...]` at construction chooses them (keystr paths or labels of elements, leaves or
  containers: the vocabulary of `sliders=`), in the order given;
- by default, the parameter elements that have sliders, then the first others in display order
  up to the cap;
- selecting a leaf or container whose elements are not all shown brings them in (at most the
  cap), keeping as many of the chosen ones as fit (`with_selection`).

Tick labels are the elements' labels (`Dense_0/kernel[0,0]`), cut in the middle where too long
for the axis and never two alike (the chart's `formatting.short_labels`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from ..tree_paths import path_label
from ..trees import TreeSummary
from .sliders import LEARNING_RATE, Element, check_names, elements, elements_of, find, under, walk_leaves

__all__ = ["MAX_BARS", "chosen_bars", "default_bars", "with_selection", "describe"]

MAX_BARS = 24  # parameter elements drawn as before/after bars


def _key(el: Element) -> tuple[str, int, int]:
    return (el.tree, el.flat_index, el.position)


def chosen_bars(names: Any, params: TreeSummary, inputs: TreeSummary, cap: int = MAX_BARS) -> tuple[list[Element], str]:
    """The elements `bars=[...]` names, in the order given (at most `cap`), and a note when some
    were left out. A name that is no parameter value is a ValueError that says so."""
    names = check_names("bars", names)
    picked: dict[tuple, Element] = {}
    for name in names:
        if name == LEARNING_RATE:
            raise ValueError(
                "bars= names 'learning_rate': the bars show parameter elements before and after "
                "the step, and the learning rate is no parameter."
            )
        found = find(name, cap + 1, params, inputs, keyword="bars")
        if found[0].tree != "params":
            raise ValueError(
                f"bars= names {name!r}, which is an input ({found[0].path}): the bars show "
                "parameter elements before and after the step; inputs do not change."
            )
        for el in found:
            picked.setdefault(_key(el), el)
    chosen = list(picked.values())
    note = ""
    if len(chosen) > cap:
        note = f"bars= names more than {cap} values: the chart shows the first {cap}."
    return chosen[:cap], note


def default_bars(
    slid: Iterable[Element], params: TreeSummary, cap: int = MAX_BARS, moving: dict[int, Any] | None = None
) -> list[Element]:
    """The parameter elements with sliders, then the first others in display order, up to `cap`
    (of those in `moving`, whose gradient is not zero, where given: sliders.moving_positions)."""
    out = {_key(el): el for el in slid if el.tree == "params"}
    if len(out) < cap:
        for el in elements(params, "params", cap + len(out), moving=moving):
            if len(out) >= cap:
                break
            out.setdefault(_key(el), el)
    return list(out.values())[:cap]


def with_selection(
    path: str, shown: Sequence[Element], base: Sequence[Element], params: TreeSummary, cap: int = MAX_BARS
) -> tuple[list[Element] | None, str]:
    """The bars once the leaf or container at `path` is selected: None when each of its leaves
    has a bar already (a click on a bar never moves the bars), or it holds no parameter element;
    else the chosen bars `base` that fit beside the selected elements (at most `cap` of those),
    and a note saying what came in."""
    if not path:
        return None, ""
    leaves = [leaf for leaf in walk_leaves(params) if under(leaf.path, path) and leaf.differentiable]
    total = sum(leaf.size for leaf in leaves)
    have = {el.leaf.path for el in shown if el.tree == "params"}
    if all(leaf.path in have for leaf in leaves):
        return None, ""
    wanted = elements_of(leaves, "params", cap)
    keys = {_key(el) for el in wanted}
    room = cap - len(wanted)
    kept = [el for el in base if _key(el) not in keys][:room]
    name = path_label(path) or "params"
    some = (
        f"the first {len(wanted)} of its {total:,} values"
        if total > len(wanted)
        else f"its {total} value{'s' * (total != 1)}"
    )
    note = f"Bars now show {name} (selected): {some}."
    return kept + wanted, note


def describe(shown: Sequence[Element]) -> str:
    """Which leaves the bars show, as text: `Dense_0/kernel (16 values), Dense_0/bias (8 of 8)`."""
    counts: dict[str, list] = {}
    for el in shown:
        entry = counts.setdefault(el.leaf.path, [el.leaf, 0])
        entry[1] += 1
    parts = []
    for leaf, n in counts.values():
        name = path_label(leaf.path) or "params"
        parts.append(f"{name} ({n} value{'s' * (n != 1)})" if n == leaf.size else f"{name} ({n} of {leaf.size} values)")
    return ", ".join(parts)
