"""What nbgrader's grader runs inside its sandbox (`python -I -m pytree_lab.course.answer_run`): a
submitted notebook's code, cell after cell, in an IPython shell as the kernel ran it (imports,
helpers, earlier answers, magics), and at each graded exercise cell its cases, rerun as the
practice check reruns them (`reruns.rerun_at`), or the answer function called on each case's
arguments. It reads its job (JSON) on stdin and writes one JSON line per case, plain numbers
only, to the descriptor it was started with; what the notebook prints goes to stderr, dropped.
The grader compares the numbers with the right values, which never enter this process."""

from __future__ import annotations

import json
import os
import resource
import sys
import threading
import time
from collections.abc import Iterator
from typing import Any

CELL_BUDGET = 60.0  # seconds of the notebook's own code per cell
CASE_BUDGET = 10.0  # seconds of the answer's own code per case


def _plain(value: Any, depth: int = 0) -> Any:
    """An answer as plain numbers (nested lists; a dict stays a dict), or None."""
    import numpy as np

    if depth > 8 or value is None or isinstance(value, (str, bytes)) or callable(value):
        return None
    if isinstance(value, dict):
        return {str(k): _plain(v, depth + 1) for k, v in value.items()}
    try:
        return np.asarray(value, dtype=np.float64).tolist()
    except (TypeError, ValueError):
        return None


def _arrays(tree: Any) -> Any:
    """A case's JSON tree back as the engine's arrays: {"array": ..., "dtype": ...} leaves."""
    from ..exercises import tools

    if isinstance(tree, dict) and set(tree) == {"array", "dtype"}:
        return tools.jnp.asarray(tools.np.asarray(tree["array"], dtype=tree["dtype"]))
    if isinstance(tree, dict):
        return {k: _arrays(v) for k, v in tree.items()}
    return [_arrays(v) for v in tree]


def _failed(run) -> dict:
    return {"error": type(run.error).__name__ if run.error is not None else "", "timed_out": run.timed_out}


def grade_cell(exercise_id: str, cases: list, shell, budget: float = CASE_BUDGET) -> Iterator[dict]:
    """One result per case for the exercise cell that just ran in `shell`, each as it is known."""
    from ..exercises import Case, CheckContext, last_run, run_guarded
    from .catalogue import EXERCISES
    from .exercises.reruns import rerun_at

    ex = EXERCISES[exercise_id]
    declared = [Case("", {}, names=_arrays(c.get("names", {})), args=tuple(_arrays(c.get("args", [])))) for c in cases]
    for case in declared:
        _cap(budget)
        if ex.answer_kind == "function":
            run = run_guarded(shell.user_ns.get(ex.answer_names[0]), *case.args, budget=budget, once_stuck=True)
            yield {"answers": {ex.answer_names[0]: _plain(run.value)}} if run.ok else _failed(run)
            continue
        rerun = rerun_at(CheckContext(cell=last_run(exercise_id)), case, declared[0], budget)
        if rerun is None:
            yield {"error": "", "timed_out": False}
            continue
        run, ns = rerun
        yield {"answers": {n: _plain(ns[n]) for n in ex.answer_names if n in ns}} if run.ok else _failed(run)


def _cap(seconds: float) -> None:
    """The CPU time this process may still use (twice `seconds`, and 30 s for imports and
    compiles) before the system ends it: code that swallows every stop of the guard ends the run
    here (the grader goes on without its cell); never past the run's own hard limit."""
    hard = resource.getrlimit(resource.RLIMIT_CPU)[1]
    want = int(time.process_time() + 2 * seconds) + 30
    resource.setrlimit(resource.RLIMIT_CPU, (want if hard == resource.RLIM_INFINITY else min(want, hard), hard))


def main() -> None:
    job = json.loads(sys.stdin.read())
    out = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)  # the notebook's own prints: not where results are read
    lock = threading.Lock()

    def write(line: dict) -> None:
        with lock:
            out.write(json.dumps(line) + "\n")
            out.flush()

    def beat() -> None:  # the run's CPU time: the grader tells computing (a slow machine) from waiting
        while True:
            time.sleep(2.0)
            write({"beat": time.process_time()})

    threading.Thread(target=beat, daemon=True).start()
    from IPython.core.interactiveshell import InteractiveShell

    from .. import course
    from ..exercises import run_guarded

    shell = InteractiveShell.instance()
    course.setup(shell)
    cell_budget, case_budget = job.get("budgets", (CELL_BUDGET, CASE_BUDGET))
    for index, cell in enumerate(job["cells"]):
        exercise_id, code = cell.get("exercise"), cell["code"]
        if exercise_id and not code.lstrip().startswith("%%exercise"):
            code = f"%%exercise {exercise_id}\n{code}"
        write({"cell": index})
        _cap(cell_budget)
        run_guarded(shell.run_cell, code, budget=cell_budget)
        if exercise_id in job["cases"]:
            for case, result in enumerate(grade_cell(exercise_id, job["cases"][exercise_id], shell, case_budget)):
                write({"exercise": exercise_id, "case": case, **result})
    write({"done": True})


if __name__ == "__main__":
    main()
