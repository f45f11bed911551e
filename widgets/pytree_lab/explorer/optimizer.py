"""The optimizer's part of the explorer's views: the diagram's columns (params, grads, the
optimizer's moment trees, updated) and side panels, and the worked calculation's optimizer rows."""

from __future__ import annotations

from typing import Any

from ..calculation import CalcRow, fmt_value
from ..optimizer_state import adam_hyperparameters, decompose_state
from ..step import StepResult
from ..training import _is_transformation
from ..trees import path_label

__all__ = ["columns", "optimizer_rows"]


def columns(session: Any, r: StepResult) -> tuple[dict, Any]:
    """The diagram's aligned columns (params, grads, the optimizer's moment trees, updated)
    and its side panels (the rest of the optimizer state, then anything from show_extra)."""
    trees = {"params": r.params, "grads": r.grads}
    extra = session.extra
    state = getattr(r, "opt_state_after", None)
    if session.optimizer is not None and state is not None:
        view = decompose_state(state, r.params, session.engine)
        trees.update(view.moments)
        panels = {"optimizer state": view.rest} if view.rest else {}
        if extra is not None:
            if isinstance(extra, dict) and all(isinstance(k, str) for k in extra):
                panels.update(extra)
            else:
                panels["extra"] = extra
        extra = panels or None
    trees["updated"] = r.updated
    return trees, extra


def optimizer_rows(session: Any, r: StepResult, leaves: list, selected: str) -> list:
    """Rows of the worked calculation for one leaf: its moments after this step, and for Adam
    with visible hyperparameters (inject_hyperparams) the bias-corrected m̂, v̂ and the step."""
    import numpy as np

    state = getattr(r, "opt_state_after", None)
    if state is None or not leaves:
        return []
    leaf = next((lf for lf in leaves if selected and (lf.path == selected or lf.path.startswith(selected))), leaves[0])
    eng = session.engine
    view = decompose_state(state, r.params, eng)
    name = path_label(leaf.path) or "params"
    rows: list = []

    def add(what: str, value: Any) -> None:
        text, grid = fmt_value(value)
        rows.append(CalcRow("optimizer", what, text, leaf.path, grid))

    def at(tree: Any) -> Any:
        return np.asarray(eng.tree_leaves(tree)[leaf.index])

    g = at(r.grads)
    for moment, tree in view.moments.items():
        add(f"{moment}[{name}] (after this step)", at(tree))
    # Adam's constants: in the state (inject_hyperparams), else from the optimizer as built
    hp = {k: float(np.asarray(v)) for k, v in view.rest.items()
          if k in ("b1", "b2", "eps", "eps_root", "learning_rate") and np.size(v) == 1}
    if not {"b1", "b2", "eps"} <= set(hp):
        opt = session.optimizer
        built = opt(r.learning_rate) if not _is_transformation(opt) else opt
        hp = {**(adam_hyperparameters(built) or {}), **hp}
        if "learning_rate" not in hp and session.rate_source == "argument":
            hp["learning_rate"] = r.learning_rate
    count = next((v for k, v in view.rest.items() if k.startswith("adam count")), None)
    mu = next((t for k, t in view.moments.items() if k.startswith("adam mu")), None)
    nu = next((t for k, t in view.moments.items() if k.startswith("adam nu")), None)
    if mu is not None and nu is not None and count is not None:
        t = int(np.asarray(count))
        add("t (adam count)", t)
        if {"b1", "b2"} <= set(hp) and t > 0:
            b1, b2 = hp["b1"], hp["b2"]
            m, v = at(mu).astype(np.float64), at(nu).astype(np.float64)
            m_hat, v_hat = m / (1 - b1 ** t), v / (1 - b2 ** t)
            add(f"m̂ = mu / (1 − {b1:.4g}^{t})", m_hat)
            add(f"v̂ = nu / (1 − {b2:.4g}^{t})", v_hat)
            if "learning_rate" in hp and "eps" in hp:
                lr, eps = hp["learning_rate"], hp["eps"]
                add(f"−η·m̂/(√v̂ + ε) with η = {lr:.4g}, ε = {eps:.3g}",
                    -lr * m_hat / (np.sqrt(v_hat + hp.get("eps_root", 0.0)) + eps))
        else:
            rows.append(CalcRow("optimizer", "m̂, v̂", "Adam's b1 and b2 could not be read from this optimizer; "
                                "optax.inject_hyperparams(optax.adam)(learning_rate=…) keeps them in the state",
                                leaf.path))
    updates = getattr(r, "updates", None)
    if updates is not None:
        add(f"update[{name}] from the optimizer (∂L/∂{name} = {fmt_value(g)[0]})", at(updates))
    return rows
