"""What the grader takes from a submission (pytree_lab.intake), through the real nbgrader: the
course's `nbgrader_config.py` as `pytree-lab nbgrader` writes it, run on local folders.

- links:  a submission folder (the documented "copy the notebooks into submitted/") whose first
          notebook is a symbolic link to the source notebook, with links to gradebook.db, to the
          source notebook and to a file and the folder of the grader's HOME, a hard link to
          gradebook.db and a named pipe; its second notebook tries to read each of them. Nothing
          of them reaches autograded/, the feedback or the log; the linked notebook is not graded
          (0, a missing notebook) and the log says why; the feedback holds no hidden test or seed.
- peek:   prints whatever notebook its kernel can read in its own folder: none there (the
  kernel's copy of its folder holds no notebook), so no seed reaches its feedback.
- the exchange: a student who backdates `timestamp.txt`, the file times and the inbound
  folder's name, and leaves a link, a hard link and a named pipe there: collect takes none of
  them and dates the submission by when its files reached the exchange.
"""

from __future__ import annotations

import datetime
import json
import os
import re
import shutil
import stat
from pathlib import Path

import pytest
from test_nbgrader import BIN, grades, run, solution, submission

pytestmark = pytest.mark.notebook

NBGRADER = str(BIN / "nbgrader")
SECRET = "grader-home-secret-5c1e"  # a file of the grader's HOME
READ_ALL = """\
import os
for name in ["gradebook.db", "grades.db", "home.txt", "source.ipynb", "pipe", "homedir/secret.txt"]:
    try:
        with open(name, "rb") as f:
            print(name, f.read(4000))
    except OSError as err:
        print(name, type(err).__name__)
print(sorted(os.listdir(".")))
"""

PEEK = """\
import glob, re
print("notebooks here:", glob.glob("*.ipynb"))
for name in glob.glob("*.ipynb"):
    print(name, re.findall("se" + r"ed \\d+", open(name).read()))
"""


@pytest.fixture(scope="module")
def released(tmp_path_factory):
    from pytree_lab.course.cli import main

    course = tmp_path_factory.mktemp("intake") / "course"
    assert main(["nbgrader", str(course)]) == 0
    run(NBGRADER, "generate_assignment", "pytrees", cwd=course)
    return course


@pytest.fixture(scope="module")
def links(released, tmp_path_factory):
    course = released
    home = tmp_path_factory.mktemp("grader-home")
    (home / "secret.txt").write_text(SECRET)
    folder = course / "submitted" / "links" / "pytrees"
    folder.mkdir(parents=True)
    nb = json.loads((course / "release" / "pytrees" / "02_packed_parameters.ipynb").read_text())
    nb["cells"].insert(
        1, {"cell_type": "code", "execution_count": None, "id": "read-all", "metadata": {}, "outputs": []}
    )
    nb["cells"][1]["source"] = READ_ALL
    (folder / "02_packed_parameters.ipynb").write_text(json.dumps(nb))
    (folder / "01_pytrees.ipynb").symlink_to("../../../source/pytrees/01_pytrees.ipynb")
    (folder / "source.ipynb").symlink_to(course / "source" / "pytrees" / "01_pytrees.ipynb")
    (folder / "gradebook.db").symlink_to("../../../gradebook.db")
    (folder / "home.txt").symlink_to(home / "secret.txt")
    (folder / "homedir").symlink_to(home)
    os.link(course / "gradebook.db", folder / "grades.db")
    os.mkfifo(folder / "pipe")
    peek = course / "submitted" / "peek" / "pytrees"  # prints what its kernel can read of its own notebook
    peek.mkdir(parents=True)
    nb["cells"][1]["source"] = PEEK
    (peek / "02_packed_parameters.ipynb").write_text(json.dumps(nb))
    # right answers, but the first exercise's cell and its check cell deleted together
    answers = lambda ex: "DELETE" if ex == "squared_norm" else solution(ex)  # noqa: E731
    submission(
        course / "release" / "pytrees",
        course / "submitted" / "deleted" / "pytrees",
        answers,
        drop_tests=("squared_norm",),
    )
    graded = run(NBGRADER, "autograde", "pytrees", cwd=course, home=home, timeout=1500)
    run(NBGRADER, "generate_feedback", "pytrees", cwd=course, home=home)
    return {"course": course, "home": home, "log": graded.stdout + graded.stderr}


def texts(root: Path) -> str:
    return "\n".join(p.read_bytes().decode("utf-8", "replace") for p in sorted(root.rglob("*")) if p.is_file())


def seeds(course: Path) -> list[str]:
    return re.findall(r"seed (\d+)", texts(course / "source" / "pytrees"))


def test_links_hard_links_and_pipes_are_refused_before_nbgraders_copy(links):
    course = links["course"]
    autograded = course / "autograded" / "links" / "pytrees"
    assert sorted(p.name for p in autograded.iterdir()) == ["02_packed_parameters.ipynb"]
    # each was moved beside submitted/, as what it was (links still links, the pipe a pipe)
    refused = course / "refused" / "links" / "pytrees"
    assert sorted(p.name for p in refused.iterdir()) == [
        "01_pytrees.ipynb", "gradebook.db", "grades.db", "home.txt", "homedir", "pipe", "source.ipynb"
    ]  # fmt: skip
    assert (refused / "home.txt").is_symlink() and stat.S_ISFIFO((refused / "pipe").lstat().st_mode)
    assert (refused / "grades.db").stat().st_nlink == 2
    assert sorted(p.name for p in (course / "submitted" / "links" / "pytrees").iterdir()) == [
        "02_packed_parameters.ipynb"
    ]
    # the kernel found none of them; nothing of them is in any output
    nb = json.loads((autograded / "02_packed_parameters.ipynb").read_text())
    shown = "".join("".join(o.get("text", "")) for o in nb["cells"][1]["outputs"])
    for name in ("gradebook.db", "grades.db", "home.txt", "source.ipynb", "pipe", "homedir/secret.txt"):
        assert f"{name} FileNotFoundError" in shown, shown
    source = (course / "source" / "pytrees" / "01_pytrees.ipynb").read_text()
    solution = re.search(r"### BEGIN SOLUTION\\n(.+?)\\n", source).group(1)
    outputs = {
        "autograded": texts(course / "autograded"),
        "feedback": texts(course / "feedback" / "links"),
        "log": links["log"],
    }
    for where, text in outputs.items():
        # (the autograded notebooks are the grading side's: their test cells hold the hidden regions)
        for secret in (SECRET, "SQLite format 3", solution, *(seeds(course) if where != "autograded" else ())):
            assert secret not in text, (where, secret)


def test_a_linked_notebook_is_not_graded_and_the_log_says_why(links):
    log, submitted = links["log"], links["course"] / "submitted" / "links" / "pytrees"
    assert re.search(
        rf"links's pytrees: {submitted / '01_pytrees.ipynb'} is a symbolic link "
        r"\(to '\.\./\.\./\.\./source/pytrees/01_pytrees\.ipynb'\): not graded; it is now \S+\.",
        log,
    ), log[-3000:]
    assert f"{submitted / 'pipe'} is a named pipe: not copied for grading" in log
    assert f"{submitted / 'grades.db'} is a hard link (one file of 2 names): not copied for grading" in log
    # nbgrader finds it missing: 0 for each of its exercises, not waiting for a manual grade
    got = grades(links["course"])["links"]
    assert got == {"squared_norm": 0.0, "nested_scale_grad": 0.0, "repair_update": 0.0, "grad_over_flat_params": 0.0}
    assert not (links["course"] / "autograded" / "links" / "pytrees" / "01_pytrees.ipynb").exists()


def test_feedback_holds_no_hidden_test_and_no_seed(links):
    course = links["course"]
    (html,) = (course / "feedback" / "links" / "pytrees").glob("*.html")
    text = html.read_text()
    assert "Graded grad_over_flat_params" in text  # the grader's own words stay
    assert "HIDDEN TESTS" not in text and "graded outside the student" not in text
    assert seeds(course) and not [s for s in seeds(course) if s in text]


def test_collect_takes_no_link_and_dates_by_the_exchange(released, tmp_path):
    instructor = tmp_path / "course"
    shutil.copytree(
        released, instructor, ignore=shutil.ignore_patterns("autograded", "submitted", "feedback", "refused")
    )
    exchange, student = tmp_path / "exchange", tmp_path / "student"
    exchange.mkdir(mode=0o777)
    exchange.chmod(0o777)
    student.mkdir()
    (tmp_path / "secret.txt").write_text(SECRET)
    root = f"--Exchange.root={exchange}"
    run(NBGRADER, "release_assignment", "pytrees", root, cwd=instructor)
    run(NBGRADER, "fetch_assignment", "pytrees", "--course", "pytree-lab", root, cwd=student)
    for who in ("honest", "backdater"):
        run(NBGRADER, "submit", "pytrees", "--course", "pytree-lab", f"--student={who}", root, cwd=student)
    inbound = exchange / "pytree-lab" / "inbound"
    before = datetime.datetime.now(datetime.UTC).replace(tzinfo=None) - datetime.timedelta(seconds=2)
    # the backdater, in its own inbound folder (mode 777): every time it can write says 2020
    (late,) = inbound.glob("backdater+*")
    (late / "notes.txt").write_text("mine")
    (late / "home.txt").symlink_to(tmp_path / "secret.txt")
    os.link(late / "notes.txt", late / "notes-again.txt")
    os.mkfifo(late / "pipe")
    (late / "timestamp.txt").write_text("2020-01-01 00:00:00.000000 UTC")
    old = datetime.datetime(2020, 1, 1, tzinfo=datetime.UTC).timestamp()
    for p in [*late.iterdir(), late]:
        os.utime(p, (old, old), follow_symlinks=False)
    late = late.rename(inbound / "backdater+pytrees+2020-01-01 00:00:00.000000 UTC+x")
    collected = run(NBGRADER, "collect", "pytrees", root, cwd=instructor)
    log = collected.stdout + collected.stderr

    from nbgrader.coursedir import CourseDirectory

    def submitted_at(who: str) -> datetime.datetime:
        return CourseDirectory().get_existing_timestamp(str(instructor / "submitted" / who / "pytrees"))

    assert submitted_at("backdater") >= before  # when its files reached the exchange, not 2020
    assert f"{late}: timestamp.txt says 2020-01-01 00:00:00, its files reached the exchange at " in log
    # the honest submission keeps nbgrader's own time, to within the submit's few seconds
    claimed = next(inbound.glob("honest+*")).joinpath("timestamp.txt").read_text()
    assert (
        datetime.timedelta(0)
        <= submitted_at("honest") - CourseDirectory().get_existing_timestamp(str(next(inbound.glob("honest+*"))))
        < datetime.timedelta(seconds=60)
    ), claimed
    got = sorted(p.name for p in (instructor / "submitted" / "backdater" / "pytrees").iterdir())
    assert "notes.txt" not in got and "home.txt" not in got and "pipe" not in got and "notes-again.txt" not in got
    assert SECRET not in texts(instructor / "submitted")
    for name, why in (("home.txt", "a symbolic link"), ("pipe", "a named pipe"), ("notes.txt", "a hard link")):
        assert f"{late / name} is {why}" in log and "not collected" in log


def test_a_kernel_that_prints_its_own_notebook_puts_no_seed_in_the_feedback(links):
    course = links["course"]
    (html,) = (course / "feedback" / "peek" / "pytrees").glob("*.html")
    assert "notebooks here: []" in html.read_text()  # the cell ran, and found none to read
    assert not [s for s in seeds(course) if s in html.read_text()]


def test_a_deleted_exercise_cell_with_its_check_cell_costs_that_exercise_only(links):
    """nbgrader's restore of a missing test cell raised KeyError when the answer cell before it was
    deleted too, and the whole submission was flagged with 0: now that exercise scores 0."""
    got = grades(links["course"])["deleted"]
    assert got == {"squared_norm": 0.0, "nested_scale_grad": 2.0, "repair_update": 2.0, "grad_over_flat_params": 4.0}
    assert "KeyError" not in links["log"] and "Removing failed assignment" not in links["log"]
    nb = json.loads((links["course"] / "autograded" / "deleted" / "pytrees" / "01_pytrees.ipynb").read_text())
    tests = [c for c in nb["cells"] if c["metadata"].get("nbgrader", {}).get("grade_id") == "squared_norm-tests"]
    said = "".join("".join(o.get("text", "")) for o in tests[0]["outputs"])
    assert "no exercise cell in the submission: 0." in said, said
