"""`jax.config` for the Lite engine (plain Python: available even where numpy is not)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any


class _Config:
    """`jax.config` as far as the Lite engine goes: JAX's default 32-bit mode only."""

    jax_enable_x64 = False

    def update(self, name: str, value: Any) -> None:
        if name == "jax_enable_x64" and value:
            raise NotImplementedError(
                "The pytree-lab Lite engine computes in JAX's default 32-bit mode only; jax_enable_x64 needs real JAX."
            )
        setattr(self, name, value)

    def __repr__(self) -> str:
        return "<jax.config of the pytree-lab Lite engine>"


config = _Config()


# Names students reach for that the engine leaves out, and what works instead.
_INSTEAD = {
    "pmap": "jax.vmap (there is one device here)",
    "devices": "nothing: there are no devices here, arrays are numpy arrays",
    "device_put": "the value itself: there are no devices here",
    "make_jaxpr": "nothing here: there is no compiler; print values instead",
    "checkpoint": "the function itself (memory is not saved, the values are the same)",
    "custom_vjp": "a function written with jax.numpy, which grad differentiates",
    "custom_jvp": "a function written with jax.numpy, which grad differentiates",
    "linearize": "jax.jacrev",
    "jvp": "jax.jacrev (the same derivative, by reverse mode)",
    "vjp": "jax.grad, or jax.jacrev for a function with several outputs",
}


class NotInLiteEngine(AttributeError):
    """A name of JAX that the pytree-lab Lite engine (the JAX subset of the browser) lacks."""


def missing(module: str, attr: str, present: list[str]) -> NotInLiteEngine:
    """The AttributeError for `module.attr`: it says that this is the browser's engine, not JAX,
    and what works instead (a close name the engine has, or the list of them)."""
    import difflib

    short = module.removeprefix("pytree_lab_lite.")
    where = (
        f"{short}.{attr} is not in the pytree-lab Lite engine, the part of JAX that runs in this browser "
        "kernel (JAX itself cannot run in the browser); in a regular Jupyter kernel with JAX it works if JAX has it."
    )
    instead = _INSTEAD.get(attr) if short == "jax" else None
    close = difflib.get_close_matches(attr, [n for n in present if not n.startswith("_")], n=1)
    if instead:
        tip = f" Here, use {instead}."
    elif close:
        tip = f" Did you mean {short}.{close[0]}?"
    else:
        tip = f" dir({short}) lists what is here."
    return NotInLiteEngine(where + tip, name=attr)


def refusing(module: str, names: Mapping[str, Any]) -> Callable[[str], Any]:
    """A module's ``__getattr__`` (`names`: its namespace): a name it lacks raises `missing`."""

    def __getattr__(attr: str) -> Any:
        raise missing(module, attr, list(names))

    return __getattr__
