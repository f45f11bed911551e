"""The course as an nbgrader assignment: `pytree-lab nbgrader OUTDIR` (see `write_course`).

It writes a complete nbgrader course directory:

    OUTDIR/nbgrader_config.py
    OUTDIR/source/pytrees/01_pytrees.ipynb
    OUTDIR/source/pytrees/02_packed_parameters.ipynb

made from the course notebooks. Each exercise cell (tagged `exercise:<id>`) becomes an
autograded answer cell: the lesson's starter code, then the catalogue's reference solution in a
`### BEGIN SOLUTION` region, which nbgrader's `generate_assignment` removes. Each check cell
becomes an autograder test cell with points: the practice check the students know, then a
`### BEGIN HIDDEN TESTS` region (removed from the released notebooks by nbgrader) that names the
exercise and a seed drawn here, when the course directory is made, for `autograde.IsolatedGrades`.
The seed exists only in the source notebooks, on the grading side.

The instructor notebook (03) is not part of the assignment.
"""

from __future__ import annotations

import copy
import json
import pathlib
import re
import secrets

from .catalogue import EXERCISES
from .exercises.common import reference_solution

__all__ = ["ASSIGNMENT", "NOTEBOOKS", "find_content", "make_source_notebook", "write_course"]

ASSIGNMENT = "pytrees"
NOTEBOOKS = ("01_pytrees.ipynb", "02_packed_parameters.ipynb")
NBGRADER_SCHEMA = 3
EXCHANGE = "/srv/nbgrader/exchange"  # nbgrader's own default, shared by the hub's users
_CHECK_CALL = re.compile(r"""check_cell\(\s*["']([A-Za-z0-9_]+)["']""")

HEADER = """\
**Graded assignment.** Work through this notebook as in the course: the cells marked
`%%exercise` are your answers. The **Check my answer** cells give you practice feedback while
you work; they do not count toward your grade. After you submit, the course's grader (nbgrader)
runs your notebook and grades each exercise on the lesson's values and on hidden cases that
exist only on the grading side. Keep each exercise's answer in its exercise cell, and keep the
names the exercise asks for."""

CONFIG = '''\
# nbgrader configuration of the pytree-lab course (written by `pytree-lab nbgrader`).
# The standard nbgrader flow, run in this directory (docs/grading.md):
#   nbgrader generate_assignment {assignment}     # release/{assignment}/: no solutions, no hidden tests
#   nbgrader release_assignment {assignment}      # into the exchange; students fetch, work, submit
#   nbgrader collect {assignment}                 # submitted/<student>/{assignment}/
#   nbgrader autograde {assignment}
#   nbgrader generate_feedback {assignment}; nbgrader release_feedback {assignment}
#   nbgrader export                       # grades.csv
from nbconvert.preprocessors import ClearMetadataPreprocessor
from nbgrader.preprocessors import AssignLatePenalties, CheckCellMetadata, IgnorePattern, LimitOutput, SaveAutoGrades

from nbgrader.preprocessors import ClearOutput, DeduplicateIds, OverwriteKernelspec

c = get_config()  # noqa: F821 - provided by nbgrader

c.CourseDirectory.course_id = "pytree-lab"
c.CourseDirectory.db_url = "sqlite:///gradebook.db"
# the exchange students fetch from and submit to (the nbgrader Lab extension's Assignments panel);
# on a JupyterHub, a folder every user can reach (docs/hosting.md)
c.Exchange.root = {exchange!r}

# The exercise cells keep the lesson's starter code (with its `...`) above the solution region,
# so the released cell is the lesson's cell: nothing replaces the removed solution.
c.ClearSolutions.code_stub = {{"python": ""}}
# a test cell a student deleted comes back from the source notebook; one left as released takes
# its hidden region back without a "checksum has changed" warning (ReleasedCells)
c.ReleasedCells.add_missing_cells = True
c.Autograde.sanitize_preprocessors = [
    ClearOutput,
    DeduplicateIds,
    OverwriteKernelspec,
    "pytree_lab.course.autograde.ReleasedCells",  # the course's steps by import path: only autograde imports jax
    CheckCellMetadata,
]

# Grades: the submission's kernel runs under bubblewrap (SandboxedExecute) and decides nothing;
# IsolatedGrades runs the notebook's code again in one fresh sandboxed process, with each
# exercise's cases (the lesson's values and hidden ones) at its cell, and writes the points into
# the test cells; MarkRegrades leaves a test the grading machine could not finish to a grader.
c.Autograde.autograde_preprocessors = [
    "pytree_lab.course.autograde.SandboxedExecute",
    IgnorePattern,
    ClearMetadataPreprocessor,
    LimitOutput,
    "pytree_lab.course.autograde.IsolatedGrades",
    SaveAutoGrades,
    "pytree_lab.course.autograde.MarkRegrades",
    AssignLatePenalties,
    CheckCellMetadata,
]
# Seconds per cell of the submission's kernel run (its outputs are what the formgrader shows; a
# kernel that hangs past two time-outs or dies is graded with the outputs it got). The answer run,
# which makes the points, has its own budgets (each cell and case: seconds of its own CPU time):
c.Execute.timeout = 60
c.Execute.interrupt_on_timeout = True
c.IsolatedGrades.cpu_budget = 300  # CPU seconds of one notebook's answer run
c.IsolatedGrades.wall_budget = 900  # seconds of the clock; past them: "not graded: regrade"

# What the grader takes from a submission (pytree_lab.intake; docs/grading.md): nbgrader's copies
# follow links, so collect and autograde refuse links, hard links and special files; collect dates
# a submission by when its files reached the exchange; the feedback holds no hidden test or seed.
c.ExchangeFactory.collect = "pytree_lab.intake.Collect"


def refuse_unsafe(**submission):  # autograde's step before its copy
    from pytree_lab.intake import refuse_unsafe

    refuse_unsafe(**submission)


c.Autograde.pre_convert_hook = refuse_unsafe
c.GenerateFeedback.preprocessors = [
    "nbgrader.preprocessors.GetGrades",
    "nbgrader.preprocessors.ClearHiddenTests",
    "nbconvert.preprocessors.CSSHTMLHeaderPreprocessor",
]

# Late submissions (docs/grading.md): a due date (`nbgrader db assignment add pytrees
# --duedate=...`), and a penalty (or c.AssignLatePenalties.plugin_class, your own rule)
# c.LateSubmissionPlugin.penalty_method = "zero"
'''


def find_content(content: str | pathlib.Path | None = None) -> pathlib.Path:
    """The folder holding the course notebooks: `content`, else the ones the package ships, else
    a checkout's content/."""
    here = pathlib.Path(__file__).resolve()
    defaults = [here.parent / "notebooks", here.parents[3] / "content", pathlib.Path.cwd() / "content"]
    candidates = [pathlib.Path(content)] if content is not None else defaults
    for folder in candidates:
        if all((folder / name).is_file() for name in NOTEBOOKS):
            return folder
    where = ", ".join(str(c) for c in candidates)
    raise FileNotFoundError(
        f"the course notebooks ({', '.join(NOTEBOOKS)}) are not in {where}; "
        "pass the folder that holds them with --content"
    )


def _source(cell) -> str:
    src = cell.get("source", "")
    return "".join(src) if isinstance(src, list) else src


def _exercise_id(cell) -> str | None:
    for tag in cell.get("metadata", {}).get("tags", []):
        if tag.startswith("exercise:") and tag.split(":", 1)[1] in EXERCISES:
            return tag.split(":", 1)[1]
    return None


def _meta(cell, **fields) -> None:
    cell.setdefault("metadata", {})["nbgrader"] = {"schema_version": NBGRADER_SCHEMA, **fields}


def make_source_notebook(notebook: dict, *, seeds: dict[str, int] | None = None) -> tuple[dict, list[str]]:
    """The nbgrader source version of one course notebook, and the exercise ids it grades."""
    nb = copy.deepcopy(notebook)
    seeds = dict(seeds or {})
    graded: list[str] = []
    for cell in nb["cells"]:
        if cell.get("cell_type") != "code":
            continue
        exercise_id = _exercise_id(cell)
        if exercise_id is not None:
            solutions = reference_solution(exercise_id)  # the instructor's, read now (--solutions)
            if not solutions:
                raise ValueError(f"exercise {exercise_id!r} has no reference solution to put in the source")
            cell["source"] = f"{_source(cell).rstrip()}\n### BEGIN SOLUTION\n{solutions[0].rstrip()}\n### END SOLUTION"
            _meta(cell, grade=False, solution=True, locked=False, grade_id=f"{exercise_id}-answer")
        elif (match := _CHECK_CALL.search(_source(cell))) and match.group(1) in EXERCISES:
            exercise_id = match.group(1)
            seed = seeds.setdefault(exercise_id, secrets.randbits(63))
            points = EXERCISES[exercise_id].points
            cell["source"] = (
                "from pytree_lab.course import check_cell  # the practice check: feedback only, it does not count\n"
                f"{_source(cell).rstrip()}\n### BEGIN HIDDEN TESTS\n"
                f"# graded outside the student's kernel: exercise {exercise_id}, seed {seed}\n"
                "# (pytree_lab.course.autograde.IsolatedGrades writes this cell's points; nothing here runs)\n"
                "### END HIDDEN TESTS"
            )
            _meta(cell, grade=True, solution=False, locked=True, points=points, grade_id=f"{exercise_id}-tests")
            graded.append(exercise_id)
        else:
            continue
        cell["outputs"], cell["execution_count"] = [], None
    header = {"cell_type": "markdown", "id": "graded-assignment", "metadata": {}, "source": HEADER}
    title = next((i for i, c in enumerate(nb["cells"]) if c.get("cell_type") == "markdown"), -1)
    nb["cells"].insert(title + 1, header)
    return nb, graded


def write_course(
    outdir: str | pathlib.Path,
    *,
    content: str | pathlib.Path | None = None,
    assignment: str = ASSIGNMENT,
    exchange: str | pathlib.Path = EXCHANGE,
) -> dict:
    """Write the nbgrader course directory into `outdir`; refuses to replace anything there.

    Returns {"config": path, "notebooks": [paths], "exercises": {notebook name: [ids]}}."""
    outdir = pathlib.Path(outdir)
    folder = find_content(content)
    config = outdir / "nbgrader_config.py"
    source = outdir / "source" / assignment
    existing = [p for p in (config, source) if p.exists()]
    if existing:
        raise FileExistsError(
            f"{', '.join(str(p) for p in existing)} already exist"
            f"{'s' if len(existing) == 1 else ''}; nothing was written. "
            "Choose a new OUTDIR (a course directory is written once, with its own hidden seeds)."
        )
    made = {name: make_source_notebook(json.loads((folder / name).read_text(encoding="utf-8"))) for name in NOTEBOOKS}
    source.mkdir(parents=True)
    for name, (nb, _) in made.items():
        (source / name).write_text(json.dumps(nb, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    config.write_text(CONFIG.format(assignment=assignment, exchange=str(exchange)), encoding="utf-8")
    graded = {name: ids for name, (_, ids) in made.items()}
    return {"config": config, "notebooks": [source / name for name in made], "exercises": graded}
