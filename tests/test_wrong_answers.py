"""Natural wrong answers, as students write them, through check() and through the check widget.

Every one must end in a specific sentence (asserted below), a verdict of "not yet", no exception
out of check(), and the widget back from "Checking…". Oracles: the lessons' hand derivations
(96; [-8, -4] and -4; [8, 12, 4]).
"""

from __future__ import annotations

import json
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from pytree_lab import course
from pytree_lab.course import catalogue
from pytree_lab.course.exercises import grad_over_flat_params as flat_exercise
from pytree_lab.exercises import Evidence, _guard, cells

GRADS = {"weight": jnp.array([-8.0, -4.0]), "bias": jnp.array(-4.0)}
LEAVES = jax.tree.leaves(GRADS)


@pytest.fixture(autouse=True)
def _short_budgets(monkeypatch):
    monkeypatch.setattr(flat_exercise, "CASE_BUDGET", 3.0)
    before = {ex.id: ex.budget for ex in course.EXERCISES.values()}
    for ex in course.EXERCISES.values():
        object.__setattr__(ex, "budget", 3.0)
    yield
    for ex in course.EXERCISES.values():
        object.__setattr__(ex, "budget", before[ex.id])


def good(flat_params, x):
    def loss(p):
        return jnp.sum((x @ p[:-1] + p[-1]) ** 2)

    return jax.grad(loss)(flat_params)


def slices_outside(flat_params, x):
    w, b = flat_params[:-1], flat_params[-1]
    return jax.grad(lambda p: jnp.sum((x @ w + b) ** 2))(flat_params)


def hard_coded_d(flat_params, x):
    return jax.grad(lambda p: jnp.sum((x @ p[:2] + p[2]) ** 2))(flat_params)


def mean_not_sum(flat_params, x):
    return jax.grad(lambda p: jnp.mean((x @ p[:-1] + p[-1]) ** 2))(flat_params)


def returns_tuple(flat_params, x):
    g = good(flat_params, x)
    return (g[:-1], g[-1])


def returns_weights_only(flat_params, x):
    return good(flat_params, x)[:-1]


def missing_return(flat_params, x):
    good(flat_params, x)


def calls_exit(flat_params, x):
    sys.exit()


def keyboard_interrupt(flat_params, x):
    raise KeyboardInterrupt


def endless(flat_params, x):
    while True:
        pass


def endless_swallowing(flat_params, x):
    while True:
        try:
            pass
        except BaseException:
            pass


def sleeps(flat_params, x):
    time.sleep(60)


def recurses(flat_params, x):
    return recurses(flat_params, x)


def prints_a_lot(flat_params, x):
    for _ in range(100_000):
        print("debug", flat_params)
    return good(flat_params, x)


def bias_first(flat_params, x):
    return jax.grad(lambda p: jnp.sum((x @ p[1:] + p[0]) ** 2))(flat_params)


def wrt_x(flat_params, x):
    return jax.grad(lambda xx: jnp.sum((xx @ flat_params[:-1] + flat_params[-1]) ** 2))(x)


def value_and_grad_pair(flat_params, x):
    return jax.value_and_grad(lambda p: jnp.sum((x @ p[:-1] + p[-1]) ** 2))(flat_params)


def raises_type_error(flat_params, x):
    return flat_params + "1"


FUNCTION_ANSWERS = [
    (slices_outside, "the loss does not depend on flat_params"),
    (hard_coded_d, "hidden case"),
    (mean_not_sum, "a mean where a sum was asked"),
    (returns_tuple, "tuple"),
    (returns_weights_only, "the bias gradient is missing"),
    (missing_return, "returned None"),
    (calls_exit, "sys.exit()"),
    (endless, "still running after 3 s of computing"),
    (endless_swallowing, "still running after 3 s of computing"),
    (sleeps, "still running after 3 s of computing"),
    (recurses, "RecursionError"),
    (bias_first, "the bias is in the wrong position"),
    (wrt_x, "differentiated with respect to x"),
    (value_and_grad_pair, "(loss, gradient)"),
    (raises_type_error, "raised TypeError"),
    ([8.0, 12.0, 4.0], "Pass your function grad_over_flat_params itself"),
]

VALUE_ANSWERS = [
    ("squared_norm", [80.0, 16.0], "one sum per leaf"),
    ("squared_norm", sum(g**2 for g in LEAVES), "broadcasts the bias's square"),
    ("squared_norm", 96.0 / 3, "mean over the 3 values"),
    ("squared_norm", float(np.sqrt(96.0)), "That is the norm"),
    ("squared_norm", 80.0, "the weight leaf alone, or weight[0]'s and the bias's"),
    ("squared_norm", 76.0, "without squaring it"),
    ("squared_norm", (-16.0) ** 2, "You squared the sum"),
    ("squared_norm", "96", "a string"),
    ("squared_norm", GRADS, "a dict"),
    (
        "nested_scale_grad",
        {"layer": {"weight": jnp.array([-4.0, -8.0]), "bias": jnp.array(-4.0)}, "scale": jnp.array(-4.0)},
        "swapped",
    ),
    (
        "nested_scale_grad",
        {"weight": jnp.array([-8.0, -4.0]), "bias": jnp.array(-4.0), "scale": jnp.array(-4.0)},
        "Same name, different path",
    ),
    ("nested_scale_grad", ({"layer": GRADS, "scale": jnp.array(-4.0)},), "without a tuple around it"),
    ("repair_update", {"weight": jnp.array([1.4, -0.8])}, "missing ['bias']"),
    ("repair_update", {"weight": jnp.array([0.6, -1.2]), "bias": jnp.array(-0.2)}, "a step uphill"),
    ("repair_update", {"weight": jnp.array([-0.8, 1.4]), "bias": jnp.array(0.2)}, "swapped"),
]


@pytest.mark.parametrize("answer, words", FUNCTION_ANSWERS, ids=lambda v: getattr(v, "__name__", None))
def test_function_answers_through_check(answer, words):
    result = course.check("grad_over_flat_params", answer, evidence=Evidence())
    assert not result.passed, result.feedback
    assert words in result.feedback, result.feedback


@pytest.mark.parametrize("exercise_id, answer, words", VALUE_ANSWERS)
def test_value_answers_through_check(exercise_id, answer, words):
    result = course.check(exercise_id, answer, evidence=Evidence())
    assert not result.passed, result.feedback
    assert words in result.feedback, result.feedback


def test_a_kernel_interrupt_in_an_answer_ends_the_check_it_is_never_swallowed():
    """The Stop button (KeyboardInterrupt) ends the cell that runs: a check never turns it into feedback."""
    with pytest.raises(KeyboardInterrupt):
        course.check("grad_over_flat_params", keyboard_interrupt, evidence=Evidence())
    assert course.check("grad_over_flat_params", good, evidence=Evidence()).passed  # and the next check works


def test_predicting_the_hidden_cases_from_numpy_seed_fails():
    def memorise(flat_params, x):
        np.random.seed(0)  # the global generator has nothing to do with the hidden cases
        return good(jnp.zeros_like(flat_params), x)

    assert not course.check("grad_over_flat_params", memorise, evidence=Evidence()).passed


def test_the_exercise_cell_runs_guarded_and_a_failed_run_is_not_graded(capsys):
    ns = {"jnp": jnp, "jax": jax, "grads": GRADS}
    cells.run_exercise_cell(
        "squared_norm",
        "norm_squared = sum(jnp.sum(g ** 2) for g in jax.tree.leaves(grads))\n"
        "manual = jnp.sum(grads['weight'] ** 2) + grads['bias'] ** 2",
        ns,
    )
    button = course.check_button(
        "squared_norm", lambda: {"norm_squared": ns["norm_squared"], "manual": ns["manual"]}, evidence=Evidence()
    )
    assert button.check().passed
    cells.run_exercise_cell("squared_norm", "norm_squared = 1 / 0", ns)
    out = capsys.readouterr().out
    assert "Your cell raised ZeroDivisionError" in out and "kernel is fine" in out
    result = button.check()
    assert not result.passed and "Your last run of the exercise cell raised ZeroDivisionError" in result.feedback
    assert button.status == "failed" and not button.busy
    for code, words in [
        ("import sys; sys.exit()", "sys.exit()"),
        ("while True: pass", "still running"),
        ("import time; time.sleep(30)", "still running"),
        ("def f(): return f()\nf()", "RecursionError"),
    ]:
        cells.run_exercise_cell("squared_norm", code, ns, budget=1.0)
        assert words in capsys.readouterr().out
    with pytest.raises(KeyboardInterrupt):  # the Stop button ends the cell: never swallowed
        cells.run_exercise_cell("squared_norm", "raise KeyboardInterrupt", ns, budget=1.0)
    cells.forget()


@pytest.mark.parametrize("answer, words", FUNCTION_ANSWERS[:8], ids=lambda v: getattr(v, "__name__", None))
def test_function_answers_through_the_check_widget(answer, words):
    button = course.check_button("grad_over_flat_params", lambda: answer, evidence=Evidence())
    button.check()
    assert button.status == "failed" and not button.busy
    assert words in button.feedback
    assert button.announcement.startswith("Check 1: not yet")


def test_a_graded_exercise_never_reveals_its_solution():
    # the course's exercises are graded: even where their solutions are found (a checkout, the
    # grading side's $PYTREE_LAB_SOLUTIONS), two wrong checks offer none and asking shows none
    button = course.check_button("grad_over_flat_params", lambda: mean_not_sum, evidence=Evidence())
    assert button.exercise.graded and button.exercise.solutions
    button.check()
    button.check()
    assert not button.solution_available and "reference solution" not in button.announcement
    assert button.reveal_solution() is None and button.solution == ""
    assert button.announcement == "This exercise is graded: no reference solution is shown."
    assert not button.evidence.reveals


def test_reference_solution_of_a_practice_exercise_only_after_an_attempt():
    import dataclasses

    from pytree_lab.exercises import CheckButton

    practice = dataclasses.replace(catalogue.exercise("grad_over_flat_params"), graded=False)
    button = CheckButton(practice, lambda: mean_not_sum, evidence=Evidence())
    assert button.reveal_solution() is None and button.solution == ""
    assert "check it first" in button.announcement
    button.check()
    button.check()
    assert "A reference solution is available" in button.announcement
    text = button.reveal_solution()
    assert "jax.grad(loss)(flat_params)" in text and button.solution == text


def test_the_page_cannot_write_a_solution_or_a_verdict():
    button = course.check_button("squared_norm", lambda: 80.0, evidence=Evidence())
    button.set_state({"solution": "leaked", "status": "passed", "score": 1.0})
    assert button.solution == "" and button.status == "" and button.score == 0.0
    quiz = course.quiz("leaves_vs_values")
    quiz.set_state({"selected": 1})
    assert quiz.selected == 1
    quiz.set_state({"answered": True, "correct": True})
    assert not quiz.answered and not quiz.correct


def test_the_time_budget_also_holds_off_the_main_thread():
    # where no interval timer can be used (another thread), a line tracer stops it
    import threading

    found = {}

    def student():
        while True:
            pass

    def run():
        found["run"] = _guard.run_guarded(student, budget=0.5)

    thread = threading.Thread(target=run)
    thread.start()
    thread.join(20)
    assert not thread.is_alive() and found["run"].timed_out


def test_huge_output_is_bounded_and_said():
    run = _guard.run_guarded(lambda: print("x" * 1_000_000), budget=5)
    assert run.ok and len(run.output) <= _guard.OUTPUT_LIMIT
    assert "printed a lot" in " ".join(_guard.notes_for(run))


def test_every_keyword_but_the_guards_own_reaches_the_students_function():
    run = _guard.run_guarded(lambda **kw: kw, capture=False, output_limit=3, budget=5)
    assert run.ok and run.value == {"capture": False, "output_limit": 3}


def test_aligned_trees_for_the_evidence():
    from pytree_lab.exercises import aligned_trees

    params = {"weight": jnp.array([1.0, -1.0]), "bias": jnp.array(0.0)}
    text = aligned_trees(params=params, grads=GRADS, updated={"weight": jnp.array([1.4, -0.8])})
    lines = text.splitlines()
    assert lines[0].split() == ["path", "params", "grads", "updated"]
    assert lines[1].startswith("['bias']") and lines[1].endswith("(missing)")
    assert "[-8., -4.]" in lines[2] and "[ 1.4, -0.8]" in lines[2]


def test_without_interval_timers_the_tracer_budget_is_used(monkeypatch):
    # the JupyterLite kernel's situation (Pyodide has no setitimer), on the main thread
    import signal

    from pytree_lab import guard

    monkeypatch.setattr(guard.sys, "platform", "emscripten")
    with guard.time_budget(0.5, traced=False) as budget:  # the explorer's: no tracer over a step
        assert sys.gettrace() is None and signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)
    assert not budget.fired

    def student():
        while True:
            pass

    run = _guard.run_guarded(student, budget=0.5)
    assert run.timed_out and not run.error


def test_in_an_ipython_shell_a_failed_plain_cell_and_a_magic_cell(tmp_path):
    # a real IPython shell (what ipykernel runs), in its own process: the post-run hook notices a
    # plain cell that assigned the answer and raised; %%exercise keeps sys.exit() inside the cell
    import subprocess

    script = tmp_path / "shell.py"
    script.write_text('''
from IPython.core.interactiveshell import InteractiveShell
shell = InteractiveShell.instance()
assert shell.run_cell("import jax, jax.numpy as jnp\\nfrom pytree_lab import course\\ncourse.setup()").success
shell.run_cell("norm_squared = 96.\\nmanual = 96.")
assert not shell.run_cell("norm_squared = 1 / 0").success
shell.run_cell("r = course.check_button('squared_norm').check()")
print("PLAIN:", shell.user_ns["r"].feedback)
run = shell.run_cell("%%exercise squared_norm\\nimport sys\\nsys.exit()")
print("MAGIC-OK:", run.success)
shell.run_cell("r = course.check_button('squared_norm').check()")
print("AFTER:", shell.user_ns["r"].feedback)
''')
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "PLAIN: Your last run of the exercise cell raised ZeroDivisionError" in out.stdout
    # as in a notebook's kernel, each check went into the evidence file as it happened, with its error
    record = json.loads((tmp_path / "pytree-lab-evidence.json").read_text())
    assert [c.get("error") for c in record["checks"]] == ["ZeroDivisionError: division by zero", "SystemExit"]
    assert "MAGIC-OK: True" in out.stdout and "called sys.exit()" in out.stdout
    assert "AFTER: Your last run of the exercise cell raised SystemExit" in out.stdout


class _ExitsWhenRead:
    def __array__(self, dtype=None, copy=None):
        sys.exit("student code exited")


def test_recording_an_answer_as_evidence_runs_it_guarded_like_grading():
    evidence = Evidence()
    result = course.check("repair_update", {"weight": _ExitsWhenRead(), "bias": jnp.array(0.2)}, evidence=evidence)
    assert not result.passed and "sys.exit()" in result.feedback  # no SystemExit out of check()
    recorded = evidence.checks[-1]["answer"]
    assert recorded.startswith("<not recorded: ") and "exit" in recorded
    evidence.add_output("my answer", {"weight": _ExitsWhenRead()})
    assert evidence.outputs[-1]["value"].startswith("<not recorded: ")


def test_an_answer_written_into_the_function_is_named_as_such():
    hard_coded = lambda flat_params, x: jnp.array([8.0, 12.0, 4.0])  # the worked example's answer  # noqa: E731
    result = course.check("grad_over_flat_params", hard_coded, evidence=Evidence())
    assert not result.passed and result.score == pytest.approx(0.2)  # right on the worked example only
    assert "returned the same array in every case" in result.feedback
    # a function that does compute from its inputs, wrongly, is not told that
    mean = lambda flat_params, x: jax.grad(lambda fp: jnp.mean((x @ fp[:-1] + fp[-1]) ** 2))(flat_params)  # noqa: E731
    result = course.check("grad_over_flat_params", mean, evidence=Evidence())
    assert not result.passed and "same array in every case" not in result.feedback


def test_a_function_that_looped_once_is_not_waited_for_again(capsys):
    # the packed lesson calls the student's function in the worked example, the practice check,
    # the grader's check and the unravel cell: an endless loop costs its budget once, not four times
    calls = []

    def grad_over_flat_params(flat_params, x):
        calls.append(1)
        while True:
            pass

    flat, x = jnp.array([1.0, 0.0, 0.0]), jnp.array([[2.0, 3.0]])
    assert course.try_function(grad_over_flat_params, flat, x, label="grad_over_flat_params", budget=0.5) is None
    assert "was still running after 0.5 s of computing" in capsys.readouterr().out
    assert course.try_function(grad_over_flat_params, flat, x, label="grad_over_flat_params", budget=0.5) is None
    said = capsys.readouterr().out
    outcome = catalogue.check("grad_over_flat_params", grad_over_flat_params, rng=np.random.default_rng(0))
    assert len(calls) == 1  # called once: the later cell and the check did not call it
    assert "was not run again: in an earlier call it was still running" in said, said
    assert outcome.cases_passed == 0 and outcome.cases_total > 1
    assert "was not run again" in outcome.feedback, outcome.feedback

    # the student fixes it and runs the cell again: a new function, called as usual
    def grad_over_flat_params(flat_params, x):  # the student's second try
        return jax.grad(lambda p: jnp.sum((x @ p[:2] + p[2]) ** 2))(flat_params)

    assert course.try_function(grad_over_flat_params, flat, x, label="grad_over_flat_params").tolist() == [
        8.0,
        12.0,
        4.0,
    ]


def _doubled(xs):  # a function of its own: Python 3.12 runs a comprehension inside its caller's frame
    return [x * 2 for x in xs]


def test_under_cprofile_the_guard_gives_the_profiler_back_and_the_code_runs():
    # IPython's %prun profiles with cProfile: sys.getprofile() is then the Profile object, which
    # is not callable; set back as a profile function it broke the next call ("TypeError:
    # 'Profile' object is not callable": an explorer built under %prun showed no step)
    import cProfile
    import pstats

    profiler = cProfile.Profile()
    profiler.enable()
    try:
        run = _guard.run_guarded(lambda: sum(range(10)), budget=5)
        after = _doubled(range(3))  # the interpreter works on after the guard
    finally:
        profiler.disable()
    assert run.ok and run.value == 45 and after == [0, 2, 4]
    assert sys.getprofile() is None
    # the profiler kept profiling after the guard gave it back
    names = {func[2] for func in pstats.Stats(profiler).stats}
    assert "_doubled" in names, sorted(names)[:20]
