"""The slider plan and the bar plan: which elements of which trees get a slider (label, range) or
a before/after bar. Pure bookkeeping on tree summaries (no widgets): the session asks for the
slider plan and keeps each slider's value by its label; the widget builds one `Slider` per entry.

The chart shows at most `MAX_BARS` parameter elements: those `bars=[...]` names at construction
(the vocabulary of `sliders=`: keystr paths or labels of elements, leaves or containers), in
the order given; by default those with sliders, then the first others in display order up to
the cap; selecting a leaf or container whose elements are not all shown brings them in (at
most the cap), keeping as many of the chosen ones as fit (`with_selection`).
"""

from __future__ import annotations

import itertools
import math
import re
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from ..formatting import index_text
from ..ranges import span
from ..summaries import on_host, to_host
from ..tree_model import under
from ..trees import Leaf, TreeSummary, path_label

__all__ = ["Element", "SliderSpec", "plan", "elements", "elements_of", "under", "SMALL_INPUT", "LEARNING_RATE"]
__all__ += ["MAX_BARS", "chosen_bars", "default_bars", "with_selection", "describe", "bar_values"]  # the bar plan

SMALL_INPUT = 4  # a 1-D float input of at most this many values gets sliders by default
LEARNING_RATE = "learning_rate"  # the learning-rate slider's label
MAX_BARS = 24  # parameter elements drawn as before/after bars


class Element:
    """One scalar element of one leaf: which tree, where it lives, what it is called."""

    __slots__ = ("tree", "leaf", "flat_index", "position", "label", "path")

    def __init__(self, tree: str, leaf: Leaf, position: int):
        self.tree, self.leaf, self.flat_index, self.position = tree, leaf, leaf.index, position
        suffix = f"[{index_text(position, leaf.shape)}]" if leaf.shape else ""
        self.label = path_label(leaf.path, tree) + suffix
        self.path = f"{tree}{leaf.path}{suffix}"  # the full path: a slider's title, a bar's tooltip


@dataclass(frozen=True)
class SliderSpec:
    """One slider of the plan: its label (the key in `StepExplorer.sliders`), full path, range,
    and the element it moves (None: the learning rate)."""

    label: str
    path: str
    element: Element | None
    value: float
    min: float
    max: float
    step: float


def walk_leaves(summary: TreeSummary) -> Iterable[Leaf]:
    """Leaves in display order (as the person wrote the tree)."""
    for node in summary.root.walk():
        if node.leaf is not None:
            yield node.leaf


def elements(
    summary: TreeSummary,
    tree: str,
    limit: int,
    keep: Callable[[Leaf], bool] = lambda leaf: True,
    moving: dict[int, Any] | None = None,
) -> list[Element]:
    """Float elements of a tree in display order, at most `limit` (labels made only for those).
    `moving` (leaf index -> flat positions): only those positions (`moving_positions`)."""
    floats = (leaf for leaf in walk_leaves(summary) if leaf.differentiable and keep(leaf))
    return elements_of(floats, tree, limit, moving)


def _kind(leaf: Leaf) -> tuple:
    """A leaf's kind: its path without its layers' numbers (`attn/q/w` of every `block_i`)."""
    return tuple(
        key for key in re.sub(r"\[\d+\]", "", path_label(leaf.path)).split("/") if not re.search(r"_\d+$", key)
    )


def _kinds(els: Iterable[Element]) -> set:
    return {_kind(el.leaf) for el in els}


def spread(summary: TreeSummary, limit: int, moving: dict[int, Any] | None) -> list[Element]:
    """At most `limit` parameter elements spread over the kinds of leaves (`_kind`): the first leaf
    of each kind, then the second of each, ..., one element of each leaf a round, only those whose
    gradient is not zero where `moving` says (sliders.moving_positions); in display order."""
    floats = [leaf for leaf in walk_leaves(summary) if leaf.differentiable]
    seen: Counter = Counter()
    order = []
    for k, leaf in enumerate(floats):
        seen[_kind(leaf)] += 1
        order.append((seen[_kind(leaf)], k, leaf))
    order.sort(key=lambda t: t[:2])
    pools = [range(leaf.size) if moving is None else moving.get(leaf.index, ()) for *_, leaf in order]
    picked: list[tuple] = []
    for r in itertools.count():
        picked += [(k, pool[r], leaf) for (_, k, leaf), pool in zip(order, pools) if r < len(pool)]
        if len(picked) >= limit or r >= max(map(len, pools), default=0):
            break
    return [Element("params", leaf, pos) for k, pos, leaf in sorted(picked[:limit], key=lambda t: t[:2])]


def moving_positions(eng: Any, grads: Any) -> dict[int, list[int]]:
    """Each gradient leaf's flat positions whose value is not zero (nor NaN): the elements that
    move the loss at this point (an embedding's rows the batch uses, a live unit's weights)."""
    import numpy as np

    out = {}
    for i, g in enumerate(eng.tree_leaves(grads)):
        g = np.asarray(g).ravel()
        out[i] = np.flatnonzero((g != 0) & ~np.isnan(g) if g.dtype.kind in "fc" else g != 0).tolist()
    return out


def _key(el: Element) -> tuple[str, int, int]:
    return (el.tree, el.flat_index, el.position)


def small_input(leaf: Leaf) -> bool:
    return len(leaf.shape) == 0 or (len(leaf.shape) == 1 and leaf.size <= SMALL_INPUT)


def element_values(leaves: list, els: Sequence[Element]) -> list[float]:
    """The values of the elements `els` of `leaves`: of a leaf on an accelerator, those elements
    alone come over (one `jax.device_get`)."""
    import numpy as np

    at: dict[int, list[int]] = {}
    for e in els:
        at.setdefault(e.flat_index, []).append(e.position)
    picked = [
        (np.asarray(leaves[i]) if on_host(leaves[i]) else leaves[i]).reshape(-1)[np.asarray(p)] for i, p in at.items()
    ]
    rows = {i: iter(a.tolist()) for i, a in zip(at, to_host(picked))}
    return [float(next(rows[e.flat_index])) for e in els]


def bar_values(eng: Any, result: Any, shown: Sequence[Element]) -> tuple[list[float], list[float]]:
    """The bars' values before and after the step `result`."""
    return element_values(eng.tree_leaves(result.params), shown), element_values(eng.tree_leaves(result.updated), shown)


def _names(tree: str, path: str) -> list[str]:
    """The names of the node at `path` in `tree`: its keystr path with and without its tree, its label."""
    return [f"{tree}{path}"] + ([path, path_label(path)] if path else [])


def _containers(summary: TreeSummary, tree: str, name: str) -> list[Leaf] | None:
    """The leaves under the container `name` (keystr path with or without its tree, or its label), or None."""
    for node in summary.root.walk():
        if node.leaf is None and name in _names(tree, node.path):
            return [leaf for leaf in walk_leaves(summary) if under(leaf.path, node.path)]
    return None


def find(name: str, limit: int, params: TreeSummary, inputs: TreeSummary, keyword: str = "sliders") -> list[Element]:
    """The float elements `sliders=[...]` (or `bars=[...]`, `keyword`: parameter elements only)
    means by `name`: a leaf (keystr path, with or without its tree, or its label) gives its
    elements, a container its leaves' elements (at most `limit` in all), an element path or
    label gives one."""
    import numpy as np

    if keyword == "bars" and name == LEARNING_RATE:
        raise ValueError(
            "bars= names 'learning_rate': the bars show parameter elements before and after "
            "the step, and the learning rate is no parameter."
        )
    out: list[Element] = []
    for tree, summary in (("inputs", inputs), ("params", params)):
        held = _containers(summary, tree, name)
        if held is not None:
            floats = [leaf for leaf in held if leaf.differentiable]
            if held and not floats:
                raise ValueError(
                    f"{keyword}= names {name!r}: every leaf under it is data (ints, bools), "
                    "and only floating-point values can be shown."
                )
            out.extend(elements_of(floats, tree, limit))
            continue
        for leaf in walk_leaves(summary):
            names = _names(tree, leaf.path)
            if name in names:
                if not leaf.differentiable:
                    raise ValueError(
                        f"{keyword}= names {name!r}: {names[0]} is {leaf.type_label}, data rather "
                        "than a slider value (only floating-point values can slide)."
                    )
                out.extend(Element(tree, leaf, pos) for pos in range(min(leaf.size, limit)))
                continue
            prefix = next((p for p in names if name.startswith(p + "[")), None)
            if prefix is None or not leaf.shape or not leaf.differentiable:
                continue
            try:
                index = [int(i) for i in name[len(prefix) :].replace("][", ",").strip("[]").split(",")]
                position = int(np.ravel_multi_index(tuple(index), leaf.shape))
            except (ValueError, TypeError):
                continue
            out.append(Element(tree, leaf, position))
    trees = {el.tree for el in out}
    if len(trees) > 1:
        raise ValueError(
            f"{keyword}= names {name!r}, which is in both params and inputs: write "
            f"params[...] or inputs[...] with its keystr path."
        )
    if not out:
        examples = [el.path for el in elements(params, "params", 2)]
        examples += [el.path for el in elements(inputs, "inputs", 2)] if keyword == "sliders" else []
        raise ValueError(
            f"{keyword}= names {name!r}, which is no parameter {'or input ' * (keyword == 'sliders')}"
            f"value here. Use keystr paths or labels, e.g. {', '.join(map(repr, examples))}"
            + (", or 'learning_rate'." if keyword == "sliders" else ".")
        )
    if keyword == "bars" and out[0].tree != "params":
        raise ValueError(
            f"bars= names {name!r}, which is an input ({out[0].path}): the bars show "
            "parameter elements before and after the step; inputs do not change."
        )
    return out


def _find_all(keyword: str, names: list[str], limit: int, params: TreeSummary, inputs: TreeSummary) -> list[Element]:
    """The elements `names` (`sliders=` or `bars=`, `keyword`) mean, each once, in the order named."""
    picked: dict[tuple, Element] = {}
    for name in names:
        if name == LEARNING_RATE and keyword == "sliders":
            continue  # the learning rate's slider moves no element
        for el in find(name, limit, params, inputs, keyword):
            picked.setdefault(_key(el), el)
    return list(picked.values())


def elements_of(leaves: Iterable[Leaf], tree: str, limit: int, moving: dict[int, Any] | None = None) -> list[Element]:
    """The elements of these leaves in order, at most `limit` (`moving`: as `elements`')."""
    found = (
        Element(tree, leaf, pos)
        for leaf in leaves
        for pos in (range(leaf.size) if moving is None else moving.get(leaf.index, ()))
    )
    return list(itertools.islice(found, max(limit, 0)))


def check_names(keyword: str, names: Any) -> list[str]:
    """`sliders=` or `bars=` (`keyword`) as a list of names, or a TypeError or ValueError whose
    sentence says what it takes (docs/explorer.md)."""
    example = f"{keyword}=['Dense_0/kernel', 'Dense_1/bias[0]']"
    if isinstance(names, str):
        return [names]
    if isinstance(names, (dict, set, frozenset)) or not isinstance(names, Iterable):
        raise TypeError(
            f"{keyword}= takes a list of paths or labels (strings), e.g. {example}, not "
            f"{type(names).__name__} {names!r:.60}."
        )
    out = list(names)
    if not out:
        raise ValueError(
            f"{keyword}=[] names nothing, so {'no bar' if keyword == 'bars' else 'no slider'} would be drawn: "
            f"name some, e.g. {example}, or leave {keyword}= out for the default"
            + (" (max_sliders=0 shows none)." if keyword == "sliders" else ".")
        )
    for name in out:
        if not isinstance(name, str):
            raise TypeError(
                f"{keyword}= takes paths or labels as strings, not {type(name).__name__} {name!r:.60} "
                f"(e.g. {example}; an element as 'Dense_0/kernel[0,1]')."
            )
    return out


def _chosen(
    chosen: Any, max_sliders: int, params: TreeSummary, inputs: TreeSummary
) -> tuple[list[Element], list[Element], bool]:
    chosen = check_names("sliders", chosen)
    picked = _find_all("sliders", chosen, max_sliders + 1, params, inputs)
    rank = {("inputs", leaf.index): k for k, leaf in enumerate(walk_leaves(inputs))}
    rank.update({("params", leaf.index): k for k, leaf in enumerate(walk_leaves(params))})
    ordered = sorted(picked, key=lambda el: (rank[(el.tree, el.flat_index)], el.position))
    return (
        [el for el in ordered if el.tree == "inputs"],
        [el for el in ordered if el.tree == "params"],
        LEARNING_RATE in chosen,
    )


def rate_range(rate: float) -> tuple[float, float, float]:
    finite = math.isfinite(rate)
    hi = max(0.5, 2 * rate) if finite else 0.5
    # a negative rate given from Python is kept (and refused with a message), not clamped to 0
    lo = min(0.0, math.floor(rate)) if finite else 0.0
    step = 0.005 if not finite or rate >= 0.005 or rate <= 0 else span(rate)[2]
    return lo, hi, step


def plan(session: Any, chosen: Iterable[str] | None, max_sliders: int) -> tuple[list[SliderSpec], list[str]]:
    """The sliders of `session` (its trees' summaries and leaves, learning rate, `moving`), in the
    order shown (inputs, the learning rate, params), and notes to say.

    Default: small float inputs, the learning rate, the parameter elements in display order
    (where they do not all fit, those in `moving`, whose gradient is not zero here, said in a
    note); `chosen` picks exactly; `max_sliders` caps the total. The rate gets no slider where it
    changes nothing."""
    params, inputs, rate, moving = session.param_summary, session.input_summary, session.learning_rate, session.moving
    if not isinstance(max_sliders, int) or max_sliders < 0:
        raise ValueError(f"max_sliders must be a whole number of 0 or more, not {max_sliders!r}.")
    notes, passed_over, spread_out = [], False, False
    if chosen is None:
        input_els = elements(inputs, "inputs", max_sliders, small_input)
        param_els = elements(params, "params", max_sliders)
        if moving is not None and len(elements(params, "params", max_sliders + 1)) > max_sliders:
            live = elements(params, "params", max_sliders, moving=moving)
            passed_over = [_key(el) for el in live] != [_key(el) for el in param_els]
            param_els = live if live else param_els
            room = max(max_sliders - len(input_els) - bool(session.rate_slides), 0)
            if _kinds(param_els[:room]) != {
                _kind(leaf) for leaf in walk_leaves(params) if leaf.differentiable
            }:  # a big model's
                param_els, passed_over, spread_out = spread(params, room, moving) or param_els, False, True
        want_rate = True
    else:
        input_els, param_els, want_rate = _chosen(chosen, max_sliders, params, inputs)
    want_rate = want_rate and session.rate_slides  # never a slider that does nothing
    entries = list(input_els) + ([None] if want_rate else []) + list(param_els)
    if len(entries) > max_sliders:
        if chosen is not None:
            notes.append(
                f"sliders= chose {len(entries)} values; max_sliders={max_sliders} caps the "
                f"total, so the last {len(entries) - max_sliders} have no slider."
            )
        entries = entries[:max_sliders]
    kept = [el for el in entries if el is not None and el.tree == "params"]
    if passed_over and kept:  # the zero-gradient elements in display order up to the last one kept
        floats = [leaf for leaf in walk_leaves(params) if leaf.differentiable]
        k = next(k for k, leaf in enumerate(floats) if leaf.index == kept[-1].flat_index)
        passed = sum(leaf.size for leaf in floats[:k]) + kept[-1].position + 1 - len(kept)
        notes.append(
            f"The default sliders and bars are {len(kept)} parameter elements whose gradient is not zero here, "
            f"so moving one changes the loss; {passed:,} elements before them in the tree have a zero gradient "
            "at this point (an embedding's rows the batch does not use, a unit that is off). sliders=[...] and "
            "bars=[...] choose others (docs/explorer.md)."
        )
    if spread_out and kept:
        notes.append(
            f"The default sliders and bars are {len(kept)} parameter elements from "
            f"{len({el.flat_index for el in kept})} leaves, spread over the model's kinds of leaves (each "
            "layer's weights, biases, norms), each with a gradient that is not zero here, so moving one changes "
            "the loss. sliders=[...] and bars=[...] choose others (docs/explorer.md)."
        )
    labels = [el.label for el in entries if el is not None]
    clash = {lab for lab in labels if labels.count(lab) > 1} | ({LEARNING_RATE} & set(labels))
    specs = []
    for el in entries:
        if el is None:
            specs.append(SliderSpec(LEARNING_RATE, LEARNING_RATE, None, float(rate), *rate_range(rate)))
            continue
        label = f"{el.tree}/{el.label}" if el.label in clash else el.label
        value = element_values(session.input_leaves if el.tree == "inputs" else session.param_leaves, [el])[0]
        specs.append(SliderSpec(label, el.path, el, value, *span(value)))
    return specs, notes


def chosen_bars(names: Any, params: TreeSummary, inputs: TreeSummary) -> tuple[list[Element], str]:
    """The elements `bars=[...]` names, in the order given (at most `MAX_BARS`), and a note when
    some were left out. A name that is no parameter value is a ValueError that says so."""
    cap = MAX_BARS
    chosen = _find_all("bars", check_names("bars", names), cap + 1, params, inputs)
    note = f"bars= names more than {cap} values: the chart shows the first {cap}." if len(chosen) > cap else ""
    return chosen[:cap], note


def default_bars(slid: Iterable[Element], params: TreeSummary, moving: dict[int, Any] | None) -> list[Element]:
    """The parameter elements with sliders, then the first others in display order, up to `MAX_BARS`
    (of those in `moving`, whose gradient is not zero, where given: sliders.moving_positions)."""
    out = {_key(el): el for el in slid if el.tree == "params"}
    more = elements(params, "params", MAX_BARS + len(out), moving=moving)
    if _kinds(list(out.values()) + more) != {
        _kind(leaf) for leaf in walk_leaves(params) if leaf.differentiable
    }:  # a big model's
        more = spread(params, MAX_BARS, moving)  # a superset of its default sliders
    for el in more:
        out.setdefault(_key(el), el)
    return list(out.values())[:MAX_BARS]


def with_selection(
    path: str, shown: Sequence[Element], base: Sequence[Element], params: TreeSummary
) -> tuple[list[Element] | None, str]:
    """The bars once the leaf or container at `path` is selected: None when each of its leaves
    has a bar already (a click on a bar never moves the bars), or it holds no parameter element;
    else the chosen bars `base` that fit beside the selected elements (at most `MAX_BARS` of those),
    and a note saying what came in."""
    if not path:
        return None, ""
    leaves = [leaf for leaf in walk_leaves(params) if under(leaf.path, path) and leaf.differentiable]
    total = sum(leaf.size for leaf in leaves)
    have = {el.leaf.path for el in shown if el.tree == "params"}
    if all(leaf.path in have for leaf in leaves):
        return None, ""
    wanted = elements_of(leaves, "params", MAX_BARS)
    keys = {_key(el) for el in wanted}
    kept = [el for el in base if _key(el) not in keys][: MAX_BARS - len(wanted)]
    name = path_label(path)
    some = (
        f"the first {len(wanted)} of its {total:,} values"
        if total > len(wanted)
        else f"its {total} value{'s' * (total != 1)}"
    )
    note = f"Bars now show {name} (selected): {some}."
    return kept + wanted, note


def describe(shown: Sequence[Element]) -> str:
    """Which leaves the bars show, as text: `Dense_0/kernel (16 values), Dense_0/bias (8 of 8)`."""
    sizes = {el.leaf.path: el.leaf.size for el in shown}
    parts = []
    for path, n in Counter(el.leaf.path for el in shown).items():
        name, size = path_label(path), sizes[path]
        parts.append(f"{name} ({n} value{'s' * (n != 1)})" if n == size else f"{name} ({n} of {size} values)")
    return ", ".join(parts)
