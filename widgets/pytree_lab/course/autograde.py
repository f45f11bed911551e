"""Summative grades computed where no student code reaches, for nbgrader's autograder.

nbgrader still runs each submitted notebook in a kernel (its outputs are what the formgrader
shows), but that kernel decides no grade. After it, `IsolatedGrades` (an autograde
preprocessor, set in the course's `nbgrader_config.py`) grades each exercise from the submitted
notebook's text alone: it takes the exercise cell's code, runs it in a fresh Python process of
its own with the lesson's values and with hidden cases drawn from the seed in the source
notebook's hidden-test region, reads back only plain numbers, and compares them in the grader's
own process with answers it computes itself (jax, before and apart from any student code). The
points are written into the test cell as its only output, so nothing the student's kernel
printed, displayed or hid counts; a case without a verdict (an error, a crash, a hang past the
budget) scores 0, and a test cell that could not be graded gets an error output (0 in nbgrader).

Both the submission's kernel (`SandboxedKernelManager`) and the answer runs run under
bubblewrap: they see the Python environment read-only and write only a scratch folder of their
own (for the kernel, a copy of its submission folder mounted where the submission is); the course
directory (source/, gradebook.db, other submissions) and the grader's home are not in their
file system. Answer runs also have no network. docs/grading.md says what is and is not isolated.
"""

from __future__ import annotations

import contextlib
import csv
import importlib
import json
import os
import pathlib
import re
import selectors
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from typing import Any

import numpy as np
from jupyter_client.manager import AsyncKernelManager
from nbformat.notebooknode import NotebookNode
from nbgrader.api import MissingEntry
from nbgrader.plugins import CsvExportPlugin
from nbgrader.preprocessors import Execute, NbGraderPreprocessor, OverwriteCells
from traitlets import Float

from .. import lesson
from ..exercises import tools
from ..formatting import clip
from .catalogue import EXERCISES
from .exercises import grad_over_flat_params as flat, reruns
from .exercises.common import _same_tree, lesson_point

__all__ = [
    "ExerciseScores",
    "IsolatedGrades",
    "ReleasedCells",
    "SandboxedExecute",
    "SandboxedKernelManager",
    "grade_exercise",
    "sandbox",
]

HIDDEN_RERUNS = 2  # hidden cases per value exercise, after the lesson's own values
_MARKER = re.compile(r"graded outside the student's kernel: exercise (\w+), seed (\d+)")
_HIDDEN = re.compile(r"^[ \t]*### BEGIN HIDDEN TESTS.*?^[ \t]*### END HIDDEN TESTS[^\n]*\n?", re.M | re.S)


class ReleasedCells(OverwriteCells):
    """nbgrader's OverwriteCells, without its "checksum has changed" warning for a test cell the
    student left as released: such a cell differs from the source only by the hidden-tests region
    generate_assignment removed, and takes the source's text back quietly. A cell the student
    changed is still reported (and restored) by nbgrader."""

    def preprocess_cell(self, cell: NotebookNode, resources: Any, index: int) -> tuple[NotebookNode, Any]:
        meta = cell.get("metadata", {}).get("nbgrader", {})
        if meta.get("locked") and meta.get("grade_id"):
            try:
                source = self.gradebook.find_source_cell(meta["grade_id"], self.notebook_id, self.assignment_id).source
            except MissingEntry:
                source = None
            if source is not None and _HIDDEN.sub("", source).strip() == _HIDDEN.sub("", cell.source).strip():
                cell.source = source
        return super().preprocess_cell(cell, resources, index)


# --------------------------------------------------------------------------- the sandbox


def _python_paths(env: dict | None = None) -> list[str]:
    """What a Python process of this environment reads: its prefixes and import path."""
    env = dict(os.environ) if env is None else env
    paths = [sys.prefix, sys.base_prefix, sys.exec_prefix, *sys.path]
    paths += [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    return [p for p in dict.fromkeys(paths) if p and os.path.isabs(p) and os.path.exists(p)]


def _holds(a: str, b: str) -> bool:
    """`a` is `b` or a folder above it."""
    return pathlib.Path(os.path.realpath(b)).is_relative_to(os.path.realpath(a))


def _first_link(path: str) -> str | None:
    """The first folder along `path` that is a symbolic link (mounted as that link), if any."""
    here = "/"
    for part in pathlib.PurePosixPath(path).parts[1:]:
        here = os.path.join(here, part)
        if os.path.islink(here):
            return here
    return None


# What one sandbox may hold (rlimits, set inside it just before the student's code runs): tasks
# (processes and threads: a fork bomb stops there; XLA starts a few threads per core) and the
# address space of each process (a 20 GB allocation raises MemoryError).
TASKS = 512
MEMORY = 8 << 30
NOBODY = 65534  # a grader running as root runs the student's code as this user


def _limits(scratch: str) -> list[str]:
    """The command that starts the student's code with the limits; as the grader's own user, or as
    nobody when the grader is root (root's processes are not held by a task limit)."""
    limits = ["prlimit", f"--nproc={TASKS}", f"--as={MEMORY}", "--core=0"]
    if os.getuid() != 0:
        return limits
    for folder, _dirs, names in os.walk(scratch):
        for name in [folder, *(os.path.join(folder, n) for n in names)]:
            os.lchown(name, NOBODY, NOBODY)
    drop = [f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", "--inh-caps=-all", "--bounding-set=-all"]
    return ["setpriv", *drop, *limits]


def sandbox(scratch: str, *, cwd: str | None = None, share: tuple = (), env: dict | None = None) -> list[str]:
    """bubblewrap's arguments, then the limits' command: the system and the Python environment
    read-only, `scratch` writable (mounted at `cwd` when given), `share` folders writable where
    they are; no network and nothing else of the host's file system. A path that holds the
    grader's folder is never mounted (a Python environment inside it is, alone)."""
    course = os.getcwd()
    args = ["bwrap", "--die-with-parent", "--unshare-ipc", "--unshare-pid", "--unshare-net", "--unshare-uts"]
    args += ["--unshare-user"] if os.getuid() else []  # root needs none, and setpriv's nobody is unmapped in one
    args += ["--ro-bind", "/usr", "/usr", "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp"]
    start = len(args)  # after /tmp's tmpfs: a Python environment under /tmp (a CI checkout) is reached too
    for name in ("bin", "sbin", "lib", "lib32", "lib64", "libx32"):
        target = f"/{name}"
        if os.path.islink(target):
            args += ["--symlink", os.readlink(target), target]
        elif os.path.isdir(target):
            args += ["--ro-bind", target, target]
    etc = [f"/etc/{name}" for name in ("ld.so.cache", "localtime", "alternatives")]
    args += [arg for path in etc for arg in ("--ro-bind-try", path, path)]  # each where it exists
    links: dict[str, str] = {}
    bound: list[str] = []
    folders: set[str] = set()
    for path in _python_paths(env):
        real = os.path.realpath(path)
        if _holds(real, course) or _holds(path, course):  # a venv inside the course folder is bound alone
            continue
        folders.update(str(p) for p in pathlib.PurePosixPath(real).parents if str(p) != "/")
        args += ["--ro-bind", real, real]
        bound.append(real)
        link = _first_link(os.path.abspath(path))
        if link:
            links[link] = os.path.realpath(link)
            folders.update(str(p) for p in pathlib.PurePosixPath(link).parents if str(p) != "/")
    for link, real in links.items():
        if not any(link.startswith(folder.rstrip("/") + "/") for folder in bound):  # else it is there, bound
            args += ["--symlink", real, link]
    # first, the folders above what is bound, readable by the sandbox's user (bwrap makes them 0700)
    args[start:start] = [arg for f in sorted(folders, key=len) for arg in ("--perms", "0755", "--dir", f)]
    args += [arg for folder in share for arg in ("--bind", folder, folder)]
    where = cwd or scratch
    above = [str(f) for f in reversed(pathlib.PurePosixPath(where).parents) if str(f) not in ("/", "/tmp")]
    args += [arg for folder in above for arg in ("--perms", "0755", "--dir", folder)]  # the way to it
    args += ["--bind", scratch, where, "--chdir", where, "--setenv", "HOME", where, "--setenv", "TMPDIR", "/tmp"]
    return [*args, "--remount-ro", "/", *_limits(scratch)]


class SandboxedKernelManager(AsyncKernelManager):
    """nbgrader's kernel, launched under bubblewrap: it reads the Python environment and a copy of
    its submission folder, mounted where the submission is; what it writes there is dropped with
    the copy. It has no network: nbgrader talks to it over Unix sockets in a folder of their own
    (ZeroMQ's ipc transport). (Set as `c.Execute.kernel_manager_class` in the course's config.)"""

    async def _async_pre_start_kernel(self, **kw: Any) -> tuple[list[str], dict[str, Any]]:
        self._sockets = tempfile.mkdtemp(prefix="pytree-lab-sockets-")
        self.transport, self.ip = "ipc", os.path.join(self._sockets, "kernel")
        self.connection_file = os.path.join(self._sockets, "connection.json")
        return await super()._async_pre_start_kernel(**kw)

    async def _async_launch_kernel(self, kernel_cmd: list[str], **kw: Any) -> None:
        cwd = os.path.abspath(kw.get("cwd") or os.getcwd())
        self._scratch = tempfile.mkdtemp(prefix="pytree-lab-kernel-")
        shutil.copytree(cwd, self._scratch, dirs_exist_ok=True)
        if os.getuid() == 0:  # the kernel runs as nobody: it makes its sockets here and reads its file
            os.chown(self._sockets, NOBODY, NOBODY)
            os.chmod(self.connection_file, 0o644)
        env = kw.get("env") or dict(os.environ)
        # its parent process is not in its process namespace: the kernel must not watch for it
        sandboxed = sandbox(self._scratch, cwd=cwd, share=(self._sockets,), env=env)
        cmd = [*sandboxed, "env", "-u", "JPY_PARENT_PID", *kernel_cmd]
        env = {**env, "HOME": cwd, "IPYTHONDIR": os.path.join(cwd, ".ipython"), "MPLCONFIGDIR": cwd}
        await super()._async_launch_kernel(cmd, **{**kw, "env": env})

    async def _async_cleanup_resources(self, restart: bool = False) -> None:
        await super()._async_cleanup_resources(restart=restart)
        for folder in (getattr(self, "_scratch", None), getattr(self, "_sockets", None)):
            if folder:
                shutil.rmtree(folder, ignore_errors=True)


class SandboxedExecute(Execute):
    """nbgrader's Execute step with the kernel under bubblewrap. The run only makes the outputs
    the formgrader shows (the points come from `IsolatedGrades`). A kernel that stays busy past
    two cells' time-outs in a row (interrupts it swallows), or dies, ends the run, and the notebook
    goes on to grading with the outputs it got, instead of failing the whole submission. It is
    not run again: what the submission did once it does again, and the points never depend on
    this run."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("kernel_manager_class", SandboxedKernelManager)
        super().__init__(*args, **kwargs)

    def preprocess_cell(self, cell: NotebookNode, resources: Any, index: int) -> tuple[NotebookNode, Any]:
        cell, resources = super().preprocess_cell(cell, resources, index)
        if cell.cell_type == "code":
            # a time-out whose interrupt raised nothing in the kernel (it swallowed the interrupt)
            names = {o.get("ename") for o in cell.get("outputs", [])}
            stuck = self.error_on_timeout["ename"] in names and "KeyboardInterrupt" not in names
            if stuck and getattr(self, "_timed_out", False):
                raise RuntimeError("the kernel stayed busy after two time-outs in a row")
            self._timed_out = stuck
        return cell, resources

    def preprocess(self, nb: NotebookNode, resources: Any = None, km: Any = None) -> tuple[NotebookNode, Any]:
        self._timed_out = False
        try:
            return super().preprocess(nb, resources, km)
        except Exception as exc:  # noqa: BLE001 - the kernel's run decides no grade
            self.log.error("the submission's kernel failed (%s); grading the notebook as far as it ran", exc)
            return nb, resources  # the cells run so far keep their outputs (nbclient runs `nb` in place)


# --------------------------------------------------------------------------- the answer runs

# Runs in the sandbox with `python -I`: only jax and numpy (the course package is hidden from it).
# Once they are imported it writes an empty line; then it execs the exercise cell (asserts left
# out: they check the lesson's own numbers) once per case and writes one JSON line per case to
# the descriptor it was given; the cell's own prints go to stderr, dropped.
_RUNNER = r"""
import ast, json, os, sys
job = json.loads(sys.stdin.read())
out = os.fdopen(os.dup(1), "w")
os.dup2(2, 1)
import numpy as np, jax, jax.numpy as jnp
out.write("{}\n")
out.flush()
class NoAsserts(ast.NodeTransformer):
    def visit_Assert(self, node):
        return ast.copy_location(ast.Pass(), node)
tree = ast.fix_missing_locations(NoAsserts().visit(ast.parse(job["code"])))
code = compile(tree, "<exercise cell>", "exec")
def plain(v, depth=0):
    if depth > 8 or isinstance(v, (str, bytes)) or v is None or callable(v):
        return None
    if isinstance(v, dict):
        return {str(k): plain(x, depth + 1) for k, x in v.items()}
    return np.asarray(v, dtype=np.float64).tolist()
inputs = job["inputs"]
x = jnp.asarray(inputs["x"], dtype=jnp.float32)
target = jnp.float32(inputs["target"])
def loss(p):
    prediction = jnp.dot(p["weight"], x) + p["bias"]
    return (prediction - target) ** 2
def tree(d):
    return {k: jnp.asarray(v, dtype=jnp.float32) for k, v in d.items()}
for case in job["cases"]:
    try:
        if job["function"]:
            ns = {"jax": jax, "jnp": jnp, "np": np, "__name__": "__main__"}
            exec(code, ns)
            args = [jnp.asarray(a, dtype=jnp.float32) for a in case]
            line = {"answers": {job["names"][0]: plain(ns[job["names"][0]](*args))}}
        else:
            ns = {"jax": jax, "jnp": jnp, "np": np, "__name__": "__main__", "x": x, "loss": loss}
            ns.update(params=tree(case["params"]), grads=tree(case["grads"]), value=jnp.float32(case["value"]))
            ns["broken"] = {"weight": ns["grads"]["weight"]}  # the lesson's tree without bias, as in its cell
            exec(code, ns)
            line = {"answers": {n: plain(ns[n]) for n in job["names"] if n in ns}}
    except BaseException as exc:
        line = {"error": type(exc).__name__}
    out.write(json.dumps(line) + "\n")
    out.flush()
"""

START_BUDGET = 120.0  # seconds for the answer run to start (python, jax)
CASE_BUDGET = 10.0  # seconds per further case


def _run_cases(job: dict, n_cases: int, *, start: float = START_BUDGET, per_case: float = CASE_BUDGET) -> list:
    """One fresh sandboxed process for the exercise's cases: a dict per case that answered,
    an error text per case that failed, None per case that never answered (time, crash)."""
    results: list = []
    with tempfile.TemporaryDirectory(prefix="pytree-lab-answer-") as scratch:
        hide = [p for p in _python_paths() if os.path.isdir(os.path.join(p, "pytree_lab"))]
        hidden = [arg for p in hide for arg in ("--tmpfs", os.path.realpath(os.path.join(p, "pytree_lab")))]
        bwrap = sandbox(scratch)
        at = bwrap.index("--remount-ro")
        cmd = [*bwrap[:at], *hidden, *bwrap[at:], sys.executable, "-I", "-c", _RUNNER]
        proc = subprocess.Popen(
            cmd,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
            env={"PATH": "/usr/bin:/bin", "JAX_PLATFORMS": "cpu", "LANG": "C.UTF-8"},
        )
        try:
            assert proc.stdin is not None and proc.stdout is not None
            proc.stdin.write(json.dumps(job).encode())
            proc.stdin.close()
            picker = selectors.DefaultSelector()
            picker.register(proc.stdout, selectors.EVENT_READ)
            buffer = b""
            deadline = time.monotonic() + start
            ready = False
            while len(results) < n_cases:
                left = deadline - time.monotonic()
                if left <= 0 or not picker.select(timeout=left):
                    break
                chunk = os.read(proc.stdout.fileno(), 1 << 16)
                if not chunk:
                    break
                buffer += chunk
                while b"\n" in buffer and len(results) < n_cases:
                    line, buffer = buffer.split(b"\n", 1)
                    deadline = time.monotonic() + per_case
                    if not ready:
                        ready = True
                        continue
                    try:
                        result = json.loads(line)
                    except ValueError:
                        result = {"error": "unreadable output"}
                    results.append(result if isinstance(result, dict) else {"error": "unreadable output"})
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            for pipe in (proc.stdin, proc.stdout):  # closed here, whatever ended the reading
                if pipe is not None:
                    pipe.close()
    return results + [None] * (n_cases - len(results))


# --------------------------------------------------------------------------- grading


def _tree(got: Any) -> Any:
    """The runner's plain numbers (a dict, or an array's nested lists) as a tree of arrays, for
    the practice check's own comparison."""
    if isinstance(got, dict):
        return {k: _tree(v) for k, v in got.items()}
    try:
        return None if got is None else np.asarray(got, dtype=float)
    except (TypeError, ValueError):
        return None


def _numbers(tree: Any) -> Any:
    """A tree of arrays as the runner's plain numbers (nested lists)."""
    return tools.jax.tree.map(lambda leaf: np.asarray(leaf, dtype=np.float64).tolist(), tree)


def _value_cases(exercise_id: str, rng) -> tuple[list[dict], list[dict]]:
    """The lesson's parameters, then hidden ones on the practice check's grid of halves (every
    gradient a whole number, so an answer rounded with int() is as right there): the runner's
    inputs, and each answer's right values (a list: the lesson allows more than one form)."""
    right_at = importlib.import_module(f"{__package__}.exercises.{exercise_id}").right_at
    points = [lesson_point(lesson.lesson_params())]
    for _ in range(HIDDEN_RERUNS):
        points.append(reruns.other_point(rng, right_at(points[0]), right_at))
    cases = [{k: _numbers(p[k]) for k in ("params", "grads")} | {"value": float(p["value"])} for p in points]
    return cases, [right_at(p) for p in points]


def _flat_cases(rng) -> tuple[list, list[dict]]:
    """The practice check's worked example, then its hidden (N, d) sizes with values drawn here:
    the runner's inputs and the right answers."""
    points = [flat._worked_case(), *(flat._hidden_case(rng, n, d) for n, d in flat._HIDDEN_SIZES)]
    cases = [[p.flat_params.tolist(), p.x.tolist()] for p in points]
    return cases, [{"grad_over_flat_params": [flat._FlatReferences(p).grad]} for p in points]


def grade_exercise(exercise_id: str, source: str | None, seed: int, **budgets: float) -> tuple[float, list[str]]:
    """The share (0..1) of cases the exercise cell's code gets right, and one line per case
    (sizes only, never a hidden case's values). `source` is the exercise cell as submitted."""
    if source is None:
        return 0.0, ["no exercise cell in the submission: 0."]
    lines = source.splitlines()
    code = "\n".join(lines[1:] if lines and lines[0].lstrip().startswith("%%exercise") else lines)
    try:
        compile(code, "<exercise cell>", "exec")
    except (SyntaxError, ValueError) as exc:
        return 0.0, [f"the exercise cell does not compile ({getattr(exc, 'msg', exc)}): 0."]
    rng = np.random.default_rng(seed)
    ex = EXERCISES[exercise_id]
    function = ex.answer_kind == "function"
    cases, expected = _flat_cases(rng) if function else _value_cases(exercise_id, rng)
    inputs = _numbers(lesson.lesson_inputs())
    job = {"code": code, "names": list(ex.answer_names), "function": function, "cases": cases, "inputs": inputs}
    results = _run_cases(job, len(cases), **budgets)
    scores, lines = [], []
    for index, (result, want) in enumerate(zip(results, expected)):
        size = f"N = {len(cases[index][1])}" if function else "other lesson parameters"
        label = (
            f"hidden case {index} ({size})" if index else "the worked example" if function else "the lesson's values"
        )
        if result is None or "error" in result:
            why = "no answer within the time budget (or the run crashed)"
            why = f"the code raised {clip(str(result['error']), 80)}" if result else why
            scores.append(0.0)
            lines.append(f"{label}: {why}: 0.")
            continue
        answers = result.get("answers") if isinstance(result.get("answers"), dict) else {}
        wrong = [
            name for name, forms in want.items() if not any(_same_tree(_tree(answers.get(name)), f) for f in forms)
        ]
        scores.append(1 - len(wrong) / len(want))
        lines.append(f"{label}: " + ("right." if not wrong else f"{', '.join(wrong)} not right."))
    return sum(scores) / len(scores), lines


class IsolatedGrades(NbGraderPreprocessor):
    """Writes each test cell's points from `grade_exercise`, replacing what the kernel printed:
    an execute_result with the points (nbgrader's partial credit), after one line per case."""

    start_budget = Float(START_BUDGET, help="seconds for an answer run to start and grade its first case").tag(
        config=True
    )
    case_budget = Float(CASE_BUDGET, help="seconds per further case of an answer run").tag(config=True)

    def preprocess(self, nb: NotebookNode, resources: dict) -> tuple[NotebookNode, dict]:
        answers = {}
        for cell in nb.cells:
            grade_id = cell.get("metadata", {}).get("nbgrader", {}).get("grade_id", "")
            if grade_id.endswith("-answer") and cell.cell_type == "code":
                answers[grade_id.removesuffix("-answer")] = cell.source
        for cell in nb.cells:
            meta = cell.get("metadata", {}).get("nbgrader", {})
            if not meta.get("grade") or meta.get("solution") or cell.cell_type != "code":
                continue
            match = _MARKER.search(cell.get("source", ""))
            try:  # a test that cannot reach its verdict fails: never the kernel's output, never "no output"
                if match is None or match.group(1) not in EXERCISES:
                    raise ValueError("this test cell holds no hidden test of the course (its hidden region is missing)")
                exercise_id, seed = match.group(1), int(match.group(2))
                points = float(meta.get("points", EXERCISES[exercise_id].points))
                fraction, lines = grade_exercise(
                    exercise_id, answers.get(exercise_id), seed, start=self.start_budget, per_case=self.case_budget
                )
            except Exception as exc:  # noqa: BLE001
                self.log.error("grading %s failed: %s", meta.get("grade_id"), exc)
                error = {"ename": "GradingError", "evalue": str(exc), "traceback": [f"GradingError: {exc}"]}
                cell.outputs = [NotebookNode(output_type="error", **error)]
                continue
            earned = round(points * min(max(fraction, 0.0), 1.0), 3)
            text = f"Graded {exercise_id}: {earned:g} of {points:g} points\n" + "".join(f"  - {x}\n" for x in lines)
            cell.outputs = [
                NotebookNode(output_type="stream", name="stdout", text=text),
                NotebookNode(
                    output_type="execute_result", execution_count=None, metadata={}, data={"text/plain": repr(earned)}
                ),
            ]
        return nb, resources


class ExerciseScores(CsvExportPlugin):
    """`nbgrader export --exporter=pytree_lab.course.autograde.ExerciseScores --to FILE`: one CSV
    row per student, assignment and graded exercise (student_id, assignment, exercise, score,
    max_score), for an LMS column per exercise; `nbgrader export` alone writes one row per
    assignment (grades.csv)."""

    def export(self, gradebook: Any) -> None:
        with open(self.to or "grades-by-exercise.csv", "w", newline="", encoding="utf-8") as f:
            out = csv.writer(f)
            out.writerow(["student_id", "assignment", "exercise", "score", "max_score"])
            for assignment in gradebook.assignments:
                for sub in gradebook.assignment_submissions(assignment.name):
                    if self.student and sub.student.id not in self.student:
                        continue
                    for notebook in sub.notebooks:
                        for grade in notebook.grades:
                            if grade.name.endswith("-tests"):
                                exercise = grade.name.removesuffix("-tests")
                                out.writerow([sub.student.id, assignment.name, exercise, grade.score, grade.max_score])
