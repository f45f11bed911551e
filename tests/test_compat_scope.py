"""The Lite engine (pytree-lab-lite) offers what its README's scope lists, and nothing more: a
public name added to one of its modules fails here until the list (the engine's promise to the
course and the docs) names it too; a listed name the engine lost fails as well."""

from __future__ import annotations

import importlib
import inspect
import re
import sys
import types
import typing
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "packages" / "pytree-lab-lite" / "README.md"


def scope() -> dict[str, set[str]]:
    """README's "## Scope" section: a bullet per module, `- **jax.numpy**: `abs`, `add`, ...`
    (continued on indented lines, ended by a blank line); module names are relative to pytree_lab_lite."""
    text = README.read_text(encoding="utf-8")
    section = text.split("\n## Scope\n", 1)[1].split("\n## ", 1)[0]
    found: dict[str, set[str]] = {}
    for bullet in re.split(r"\n(?=- \*\*)", section):
        head = re.match(r"- \*\*([\w.]+)\*\*:", bullet)
        if head:
            module = head.group(1)
            name = "pytree_lab_lite" if module == "pytree_lab_lite" else f"pytree_lab_lite.{module}"
            found[name] = set(re.findall(r"`(\w+)`", bullet[head.end() :].split("\n\n")[0]))
    return found


def public_names(module: types.ModuleType) -> set[str]:
    """The names a user of `module` sees: not `_private`, not what it imports from the standard
    library (typing, functools, ...), not numpy's or autograd's modules; module-level values (a dtype,
    `pi`, a namespace such as `jax.nn.initializers`) count."""
    names = set()
    for name in dir(module):
        if name.startswith("_") or name == "annotations":
            continue
        value = getattr(module, name)
        if isinstance(value, types.ModuleType):  # its own (jax.numpy, jax.nn.initializers), not numpy's
            submodule = value.__name__ == f"{module.__name__}.{name}"  # public where __all__ says so
            if submodule and name not in getattr(module, "__all__", (name,)):
                continue
            if value.__name__.split(".")[0] not in {*sys.stdlib_module_names, "numpy", "autograd"}:
                names.add(name)
            continue
        if isinstance(value, type) or inspect.isroutine(value) or value is typing.Any:
            if (getattr(value, "__module__", None) or "").split(".")[0] in sys.stdlib_module_names:
                continue
        names.add(name)
    return names


SCOPE = scope()


def test_the_readme_lists_every_module_of_the_engine():
    package = Path(importlib.import_module("pytree_lab_lite").__file__).parent
    modules = {
        ".".join(("pytree_lab_lite", *path.relative_to(package).with_suffix("").parts)).removesuffix(".__init__")
        for path in package.rglob("*.py")
        if not any(part.startswith("_") and part != "__init__.py" for part in path.relative_to(package).parts)
    }
    assert modules == set(SCOPE)


@pytest.mark.parametrize("module", sorted(SCOPE))
def test_each_module_offers_exactly_its_listed_names(module):
    offered = public_names(importlib.import_module(module))
    assert not offered - SCOPE[module], f"{module}: public names its scope list in {README.name} lacks"
    assert not SCOPE[module] - offered, f"{module}: names {README.name} lists that it no longer offers"
