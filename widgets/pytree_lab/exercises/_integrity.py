"""The formative checks' integrity: the checker's own functions and the numpy / jax functions it
relies on are compared, before and after each check, with references taken when the course was
imported; anything replaced is put back, and that check does not count.

What is compared (`sealed()` counts it): every function, builtin and class at the top of every
module of `_PACKAGES` and of the standard modules the checker calls (`_STDLIB`); the code,
defaults and closure of each of those Python functions (`f.__code__ = ...` is a replacement
too); the attributes of each of those classes (a replaced method); the exercise catalogue's
entries and their fields; and the checker's frozen numpy / jax namespaces. Modules imported later
are taken as they are when first seen.

What it cannot see is listed in the README's reliability section: in-process checks share the
student's interpreter, so code written to defeat them (changing the references themselves, a
thread that patches and restores within one check, C-level memory writes) can; summative grading
runs out of the student's process.
"""

from __future__ import annotations

import contextlib
import dataclasses
import sys
import threading
import types
from typing import Any

from ..budget import Watchdog, is_user_frame

__all__ = ["seal", "seal_mapping", "verify", "user_threads", "sealed"]

_PACKAGES = ("pytree_lab", "numpy", "jax", "jaxlib", "ml_dtypes")
_STDLIB = (
    "builtins",
    "math",
    "operator",
    "functools",
    "re",
    "json",
    "dataclasses",
    "types",
    "signal",
    "threading",
    "time",
    "contextlib",
    "io",
    "copy",
    "itertools",
    "secrets",
)

_FUNCTION_PARTS = ("__code__", "__defaults__", "__kwdefaults__")

# (module name, attribute) -> value;  id(function) -> (function, code, defaults, kwdefaults, cells)
_MODULES: dict[str, dict[str, Any]] = {}
_FUNCTIONS: dict[int, tuple] = {}
_CLASSES: dict[int, tuple[type, dict[str, Any]]] = {}
_MAPPINGS: dict[str, tuple[dict, dict[Any, Any], dict[Any, tuple]]] = {}
_SEAL_LOCK = threading.RLock()


def _kept(value: Any) -> bool:
    # classmethod and property objects are not callable themselves; a module may be (a subclass)
    return isinstance(value, (classmethod, staticmethod, property)) or (
        callable(value) and not isinstance(value, types.ModuleType)
    )


_EMPTY = object()


def _contents(cell: types.CellType) -> Any:
    try:
        return cell.cell_contents
    except ValueError:  # an empty cell
        return _EMPTY


def _seal_function(fn: Any) -> None:
    if isinstance(fn, types.FunctionType) and id(fn) not in _FUNCTIONS:
        cells = tuple(_contents(cell) for cell in fn.__closure__ or ())
        _FUNCTIONS[id(fn)] = (fn, fn.__code__, fn.__defaults__, fn.__kwdefaults__, cells)


def _seal_class(cls: type, module_name: str) -> None:
    if id(cls) in _CLASSES or getattr(cls, "__module__", None) != module_name:
        return
    attrs = {}
    for attr, value in list(vars(cls).items()):
        if _kept(value) and not isinstance(value, type):
            attrs[attr] = value
            _seal_function(getattr(value, "__func__", value))
    _CLASSES[id(cls)] = (cls, attrs)


# names the kernel itself rebinds as it runs (ipykernel gives `input` each request its own
# front end; IPython adds get_ipython, display, exit and quit while a cell runs)
_REBOUND_BUILTINS = {
    "input",
    "raw_input",
    "get_ipython",
    "display",
    "exit",
    "quit",
    "help",
    "copyright",
    "credits",
    "license",
    "breakpoint",
}


def _seal_module(name: str, module: types.ModuleType) -> None:
    try:
        items = list(vars(module).items())
    except TypeError:
        return
    shot = {}
    rebound = _REBOUND_BUILTINS if name == "builtins" else set()
    for attr, value in items:
        if attr.startswith("__") or attr in rebound or not _kept(value):
            continue
        shot[attr] = value
        _seal_function(value)
        if isinstance(value, type):
            _seal_class(value, name)
    _MODULES[name] = shot


def seal() -> None:
    """Take the references now (the course does this when imported, after binding its tools);
    modules already sealed keep their first references."""
    with _SEAL_LOCK:
        for name, module in list(sys.modules.items()):
            if module is not None and name not in _MODULES and (name in _STDLIB or name.partition(".")[0] in _PACKAGES):
                _seal_module(name, module)


def seal_mapping(name: str, mapping: dict) -> None:
    """Also keep `mapping` as it is now (the exercise catalogue): its entries, and each entry's
    function fields when it is a dataclass (a frozen one can still be changed with
    object.__setattr__); the attributes of other objects (the checker's frozen namespaces)."""
    with _SEAL_LOCK:
        fields = {}
        for key, value in mapping.items():
            if dataclasses.is_dataclass(value) and not isinstance(value, type):
                # its functions (the grader, the self-check): numbers such as a time budget may
                # be tuned by an instructor and make no wrong answer pass
                fields[key] = tuple(
                    (f.name, getattr(value, f.name))
                    for f in dataclasses.fields(value)
                    if callable(getattr(value, f.name))
                )
                for _, part in fields[key]:
                    _seal_function(part)
            elif isinstance(value, types.SimpleNamespace) or (hasattr(value, "__dict__") and not callable(value)):
                fields[key] = tuple(sorted(vars(value).items(), key=lambda kv: kv[0]))
        _MAPPINGS[name] = (mapping, dict(mapping), fields)


def sealed() -> int:
    """How many references are kept (modules' names, functions, classes' attributes, entries)."""
    return (
        sum(len(v) for v in _MODULES.values())
        + len(_FUNCTIONS)
        + sum(len(a) for _, a in _CLASSES.values())
        + sum(len(copy) for _, copy, _ in _MAPPINGS.values())
    )


def verify() -> list[str]:
    """Compare everything with its reference, put back what changed, and name it (empty when
    nothing did). Never raises."""
    changed: list[str] = []
    with _SEAL_LOCK:
        try:
            _verify(changed)
        except Exception as problem:  # noqa: BLE001 - a module whose namespace cannot be read
            changed.append(f"(the comparison itself failed: {type(problem).__name__})")
        seal()  # modules imported since: taken as they are now
    return changed


def _verify(changed: list[str]) -> None:
    for name, shot in _MODULES.items():
        module = sys.modules.get(name)
        if module is None:
            continue
        namespace = vars(module)
        for attr, value in shot.items():
            if namespace.get(attr, _EMPTY) is not value:
                namespace[attr] = value
                changed.append(f"{name}.{attr}")
    for fn, *parts, cells in _FUNCTIONS.values():
        where = f"{getattr(fn, '__module__', '?')}.{getattr(fn, '__qualname__', '?')}"
        for attr, kept in zip(_FUNCTION_PARTS, parts):
            if getattr(fn, attr) is not kept:
                setattr(fn, attr, kept)
                changed.append(f"{where}.{attr}")
        for cell, value in zip(fn.__closure__ or (), cells):
            if value is not _EMPTY and _contents(cell) is not value:
                cell.cell_contents = value
                changed.append(f"{where} (a variable it closes over)")
    for cls, attrs in _CLASSES.values():
        class_namespace = vars(cls)
        for attr, value in attrs.items():
            if class_namespace.get(attr, _EMPTY) is not value:
                with contextlib.suppress(TypeError, AttributeError):  # a type that cannot change
                    setattr(cls, attr, value)
                    changed.append(f"{cls.__module__}.{cls.__qualname__}.{attr}")
        for attr in set(class_namespace) - set(attrs) if cls.__module__.startswith("pytree_lab") else ():
            value = class_namespace[attr]  # a method of the checker's own added over an inherited one
            if (
                _kept(value)
                and not isinstance(value, type)
                and not attr.startswith("_abc")
                and any(attr in vars(base) for base in cls.__mro__[1:])
                and attr not in _LAZY_CLASS_ATTRS
            ):
                with contextlib.suppress(TypeError, AttributeError):
                    delattr(cls, attr)
                    changed.append(f"{cls.__module__}.{cls.__qualname__}.{attr}")
    for name, (mapping, copy, fields) in _MAPPINGS.items():
        if dict(mapping) != copy or any(mapping.get(k) is not v for k, v in copy.items()):
            mapping.clear()
            mapping.update(copy)
            changed.append(f"{name} (an entry)")
        for key, values in fields.items():
            value = copy[key]
            put = object.__setattr__ if dataclasses.is_dataclass(value) else setattr  # a frozen one too
            for attr, kept in values:
                if getattr(value, attr, _EMPTY) is not kept:
                    put(value, attr, kept)
                    changed.append(f"{name}[{key!r}].{attr}")


# attributes a class may gain on first use without anyone replacing anything
_LAZY_CLASS_ATTRS = frozenset({"__abstractmethods__", "__weakref__", "__dict__"})


# packages whose Thread subclasses are the kernel's machinery, started by the kernel whatever
# an answer does (ipykernel 7 runs each subshell JupyterLab asks for in a SubshellThread)
_KERNEL_THREAD_PACKAGES = frozenset({"ipykernel", "jupyter_client", "zmq", "IPython"})


def user_threads(before: set[int] | None = None) -> list[str]:
    """Names of running threads the notebook's own code started: one whose target (or `run`, or
    a Timer's function) is the user's code, or, when `before` is given, any thread started since."""
    names = []
    for thread in threading.enumerate():
        if thread is threading.current_thread() or not thread.is_alive() or isinstance(thread, Watchdog):
            continue  # a time budget's watchdog is the library's (it ends with its budget)
        target = (
            getattr(thread, "_target", None) or getattr(thread, "function", None) or getattr(type(thread), "run", None)
        )
        code = getattr(getattr(target, "__func__", target), "__code__", None)
        # (is_user_frame reads only the frame's f_code.co_filename)
        by_user = code is not None and is_user_frame(types.SimpleNamespace(f_code=code))  # type: ignore[arg-type]
        if by_user or (
            before is not None
            and thread.ident not in before
            and type(thread).__module__.split(".")[0] not in _KERNEL_THREAD_PACKAGES
        ):
            # a kernel thread (ipykernel starts a subshell's thread when the page asks for one)
            # counts only when it runs the user's code
            names.append(thread.name)
    return names
