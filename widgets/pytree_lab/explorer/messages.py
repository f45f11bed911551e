"""Every "this is what went wrong" sentence of the explorer (an exception in a line is the
library's one `formatting.short_error`).

Nothing here changes state: each function takes what it talks about and returns text. The
session decides when a sentence is said; the widget shows it.
"""

from __future__ import annotations

import dataclasses
import html
import re
import sys
from typing import Any

from ..formatting import error_name, error_text, fmt_number, short_error
from ..trees import Leaf, TreeError, TreeSummary, describe

# the sentences that promise the last good step, dropped when there is none
_NO_LAST_GOOD = re.compile(r"(?:;\s*|\s*\b)[Tt]he last good step (?:stays on screen|is still shown)\.")
_TRACER_ERRORS = (
    "ConcretizationTypeError",
    "TracerBoolConversionError",
    "TracerIntegerConversionError",
    "TracerArrayConversionError",
)


TRACEBACK_CHARS = 8000  # a traceback kept for the page: its end (where it went wrong), at most this long


def traceback_text(err: BaseException) -> str:
    """The exception's traceback as text, for the person: pytree-lab's own frames left out (JAX
    leaves out its own), an explicit cause (``raise ... from ...``) kept, the explorer's own retry
    of a failed step not; at most its last `TRACEBACK_CHARS`. Never raises."""
    import os
    import traceback

    package = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep

    hidden = [0]

    def ours(te: traceback.TracebackException) -> None:
        kept = [f for f in te.stack if not (f.filename or "").startswith(package)]
        hidden[0] += len(te.stack) - len(kept)
        te.stack = traceback.StackSummary.from_list(kept)
        te.__context__, te.__suppress_context__ = None, True  # the explorer's retry, not the person's code
        cause = te.__cause__
        if cause is not None and "UnfilteredStackTrace" in str(getattr(cause, "exc_type", "")):
            te.__cause__ = None  # JAX's copy with its own frames kept: what it filtered out
        elif cause is not None:
            ours(cause)

    try:
        te = traceback.TracebackException.from_exception(err)
        ours(te)
        text = "".join(te.format())
        if hidden[0]:
            text = f"({hidden[0]} frames inside pytree-lab are not shown.)\n{text}"
    except BaseException:  # noqa: BLE001 - a user's exception can break formatting too
        return f"(the traceback could not be formatted) {short_error(err)}"
    return text if len(text) <= TRACEBACK_CHARS else "…" + text[-TRACEBACK_CHARS:]


def without_last_good(text: str) -> str:
    """A failure said before any step worked: nothing "stays on screen"."""
    text = _NO_LAST_GOOD.sub("", text).rstrip()
    return (text if text.endswith((".", ")")) else text + ".") + " No step has worked yet, so none is shown."


def too_deep(name: str, tree: Any, err: BaseException) -> TreeError | None:
    """A TreeError naming the depth when `err` is JAX's flatten giving up at the recursion limit."""
    chain: BaseException | None = err
    seen: set[int] = set()
    while chain is not None and id(chain) not in seen and not isinstance(chain, RecursionError):
        seen.add(id(chain))
        chain = chain.__cause__ or chain.__context__
    if not isinstance(chain, RecursionError):
        return None
    try:
        depth = max(node.depth for node in describe(tree, name, values=False).root.walk())
    except BaseException:  # noqa: BLE001 - the message can do without the number
        depth = None
    levels = f"{depth} levels deep" if depth is not None else "nested too deeply"
    return TreeError(
        f"{name} is {levels}: more than JAX's tree functions can flatten (they stop at Python's "
        f"recursion limit, {sys.getrecursionlimit()}). Nest it less deeply."
    )


def not_numbers(inputs: TreeSummary) -> str:
    """What to say of an input leaf JAX cannot take (a string, an object), or ""."""
    bad = [leaf for leaf in inputs.leaves if leaf.dtype in ("str", "object")]
    if not bad:
        return ""
    leaf = bad[0]
    return (
        f"inputs{leaf.path} is {leaf.type_label}, not a number: inputs are arrays (floats, int labels, bool "
        "masks); pass other values as static=[...] inputs."
    )


def type_hint(params: Any, leaf: Leaf, obj: Any) -> str:
    """Why a params leaf cannot be differentiated, in the terms of the library it came from."""
    name = f"params{leaf.path}"
    if callable(obj) and not hasattr(obj, "shape"):
        return (
            f"{name} is a function ({getattr(obj, '__name__', type(obj).__name__)}), not a parameter. "
            "An equinox module (eqx.nn.MLP, ...) keeps functions and sizes beside its arrays: split it with "
            "`params, static = eqx.partition(model, eqx.is_inexact_array)`, give the explorer `params`, and "
            "rebuild the model in the loss with `eqx.combine(params, static)`."
        )
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return (
            f"{name} is a {type(obj).__name__} dataclass that JAX does not know how to open, so it is one "
            "opaque leaf. Register it: decorate the class with @jax.tree_util.register_dataclass "
            "(or use a dict, a NamedTuple or an equinox Module)."
        )
    origin = type(params).__module__.split(".")[0] if params is not None else ""
    if origin == "equinox" or type(obj).__module__.split(".")[0] == "equinox":
        return (
            f"{name} is {leaf.type_label}: an equinox module holds non-array fields. Split it with "
            "`params, static = eqx.partition(model, eqx.is_inexact_array)` and combine in the loss."
        )
    return (
        f"{name} is {leaf.type_label}, not a floating-point parameter: JAX cannot differentiate it. "
        "Keep metadata such as names or counts outside the params tree (or pass them as inputs, "
        "marked static=[...])."
    )


def explain(err: BaseException, input_names: list[str], param_summary: TreeSummary, inputs: Any = None) -> str:
    """The step's error in the lesson's terms, with the original error after it (`inputs`: the
    inputs' TreeSummary, whose int scalars a slice or shape may need as static=)."""
    from ..training import OptimizerError

    if isinstance(err, OptimizerError):  # the optimizer's own failure, already named
        return error_text(err)
    name, said = error_name(err), error_text(err)
    ints = [leaf.path[2:-2] for leaf in getattr(inputs, "leaves", ()) if leaf.dtype.startswith(("int", "uint"))]
    hint = ""
    if ints and ("must be static" in said or "concrete values of integer" in said):
        hint = (
            f"The loss uses the int input {ints[0]!r} as a Python number (a slice, a shape or a "
            f"range), which inside value_and_grad is a traced array: give StepExplorer(..., static=[{ints[0]!r}]). "
        )
    elif dtype := re.search(r"(?:Indexer must have integer|indices must be of integer type).*?(float\d+)", said):
        hint = (
            f"The loss indexes an array with {dtype[1]} values, as class labels given as floats do: "
            "give the labels as integers, e.g. y.astype(np.int32). "
        )
    elif name in _TRACER_ERRORS:
        hint = (
            "The loss turns a traced value into a Python bool or number (an `if`, `while`, `int()` or "
            "`float()` on an array): inside value_and_grad the arrays are tracers, not numbers. Use "
            "jnp.where / jax.lax.cond for data-dependent choices, or pass a Python flag as a static "
            "input (static=['name']). "
        )
    elif isinstance(err, TypeError) and "scalar" in error_text(err):
        hint = "The loss must return a single number (a scalar) to be differentiated. "
    elif isinstance(err, TypeError) and ("argument" in error_text(err)):
        names = ", ".join(f"{k}=…" for k in input_names)
        hint = f"loss_fn is called as loss_fn(params{', ' if names else ''}{names}). "
    elif not isinstance(err, Exception):
        hint = f"The loss raised {name}, which would stop the kernel; it was caught. "
    else:
        empty = [n.path for n in param_summary.root.walk() if n.kind == "none"]
        if empty:
            hint = (
                f"params{empty[0]} is None: JAX treats None as an empty subtree with no leaves, "
                "so it is not a parameter and has no gradient. "
            )
    return f"{hint}The step failed: {short_error(err)}"


def over_budget(what: str, time_budget: float | None) -> str:
    """A step stopped by its time budget: the loss's own code ran past it (an endless loop)."""
    return (
        f"{what} stopped: the loss (or prediction_fn) ran for more than {fmt_number(time_budget)} s "
        "of its own Python code, which usually means an endless loop. The last good step stays on "
        "screen. Fix the loss and call set_loss, or give StepExplorer(..., time_budget=seconds) "
        "for a loss that is just slow (None: no limit)."
    )


def prediction_failed(err: BaseException | None, target_key: str) -> str:
    if err is None:
        return "prediction_fn could not be traced with the step; the worked calculation shows the loss only."
    return (
        f"prediction_fn failed ({short_error(err, 200)}), so the worked calculation shows the loss "
        f"only. It is called as prediction_fn(params, **inputs) without {target_key!r}; for a "
        "batch it may return one prediction per example."
    )


INPUTS_KEPT = "The explorer keeps its last good inputs: fix the batch and call set_inputs again."


def not_finite(name: str, where: str) -> str:
    return (
        f"{name}{where} is not finite (overflow or NaN) for these values; "
        "try a smaller learning rate. The last good step is still shown."
    )


def optimizer_blame(result: Any, path: tuple, optimizer: Any, engine: Any) -> str:
    """Why `updated` is not finite when the gradient is: the optimizer's state or its update."""
    import numpy as np

    from ..optimizer_state import optimizer_name

    name = optimizer_name(optimizer)
    for which, state in (
        ("state", getattr(result, "opt_state", None)),
        ("state after this step", getattr(result, "opt_state_after", None)),
    ):
        if state is None:
            continue
        for spath, leaf in engine.tree_flatten_with_path(state)[0]:
            a = np.asarray(leaf)
            if a.dtype.kind in "fc" and not np.all(np.isfinite(a)):
                bad = a.ravel()[~np.isfinite(a.ravel())][0]
                bad_text = "NaN" if np.isnan(bad) else ("Inf" if np.real(bad) > 0 else "-Inf")
                return (
                    f"The optimizer's {which} holds {bad_text} at state{engine.keystr(spath)} ({name}), so its "
                    f"update of params{engine.keystr(path)} is not finite: the optimizer is at fault, not the "
                    "loss or the learning rate (the gradients are finite). Check its init and update. "
                    "The last good step is still shown."
                )
    if getattr(result, "updates", None) is not None:
        return (
            f"The optimizer's update ({name}) of params{engine.keystr(path)} is not finite although the "
            "gradient is: the optimizer is at fault (a division by zero, an overflow in its rule), "
            "not the loss. The last good step is still shown."
        )
    return ""


# ---- notes: said beside a good step (information, not an error)
def staged_note(staged: Any) -> str:
    """A big model's step running its operations one by one: while XLA compiles it in the
    background, because compiling it would take minutes, or because that compile failed."""
    said = f"This model's step is a program of {staged.eqns:,} operations"
    if staged.compile_error is not None:
        return (
            f"{said}, and XLA could not compile it in the background ({short_error(staged.compile_error, 200)}): "
            "its operations keep running one by one (the numbers JAX gives outside jit), so steps stay slower."
        )
    if staged.compiling:
        return (
            f"{said}: XLA is compiling it in the background, and until that is done its operations run one "
            "by one (the numbers JAX gives outside jit), so the first steps take longer than later ones."
        )
    return (
        f"{said}: compiling it would take minutes, so its operations run one by one (the numbers JAX "
        "gives outside jit) and a step takes longer than usual."
    )


def slow_note(took: float, leaves: int) -> str:
    return (
        f"This step took {fmt_number(round(took))} s: the work grows with the model's "
        f"{leaves:,} parameter leaves (JAX handles each leaf's operations "
        "apart), not with your loss's own Python. Fewer, bigger leaves (stack the layers' "
        "weights into arrays) make every move fast; sliders=[...] keeps only the sliders you need."
    )


def no_target_note(target_key: str, input_names: list[str]) -> str:
    return (
        f"prediction_fn is given but the inputs have no {target_key!r} key (inputs: "
        f"{', '.join(input_names) or 'none'}): name the target with target='...' to see "
        "the residual and dL/dŷ."
    )


NO_LEAVES = "params has no leaves: there is nothing to differentiate, so the step changes nothing."
ZERO_RATE = (
    "The learning rate is 0: updated equals params, so nothing moves (the gradients are still computed and shown)."
)
FIXED_RATE = (
    "learning_rate= does nothing here: this optimizer keeps its rate inside it (e.g. "
    "optax.adam(0.1)), so there is no learning-rate slider. To slide it, pass "
    "optimizer=lambda lr: optax.adam(lr) or "
    "optax.inject_hyperparams(optax.adam)(learning_rate=0.1)."
)


def widened_note(path: str, value: float, lo: float, hi: float) -> str:
    return (
        f"{path} = {fmt_number(value)} was outside its slider's range "
        f"[{fmt_number(lo)}, {fmt_number(hi)}]: the value is kept and the range now reaches it."
    )


def status_html(text: str, kind: str = "info") -> str:
    """An explorer's status line: an alert for an error (`kind` "error"), else a polite status;
    the text escaped (it holds the user's names and messages)."""
    role, cls = ("alert", "pytree-lab-alert") if kind == "error" else ("status", "pytree-lab-note")
    return f'<div role="{role}" class="{cls}">{html.escape(text)}</div>'
