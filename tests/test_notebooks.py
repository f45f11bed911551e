"""The course notebooks run top to bottom in a real kernel, and say the lessons' numbers.

Each notebook is executed with nbclient in a fresh kernel of this venv's python:
- *answered*: every exercise cell (tagged `exercise:<id>`) gets the reference solution from
  course_source/solutions/, the prediction prompts get a typed prediction and are revealed, the quiz is
  answered; the outputs must show the hand-derived numbers and every check must pass with score 1;
- *unanswered*: exactly as a student first opens it; it must run without an error and say
  "not answered yet" where an answer is missing;
- *Lite engine*: answered, with `import jax` bound to pytree_lab_lite.jax and `import optax` to
  pytree_lab_lite.optax, as in the JupyterLite kernel: the same numbers.

Expected values are the lessons' hand derivations (4.0 -> 0.64, grads [-8, -4] and -4, squared
norm 96, d/dscale -4, [8, 12, 4], loss 0.25, ...), never numbers copied from a previous run.
"""

from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from kernel_harness import kernel_env, notebook_client

ROOT = Path(__file__).resolve().parents[1]
CONTENT = ROOT / "content"
SOLUTIONS = ROOT / "course_source" / "solutions"
FIRST_CELL = ROOT / "lite_build" / "first_cell.py"

LESSON = "01_pytrees.ipynb"
PACKED = "02_packed_parameters.ipynb"
INSTRUCTOR = "03_instructor_demo.ipynb"
NOTEBOOKS = [LESSON, PACKED, INSTRUCTOR]

QUIZ_ANSWER = 1  # "A pytree corresponding to params"

CELL_TIMEOUT = 300  # seconds; the first cell that imports jax and compiles is the slow one

# What a student types into each prediction prompt before revealing the answer.
PREDICTIONS = {
    "predict-gradient-leaves": "weight: -4 * [2, 1] = [-8, -4]; bias: -4",
    "predict-which-weight": "weight[0]: its input 2 is larger than 1",
    "predict-treedef": "the dict and its keys; the values come from the new leaves",
}

# The Lite kernel's situation, recreated in CPython: `import jax` and `import optax` are the Lite
# engine's (pytree_lab_lite.install_as_jax does the same where JAX cannot be imported).
LITE_ENGINE_CELL = """\
import sys
from pytree_lab_lite import jax as lite_jax, optax as lite_optax
sys.modules["optax"] = lite_optax
sys.modules["jax"] = lite_jax
for name in ("numpy", "tree", "tree_util", "flatten_util"):
    sys.modules["jax." + name] = getattr(lite_jax, name)
"""


# --------------------------------------------------------------------------- solutions


def without_magic(source: str) -> str:
    """A cell's Python, without a leading `%%exercise <id>` line."""
    return source.split("\n", 1)[1] if source.startswith("%%") else source


def defined_names(source: str) -> set[str]:
    """Names a cell binds at top level (assignments, defs)."""
    names: set[str] = set()
    for node in ast.parse(without_magic(source)).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                names.update(n.id for n in ast.walk(target) if isinstance(n, ast.Name))
    return names


def solution_source(module: Path, names: set[str]) -> str:
    """The statements of a solutions module that bind `names`, as source, in module order."""
    text = module.read_text()
    picked, found = [], set()
    for node in ast.parse(text).body:
        bound = defined_names(ast.get_source_segment(text, node))
        if bound & names:
            picked.append(ast.get_source_segment(text, node))
            found |= bound & names
    missing = names - found
    assert not missing, f"{module.name} has no reference solution for {sorted(missing)}"
    return "\n".join(picked)


def exercise_tag(cell) -> str | None:
    for tag in cell.get("metadata", {}).get("tags", []):
        if tag.startswith("exercise:"):
            return tag.split(":", 1)[1]
    return None


def fill_in_answers(nb, name: str, *, interactions: bool = True) -> None:
    """Replace each exercise scaffold by its reference solution. With `interactions`, also type
    and reveal the predictions and answer the quiz in code (what a student does in the widgets)."""
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        exercise = exercise_tag(cell)
        if not interactions and (exercise == "quiz" or cell.get("id") in PREDICTIONS):
            continue
        if exercise == "quiz" and cell.get("id") == "quiz":
            cell.source += (
                f"\nquiz_grad.selected = {QUIZ_ANSWER}\n"
                "print('quiz answered, correct:', quiz_grad.submit())\n"
                "print(quiz_grad.explanation)\n"
                "quiz_grad"
            )
        elif exercise == "quiz":
            cell.source += (
                "\nfor q, choice in zip(quizzes, [0, 1, 2, 1]):\n"
                "    q.selected = choice\n"
                "    print('quiz answered, correct:', q.submit())\n"
            )
        elif exercise is not None:
            magic = cell.source.split("\n", 1)[0]
            assert magic == f"%%exercise {exercise}", magic
            cell.source = magic + "\n" + solution_source(SOLUTIONS / f"{exercise}.py", defined_names(cell.source))
        elif cell.get("id") in PREDICTIONS:
            call = cell.source.strip()
            cell.source = (
                f"prompt = {call}\n"
                f"prompt.prediction = {PREDICTIONS[cell.id]!r}\n"
                "print('revealed:', prompt.reveal())\n"
                "prompt"
            )


# --------------------------------------------------------------------------- running


def execute(name: str, workdir: Path, *, answered: bool, lite: bool = False, extra: str = ""):
    """Run a notebook in a fresh kernel with `workdir` as its folder; an error fails the test."""
    nb = nbformat.read(CONTENT / name, as_version=4)
    if answered:
        fill_in_answers(nb, name)
    if lite:
        nb.cells.insert(1, nbformat.v4.new_code_cell(LITE_ENGINE_CELL, id="lite-engine"))
    if extra:
        nb.cells.append(nbformat.v4.new_code_cell(extra, id="test-extra"))
    workdir.mkdir(parents=True, exist_ok=True)
    client = notebook_client(nb, workdir, timeout=CELL_TIMEOUT)
    client.execute(env=kernel_env())
    return nb


def cell_text(nb, cell_id: str) -> str:
    """Everything a cell printed or displayed as text."""
    for cell in nb.cells:
        if cell.get("id") == cell_id:
            parts = []
            for out in cell.get("outputs", []):
                if out.output_type == "stream":
                    parts.append(out.text)
                elif "data" in out:
                    parts.append(out.data.get("text/plain", ""))
            return "".join(parts)
    raise AssertionError(f"no cell with id {cell_id!r}")


def widget_states(nb) -> list[dict]:
    state = nb.metadata.get("widgets", {}).get("application/vnd.jupyter.widget-state+json", {})
    return [model["state"] for model in state.get("state", {}).values()]


def evidence(workdir: Path, stem: str) -> dict:
    return json.loads((workdir / f"{stem}.json").read_text())


def assert_checks_passed(record: dict, exercise_ids: set[str]) -> None:
    checks = {entry["exercise_id"]: entry for entry in record["checks"]}
    assert set(checks) == exercise_ids, record["checks"]
    for exercise_id, entry in checks.items():
        assert entry["passed"] is True and entry["score"] == 1.0, (exercise_id, entry)


# --------------------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def lesson_run(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("lesson")
    return execute(LESSON, workdir, answered=True), workdir


@pytest.fixture(scope="module")
def packed_run(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("packed")
    # the packed-position view, driven from Python as a click would: position -> path and back
    links = (
        "view.select_position(2)\n"
        "print(view.readout)\n"
        "view.select_leaf(\"['w']\")\n"
        "print(view.readout)\n"
        "view.select_position(0, layout=1)\n"
        "print(view.readout)\n"
    )
    return execute(PACKED, workdir, answered=True, extra=links), workdir


# --------------------------------------------------------------------------- the notebooks as files


def test_notebooks_are_built_from_their_text_sources():
    result = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "build_notebooks.py"), "--check"], capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_committed_notebook_is_clean_and_starts_with_the_setup_cell(name):
    nb = nbformat.read(CONTENT / name, as_version=4)
    nbformat.validate(nb)
    first = nb.cells[0]
    assert first.cell_type == "code" and first.source == FIRST_CELL.read_text().rstrip("\n")
    for cell in nb.cells:
        if cell.cell_type == "code":
            assert cell.outputs == [] and cell.execution_count is None, cell.id


@pytest.mark.parametrize("name", [LESSON, PACKED])
def test_exercise_cells_hold_the_scaffold_not_the_solution(name):
    nb = nbformat.read(CONTENT / name, as_version=4)
    scaffolds = {exercise_tag(c): c.source for c in nb.cells if exercise_tag(c) not in (None, "quiz")}
    expected = {LESSON: {"squared_norm", "nested_scale_grad", "repair_update"}, PACKED: {"grad_over_flat_params"}}[name]
    assert set(scaffolds) == expected
    for exercise_id, source in scaffolds.items():
        assert "..." in source and "TODO" in source, exercise_id
        assert source.startswith(f"%%exercise {exercise_id}\n"), exercise_id
        solution = solution_source(SOLUTIONS / f"{exercise_id}.py", defined_names(source))
        code_lines = {ln.strip() for ln in solution.splitlines() if ln.strip() and not ln.strip().startswith("#")}
        leaked = [
            ln
            for ln in source.splitlines()
            if ln.strip() in code_lines and "..." not in ln and not ln.strip().startswith(("def ", "return", "#"))
        ]
        assert not leaked, f"{exercise_id}: solution lines in the student's cell: {leaked}"


# --------------------------------------------------------------------------- the lesson, answered


def test_lesson_tree_diagram_and_counts(lesson_run):
    nb, _ = lesson_run
    text = cell_text(nb, "params")
    assert "params\n├── weight: float32[2]\n└── bias: float32[]\n2 leaves, 3 numerical parameter values" in text


def test_lesson_hand_derivation_matches_value_and_grad(lesson_run):
    nb, _ = lesson_run
    text = cell_text(nb, "value-and-grad")
    assert "loss: 4.0" in text
    assert "grads['weight']: [-8. -4.]" in text
    assert "grads['bias']: -4.0" in text
    rows = cell_text(nb, "hand-vs-jax").splitlines()
    assert len(rows) == 2 and all(row.endswith("agree: True") for row in rows)


def test_lesson_worked_calculation_panel_shows_the_step(lesson_run):
    nb, _ = lesson_run
    tables = [s["value"] for s in widget_states(nb) if "pytree-lab-calculation" in s.get("_dom_classes", [])]
    assert tables, "no worked-calculation panel in the widget state"
    text = re.sub(r"<[^>]+>", "|", tables[0])
    for expected in (
        "prediction ŷ||1|",
        "loss L||4|",
        "dL/dŷ||-4|",
        "∂L/∂weight||[-8, -4]|",
        "∂L/∂bias||-4|",
        "[1.4, -0.8]",
        "|0.2|",
        "new loss||0.64|",
    ):
        assert expected in text, (expected, text)


def test_lesson_update_and_recorded_reference(lesson_run):
    nb, _ = lesson_run
    assert re.search(r"Before/after: 4\.0 0\.6399999\d*\n", cell_text(nb, "update"))
    result = cell_text(nb, "explorer-result")
    assert re.search(r"loss before/after: 4\.0 0\.6399999\d*", result)
    assert "before [1.0, -1.0, 0.0]" in result and "after [1.4, -0.8, 0.2]" in result
    assert "All leaves agree with the hand-derived update." in cell_text(nb, "verify-leaves")


def test_lesson_zip_pitfall_is_caught_by_shape(lesson_run):
    text = cell_text(lesson_run[0], "zip-pitfall")
    assert "grads keys:  ['bias', 'weight']" in text
    assert "zip paired by position -> bias: [0.4 0.2]" in text
    assert "['bias'] has shape () in params but (2,)" in text


def test_lesson_prediction_reveals_which_weight(lesson_run):
    text = cell_text(lesson_run[0], "predict-which-weight")
    assert "revealed: weight[0] changes more" in text


def test_lesson_swapped_gradients_run_but_miss_the_hand_update(lesson_run):
    text = cell_text(lesson_run[0], "swap-demo")
    assert "diagnose: The trees match" in text  # nothing structural differs
    rows = {line.split()[0]: line for line in text.splitlines() if line.startswith(("w_x", "w_z", "bias "))}
    assert rows["w_x"].endswith("swapped matches the hand update: False")
    assert rows["w_z"].endswith("swapped matches the hand update: False")
    assert rows["bias"].endswith("swapped matches the hand update: True")
    losses = re.search(r"right ([\d.]+) \| swapped ([\d.]+)", text)
    # by hand: prediction 4.2 -> loss 1.44 with the right gradients; 3.2 -> 0.04 swapped
    assert abs(float(losses.group(1)) - 1.44) < 1e-5 and abs(float(losses.group(2)) - 0.04) < 1e-5


def test_lesson_metadata_and_optimizer_state(lesson_run):
    nb, _ = lesson_run
    text = cell_text(nb, "metadata")
    assert "└── name: str (not differentiable)" in text
    assert "not differentiable: ['name'] (str)" in text
    assert "jax.grad refused it: TypeError" in text
    state = cell_text(nb, "optimizer-state")
    assert "optimizer state (optax.adam)" in state and "count: int32[]" in state
    assert "├── mu" in state and "└── nu" in state and "7 values" in state
    counts = cell_text(nb, "optimizer-state-count")
    assert "values in the optimizer state: 7" in counts
    assert counts.count("moment estimate") == 4 and counts.count("step counter") == 1
    assert "parameter value" not in counts
    adam = cell_text(nb, "adam-explorer")
    # From zero moments Adam's first step moves every parameter by η = 0.1 against its gradient:
    # w = [1.1, -0.9], b = 0.1, prediction 1.4, loss (1.4 - 3)^2 = 2.56 (by hand).
    assert "loss at each point visited: [4.0, 2.56," in adam
    assert "aligned with params: ['params', 'grads', 'adam mu', 'adam nu', 'updated']" in adam


def test_lesson_flatten_round_trip_and_treedef(lesson_run):
    nb, _ = lesson_run
    assert "definition: PyTreeDef({'bias': *, 'weight': *})" in cell_text(nb, "flatten")
    text = cell_text(nb, "treedef-keeps")
    assert "{'bias': 'leaf 0', 'weight': 'leaf 1'}" in text
    assert "leaves the definition expects: 2" in text


def test_lesson_exercises_pass_with_the_reference_solutions(lesson_run):
    nb, workdir = lesson_run
    norm = cell_text(nb, "check-squared-norm")
    assert "Check 1: passed, score 1.00 (2 of 2 values right)" in norm
    assert "norm_squared: Correct: the squared norm of all gradient leaves is 96." in norm
    assert "manual: Correct: the squared norm of all gradient leaves is 96." in norm
    nested = cell_text(nb, "check-nested")
    assert "Check 1: passed, score 1.00 (3 of 3 leaves right)" in nested
    assert "d loss / d scale: -4, as derived by hand" in nested
    repair = cell_text(nb, "check-repair")
    assert "Check 1: passed, score 1.00 (2 of 2 leaves right)" in repair
    assert "Loss at your updated tree: 0.64" in repair
    assert_checks_passed(
        evidence(workdir, "pytree-lesson-evidence"), {"squared_norm", "nested_scale_grad", "repair_update"}
    )


def test_lesson_repair_shows_the_real_error(lesson_run):
    text = cell_text(lesson_run[0], "repair-error")
    assert "Expected tree mismatch\nValueError: " in text
    assert "diagnose: The gradient tree is missing ['bias']" in text
    result = cell_text(lesson_run[0], "diagnose-result")
    assert result.count("still a ValueError") == 2
    assert "['bias'] has shape () in params but (2,) in the updated tree" in result


def test_lesson_quiz_and_evidence_file(lesson_run):
    nb, workdir = lesson_run
    assert "quiz answered, correct: True" in cell_text(nb, "quiz")
    assert cell_text(nb, "quiz-more-cell").count("quiz answered, correct: True") == 4
    record = evidence(workdir, "pytree-lesson-evidence")
    assert [q["correct"] for q in record["quiz"]] == [True] * 5
    assert {p["prediction_id"] for p in record["predictions"]} == {
        "gradient_leaves",
        "which_weight_changes_more",
        "treedef_keeps",
    }
    labels = {o["label"] for o in record["outputs"]}
    assert {
        "parameter and gradient tree diagram",
        "hand-derived update, computed",
        "flatten / unflatten round trip",
        "Extend to a nested model: my answer",
        "Repair a mismatched update tree: my answer",
    } <= labels
    nested = next(o for o in record["outputs"] if o["label"] == "Extend to a nested model: my answer")
    assert nested["value"]["scale"] == -4.0
    # the code that was checked is kept with each check
    assert all(c["code"].strip() for c in record["checks"]), record["checks"]
    markdown = (workdir / "pytree-lesson-evidence.md").read_text()
    assert "squared_norm" in markdown and "2 leaves, 3 numerical parameter values" in markdown
    # the aligned trees with their values, and the summary before everything else
    assert "['weight']  [ 1., -1.]  [-8., -4.]  [ 1.4, -0.8]" in markdown
    assert markdown.index("## Summary") < markdown.index("## Predictions") < markdown.index("## Checks")
    assert "| Make it yours (`squared_norm`) | passed | 1 |" in markdown


# --------------------------------------------------------------------------- packed parameters


def test_packed_dict_example(packed_run):
    text = cell_text(packed_run[0], "dict-example")
    for expected in ("prediction: [-0.5]", "loss: 0.25", "grads['w']: [-1.0, 1.0]", "grads['b']: [-1.0]"):
        assert expected in text


def test_packed_one_leaf_and_argnums(packed_run):
    nb, _ = packed_run
    one = cell_text(nb, "one-leaf")
    assert "flat_params: float32[3]\n1 leaf, 3 numerical parameter values" in one
    assert "gradient: [-1.0, 1.0, -1.0]" in one and "shape: (3,)" in one
    argnums = cell_text(nb, "argnums")
    assert "argnums=0 (flat_params): [-1.0, 1.0, -1.0]" in argnums
    # d/dx of (x @ w + b)^2 = 2 * (-0.5) * w = [-1, -2]: the data's shape, not the parameters'
    assert "[[-1.0, -2.0]]" in argnums


def test_packed_view_links_positions_to_paths(packed_run):
    nb, _ = packed_run
    text = cell_text(nb, "packed-view")
    assert "packed: [0.5, 1.0, 2.0]" in text  # dict keys sorted: b first
    assert "packed[0] <- params['b'][0]" in text
    assert "packed[1] <- params['w'][0]" in text
    assert "packed[2] <- params['w'][1]" in text
    assert "[1.0, 2.0, 0.5]" in cell_text(nb, "packed-tuple")
    links = cell_text(nb, "test-extra")
    assert "packed[2] holds params['w'][1]" in links
    assert "params['w'] occupies packed positions [1, 2]" in links
    assert "packed[0] holds (w, b)[0][0]" in links


def test_packed_task_passes_with_the_reference_solution(packed_run):
    nb, workdir = packed_run
    assert "worked example: [8.0, 12.0, 4.0]" in cell_text(nb, "worked-example")
    check = cell_text(nb, "check-flat")
    assert "Check 1: passed, score 1.00 (5 of 5 cases right)" in check
    back = cell_text(nb, "packed-vs-dict")
    assert "from the packed gradient: w [-1.0, 1.0] b [-1.0]" in back
    assert "from the dictionary:      w [-1.0, 1.0] b [-1.0]" in back
    assert_checks_passed(evidence(workdir, "packed-parameters-evidence"), {"grad_over_flat_params"})


# --------------------------------------------------------------------------- instructor demo


def test_instructor_demo_runs(tmp_path):
    nb = execute(INSTRUCTOR, tmp_path, answered=False)
    assert "sliders: ['x[0]', 'x[1]', 'target', 'learning_rate', 'weight[0]', 'weight[1]', 'bias']" in cell_text(
        nb, "default-explorer"
    )
    assert "selected: ['bias']" in cell_text(nb, "drive-explorer")
    assert "selected ['weight']" in cell_text(nb, "observe")
    assert "└── [1]\n│       ├── w: float32[2]" in cell_text(nb, "mlp")
    assert "d loss / d scale: -4.0" in cell_text(nb, "dataclass")
    assert "CustomNode(Dense[('encoder',)]" in cell_text(nb, "dataclass")  # the name is metadata
    adam = cell_text(nb, "optax-panel")
    assert "columns: ['params', 'grads', 'adam mu', 'adam nu', 'updated']" in adam
    assert "(21 points)" in adam  # the initial point and 20 real steps
    assert "['bias'] has shape () in params but (2,)" in cell_text(nb, "diagram-alone")


# --------------------------------------------------------------------------- as a student first sees them


@pytest.mark.parametrize("name", [LESSON, PACKED])
def test_unanswered_notebook_runs_and_says_not_answered(name, tmp_path):
    nb = execute(name, tmp_path, answered=False)
    check_cells = {LESSON: ["check-squared-norm", "check-nested", "check-repair"], PACKED: ["check-flat"]}[name]
    for cell_id in check_cells:
        assert "Not answered yet" in cell_text(nb, cell_id), cell_id
    stem = {LESSON: "pytree-lesson-evidence", PACKED: "packed-parameters-evidence"}[name]
    assert evidence(tmp_path, stem)["checks"] == []  # nothing was graded without an answer


# --------------------------------------------------------------------------- the Lite engine


@pytest.mark.parametrize("name", [LESSON, PACKED])
def test_notebook_runs_on_the_lite_engine(name, tmp_path):
    nb = execute(name, tmp_path, answered=True, lite=True)
    assert "computing with pytree-lab Lite engine" in cell_text(nb, "imports")
    if name == LESSON:
        assert re.search(r"Before/after: 4\.0 0\.6399999\d*\n", cell_text(nb, "update"))
        assert "grads['weight']: [-8. -4.]" in cell_text(nb, "value-and-grad")
        assert "optimizer state (optax.adam)" in cell_text(nb, "optimizer-state")  # the Lite kernel's optax
        assert "grads['bias']: -4.0" in cell_text(nb, "value-and-grad")
        assert "after [1.4, -0.8, 0.2]" in cell_text(nb, "explorer-result")
        assert "All leaves agree with the hand-derived update." in cell_text(nb, "verify-leaves")
        assert "is 96." in cell_text(nb, "check-squared-norm")
        assert "d loss / d scale: -4, as derived by hand" in cell_text(nb, "check-nested")
        assert_checks_passed(
            evidence(tmp_path, "pytree-lesson-evidence"), {"squared_norm", "nested_scale_grad", "repair_update"}
        )
    else:
        for expected in ("prediction: [-0.5]", "loss: 0.25", "grads['w']: [-1.0, 1.0]", "grads['b']: [-1.0]"):
            assert expected in cell_text(nb, "dict-example")
        assert "packed: [0.5, 1.0, 2.0]" in cell_text(nb, "packed-view")
        assert "worked example: [8.0, 12.0, 4.0]" in cell_text(nb, "worked-example")
        assert_checks_passed(evidence(tmp_path, "packed-parameters-evidence"), {"grad_over_flat_params"})


# --------------------------------------------------------------------------- natural wrong answers, in the notebooks
# Each entry: the exercise, what the student typed into its tagged cell, words the check must say.
# They are run one after another in one kernel, as a student edits and re-runs the cell: each
# attempt is inserted after the exercise's own check cell as a new exercise cell + check cell.

WRONG_IN_LESSON = [
    (
        "squared_norm",
        "norm_squared = [jnp.sum(g ** 2) for g in jax.tree.leaves(grads)]\nmanual = 96.",
        "one sum per leaf",
    ),
    (
        "squared_norm",
        "norm_squared = sum(g ** 2 for g in jax.tree.leaves(grads))\nmanual = 96.",
        "broadcasts the bias's square",
    ),
    ("squared_norm", "norm_squared = sum(jnp.mean(g ** 2) for g in jax.tree.leaves(grads))\nmanual = 96.", "jnp.mean"),
    (
        "squared_norm",
        "norm_squared = 96.\nmanual = jnp.sum(grads['weight'] ** 2) + grads['bias']",
        "without squaring it",
    ),
    ("squared_norm", "norm_squared = 1 / 0", "Your last run of the exercise cell raised ZeroDivisionError"),
    ("squared_norm", "import sys\nsys.exit()", "sys.exit()"),
    ("squared_norm", "while True:\n    pass", "still running after"),
    ("squared_norm", "import time\ntime.sleep(60)", "still running after"),
    # computed from grads (a value typed in is told to compute it), with a flood of output
    (
        "squared_norm",
        "print('x' * 10_000_000)\nnorm_squared = sum(jnp.sum(g ** 2) for g in jax.tree.leaves(grads))"
        "\nmanual = jnp.sum(grads['weight'] ** 2) + grads['bias'] ** 2",
        "passed",
    ),
    (
        "nested_scale_grad",
        "g = {'layer': {'weight': grads['weight'][::-1], 'bias': grads['bias']}, 'scale': jnp.array(-4.)}",
        "swapped",
    ),
    (
        "nested_scale_grad",
        "g = {'weight': grads['weight'], 'bias': grads['bias'], 'scale': jnp.array(-4.)}",
        "Same name, different path",
    ),
    ("nested_scale_grad", "def f(n):\n    return f(n + 1)\ng = f(0)", "RecursionError"),
    (
        "repair_update",
        "fixed = jax.tree.map(lambda p, g: p - 0.05 * g, params, {'weight': grads['weight']})",
        "ValueError",
    ),
    (
        "repair_update",
        "fixed = {'weight': params['weight'] + 0.05 * grads['weight'], 'bias': params['bias'] + 0.05 * grads['bias']}",
        "a step uphill",
    ),
    (
        "repair_update",
        "fixed = {k: p - 0.05 * g for k, p, g in zip(params, params.values(), grads.values())}",
        "your zip pairs leaves by position",
    ),
]

WRONG_IN_PACKED = [
    (
        "grad_over_flat_params",
        "def grad_over_flat_params(flat_params, x):\n    w, b = flat_params[:-1], flat_params[-1]\n"
        "    return jax.grad(lambda p: jnp.sum((x @ w + b) ** 2))(flat_params)",
        "the loss does not depend on flat_params",
    ),
    (
        "grad_over_flat_params",
        "def grad_over_flat_params(flat_params, x):\n"
        "    return jax.grad(lambda p: jnp.sum((x @ p[:2] + p[2]) ** 2))(flat_params)",
        "hidden case",
    ),
    (
        "grad_over_flat_params",
        "def grad_over_flat_params(flat_params, x):\n"
        "    return jax.grad(lambda p: jnp.mean((x @ p[:-1] + p[-1]) ** 2))(flat_params)",
        "a mean where a sum was asked",
    ),
    (
        "grad_over_flat_params",
        "def grad_over_flat_params(flat_params, x):\n"
        "    g = jax.grad(lambda p: jnp.sum((x @ p[:-1] + p[-1]) ** 2))(flat_params)\n    return (g[:-1], g[-1])",
        "tuple",
    ),
    (
        "grad_over_flat_params",
        "def grad_over_flat_params(flat_params, x):\n"
        "    return jax.grad(lambda p: jnp.sum((x @ p[:-1] + p[-1]) ** 2))(flat_params)[:-1]",
        "the bias gradient is missing",
    ),
    (
        "grad_over_flat_params",
        "def grad_over_flat_params(flat_params, x):\n"
        "    jax.grad(lambda p: jnp.sum((x @ p[:-1] + p[-1]) ** 2))(flat_params)",
        "returned None",
    ),
    (
        "grad_over_flat_params",
        "def grad_over_flat_params(flat_params, x):\n    import sys\n    sys.exit()",
        "sys.exit()",
    ),
    (
        "grad_over_flat_params",
        "def grad_over_flat_params(flat_params, x):\n    while True:\n        pass",
        "still running after",
    ),
    (
        "grad_over_flat_params",
        "def grad_over_flat_params(flat_params, x):\n"
        "    return jax.grad(lambda p: jnp.sum((x @ p[1:] + p[0]) ** 2))(flat_params)",
        "the bias is in the wrong position",
    ),
    ("grad_over_flat_params", "def grad_over_flat_params(flat_params, x)\n    return 0", "SyntaxError"),
]

SHORT_BUDGETS = """\
from pytree_lab.course.exercises import grad_over_flat_params
from pytree_lab.exercises import cells
grad_over_flat_params.CASE_BUDGET = 3.0
cells.CELL_BUDGET = 3.0
"""


def inject_wrong_answers(nb, wrong):
    check_ids = {
        "squared_norm": "check-squared-norm",
        "nested_scale_grad": "check-nested",
        "repair_update": "check-repair",
        "grad_over_flat_params": "check-flat",
    }
    nb.cells.insert(2, nbformat.v4.new_code_cell(SHORT_BUDGETS, id="short-budgets"))
    for n, (exercise_id, code, _) in reversed(list(enumerate(wrong))):
        at = next(i for i, c in enumerate(nb.cells) if c.get("id") == check_ids[exercise_id]) + 1
        attempt = nbformat.v4.new_code_cell(f"%%exercise {exercise_id}\n{code}", id=f"wrong-{n}")
        attempt.metadata["tags"] = [f"exercise:{exercise_id}"]
        nb.cells[at:at] = [
            attempt,
            nbformat.v4.new_code_cell(f'_attempt = check_cell("{exercise_id}")\n_attempt', id=f"wrong-{n}-check"),
        ]


@pytest.mark.parametrize("name, wrong", [(LESSON, WRONG_IN_LESSON), (PACKED, WRONG_IN_PACKED)])
def test_natural_wrong_answers_in_the_notebook(name, wrong, tmp_path):
    nb = nbformat.read(CONTENT / name, as_version=4)
    fill_in_answers(nb, name)
    inject_wrong_answers(nb, wrong)
    client = notebook_client(nb, tmp_path, timeout=CELL_TIMEOUT)
    client.execute(env=kernel_env())  # no cell raised: Run All went through every wrong answer
    for n, (exercise_id, code, words) in enumerate(wrong):
        said = cell_text(nb, f"wrong-{n}") + cell_text(nb, f"wrong-{n}-check")
        assert words in said, (exercise_id, code, said[:2000])
        expect_pass = code.startswith(("print(", "jax.grad ="))  # bounded output; a patch put back
        assert ("Check 1: passed" if expect_pass else "Check 1: not yet") in said, said[:2000]
    # the kernel kept going to the end: the evidence file was written after every attempt
    stem = {LESSON: "pytree-lesson-evidence", PACKED: "packed-parameters-evidence"}[name]
    assert evidence(tmp_path, stem)["checks"]


# --------------------------------------------------------------------------- cells re-run out of order


def test_lesson_cells_re_run_after_the_last_say_what_they_said(tmp_path):
    """A student goes back: after the whole lesson ran, each code cell is run again, from the last
    to the first, so each one runs after every later cell (in the same kernel, their names bound).
    Each runs without an error and prints what it printed the first time (a loop further down
    rebound `value`, the lesson's loss, and the update's cell failed on it). The evidence cell
    counts what was recorded, which the second run doubled."""
    nb = nbformat.read(CONTENT / LESSON, as_version=4)
    fill_in_answers(nb, LESSON)
    client = notebook_client(nb, tmp_path, timeout=CELL_TIMEOUT)

    def printed(cell) -> str:
        return "".join(out.text for out in cell.outputs if out.output_type == "stream")

    code = [i for i, cell in enumerate(nb.cells) if cell.cell_type == "code"]
    first, differ = {}, []
    with client.setup_kernel(env=kernel_env()):
        for i in code:
            client.execute_cell(nb.cells[i], i)
            first[nb.cells[i].id] = printed(nb.cells[i])
        for i in reversed(code):
            client.execute_cell(nb.cells[i], i)  # an error raises CellExecutionError, naming the cell
            again = printed(nb.cells[i])
            if again != first[nb.cells[i].id] and nb.cells[i].id != "evidence-save":
                differ.append((nb.cells[i].id, first[nb.cells[i].id], again))
    assert re.search(r"Before/after: 4\.0 0\.6399999\d*\n", first["update"])
    assert differ == [], "\n\n".join(f"{c}:\n{a}\n---- again:\n{b}" for c, a, b in differ)
