"""The reference solutions' own lines, and a search of every file of a student's tree for them.

The tests that build what students get as the docs build it (tests/test_binder.py: Binder's home
after postBuild, `make lab`'s root, the Lite site's notebooks; tests/test_hub.py: the hub image's
course as a first login copies it) search it with `leaks`. No pytest dependency.
"""

from __future__ import annotations

import json
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SOLUTIONS = REPO / "course_source" / "solutions"

# Lines of each reference solution that no lesson, starter cell, hint or feedback holds (the
# def line and the lesson's own asserts are the starter's too). Every solution file has some, and
# each is a line of its file: test_binder.py checks both, so a new solution adds its own here.
SOLUTION_LINES = {
    "grad_over_flat_params": (
        "weights, bias = p[:-1], p[-1]",
        "predictions = x @ weights + bias",
        "return jnp.sum(predictions**2)  # a sum, not a mean",
    ),
    "nested_scale_grad": (
        'nested = {"layer": params, "scale": jnp.array(1.0)}',
        'pred = p["scale"] * (jnp.dot(p["layer"]["weight"], x) + p["layer"]["bias"])',
    ),
    "repair_update": (
        "fixed = jax.tree.map(lambda p, g: p - 0.05 * g, params, grads)",
        "assert jnp.allclose(loss(fixed), 0.64, atol=1e-6)",
    ),
    "squared_norm": (
        "norm_squared = sum(jnp.sum(g**2) for g in jax.tree.leaves(grads))",
        'manual = jnp.sum(grads["weight"] ** 2) + grads["bias"] ** 2',
    ),
}


def _needles() -> list[tuple[str, bytes]]:
    out = []
    for exercise, lines in SOLUTION_LINES.items():
        for line in lines:
            # as written in a .py or .md file, and as a notebook's JSON holds it (quotes escaped)
            for form in {line, json.dumps(line)[1:-1]}:
                out.append((f"{exercise}: {line}", form.encode()))
    return out


def leaks(root: Path, *, skip: tuple[str, ...] = (".git",)) -> list[str]:
    """'path: exercise: line' for every reference-solution line found in a file under `root`
    (every file, hidden ones too, but the folders named in `skip`: git's objects are compressed),
    and 'path: a solution file' for any file or folder named like the solutions' own."""
    root = Path(root)
    needles = _needles()
    found = []
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root)
        if rel.parts and rel.parts[0] in skip:
            continue
        if path.name == "course_source" or (path.parent.name == "solutions" and path.stem in SOLUTION_LINES):
            found.append(f"{rel}: a solution file")
        if not path.is_file() or path.is_symlink():
            continue
        data = path.read_bytes()
        found += [f"{rel}: {what}" for what, needle in needles if needle in data]
    return found
