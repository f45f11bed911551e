"""Screenshots of the widgets in a real JupyterLab, in the light and the dark theme.

    .venv/bin/python tools/screenshots.py [--out artifacts/screenshots] [--scale 2]

Opens one notebook with a StepExplorer and PytreeDiagrams (the lesson's nested tree with
params | grads | updated and an optax.adam state panel; a gradient tree missing a leaf),
then saves one PNG per widget and theme (and the explorer with ['bias'] selected), plus
the whole notebook, for a person to look at.
"""

from __future__ import annotations

from pathlib import Path

import lab_shots
from lab_shots import harness

CELLS = [
    # 0: the explorer, as the lesson shows it
    """\
from pytree_lab import StepExplorer, PytreeDiagram
ex = StepExplorer()
ex""",
    # 1: a nested tree with optimizer state in its own panel
    """\
import jax, jax.numpy as jnp, optax

params = {
    "layer": {"weight": jnp.array([[1.0, -1.0], [0.5, 2.0]]), "bias": jnp.zeros(2)},
    "scale": jnp.float32(1.0),
}
x, target = jnp.array([2.0, 1.0]), jnp.array([3.0, -1.0])

def loss(p, x, target):
    prediction = p["scale"] * (p["layer"]["weight"] @ x + p["layer"]["bias"])
    return jnp.sum((prediction - target) ** 2)

grads = jax.grad(loss)(params, x, target)
opt = optax.adam(1e-2)
state = opt.init(params)
updates, state = opt.update(grads, state, params)
updated = optax.apply_updates(params, updates)
nested = PytreeDiagram(params, grads=grads, updated=updated, extra={"optimizer state": state})
nested""",
    # 2: a gradient tree that lost a leaf, and metadata that is not differentiable
    """\
lesson = {"weight": jnp.array([1.0, -1.0]), "bias": jnp.float32(0.0), "name": "linear"}
broken_grads = {"weight": jnp.array([-8.0, -4.0]), "name": "linear"}
missing = PytreeDiagram(lesson, grads=broken_grads)
missing""",
]

SHOTS = {0: "explorer", 1: "diagram-nested-adam", 2: "diagram-missing-leaf"}


def take(out: Path, scale: float = 1.0) -> list[Path]:
    def bars_drawn(nb, outputs) -> None:
        # bqplot draws after its layout settles; wait for non-empty bars
        nb.panel.locator(".bqplot rect").first.wait_for(
            state="attached", timeout=harness.Timeouts.ms(harness.Timeouts.WIDGET_VIEW)
        )

    def selected_and_notebook(nb, outputs, tag: str) -> list[Path]:
        # the linked selection: highlighted row, bars and calculation lines
        nb.run("ex.selected_path = \"['bias']\"")
        nb.panel.locator('[role="treeitem"][aria-selected="true"]').first.wait_for()
        nb.page.wait_for_timeout(300)  # bqplot restyles the selected bars
        selected = out / f"explorer-bias-selected-{tag}.png"
        outputs.nth(0).screenshot(path=str(selected))
        nb.run('ex.selected_path = ""')
        notebook = out / f"notebook-{tag}.png"
        nb.page.screenshot(path=str(notebook), full_page=True)
        return [selected, notebook]

    # the explorer (buttons, sliders, bars, loss line, diagram, worked calculation) stands about
    # 1400 px tall: the viewport holds it whole
    return lab_shots.take(
        out,
        notebook="screenshots.ipynb",
        cells=CELLS,
        shots=SHOTS,
        wait_for='[role="tree"]',
        width=1400,
        height=2000,
        scale=scale,
        ready=bars_drawn,
        more=selected_and_notebook,
    )


def main(argv: list[str] | None = None) -> int:
    return lab_shots.main(argv, __doc__.splitlines()[0], take)


if __name__ == "__main__":
    raise SystemExit(main())
