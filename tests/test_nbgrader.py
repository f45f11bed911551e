"""The course as an nbgrader assignment, through the real nbgrader, end to end.

`pytree-lab nbgrader OUTDIR` writes the course directory; then the standard flow, unchanged:
`nbgrader generate_assignment pytrees`, students' notebooks in submitted/<student>/pytrees/,
`nbgrader autograde pytrees`, `nbgrader export`. Five students submit the released notebooks:

- ref:     the catalogue's reference solutions pasted into the exercise cells -> full marks;
- wrong:   typical wrong answers -> partial credit, exercise by exercise (derived below);
- exit:    `sys.exit()` in every exercise (one of them outside `%%exercise`) -> 0 each;
- loop:    endless loops, one outside `%%exercise` (nbgrader's own time-out interrupts it), and a
           function that never returns -> 0 each, and the next notebook is still graded;
- hostile: patches jax, deletes the lesson's variables and the check's name, deletes an exercise
           cell, a function that calls sys.exit() -> 0 each, the grader never stops.

Scores are read from nbgrader's gradebook and its CSV export.
"""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
NOTEBOOKS = ("01_pytrees.ipynb", "02_packed_parameters.ipynb")
POINTS = {"squared_norm": 2, "nested_scale_grad": 2, "repair_update": 2, "grad_over_flat_params": 4}
IN_NOTEBOOK = {
    "squared_norm": "01_pytrees",
    "nested_scale_grad": "01_pytrees",
    "repair_update": "01_pytrees",
    "grad_over_flat_params": "02_packed_parameters",
}


def env() -> dict:
    e = dict(os.environ)
    e["PATH"] = os.pathsep.join([str(BIN), e.get("PATH", "")])  # nbgrader runs `alembic`, the kernel `python`
    e["PYTHONPATH"] = os.pathsep.join([str(ROOT / "widgets"), e.get("PYTHONPATH", "")])
    e["JAX_PLATFORMS"] = "cpu"
    e.pop("JUPYTER_PLATFORM_DIRS", None)
    return e


def run(*args: str, cwd: Path, timeout: float = 900) -> subprocess.CompletedProcess:
    proc = subprocess.run(list(args), cwd=cwd, env=env(), capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, f"{args} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-5000:]}"
    return proc


def exercise_id(cell) -> str | None:
    for tag in cell.get("metadata", {}).get("tags", []):
        if tag.startswith("exercise:") and tag[len("exercise:") :] in POINTS:
            return tag[len("exercise:") :]
    return None


def solution(ex_id: str) -> str:
    from pytree_lab.course import EXERCISES

    return EXERCISES[ex_id].solutions[0]


WRONG = {
    # norm_squared right, manual adds the bias gradient unsquared: 1 of 2 values, on the lesson's
    # values and on each hidden case -> 2 points x 1/2 = 1
    "squared_norm": 'norm_squared = sum(jnp.sum(g ** 2) for g in jax.tree.leaves(grads))\n'
    'manual = jnp.sum(grads["weight"] ** 2) + grads["bias"]',
    # the lesson's answer typed in as numbers (-8, -4, -4, -4 derived by hand in the lesson):
    # right on the lesson's values, wrong on both hidden cases -> 2 x 1/3
    "nested_scale_grad": 'g = {"layer": {"weight": jnp.array([-8., -4.]), "bias": jnp.array(-4.)},\n'
    '     "scale": jnp.array(-4.)}',
    # the bias not updated: 1 of 2 leaves on the lesson's values, the hidden cases compare the
    # whole tree -> 2 x (1/2) / 3
    "repair_update": 'fixed = {"weight": params["weight"] - 0.05 * grads["weight"], "bias": params["bias"]}',
    # a mean where a sum is asked: right only on the worked example (N = 1), 1 of 5 cases -> 4 x 1/5
    "grad_over_flat_params": "def grad_over_flat_params(flat_params, x):\n"
    "    def loss(p):\n"
    "        return jnp.mean((x @ p[:-1] + p[-1]) ** 2)\n"
    "    return jax.grad(loss)(flat_params)",
}
WRONG_SCORES = {
    "squared_norm": 1.0,
    "nested_scale_grad": round(2 / 3, 3),
    "repair_update": round(2 * 0.5 / 3, 3),
    "grad_over_flat_params": 0.8,
}

EXIT = {
    "squared_norm": "import sys\nsys.exit()",
    "nested_scale_grad": "import sys\nsys.exit(0)",
    "repair_update": None,  # replaced by a cell without %%exercise, below
    "grad_over_flat_params": "import sys\nsys.exit(1)",
}
LOOP = {
    "squared_norm": "while True:\n    pass",
    "nested_scale_grad": "n = 0\nwhile True:\n    n += 1",
    "repair_update": None,
    "grad_over_flat_params": "def grad_over_flat_params(flat_params, x):\n    while True:\n        pass",
}
HOSTILE = {
    # patches jax (undone after the cell), then answers with the patched function's result
    "squared_norm": "jax.tree.leaves = lambda tree: []\njnp.sum = lambda a: 0.0\n"
    "norm_squared = sum(jnp.sum(g ** 2) for g in jax.tree.leaves(grads))\nmanual = 0.0",
    # deletes the lesson's variables and the check's name
    "nested_scale_grad": "del params, grads, check_cell\ng = None",
    "repair_update": "DELETE",  # the exercise cell is removed from the notebook
    # a function that exits the interpreter when the check calls it
    "grad_over_flat_params": "def grad_over_flat_params(flat_params, x):\n    import sys\n    sys.exit(3)",
}


def submission(release: Path, dest: Path, answers: dict) -> None:
    dest.mkdir(parents=True)
    for name in NOTEBOOKS:
        nb = json.loads((release / name).read_text())
        cells = []
        for cell in nb["cells"]:
            ex = exercise_id(cell) if cell["cell_type"] == "code" else None
            if ex is None:
                cells.append(cell)
                continue
            code = answers(ex) if callable(answers) else answers[ex]
            if code == "DELETE":
                continue
            cell["source"] = code.removeprefix("#raw\n") if code.startswith("#raw\n") else f"%%exercise {ex}\n{code}"
            cells.append(cell)
        nb["cells"] = cells
        (dest / name).write_text(json.dumps(nb))


def grades(course: Path) -> dict[str, dict[str, float]]:
    from nbgrader.api import Gradebook

    out: dict[str, dict[str, float]] = {}
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        for sub in gb.assignment_submissions("pytrees"):
            for nb in sub.notebooks:
                for grade in nb.grades:
                    if grade.name.endswith("-tests"):
                        assert grade.max_score == POINTS[grade.name.removesuffix("-tests")]
                        out.setdefault(sub.student.id, {})[grade.name.removesuffix("-tests")] = grade.score
    return out


def test_nbgrader_is_installed():
    import nbgrader as real  # the dev extra installs it; a missing nbgrader fails here

    assert real.__version__


@pytest.fixture(scope="module")
def course(tmp_path_factory):
    course = tmp_path_factory.mktemp("course")
    proc = run(
        str(BIN / "pytree-lab") if (BIN / "pytree-lab").exists() else sys.executable,
        *([] if (BIN / "pytree-lab").exists() else ["-m", "pytree_lab.course.cli"]),
        "nbgrader",
        str(course),
        cwd=course,
    )
    assert "grad_over_flat_params" in proc.stdout
    run(str(BIN / "nbgrader"), "generate_assignment", "pytrees", cwd=course)
    release = course / "release" / "pytrees"
    raw_exit = "#raw\nimport sys\nsys.exit()\nfixed = 1"  # no %%exercise: IPython's own SystemExit handling
    # no %%exercise: nbgrader's time-out interrupts it (SIGINT, as it would a busy loop; this one
    # sleeps, so its time-out leaves the CPU to the rest of the suite)
    raw_loop = "#raw\nimport time\nwhile True:\n    time.sleep(1)"
    submission(release, course / "submitted" / "ref" / "pytrees", lambda ex: solution(ex))
    submission(release, course / "submitted" / "wrong" / "pytrees", WRONG)
    submission(release, course / "submitted" / "exit" / "pytrees", {**EXIT, "repair_update": raw_exit})
    submission(release, course / "submitted" / "loop" / "pytrees", {**LOOP, "repair_update": raw_loop})
    submission(release, course / "submitted" / "hostile" / "pytrees", HOSTILE)
    # the course's config cuts a cell at 60 s; an instructor may set another time-out on the command
    # line, as here (the loop below then costs 30 s of the suite, not 60)
    assert "c.Execute.timeout = 60" in (course / "nbgrader_config.py").read_text()
    run(str(BIN / "nbgrader"), "autograde", "pytrees", "--Execute.timeout=30", cwd=course, timeout=1500)
    run(str(BIN / "nbgrader"), "export", cwd=course)
    return course


def test_source_holds_solutions_and_hidden_tests_with_points(course):
    source = course / "source" / "pytrees"
    seen = {}
    for name in NOTEBOOKS:
        nb = json.loads((source / name).read_text())
        for cell in nb["cells"]:
            meta = cell.get("metadata", {}).get("nbgrader")
            if not meta:
                continue
            text = "".join(cell["source"])
            if meta["solution"]:
                ex = exercise_id(cell)
                assert ex and meta["grade"] is False and f"exercise:{ex}" in cell["metadata"]["tags"]
                assert "### BEGIN SOLUTION" in text and solution(ex).strip() in text
                seen[ex + "-answer"] = True
            else:
                ex = meta["grade_id"].removesuffix("-tests")
                assert meta["grade"] is True and meta["locked"] is True and meta["points"] == POINTS[ex]
                assert "### BEGIN HIDDEN TESTS" in text and "seed=" in text
                seen[ex + "-tests"] = True
    assert len(seen) == 8


def test_released_notebooks_hold_no_solution_and_no_hidden_case(course):
    source = {n: json.loads((course / "source" / "pytrees" / n).read_text()) for n in NOTEBOOKS}
    for name in NOTEBOOKS:
        text = (course / "release" / "pytrees" / name).read_text()
        for secret in ("BEGIN SOLUTION", "HIDDEN TESTS", "summative", "seed=", "grading import"):
            assert secret not in text
        released = json.loads(text)
        for cell in released["cells"]:
            ex = exercise_id(cell) if cell["cell_type"] == "code" else None
            if ex:
                # the lesson's starter cell, with its `...`; no line of the reference solution
                body = "".join(cell["source"])
                assert body.startswith(f"%%exercise {ex}") and "..." in body
                sol_lines = [
                    ln.strip()
                    for ln in solution(ex).splitlines()
                    if ln.strip() and not ln.strip().startswith(("#", "def ", "return", "print("))
                ]
                assert not [ln for ln in sol_lines if ln in body], ex
        # every seed in the source is absent from the release
        for cell in source[name]["cells"]:
            for line in "".join(cell["source"]).splitlines():
                if "seed=" in line:
                    seed = line.split("seed=")[1].split(",")[0]
                    assert len(seed) > 6 and seed not in text
        # the practice check cells say they are practice
        assert "practice check: feedback only, it does not count" in text


def test_gradebook_scores_per_exercise(course):
    got = grades(course)
    assert got["ref"] == {ex: float(p) for ex, p in POINTS.items()}
    assert got["wrong"] == pytest.approx(WRONG_SCORES, abs=1e-3)
    assert 0 < sum(got["wrong"].values()) < sum(POINTS.values())
    for student in ("exit", "loop", "hostile"):
        assert got[student] == dict.fromkeys(POINTS, 0.0), student


def test_endless_loop_is_cut_by_nbgraders_timeout_and_grading_goes_on(course):
    nb = json.loads((course / "autograded" / "loop" / "pytrees" / "01_pytrees.ipynb").read_text())
    interrupted = next(c for c in nb["cells"] if exercise_id(c) == "repair_update")
    assert any(o["output_type"] == "error" for o in interrupted["outputs"])
    # cells after it ran: the repair check printed its grade, and the next notebook was graded
    after = next(
        c for c in nb["cells"] if c.get("metadata", {}).get("nbgrader", {}).get("grade_id") == "repair_update-tests"
    )
    assert "Graded repair_update: 0 of 2 points" in "".join("".join(o.get("text", "")) for o in after["outputs"])
    nb2 = json.loads((course / "autograded" / "loop" / "pytrees" / "02_packed_parameters.ipynb").read_text())
    tests = next(
        c
        for c in nb2["cells"]
        if c.get("metadata", {}).get("nbgrader", {}).get("grade_id") == "grad_over_flat_params-tests"
    )
    text = "".join("".join(o.get("text", "")) for o in tests["outputs"])
    assert "Graded grad_over_flat_params: 0 of 4 points" in text


def test_export_csv_totals(course):
    with (course / "grades.csv").open(newline="") as f:
        rows = {r["student_id"]: r for r in csv.DictReader(f)}
    total = sum(POINTS.values())
    assert float(rows["ref"]["raw_score"]) == total and float(rows["ref"]["max_score"]) == total
    assert float(rows["wrong"]["raw_score"]) == pytest.approx(sum(WRONG_SCORES.values()), abs=1e-2)
    for student in ("exit", "loop", "hostile"):
        assert float(rows[student]["raw_score"]) == 0


def test_refuses_to_write_over_an_existing_course(tmp_path):
    from pytree_lab.course.cli import main

    assert main(["nbgrader", str(tmp_path)]) == 0
    before = (tmp_path / "source" / "pytrees" / "01_pytrees.ipynb").read_text()
    assert main(["nbgrader", str(tmp_path)]) == 2
    assert (tmp_path / "source" / "pytrees" / "01_pytrees.ipynb").read_text() == before
