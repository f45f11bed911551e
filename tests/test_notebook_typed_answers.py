"""Both lessons run top to bottom in a real kernel (nbclient) with answers that are not computed
the way the lesson asks: the lesson's numbers typed in, and a packed gradient that returns the
worked example's answer. Every check must say "not yet" and why; and lesson 02, answered properly, keeps its
prediction and quiz in the evidence file. Oracles: the lessons' hand derivations (96; grads
[-8, -4] and -4; d/dscale -4; the update [1.4, -0.8] and 0.2; [8, 12, 4])."""

from __future__ import annotations

import json
from pathlib import Path

import nbformat
from kernel_harness import kernel_env, notebook_client

ROOT = Path(__file__).resolve().parents[1]
CONTENT = ROOT / "content"

TYPED_IN = {
    "squared_norm": "norm_squared = 96.0\nmanual = 96.0",
    "nested_scale_grad": 'nested = {"layer": params, "scale": jnp.array(1.)}\n'
    'g = {"layer": {"weight": jnp.array([-8., -4.]), "bias": jnp.array(-4.)}, '
    '"scale": jnp.array(-4.)}',
    "repair_update": 'fixed = {"weight": jnp.array([1.4, -0.8]), "bias": jnp.array(0.2)}',
    "grad_over_flat_params": "def grad_over_flat_params(flat_params, x):\n"
    "    return jnp.array([8., 12., 4.])  # the worked example's answer",
}

SAID = {
    "check-squared-norm": [
        "Check 1: not yet, score 0.00 (0 of 2 values right)",
        "norm_squared: this value does not change when `grads` changes: compute it from `grads`.",
        "manual: this value does not change when `grads` changes: compute it from `grads`.",
    ],
    "check-nested": [
        "Check 1: not yet, score 0.00",
        "g: this value does not change when `params` changes: build nested from `params` and compute g with jax.grad.",
    ],
    "check-repair": [
        "Check 1: not yet, score 0.00",
        "fixed: this value does not change when params and grads change: compute it from `params` "
        "and `grads` with jax.tree.map.",
    ],
    "check-flat": [
        "Check 1: not yet, score 0.20 (1 of 5 cases right)",
        "Your function returned the same array in every case, although each case has other flat_params and x",
    ],
}


def _run(name: str, workdir: Path, answers: dict[str, str], extra: dict[str, str] | None = None):
    nb = nbformat.read(CONTENT / name, as_version=4)
    for cell in nb.cells:
        tags = cell.get("metadata", {}).get("tags", [])
        exercise = next((t.split(":", 1)[1] for t in tags if t.startswith("exercise:")), None)
        if exercise in answers:
            cell.source = f"%%exercise {exercise}\n{answers[exercise]}"
        if extra and cell.get("id") in extra:
            cell.source += "\n" + extra[cell.get("id")]
    workdir.mkdir(parents=True, exist_ok=True)
    notebook_client(nb, workdir).execute(env=kernel_env())
    return nb


def _text(nb, cell_id: str) -> str:
    cell = next(c for c in nb.cells if c.get("id") == cell_id)
    return "".join(
        o.text if o.output_type == "stream" else o.get("data", {}).get("text/plain", "")
        for o in cell.get("outputs", [])
    )


def test_lesson_01_with_the_numbers_typed_in_says_not_yet(tmp_path):
    nb = _run("01_pytrees.ipynb", tmp_path, TYPED_IN)
    for cell_id in ("check-squared-norm", "check-nested", "check-repair"):
        text = _text(nb, cell_id)
        for words in SAID[cell_id]:
            assert words in text, (cell_id, text)
        assert "passed" not in text, text
    record = json.loads((tmp_path / "pytree-lesson-evidence.json").read_text())
    assert {c["exercise_id"]: c["passed"] for c in record["checks"]} == {
        "squared_norm": False,
        "nested_scale_grad": False,
        "repair_update": False,
    }


def test_lesson_02_with_the_answer_written_in_says_not_yet_and_keeps_prediction_and_quiz(tmp_path):
    extra = {
        "predict-argnums": "_p = lesson_prediction('argnums_shape')\n_p.prediction = 'the shape of x, (1, 2)'\n"
        "print('revealed:', _p.reveal())",
        "quiz-ravel": "quiz_ravel.selected = 1\nprint('correct:', quiz_ravel.submit())",
    }
    nb = _run("02_packed_parameters.ipynb", tmp_path, TYPED_IN, extra)
    for words in SAID["check-flat"]:
        assert words in _text(nb, "check-flat"), _text(nb, "check-flat")
    # the worked example still shows the numbers the student's function gives
    assert "worked example: [8.0, 12.0, 4.0]" in _text(nb, "worked-example")
    assert "argnums=1 gives shape (1, 2) ([[-1, -2]]), the shape of x" in _text(nb, "predict-argnums")
    assert "correct: True" in _text(nb, "quiz-ravel")
    record = json.loads((tmp_path / "packed-parameters-evidence.json").read_text())
    assert [(c["exercise_id"], c["passed"], c["score"]) for c in record["checks"]] == [
        ("grad_over_flat_params", False, 0.2)
    ]
    # the function answer is kept as its code, not as <function ... at 0x...>
    assert record["checks"][0]["answer"] == TYPED_IN["grad_over_flat_params"]
    assert [p["prediction"] for p in record["predictions"]] == ["the shape of x, (1, 2)"]
    assert [(q["choice"], q["correct"], q["practice"]) for q in record["quiz"]] == [
        ("[0.5, 1, 2]: the keys in sorted order", True, False)
    ]
    markdown = (tmp_path / "packed-parameters-evidence.md").read_text()
    assert "(none revealed yet)" not in markdown and "(not answered yet)" not in markdown
    assert "Saved packed-parameters-evidence.md and packed-parameters-evidence.json" in _text(nb, "evidence")
    assert "the file now holds 1 prediction, 1 check, 1 quiz answer, " in _text(nb, "evidence")
