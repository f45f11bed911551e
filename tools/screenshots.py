"""Screenshots of the widgets in a real JupyterLab, in the light and the dark theme.

    .venv/bin/python tools/screenshots.py [--out artifacts/screenshots] [--scale 2]

Opens one notebook with a StepExplorer and PytreeDiagrams (the lesson's nested tree with
params | grads | updated and an optax.adam state panel; a gradient tree missing a leaf),
then saves one PNG per widget and theme (and the explorer with ['bias'] selected), plus
the whole notebook, for a person to look at.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "browser"))

import harness  # noqa: E402  (the browser tests' harness, reused as is)

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
    from playwright.sync_api import sync_playwright

    out.mkdir(parents=True, exist_ok=True)
    saved: list[Path] = []
    base = Path(tempfile.mkdtemp(prefix="pytree-lab-shots-"))
    server = harness.start_lab(base)
    try:
        with sync_playwright() as pw:
            browser = harness.launch_chromium(pw)
            try:
                page = browser.new_page(viewport={"width": 1400, "height": 1000}, device_scale_factor=scale)
                harness.open_lab(page, server)
                nb = harness.open_notebook(page, server, "screenshots.ipynb", CELLS, wait_for='[role="tree"]')
                try:
                    outputs = nb.panel.locator(".jp-CodeCell .jp-OutputArea")
                    # bqplot draws after its layout settles; wait for non-empty bars
                    nb.panel.locator(".bqplot rect").first.wait_for(
                        state="attached", timeout=harness.Timeouts.ms(harness.Timeouts.WIDGET_VIEW)
                    )
                    for theme, tag in ((harness.LIGHT, "light"), (harness.DARK, "dark")):
                        harness.set_theme(page, theme)
                        page.wait_for_timeout(500)  # bqplot restyles its axes after the theme change
                        for index, name in SHOTS.items():
                            target = out / f"{name}-{tag}.png"
                            outputs.nth(index).screenshot(path=str(target))
                            saved.append(target)
                        # the linked selection: highlighted row, bars and calculation lines
                        nb.run("ex.selected_path = \"['bias']\"")
                        nb.panel.locator('[role="treeitem"][aria-selected="true"]').first.wait_for()
                        page.wait_for_timeout(300)  # bqplot restyles the selected bars
                        target = out / f"explorer-bias-selected-{tag}.png"
                        outputs.nth(0).screenshot(path=str(target))
                        saved.append(target)
                        nb.run('ex.selected_path = ""')
                        target = out / f"notebook-{tag}.png"
                        page.screenshot(path=str(target), full_page=True)
                        saved.append(target)
                    harness.set_theme(page, harness.LIGHT)
                finally:
                    nb.close()
            finally:
                browser.close()
    finally:
        server.stop()
        harness.remove_tree(base)
    return saved


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "artifacts" / "screenshots")
    parser.add_argument("--scale", type=float, default=1.0, help="device pixel ratio (2 for close inspection)")
    args = parser.parse_args(argv)
    for path in take(args.out, args.scale):
        print(path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
