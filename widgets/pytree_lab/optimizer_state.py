"""An optimizer as the step and the lesson see it.

What the step needs to know about an optimizer: its kind (none, an optax transformation, a
function of the learning rate), where an inject_hyperparams state keeps its rate, and the
optimizer's failures named as its own (`OptimizerError`). Its state read as the lesson describes
it: the moment trees shaped like the params (Adam's mu and nu, momentum's trace), by name, and
the rest (counts, hyperparameters); and the constants of the one Adam inside an optimizer, for
the worked calculation."""

from __future__ import annotations

import contextlib
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from .engine import Engine, get_engine
from .formatting import short_error
from .page import is_number

__all__ = [
    "StateView",
    "decompose_state",
    "adam_hyperparameters",
    "OptimizerError",
    "optimizer_name",
    "is_transformation",
]


# ---------------------------------------------------------------------------------------- the optimizer
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


@contextlib.contextmanager
def blamed(before: str, after: str) -> Iterator[None]:
    """Run the optimizer's own code: what it raises (an interrupt or a time budget aside) is said as
    its failure, the short error between `before` and `after`."""
    try:
        yield
    except BaseException as err:  # noqa: BLE001 - the optimizer's own code: said as its failure
        from .guard import TimeBudgetExceeded

        if isinstance(err, (KeyboardInterrupt, TimeBudgetExceeded, OptimizerError)):  # not the optimizer's to own
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


def _holds_rate(node: Any) -> bool:
    """An inject_hyperparams state holding a numeric `learning_rate` (not a schedule: a schedule
    overwrites it on every update)."""
    fields = getattr(node, "_fields", ()) if isinstance(node, tuple) else ()
    if "hyperparams" not in fields or "inner_state" not in fields or not isinstance(node.hyperparams, dict):
        return False
    return "learning_rate" in node.hyperparams and "learning_rate" not in (
        getattr(node, "hyperparams_states", {}) or {}
    )


def _check_engine(opt: Any, lite: bool, then: str = "") -> None:
    """The Lite engine's optimizers run in the Lite kernel only (they step plain numpy trees, not
    traced arrays), optax's in a JAX kernel only."""
    if lite and not getattr(opt, "__pytree_lab_lite__", False):
        raise OptimizerError(
            "This optimizer needs JAX (optax runs on jaxlib, which cannot be installed in this "
            "kernel). The Lite engine has sgd, momentum and adam with optax's update rules: "
            f"`import optax` gives them in the browser kernel (`from pytree_lab_lite import optax` elsewhere){then}."
        )
    if not lite and getattr(opt, "__pytree_lab_lite__", False):
        raise OptimizerError(
            "This is the Lite engine's optimizer (pytree_lab_lite.optax, for the browser kernel), and this "
            "kernel runs JAX: use optax itself. Install it with `pip install optax` (or "
            "`pip install \"pytree-lab[jax]\"`, which brings JAX and optax), restart the kernel, then "
            "`import optax`."
        )


class _Optimizer:
    """What the step needs to know about the optimizer it was given: its kind ("plain": none,
    "transformation", "factory": a function of the learning rate) and, once a state exists,
    whether one inject_hyperparams state holds its learning rate (`inspect`)."""

    def __init__(self, optimizer: Any, engine: Engine):
        self.given, self.engine = optimizer, engine
        if optimizer is None:
            self.kind = "plain"
        elif is_transformation(optimizer):
            self.kind = "transformation"
            _check_engine(optimizer, engine.is_lite, ", then optimizer=optax.adam(0.1)")
        elif callable(optimizer):
            self.kind = "factory"
        else:
            raise OptimizerError(
                f"optimizer must be None, an optax GradientTransformation (e.g. optax.adam(0.01)) or a "
                f"function of the learning rate (e.g. lambda lr: optax.adam(lr)); got {type(optimizer).__name__}."
            )
        self.rate_holders = 0
        self.inspected = False
        self.name = optimizer_name(optimizer) if optimizer is not None else "none"

    def inspect(self, state: Any) -> None:
        """Count the inject_hyperparams states that keep a learning rate (known once a state exists)."""
        self.rate_holders = len(self._holders(state))
        self.inspected = True

    def _holders(self, state: Any) -> list:
        return [n for n in self.engine.tree_leaves(state, is_leaf=_holds_rate) if _holds_rate(n)]

    def rate_in(self, state: Any) -> Any:
        """The learning rate an inject_hyperparams state holds."""
        return self._holders(state)[0].hyperparams["learning_rate"]

    def with_rate(self, state: Any, lr: Any) -> Any:
        """`state` holding the learning rate `lr` (in the dtype of the one it replaces); new
        containers, the old ones never mutated."""

        def set_lr(node: Any) -> Any:
            hp = dict(node.hyperparams)
            old = hp["learning_rate"]
            hp["learning_rate"] = lr.astype(old.dtype) if hasattr(old, "dtype") and hasattr(lr, "astype") else lr
            return node._replace(hyperparams=hp)

        return self.engine.tree_map(lambda n: set_lr(n) if _holds_rate(n) else n, state, is_leaf=_holds_rate)

    def make(self, lr: Any) -> Any:
        if self.kind != "factory":
            return self.given
        opt = self.given(lr)
        if not is_transformation(opt):
            raise OptimizerError(
                "optimizer=… was called with the learning rate and should return an optax "
                f"GradientTransformation; it returned {type(opt).__name__}."
            )
        _check_engine(opt, self.engine.is_lite)
        return opt

    @property
    def lr_adjustable(self) -> bool:
        return self.kind != "transformation" or self.rate_holders == 1  # after `inspect` (TrainingStep.init)


# ---------------------------------------------------------------------------------------- state view
@dataclass(frozen=True)
class StateView:
    """An optimizer state split as the lesson describes it.

    `moments`: name -> a tree with the params' structure and shapes ("adam mu", "adam nu",
    "momentum trace", ...), to be aligned row by row with params. `rest`: name -> everything else
    (step counts, hyperparameters, empty states), shown apart as optimizer state. `where`: name ->
    the path of that part inside the state (keystr form, e.g. "[0].mu").
    """

    moments: dict
    rest: dict
    where: dict


# Readable names for the state types optax uses (others: the type name without ScaleBy/State).
_TYPE_LABELS = {
    "TraceState": "momentum",
    "ScaleByAdamState": "adam",
    "MultiStepsState": "multisteps",
    "InjectHyperparamsState": "inject_hyperparams",
    "InjectStatefulHyperparamsState": "inject_hyperparams",
    "EmptyState": "empty",
}
# Wrappers whose inner state is a whole optimizer's state: its parts keep their own names.
_INNER_FIELDS = {"inner_state", "inner_opt_state", "inner_states"}


def decompose_state(state: Any, params: Any, engine: Engine | None = None) -> StateView:
    """Split `state` into moment trees shaped like `params` and the rest (see `StateView`)."""
    import numpy as np

    eng = engine or get_engine()
    params_def = eng.tree_structure(params)
    params_leaves = eng.tree_leaves(params)
    shapes = [np.shape(x) for x in params_leaves]

    def like_params(node: Any) -> bool:
        if not params_leaves:
            return False
        try:
            if eng.tree_structure(node) != params_def:
                return False
            leaves = eng.tree_leaves(node)
        except Exception:
            return False
        return all(
            hasattr(leaf, "dtype") and np.shape(leaf) == shape and np.issubdtype(np.asarray(leaf).dtype, np.inexact)
            for leaf, shape in zip(leaves, shapes)
        )

    found: list[tuple[str, str, Any, bool]] = []  # (name, where, value, is_moment)

    def visit(node: Any, words: list[str], where: str) -> None:
        if like_params(node):
            found.append((" ".join(words) or "state", where, node, True))
            return
        if isinstance(node, tuple) and hasattr(node, "_fields"):
            name = type(node).__name__
            short = name.removeprefix("ScaleBy")
            label = _TYPE_LABELS.get(name) or (short.removesuffix("State") or short).lower()
            if not node._fields:  # an empty state: shown apart, as what it is
                found.append((" ".join(words + [label]), where, node, False))
                return
            for field_name, child in zip(node._fields, node):
                if field_name in _INNER_FIELDS:
                    visit(child, words, f"{where}.{field_name}")
                elif label == "inject_hyperparams" and field_name == "hyperparams" and isinstance(child, dict):
                    for key, value in child.items():
                        found.append((" ".join(words + [str(key)]), f"{where}.{field_name}[{key!r}]", value, False))
                else:
                    visit(child, [*words, label, field_name], f"{where}.{field_name}")
            return
        if isinstance(node, (tuple, list)):
            if len(node) == 0:
                if words:  # an empty slot of a named state (e.g. skip_state=()): shown apart
                    found.append((" ".join(words), where, node, False))
                return
            for i, child in enumerate(node):
                visit(child, words, f"{where}[{i}]")
            return
        if isinstance(node, dict):
            for key, child in node.items():
                visit(child, words + [str(key)], f"{where}[{key!r}]")
            return
        found.append((" ".join(words) or "state", where, node, False))

    visit(state, [], "")
    # the same name twice (two Adams in a chain, several empty states): say where each one is
    counts = Counter(name for name, *_ in found)
    moments: dict = {}
    rest: dict = {}
    where: dict = {}
    for name, path, value, is_moment in found:
        if counts[name] > 1:
            name = f"{name} (state{path})"
        (moments if is_moment else rest)[name] = value
        where[name] = path
    return StateView(moments, rest, where)


# ---------------------------------------------------------------------------------------- Adam's numbers
def adam_hyperparameters(optimizer: Any) -> dict | None:
    """b1, b2, eps, eps_root and the learning rate of the one Adam inside an optax (or Lite)
    optimizer, read from the functions it was built from; None unless exactly one plain Adam
    (not Nesterov) with numeric constants is found. The worked calculation uses them to show
    m̂ and v̂; it also shows the optimizer's own update beside, so a reading that does not fit
    (weight decay, clipping after Adam) is visible rather than hidden."""
    adams: list[dict] = []
    scales: list[Any] = []
    seen: set[int] = set()

    def walk(obj: Any, depth: int) -> None:
        if depth > 10 or id(obj) in seen:
            return
        seen.add(id(obj))
        fn = getattr(obj, "__func__", obj)  # bound methods (MultiSteps.update)
        if callable(fn) and hasattr(fn, "__code__"):
            name = fn.__qualname__
            cells = {}
            for free, cell in zip(fn.__code__.co_freevars, getattr(fn, "__closure__", None) or ()):
                with contextlib.suppress(ValueError):  # an empty cell
                    cells[free] = cell.cell_contents
            if name.startswith("scale_by_adam.<locals>.update"):
                adams.append(cells)
            elif name.startswith("scale.<locals>.update") and "step_size" in cells:
                scales.append(cells["step_size"])
            for value in cells.values():
                walk(value, depth + 1)
            owner = getattr(obj, "__self__", None)
            if owner is not None:
                walk(owner, depth + 1)
        elif isinstance(obj, (tuple, list)):
            for item in obj:
                walk(item, depth + 1)
        elif hasattr(obj, "__dict__") and type(obj).__module__.split(".")[0] in ("optax", "pytree_lab"):
            for value in vars(obj).values():
                walk(value, depth + 1)

    walk(getattr(optimizer, "update", None), 0)
    if len(adams) != 1 or adams[0].get("nesterov", False):
        return None
    found = {k: adams[0].get(k) for k in ("b1", "b2", "eps", "eps_root")}
    if len(scales) == 1:
        found["learning_rate"] = -scales[0] if isinstance(scales[0], (int, float)) else None
    if not all(is_number(v) for v in found.values() if v is not None):
        return None
    return {k: float(v) for k, v in found.items() if v is not None}
