"""What the step needs to know about an optimizer: its kind (none, an optax transformation, a
function of the learning rate), where an inject_hyperparams state keeps its rate, and the
optimizer's failures named as its own (`OptimizerError`)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

from .engine import Engine
from .formatting import short_error


class OptimizerError(ValueError):
    """An optimizer that cannot be used here (said in the lesson's terms)."""


def optimizer_name(optimizer: Any) -> str:
    """A short name for an optimizer in a message: the function that built it (`exiting`, `adam`,
    `chain`), a factory's name, or its type."""
    target = getattr(optimizer, "update", None) if is_transformation(optimizer) else optimizer
    qual = getattr(target, "__qualname__", None) or getattr(target, "__name__", None)
    if not isinstance(qual, str):
        return type(optimizer).__name__
    name = qual.split(".<locals>")[0]
    module = getattr(target, "__module__", "") or ""
    if name == "<lambda>":
        return "optimizer=lambda …"
    return f"optax's {name}" if module.split(".")[0] == "optax" else name


def _passes(err: BaseException) -> bool:
    """Errors that are not the optimizer's to own: an interrupt, a time budget running out."""
    from .budget import TimeBudgetExceeded

    return isinstance(err, (KeyboardInterrupt, TimeBudgetExceeded, OptimizerError))


@contextlib.contextmanager
def blamed(before: str, after: str) -> Iterator[None]:
    """Run the optimizer's own code: what it raises (an interrupt or a time budget aside) is said as
    its failure, the short error between `before` and `after`."""
    try:
        yield
    except BaseException as err:  # noqa: BLE001 - the optimizer's own code: said as its failure
        if _passes(err):
            raise
        raise OptimizerError(before + short_error(err) + after) from None


def _bad_state_leaf(state: Any, engine: Engine) -> str:
    """The path and type of the first state leaf that is not a number or an array, or ""."""
    import warnings

    try:
        with warnings.catch_warnings():  # JAX warns that it takes a generator as one leaf: it is said below
            warnings.simplefilter("ignore")
            flat, _ = engine.tree_flatten_with_path(state)
    except BaseException as err:  # noqa: BLE001 - a state JAX cannot even flatten
        return f"something JAX cannot flatten ({short_error(err)})"
    for path, leaf in flat:
        if isinstance(leaf, (bool, int, float, complex)) or (hasattr(leaf, "dtype") and hasattr(leaf, "shape")):
            continue
        return f"{type(leaf).__name__} at state{engine.keystr(path)}"
    return ""


def is_transformation(opt: Any) -> bool:
    return callable(getattr(opt, "init", None)) and callable(getattr(opt, "update", None))


def _inject_states(state: Any, path: tuple = ()) -> list[tuple]:
    """Paths (tuples of child positions) of inject_hyperparams states that hold a numeric
    `learning_rate` (not a schedule: a schedule overwrites it on every update)."""
    found = []
    if _is_inject_state(state):
        hp = state.hyperparams
        schedules = getattr(state, "hyperparams_states", {}) or {}
        if isinstance(hp, dict) and "learning_rate" in hp and "learning_rate" not in schedules:
            found.append(path)
    if isinstance(state, tuple):  # namedtuples (optimizer states) and chain tuples
        for i, child in enumerate(state):
            found += _inject_states(child, path + (i,))
    elif isinstance(state, (list, dict)):
        items = state.items() if isinstance(state, dict) else enumerate(state)
        for key, child in items:
            found += _inject_states(child, path + (key,))
    return found


def _is_inject_state(state: Any) -> bool:
    return (
        isinstance(state, tuple)
        and hasattr(state, "_fields")
        and "hyperparams" in state._fields
        and "inner_state" in state._fields
    )


def _get(state: Any, path: tuple) -> Any:
    for key in path:
        state = state[key]
    return state


def _replace_at(state: Any, path: tuple, fn: Callable[[Any], Any]) -> Any:
    """`state` with the node at `path` replaced by fn(node); containers rebuilt, never mutated."""
    if not path:
        return fn(state)
    key, rest = path[0], path[1:]
    if isinstance(state, dict):
        new = dict(state)
        new[key] = _replace_at(state[key], rest, fn)
        return type(state)(new) if type(state) is not dict else new
    items = list(state)
    items[key] = _replace_at(items[key], rest, fn)
    if hasattr(state, "_fields"):
        return type(state)(*items)
    return type(state)(items)


# A JAX kernel never runs the Lite engine's optimizers (they step plain numpy trees, not traced
# arrays): the fallback `from pytree_lab.compat import optax` is for the browser kernel only.
_LITE_OPTIMIZER_UNDER_JAX = (
    "This is the Lite engine's optimizer (pytree_lab.compat.optax, for the browser kernel), and this "
    "kernel runs JAX: use optax itself. Install it with `pip install optax` (or "
    "`pip install \"pytree-lab[jax]\"`, which brings JAX and optax), restart the kernel, then "
    "`import optax`."
)


def _check_engine(opt: Any, lite: bool, then: str = "") -> None:
    """The Lite engine's optimizers run in the Lite kernel only, optax's in a JAX kernel only."""
    if lite and not getattr(opt, "__pytree_lab_lite__", False):
        raise OptimizerError(
            "This optimizer needs JAX (optax runs on jaxlib, which cannot be installed in this "
            "kernel). The Lite engine has sgd, momentum and adam with optax's update rules: "
            f"`from pytree_lab.compat import optax`{then}."
        )
    if not lite and getattr(opt, "__pytree_lab_lite__", False):
        raise OptimizerError(_LITE_OPTIMIZER_UNDER_JAX)


class _Optimizer:
    """What the step needs to know about the optimizer it was given."""

    def __init__(self, optimizer: Any, engine: Engine):
        self.given = optimizer
        self.kind = "plain"
        self.factory: Any = None
        self.transformation: Any = None
        if optimizer is None:
            pass
        elif is_transformation(optimizer):
            self.kind = "transformation"
            self.transformation = optimizer
        elif callable(optimizer):
            self.kind = "factory"
            self.factory = optimizer
        else:
            raise OptimizerError(
                f"optimizer must be None, an optax GradientTransformation (e.g. optax.adam(0.01)) or a "
                f"function of the learning rate (e.g. lambda lr: optax.adam(lr)); got {type(optimizer).__name__}."
            )
        self.lite = engine.is_lite
        if self.kind == "transformation":
            _check_engine(optimizer, self.lite, ", then optimizer=optax.adam(0.1)")
        self.inject_paths: list[tuple] = []
        self.inspected = False
        self.name = optimizer_name(optimizer) if optimizer is not None else "none"

    def inspect(self, state: Any) -> None:
        """Find where an inject_hyperparams state keeps a learning rate (known once a state exists)."""
        self.inject_paths = _inject_states(state)
        self.inspected = True

    def make(self, lr: Any) -> Any:
        if self.kind == "factory":
            opt = self.factory(lr)
            if not is_transformation(opt):
                raise OptimizerError(
                    "optimizer=… was called with the learning rate and should return an optax "
                    f"GradientTransformation; it returned {type(opt).__name__}."
                )
            _check_engine(opt, self.lite)
            return opt
        return self.transformation

    @property
    def lr_adjustable(self) -> bool:
        if self.kind in ("plain", "factory"):
            return True
        return len(self.inject_paths) == 1  # after `inspect` (TrainingStep.init)
