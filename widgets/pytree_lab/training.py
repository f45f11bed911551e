"""The step engine: a loss and an optimizer (or none), compiled once.

`TrainingStep(loss_fn, optimizer)` is the library's one step engine (the explorer's slider step
and its n-step loop); `CompiledStep` is it without an optimizer, called as
``step(params, inputs, learning_rate)``.

* ``optimizer=None`` is the lesson's plain step ``p − η·g`` (η given on every call);
* an optax ``GradientTransformation`` runs inside the compiled step as in a training loop
  (``opt.update``, then ``optax.apply_updates``);
* a function of the learning rate (``lambda lr: optax.adam(lr)``) is rebuilt inside the compiled
  step with the rate traced, so the rate can change without recompiling.

The learning rate can be set only where that changes the step: with no optimizer, a function of
the rate, or ``optax.inject_hyperparams(...)(learning_rate=<number>)`` (the rate lives in the
state). A fixed ``optax.adam(0.1)`` or a schedule has none (`lr_adjustable` is False): a given
rate is refused, not ignored.

`run(params, state, inputs, lr, n)` takes n steps in one compiled `lax.while_loop` over a
fixed-size buffer of losses (every n uses the same code); if the steps diverge it stops, and says
so, at the last point before the first non-finite loss. A big tree (`step.LEAN_LEAVES` leaves)
takes the lean path (`step.Staged`, the plain update in numpy: `step.sgd_update`). In the
JupyterLite kernel the optimizers of `pytree_lab_lite.optax` run in a plain Python loop.
"""

from __future__ import annotations

import contextlib
import importlib
import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, NamedTuple, cast

from .engine import Engine, get_engine
from .optimizer_state import OptimizerError, _bad_state_leaf, _Optimizer, blamed
from .step import Staged, StepResult, fresh, is_big_tree, pin_dtypes, return_freed_memory, sgd_update
from .summaries import to_host

__all__ = ["TrainingStep", "CompiledStep", "TrainingResult", "RunResult"]

_AT_FAULT = ". The optimizer is at fault here, not the loss or the learning rate."
# Losses of one compiled loop call: n steps are taken in ceil(n / CHUNK) calls of the same code.
CHUNK = 256
KEPT_ROOM = 1 << 22  # numbers: up to this, a kept run's buffers hold CHUNK points (one loop compiled)


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
    points: list | None = None  # keep=True: (params leaves, state leaves) as numpy arrays at each step's start


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
        self.trace_counts = {"step": 0, "run": 0}  # traces of each compiled function
        self._extras_fn = extras_fn
        # Two compiled functions for one step, not one: XLA compiles value_and_grad and the
        # update + new loss apart in seconds, where one function holding both took minutes for a
        # few hundred leaves (measured: 200 leaves, 2 s split against 160 s fused).
        self._forward_backward = eng.jit(self._traced_value_and_grad)
        self._after_fn = eng.jit(self._traced_after)
        self._run_fn = None if eng.is_lite else eng.jit(self._traced_run)
        # A big tree: value_and_grad staged (step.Staged), the new loss its first output at the
        # updated params, the plain update in numpy, the optimizer's update and the extras as
        # programs of their own (each traced once, then compiled, or run operation by operation
        # when too big to compile). None: decided at the first step.
        self.lean = lean
        self._lean_fns: dict = {"vg": Staged(self._forward_backward, eng)}
        if self._opt.kind != "plain":
            self._lean_fns["update"] = Staged(eng.jit(self._traced_update), eng)
        if extras_fn is not None:
            self._lean_fns["extras"] = eng.jit(lambda p, u, i: extras_fn(p, u, {**i, **self.static}))

    # ---- what the optimizer allows
    @property
    def lr_adjustable(self) -> bool:
        """Whether the learning rate given to `step`/`run` changes the step (see the module doc).

        For an optax transformation this is known once a state exists (after `init`)."""
        return self._opt.lr_adjustable

    @property
    def lr_source(self) -> str:
        """ "argument" (plain step or a function of the rate), "state" (inject_hyperparams) or "fixed"."""
        if self._opt.kind in ("plain", "factory"):
            return "argument"
        return "state" if self.lr_adjustable else "fixed"

    def learning_rate_of(self, state: Any) -> float | None:
        """The learning rate held in an inject_hyperparams state, else None."""
        if self.lr_source != "state":
            return None
        import numpy as np

        return float(np.asarray(self._opt.rate_in(state)))

    # ---- state
    def init(self, params: Any, learning_rate: float | None = None) -> Any:
        """A fresh optimizer state for `params` (None without an optimizer)."""
        opt = self._opt
        if opt.kind == "plain":
            return None
        if opt.kind == "factory" and learning_rate is None:
            raise OptimizerError("optimizer=<function of the learning rate> needs a learning rate to start from.")
        transformation = opt.make(learning_rate)
        with blamed(f"The optimizer's init ({opt.name}) failed: ", _AT_FAULT):
            state = transformation.init(params)
        bad = _bad_state_leaf(state, self.engine)
        if bad:
            raise OptimizerError(
                f"The optimizer's init ({opt.name}) returned a state holding {bad}: an optimizer "
                "state is a tree of arrays (as optax's init returns), which the compiled step "
                "can carry from one step to the next."
            )
        # every number an array of a fixed dtype: JAX's weakly typed scalars in a fresh state
        # would otherwise make the second step compile again
        state = pin_dtypes(state, self.engine)
        if opt.kind == "transformation":
            opt.inspect(state)
        return state

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
            state = opt.with_rate(state, lr)
        with blamed(f"The optimizer's update ({opt.name}) failed: ", _AT_FAULT):
            updates, new_state = transformation.update(grads, state, params)
        self._check_updates(params, updates)
        optax = importlib.import_module("pytree_lab_lite.optax" if eng.is_lite else "optax")
        return updates, optax.apply_updates(params, updates), new_state

    def _check_updates(self, params: Any, updates: Any) -> None:
        """Updates must have the params' structure and shapes (apply_updates would broadcast)."""
        import numpy as np

        eng = self.engine
        name = self._opt.name
        with blamed(f"The optimizer's update ({name}) returned updates JAX cannot flatten (", ")."):
            p_flat, p_def = eng.tree_flatten_with_path(params)
            u_leaves, u_def = eng.tree_flatten(updates)
        if u_def != p_def:
            raise OptimizerError(
                f"The optimizer's update ({name}) returned updates shaped as {u_def}, not as the "
                f"params ({p_def}): updates must have the params' structure, one leaf per parameter."
            )
        for (path, p), u in zip(p_flat, u_leaves):
            if np.shape(u) != np.shape(p):
                raise OptimizerError(
                    f"The optimizer's update ({name}) changed the shape of params{eng.keystr(path)}: its update "
                    f"has shape {tuple(np.shape(u))} where the parameter has {tuple(np.shape(p))}. Updates must "
                    "have the params' shapes (optax.apply_updates would broadcast them into new parameters)."
                )

    def _traced_value_and_grad(self, params, inputs):
        self.trace_counts["step"] += 1  # runs while tracing only
        return self.engine.value_and_grad(lambda p: self._loss(p, inputs))(params)

    def _traced_after(self, params, state, grads, inputs, lr):
        """The update, the loss at the updated params and the extras, for grads at params."""
        updates, updated, new_state = self._update(params, state, grads, lr)
        loss_after = self._loss(updated, inputs)
        extras = self._extras_fn(params, updated, {**inputs, **self.static}) if self._extras_fn is not None else {}
        return updates, updated, new_state, loss_after, extras

    def _compiled_step(self, params, state, inputs, lr):
        value, grads = self._forward_backward(params, inputs)
        updates, updated, new_state, loss_after, extras = self._after_fn(params, state, grads, inputs, lr)
        return value, grads, updates, updated, new_state, loss_after, extras

    def _loss(self, params, inputs):
        # the loss gets its own containers (and numpy copies): a loss that assigns into or pops
        # from its argument changes nothing shown or stored
        eng = self.engine
        return self.loss_fn(fresh(params, eng), **fresh(inputs, eng), **self.static)

    def _one(self, params, state, inputs, lr):
        """One step of the loop: the loss where it starts, new params and state (a big tree's
        from the lean step's staged programs)."""
        if self.lean:
            value, _, _, updated, new_state = self._lean_update(params, state, inputs, lr)
            return value, updated, new_state
        value, grads = self.engine.value_and_grad(lambda p: self._loss(p, inputs))(params)
        _, updated, new_state = self._update(params, state, grads, lr)
        return value, updated, new_state

    def _lean_update(self, params, state, inputs, lr):
        """The loss, grads, updates, updated params and state from the staged programs; the plain
        update in numpy (`sgd_update`: jax.tree.map's numbers, milliseconds for 10k leaves where
        20k eager JAX operations take seconds; its `updates` are not kept)."""
        fns = self._lean_fns
        value, grads = fns["vg"](params, inputs)
        if self._opt.kind == "plain":
            return value, grads, None, sgd_update(params, grads, float(lr), self.engine), state
        updates, updated, new_state = fns["update"](params, state, grads, lr)
        return value, grads, updates, updated, new_state

    def _traced_run(self, params, state, inputs, lr, k, kept=None):
        self.trace_counts["run"] += 1
        import jax
        import jax.numpy as jnp

        value0 = jax.eval_shape(lambda p: self._loss(p, inputs), params)
        losses = jnp.full((CHUNK,), jnp.nan, dtype=value0.dtype)

        # Only the loss is checked in the loop (a non-finite step shows up as a non-finite loss at
        # the next point); `run` then goes back to the last point with a finite loss.
        def cond(carry):
            i, _, _, _, ok, _ = carry
            return (i < k) & ok

        def body(carry):
            i, p, s, losses, _, kept = carry
            if kept is not None:  # `run(..., keep=True)`: each point's params and state, as they are
                kept = jax.tree.map(lambda buf, x: buf.at[i].set(x), kept, (p, s))
            value, p, s = self._one(p, s, inputs, lr)
            losses = losses.at[i].set(value.astype(losses.dtype))
            return i + 1, p, s, losses, jnp.isfinite(value), kept

        i0 = jnp.zeros((), jnp.int32)
        _, p, s, losses, _, kept = jax.lax.while_loop(cond, body, (i0, params, state, losses, jnp.array(True), kept))
        # steps taken need not travel back: k, or up to the first non-finite loss
        return p, s, losses, kept

    # ---- calls
    def _lr_value(self, learning_rate: Any, params: Any, opt_state: Any) -> Any:
        import numpy as np

        if self.lean is None:
            self.lean = is_big_tree(params, self.engine)
        if self._opt.kind == "transformation" and not self._opt.inspected:
            self._opt.inspect(opt_state)  # a state not made by `init`: find its learning rate
        if learning_rate is None:
            if self.lr_source == "argument":
                raise OptimizerError("This step needs a learning rate.")
            if self.lr_source == "state":  # the rate already in the state stays
                return np.asarray(self._opt.rate_in(opt_state))
            return np.float32(0)  # unused: the rate is fixed inside the optimizer
        if self.lr_source == "fixed":
            raise OptimizerError(
                "This optimizer's learning rate is fixed inside it (e.g. optax.adam(0.1)), so a learning "
                "rate given here would do nothing. To change it, pass optimizer=lambda lr: optax.adam(lr) "
                "or optax.inject_hyperparams(optax.adam)(learning_rate=0.1)."
            )
        leaves = [x for x in self.engine.tree_leaves(params) if hasattr(x, "dtype")]
        dtype = np.result_type(*[x.dtype for x in leaves]) if leaves else np.float32
        if not np.issubdtype(dtype, np.floating):
            dtype = np.float32
        return np.asarray(learning_rate, dtype=dtype)

    def _lean_step(self, params, state, inputs, lr):
        """`_compiled_step`'s results from the staged programs (see `lean`)."""
        value, grads, updates, updated, new_state = self._lean_update(params, state, inputs, lr)
        fns = self._lean_fns
        loss_after = fns["vg"].first(updated, inputs)
        extras = fns["extras"](params, updated, inputs) if "extras" in fns else {}
        return value, grads, updates, updated, new_state, loss_after, extras

    def _traced_update(self, p, s, g, rate):
        self.trace_counts["update"] = self.trace_counts.get("update", 0) + 1
        return self._update(p, s, g, rate)

    @property
    def traces(self) -> dict:
        """How often each compiled function was traced: "step" (the loss's value_and_grad),
        "run" (the n-step loop), "update" (a big tree's staged optimizer update)."""
        return self.trace_counts

    @property
    def staged(self) -> Staged:
        """The lean step's staged value_and_grad (`step.Staged`: what it traced, whether it runs
        operation by operation, a background compile's state)."""
        return self._lean_fns["vg"]

    @property
    def interpreted(self) -> bool:
        """True when the lean step runs its program operation by operation (see step.py)."""
        return bool(self.lean) and self.staged.interpreted

    def share_value_and_grad(self, staged: Any) -> None:
        """Use `staged` (a `step.Staged` of this loss's value_and_grad at (params, inputs), e.g.
        the explorer's slider step) for the lean steps instead of tracing the loss again."""
        self._lean_fns["vg"] = staged

    def step(self, params: Any, opt_state: Any, inputs: dict, learning_rate: Any = None) -> TrainingResult:
        """One step from `params` with every intermediate value."""
        lr = self._lr_value(learning_rate, params, opt_state)
        step_fn = self._lean_step if self.lean else self._compiled_step
        with self._returning_freed_memory():
            value, grads, updates, updated, new_state, loss_after, extras = step_fn(params, opt_state, inputs, lr)
        if self.lr_source == "state":
            shown_lr = cast(float, self.learning_rate_of(new_state))  # a float: the rate is in the state
        elif self.lr_source == "fixed":
            shown_lr = math.nan
        else:
            shown_lr = float(lr)
        return TrainingResult(
            params,
            float(to_host(value)),
            grads,
            updated,
            float(to_host(loss_after)),
            shown_lr,
            dict(extras),
            opt_state=opt_state,
            opt_state_after=new_state,
            updates=updates,
        )

    __call__ = step

    def run(
        self,
        params: Any,
        opt_state: Any,
        inputs: dict,
        learning_rate: Any = None,
        n: int = 1,
        *,
        deadline: float | None = None,
        keep: bool = False,
    ) -> RunResult:
        """`n` steps from `params`, compiled as one loop.

        If the loss at some point is not finite (the steps diverged), the run ends at the last
        point before it, the one whose step goes wrong: `steps` says how many were taken and
        `stopped_loss` the loss at the point that was not entered. `deadline` (a
        `time.monotonic()` time) ends the run where it got to once passed (checked after each
        chunk of `CHUNK` compiled steps, or each step of a big tree's loop): `timed_out` is then
        True. `keep=True` also gives the params and optimizer state at each step's start (`points`).
        """
        n = int(n)
        if n < 0:
            raise ValueError(f"n must be 0 or more, got {n}")

        lr = self._lr_value(learning_rate, params, opt_state)
        with self._returning_freed_memory():
            return self._run(params, opt_state, inputs, lr, n, deadline, keep)

    @contextlib.contextmanager
    def _returning_freed_memory(self) -> Iterator[None]:
        """After a call that traced (so XLA compiled), what the compiler freed goes back to the system."""
        traces = dict(self.trace_counts)
        try:
            yield
        finally:
            if self.trace_counts != traces:
                return_freed_memory()

    def _run(self, params, opt_state, inputs, lr, n, deadline, keep) -> RunResult:
        import time

        import numpy as np

        def chunk(p, s, k, deadline=None, keep=False):
            """k steps: (taken, params, state, losses, kept points)."""
            if self._run_fn is None or self.lean:
                # The Lite engine's loop (no compiler there) and a big tree's (a compiled loop
                # would hold the whole loss, its gradient and the update in one program: minutes
                # of XLA): the same steps one by one, stopping after the first point whose loss
                # is not finite, as the compiled loop does (and after the step that passes `deadline`).
                losses, kept = [], []
                for _ in range(k):
                    if deadline is not None and losses and time.monotonic() > deadline:
                        break
                    if keep:
                        kept.append(tuple([np.asarray(to_host(x)) for x in self.engine.tree_leaves(t)] for t in (p, s)))
                    value, p, s = self._one(p, s, inputs, lr)
                    losses.append(float(to_host(value)))
                    if not math.isfinite(losses[-1]):
                        break
                return len(losses), p, s, losses, kept
            p, s, buf, kept = self._run_fn(p, s, inputs, lr, np.int32(k), self._buffers(p, s, k) if keep else None)
            if keep:  # the stacked buffers, one point per step: the k points taken come over
                leaves = [[np.asarray(to_host(b[:k])) for b in self.engine.tree_leaves(t)] for t in kept]
                kept = [tuple([b[t] for b in bufs] for bufs in leaves) for t in range(k)]
            return k, p, s, np.asarray(to_host(buf))[:k], kept

        losses: list[float] = []
        points: list | None = [] if keep else None
        done = 0
        p, s = params, opt_state
        while done < n:
            if deadline is not None and done and time.monotonic() > deadline:
                return RunResult(p, s, losses, done, None, True, points)
            taken, new_p, new_s, chunk_losses, kept = chunk(p, s, min(CHUNK, n - done), deadline, keep)
            # the loss at point j is not finite: back to point j - 1 (the same code, fewer steps)
            finite = np.isfinite(chunk_losses)
            j = None if finite.all() else int(np.argmin(finite))
            chunk_losses = np.asarray(chunk_losses).tolist()
            back = taken if j is None else max(j - 1, 0)
            if points is not None:
                points += kept[:back]
            if j is None:
                losses += chunk_losses
                done += taken
                p, s = new_p, new_s
                continue
            if back:
                _, p, s, _, _ = chunk(p, s, back)
            losses += chunk_losses[:back]
            return RunResult(p, s, losses, done + back, float(chunk_losses[j]), False, points)
        return RunResult(p, s, losses, done, None, False, points)

    def _buffers(self, p: Any, s: Any, k: int) -> Any:
        """Room for the points of (params, state) of `k` steps in the compiled loop (`run(...,
        keep=True)`): `CHUNK` points while they hold at most `KEPT_ROOM` numbers (one loop compiled
        for every k), else the power of two from k (a 1M-parameter model's step(1): 1 point, not 256)."""
        import jax.numpy as jnp

        size = sum(int(jnp.size(x)) for x in self.engine.tree_leaves((p, s)))
        rows = CHUNK if CHUNK * size <= KEPT_ROOM else min(CHUNK, 1 << (k - 1).bit_length())
        return self.engine.tree_map(lambda x: jnp.zeros((rows, *jnp.shape(x)), jnp.result_type(x)), (p, s))


class CompiledStep(TrainingStep):
    """The lesson's plain step ``p − η·g``: `TrainingStep` without an optimizer, called as
    ``step(params, inputs, learning_rate)`` (a `StepResult`)."""

    def __init__(self, loss_fn: Callable, **options: Any):  # TrainingStep's keywords
        super().__init__(loss_fn, None, **options)

    @property
    def traces(self) -> int:  # type: ignore[override]
        """How often the loss was traced (1 for every call with the same shapes and dtypes)."""
        return self.trace_counts["step"]

    def __call__(self, params: Any, inputs: dict, learning_rate: float) -> StepResult:  # type: ignore[override]
        lr = float(learning_rate)
        r = self.step(params, None, inputs, lr)
        return StepResult(params, r.loss, r.grads, r.updated, r.loss_after, lr, r.extras)
