"""The prediction side of a step: ŷ, the residual and dL/dŷ, computed inside the compiled step
(per example for a batch), and the honest reading of dL/dŷ afterwards."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from .. import lesson
from ..step import StepResult, fresh

__all__ = ["extras_fn", "with_extras"]


def extras_fn(session: Any) -> Callable[[Any, Any, dict], dict]:
    """The step's extras function for `session` (its prediction_fn, target and pointwise loss,
    read when the step is traced)."""

    def extras(params: Any, updated: Any, inputs: dict) -> dict:
        eng = session.engine
        jnp = eng.numpy
        key = session.target_key
        predict, pointwise = session.prediction_fn, session.pointwise_loss
        target = inputs.get(key)
        rest = {k: v for k, v in inputs.items() if k != key}
        prediction = predict(fresh(params, eng), **fresh(rest, eng))
        new_prediction = predict(fresh(updated, eng), **fresh(rest, eng))
        out = {"prediction": prediction, "new_prediction": new_prediction}
        same = (
            target is not None
            and jnp.shape(prediction) == jnp.shape(target)
            and jnp.issubdtype(jnp.result_type(target), jnp.floating)
        )
        if same:
            out["residual"] = prediction - target
            out["new_residual"] = new_prediction - target
        if target is not None and (same or pointwise is not lesson.squared_error):
            out["pointwise"] = pointwise(prediction, target)
            out["dpointwise"] = eng.grad(lambda y: jnp.sum(pointwise(y, target)))(prediction)
        return out

    return extras


def with_extras(result: StepResult) -> StepResult:
    """Decide honestly what dL/dŷ is: the pointwise losses must add up (sum or mean) to L."""
    import numpy as np

    x = dict(result.extras or {})
    each, d = x.pop("pointwise", None), x.pop("dpointwise", None)
    if each is not None and d is not None:
        each = np.asarray(each, dtype=np.float64)
        n = max(each.size, 1)
        tol = 1e-4 * max(1.0, abs(result.loss))
        if abs(each.sum() - result.loss) <= tol:
            x["dloss_dprediction"] = d
            x["dloss_label"] = "dL/dŷ" if n == 1 else "dL/dŷ per example (L = Σ ℓ)"
        elif abs(each.mean() - result.loss) <= tol:
            x["dloss_dprediction"] = np.asarray(d) / n
            x["dloss_label"] = f"dL/dŷ per example (L = mean ℓ, so ∂ℓ/∂ŷ ÷ {n})"
    return dataclasses.replace(result, extras=x)
