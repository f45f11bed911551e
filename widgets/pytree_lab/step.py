"""One gradient step: `value_and_grad`, then `tree.map(p - lr * g)`.

`gradient_step` is the lesson's code as a function. The compiled step is the step engine in
training.py (`TrainingStep`, and `CompiledStep` without an optimizer): every slider move calls
it with values of the same shapes and dtypes, so it never retraces (`pin_dtypes`). This module
holds what that engine builds on: the results, the copies, the numpy update and `Staged`.

XLA's compile time grows faster than the program (1000 small layers: 9k operations, 12-23 s;
5000: 45k operations, 13 minutes and 5.5 GB). A big tree (`LEAN_LEAVES` leaves) compiles only
`value_and_grad`; the update ``p − η·g`` is done in numpy with JAX's numbers (`sgd_update`). A
program of `BACKGROUND_EQNS` operations first runs operation by operation while XLA compiles it
in the background; from `INTERPRET_EQNS` on it is never compiled (`Staged`).
"""

from __future__ import annotations

import atexit
import functools
import importlib
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .engine import Engine, get_engine
from .summaries import on_host
from .trees import _scalar_dtype, x64_enabled

__all__ = [
    "StepResult",
    "gradient_step",
    "Staged",
    "fresh",
    "pin_dtypes",
    "sgd_update",
    "is_big_tree",
    "LEAN_LEAVES",
    "INTERPRET_EQNS",
    "BACKGROUND_EQNS",
]

# From this many parameter leaves on, a step compiles only value_and_grad (see the module doc).
LEAN_LEAVES = 200
# From this many operations in the traced value_and_grad on, it is run operation by operation,
# never compiled (2 cores: 9k operations step in 0.6-1.2 s so, 0.03 s compiled after 12-23 s).
INTERPRET_EQNS = 12_000
# From this many operations on (and below INTERPRET_EQNS), the first steps run operation by
# operation while XLA compiles the program in a background thread (XLA lets go of the GIL: the
# kernel stays responsive); later steps use the compiled program once it is ready. Below this the
# compile takes a few seconds and is simply waited for.
BACKGROUND_EQNS = 3_000


def is_big_tree(params: Any, engine: Engine) -> bool:
    """A tree whose step is lean (`LEAN_LEAVES` leaves or more; never on the Lite engine)."""
    return (not engine.is_lite) and len(engine.tree_leaves(params)) >= LEAN_LEAVES


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
    """Exactly the lesson's step: `jax.value_and_grad`, then `jax.tree.map(p - lr * g)`.

    A tree that contains itself, or is nested deeper than JAX's flatten goes, is refused first
    (`pytree_lab.trees.TreeError`, its path named)."""
    eng = engine or get_engine()
    eng.check_tree(params, "params")
    for i, arg in enumerate(args):
        eng.check_tree(arg, f"argument {i + 2}")
    for key, arg in kwargs.items():
        eng.check_tree(arg, str(key))
    value, grads = eng.value_and_grad(loss_fn)(params, *args, **kwargs)
    updated = eng.tree_map(lambda p, g: p - learning_rate * g, params, grads)
    loss_after = loss_fn(updated, *args, **kwargs)
    return StepResult(params, float(value), grads, updated, float(loss_after), float(learning_rate))


TRIMS = 0  # how many times freed heap memory was given back (tests read it)


def return_freed_memory() -> bool:
    """Give the heap pages XLA's compiler has freed back to the operating system.

    glibc keeps freed memory in its arenas, one per thread that allocated (the compile runs in a
    thread of its own); in a lesson's kernel that was about 25 MB per compiled explorer step,
    held for the kernel's life. `malloc_trim(0)` returns it. Linux with glibc only; elsewhere
    (macOS, Windows, Pyodide) nothing happens and False is returned.
    """
    global TRIMS
    trim = _malloc_trim()
    if trim is None:
        return False
    try:
        trim(0)
    except Exception:  # noqa: BLE001 - never let housekeeping break a step
        return False
    TRIMS += 1
    return True


@functools.cache
def _malloc_trim() -> Any:
    """glibc's malloc_trim, None where there is none (musl, no libc.so.6, not Linux)."""
    if not sys.platform.startswith("linux"):
        return None
    import ctypes  # here, not at the top: every kernel imports this module, few trim memory

    try:
        return ctypes.CDLL("libc.so.6").malloc_trim
    except (OSError, AttributeError):
        return None


class Staged:
    """A jitted function, traced once per argument signature, then compiled (below
    `BACKGROUND_EQNS` operations), run one operation at a time as JAX runs code outside `jit`
    while XLA compiles it in a thread (up to `INTERPRET_EQNS`), or never compiled (past that).
    `first` gives the first output alone (op by op, without what only the others need: the loss
    without its gradient)."""

    def __init__(self, jitted: Callable, engine: Engine):
        self._jitted = jitted
        self._engine = engine
        self._signature: Any = None
        self._call: Callable = jitted
        self._first: Callable | None = None  # None: the first output of `_call`
        self._generation = 0
        self._compiled_event = threading.Event()
        self._compiled_event.set()
        self.eqns = 0  # operations in the traced program (0: not traced here)
        self.interpreted = False  # the next call runs operation by operation
        self.compiling = False  # XLA is compiling the program in the background
        self.compile_error: BaseException | None = None  # the background compile failed (kept op by op)

    def __call__(self, *args: Any) -> Any:
        self._stage(args)
        return self._call(*args)

    def first(self, *args: Any) -> Any:
        self._stage(args)
        return self._first(*args) if self._first is not None else self._call(*args)[0]

    def wait_compiled(self, timeout: float | None = None) -> bool:
        """Wait for a background compile to end (True when none is running any more)."""
        return self._compiled_event.wait(timeout)

    def _key(self, args: tuple) -> Any:
        jax = self._engine.jax
        aval = getattr(jax, "typeof", None) or jax.core.get_aval
        leaves, tree = self._engine.tree_flatten(args)
        return tree, tuple(aval(x) for x in leaves)

    def _stage(self, args: tuple) -> None:
        if not hasattr(self._jitted, "trace"):  # an engine without staging (Pyodide's): jit as it is
            return
        key = self._key(args)
        if key == self._signature:
            return
        traced = self._jitted.trace(*args)  # the user's code runs here (its errors included)
        closed, out_tree = traced.jaxpr, traced.out_tree
        self._generation += 1
        self.eqns = len(closed.jaxpr.eqns)
        self.compile_error = None
        if self.eqns < min(BACKGROUND_EQNS, INTERPRET_EQNS):
            self._use_compiled(traced.lower().compile())
        else:
            self._call, self._first = self._interpreters(closed, out_tree)
            self.interpreted = True
            if self.eqns < INTERPRET_EQNS:
                self._compile_in_background(traced, self._generation)
        self._signature = key

    def _use_compiled(self, compiled: Any) -> None:
        return_freed_memory()  # what the compiler freed goes back to the operating system
        self._call, self._first = compiled, None
        self.interpreted = False

    def _compile_in_background(self, traced: Any, generation: int) -> None:
        self.compiling = True
        self._compiled_event.clear()

        def compile_() -> None:
            try:
                compiled = traced.lower().compile()
                if generation == self._generation:  # still the program the arguments need
                    self._use_compiled(compiled)
            except BaseException as err:  # noqa: BLE001 - XLA can fail (memory): stay op by op
                if generation == self._generation:
                    self.compile_error = err
            finally:
                if generation == self._generation:
                    self.compiling = False
                    self._compiled_event.set()

        thread = threading.Thread(target=compile_, name="pytree-lab compile", daemon=True)
        _compiles[:] = [t for t in _compiles if t.is_alive()] + [thread]  # waited for at exit
        thread.start()

    def _interpreters(self, closed: Any, out_tree: Any) -> tuple[Callable, Callable | None]:
        eng = self._engine
        core = importlib.import_module(eng.jax.__name__ + ".extend.core")
        run_all = core.jaxpr_as_fun(closed)

        def call(*args):
            return eng.tree_unflatten(out_tree, run_all(*eng.tree_leaves(args)))

        try:  # what the first output needs, the rest dropped (JAX's own dead-code pass)
            from jax._src.interpreters import partial_eval as pe

            n_out = len(closed.jaxpr.outvars)
            n_first = len(eng.tree_leaves(eng.tree_unflatten(out_tree, list(range(n_out)))[0]))
            kept, used = pe.dce_jaxpr(closed.jaxpr, [True] * n_first + [False] * (n_out - n_first))
            run_first = core.jaxpr_as_fun(core.ClosedJaxpr(kept, closed.consts))
            first_tree = eng.tree_structure(eng.tree_unflatten(out_tree, [0] * n_out)[0])

            def first(*args):
                leaves = eng.tree_leaves(args)
                return eng.tree_unflatten(first_tree, run_first(*[x for x, keep in zip(leaves, used) if keep]))

            return call, first
        except Exception:  # noqa: BLE001 - an internal API moved: the whole program gives it too
            return call, None


# A compile still running when Python exits is waited for, up to this many seconds: a daemon
# thread stopped inside XLA while the interpreter shuts down aborts the process (SIGABRT), and a
# script or an nbconvert run that ends right after making an explorer must exit cleanly.
EXIT_WAIT = 120.0
_compiles: list = []


@atexit.register
def _join_compiles() -> None:
    deadline = time.monotonic() + EXIT_WAIT
    for thread in _compiles:
        thread.join(max(0.0, deadline - time.monotonic()))


def sgd_update(params: Any, grads: Any, learning_rate: float, engine: Engine | None = None) -> Any:
    """`jax.tree.map(lambda p, g: p - learning_rate * g, params, grads)`, with the same numbers.

    float32 and float64 leaves are updated in numpy, all leaves of one dtype as one vector: the
    rate rounded to the leaf's dtype (as JAX rounds a weakly typed Python float), one multiply,
    one subtract, each correctly rounded by IEEE 754, and subnormal operands and results taken
    as zero, as XLA on the CPU does (flush-to-zero). 10k small leaves take milliseconds here
    where 20k eager JAX operations take seconds. Other dtypes (bfloat16, float16) go through
    the engine, and so do grads computed on an accelerator (with that device's arithmetic: a TPU's
    float64 is not IEEE's). Returned numpy leaves are read-only, as JAX arrays are immutable.
    """
    import numpy as np

    eng = engine or get_engine()
    lr = float(learning_rate)
    p_leaves, treedef = eng.tree_flatten(params)
    g_leaves, g_def = eng.tree_flatten(grads)
    if g_def != treedef:  # pragma: no cover - value_and_grad gives grads shaped like params
        return eng.tree_map(lambda p, g: p - lr * g, params, grads)
    out: list = [None] * len(p_leaves)
    groups: dict = {}
    for i, (p, g) in enumerate(zip(p_leaves, g_leaves)):
        if not on_host(g):  # computed on an accelerator: its own arithmetic (a TPU's float64 is not IEEE's)
            out[i] = p - lr * g
            continue
        a, b = np.asarray(p), np.asarray(g)
        if a.dtype == b.dtype and a.dtype in (np.float32, np.float64) and a.shape == b.shape:
            groups.setdefault(a.dtype, []).append((i, a, b))
        else:
            out[i] = p - lr * g
    for dtype, members in groups.items():
        flat_p = np.concatenate([a.reshape(-1) for _, a, _ in members])
        flat_g = np.concatenate([b.reshape(-1) for _, _, b in members])
        tiny = np.finfo(dtype).tiny
        rate = _flush(np.asarray([lr], dtype), tiny)
        new = _flush(_flush(flat_p, tiny) - _flush(rate * _flush(flat_g, tiny), tiny), tiny)
        new.setflags(write=False)
        start = 0
        for i, a, _ in members:
            out[i] = new[start : start + a.size].reshape(a.shape)
            start += a.size
    return eng.tree_unflatten(treedef, out)


def _flush(x: Any, tiny: float) -> Any:
    """Subnormal values as (signed) zero: what XLA's CPU code does with them."""
    import numpy as np

    small = np.abs(x) < tiny
    return np.where(small, x * 0, x) if small.any() else x


def fresh(tree: Any, engine: Engine | None = None) -> Any:
    """The same tree in new containers; numpy leaves copied (JAX arrays and tracers are immutable)."""
    import numpy as np

    eng = engine or get_engine()
    return eng.tree_map(lambda x: x.copy() if isinstance(x, np.ndarray) else x, tree)


def pin_dtypes(tree: Any, engine: Engine | None = None) -> Any:
    """The tree with every numeric leaf an array of the dtype JAX would give it.

    Python floats become float32 (float64 under x64), so slider values never change a dtype.
    numpy leaves are copied: the caller's arrays are never aliased. Strongly typed JAX arrays
    (immutable) are kept as they are; other leaves become numpy arrays.
    """
    import numpy as np

    eng = engine or get_engine()
    eng.check_tree(tree, "the tree")  # a cyclic tree: a message now, not JAX recursing until the interpreter breaks
    x64 = x64_enabled()

    def pin(x):
        if isinstance(x, (bool, int, float)):
            return np.asarray(x, _scalar_dtype(x))
        if isinstance(x, (np.ndarray, np.generic)):
            return np.array(x, dtype=np.float32 if x.dtype == np.float64 and not x64 else x.dtype)
        if getattr(x, "weak_type", None) is False and type(x).__module__.startswith("jax"):
            # a strongly typed JAX array is immutable: kept as it is, neither copied nor moved
            # (10k leaves: 2 s of copies saved); a weakly typed one is pinned below, or a strong
            # value of the same dtype later (a slider's) would make the step compile again
            if x.dtype != np.float64 or x64:
                return x
        if hasattr(x, "dtype") and hasattr(x, "shape"):
            a = np.asarray(x)  # a JAX array: immutable, so a view of it is safe
            if a.dtype == np.float64 and not x64:
                return a.astype(np.float32)
            return a
        return x

    return eng.tree_map(pin, tree)
