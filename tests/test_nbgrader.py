"""The course as an nbgrader assignment, through the real nbgrader, end to end.

`pytree-lab nbgrader OUTDIR` writes the course directory; then the standard flow, unchanged:
`nbgrader generate_assignment pytrees`, students' notebooks in submitted/<student>/pytrees/,
`nbgrader autograde pytrees`, `nbgrader export`. The points come from the course's autograde
step (pytree_lab.course.autograde), which runs each exercise cell's code in a fresh sandboxed
process; the submission's kernel runs under bubblewrap and decides nothing. The students:

- ref:     the catalogue's reference solutions pasted into the exercise cells, and one test cell
           of each notebook deleted -> full marks (the deleted cells come back);
- wrong:   typical wrong answers, in a kernel rigged to pass them: numpy's comparisons patched
           above the imports, display switched off, an input transformer, a pre_run_cell hook, the
           practice checker replaced -> exactly the wrong answers' partial credit, exercise by
           exercise (derived below: the rigging changes nothing);
- exit:    `sys.exit()` in every exercise (one of them outside `%%exercise`) -> 0 each;
- loop:    endless loops, one outside `%%exercise` (nbgrader's own time-out interrupts it), and a
           function that never returns -> 0 each, and the next notebook is still graded;
- hostile: patches jax, deletes the lesson's variables and the check's name, deletes an exercise
           cell, a function that calls sys.exit() -> 0 each, the grader never stops;
- snoop:   walks up to source/, copies the solutions, writes beside gradebook.db and a startup file
           into the grader's home, answers with the package's installed solutions -> 0 each, and
           nothing outside its scratch folder changes;
- hang:    an answer that freezes time's clocks and loops, one that loops around
           `except BaseException: pass`, a function that does both, and one right answer -> 0, 0,
           0 and full marks for the right one.

Scores are read from nbgrader's gradebook and its CSV export.
"""

from __future__ import annotations

import csv
import hashlib
import json
import os
import re
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from pytree_lab.course.autograde import MEMORY, TASKS

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


def was_reached(grader) -> bool:
    """Whether anything connected to the grader's listening socket (then closed)."""
    try:
        grader.accept()
        return True
    except BlockingIOError:
        return False
    finally:
        grader.close()


def env(home: Path | None = None) -> dict:
    e = dict(os.environ)
    if home is not None:
        e["HOME"] = str(home)
    e["PATH"] = os.pathsep.join([str(BIN), e.get("PATH", "")])  # nbgrader runs `alembic`, the kernel `python`
    e["PYTHONPATH"] = os.pathsep.join([str(ROOT / "widgets"), e.get("PYTHONPATH", "")])
    e["JAX_PLATFORMS"] = "cpu"
    e.pop("JUPYTER_PLATFORM_DIRS", None)
    return e


def run(*args: str, cwd: Path, timeout: float = 900, home: Path | None = None) -> subprocess.CompletedProcess:
    proc = subprocess.run(list(args), cwd=cwd, env=env(home), capture_output=True, text=True, timeout=timeout)
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
    # norm_squared right, manual leaves the bias out: 1 of 2 values, on the lesson's values and on
    # each hidden case -> 2 points x 1/2 = 1. (The hidden gradients are whole numbers: an unsquared
    # bias gradient would be right wherever it is 0 or 1, and the score would hang on the seed;
    # the bias gradient is 2 x the residual, never 0 where the other gradients are not.)
    "squared_norm": 'norm_squared = sum(jnp.sum(g ** 2) for g in jax.tree.leaves(grads))\n'
    'manual = jnp.sum(grads["weight"] ** 2)',
    # the lesson's answer typed in as numbers (-8, -4, -4, -4 derived by hand in the lesson):
    # right on the lesson's values, wrong on both hidden cases -> 2 x 1/3
    "nested_scale_grad": 'g = {"layer": {"weight": jnp.array([-8., -4.]), "bias": jnp.array(-4.)},\n'
    '     "scale": jnp.array(-4.)}',
    # the bias not updated
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
    # the bias leaf is wrong in every case (its gradient is never 0 there): the tree is wrong -> 0
    "repair_update": 0.0,
    "grad_over_flat_params": 0.8,
}

EXIT = {
    "squared_norm": "import sys\nsys.exit()",
    "nested_scale_grad": "import sys\nsys.exit(0)",
    "repair_update": None,  # replaced by a cell without %%exercise, below
    "grad_over_flat_params": "import sys\nsys.exit(1)",
}
# Endless loops: the repair cell (below) is cut by nbgrader's time-out, the packed-gradient
# function loops where the grader calls it. The other two answers are right: a loop elsewhere in
# the notebook costs them nothing. (A value answer that loops, with the clocks frozen or every
# stop swallowed, is HANG's.)
LOOP = {
    "squared_norm": None,
    "nested_scale_grad": None,
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


# A plain cell above the imports (the released notebook's second cell): it rigs the student's
# kernel to pass wrong answers.
RIG = """\
import numpy
numpy.allclose = lambda *a, **k: True
numpy.isclose = lambda a, b, *r, **k: numpy.ones(numpy.shape(a), bool)
numpy.array_equal = lambda *a, **k: True
ip = get_ipython()
ip.ast_node_interactivity = "none"
ip.input_transformers_post.append(lambda lines: [ln.replace("check_cell(", "print(") for ln in lines])
ip.events.register("pre_run_cell", lambda info: print("seen:", info.raw_cell[:40]))
import pytree_lab.course.catalogue as catalogue
catalogue.check = lambda *a, **k: None
"""


def snoop(course: Path, home: Path, ex: str | None = None, port: int = 0) -> str:
    """Code that reaches for the grading side: the course's source notebooks (their reference
    solutions), the gradebook's folder, the grader's home, the installed package's solutions."""
    code = f"""\
import json, pathlib, shutil
course, home = pathlib.Path({str(course)!r}), pathlib.Path({str(home)!r})
here = pathlib.Path.cwd()
found = [p for up in [here, *here.parents] for p in up.glob("source/*/*.ipynb")]
print("source notebooks found by walking up:", len(found))
try:
    stolen = (course / "source" / "pytrees" / "01_pytrees.ipynb").read_text()
    shutil.copy(course / "source" / "pytrees" / "01_pytrees.ipynb", "stolen.ipynb")
except OSError as err:
    stolen = ""
    print("source not readable:", type(err).__name__)
for target in (course / "beside-the-gradebook.txt", course / "source" / "pytrees" / "01_pytrees.ipynb",
               home / ".ipython" / "profile_default" / "startup" / "00-grade-me.py",
               course / "submitted" / "ref" / "pytrees" / "01_pytrees.ipynb"):
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text("get_ipython().ast_node_interactivity = 'none'")
        print("wrote", target)
    except OSError as err:
        print("not writable:", target.name, type(err).__name__)
"""
    if ex is None:  # the plain cell: also what the installed package holds, the network, its limits
        return code + (
            "from pytree_lab.course import EXERCISES\nprint({k: e.solutions for k, e in EXERCISES.items()})\n"
            "import resource, socket\n"
            "try:\n"
            f"    socket.create_connection(('127.0.0.1', {port}), timeout=5).sendall(b'graded?')\n"
            "    print('network: reached the grader')\n"
            "except OSError as err:\n"
            "    print('network: none', type(err).__name__)\n"
            "print('limits:', *(resource.getrlimit(r)[0] for r in (resource.RLIMIT_NPROC, resource.RLIMIT_AS)))\n"
        )
    return code + (
        "for cell in json.loads(stolen)['cells'] if stolen else []:\n"
        "    text = ''.join(cell['source'])\n"
        "    if '### BEGIN SOLUTION' in text:\n"
        "        exec(text.split('### BEGIN SOLUTION')[1].split('### END SOLUTION')[0])\n"
        "from pytree_lab.course import EXERCISES\n"
        f"exec(EXERCISES[{ex!r}].solutions[0])\n"
    )


HANG = {
    # time's clocks frozen, then a loop
    "squared_norm": "import time\ntime.monotonic = lambda: 0.0\ntime.process_time = lambda: 0.0\n"
    "time.perf_counter = lambda: 0.0\nwhile True:\n    pass",
    # a loop that swallows every stop
    "nested_scale_grad": "while True:\n    try:\n        while True:\n            pass\n"
    "    except BaseException:\n        pass",
    "repair_update": None,  # the reference solution: graded after the hanging ones
    "grad_over_flat_params": "def grad_over_flat_params(flat_params, x):\n    import time\n"
    "    time.monotonic = lambda: 0.0\n    while True:\n        try:\n            time.sleep(0.01)\n"
    "        except BaseException:\n            pass",
}


def submission(release: Path, dest: Path, answers, *, above_imports: str = "", drop_tests: tuple = ()) -> None:
    dest.mkdir(parents=True)
    for name in NOTEBOOKS:
        nb = json.loads((release / name).read_text())
        cells = []
        for cell in nb["cells"]:
            if cell.get("metadata", {}).get("nbgrader", {}).get("grade_id") in [f"{t}-tests" for t in drop_tests]:
                continue
            ex = exercise_id(cell) if cell["cell_type"] == "code" else None
            if ex is None:
                cells.append(cell)
                continue
            code = answers(ex) if callable(answers) else answers[ex]
            if code == "DELETE":
                continue
            cell["source"] = code.removeprefix("#raw\n") if code.startswith("#raw\n") else f"%%exercise {ex}\n{code}"
            cells.append(cell)
        if above_imports:
            plain = {"cell_type": "code", "execution_count": None, "id": "above-imports", "metadata": {}}
            cells.insert(1, {**plain, "outputs": [], "source": above_imports})
        nb["cells"] = cells
        (dest / name).write_text(json.dumps(nb))


def files(root: Path, skip: tuple = ()) -> dict[str, str]:
    """Every file under root (but the files and folders named in skip) and its content's hash."""
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file() and p.relative_to(root).parts[0] not in skip and str(p.relative_to(root)) not in skip
    }


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


# what autograde and export write in the course directory, and what the grader's own jupyter
# writes in its home (kernels' connection files, jupyter_core's one-time "migrated" marker)
GRADER_OUTPUTS = ("autograded", "gradebook.db", "grades.csv", ".nbgrader.log")
GRADER_HOME = (".local", ".jupyter/migrated")


@pytest.fixture(scope="module")
def course(tmp_path_factory):
    course = tmp_path_factory.mktemp("course")
    home = tmp_path_factory.mktemp("grader-home")
    proc = run(
        str(BIN / "pytree-lab") if (BIN / "pytree-lab").exists() else sys.executable,
        *([] if (BIN / "pytree-lab").exists() else ["-m", "pytree_lab.course.cli"]),
        "nbgrader",
        str(course),
        cwd=course,
    )
    assert "grad_over_flat_params" in proc.stdout
    run(str(BIN / "nbgrader"), "generate_assignment", "pytrees", cwd=course, home=home)
    release = course / "release" / "pytrees"
    raw_exit = "#raw\nimport sys\nsys.exit()\nfixed = 1"  # no %%exercise: IPython's own SystemExit handling
    # no %%exercise: nbgrader's time-out interrupts it (SIGINT, as it would a busy loop; this one
    # sleeps, so its time-out leaves the CPU to the rest of the suite)
    raw_loop = "#raw\nimport time\nwhile True:\n    time.sleep(1)"
    submitted = course / "submitted"
    deleted = ("squared_norm", "grad_over_flat_params")  # one test cell of each notebook
    submission(release, submitted / "ref" / "pytrees", solution, drop_tests=deleted)
    submission(release, submitted / "wrong" / "pytrees", WRONG, above_imports=RIG)
    submission(release, submitted / "exit" / "pytrees", {**EXIT, "repair_update": raw_exit})
    loop = {**LOOP, "repair_update": raw_loop}
    submission(release, submitted / "loop" / "pytrees", lambda ex: loop[ex] or solution(ex))
    submission(release, submitted / "hostile" / "pytrees", HOSTILE)
    grader = socket.create_server(("127.0.0.1", 0))  # a service of the grading machine
    grader.setblocking(False)
    submission(
        release,
        submitted / "snoop" / "pytrees",
        lambda ex: snoop(course, home, ex),
        above_imports=snoop(course, home, port=grader.getsockname()[1]),
    )
    submission(release, submitted / "hang" / "pytrees", {**HANG, "repair_update": solution("repair_update")})
    # the course's config cuts a cell at 60 s; an instructor may set another time-out on the command
    # line, as here (the loops below then cost 30 s of the suite, not 60)
    assert "c.Execute.timeout = 60" in (course / "nbgrader_config.py").read_text()
    before = (files(course, GRADER_OUTPUTS), files(home, GRADER_HOME))
    graded = run(
        str(BIN / "nbgrader"), "autograde", "pytrees", "--Execute.timeout=30", cwd=course, timeout=3000, home=home
    )
    run(str(BIN / "nbgrader"), "export", cwd=course, home=home)
    log = graded.stdout + graded.stderr
    after = (files(course, GRADER_OUTPUTS), files(home, GRADER_HOME))
    reached = was_reached(grader)
    return {"path": course, "before": before, "after": after, "home": home, "log": log, "reached": reached}


def test_source_holds_solutions_and_hidden_tests_with_points(course):
    source = course["path"] / "source" / "pytrees"
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
                assert "### BEGIN HIDDEN TESTS" in text and re.search(rf"exercise {ex}, seed \d{{7,}}", text)
                seen[ex + "-tests"] = True
    assert len(seen) == 8


def test_released_notebooks_hold_no_solution_and_no_hidden_case(course):
    course = course["path"]
    source = {n: json.loads((course / "source" / "pytrees" / n).read_text()) for n in NOTEBOOKS}
    for name in NOTEBOOKS:
        text = (course / "release" / "pytrees" / name).read_text()
        for secret in ("BEGIN SOLUTION", "HIDDEN TESTS", "graded outside", "autograde"):
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
            for seed in re.findall(r"seed (\d+)", "".join(cell["source"])):
                assert len(seed) > 6 and seed not in text
        # the practice check cells say they are practice
        assert "practice check: feedback only, it does not count" in text


# what each student's answers deserve, exercise by exercise
FULL = {ex: float(p) for ex, p in POINTS.items()}
ZERO = dict.fromkeys(POINTS, 0.0)
DESERVED = {
    "ref": FULL,
    "wrong": WRONG_SCORES,  # its rigged kernel changes nothing
    "exit": ZERO,
    "loop": {**ZERO, "squared_norm": 2.0, "nested_scale_grad": 2.0},
    "hostile": ZERO,
    "snoop": ZERO,
    "hang": {**ZERO, "repair_update": 2.0},
}


def test_gradebook_scores_per_exercise(course):
    got = grades(course["path"])
    assert set(got) == set(DESERVED)
    for student, deserved in DESERVED.items():
        assert got[student] == pytest.approx(deserved, abs=1e-3), student
    assert 0 < sum(got["wrong"].values()) < sum(POINTS.values())


def test_autograded_notebooks_show_the_recorded_points(course):
    # the test cell's output is the grade the gradebook records, whatever the kernel displayed
    for student, deserved in DESERVED.items():
        for ex, points in deserved.items():
            nb = json.loads(
                (course["path"] / "autograded" / student / "pytrees" / f"{IN_NOTEBOOK[ex]}.ipynb").read_text()
            )
            cell = next(
                c for c in nb["cells"] if c.get("metadata", {}).get("nbgrader", {}).get("grade_id") == f"{ex}-tests"
            )
            text = "".join("".join(o.get("text", "")) for o in cell["outputs"])
            assert f"Graded {ex}: {round(points, 3):g} of {POINTS[ex]} points" in text, (student, ex)


def test_nothing_outside_the_scratch_folders_changed(course):
    # source/, release/, the other submissions, the course folder beside gradebook.db and the
    # grader's home are as they were before autograde ran
    assert course["after"][0] == course["before"][0]
    assert course["after"][1] == course["before"][1]
    assert not (course["path"] / "beside-the-gradebook.txt").exists()
    nb = json.loads((course["path"] / "autograded" / "snoop" / "pytrees" / "01_pytrees.ipynb").read_text())
    shown = "".join("".join(o.get("text", "")) for c in nb["cells"] if c["cell_type"] == "code" for o in c["outputs"])
    # the snooping cell ran in the kernel and found no source notebook (what it wrote went to the
    # sandbox's own /tmp, gone with it: the snapshots above)
    assert "source notebooks found by walking up: 0" in shown and "source not readable" in shown
    # nor the grading machine's network (the kernel speaks to nbgrader over Unix sockets), and it
    # ran under the sandbox's limits
    assert "network: none" in shown and not course["reached"]
    # and the package in its kernel holds no graded solution (the grader's own does: a checkout)
    assert "{'squared_norm': (), 'nested_scale_grad': (), 'repair_update': (), 'grad_over_flat_params': ()}" in shown
    assert f"limits: {TASKS} {MEMORY}" in shown


def test_autograde_restores_deleted_test_cells_and_logs_no_checksum_noise(course):
    log = course["log"]
    # the two test cells the "ref" student removed, and no others
    assert log.count("Missing grade cell") == 2, log[-3000:]
    assert "squared_norm-tests" in log and "grad_over_flat_params-tests" in log
    # test cells left as released differ from the source only by the hidden region: no warning
    assert "checksum" not in log
    assert "Removing failed assignment" not in log


def test_exchange_release_fetch_submit_collect(course, tmp_path):
    # nbgrader's exchange, as the Lab extension's Assignments panel drives it
    instructor = tmp_path / "course"
    shutil.copytree(course["path"], instructor, ignore=shutil.ignore_patterns("autograded", "submitted"))
    exchange = tmp_path / "exchange"
    exchange.mkdir()
    exchange.chmod(0o777)
    student = tmp_path / "student"
    student.mkdir()
    root = f"--Exchange.root={exchange}"
    run(str(BIN / "nbgrader"), "release_assignment", "pytrees", root, cwd=instructor)
    run(str(BIN / "nbgrader"), "list", "--course", "pytree-lab", root, cwd=student)
    run(str(BIN / "nbgrader"), "fetch_assignment", "pytrees", "--course", "pytree-lab", root, cwd=student)
    for name in NOTEBOOKS:
        assert (student / "pytrees" / name).read_bytes() == (instructor / "release" / "pytrees" / name).read_bytes()
    run(str(BIN / "nbgrader"), "submit", "pytrees", "--course", "pytree-lab", root, cwd=student)
    run(str(BIN / "nbgrader"), "collect", "pytrees", root, cwd=instructor)
    (who,) = [p.name for p in (instructor / "submitted").iterdir()]
    for name in NOTEBOOKS:
        collected = instructor / "submitted" / who / "pytrees" / name
        assert collected.read_bytes() == (student / "pytrees" / name).read_bytes()
    assert (instructor / "submitted" / who / "pytrees" / "timestamp.txt").is_file()


def test_endless_loop_is_cut_by_nbgraders_timeout_and_grading_goes_on(course):
    course = course["path"]
    nb = json.loads((course / "autograded" / "loop" / "pytrees" / "01_pytrees.ipynb").read_text())
    interrupted = next(c for c in nb["cells"] if exercise_id(c) == "repair_update")
    # it printed no answer; nbgrader's interrupt shows an error where its reply arrives in time, but
    # on a busy grader the run kept may end at the time-out with no output: the grade is what counts
    assert not any(o["output_type"] == "execute_result" for o in interrupted["outputs"])
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
    with (course["path"] / "grades.csv").open(newline="") as f:
        rows = {r["student_id"]: r for r in csv.DictReader(f)}
    total = sum(POINTS.values())
    assert float(rows["ref"]["raw_score"]) == total and float(rows["ref"]["max_score"]) == total
    for student, deserved in DESERVED.items():
        assert float(rows[student]["raw_score"]) == pytest.approx(sum(deserved.values()), abs=1e-2), student


def test_refuses_to_write_over_an_existing_course(tmp_path):
    from pytree_lab.course.cli import main

    assert main(["nbgrader", str(tmp_path)]) == 0
    before = (tmp_path / "source" / "pytrees" / "01_pytrees.ipynb").read_text()
    assert main(["nbgrader", str(tmp_path)]) == 2
    assert (tmp_path / "source" / "pytrees" / "01_pytrees.ipynb").read_text() == before


@pytest.mark.parametrize(
    "outdir, says",
    [
        ("", "pytree-lab nbgrader: OUTDIR is empty: name the folder to write the course directory into.\n"),
        (
            "/",
            "pytree-lab nbgrader: / is the root of the file system: "
            "choose a folder of its own for the course directory.\n",
        ),
        ("FILE", "pytree-lab nbgrader: FILE is a file, not a folder: choose a folder for the course directory.\n"),
        # a folder no one can create files in, root included
        (
            "/proc/course",
            "pytree-lab nbgrader: cannot write into /proc/course (No such file or directory): "
            "choose a folder you can write to.\n",
        ),
    ],
)
def test_refuses_an_outdir_it_cannot_use_in_one_sentence(tmp_path, monkeypatch, capsys, outdir, says):
    from pytree_lab.course.cli import main

    monkeypatch.chdir(tmp_path)
    (tmp_path / "FILE").write_text("notes")
    assert main(["nbgrader", outdir]) == 2
    out, err = capsys.readouterr()
    assert (out, err) == ("", says)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["FILE"] and (tmp_path / "FILE").read_text() == "notes"


def test_a_term_late_penalty_regrade_after_a_fixed_hidden_test_and_exports(tmp_path):
    """docs/grading.md's commands for a term, on one late student with the reference answers: a
    due date and a late penalty, a hidden test that was broken (its region lost) and fixed, then
    regraded, the CSV for the LMS and the per-exercise CSV."""
    from pytree_lab.course.cli import main

    course = tmp_path / "course"
    assert main(["nbgrader", str(course)]) == 0
    source = course / "source" / "pytrees" / "01_pytrees.ipynb"
    good = source.read_text()
    marker = re.search(r"# graded outside the student's kernel: exercise repair_update, seed \d+", good).group(0)
    source.write_text(good.replace(marker, "# (lost)"))  # the repair's hidden test, broken
    nbgrader = str(BIN / "nbgrader")
    run(nbgrader, "generate_assignment", "pytrees", cwd=course)
    run(nbgrader, "db", "assignment", "add", "pytrees", "--duedate=2026-03-01 23:59:00 UTC", cwd=course)
    late = course / "submitted" / "late" / "pytrees"
    submission(course / "release" / "pytrees", late, solution)
    (late / "timestamp.txt").write_text("2026-03-03 10:00:00.000000 UTC")  # two days late
    penalty = "--LateSubmissionPlugin.penalty_method=zero"
    run(nbgrader, "autograde", "pytrees", penalty, cwd=course, timeout=1500)
    assert grades(course)["late"] == {**FULL, "repair_update": 0.0}  # a broken hidden test fails, never passes

    source.write_text(good)  # the hidden test fixed
    run(nbgrader, "generate_assignment", "pytrees", "--force", cwd=course)
    run(nbgrader, "autograde", "pytrees", "--student=late", "--force", penalty, cwd=course, timeout=1500)
    assert grades(course)["late"] == FULL

    run(nbgrader, "export", cwd=course)
    (row,) = csv.DictReader((course / "grades.csv").read_text().splitlines())
    assert row["student_id"] == "late" and row["duedate"].startswith("2026-03-01 23:59:00")
    assert (float(row["raw_score"]), float(row["late_submission_penalty"]), float(row["score"])) == (10.0, 10.0, 0.0)
    exporter = "--exporter=pytree_lab.course.autograde.ExerciseScores"
    run(nbgrader, "export", exporter, "--to=by-exercise.csv", cwd=course)
    rows = list(csv.DictReader((course / "by-exercise.csv").read_text().splitlines()))
    assert {r["exercise"]: (float(r["score"]), float(r["max_score"])) for r in rows} == {
        ex: (float(p), float(p)) for ex, p in POINTS.items()
    }
    assert {(r["student_id"], r["assignment"]) for r in rows} == {("late", "pytrees")}
