"""Real training steps: a loss and an optimizer, compiled once.

`TrainingStep(loss_fn, optimizer)` is the explorer's step with an optimizer in it:

* ``optimizer=None`` is the lesson's plain step ``p − η·g`` (η given on every call);
* an optax ``GradientTransformation`` runs inside the compiled step exactly as in a training
  loop: ``updates, state = opt.update(grads, state, params)``, then ``optax.apply_updates``;
* a function of the learning rate (``lambda lr: optax.adam(lr)``) is rebuilt inside the
  compiled step with the learning rate as a traced value, so the rate can change between
  calls without recompiling.

The learning rate can be set only where setting it changes the step: with no optimizer, with a
function of the rate, and with ``optax.inject_hyperparams(...)(learning_rate=<number>)`` (the
rate then lives in the optimizer state). A fixed ``optax.adam(0.1)`` or a schedule has no
adjustable rate (`lr_adjustable` is False) and a given rate is refused, not ignored.

`run(params, state, inputs, lr, n)` takes n steps in one compiled loop (a `lax.while_loop`
over a fixed-size buffer of losses, so every n uses the same compiled code); if the steps
diverge it stops, and says so, at the last point before the first non-finite loss.

`decompose_state(state, params)` splits an optimizer state the way the lesson describes it:
the moment trees that share the parameters' structure (Adam's ``mu`` and ``nu``, momentum's
``trace``, MultiSteps' accumulated gradients), by readable name, to be aligned row by row with
the params; and the rest (step counts, hyperparameters, empty states) shown apart.

In the JupyterLite kernel (no JAX, so no optax) the optimizers of `pytree_lab.compat.optax`
(sgd, momentum, adam, following optax's update rules) run in a plain Python loop.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable, NamedTuple

from .engine import Engine, get_engine
from .step import StepResult, fresh, pin_dtypes

__all__ = [
    "TrainingStep",
    "TrainingResult",
    "RunResult",
    "StateView",
    "decompose_state",
    "adam_hyperparameters",
    "OptimizerError",
]

# Losses of one compiled loop call: n steps are taken in ceil(n / CHUNK) calls of the same code.
CHUNK = 256


class OptimizerError(ValueError):
    """An optimizer that cannot be used here (said in the lesson's terms)."""


def optimizer_name(optimizer: Any) -> str:
    """A short name for an optimizer in a message: the function that built it (`exiting`, `adam`,
    `chain`), a factory's name, or its type."""
    target = getattr(optimizer, "update", None) if _is_transformation(optimizer) else optimizer
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
    from ._budget import TimeBudgetExceeded

    return isinstance(err, (KeyboardInterrupt, TimeBudgetExceeded, OptimizerError))


def _err_text(err: BaseException) -> str:
    try:
        text = str(err)
    except BaseException:  # noqa: BLE001 - a __str__ that raises
        text = ""
    name = type(err).__name__
    text = text if isinstance(text, str) else ""
    return f"{name}: {text[:300]}" if text else name


def _bad_state_leaf(state: Any, engine: Engine) -> str:
    """The path and type of the first state leaf that is not a number or an array, or ""."""
    import warnings

    try:
        with warnings.catch_warnings():  # JAX warns that it takes a generator as one leaf: it is said below
            warnings.simplefilter("ignore")
            flat, _ = engine.tree_flatten_with_path(state)
    except BaseException as err:  # noqa: BLE001 - a state JAX cannot even flatten
        return f"something JAX cannot flatten ({_err_text(err)})"
    for path, leaf in flat:
        if isinstance(leaf, (bool, int, float, complex)) or (hasattr(leaf, "dtype") and hasattr(leaf, "shape")):
            continue
        return f"{type(leaf).__name__} at state{engine.keystr(path)}"
    return ""


@dataclass(frozen=True)
class TrainingResult(StepResult):
    """One step with an optimizer: `StepResult` plus the optimizer's side of it.

    `opt_state` is the state the step started from, `opt_state_after` the state it produced
    (the one `updated` was computed with), `updates` what the optimizer added to the params.
    """

    opt_state: Any = None
    opt_state_after: Any = None
    updates: Any = None


class RunResult(NamedTuple):
    """Where `n` steps ended: params, optimizer state, and the loss at every point left."""

    params: Any
    opt_state: Any
    losses: list  # loss at the start of each step taken (len == steps)
    steps: int  # steps taken (fewer than asked when a step was not finite)
    stopped_loss: float | None  # the loss at the point where the loop stopped early, if it did
    timed_out: bool = False  # the run stopped at its deadline, before n steps


# ---------------------------------------------------------------------------------------- optimizer
def _is_transformation(opt: Any) -> bool:
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


def _is_lite_transformation(opt: Any) -> bool:
    return bool(getattr(opt, "__pytree_lab_lite__", False))


class _Optimizer:
    """What the step needs to know about the optimizer it was given."""

    def __init__(self, optimizer: Any, engine: Engine):
        self.given = optimizer
        self.kind = "plain"
        self.factory: Callable | None = None
        self.transformation: Any = None
        if optimizer is None:
            pass
        elif _is_transformation(optimizer):
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
        if optimizer is not None:
            probe = self.transformation if self.kind == "transformation" else None
            if self.lite and probe is not None and not _is_lite_transformation(probe):
                raise OptimizerError(
                    "This optimizer needs JAX (optax runs on jaxlib, which cannot be installed in this "
                    "kernel). The Lite engine has sgd, momentum and adam with optax's update rules: "
                    "`from pytree_lab.compat import optax`, then optimizer=optax.adam(0.1)."
                )
            if not self.lite and probe is not None and _is_lite_transformation(probe):
                raise OptimizerError(_LITE_OPTIMIZER_UNDER_JAX)
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
            if not _is_transformation(opt):
                raise OptimizerError(
                    "optimizer=… was called with the learning rate and should return an optax "
                    f"GradientTransformation; it returned {type(opt).__name__}."
                )
            if self.lite and not _is_lite_transformation(opt):
                raise OptimizerError(
                    "This optimizer needs JAX (optax runs on jaxlib, which cannot be installed in this "
                    "kernel). The Lite engine has sgd, momentum and adam with optax's update rules: "
                    "`from pytree_lab.compat import optax`."
                )
            if not self.lite and _is_lite_transformation(opt):
                raise OptimizerError(_LITE_OPTIMIZER_UNDER_JAX)
            return opt
        return self.transformation

    @property
    def lr_adjustable(self) -> bool:
        if self.kind in ("plain", "factory"):
            return True
        return len(self.inject_paths) == 1  # after `inspect` (TrainingStep.init)


# ---------------------------------------------------------------------------------------- the step
class TrainingStep:
    """One (loss, optimizer) pair, compiled once: single steps for display, and n-step loops.

    Call `init(params, lr)` for a fresh optimizer state, `step(params, state, inputs, lr)` for one
    step with every intermediate value (a `TrainingResult`), `run(...)` for n steps.
    `traces` counts how often each compiled function was traced (one each).
    """

    def __init__(
        self,
        loss_fn: Callable,
        optimizer: Any = None,
        *,
        extras_fn: Callable | None = None,
        engine: Engine | None = None,
        static: dict | None = None,
        lean: bool | None = None,
    ):
        self.engine = eng = engine or get_engine()
        self.loss_fn = loss_fn
        self.optimizer = optimizer
        self.static = dict(static or {})
        self._opt = _Optimizer(optimizer, eng)
        self.traces = {"step": 0, "run": 0}
        self._extras_fn = extras_fn
        self._step_fn = eng.jit(self._traced_step)
        self._run_fn = None if eng.is_lite else eng.jit(self._traced_run)
        # A big tree (LEAN_LEAVES leaves or more): `step` compiles value_and_grad and the
        # optimizer's update as two functions, and takes the new loss from the first one at the
        # updated params (one program holding the loss twice, its gradient and the update takes
        # XLA minutes to compile for thousands of leaves). None: decided at the first step.
        self.lean = lean
        self._lean_fns: dict = {}

    # ---- what the optimizer allows
    @property
    def has_optimizer(self) -> bool:
        return self._opt.kind != "plain"

    @property
    def lr_adjustable(self) -> bool:
        """Whether the learning rate given to `step`/`run` changes the step (see the module doc).

        For an optax transformation this is known once a state exists (after `init`)."""
        return self._opt.lr_adjustable

    @property
    def lr_source(self) -> str:
        """"argument" (plain step or a function of the rate), "state" (inject_hyperparams) or "fixed"."""
        if self._opt.kind in ("plain", "factory"):
            return "argument"
        return "state" if self.lr_adjustable else "fixed"

    def learning_rate_of(self, state: Any) -> float | None:
        """The learning rate held in an inject_hyperparams state, else None."""
        if self.lr_source != "state":
            return None
        import numpy as np

        hp = _get(state, self._opt.inject_paths[0]).hyperparams
        return float(np.asarray(hp["learning_rate"]))

    # ---- state
    def init(self, params: Any, learning_rate: float | None = None) -> Any:
        """A fresh optimizer state for `params` (None without an optimizer)."""
        opt = self._opt
        if opt.kind == "plain":
            return None
        if opt.kind == "factory":
            if learning_rate is None:
                raise OptimizerError("optimizer=<function of the learning rate> needs a learning rate to start from.")
            transformation = opt.make(learning_rate)
        else:
            transformation = opt.transformation
        try:
            state = transformation.init(params)
        except BaseException as err:  # noqa: BLE001 - the optimizer's own code: said as its failure
            if _passes(err):
                raise
            raise OptimizerError(f"The optimizer's init ({opt.name}) failed: {_err_text(err)}. The optimizer "
                                 "is at fault here, not the loss or the learning rate.") from None
        bad = _bad_state_leaf(state, self.engine)
        if bad:
            raise OptimizerError(f"The optimizer's init ({opt.name}) returned a state holding {bad}: an optimizer "
                                 "state is a tree of arrays (as optax's init returns), which the compiled step "
                                 "can carry from one step to the next.")
        state = self._strong(state)
        if opt.kind == "transformation":
            opt.inspect(state)
        return state

    def _strong(self, tree: Any) -> Any:
        """The tree with every number an array of a fixed dtype: JAX's weakly typed scalars in a
        fresh state would otherwise make the second step compile again."""
        if self.engine.is_lite:
            return pin_dtypes(tree, self.engine)
        import jax.numpy as jnp

        def strong(x):
            if isinstance(x, (bool, int, float, complex)) or hasattr(x, "dtype"):
                a = jnp.asarray(x)
                return jnp.asarray(a, dtype=a.dtype)
            return x

        return self.engine.tree_map(strong, tree)

    # ---- the traced functions
    def _lr_like(self, lr: Any, leaf: Any) -> Any:
        """The learning rate in the dtype of the leaf it multiplies (x64 stays x64)."""
        return lr.astype(leaf.dtype) if hasattr(lr, "astype") else lr

    def _update(self, params: Any, state: Any, grads: Any, lr: Any) -> tuple[Any, Any, Any]:
        """(updates, new params, new state) for gradients at params."""
        eng = self.engine
        opt = self._opt
        if opt.kind == "plain":
            updates = eng.tree_map(lambda g: -(self._lr_like(lr, g) * g), grads)
            updated = eng.tree_map(lambda p, g: p - self._lr_like(lr, g) * g, params, grads)
            return updates, updated, state
        transformation = opt.make(lr)
        if opt.kind == "transformation" and opt.lr_adjustable:
            def set_lr(inject):
                hp = dict(inject.hyperparams)
                old = hp["learning_rate"]
                hp["learning_rate"] = lr.astype(old.dtype) if hasattr(old, "dtype") and hasattr(lr, "astype") else lr
                return inject._replace(hyperparams=hp)

            state = _replace_at(state, opt.inject_paths[0], set_lr)
        try:
            updates, new_state = transformation.update(grads, state, params)
        except BaseException as err:  # noqa: BLE001 - the optimizer's own code: said as its failure
            if _passes(err):
                raise
            raise OptimizerError(f"The optimizer's update ({opt.name}) failed: {_err_text(err)}. The optimizer "
                                 "is at fault here, not the loss or the learning rate.") from None
        self._check_updates(params, updates)
        updated = self._apply_updates(params, updates)
        return updates, updated, new_state

    def _check_updates(self, params: Any, updates: Any) -> None:
        """Updates must have the params' structure and shapes (apply_updates would broadcast)."""
        import numpy as np

        eng = self.engine
        name = self._opt.name
        try:
            p_flat, p_def = eng.tree_flatten_with_path(params)
            u_leaves, u_def = eng.tree_flatten(updates)
        except BaseException as err:  # noqa: BLE001
            if _passes(err):
                raise
            raise OptimizerError(f"The optimizer's update ({name}) returned updates JAX cannot flatten "
                                 f"({_err_text(err)}).") from None
        if u_def != p_def:
            raise OptimizerError(f"The optimizer's update ({name}) returned updates shaped as {u_def}, not as the "
                                 f"params ({p_def}): updates must have the params' structure, one leaf per parameter.")
        for (path, p), u in zip(p_flat, u_leaves):
            if np.shape(u) != np.shape(p):
                raise OptimizerError(
                    f"The optimizer's update ({name}) changed the shape of params{eng.keystr(path)}: its update "
                    f"has shape {tuple(np.shape(u))} where the parameter has {tuple(np.shape(p))}. Updates must "
                    "have the params' shapes (optax.apply_updates would broadcast them into new parameters).")

    def _apply_updates(self, params: Any, updates: Any) -> Any:
        if self.engine.is_lite:
            from .compat import optax as lite_optax

            return lite_optax.apply_updates(params, updates)
        import optax

        return optax.apply_updates(params, updates)

    def _traced_step(self, params, state, inputs, lr):
        self.traces["step"] += 1  # runs while tracing only
        value, grads = self.engine.value_and_grad(lambda p: self._loss(p, inputs))(params)
        updates, updated, new_state = self._update(params, state, grads, lr)
        loss_after = self._loss(updated, inputs)
        extras = self._extras_fn(params, updated, {**inputs, **self.static}) if self._extras_fn is not None else {}
        return value, grads, updates, updated, new_state, loss_after, extras

    def _loss(self, params, inputs):
        # the loss gets its own containers (and numpy copies): a loss that assigns into or pops
        # from its argument changes nothing shown or stored
        eng = self.engine
        return self.loss_fn(fresh(params, eng), **fresh(inputs, eng), **self.static)

    def _one(self, params, state, inputs, lr):
        """One step of the loop: the loss where it starts, new params and state."""
        value, grads = self.engine.value_and_grad(lambda p: self._loss(p, inputs))(params)
        _, updated, new_state = self._update(params, state, grads, lr)
        return value, updated, new_state

    def _lean_one(self, params, state, inputs, lr):
        """`_one` from the lean step's staged programs."""
        value, _, _, updated, new_state = self._lean_update(params, state, inputs, lr)
        return value, updated, new_state

    def _lean_update(self, params, state, inputs, lr):
        """The loss, grads, updates, updated params and state from the two staged programs."""
        fns = self._lean_functions()
        value, grads = fns["vg"](params, inputs)
        updates, updated, new_state = fns["update"](params, state, grads, lr)
        return value, grads, updates, updated, new_state

    def _traced_run(self, params, state, inputs, lr, k):
        self.traces["run"] += 1
        import jax
        import jax.numpy as jnp

        value0 = jax.eval_shape(lambda p: self._loss(p, inputs), params)
        losses = jnp.full((CHUNK,), jnp.nan, dtype=value0.dtype)

        # Only the loss is checked in the loop (a non-finite step shows up as a non-finite loss at
        # the next point); `run` then goes back to the last point with a finite loss.
        def cond(carry):
            i, _, _, _, ok = carry
            return (i < k) & ok

        def body(carry):
            i, p, s, losses, _ = carry
            value, p, s = self._one(p, s, inputs, lr)
            losses = losses.at[i].set(value.astype(losses.dtype))
            return i + 1, p, s, losses, jnp.isfinite(value)

        i0 = jnp.zeros((), jnp.int32)
        _, p, s, losses, _ = jax.lax.while_loop(cond, body, (i0, params, state, losses, jnp.array(True)))
        # steps taken need not travel back: k, or up to the first non-finite loss
        return p, s, losses

    # ---- calls
    def _lr_value(self, learning_rate: Any, params: Any, opt_state: Any) -> Any:
        import numpy as np

        if self._opt.kind == "transformation" and not self._opt.inspected:
            self._opt.inspect(opt_state)  # a state not made by `init`: find its learning rate
        if learning_rate is None:
            if self.lr_source == "argument":
                raise OptimizerError("This step needs a learning rate.")
            if self.lr_source == "state":  # the rate already in the state stays
                return np.asarray(_get(opt_state, self._opt.inject_paths[0]).hyperparams["learning_rate"])
            return np.float32(0)  # unused: the rate is fixed inside the optimizer
        if self.lr_source == "fixed":
            raise OptimizerError(
                "This optimizer's learning rate is fixed inside it (e.g. optax.adam(0.1)), so a learning "
                "rate given here would do nothing. To change it, pass optimizer=lambda lr: optax.adam(lr) "
                "or optax.inject_hyperparams(optax.adam)(learning_rate=0.1)."
            )
        leaves = [x for x in self.engine.tree_leaves(params) if hasattr(x, "dtype")]
        dtype = np.result_type(*[np.asarray(x).dtype for x in leaves]) if leaves else np.float32
        if not np.issubdtype(dtype, np.floating):
            dtype = np.float32
        return np.asarray(learning_rate, dtype=dtype)

    def _lean_step(self, params, state, inputs, lr):
        """`_traced_step`'s results from two smaller staged functions (see `lean`)."""
        value, grads, updates, updated, new_state = self._lean_update(params, state, inputs, lr)
        fns = self._lean_fns
        loss_after = fns["vg"].first(updated, inputs)
        extras = fns["extras"](params, updated, inputs) if "extras" in fns else {}
        return value, grads, updates, updated, new_state, loss_after, extras

    def _lean_functions(self) -> dict:
        """value_and_grad and the optimizer's update as two staged programs (see `lean`)."""
        from .step import Staged

        eng, fns = self.engine, self._lean_fns
        # each traced once, then compiled, or run operation by operation when too big to compile
        if "vg" not in fns:
            def forward_backward(p, i):
                self.traces["step"] += 1  # runs while tracing only
                return eng.value_and_grad(lambda q: self._loss(q, i))(p)

            fns["vg"] = Staged(eng.jit(forward_backward), eng)
        if "update" not in fns:
            def update(p, s, g, rate):
                self.traces["update"] = self.traces.get("update", 0) + 1
                return self._update(p, s, g, rate)

            fns["update"] = Staged(eng.jit(update), eng)
            if self._extras_fn is not None:
                fns["extras"] = eng.jit(lambda p, u, i: self._extras_fn(p, u, {**i, **self.static}))
        return fns

    def share_value_and_grad(self, staged: Any) -> None:
        """Use `staged` (a `step.Staged` of this loss's value_and_grad at (params, inputs), e.g.
        the explorer's slider step) for the lean steps instead of tracing the loss again."""
        self._lean_fns["vg"] = staged

    def step(self, params: Any, opt_state: Any, inputs: dict, learning_rate: Any = None) -> TrainingResult:
        """One step from `params` with every intermediate value."""
        from .step import is_big_tree

        lr = self._lr_value(learning_rate, params, opt_state)
        if self.lean is None:
            self.lean = is_big_tree(params, self.engine)
        step_fn = self._lean_step if self.lean else self._step_fn
        traces = dict(self.traces)
        value, grads, updates, updated, new_state, loss_after, extras = step_fn(params, opt_state, inputs, lr)
        if self.traces != traces:  # XLA compiled: what its compiler freed goes back to the system
            from .step import return_freed_memory

            return_freed_memory()
        if self.lr_source == "state":
            shown_lr = self.learning_rate_of(new_state)
        elif self.lr_source == "fixed":
            shown_lr = math.nan
        else:
            shown_lr = float(lr)
        return TrainingResult(
            params, float(value), grads, updated, float(loss_after), shown_lr, dict(extras),
            opt_state=opt_state, opt_state_after=new_state, updates=updates,
        )

    __call__ = step

    def run(self, params: Any, opt_state: Any, inputs: dict, learning_rate: Any = None, n: int = 1,
            *, deadline: float | None = None) -> RunResult:
        """`n` steps from `params`, compiled as one loop.

        If the loss at some point is not finite (the steps diverged), the run ends at the last
        point before it, the one whose step goes wrong: `steps` says how many were taken and
        `stopped_loss` the loss at the point that was not entered. `deadline` (a
        `time.monotonic()` time) ends the run where it got to once passed (checked after each
        chunk of `CHUNK` compiled steps, or each step of a big tree's loop): `timed_out` is then
        True.
        """
        import time

        import numpy as np

        n = int(n)
        if n < 0:
            raise ValueError(f"n must be 0 or more, got {n}")
        from .step import is_big_tree

        lr = self._lr_value(learning_rate, params, opt_state)
        if self.lean is None:
            self.lean = is_big_tree(params, self.engine)
        # a big tree: the lean step's two staged programs, step after step (a compiled loop would
        # hold the whole loss, its gradient and the update in one program: minutes of XLA)
        compiled_loop = self._run_fn is not None and not self.lean
        losses: list[float] = []
        done = 0
        p, s = params, opt_state
        while done < n:
            if deadline is not None and done and time.monotonic() > deadline:
                return RunResult(p, s, losses, done, None, True)
            k = min(CHUNK, n - done)
            if not compiled_loop:
                taken, new_p, new_s, chunk_losses = self._python_loop(p, s, inputs, lr, k, deadline)
            else:
                new_p, new_s, buf = self._run_fn(p, s, inputs, lr, np.int32(k))
                chunk_losses = np.asarray(buf)[:k].tolist()
                taken = k
            if all(math.isfinite(v) for v in chunk_losses):
                losses += chunk_losses
                done += taken
                p, s = new_p, new_s
                continue
            # the loss at point j is not finite: back to point j - 1 (the same code, fewer steps)
            j = next(t for t, v in enumerate(chunk_losses) if not math.isfinite(v))
            back = max(j - 1, 0)
            if back and compiled_loop:
                p, s, _ = self._run_fn(p, s, inputs, lr, np.int32(back))
            elif back:
                _, p, s, _ = self._python_loop(p, s, inputs, lr, back)
            losses += chunk_losses[:back]
            return RunResult(p, s, losses, done + back, float(chunk_losses[j]))
        return RunResult(p, s, losses, done, None)

    def _python_loop(self, p, s, inputs, lr, k, deadline=None):
        """The Lite engine's loop (no compiler there) and a big tree's: the same steps one by one,
        stopping after the first point whose loss is not finite, as the compiled loop does (and
        after the step that passes `deadline`)."""
        import time

        import numpy as np

        losses = []
        one = self._lean_one if self.lean else self._one
        for _ in range(k):
            if deadline is not None and losses and time.monotonic() > deadline:
                break
            value, p, s = one(p, s, inputs, lr)
            losses.append(float(np.asarray(value)))
            if not math.isfinite(losses[-1]):
                break
        return len(losses), p, s, losses


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


def _type_label(node: Any) -> str:
    name = type(node).__name__
    if name in _TYPE_LABELS:
        return _TYPE_LABELS[name]
    label = name
    if label.startswith("ScaleBy"):
        label = label[len("ScaleBy"):]
    if label.endswith("State") and len(label) > len("State"):
        label = label[: -len("State")]
    return label.lower()


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
        for leaf, shape in zip(leaves, shapes):
            if not hasattr(leaf, "dtype") or np.shape(leaf) != shape:
                return False
            if not np.issubdtype(np.asarray(leaf).dtype, np.inexact):
                return False
        return True

    found: list[tuple[str, str, Any, bool]] = []  # (name, where, value, is_moment)

    def visit(node: Any, words: list[str], where: str) -> None:
        if like_params(node):
            found.append((" ".join(words) or "state", where, node, True))
            return
        if isinstance(node, tuple) and hasattr(node, "_fields"):
            label = _type_label(node)
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
                    visit(child, words + [label, field_name] if label else words + [field_name],
                          f"{where}.{field_name}")
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
    counts: dict[str, int] = {}
    for name, _, _, _ in found:
        counts[name] = counts.get(name, 0) + 1
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
def _closure(fn: Any) -> dict:
    cells = getattr(fn, "__closure__", None) or ()
    out = {}
    for name, cell in zip(fn.__code__.co_freevars, cells):
        try:
            out[name] = cell.cell_contents
        except ValueError:  # an empty cell
            pass
    return out


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
            cells = _closure(fn)
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
    if not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in found.values() if v is not None):
        return None
    return {k: float(v) for k, v in found.items() if v is not None}
