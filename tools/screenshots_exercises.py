"""Screenshots of the course's exercise widgets and PackedView, in JupyterLab's light and dark themes.

    .venv/bin/python tools/screenshots_exercises.py [--out artifacts/screenshots] [--scale 2]

Each widget is shown in the state a student sees most: a failed check with its feedback and the
reference solution revealed, a revealed prediction with a self-rating, a quiz answered wrongly
(locked, every choice explained), PackedView with a position selected, the evidence button.
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
    """\
import jax, jax.numpy as jnp
from pytree_lab.course import check_button, lesson_prediction, quiz
from pytree_lab.exercises import EvidenceButton
from pytree_lab import PackedView

def grad_over_flat_params(flat_params, x):
    return jax.grad(lambda p: jnp.mean((x @ p[:-1] + p[-1]) ** 2))(flat_params)

button = check_button("grad_over_flat_params", "grad_over_flat_params")
button.check(); button.check(); button.reveal_solution()
button""",
    """\
prompt = lesson_prediction("which_weight_changes_more")
prompt.prediction = "weight[1]: it is negative, so it moves more"
prompt.reveal(); prompt.self_rating = "wrong"
prompt""",
    """\
q = quiz("optimizer_count")
q.selected = 1; q.submit()
q""",
    """\
params = {"w": jnp.array([1.0, 2.0]), "b": jnp.array([0.5])}
view = PackedView(params, layouts={"(w, b)": (params["w"], params["b"])})
view.select_position(2)
view""",
    """\
EvidenceButton("screenshot-evidence.md")""",
]

SHOTS = {0: "exercise-check", 1: "exercise-prediction", 2: "exercise-quiz", 3: "packed-view", 4: "exercise-evidence"}


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
                page = browser.new_page(viewport={"width": 1300, "height": 1000}, device_scale_factor=scale)
                harness.open_lab(page, server)
                nb = harness.open_notebook(page, server, "exercise-shots.ipynb", CELLS, wait_for=".ptl-packed")
                try:
                    outputs = nb.panel.locator(".jp-CodeCell .jp-OutputArea")
                    outputs.nth(0).locator(".ptl-ex-solution").wait_for()
                    for theme, tag in ((harness.LIGHT, "light"), (harness.DARK, "dark")):
                        harness.set_theme(page, theme)
                        page.wait_for_timeout(500)
                        for index, name in SHOTS.items():
                            target = out / f"{name}-{tag}.png"
                            outputs.nth(index).screenshot(path=str(target))
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
