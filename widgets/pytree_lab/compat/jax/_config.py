"""`jax.config` for the Lite engine (plain Python: available even where numpy is not)."""

from __future__ import annotations

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
