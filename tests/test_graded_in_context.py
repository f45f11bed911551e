"""nbgrader's grader and the practice check agree on honest work (issue 47, part 1): each answer
below is the exercise cell of the real course notebook, with what the notebook itself gives it
(its imports, `display`, `describe`, optax, ravel_pytree, a helper the student wrote above, a line
magic). The practice check runs it in an IPython shell that ran the notebook's cells before it, as
a kernel does; the grader (`autograde.grade_notebook`) runs the same notebook in its sandbox with
its hidden cases. Both give full marks to every one. Then what the grader must never do: let a
typed-in number pass the hidden cases, let the student's words (an exception's name, a forged
result line) into the feedback, hand the grader's environment to the student's code, or turn the
machine's slowness into a 0."""

from __future__ import annotations

import json
import os
import pathlib
import socket
import subprocess
import sys
import time

import pytest
from test_true_diagnoses import NEAR_MISSES

from pytree_lab.course import autograde

CONTENT = pathlib.Path(__file__).resolve().parents[1] / "content"
LESSON = {
    "squared_norm": "01_pytrees.ipynb",
    "nested_scale_grad": "01_pytrees.ipynb",
    "repair_update": "01_pytrees.ipynb",
    "grad_over_flat_params": "02_packed_parameters.ipynb",
}
NORM = "norm_squared = sum(jnp.sum(g ** 2) for g in jax.tree.leaves(grads))\n"
MANUAL = 'manual = jnp.sum(grads["weight"] ** 2) + grads["bias"] ** 2\n'
NESTED = (
    'nested = {"layer": params, "scale": jnp.array(1.)}\n'
    "def nested_loss(p):\n"
    '    pred = p["scale"] * (jnp.dot(p["layer"]["weight"], x) + p["layer"]["bias"])\n'
    "    return (pred - 3.) ** 2\n"
    "g = jax.grad(nested_loss)(nested)\n"
)
REPAIR = 'fixed = jax.tree.map(lambda p, g: p - 0.05 * g, params, {**broken, "bias": grads["bias"]})\n'
PACKED = "    return jax.grad(lambda f: jnp.sum((x @ f[:-1] + f[-1]) ** 2))(flat_params)\n"

# (exercise, code of the exercise cell, a cell the student added before it or "")
HONEST = {
    "norm, shown with display": ("squared_norm", NORM + MANUAL + "display(norm_squared)", ""),
    "norm under %time": ("squared_norm", "%time " + NORM + MANUAL, ""),
    "norm from a helper written above": (
        "squared_norm",
        "norm_squared = squares(grads)\n" + MANUAL,
        "def squares(tree):\n    return sum(jnp.sum(leaf ** 2) for leaf in jax.tree.leaves(tree))",
    ),
    "norm as int()": ("squared_norm", f"norm_squared = int({NORM.split(' = ')[1].strip()})\n" + MANUAL, ""),
    "norm from optax.tree.norm": (
        "squared_norm",
        "import optax\nnorm_squared = optax.tree.norm(grads) ** 2\n" + MANUAL,
        "",
    ),
    "nested, printed with describe": ("nested_scale_grad", NESTED + "print(describe(nested))", ""),
    "nested with the lesson's loss reused": (
        "nested_scale_grad",
        'nested = {"layer": params, "scale": jnp.array(1.)}\n'
        "def nested_loss(p):\n"
        '    return loss(jax.tree.map(lambda leaf: leaf * p["scale"], p["layer"]))\n'
        "g = jax.grad(nested_loss)(nested)",
        "",
    ),
    "repair with **": ("repair_update", REPAIR, ""),
    "repair from a copy of broken": (
        "repair_update",
        'repaired = dict(broken)\nrepaired["bias"] = grads["bias"]\n'
        "fixed = jax.tree_util.tree_map(lambda p, g: p - 0.05 * g, params, repaired)",
        "",
    ),
    "repair with optax.apply_updates": (
        "repair_update",
        "import optax\n"
        'fixed = optax.apply_updates(params, jax.tree.map(lambda g: -0.05 * g, {**broken, "bias": grads["bias"]}))',
        "",
    ),
    "packed with jax.grad": ("grad_over_flat_params", "def grad_over_flat_params(flat_params, x):\n" + PACKED, ""),
    "packed through ravel_pytree": (
        "grad_over_flat_params",
        "def grad_over_flat_params(flat_params, x):\n"
        "    _, unravel = ravel_pytree((flat_params[:-1], flat_params[-1]))  # weights, then the bias\n"
        "    def packed(f):\n"
        "        w, b = unravel(f)\n"
        "        return jnp.sum((x @ w + b) ** 2)\n"
        "    return jax.grad(packed)(flat_params)\n",
        "",
    ),
    "packed, derived by hand": (
        "grad_over_flat_params",
        "def grad_over_flat_params(flat_params, x):\n"
        "    pred = x @ flat_params[:-1] + flat_params[-1]\n"
        "    return jnp.append(2 * x.T @ pred, 2 * jnp.sum(pred))\n",
        "",
    ),
}


def _tag(cell) -> str | None:
    tags = [t.split(":", 1)[1] for t in cell.get("metadata", {}).get("tags", []) if t.startswith("exercise:")]
    return next((t for t in tags if t in LESSON), None)


def lesson_cells(exercise_id: str | None, code: str = "", before: str = "", notebook: str = "") -> list[dict]:
    """The course notebook's code cells as a submission holds them (check cells left out), with
    `code` as the exercise's cell and `before` as a cell the student added above it."""
    nb = json.loads((CONTENT / (notebook or LESSON[str(exercise_id)])).read_text(encoding="utf-8"))
    cells: list[dict] = []
    for cell in nb["cells"]:
        source = "".join(cell["source"])
        if cell["cell_type"] != "code" or "check_cell(" in source:
            continue
        if exercise_id is not None and _tag(cell) == exercise_id:
            cells += [{"code": before, "exercise": None}] if before else []
            source = f"%%exercise {exercise_id}\n{code}"
        cells.append({"code": source, "exercise": _tag(cell)})
    return cells


_PRACTICE = r"""
import json, sys
from IPython.core.interactiveshell import InteractiveShell
from pytree_lab import course
from pytree_lab.exercises import cells as exercise_cells
job = json.load(sys.stdin)
shell = InteractiveShell.instance()
verdicts = {}
for cell in job["cells"]:
    if cell["exercise"] is None:
        shell.run_cell(cell["code"], silent=True)
        continue
    for name, (exercise_id, code, before) in job["variants"].items():
        if exercise_id == cell["exercise"]:
            shell.run_cell(before, silent=True)
            shell.run_cell("%%exercise " + exercise_id + "\n" + code, silent=True)
            result = course.check_button(exercise_id).check()
            verdicts[name] = [result.passed, result.score, result.feedback]
    shell.run_cell(cell["code"], silent=True)  # the lesson's own cell, as the notebook goes on
print("VERDICTS " + json.dumps(verdicts))
"""


def practice_checks(notebook: str, variants: dict) -> dict:
    """Each variant's practice check, in one IPython shell that runs `notebook`'s cells in order
    (each variant at its exercise's cell): name -> [passed, score, feedback]."""
    job = {"cells": lesson_cells(None, notebook=notebook), "variants": variants}
    done = subprocess.run(
        [sys.executable, "-c", _PRACTICE], input=json.dumps(job), capture_output=True, text=True, timeout=600
    )
    line = next((x for x in done.stdout.splitlines() if x.startswith("VERDICTS ")), None)
    assert line is not None, done.stderr[-3000:]
    return json.loads(line.removeprefix("VERDICTS "))


@pytest.mark.parametrize("notebook", sorted(set(LESSON.values())))
def test_the_practice_check_passes_every_honest_answer_in_the_notebook(notebook, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # the practice check's evidence file is written here
    variants = {name: v for name, v in HONEST.items() if LESSON[v[0]] == notebook}
    verdicts = practice_checks(notebook, variants)
    assert set(verdicts) == set(variants)
    for name, (passed, score, feedback) in verdicts.items():
        assert (passed, score) == (True, 1.0), (name, feedback)


@pytest.mark.parametrize("variant", list(HONEST))
def test_the_grader_gives_every_honest_answer_full_marks(variant, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # as nbgrader: from the course folder, never in the sandbox
    exercise_id, code, before = HONEST[variant]
    verdict = autograde.grade_notebook(lesson_cells(exercise_id, code, before), {exercise_id: 20261207})[exercise_id]
    assert (verdict.share, verdict.regrade) == (1.0, False), verdict.lines
    assert all(line.endswith(": right.") for line in verdict.lines), verdict.lines


@pytest.mark.parametrize(
    ("exercise_id", "code"),
    [
        ("squared_norm", "norm_squared = 96.0\nmanual = 96.0"),
        ("repair_update", 'fixed = {"weight": jnp.array([1.4, -0.8]), "bias": jnp.array(0.2)}'),
        (
            "repair_update",
            'fixed = jax.tree.map(lambda p, g: p - 0.05 * g, params, {**broken, "bias": jnp.array(-4.)})',
        ),
    ],
)
def test_a_typed_in_answer_earns_only_the_lessons_share(exercise_id, code, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    verdict = autograde.grade_notebook(lesson_cells(exercise_id, code), {exercise_id: 20261207})[exercise_id]
    assert verdict.share == pytest.approx(1 / 3), verdict.lines  # the lesson's values only
    assert verdict.lines[0] == "the lesson's values: right."
    assert all(line.endswith("not right.") for line in verdict.lines[1:]), verdict.lines


ELEVEN = 'value, grads = jax.value_and_grad(loss)(params)\nprint("loss:", float(value))'  # lesson 01's cell 11
# answers right at every case, which the lesson's numbers once misjudged, and near-misses right at
# the lesson's values only or named by a coincidence of them (tests/test_true_diagnoses.py)
AGREE = {
    "norm with a (1,) bias": (
        "squared_norm",
        NORM + 'manual = jnp.sum(grads["weight"] ** 2) + grads["bias"].reshape(1) ** 2',
        "",
    ),
    "repair after cell 11 ran again": ("repair_update", REPAIR, ELEVEN),
    **{name: (exercise_id, code, "") for name, (exercise_id, code, _, _) in NEAR_MISSES.items()},
}


def test_the_grader_and_the_practice_check_agree_on_each_near_miss(tmp_path, monkeypatch):
    """Each answer in the notebook, checked as the student checks it and graded as nbgrader grades
    it: both right, or both wrong with the near-miss named (the grader: right at the lesson's values
    at most)."""
    monkeypatch.chdir(tmp_path)
    verdicts = practice_checks("01_pytrees.ipynb", AGREE)
    shares = {}
    rounds: dict[str, list[str]] = {}  # one variant per exercise in a submission
    for name, (exercise_id, _, _) in AGREE.items():
        rounds.setdefault(exercise_id, []).append(name)
    for n in range(max(map(len, rounds.values()))):
        chosen = {names[n]: AGREE[names[n]] for names in rounds.values() if n < len(names)}
        cells = lesson_cells(None, notebook="01_pytrees.ipynb")
        for exercise_id, code, before in chosen.values():
            at = next(i for i, c in enumerate(cells) if c["exercise"] == exercise_id)
            cells[at : at + 1] = [
                *([{"code": before, "exercise": None}] if before else []),
                {"code": code, "exercise": exercise_id},
            ]
        graded = autograde.grade_notebook(cells, {exercise_id: 20261207 for exercise_id, _, _ in chosen.values()})
        shares |= {name: graded[exercise_id].share for name, (exercise_id, _, _) in chosen.items()}
    for name, (passed, score, feedback) in verdicts.items():
        right = name in ("norm with a (1,) bias", "repair after cell 11 ran again")
        assert (passed, score == 1.0, shares[name] == 1.0) == (right,) * 3, (name, shares[name], feedback)
        if not right:
            assert NEAR_MISSES[name][2] in feedback, (name, feedback)
    assert shares["scale on the weight term only, s·(w·x) + b"] == pytest.approx(1 / 3)  # the lesson's values only


def test_the_feedback_holds_only_the_graders_words(tmp_path, monkeypatch):
    """An exception class named after the hidden values, and a line forged on the result pipe:
    neither reaches the feedback; the built-in exceptions are named."""
    monkeypatch.chdir(tmp_path)
    leak = (
        "import os, stat\n"
        "for fd in range(3, 64):  # the result pipe, whichever descriptor it is\n"
        "    try:\n"
        "        if stat.S_ISFIFO(os.fstat(fd).st_mode):\n"
        "            os.write(fd, b'{\"exercise\": \"squared_norm\", \"case\": 1, \"error\": \"LEAK_forged\"}\\n')\n"
        "    except OSError:\n"
        "        pass\n"
        "raise type('LEAK_w' + str(grads['weight'].tolist()), (Exception,), {})()"
    )
    lines = autograde.grade_notebook(lesson_cells("squared_norm", leak), {"squared_norm": 5})["squared_norm"].lines
    assert not any("LEAK" in line for line in lines), lines
    assert all(line.endswith("raised an exception: 0.") for line in lines), lines
    lines = autograde.grade_notebook(lesson_cells("squared_norm", "norm_squared = 1 / 0"), {"squared_norm": 5})
    assert lines["squared_norm"].lines[0] == "the lesson's values: the code raised ZeroDivisionError: 0."


def test_the_sandbox_starts_from_an_empty_environment(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "grader-secret-1")
    monkeypatch.setenv("JUPYTERHUB_API_TOKEN", "grader-secret-2")
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    shown = subprocess.run([*autograde.sandbox(str(scratch)), "env"], capture_output=True, text=True, check=True)
    names = {line.split("=", 1)[0] for line in shown.stdout.splitlines()}
    assert names <= {"PATH", "HOME", "PWD", "TMPDIR", "LANG", "LC_ALL", "PYTHONPATH", "JAX_PLATFORMS"}, names
    assert "grader-secret" not in shown.stdout
    # and the answer run: a cell that reads the variable finds nothing
    code = 'norm_squared = float(len(os.environ.get("AWS_SECRET_ACCESS_KEY", "")))\nmanual = norm_squared'
    verdict = autograde.grade_notebook(lesson_cells("squared_norm", "import os\n" + code), {"squared_norm": 5})
    assert all(line.endswith("not right.") for line in verdict["squared_norm"].lines)


def test_an_answer_past_its_cpu_budget_scores_0_and_a_slow_machine_never_does(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    spin = "while True:\n    pass\nnorm_squared = manual = 0.0"
    cells = lesson_cells("squared_norm", spin)
    verdict = autograde.grade_notebook(cells, {"squared_norm": 5}, per_cell=1.0, per_case=1.0)
    assert verdict["squared_norm"].share == 0.0 and not verdict["squared_norm"].regrade
    assert all(line.endswith("the code ran past its time budget: 0.") for line in verdict["squared_norm"].lines)
    # the clock runs out before the run has answered: nothing is scored, all is to be graded again
    late = autograde.grade_notebook(lesson_cells("squared_norm", NORM + MANUAL), {"squared_norm": 5}, wall=0.5)
    assert late["squared_norm"].regrade and late["squared_norm"].lines == [
        f"{label}: not graded: regrade (the grading machine ran out of time)."
        for label in (
            "the lesson's values",
            "hidden case 1 (other lesson parameters)",
            "hidden case 2 (other lesson parameters)",
        )
    ]


def test_a_grader_under_heavy_load_gives_the_same_grades(tmp_path, monkeypatch):
    """Four busy processes per core beside the grader: the answers' own CPU time decides, not the clock."""
    monkeypatch.chdir(tmp_path)
    code = "def grad_over_flat_params(flat_params, x):\n" + PACKED
    quiet = autograde.grade_notebook(lesson_cells("grad_over_flat_params", code), {"grad_over_flat_params": 3})
    burners = [
        subprocess.Popen([sys.executable, "-c", "import time\nend = time.time() + 300\nwhile time.time() < end: pass"])
        for _ in range(4 * (os.cpu_count() or 2))
    ]
    try:
        started = time.monotonic()
        loaded = autograde.grade_notebook(lesson_cells("grad_over_flat_params", code), {"grad_over_flat_params": 3})
        took = time.monotonic() - started
    finally:
        for proc in burners:
            proc.kill()
            proc.wait()
    assert loaded == quiet and quiet["grad_over_flat_params"].share == 1.0, (loaded, took)


def test_an_answer_run_holds_a_huge_allocation_and_has_no_network(tmp_path, monkeypatch):
    """The lesson's repair, right only where the sandbox refused both the network and 20 GB."""
    monkeypatch.chdir(tmp_path)
    grader = socket.create_server(("127.0.0.1", 0))
    grader.setblocking(False)
    attacks = f"""\
import socket, numpy as np
try:
    socket.create_connection(("127.0.0.1", {grader.getsockname()[1]}), timeout=5).sendall(b"grade me")
    reached = True
except OSError:
    reached = False
try:
    big = np.ones(20 * 10**9 // 8)  # 20 GB
    allocated = True
except MemoryError:
    allocated = False
"""
    code = attacks + REPAIR + "if reached or allocated:\n    fixed = None\n"
    verdict = autograde.grade_notebook(lesson_cells("repair_update", code), {"repair_update": 7})["repair_update"]
    try:
        grader.accept()
        reached = True
    except BlockingIOError:
        reached = False
    finally:
        grader.close()
    assert verdict.share == 1.0, verdict.lines  # each case ran, and was refused the network and the 20 GB
    assert not reached


def test_code_that_swallows_every_stop_or_waits_costs_only_its_own_exercise(tmp_path, monkeypatch):
    """A loop that catches every stop is ended by the system (its CPU limit) and one that sleeps
    by the grader (no answer, no CPU time): each scores 0, and the notebook is graded on without
    that cell (the repair after them is right)."""
    monkeypatch.chdir(tmp_path)
    swallow = "while True:\n    try:\n        while True:\n            pass\n    except BaseException:\n        pass"
    cells = lesson_cells("squared_norm", swallow)
    at = next(i for i, c in enumerate(cells) if c["exercise"] == "nested_scale_grad")
    cells[at] = {
        "code": "%%exercise nested_scale_grad\nimport time\nwhile True:\n    try:\n        time.sleep(1)\n"
        "    except BaseException:\n        pass",
        "exercise": "nested_scale_grad",
    }
    at = next(i for i, c in enumerate(cells) if c["exercise"] == "repair_update")
    cells[at] = {"code": "%%exercise repair_update\n" + REPAIR, "exercise": "repair_update"}
    seeds = {"squared_norm": 1, "nested_scale_grad": 2, "repair_update": 3}
    verdicts = autograde.grade_notebook(cells, seeds, per_cell=2.0, per_case=2.0, stall=15.0)
    for exercise_id in ("squared_norm", "nested_scale_grad"):
        verdict = verdicts[exercise_id]
        assert (verdict.share, verdict.regrade) == (0.0, False), verdict
        assert all(
            line.endswith(
                ("never finished (it crashed, or ran or waited past its budget): 0.", "ran past its time budget: 0.")
            )
            for line in verdict.lines
        ), verdict.lines
    assert verdicts["repair_update"].share == 1.0, verdicts["repair_update"].lines
