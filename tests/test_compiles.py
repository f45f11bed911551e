"""One XLA compile of each of the explorer's compiled functions per explorer and input shape
(issue 44): building, Step, Step x10, a slider move, Reset, set_inputs of the same shape, Play, an
HTML export (which steps from every point of the record again) and a saved demo loaded into a new
explorer never compile one again.

Traces are not the oracle here: a function traced once can still be compiled again when an
argument's placement changes (an optimizer state of uncommitted arrays on the first call, the
jitted step's committed output on the next). The oracle is XLA's own log: with
`jax_log_compiles`, JAX logs "Finished XLA compilation of jit(<name>)" (jax._src.dispatch) for
every compile, after "Compiling jit(<name>) with global shapes and types ... Argument mapping:
..." (jax._src.interpreters.pxla), which says what each argument was."""

from __future__ import annotations

import asyncio
import logging
import re

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from pytree_lab import StepExplorer, lesson

_LOGGERS = ("jax._src.dispatch", "jax._src.interpreters.pxla")
_FINISHED = re.compile(r"Finished XLA compilation of jit\((\w+)\)")


class _Compiles(logging.Handler):
    """The explorer's compiled functions (`TrainingStep._traced_*`) XLA compiled, since `take`."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.names: list[str] = []
        self.said: list[str] = []  # pxla's "Compiling ..." lines of those: shapes, types, placements

    def emit(self, record: logging.LogRecord) -> None:
        text = record.getMessage()
        if text.startswith("Compiling jit(_traced"):
            self.said.append(text)
        found = _FINISHED.match(text)
        if found and found[1].startswith("_traced"):
            self.names.append(found[1])

    def take(self) -> list[str]:
        names, self.names = sorted(self.names), []
        return names


@pytest.fixture
def compiles():
    handler = _Compiles()
    before = jax.config.jax_log_compiles
    jax.config.update("jax_log_compiles", True)
    for name in _LOGGERS:
        logging.getLogger(name).addHandler(handler)
    try:
        yield handler
    finally:
        for name in _LOGGERS:
            logging.getLogger(name).removeHandler(handler)
        jax.config.update("jax_log_compiles", before)


X = np.array([[0, 0], [0, 1], [1, 0], [1, 1]], np.float32)
Y = np.array([0, 1, 1, 0], np.float32)


def xor_params():
    """JAX arrays, as a model's init gives them: not committed to a device (a jitted step's
    outputs are), so the explorer's own copies must be."""
    rng = np.random.default_rng(0)
    return {
        "hidden": {"w": jnp.asarray(rng.normal(size=(2, 8)), jnp.float32), "b": jnp.zeros(8, jnp.float32)},
        "out": {"w": jnp.asarray(rng.normal(size=(8, 1)), jnp.float32), "b": jnp.zeros(1, jnp.float32)},
    }


def xor_loss(p, x, y):
    h = jnp.tanh(x @ p["hidden"]["w"] + p["hidden"]["b"][None])
    out = h @ p["out"]["w"] + p["out"]["b"][None]
    return jnp.mean((out[:, 0] - y) ** 2)


# each model: (loss, params, inputs, learning rate), its optimizer, the slider moved, new inputs of the same shapes
MODELS = {
    "lesson, plain SGD": (
        lambda: (lesson.lesson_loss, lesson.lesson_params(), lesson.lesson_inputs(), None),
        {},
        "bias",
        {"x": np.array([0.5, -1.5], np.float32), "target": np.array(2.0, np.float32)},
    ),
    "XOR MLP 2-8-1, adam": (
        lambda: (xor_loss, xor_params(), {"x": X, "y": Y}, 0.05),
        {"optimizer": lambda lr: optax.adam(lr)},
        "learning_rate",
        {"x": X[::-1].copy(), "y": Y[::-1].copy()},
    ),
    "XOR MLP 2-8-1, plain SGD": (
        lambda: (xor_loss, xor_params(), {"x": X, "y": Y}, 0.5),
        {},
        "learning_rate",
        {"x": X[::-1].copy(), "y": Y[::-1].copy()},
    ),
}


optax_adam = pytest.mark.jax_promotion(dtype="optax's adam raises a float to its int32 step count (bias correction)")


@pytest.mark.parametrize("model", [pytest.param(m, marks=[optax_adam] if "adam" in m else []) for m in MODELS])
def test_each_compiled_function_compiles_once_per_explorer(model, compiles, tmp_path):
    make, options, slider, new_inputs = MODELS[model]
    loss_fn, params, inputs, rate = make()
    seen: dict[str, list[str]] = {}

    def phase(label, action):
        done = action()
        seen[label] = compiles.take()
        assert done is not None, label  # each did what it says (a step, reset, set_inputs: None when it failed)
        return done

    def move(slider):
        slider.value += 0.25
        return ex.result if ex.session.good_now else None

    async def play_three():
        ex.play(steps_per_second=60, until=ex.session.step_number + 3)
        while ex.playing:
            await asyncio.sleep(0.005)
        return ex.player.steps == 3 or None

    ex = phase("build", lambda: StepExplorer(loss_fn, params, inputs, rate, **options))
    phase("step(1)", lambda: ex.step(1))
    phase("step(1) again", lambda: ex.step(1))
    phase("step(10)", lambda: ex.step(10))
    phase("a slider move", lambda: move(ex.sliders[slider]))
    phase("reset, step(1)", lambda: ex.reset() and ex.step(1))
    phase("set_inputs of the same shape", lambda: ex.set_inputs(new_inputs))
    phase("play 3 steps", lambda: asyncio.run(play_three()))
    # the loop's points are kept as numpy arrays; the export steps from every point again
    phase("step(5), export_html", lambda: ex.step(5) and ex.export_html(tmp_path / "run"))
    steps = ex.session.step_number
    ex = phase("save, load", lambda: StepExplorer.load(ex.save(tmp_path / "demo"), loss_fn, params, inputs, **options))
    phase("the loaded explorer's step(1)", lambda: ex.step(1))
    phase("its step(1) again", lambda: ex.step(1))
    assert ex.session.step_number == steps + 2 and ex.player.steps == 0

    built = ["_traced_after", "_traced_value_and_grad"]  # the slider step: value_and_grad, then the update
    loop = ["_traced_run"]  # the n-step loop
    first = {"build": built, "step(1)": loop, "save, load": built, "the loaded explorer's step(1)": loop}
    assert seen == {label: first.get(label, []) for label in seen}, "\n".join(compiles.said)
