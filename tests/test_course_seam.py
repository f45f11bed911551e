"""The seam between the exercise toolkit (`pytree_lab.exercises`) and the course (issue 31): the
course imports only the toolkit's `__all__` and nothing private crosses between them; importing
the course registers nothing in IPython; a click crosses from the toolkit into the course once;
each reference solution is a file the tests run; docs/course.md's "add an exercise" builds."""

from __future__ import annotations

import ast
import functools
import importlib.util
import itertools
import json
import os
import pathlib
import re
import shutil
import subprocess
import sys

import jax
import jax.numpy as jnp
import pytest

from pytree_lab import course, exercises
from pytree_lab.course import EXERCISES
from pytree_lab.exercises import CheckButton, CheckContext, Evidence, cells, check

ROOT = pathlib.Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "widgets" / "pytree_lab"
SOLUTIONS = ROOT / "course_source" / "solutions"


def _imports(package: str):
    """(module file, imported module as an absolute name, names) for every `from ... import`."""
    for path in sorted((PACKAGE / package).rglob("*.py")):
        parts = ["pytree_lab", *path.relative_to(PACKAGE).with_suffix("").parts]
        if parts[-1] == "__init__":
            parts.pop()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom):
                base = parts[: len(parts) - node.level + (path.name == "__init__.py")] if node.level else []
                target = ".".join([*base, *(node.module.split(".") if node.module else [])])
                yield path.relative_to(PACKAGE).as_posix(), target, [a.name for a in node.names]
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    yield path.relative_to(PACKAGE).as_posix(), alias.name, []


def test_the_course_imports_only_the_toolkits_public_names():
    crossing = []
    for where, target, names in _imports("course"):
        if target == "pytree_lab.exercises":
            crossing += [(where, n) for n in names if n not in exercises.__all__]
        elif target.startswith("pytree_lab.exercises."):
            crossing.append((where, target))
    assert crossing == []


def test_no_private_name_crosses_between_the_toolkit_and_the_course():
    crossing = []
    for package, other in (("course", "pytree_lab.exercises"), ("exercises", "pytree_lab.course")):
        for where, target, names in _imports(package):
            if target == other or target.startswith(other + "."):
                private = [p for p in target.split(".") if p.startswith("_")] + [n for n in names if n.startswith("_")]
                if private or package == "exercises":  # the toolkit imports nothing of the course
                    crossing.append((where, target, private))
    assert crossing == []


PACKAGES = ("exercises", "course", "explorer")  # and the core: every other module (the Lite engine: its own)


def _package_of(parts: list[str]) -> str:
    return parts[0] if parts and parts[0] in PACKAGES else "core"


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def test_no_private_name_is_imported_across_the_package_boundaries():
    """A name another package needs is public in its owner module (issue 31 §1): no `_module` and
    no `_name` is imported from one of exercises, course, explorer and the core into another."""
    crossing = []
    for where, target, names in _imports("."):
        if not target.startswith("pytree_lab"):
            continue
        parts = target.split(".")[1:]
        if _package_of(where.split("/")) == _package_of(parts):
            continue
        private = [p for p in parts if _private(p)] + [n for n in names if _private(n)]
        if private:
            crossing.append((where, target, private))
    assert crossing == []


def test_importing_the_course_leaves_ipython_unchanged_and_setup_registers_once():
    script = """
from IPython.core.interactiveshell import InteractiveShell
shell = InteractiveShell.instance()
def state():
    return (sorted(shell.magics_manager.magics["cell"]), len(shell.events.callbacks["post_run_cell"]))
before = state()
import pytree_lab.course
print("IMPORT", state() == before)
pytree_lab.course.setup()
after = state()
print("SETUP", "exercise" in after[0] and "exercise" not in before[0], after[1] == before[1] + 1)
shell.run_line_magic("load_ext", "pytree_lab.course")
pytree_lab.course.setup()
print("AGAIN", state() == after)
"""
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.split() == ["IMPORT", "True", "SETUP", "True", "True", "AGAIN", "True"]


IMPORTED = pathlib.Path(exercises.__file__).resolve().parents[1]  # this checkout's, or an installed copy


def _side(frame) -> str | None:
    return _side_of_file(frame.f_code.co_filename)


@functools.cache  # a click makes millions of calls (JAX's own): each file is placed once
def _side_of_file(filename: str) -> str | None:
    """The side of a file: "course" (pytree_lab/course/), "toolkit" (the rest of pytree_lab: the guard, the exercise
    tools, the tree model) or None (the student's code, JAX, the standard library)."""
    path = pathlib.Path(filename).resolve()
    if path.is_relative_to(IMPORTED / "course"):
        return "course"
    return "toolkit" if path.is_relative_to(IMPORTED) else None


def _click_steps(exercise_id: str) -> dict[tuple[str, ...], int]:
    """One click on the exercise's card after its reference solution ran as the exercise cell (so
    the check runs the cell again at every case): at every call into the toolkit or the course, the
    sides of the stack in order, and how many toolkit -> course steps they hold."""
    ns: dict = {}
    exec(LESSON_NAMESPACE, ns)  # noqa: S102 - the lesson's own names, then the solution's cell
    cells.run_exercise_cell(exercise_id, (SOLUTIONS / f"{exercise_id}.py").read_text(encoding="utf-8"), ns)
    names = EXERCISES[exercise_id].answer_names
    read = (lambda: ns[names[0]]) if len(names) == 1 else (lambda: {n: ns[n] for n in names})
    button = course.check_button(exercise_id, read, evidence=Evidence())
    seen: set[tuple[str, ...]] = set()  # the sides of the stack, in order, at each call

    def profile(frame, event, arg):
        if event != "call" or _side(frame) is None:
            return
        sides, f = [], frame
        while f is not None:
            side = _side(f)
            if side and (not sides or sides[-1] != side):
                sides.append(side)
            f = f.f_back
        seen.add(tuple(reversed(sides)))

    sys.setprofile(profile)
    try:
        button._on_front_end_msg(button, {"type": "check"}, [])  # what a click sends
    finally:
        sys.setprofile(None)
        cells.forget()
    assert button.status == "passed", button.feedback
    return {sides: sum(1 for step in itertools.pairwise(sides) if step == ("toolkit", "course")) for sides in seen}


@pytest.mark.parametrize("exercise_id", sorted(EXERCISES))
def test_a_check_click_crosses_from_the_toolkit_into_the_course_once(exercise_id):
    """Measured for every exercise, its cell run again at the hidden cases: at every call during
    one click, the toolkit -> course steps on the stack."""
    steps = _click_steps(exercise_id)
    assert ("toolkit", "course", "toolkit") in steps  # the widget's check, the grader, its helpers
    assert max(steps.values()) == 1, [sides for sides, n in steps.items() if n > 1]


def _private_reads(source: str) -> list[str]:
    """Each private attribute read (`owner._name`) on anything but self, cls or super()."""
    reads = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Attribute) and _private(node.attr):
            owner = node.value
            mine = isinstance(owner, ast.Name) and owner.id in ("self", "cls")
            if not mine and getattr(getattr(owner, "func", None), "id", None) != "super":
                reads.append(ast.unparse(node))
    return reads


def test_the_course_reads_no_private_attribute_of_what_the_toolkit_gives_it():
    """Not only imports: `button._answer()` on the toolkit's widget crosses the seam too."""
    planted = "answer = button._answer()\nself._tried += 1\nsuper()._launch()\nx.__class__"
    assert _private_reads(planted) == ["button._answer"]  # the rule catches what it is for
    found = {
        p.relative_to(PACKAGE).as_posix(): _private_reads(p.read_text(encoding="utf-8"))
        for p in (PACKAGE / "course").rglob("*.py")
    }
    assert {where: reads for where, reads in found.items() if reads} == {}


# --------------------------------------------------------------------------- reference solutions

LESSON_NAMESPACE = """
import jax, jax.numpy as jnp
params = {"weight": jnp.array([1.0, -1.0]), "bias": jnp.array(0.0)}
x = jnp.array([2.0, 1.0])
def loss(p):
    return (jnp.dot(p["weight"], x) + p["bias"] - 3.0) ** 2
value, grads = jax.value_and_grad(loss)(params)
"""


@pytest.mark.parametrize("exercise_id", sorted(EXERCISES))
def test_each_reference_solution_is_a_file_that_runs_and_passes(exercise_id, capsys):
    path = SOLUTIONS / f"{exercise_id}.py"
    ex = EXERCISES[exercise_id]
    assert ex.solutions == (path.read_text(encoding="utf-8").rstrip("\n"),)  # what the reveal shows
    ns: dict = {}
    exec(LESSON_NAMESPACE, ns)  # noqa: S102 - the lesson's own names, then the solution's cell
    cells.run_exercise_cell(exercise_id, path.read_text(encoding="utf-8"), ns)
    assert cells.last_run(exercise_id).error_text == ""
    names = [n.strip() for n in ex.answer_name.split(",")]
    answer = ns[names[0]] if len(names) == 1 else {n: ns[n] for n in names}
    context = CheckContext(cell=cells.last_run(exercise_id), evidence=Evidence())
    result = check(ex, answer, context)
    assert result.passed and result.score == 1.0, result.feedback
    if exercise_id == "grad_over_flat_params":
        assert "[ 8. 12.  4.]" in capsys.readouterr().out  # the worked example it prints


def test_no_solution_ships_in_the_package():
    wheel = (ROOT / "pyproject.toml").read_text()
    assert 'packages = ["widgets/pytree_lab"]' in wheel and not list(PACKAGE.rglob("solutions*"))
    for path in PACKAGE.rglob("*.py"):
        text = path.read_text(encoding="utf-8")
        for solution in SOLUTIONS.glob("*.py"):
            first = next(line for line in solution.read_text().splitlines() if "=" in line or "def " in line)
            assert first not in text, (path, solution.name)


def test_a_graded_exercise_without_a_solution_file_says_so(monkeypatch):
    import dataclasses

    ex = dataclasses.replace(EXERCISES["repair_update"], solutions=())
    card = CheckButton(ex, lambda: {"weight": jnp.array([1.0, 1.0]), "bias": jnp.array(0.0)}, evidence=Evidence())
    card.check()
    assert card.reveal_solution() is None and card.solution == "" and not card.solution_available
    assert card.announcement == "This exercise is graded: no reference solution is shown."


def test_the_solutions_folder_is_where_pytree_lab_solutions_says(monkeypatch, tmp_path):
    from pytree_lab.course.exercises.common import reference_solution

    (tmp_path / "squared_norm.py").write_text("norm_squared = 96.0\n", encoding="utf-8")
    monkeypatch.setenv("PYTREE_LAB_SOLUTIONS", str(tmp_path))
    assert reference_solution("squared_norm") == ("norm_squared = 96.0",)
    assert reference_solution("repair_update") == ()  # no file there: no solution


# --------------------------------------------------------------------------- docs/course.md


def test_the_add_an_exercise_example_builds_and_is_checked_as_a_click_does():
    page = (ROOT / "docs" / "course.md").read_text(encoding="utf-8")
    section = page.split("## Add an exercise", 1)[1]
    module_code, line, cell, check_cell_code = re.findall(r"```python\n(.*?)```", section, re.S)
    assert line.strip() == "bias_grad," and "check_cell(\"bias_grad\")" in check_cell_code
    spec = importlib.util.spec_from_loader("pytree_lab.course.exercises.bias_grad", loader=None)
    module = importlib.util.module_from_spec(spec)
    module.__package__ = "pytree_lab.course.exercises"
    exec(compile(module_code, "docs/course.md", "exec"), module.__dict__)  # noqa: S102 - our own docs
    ex = module.EXERCISE
    assert ex.id == "bias_grad" and ex.solutions == ()  # no course_source/solutions/bias_grad.py
    ns = {"jax": jax, "jnp": jnp, "grads": {"weight": jnp.array([-8.0, -4.0]), "bias": jnp.array(-4.0)}}
    for code, verdict in (("bias_grad = grads['bias']", True), ("bias_grad = -grads['bias']", False)):
        magic, body = cell.split("\n", 1)
        assert magic == "%%exercise bias_grad"
        cells.run_exercise_cell("bias_grad", re.sub(r"bias_grad = \.\.\..*", code, body), ns)
        card = CheckButton(ex, lambda: ns["bias_grad"], evidence=Evidence())
        card._on_front_end_msg(card, {"type": "check"}, [])
        assert card.result.passed is verdict, card.feedback
    assert "You gave 4. The sign is flipped" in card.feedback
    assert card.evidence.checks[-1]["exercise_id"] == "bias_grad"


_GRADE_IT = r"""
import json, sys
from pytree_lab.course import autograde
cells = json.load(sys.stdin)
print("VERDICT " + json.dumps(autograde.grade_notebook(cells, {"bias_grad": 11})["bias_grad"].__dict__))
"""


@pytest.mark.notebook  # nbgrader's grader: a sandboxed answer run
def test_the_add_an_exercise_example_is_graded_as_nbgrader_grades_it(tmp_path):
    """docs/course.md's exercise added to a copy of the package as the page says (its module and
    the catalogue's lines, no edit to autograde.py): a right and a wrong submission graded."""
    page = (ROOT / "docs" / "course.md").read_text(encoding="utf-8")
    module_code, line, cell, _ = re.findall(r"```python\n(.*?)```", page.split("## Add an exercise", 1)[1], re.S)
    package = tmp_path / "site" / "pytree_lab"  # outside the grader's folder (which no sandbox holds)
    shutil.copytree(PACKAGE, package, ignore=shutil.ignore_patterns("__pycache__"))
    (package / "course" / "exercises" / "bias_grad.py").write_text(module_code, encoding="utf-8")
    catalogue = package / "course" / "catalogue.py"
    text = catalogue.read_text(encoding="utf-8").replace(
        "repair_update, squared_norm\n", "repair_update, squared_norm, bias_grad\n"
    )
    catalogue.write_text(
        text.replace("    grad_over_flat_params,\n)", f"    grad_over_flat_params,\n{line.rstrip()}\n)")
    )
    notebook = json.loads((ROOT / "content" / "01_pytrees.ipynb").read_text(encoding="utf-8"))
    lesson = [
        {"code": "".join(c["source"]), "exercise": None}
        for c in notebook["cells"]
        if c["cell_type"] == "code"
        and "check_cell(" not in "".join(c["source"])
        and "%%exercise" not in "".join(c["source"])
    ]
    env = {**os.environ, "PYTHONPATH": str(package.parent), "JAX_PLATFORMS": "cpu"}
    (tmp_path / "course").mkdir()
    shares = {}
    for code in (
        "bias_grad = grads['bias']",
        "bias_grad = -4.0",
        "bias_grad = -grads['bias']",
    ):
        answer = {"code": re.sub(r"bias_grad = \.\.\..*", code, cell), "exercise": "bias_grad"}
        done = subprocess.run(
            [sys.executable, "-c", _GRADE_IT],
            input=json.dumps([*lesson, answer]),
            capture_output=True,
            text=True,
            env=env,
            cwd=tmp_path / "course",
            timeout=600,
        )
        verdict = json.loads(
            next(x for x in done.stdout.splitlines() if x.startswith("VERDICT ")).removeprefix("VERDICT ")
        )
        shares[code] = verdict["share"]
        assert verdict["regrade"] is False and len(verdict["lines"]) == 3, (verdict, done.stderr[-2000:])
    # computed: every case; typed in: the lesson's values only; the sign flipped: none
    assert shares == {
        "bias_grad = grads['bias']": 1.0,
        "bias_grad = -4.0": pytest.approx(1 / 3),
        "bias_grad = -grads['bias']": 0.0,
    }
