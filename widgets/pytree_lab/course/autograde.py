"""Summative grades computed where no student code reaches, for nbgrader's autograder.

nbgrader still runs each submitted notebook in a kernel (its outputs are what the formgrader
shows), but that kernel decides no grade. After it, `IsolatedGrades` (an autograde
preprocessor, set in the course's `nbgrader_config.py`) grades each exercise from the submitted
notebook's text alone: one fresh sandboxed Python (`answer_run`) runs the notebook's code cell
after cell, as the kernel did (imports, helpers, earlier answers, magics), and at each exercise
cell its declared cases (`Exercise.cases`: the lesson's values, then hidden ones drawn from the
seed in the source notebook's hidden-test region), and sends back plain numbers only. They are
compared in the grader's own process with the right values, which never enter the sandbox. The
points are written into the test cell as its only output, so nothing the student's kernel
printed, displayed or hid counts. A case the answer got wrong, crashed on or spent its CPU
budget on scores 0; one the grading machine left without a verdict (the clock ran out) is
marked "not graded: regrade" and left to a grader (`MarkRegrades`), never 0.

Both the submission's kernel (`SandboxedKernelManager`) and the answer runs run under
bubblewrap: they see the Python environment read-only and write only a scratch folder of their
own (for the kernel, a copy of its submission folder mounted where the submission is); the course
directory (source/, gradebook.db, other submissions) and the grader's home are not in their
file system. Answer runs also have no network. docs/grading.md says what is and is not isolated.
"""

from __future__ import annotations

import builtins
import contextlib
import csv
import dataclasses
import json
import logging
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
from nbgrader.api import Gradebook, MissingEntry
from nbgrader.plugins import CsvExportPlugin
from nbgrader.preprocessors import Execute, NbGraderPreprocessor, OverwriteCells
from traitlets import Float

from ..exercises import Case, Exercise
from .catalogue import EXERCISES
from .exercises.common import _same_tree

__all__ = [
    "ExerciseScores",
    "IsolatedGrades",
    "MarkRegrades",
    "ReleasedCells",
    "SandboxedExecute",
    "SandboxedKernelManager",
    "grade_notebook",
    "notebook_cells",
    "sandbox",
]

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

    def add_missing_grade_cells(self, nb: NotebookNode, resources: Any) -> tuple[NotebookNode, Any]:
        """nbgrader's, after putting back each answer cell the student deleted, empty (its
        exercise scores 0), after the nearest cell of the source still there: nbgrader puts a
        deleted test cell back after the cell before it, and raised KeyError when that was the
        deleted answer cell, failing the whole submission."""
        source = self.gradebook.find_notebook(self.notebook_id, self.assignment_id)
        order = [c.name for c in source.source_cells]
        solutions = {c.name for c in source.solution_cells}

        def where(name: str) -> int | None:
            found = (
                i for i, c in enumerate(nb.cells) if c.get("metadata", {}).get("nbgrader", {}).get("grade_id") == name
            )
            return next(found, None)

        for n, name in enumerate(order):
            if name in solutions and where(name) is None:
                before = next((i for i in map(where, reversed(order[:n])) if i is not None), -1)
                meta = {"grade": False, "solution": True, "locked": False, "grade_id": name, "schema_version": 3}
                cell = NotebookNode(cell_type="code", execution_count=None, outputs=[], source=_DELETED)
                cell.metadata = NotebookNode(nbgrader=NotebookNode(meta))
                nb.cells.insert(before + 1, cell)
        return super().add_missing_grade_cells(nb, resources)


_DELETED = "# this answer cell was missing from the submission"


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


def _limits(scratch: str, cpu: float | None = None) -> list[str]:
    """The command that starts the student's code with the limits (and `cpu` seconds of CPU time);
    as the grader's own user, or as nobody when the grader is root (root's processes are not held
    by a task limit)."""
    limits = ["prlimit", f"--nproc={TASKS}", f"--as={MEMORY}", "--core=0", *([f"--cpu={int(cpu)}"] if cpu else [])]
    if os.getuid() != 0:
        return limits
    for folder, _dirs, names in os.walk(scratch):
        for name in [folder, *(os.path.join(folder, n) for n in names)]:
            os.lchown(name, NOBODY, NOBODY)
    drop = [f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", "--inh-caps=-all", "--bounding-set=-all"]
    return ["setpriv", *drop, *limits]


# What the sandbox's environment holds of the grader's: nothing else (no token, no secret)
KEPT_ENV = ("PATH", "LANG", "LC_ALL", "PYTHONPATH", "JAX_PLATFORMS")


def sandbox(
    scratch: str, *, cwd: str | None = None, share: tuple = (), env: dict | None = None, cpu: float | None = None
) -> list[str]:
    """bubblewrap's arguments, then the limits' command: the system and the Python environment
    read-only, `scratch` writable (mounted at `cwd` when given, and HOME), `share` folders
    writable where they are; no network, nothing else of the host's file system, and of the
    environment only `KEPT_ENV`. A path that holds the grader's folder is never mounted (a Python
    environment inside it is, alone)."""
    course = os.getcwd()
    env = dict(os.environ) if env is None else env
    args = ["bwrap", "--die-with-parent", "--unshare-ipc", "--unshare-pid", "--unshare-net", "--unshare-uts"]
    args += ["--clearenv", *(a for k in KEPT_ENV if k in env for a in ("--setenv", k, env[k]))]
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
    return [*args, "--remount-ro", "/", *_limits(scratch, cpu)]


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
        # the submission's files without its notebooks: a regraded folder's notebook holds hidden tests
        shutil.copytree(cwd, self._scratch, dirs_exist_ok=True, ignore=shutil.ignore_patterns("*.ipynb"))
        if os.getuid() == 0:  # the kernel runs as nobody: it makes its sockets here and reads its file
            os.chown(self._sockets, NOBODY, NOBODY)
            os.chmod(self.connection_file, 0o644)
        # of the environment, KEPT_ENV only (not JPY_PARENT_PID: its parent is not in its namespace)
        sandboxed = sandbox(self._scratch, cwd=cwd, share=(self._sockets,), env=kw.get("env") or dict(os.environ))
        cmd = [*sandboxed, "env", f"IPYTHONDIR={os.path.join(cwd, '.ipython')}", f"MPLCONFIGDIR={cwd}", *kernel_cmd]
        await super()._async_launch_kernel(cmd, **kw)

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


# --------------------------------------------------------------------------- the answer run

CPU_BUDGET = 300  # CPU seconds of one notebook's answer run (answer_run bounds each cell and case)
WALL_BUDGET = 900.0  # seconds of the clock: past them, what is left is the machine's, to regrade
_ERRORS = {n for n, v in vars(builtins).items() if isinstance(v, type) and issubclass(v, BaseException)}


def _job_tree(tree: Any) -> Any:
    """A case's trees as JSON for the answer run: each leaf {"array": numbers, "dtype": name}."""
    if isinstance(tree, dict):
        return {str(k): _job_tree(v) for k, v in tree.items()}
    if isinstance(tree, (tuple, list)):
        return [_job_tree(v) for v in tree]
    arr = np.asarray(tree)
    return {"array": arr.tolist(), "dtype": str(arr.dtype)}


_LOG = logging.getLogger(__name__)
STALL = 60.0  # seconds of the clock with under 5 % of a core's CPU time used: the code waits (sleep, input)
RESTARTS = 3  # answer runs after the first, each without the cell where the one before ended


@dataclasses.dataclass
class _Run:
    """What one answer run said: {(exercise, case): result}, the cell it was in (its index, or
    None before the first) and how it ended: "done"; "ended" (the code's doing: a crash, its CPU
    budget, a wait); "late" (the clock ran out: the machine's); "broken" (it ended before any
    cell: the grader's own environment)."""

    results: dict = dataclasses.field(default_factory=dict)
    cell: int | None = None
    ending: str = "late"
    cpu: float = 0.0
    stderr: bytes = b""


def _run_notebook(job: dict, *, cpu: float = CPU_BUDGET, wall: float = WALL_BUDGET, stall: float = STALL) -> _Run:
    """One sandboxed `answer_run` process for a notebook, read until it ends, waits (`STALL`)
    or the clock runs out."""
    run = _Run()
    with tempfile.TemporaryDirectory(prefix="pytree-lab-answer-") as scratch, tempfile.TemporaryFile() as errors:
        bwrap = sandbox(scratch, cpu=cpu, env={**os.environ, "JAX_PLATFORMS": "cpu"})
        # the grader's own import path: the answer run imports the very course this grader has
        start = "import json, runpy, sys; "
        start += "sys.path[:] = json.loads(sys.argv[1]); runpy.run_module(sys.argv[2], None, '__main__')"
        cmd = [*bwrap, sys.executable, "-I", "-c", start, json.dumps(sys.path), f"{__package__}.answer_run"]
        proc = subprocess.Popen(
            cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=errors, start_new_session=True
        )
        try:
            assert proc.stdin is not None and proc.stdout is not None
            proc.stdin.write(json.dumps(job).encode())
            proc.stdin.close()
            picker = selectors.DefaultSelector()
            picker.register(proc.stdout, selectors.EVENT_READ)
            buffer, deadline = b"", time.monotonic() + wall
            moved, moved_cpu = time.monotonic(), 0.0  # when the run last answered, and its CPU time then
            while run.ending == "late" and (now := time.monotonic()) < deadline:
                if now - moved > stall and run.cpu - moved_cpu < 0.05 * (now - moved):
                    run.ending = "ended"  # the code waits: no answer, and almost no CPU time used
                    break
                if not picker.select(timeout=min(deadline - now, 1.0)):
                    continue
                chunk = os.read(proc.stdout.fileno(), 1 << 16)
                buffer += chunk
                *lines, buffer = buffer.split(b"\n")
                for line in lines:
                    if _read_line(line, job["cases"], run):
                        moved, moved_cpu = time.monotonic(), run.cpu
                if not chunk and run.ending == "late":
                    run.ending = "ended" if run.cell is not None else "broken"
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            for pipe in (proc.stdin, proc.stdout):  # closed here, whatever ended the reading
                if pipe is not None:
                    pipe.close()
            errors.seek(max(0, errors.seek(0, 2) - 2000))
            run.stderr = errors.read()
    return run


def _read_line(line: bytes, cases: dict, run: _Run) -> bool:
    """Reads one line of the answer run: a case's first result (numbers and a built-in
    exception's name only: nothing else a line holds is read), the cell it starts, its CPU time
    (a heartbeat), its end. True when the run moved on (anything but a heartbeat)."""
    try:
        got = json.loads(line)
    except ValueError:
        return False
    if not isinstance(got, dict):
        return False
    if isinstance(got.get("beat"), (int, float)):
        run.cpu = float(got["beat"])
        return False
    if got.get("done") is True:
        run.ending = "done"
    elif isinstance(got.get("cell"), int):
        run.cell = got["cell"]
    key = (got.get("exercise"), got.get("case"))
    if key[0] not in cases or not isinstance(key[1], int) or not 0 <= key[1] < len(cases[key[0]]) or key in run.results:
        return True
    answers = got.get("answers")
    if isinstance(answers, dict):
        run.results[key] = {"answers": answers}
    else:
        error = got.get("error") if got.get("error") in _ERRORS else ""
        run.results[key] = {"error": error, "timed_out": got.get("timed_out") is True}
    return True


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


@dataclasses.dataclass
class Verdict:
    """One exercise's grade: the share of its cases right (0..1), a line per case (the grader's
    words only, never a hidden case's values), and whether it must be graded again (the grading
    machine, not the answer, left cases without a verdict)."""

    share: float
    lines: list[str]
    regrade: bool = False


def _case_line(case: Case, result: dict | None, ending: str) -> tuple[float | None, str]:
    if result is None:
        if ending in ("late", "broken"):
            why = "the grading machine ran out of time" if ending == "late" else "the grader's own run failed"
            return None, f"{case.label}: not graded: regrade ({why})."
        return (
            0.0,
            f"{case.label}: the exercise's code never finished (it crashed, or ran or waited past its budget): 0.",
        )
    if "answers" not in result:
        why = "ran past its time budget" if result["timed_out"] else f"raised {result['error'] or 'an exception'}"
        return 0.0, f"{case.label}: the code {why}: 0."
    wrong = [
        n for n, forms in case.right.items() if not any(_same_tree(_tree(result["answers"].get(n)), f) for f in forms)
    ]
    return 1 - len(wrong) / len(case.right), f"{case.label}: " + (
        "right." if not wrong else f"{', '.join(wrong)} not right."
    )


def _cases(ex: Exercise, seed: int):
    if ex.cases is None:
        raise ValueError(f"exercise {ex.id!r} declares no cases (Exercise.cases) to grade it on")
    return ex.cases(np.random.default_rng(seed))


def grade_notebook(
    cells: list[dict],
    seeds: dict[str, int],
    *,
    per_cell: float = 60.0,
    per_case: float = 10.0,
    log: logging.Logger = _LOG,
    **budgets: float,
) -> dict[str, Verdict]:
    """Each exercise of `seeds` graded on its declared cases (`Exercise.cases`, drawn from its
    seed) in one sandboxed run of the submitted notebook's code: `cells` are its code cells in
    order ({"code": ..., "exercise": the id of an exercise cell, else None}), test cells left out;
    they run up to the last exercise graded. `per_cell` / `per_case`: seconds of the code's own
    CPU time per cell and per case; `budgets`: the whole run's `cpu`, `wall` and `stall` seconds. A cell
    where the code ended the run (a crash, its CPU budget, a wait) is left out of the next run."""
    declared = {i: list(_cases(EXERCISES[i], seed)) for i, seed in seeds.items()}
    wire = {i: [{"names": _job_tree(c.names), "args": _job_tree(c.args)} for c in cs] for i, cs in declared.items()}
    last = max((n for n, cell in enumerate(cells) if cell.get("exercise") in seeds), default=-1)
    job: dict[str, Any] = {"cells": list(cells[: last + 1]), "cases": wire, "budgets": (per_cell, per_case)}
    results: dict = {}
    ended: dict[str, str] = {}  # exercise -> how its cell's run ended, where the code ended it
    ending = "broken"
    for _ in range(1 + RESTARTS):
        run = _run_notebook(job, **budgets)
        results.update(run.results)
        ending = run.ending
        if ending in ("done", "late", "broken") or run.cell is None:
            if ending == "broken":
                log.error("the answer run failed before the notebook's first cell: %s", run.stderr[-2000:])
            break
        # the code ended the run in one cell: the next run goes on without that cell
        exercise = job["cells"][run.cell].get("exercise")
        job["cells"][run.cell] = {"code": "", "exercise": None}
        if exercise in job["cases"]:
            ended[exercise] = run.ending
            job["cases"] = {k: v for k, v in job["cases"].items() if k != exercise}
    else:
        ending = "ended"
    present = {cell.get("exercise") for cell in cells}
    verdicts = {}
    for exercise_id, cases in declared.items():
        if exercise_id not in present:
            verdicts[exercise_id] = Verdict(0.0, ["no exercise cell in the submission: 0."])
            continue
        how = ended.get(exercise_id, ending if exercise_id in job["cases"] else "ended")
        graded = [_case_line(case, results.get((exercise_id, i)), how) for i, case in enumerate(cases)]
        shares = [share for share, _ in graded]
        regrade = None in shares
        share = 0.0 if regrade else sum(shares) / len(shares)  # type: ignore[arg-type]
        verdicts[exercise_id] = Verdict(share, [line for _, line in graded], regrade)
    return verdicts


def notebook_cells(nb: NotebookNode) -> tuple[list[dict], dict[str, tuple[str, int, Any]]]:
    """A submitted notebook's code cells for `grade_notebook` (its test cells left out), and each
    test cell's exercise: {exercise: (seed, the test cell)}."""
    cells, tests = [], {}
    for cell in nb.cells:
        grade_id = cell.get("metadata", {}).get("nbgrader", {}).get("grade_id", "")
        if cell.cell_type != "code":
            continue
        if grade_id.endswith("-tests"):
            match = _MARKER.search(cell.get("source", ""))
            tests[grade_id] = (match.group(1) if match else "", int(match.group(2)) if match else 0, cell)
        else:
            exercise_id = grade_id.removesuffix("-answer") if grade_id.endswith("-answer") else None
            if cell.source != _DELETED:  # an answer cell put back empty: no exercise cell in the submission
                cells.append({"code": cell.source, "exercise": exercise_id})
    return cells, tests


class IsolatedGrades(NbGraderPreprocessor):
    """Writes each test cell's points from `grade_notebook`, replacing what the kernel printed:
    an execute_result with the points (nbgrader's partial credit), after one line per case. A test
    cell left without a verdict by the grading machine gets a `NotGraded` error (`MarkRegrades`
    then leaves it to be graded again)."""

    cpu_budget = Float(CPU_BUDGET, help="CPU seconds of one notebook's answer run").tag(config=True)
    wall_budget = Float(WALL_BUDGET, help="seconds of the clock for one notebook's answer run").tag(config=True)

    def preprocess(self, nb: NotebookNode, resources: dict) -> tuple[NotebookNode, dict]:
        cells, tests = notebook_cells(nb)
        seeds = {i: seed for i, seed, _ in tests.values() if i in EXERCISES}
        try:
            verdicts = grade_notebook(cells, seeds, cpu=self.cpu_budget, wall=self.wall_budget, log=self.log)
        except Exception as exc:  # noqa: BLE001 - the grader failed: every test cell fails with it
            self.log.error("grading failed: %s", exc)
            verdicts = {}
        for grade_id, (exercise_id, _, cell) in tests.items():
            verdict = verdicts.get(exercise_id)
            if verdict is None:  # the course's own fault, seen in the log: the test fails, never passes
                why = "the grader failed" if exercise_id in EXERCISES else "its hidden test region is missing"
                self.log.error("grading %s failed: %s", grade_id, why)
                error = {"ename": "GradingError", "evalue": why, "traceback": [f"GradingError: {why}"]}
                cell.outputs = [NotebookNode(output_type="error", **error)]
                continue
            if verdict.regrade:
                text = "not graded: regrade (the grading machine ran out of time)"
                self.log.error("%s: %s", grade_id, text)
                cell.outputs = [NotebookNode(output_type="error", ename="NotGraded", evalue=text, traceback=[text])]
                continue
            points = float(cell.metadata["nbgrader"].get("points", EXERCISES[exercise_id].points))
            earned = round(points * min(max(verdict.share, 0.0), 1.0), 3)
            text = f"Graded {exercise_id}: {earned:g} of {points:g} points\n" + "".join(
                f"  - {x}\n" for x in verdict.lines
            )
            cell.outputs = [
                NotebookNode(output_type="stream", name="stdout", text=text),
                NotebookNode(
                    output_type="execute_result", execution_count=None, metadata={}, data={"text/plain": repr(earned)}
                ),
            ]
        return nb, resources


class MarkRegrades(NbGraderPreprocessor):
    """After nbgrader's SaveAutoGrades: a test cell `IsolatedGrades` left `NotGraded` has no
    automatic score in the gradebook and needs a grader (the formgrader lists it), never a 0."""

    def preprocess(self, nb: NotebookNode, resources: dict) -> tuple[NotebookNode, dict]:
        info = resources["nbgrader"]
        with Gradebook(info["db_url"]) as gb:
            for cell in nb.cells:
                if any(o.get("ename") == "NotGraded" for o in cell.get("outputs", [])):
                    ids = (cell.metadata["nbgrader"]["grade_id"], info["notebook"], info["assignment"], info["student"])
                    grade = gb.find_grade(*ids)
                    grade.auto_score, grade.needs_manual_grade = None, True
                    gb.db.commit()
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
