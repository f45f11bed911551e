"""One gradient step: `value_and_grad`, then `tree.map(p - lr * g)`.

`gradient_step` is the lesson's code as a function. `CompiledStep` is the same step compiled
once for the explorer: every slider move calls it with new values of the same shapes and
dtypes, so it never retraces (dtypes are pinned: an int where a float was would recompile).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from .engine import Engine, get_engine

__all__ = ["StepResult", "gradient_step", "CompiledStep", "fresh", "pin_dtypes"]


@dataclass(frozen=True)
class StepResult:
    """The numbers of one step, all computed: loss before and after, grads, updated params."""

    params: Any
    loss: float
    grads: Any
    updated: Any
    loss_after: float
    learning_rate: float
    # Model-specific intermediate values (e.g. prediction, residual), computed in the same step.
    extras: dict = field(default_factory=dict)


def gradient_step(
    loss_fn: Callable,
    params: Any,
    *args: Any,
    learning_rate: float = 0.05,
    engine: Engine | None = None,
    **kwargs: Any,
) -> StepResult:
    """Exactly the lesson's step: `jax.value_and_grad`, then `jax.tree.map(p - lr * g)`."""
    eng = engine or get_engine()
    value, grads = eng.value_and_grad(loss_fn)(params, *args, **kwargs)
    updated = eng.tree_map(lambda p, g: p - learning_rate * g, params, grads)
    loss_after = loss_fn(updated, *args, **kwargs)
    return StepResult(params, float(value), grads, updated, float(loss_after), float(learning_rate))


class CompiledStep:
    """`gradient_step` for one loss, compiled once and reused for every new value.

    Call it with `params` and `inputs` whose leaves keep the dtypes they had the first time;
    `pin` converts a tree to those dtypes. `traces` counts how often the step was traced.
    """

    def __init__(
        self,
        loss_fn: Callable,
        *,
        extras_fn: Callable | None = None,
        engine: Engine | None = None,
        static: dict | None = None,
    ):
        self.engine = eng = engine or get_engine()
        self.loss_fn = loss_fn
        self.traces = 0

        static = dict(static or {})

        # Two compiled functions, not one: XLA compiles value_and_grad and the update + new
        # loss separately in seconds, where one function holding both took minutes for a few
        # hundred leaves (measured: 200 leaves, 2 s split against 160 s fused).
        def forward_backward(params, inputs):
            self.traces += 1  # runs while tracing only
            # the loss gets its own containers (and, eagerly, its own arrays): a loss that
            # assigns into or pops from its argument changes nothing shown or stored
            return eng.value_and_grad(lambda p: loss_fn(fresh(p, eng), **fresh(inputs, eng), **static))(params)

        def after(params, grads, inputs, learning_rate):
            # learning_rate is a Python float: weakly typed, so the update keeps each leaf's dtype
            updated = eng.tree_map(lambda p, g: p - learning_rate * g, params, grads)
            loss_after = loss_fn(fresh(updated, eng), **fresh(inputs, eng), **static)
            extras = extras_fn(params, updated, {**inputs, **static}) if extras_fn is not None else {}
            return updated, loss_after, extras

        forward_backward, after = eng.jit(forward_backward), eng.jit(after)

        def step(params, inputs, learning_rate):
            value, grads = forward_backward(params, inputs)
            updated, loss_after, extras = after(params, grads, inputs, learning_rate)
            return value, grads, updated, loss_after, extras

        self._step = step

    def __call__(self, params: Any, inputs: dict, learning_rate: float) -> StepResult:
        lr = float(learning_rate)
        value, grads, updated, loss_after, extras = self._step(params, inputs, lr)
        return StepResult(params, float(value), grads, updated, float(loss_after), float(lr), dict(extras))


def fresh(tree: Any, engine: Engine | None = None) -> Any:
    """The same tree in new containers; numpy leaves copied (JAX arrays and tracers are immutable)."""
    import numpy as np

    eng = engine or get_engine()
    return eng.tree_map(lambda x: x.copy() if isinstance(x, np.ndarray) else x, tree)


def pin_dtypes(tree: Any, engine: Engine | None = None) -> Any:
    """The tree with every numeric leaf a numpy array of the dtype JAX would give it.

    Python floats become float32 (float64 under x64), so slider values never change a dtype.
    numpy leaves are copied: the caller's arrays are never aliased.
    """
    import numpy as np

    eng = engine or get_engine()
    eng.check_tree(tree, "the tree")  # a cyclic tree: a message now, not JAX recursing until the interpreter breaks
    x64 = _x64(eng)

    def pin(x):
        if isinstance(x, bool):
            return np.asarray(x)
        if isinstance(x, int):
            return np.asarray(x, np.int64 if x64 else np.int32)
        if isinstance(x, float):
            return np.asarray(x, np.float64 if x64 else np.float32)
        if isinstance(x, np.ndarray) or isinstance(x, np.generic):
            return np.array(x, dtype=np.float32 if x.dtype == np.float64 and not x64 else x.dtype)
        if hasattr(x, "dtype") and hasattr(x, "shape"):
            a = np.asarray(x)  # a JAX array: immutable, so a view of it is safe
            if a.dtype == np.float64 and not x64:
                return a.astype(np.float32)
            return a
        return x

    return eng.tree_map(pin, tree)


def _x64(eng: Engine) -> bool:
    try:
        return bool(eng.jax.config.jax_enable_x64)
    except AttributeError:
        return False
