"""Nothing stale, nothing free, every sentence true (issue 19, parts 2 to 4), in the kernel.

Each case is the exact thing a student does and the exact sentence they get. Oracles: the
lessons' hand derivations (96; [-8, -4] and -4; [8, 12, 4]).
"""

from __future__ import annotations

import dataclasses
import json

import jax
import jax.numpy as jnp
import pytest
from markdown_it import MarkdownIt

from pytree_lab import course
from pytree_lab.course import catalogue
from pytree_lab.exercises import CheckButton, Evidence, EvidenceButton, cells

PARAMS = {"weight": jnp.array([1.0, -1.0]), "bias": jnp.array(0.0)}
X = jnp.array([2.0, 1.0])


def loss(p):
    return (jnp.dot(p["weight"], X) + p["bias"] - 3.0) ** 2


GRADS = jax.grad(loss)(PARAMS)
NS = {"jax": jax, "jnp": jnp, "params": PARAMS, "x": X, "loss": loss, "grads": GRADS}

NORM_CODE = (
    "norm_squared = sum(jnp.sum(g ** 2) for g in jax.tree.leaves(grads))\n"
    "manual = jnp.sum(grads['weight'] ** 2) + grads['bias'] ** 2"
)
PACKED_CODE = (
    "def grad_over_flat_params(flat_params, x):\n"
    "    def loss(p):\n"
    "        return jnp.sum((x @ p[:-1] + p[-1]) ** 2)\n"
    "    return jax.grad(loss)(flat_params)\n"
)
PACKED_TEMPLATE = "def grad_over_flat_params(flat_params, x):\n    # TODO: the gradient\n    ...\n"


@pytest.fixture(autouse=True)
def _fresh_runs():
    cells.forget()
    yield
    cells.forget()


def _card(exercise_id: str, ns: dict, log: Evidence, *, practice: bool = False):
    names = [n.strip() for n in catalogue.exercise(exercise_id).answer_name.split(",")]
    answer = (lambda: ns.get(names[0])) if len(names) == 1 else (lambda: {n: ns.get(n) for n in names})
    if practice:  # the same exercise as a practice one (the course's are graded: they reveal nothing)
        return CheckButton(dataclasses.replace(catalogue.exercise(exercise_id), graded=False), answer, evidence=log)
    return course.check_button(exercise_id, answer, evidence=log)


# --------------------------------------------------------------------------- stale runs


def test_after_a_failed_exercise_run_the_worked_example_cell_does_not_use_the_old_function(capsys):
    ns = dict(NS)
    cells.run_exercise_cell("grad_over_flat_params", PACKED_CODE, ns)
    example = course.try_function(
        ns["grad_over_flat_params"], jnp.array([1.0, 0.0, 0.0]), jnp.array([[2.0, 3.0]]), label="grad_over_flat_params"
    )
    assert example.tolist() == [8.0, 12.0, 4.0]
    cells.run_exercise_cell("grad_over_flat_params", PACKED_CODE + "import sys\nsys.exit()\n", ns)
    capsys.readouterr()
    # the previous definition is still in the namespace: it is not run
    assert (
        course.try_function(
            ns["grad_over_flat_params"],
            jnp.array([1.0, 0.0, 0.0]),
            jnp.array([[2.0, 3.0]]),
            label="grad_over_flat_params",
        )
        is None
    )
    out = capsys.readouterr().out
    assert out == (
        "The last run of the exercise cell failed (SystemExit), so grad_over_flat_params is still "
        "the one from an earlier run: this cell does not use it. Fix the exercise cell, run it "
        "again, then run this cell.\n"
    )
    assert "8" not in out


@pytest.mark.parametrize(
    ("body", "said"),
    [
        (
            "    return jax.value_and_grad(loss)(flat_params)",
            "grad_over_flat_params returned a pair (a number, then an array), as jax.value_and_grad does: "
            "return only the gradient, one array of shape (3,).\n",
        ),
        (
            "    g = jax.grad(loss)(flat_params)\n    return (g[:-1], g[-1])",
            "grad_over_flat_params returned a tuple of 2 items; this cell needs one array of shape (3,), "
            "with nothing around it.\n",
        ),
        (
            "    return jax.grad(loss)(flat_params)[:-1]",
            "grad_over_flat_params returned an array of shape (2,); this cell needs one array of shape (3,).\n",
        ),
    ],
)
def test_worked_example_and_unravel_cells_say_one_sentence_for_a_wrong_kind_of_result(body, said, capsys):
    ns = dict(NS)
    code = (
        "def grad_over_flat_params(flat_params, x):\n"
        "    def loss(p):\n        return jnp.sum((x @ p[:-1] + p[-1]) ** 2)\n" + body + "\n"
    )
    cells.run_exercise_cell("grad_over_flat_params", code, ns)
    for flat, x in (
        (jnp.array([1.0, 0.0, 0.0]), jnp.array([[2.0, 3.0]])),
        (jnp.array([1.0, 2.0, 0.5]), jnp.array([[1.0, -1.0]])),
    ):
        capsys.readouterr()
        assert course.try_function(ns["grad_over_flat_params"], flat, x, label="grad_over_flat_params") is None
        assert capsys.readouterr().out == said


def test_a_raising_function_is_named_as_written_with_one_full_stop(capsys):
    def grad_over_flat_params(flat_params, x):
        raise ValueError("shapes do not match.")

    assert (
        course.try_function(grad_over_flat_params, jnp.zeros(3), jnp.zeros((1, 2)), label="grad_over_flat_params")
        is None
    )
    assert capsys.readouterr().out == (
        "grad_over_flat_params raised ValueError: shapes do not match. The kernel is fine.\n"
    )


def test_a_cell_that_exits_is_told_to_assign_not_to_return(capsys):
    cells.run_exercise_cell("squared_norm", "import sys\nsys.exit()", dict(NS))
    out = capsys.readouterr().out
    assert "return the answer" not in out
    assert out == (
        "Your cell called sys.exit() (or exit()/quit()). In a notebook that would stop the check, "
        "so it was caught: let the cell run to its end and assign your answer instead. "
        "The kernel is fine: fix the cell and run it again.\n"
    )


def test_a_stale_verdict_has_one_full_stop_and_a_time_out_reads_as_one():
    ns = dict(NS)
    cells.run_exercise_cell("squared_norm", "raise ValueError('no.')", ns)
    result = _card("squared_norm", ns, Evidence()).check()
    assert result.feedback.startswith("Your last run of the exercise cell raised ValueError: no. The value left")
    cells.run_exercise_cell("squared_norm", "while True:\n    pass", ns, budget=0.5)
    result = _card("squared_norm", ns, Evidence()).check()
    assert result.feedback.startswith(
        "Your last run of the exercise cell ended in a time-out (still running after 0.5 s). The value left"
    )


def test_extra_leaves_are_counted_in_good_english():
    answer = {"weight": jnp.array([1.4, -0.8]), "bias": jnp.array(0.2), "a": jnp.array(0.0), "b": jnp.array(0.0)}
    result = catalogue.check("repair_update", answer, evidence=Evidence())
    assert result.feedback.splitlines()[0] == (
        "2 of 4 parts right: 2 of 2 leaves of the updated parameter tree, and 2 extra leaves to remove."
    )
    one = dict(answer)
    del one["b"]
    result = catalogue.check("repair_update", one, evidence=Evidence())
    assert "and 1 extra leaf to remove." in result.feedback


def test_no_feedback_string_has_a_known_typo():
    import ast
    import pathlib
    import re

    import pytree_lab

    root = pathlib.Path(pytree_lab.__file__).parent
    for path in [*(root / "exercises").glob("*.py"), *(root / "course").glob("*.py")]:
        text = path.read_text()
        strings = [
            node.value
            for node in ast.walk(ast.parse(text))
            if isinstance(node, ast.Constant) and isinstance(node.value, str)
        ]
        for string in strings:
            assert "leafs" not in string and not re.search(r"\b1 leaves", string), (path, string)
            assert not re.search(r"[A-Za-z)\]`]\.\.(?!\.)", string), (path, string)  # a sentence ending ".."
        assert "label.capitalize()" not in text, path


# --------------------------------------------------------------------------- one verdict: the card


def test_the_check_cell_prints_nothing_and_the_card_text_follows_every_check(capsys):
    ns = dict(NS)
    cells.run_exercise_cell("squared_norm", NORM_CODE, ns)
    capsys.readouterr()
    from IPython.core.interactiveshell import InteractiveShell

    shell = InteractiveShell.instance()
    shell.user_ns.update(ns)
    try:
        card = course.check_cell("squared_norm", evidence=Evidence())
        # no verdict printed above the card to go stale: only the note that checks are practice
        assert capsys.readouterr().out == course.PRACTICE + "\n"
        text = card._repr_mimebundle_()[0]["text/plain"]
        assert "Check 1: passed, score 1.00" in text and "norm_squared: Correct: the squared norm" in text
        # the student takes a square root in the exercise cell, runs it and clicks again
        cells.run_exercise_cell("squared_norm", NORM_CODE + "\nnorm_squared = jnp.sqrt(norm_squared)", shell.user_ns)
        capsys.readouterr()
        card.check()
        text = card._repr_mimebundle_()[0]["text/plain"]
        assert "Check 2: not yet, score 0.50" in text and "Check 1" not in text
        assert "norm_squared: You gave 9.798. That is the norm" in text
    finally:
        for name in ns:
            shell.user_ns.pop(name, None)
        shell.user_ns.pop("norm_squared", None)
        shell.user_ns.pop("manual", None)


def test_a_check_cell_given_an_empty_log_keeps_everything_in_that_log():
    """An empty `Evidence` is still the log the caller gave: the lesson's exercises and the passed
    answer go there, none to the kernel's default log."""
    from pytree_lab.exercises import default_evidence

    ns = dict(NS)
    cells.run_exercise_cell("squared_norm", NORM_CODE, ns)
    from IPython.core.interactiveshell import InteractiveShell

    shell = InteractiveShell.instance()
    shell.user_ns.update(ns)
    kernels = default_evidence()
    kernels.clear(), kernels.expected.clear()
    mine = Evidence()
    try:
        course.check_cell("squared_norm", evidence=mine)
    finally:
        for name in [*ns, "norm_squared", "manual"]:
            shell.user_ns.pop(name, None)
    lesson = catalogue.EXERCISES["squared_norm"].lesson
    assert set(mine.expected) == {k for k, ex in catalogue.EXERCISES.items() if ex.lesson == lesson}
    assert [o["label"] for o in mine.outputs] == ["Make it yours: my answer"], mine.outputs
    assert len(mine.checks) == 1
    assert len(kernels) == 0 and kernels.expected == {}


# --------------------------------------------------------------------------- reference solution


def test_no_reference_solution_for_the_untouched_template_and_every_reveal_is_listed(tmp_path):
    ns = dict(NS)
    log = Evidence()
    cells.run_exercise_cell("grad_over_flat_params", PACKED_TEMPLATE, ns)
    card = _card("grad_over_flat_params", ns, log, practice=True)
    result = card.check()
    assert result.feedback.startswith("Not answered yet")
    card.check()
    assert not card.solution_available
    assert card.reveal_solution() is None and card.solution == ""
    assert card.announcement == (
        "Write your answer in the exercise cell (replace its `...`), run it and check "
        "it first; the reference solution comes after a real attempt."
    )
    # a real attempt, even a wrong one, opens it
    cells.run_exercise_cell("grad_over_flat_params", PACKED_CODE.replace("jnp.sum(", "jnp.mean("), ns)
    assert not card.check().passed
    assert card.solution_available
    assert "jax.grad(loss)(flat_params)" in card.reveal_solution()
    again = _card("grad_over_flat_params", ns, log, practice=True)  # the cell run again: a new card
    again.check()
    again.reveal_solution()
    saved = log.save(tmp_path / "e.md")
    text = saved.markdown.read_text()
    assert "| Gradient of packed parameters (`grad_over_flat_params`) | not yet | 2 | shown 2 times, " in text
    assert len(json.loads(saved.json.read_text())["reveals"]) == 2


def test_a_failed_run_counts_as_a_real_attempt_for_the_reference_solution():
    ns = dict(NS)
    cells.run_exercise_cell("squared_norm", "norm_squared = grads['bias'] / 0.0 + undefined_name", ns)
    card = _card("squared_norm", ns, Evidence(), practice=True)
    assert "NameError" in card.check().feedback
    assert card.solution_available and card.reveal_solution() is not None


# --------------------------------------------------------------------------- quiz


def test_running_the_quiz_cell_again_gives_practice_not_a_fresh_score(tmp_path):
    log = Evidence()
    first = course.quiz("grad_structure", evidence=log)
    first.selected = 0
    assert first.submit() is False
    again = course.quiz("grad_structure", evidence=log)  # the cell run again
    assert again.announcement == (
        "You answered this question before: your first answer, “One scalar regardless "
        "of parameters”, is your score. This try is recorded as practice."
    )
    again.selected = 1
    assert again.submit() is True
    assert again.announcement.startswith(
        "Correct. Practice: your first answer, “One scalar regardless of parameters” (not correct), stays your score."
    )
    assert [e["practice"] for e in log.quiz] == [False, True]
    saved = log.save(tmp_path / "q.md")
    text = saved.markdown.read_text()
    assert (
        "| What structure does grad(loss)(params) have? | One scalar regardless of parameters (not correct) | "
        "A pytree corresponding to params (correct) |"
    ) in text
    assert saved.counts()["quiz answers"] == 1 and saved.counts()["practice answers"] == 1


def test_a_quiz_answered_in_two_kernels_scores_the_earlier_answer(tmp_path):
    for choice in (2, 1):  # two sessions (a kernel restart between them), one file
        log = Evidence()
        q = course.quiz("grad_structure", evidence=log)
        q.selected = choice
        q.submit()
        saved = log.save(tmp_path / "q.md")
    text = saved.markdown.read_text()
    assert (
        "| What structure does grad(loss)(params) have? | A list of Python source lines (not correct) | "
        "A pytree corresponding to params (correct) |"
    ) in text


# --------------------------------------------------------------------------- evidence


def test_the_save_message_counts_everything_in_the_file_not_only_this_session(tmp_path):
    path = tmp_path / "lesson.md"
    earlier = Evidence()
    catalogue.check("repair_update", {"weight": jnp.array([1.4, -0.8]), "bias": jnp.array(0.2)}, evidence=earlier)
    catalogue.check("repair_update", PARAMS, evidence=earlier)
    earlier.save(path)
    now = Evidence()  # after a kernel restart
    prompt = course.lesson_prediction("gradient_leaves", evidence=now)
    prompt.prediction = "[-8, -4] and -4"
    prompt.reveal()
    button = EvidenceButton(path, evidence=now)
    button.save()
    assert button.announcement == (
        f"Saved lesson.md and lesson.json in {tmp_path}: the file now holds "
        "1 prediction, 2 checks, 0 quiz answers, 0 key outputs, from 2 sessions."
    )


def test_the_evidence_cell_run_alone_says_what_to_run_first(tmp_path, capsys):
    assert course.save_evidence(tmp_path / "alone.md", evidence=Evidence()) is None
    out = capsys.readouterr().out
    assert out.startswith(
        "Nothing has been recorded in this kernel yet (after a kernel restart the record "
        "starts empty). Run the notebook from the top first"
    )
    assert not (tmp_path / "alone.md").exists()


def test_a_function_answer_is_recorded_as_its_source_code(tmp_path):
    ns = dict(NS)
    log = Evidence()
    cells.run_exercise_cell("grad_over_flat_params", PACKED_CODE, ns)
    catalogue.check("grad_over_flat_params", ns["grad_over_flat_params"], evidence=log)
    log.add_output("Gradient of packed parameters: my answer", ns["grad_over_flat_params"])
    saved = log.save(tmp_path / "f.md")
    record = json.loads(saved.json.read_text())
    assert record["checks"][0]["answer"] == PACKED_CODE.rstrip("\n")
    assert record["outputs"][0]["text"] == PACKED_CODE.rstrip("\n")
    assert "0x" not in saved.markdown.read_text() and "<function" not in saved.markdown.read_text()


def _tokens(text: str):
    md = MarkdownIt("commonmark").enable("table")
    return md.parse(text)


def test_the_markdown_evidence_renders_as_headings_tables_and_code_with_student_text_as_text(tmp_path):
    ns = dict(NS)
    log = Evidence()
    cells.run_exercise_cell("squared_norm", NORM_CODE + "\n# <b>mine</b> `x` | *y*", ns)
    _card("squared_norm", ns, log).check()
    prompt = course.lesson_prediction("gradient_leaves", evidence=log)
    prompt.prediction = "<img src=x onerror=alert(1)> **[-8, -4]** | -4\n# not a heading"
    prompt.reveal()
    q = course.quiz("leaves_vs_values", evidence=log)
    q.selected = 0
    q.submit()
    log.add_output("<script>alert(1)</script> label", "```\nbackticks in an output\n```")
    text = log.save(tmp_path / "render.md").markdown.read_text()
    tokens = _tokens(text)
    html = [t for t in tokens if t.type == "html_block" or any(c.type == "html_inline" for c in t.children or [])]
    # the only HTML is the file's own mark (an HTML comment, invisible when rendered)
    assert [t.content.strip() for t in html] == [text.splitlines()[0]]

    def plain(inline) -> str:  # what the reader sees of an inline run
        return "".join(
            c.content if c.type in ("text", "code_inline") else " " if c.type == "softbreak" else ""
            for c in inline.children
        )

    headings = [plain(tokens[i + 1]) for i, t in enumerate(tokens) if t.type == "heading_open"]
    assert headings[:4] == ["Pytree lab: my evidence", "Summary", "Predictions", "Checks"]
    assert "Check your understanding" in headings and "Key outputs" in headings
    assert "<script>alert(1)</script> label" in headings  # shown as the text it is
    fences = [t.content for t in tokens if t.type == "fence"]
    assert NORM_CODE + "\n# <b>mine</b> `x` | *y*\n" in fences  # the code, whole, in a code block
    assert "```\nbackticks in an output\n```\n" in fences
    shown = [plain(t) for t in tokens if t.type == "inline"]
    assert "<img src=x onerror=alert(1)> **[-8, -4]** | -4 # not a heading" in shown  # one table cell
    assert sum(1 for t in tokens if t.type == "table_open") == 3  # summary, predictions, quiz


def test_lesson_02_prediction_and_quiz_are_computed_and_recorded(tmp_path):
    log = Evidence()
    prompt = course.lesson_prediction("argnums_shape", evidence=log)
    prompt.prediction = "(1, 2), the shape of x"
    # d/dx (x @ w + b)^2 = 2 · (-0.5) · w = [-1, -2] for w = [1, 2], b = 0.5, x = [[1, -1]]
    assert prompt.reveal() == (
        "argnums=0 gives shape (3,) ([-1, 1, -1]), flat_params' shape; argnums=1 gives "
        "shape (1, 2) ([[-1, -2]]), the shape of x: a gradient always has the shape of the "
        "argument it is taken with respect to."
    )
    q = course.quiz("ravel_order", evidence=log)
    q.selected = 1
    assert q.submit() is True
    from jax.flatten_util import ravel_pytree

    packed, _ = ravel_pytree({"w": jnp.array([1.0, 2.0]), "b": jnp.array([0.5])})
    assert packed.tolist() == [0.5, 1.0, 2.0]  # the right choice, as JAX packs it
    text = log.save(tmp_path / "02.md").markdown.read_text()
    assert "(none revealed yet)" not in text and "(not answered yet)" not in text
    assert "| \\(1, 2\\), the shape of x |" not in text  # parentheses are not escaped: plain text
    assert "(1, 2), the shape of x" in text
    assert "\\[0.5, 1, 2\\]: the keys in sorted order (correct)" in text  # Markdown-escaped, shown as typed
