"""The optimizer's part of the explorer's views: the diagram's columns (params, grads, the
optimizer's moment trees, updated) and side panels, and the worked calculation's optimizer rows."""

from __future__ import annotations

import contextlib
import dataclasses
from typing import Any

import numpy as np  # (the widget side: views.py, whose charts import it anyway)

from ..calculation import CalcRow, fmt_value, focus_leaf
from ..optimizer_state import adam_hyperparameters, decompose_state, is_transformation
from ..step import StepResult
from ..trees import path_label

__all__ = ["columns", "optimizer_rows", "foldable", "why_not_adam"]


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


def foldable(trees: dict, extra: Any) -> list[str]:
    """The diagram's columns and panels folded behind one toggle: the optimizer's moment trees
    (every column but params, grads and updated) and its state panel."""
    names = [name for name in trees if name not in ("params", "grads", "updated")]
    if names and isinstance(extra, dict) and "optimizer state" in extra:
        names.append("optimizer state")
    return names


def _adam_constants(session: Any, r: StepResult, view: Any) -> dict:
    """Adam's b1, b2, eps (eps_root) and learning rate: from the state (inject_hyperparams),
    else from the optimizer as built."""
    hp = {
        k: float(np.asarray(v))
        for k, v in view.rest.items()
        if k in ("b1", "b2", "eps", "eps_root", "learning_rate") and np.size(v) == 1
    }
    if not {"b1", "b2", "eps"} <= set(hp):
        opt = session.optimizer
        built = opt(r.learning_rate) if not is_transformation(opt) else opt
        hp = {**(adam_hyperparameters(built) or {}), **hp}
        if "learning_rate" not in hp and session.rate_source == "argument":
            hp["learning_rate"] = r.learning_rate
    return hp


def _adam_step(m: Any, v: Any, t: int, hp: dict) -> Any:
    """−η·m̂/(√v̂ + ε) from Adam's moments after step t (float64)."""
    m_hat = np.asarray(m, np.float64) / (1 - hp["b1"] ** t)
    v_hat = np.asarray(v, np.float64) / (1 - hp["b2"] ** t)
    return -hp["learning_rate"] * m_hat / (np.sqrt(v_hat + hp.get("eps_root", 0.0)) + hp["eps"])


def _close(a: Any, b: Any) -> bool:
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    scale = max(float(np.max(np.abs(b))) if b.size else 0.0, 1e-30)
    return a.shape == b.shape and bool(np.allclose(a, b, rtol=1e-3, atol=1e-5 * scale))


def _multisteps(state: Any) -> Any:
    """The MultiStepsState inside an optimizer state, or None."""
    stack = [state]
    while stack:
        node = stack.pop()
        if type(node).__name__ == "MultiStepsState":
            return node
        if isinstance(node, (tuple, list)):
            stack.extend(node)
    return None


def why_not_adam(session: Any, r: StepResult, view: Any, formulas: list, updates: list, params: list) -> str:
    """One sentence: why the update the optimizer returned is not Adam's −η·m̂/(√v̂ + ε)."""
    multi = _multisteps(getattr(r, "opt_state_after", None))  # a TrainingResult's (see columns)
    if multi is not None:
        opt = session.optimizer
        built = opt(r.learning_rate) if not is_transformation(opt) else opt
        schedule = getattr(built, "_every_k_schedule", None)
        k = ""
        if schedule is not None:
            with contextlib.suppress(Exception):  # a schedule that does not answer: the sentence without k
                k = str(int(np.asarray(schedule(multi.gradient_step) if callable(schedule) else schedule)))
        done = int(np.asarray(multi.mini_step))
        if all(not np.any(np.asarray(u)) for u in updates) and done > 0:
            return (
                f"optax.MultiSteps adds up the gradients of {k or 'k'} mini-steps and applies its inner "
                f"optimizer only on the last: this was mini-step {done}{f' of {k}' if k else ''}, so the "
                "update is 0 (Adam's moments wait for the accumulated gradient)."
            )
        return (
            "optax.MultiSteps applied its inner optimizer to the gradients accumulated over its mini-steps, "
            "not to this step's gradient alone, so the update is the one it returned."
        )
    # weight decay: the difference is one multiple of the params (adamw: −η·λ·p)
    diff = np.concatenate([np.ravel(np.asarray(u, np.float64) - f) for u, f in zip(updates, formulas)] or [np.zeros(0)])
    flat = np.concatenate([np.ravel(np.asarray(p, np.float64)) for p in params] or [np.zeros(0)])
    lr = (_adam_constants(session, r, view) or {}).get("learning_rate")
    if lr and flat.size and float(flat @ flat) > 0:
        c = float(flat @ diff) / float(flat @ flat)
        if c != 0 and np.allclose(diff, c * flat, rtol=1e-3, atol=1e-5 * max(float(np.max(np.abs(diff))), 1e-30)):
            return (
                f"This optimizer also decays the weights (adamw): its update is −η·(m̂/(√v̂ + ε) + λ·p) "
                f"with λ = {-c / lr:.3g}, not Adam's step alone, so the update is the one it returned."
            )
    return (
        "This optimizer changes Adam's step (clipping, scaling or another term after Adam), so its update is "
        "not −η·m̂/(√v̂ + ε); the update is the one it returned."
    )


def optimizer_rows(session: Any, r: StepResult, leaves: list, selected: str) -> list:
    """Rows of the worked calculation for one leaf: its moments after this step, and for Adam
    the step count t, then either the bias-corrected m̂, v̂ and the step −η·m̂/(√v̂ + ε) when
    that is the update the optimizer applied (to every leaf), or the update it returned and a
    sentence saying why it differs (adamw's weight decay, a MultiSteps mini-step, ...)."""
    state = getattr(r, "opt_state_after", None)
    if state is None or not leaves:
        return []
    leaf = focus_leaf(leaves, selected)
    eng = session.engine
    view = decompose_state(state, r.params, eng)
    name = path_label(leaf.path)
    rows: list = []

    def add(what: str, value: Any, minor: bool = False, short: str = "", group: str = "") -> None:
        text, grid = fmt_value(value)
        rows.append(CalcRow("optimizer", what, text, leaf.path, grid, minor=minor, short=short, group=group))

    def at(tree: Any) -> Any:
        return np.asarray(eng.tree_leaves(tree)[leaf.index])

    hp = _adam_constants(session, r, view)
    count = next((v for k, v in view.rest.items() if k.startswith("adam count")), None)
    mu = next((t for k, t in view.moments.items() if k.startswith("adam mu")), None)
    nu = next((t for k, t in view.moments.items() if k.startswith("adam nu")), None)
    group = "moments"  # the moments (and Adam's m̂, v̂): one disclosure in the folded form, named below
    for moment, tree in view.moments.items():
        add(f"{moment}[{name}] (after this step)", at(tree), group=group)
    updates = getattr(r, "updates", None)
    applied = False  # Adam's formula is the update the optimizer applied, to every leaf
    why = ""
    if mu is not None and nu is not None and count is not None:
        t = int(np.asarray(count))
        add("t (adam count)", t)
        known = {"b1", "b2"} <= set(hp)
        if updates is not None and (t == 0 or (known and {"learning_rate", "eps"} <= set(hp))):
            mus, nus, ups = (eng.tree_leaves(tree) for tree in (mu, nu, updates))
            formulas = [_adam_step(m, v, t, hp) if t > 0 else np.zeros(np.shape(m)) for m, v in zip(mus, nus)]
            applied = t > 0 and len(formulas) == len(ups) and all(_close(f, u) for f, u in zip(formulas, ups))
            if not applied:
                why = why_not_adam(session, r, view, formulas, ups, eng.tree_leaves(r.params))
        if applied or (known and t > 0 and not why):  # no rate to check the step with: m̂ and v̂ only
            b1, b2 = hp["b1"], hp["b2"]
            add(f"m̂ = mu / (1 − {b1:.4g}^{t})", np.asarray(at(mu), np.float64) / (1 - b1**t), group=group)
            add(f"v̂ = nu / (1 − {b2:.4g}^{t})", np.asarray(at(nu), np.float64) / (1 - b2**t), group=group)
        if applied:  # checked against the update returned, to every leaf: its numbers are those
            add(
                f"−η·m̂/(√v̂ + ε) with η = {hp['learning_rate']:.4g}, ε = {hp['eps']:.3g}: the update applied",
                at(updates),
            )
        elif not known and t > 0:
            rows.append(
                CalcRow(
                    "optimizer",
                    "m̂, v̂",
                    "Adam's b1 and b2 could not be read from this optimizer; "
                    "optax.inject_hyperparams(optax.adam)(learning_rate=…) keeps them in the state",
                    leaf.path,
                )
            )
    if updates is not None:
        add(
            f"update[{name}] from the optimizer (∂L/∂{name} = {fmt_value(at(r.grads))[0]})",
            at(updates),
            minor=applied,
            short=f"update[{name}] returned by the optimizer",
        )
    if why:
        rows.append(CalcRow("optimizer", "why not Adam's formula", why, leaf.path, note=True))
    rows.sort(key=lambda r: not r.what.startswith("t (adam count)"))  # t first: m̂ and v̂ use it
    grouped = [r.what.split("[")[0].split(" = ")[0].split(" (")[0] for r in rows if r.group]
    title = (
        f"{name}: " + ", ".join(grouped[:-1]) + (" and " if len(grouped) > 1 else "") + (grouped[-1] if grouped else "")
    )
    return [dataclasses.replace(r, group=title) if r.group else r for r in rows]
