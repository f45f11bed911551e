"""Tree answers: a wrong tree explained in pytree terms (a missing key and its path, a wrong shape,
a swapped leaf, a value that belongs elsewhere), graded against a `_TreeSpec`."""

from __future__ import annotations

import dataclasses
import re
from typing import Any

from ..diagnose import diagnose
from ..formatting import clip
from ._grading import (
    Outcome,
    _as_number_array,
    _close,
    _fmt,
    _fmt_shape,
    _leaf_type,
    _type_name,
    tools,
)

# --------------------------------------------------------------------------- tree answers


def _leaves_by_path(tree) -> dict[str, Any]:
    """keystr path -> leaf, in JAX's flatten order; None counts as a leaf so it can be named."""
    jax = tools.jax
    flat, _ = jax.tree_util.tree_flatten_with_path(tree, is_leaf=lambda node: node is None)
    return {jax.tree_util.keystr(path): leaf for path, leaf in flat}


_LAST_KEY = re.compile(r"(\[[^\[\]]*\]|\.[A-Za-z_]\w*)$")


def _last_key(path: str) -> str:
    found = _LAST_KEY.search(path)
    return found.group(1) if found else path


def _kind_of_container(tree) -> str:
    if isinstance(tree, dict):
        return "dict"
    if isinstance(tree, (list, tuple)):
        return "sequence"
    return "other"


@dataclasses.dataclass(frozen=True)
class _TreeSpec:
    """How to grade a tree answer: the expected tree, what it is called, trees a wrong answer
    often equals (each with a sentence explaining that mistake) and per-path hints."""

    expected: Any
    name: str  # "the gradient tree"
    related: tuple[tuple[Any, str], ...] = ()
    hints: dict[str, str] = dataclasses.field(default_factory=dict)


def _grade_tree(answer, spec: _TreeSpec) -> Outcome:
    expected = _leaves_by_path(spec.expected)
    n_expected = len(expected)
    paths_text = ", ".join(expected)
    if callable(answer) and not isinstance(answer, (dict, list, tuple)):
        return Outcome(0, n_expected, [f"Pass {spec.name} itself (a dictionary of arrays), not a function."])
    if hasattr(answer, "updated") and not isinstance(answer, (dict, list, tuple)):
        return Outcome(
            0, n_expected, [f"You passed a whole step result; pass only {spec.name} (for example `result.updated`)."]
        )
    if _kind_of_container(answer) != _kind_of_container(spec.expected):
        line = f"Expected {spec.name}: a dictionary with the leaves {paths_text}. You passed {_type_name(answer)}."
        if isinstance(answer, (tuple, list)) and any(isinstance(item, dict) for item in answer):
            line += f" Pass only {spec.name}, without a tuple around it."
        return Outcome(0, n_expected, [line])

    got = _leaves_by_path(answer)
    related = [(_leaves_by_path(tree), message) for tree, message in spec.related]
    # (path, sentence, plain): a plain sentence says only what diagnose() says for that path
    structure: list[tuple[str, str, bool]] = []
    shapes: list[tuple[str, str, bool]] = []
    reshape_hints: dict[str, str] = {}
    values: dict[str, list[str]] = {}  # explanation -> paths it applies to
    correct = 0
    consumed: set[str] = set()

    for path, reference in expected.items():
        ref = tools.np.asarray(reference)
        if path not in got:
            children = [p for p in got if p.startswith((path + "[", path + "."))]
            if children:
                consumed.update(children)
                structure.append(
                    (
                        path,
                        f"{path} is a container with {len(children)} leaves ({', '.join(children[:3])}"
                        f"{', …' if len(children) > 3 else ''}), not one array. In a pytree a list is part of "
                        f"the structure, so each entry becomes its own leaf: make {path} one array "
                        f"(jnp.array) of shape {_fmt_shape(ref.shape)}.",
                        False,
                    )
                )
                continue
            moved = [p for p in got if p not in expected and p not in consumed and _last_key(p) == _last_key(path)]
            if moved:
                consumed.add(moved[0])
                arr = _as_number_array(got[moved[0]])
                right_values = arr is not None and _close(arr, ref)
                structure.append(
                    (
                        path,
                        f"{path} is missing; your tree has {moved[0]} instead. Same name, different path: "
                        f"the leaf belongs at {path}"
                        + (" (its values are right, only its place is wrong)." if right_values else "."),
                        False,
                    )
                )
            else:
                structure.append(
                    (path, f"Missing leaf {path}: {spec.name} must have a {_leaf_type(ref)} leaf at this path.", True)
                )
            continue
        leaf = got[path]
        arr = _as_number_array(leaf)
        if arr is None:
            if isinstance(leaf, str):
                shapes.append((path, f"{path} is text ({clip(leaf, 48)!r}), not a number.", False))
            else:
                shapes.append((path, f"{path} is {_type_name(leaf)}, not a number.", False))
            continue
        if arr.shape != ref.shape:
            hint = ""
            if arr.size == ref.size and _close(arr.reshape(ref.shape), ref):
                hint = f" The values are right; reshape to {_fmt_shape(ref.shape)}."
                reshape_hints[path] = hint
            shapes.append(
                (
                    path,
                    f"Wrong shape at {path}: expected {_leaf_type(ref)} (shape "
                    f"{_fmt_shape(ref.shape)}), got shape {_fmt_shape(arr.shape)}.{hint}",
                    True,
                )
            )
            continue
        if not _all_finite(arr):
            values.setdefault("contains NaN or inf.", []).append(path)
            continue
        if _close(arr, ref):
            correct += 1
            continue
        values.setdefault(_explain_leaf(path, arr, ref, expected, related, spec), []).append(path)

    extras = [p for p in got if p not in expected and p not in consumed]
    for path in extras:
        leaf = got[path]
        if isinstance(leaf, str):
            structure.append(
                (
                    path,
                    f"Extra leaf {path} is text ({clip(leaf, 48)!r}): a name or other metadata is "
                    "not a parameter. Keep it apart from the tree you differentiate.",
                    False,
                )
            )
        else:
            structure.append((path, f"Extra leaf {path}: {spec.name} has exactly the leaves {paths_text}.", True))

    total = n_expected + len(extras)  # an extra leaf is one more part to get right (remove it)
    passed = correct == n_expected and not extras and not structure
    if passed:
        lines = [f"All {n_expected} leaves match {spec.name}: {paths_text}."]
    else:
        if extras:
            lines = [
                f"{correct} of {total} parts right: {correct} of {n_expected} leaves of {spec.name}, "
                f"and {len(extras)} extra {'leaves' if len(extras) > 1 else 'leaf'} to remove."
            ]
        else:
            lines = [f"{correct} of {n_expected} leaves of {spec.name} are right."]
        first = _first_difference(spec, answer)
        if first is not None:
            lines.append(f"- First difference: {first.message}{reshape_hints.get(first.path, '')}")
        lines += [
            f"- {text}"
            for path, text, plain in structure + shapes
            if not (plain and first is not None and path == first.path)
        ]
        lines += [f"- {', '.join(paths)}: {why}" for why, paths in values.items()]
    return Outcome(correct, total, lines, passed=passed, unit="parts" if extras else "leaves")


def _first_difference(spec: _TreeSpec, answer):
    """The tree model's diagnosis (structure, then paths, then shapes), when it finds one. Its dtype
    verdict is left out: a float64 or Python-float answer with the right values is right."""
    try:
        found = diagnose(spec.expected, answer, reference_name=spec.name, candidate_name="your tree")
    except Exception:  # an answer the tree model cannot describe still gets the per-leaf feedback
        return None
    return found if found.kind in ("structure", "shape") else None


def _all_finite(arr) -> bool:
    np = tools.np
    return bool(np.all(np.isfinite(arr.astype(float))))


def _explain_leaf(path, arr, ref, expected, related, spec) -> str:
    np = tools.np
    """Why the leaf at `path` is wrong, without naming `path` (the caller groups paths)."""
    for leaves, message in related:
        if path in leaves and _close(arr, leaves[path]):
            return message
    if ref.ndim == 1 and ref.size > 1 and _close(arr, ref[::-1]) and not _close(ref, ref[::-1]):
        return (
            f"the entries are swapped ({_fmt(arr)}). Each entry belongs to one "
            "parameter value; equal shapes do not say which."
        )
    for other, other_ref in expected.items():
        other_ref = np.asarray(other_ref)
        if other != path and other_ref.shape == ref.shape and _close(arr, other_ref) and not _close(ref, other_ref):
            return (
                f"holds the value that belongs at {other}: the two leaves have the same shape, "
                "but shape does not identify which parameter a value belongs to. Keep each leaf on its path."
            )
    hint = spec.hints.get(path, "")
    return f"{_fmt(arr)} is not the right value." + (f" {hint}" if hint else "")
