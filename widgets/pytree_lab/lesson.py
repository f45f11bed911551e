"""The pytree lesson's model: a weight vector and a bias, squared loss against one target.

x = [2, 1], weight = [1, -1], bias = 0, target = 3, learning rate 0.05. Everything the lesson
derives by hand (loss 4 -> 0.64, grads [-8, -4] and -4) follows from computing with these.
"""

from __future__ import annotations

from typing import Any

from .engine import get_engine

__all__ = ["lesson_params", "lesson_inputs", "predict", "squared_error", "lesson_loss", "LEARNING_RATE"]

LEARNING_RATE = 0.05


def lesson_params() -> dict:
    jnp = get_engine().numpy
    return {"weight": jnp.array([1.0, -1.0]), "bias": jnp.array(0.0)}


def lesson_inputs() -> dict:
    jnp = get_engine().numpy
    return {"x": jnp.array([2.0, 1.0]), "target": jnp.array(3.0)}


def predict(params: dict, x: Any) -> Any:
    jnp = get_engine().numpy
    return jnp.dot(params["weight"], x) + params["bias"]


def squared_error(prediction: Any, target: Any) -> Any:
    return (prediction - target) ** 2


def lesson_loss(params: dict, x: Any, target: Any) -> Any:
    """The lesson's loss: (w . x + b - target)^2."""
    return squared_error(predict(params, x), target)
