"""Exercise cells in a notebook: run the student's code guarded, and remember how it went.

`%%exercise <id>` (registered by `register_magic`) runs the cell's code in the notebook's
namespace through `run_guarded`: an exception, `sys.exit()`, an endless loop or a flood of
output ends in one sentence under the cell, the kernel stays up and Run All goes on. The run is
remembered per exercise, so a check after a failed run says "your last run raised …" instead of
grading the value an earlier run left behind.

Cells without the magic are followed too: a post-run hook notes when a cell that assigns an
exercise's answer name raised (IPython's `ExecutionResult.error_in_exec`).
"""

from __future__ import annotations

import ast
import dataclasses
import hashlib
import linecache
from collections.abc import Callable

from ..guard import ipython_shell
from ._guard import DEFAULT_BUDGET, describe_failure, exception_text, notes_for, run_guarded

__all__ = ["CellRun", "last_run", "run_exercise_cell", "register_magic", "forget"]


@dataclasses.dataclass
class CellRun:
    code: str
    error_text: str = ""  # "" when the run finished
    # the namespace the cell ran in (the notebook's), to run the code again on other inputs
    namespace: dict | None = dataclasses.field(default=None, repr=False, compare=False)
    # the names the cell reads and never assigns, as they were when it ran: a later cell may
    # rebind one (the lesson's `for lr in (0.05, 0.01)`), and a rerun must read what this run read
    inputs: dict = dataclasses.field(default_factory=dict, repr=False, compare=False)

    def names(self) -> dict:
        """The notebook's names as this run saw them."""
        return {**(self.namespace or {}), **self.inputs}


CELL_BUDGET = DEFAULT_BUDGET  # seconds an exercise cell may run (read at each run)
_RUNS: dict[str, CellRun] = {}
_NAMES: dict[str, tuple[str, ...]] = {}  # exercise id -> answer names, for the post-run hook


def last_run(exercise_id: str) -> CellRun | None:
    return _RUNS.get(exercise_id)


def forget() -> None:
    """Forget every exercise cell's run."""
    _RUNS.clear()


def run_exercise_cell(
    exercise_id: str,
    code: str,
    namespace: dict,
    *,
    budget: float | None = None,
    explain: Callable[[BaseException, str], str] | None = None,
) -> CellRun:
    """Run `code` in `namespace` as the exercise's cell; print its output and what went wrong
    (and `explain(error, code)`, what the error means, when it says something)."""
    budget = CELL_BUDGET if budget is None else budget
    python = ipython_python(code)  # %exit, !ls, %time as IPython runs them
    filename = _source_name(exercise_id, python)
    try:
        compiled = compile(python, filename, "exec")
    except SyntaxError as exc:
        record = CellRun(code, f"SyntaxError: {exc.msg} (line {exc.lineno})", namespace=namespace)
        _RUNS[exercise_id] = record
        print(f"Your cell has a syntax error: {exc.msg} (line {exc.lineno}). Nothing ran; fix it and run again.")
        return record
    run = run_guarded(exec, compiled, namespace, budget=budget)
    why = describe_failure(run, what="Your cell", budget=budget)
    error_text = exception_text(run.error) if run.error is not None else ""
    if run.timed_out:
        error_text = f"a time-out (still running after {budget:g} s)"
    record = _RUNS[exercise_id] = CellRun(code, error_text, namespace=namespace, inputs=_inputs(python, namespace))
    if run.output:
        print(run.output, end="" if run.output.endswith("\n") else "\n")
    for note in notes_for(run):
        print(note)
    if why:
        why = why.rstrip()
        end = "" if why.endswith((".", "!", "?", "…")) else "."
        print(f"{why}{end} The kernel is fine: fix the cell and run it again.")
        hint = explain(run.error, code) if explain is not None and run.error is not None else ""
        if hint:
            print(hint)
    return record


def ipython_python(code: str) -> str:
    """`code` with IPython's syntax (`%exit`, `!ls`) made Python, as the kernel's shell does."""
    try:
        shell = ipython_shell()
        return shell.transform_cell(code) if shell is not None else code
    except Exception:  # noqa: BLE001 - plain Python is compiled as it is
        return code


def _source_name(exercise_id: str, code: str) -> str:
    """A file name for the cell's code, registered with linecache, so `inspect.getsource` finds
    the source of a function the cell defined (the evidence records a function answer as its
    code) and tracebacks show the line."""
    name = f"<exercise {exercise_id} {hashlib.sha1(code.encode()).hexdigest()[:8]}>"
    linecache.cache[name] = (len(code), None, [line + "\n" for line in code.splitlines()], name)
    return name


def _names(code: str) -> tuple[set[str], set[str]]:
    """The names `code` reads and the names it assigns (a def's name included)."""
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return set(), set()
    read: set[str] = set()
    assigned: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            (assigned if isinstance(node.ctx, (ast.Store, ast.Del)) else read).add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            assigned.add(node.name)
    return read, assigned


def _inputs(code: str, namespace: dict | None) -> dict:
    read, assigned = _names(code)
    return {name: namespace[name] for name in read - assigned if namespace is not None and name in namespace}


def user_namespace() -> dict | None:
    """The notebook's namespace (None outside IPython)."""
    shell = ipython_shell()
    return shell.user_ns if shell is not None else None


def _post_run_cell(result) -> None:
    code = getattr(getattr(result, "info", None), "raw_cell", "") or ""
    if code.lstrip().startswith("%%exercise"):
        return  # the magic keeps its own record
    python = ipython_python(code)
    assigned = _names(python)[1]
    for exercise_id, names in _NAMES.items():
        if not assigned & set(names):
            continue
        error = getattr(result, "error_in_exec", None) or getattr(result, "error_before_exec", None)
        text, namespace = exception_text(error) if error is not None else "", user_namespace()
        _RUNS[exercise_id] = CellRun(code, text, namespace=namespace, inputs=_inputs(python, namespace))


def register_magic(
    shell=None,
    *,
    known: Callable[[str], object] | None = None,
    answer_names: dict[str, tuple[str, ...]] | None = None,
    explain: Callable[[BaseException, str], str] | None = None,
) -> bool:
    """Register `%%exercise` and the post-run hook in this IPython kernel (no-op elsewhere).

    `known(exercise_id)` raises ValueError for an unknown id; `answer_names` maps exercise ids
    to the names their cells assign; `explain(error, code)` says under a cell what its error means."""
    if shell is None:
        shell = ipython_shell()
    if shell is None:
        return False
    _NAMES.update(answer_names or {})

    def exercise(line: str, cell: str) -> None:
        exercise_id = line.strip()
        if known is not None:
            try:
                known(exercise_id)
            except ValueError as exc:
                print(exc)
                return
        run_exercise_cell(exercise_id, cell, shell.user_ns, explain=explain)

    shell.register_magic_function(exercise, magic_kind="cell", magic_name="exercise")
    events = shell.events
    if _post_run_cell not in events.callbacks.get("post_run_cell", []):
        events.register("post_run_cell", _post_run_cell)
    return True
