"""Screenshots of the course's exercise widgets and PackedView, in JupyterLab's light and dark themes.

    .venv/bin/python tools/screenshots_exercises.py [--out artifacts/screenshots] [--scale 2]

Each widget is shown in the state a student sees most: a failed check with its feedback and the
reference solution revealed, a revealed prediction with a self-rating, a quiz answered wrongly
(locked, every choice explained), PackedView with a position selected, the evidence button.
"""

from __future__ import annotations

from pathlib import Path

import lab_shots

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
    def solution_shown(nb, outputs) -> None:
        outputs.nth(0).locator(".ptl-ex-solution").wait_for()

    return lab_shots.take(
        out,
        notebook="exercise-shots.ipynb",
        cells=CELLS,
        shots=SHOTS,
        wait_for=".ptl-packed",
        width=1300,
        scale=scale,
        ready=solution_shown,
    )


def main(argv: list[str] | None = None) -> int:
    return lab_shots.main(argv, __doc__.splitlines()[0], take)


if __name__ == "__main__":
    raise SystemExit(main())
