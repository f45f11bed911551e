"""Lesson 01 as a student works it (issue 33), in a real kernel (nbclient): the first check, then
a kernel restart with nothing saved by hand, then the rest of the lesson from the top with every
honest way of writing each answer and the wrong answers whose diagnoses were once untrue. Each
honest answer scores full marks; each wrong one gets its true sentence; the evidence file holds
every check of both kernels (a check whose cell raised with its error), without a click on
"Save my evidence". Oracles: the lesson's hand derivations (96; [-8, -4] and -4; scale -4; the
update [1.4, -0.8] and 0.2)."""

from __future__ import annotations

import json

import nbformat
from kernel_harness import notebook_client
from nbclient.util import run_sync
from test_computed_answers import HONEST
from test_notebooks import CELL_TIMEOUT, CONTENT, LESSON, PACKED, cell_text, fill_in_answers, kernel_env
from test_true_diagnoses import FLAT, FLAT_CASES, REPAIR_WITH_LR

CHECK_CELLS = {
    "squared_norm": "check-squared-norm",
    "nested_scale_grad": "check-nested",
    "repair_update": "check-repair",
    "grad_over_flat_params": "check-flat",
}
SAVE_CELLS = {"evidence", "evidence-save"}  # the lesson's "Save my evidence" cells: not run here

WRONG = {
    "print() assigned": (
        "squared_norm",
        "norm_squared = print(sum(jnp.sum(g ** 2) for g in jax.tree.leaves(grads)))\n"
        'manual = jnp.sum(grads["weight"] ** 2) + grads["bias"] ** 2',
        "norm_squared is None: print() shows a value but returns None",
    ),
    "the number of leaves": (
        "squared_norm",
        'norm_squared = len(jax.tree.leaves(grads))\nmanual = jnp.sum(grads["weight"] ** 2) + grads["bias"] ** 2',
        "That is 2, the number of gradient leaves",
    ),
    "no return in nested_loss": (
        "nested_scale_grad",
        'nested = {"layer": params, "scale": jnp.array(1.)}\n'
        "def nested_loss(p):\n"
        '    pred = p["scale"] * (jnp.dot(p["layer"]["weight"], x) + p["layer"]["bias"])\n'
        "    (pred - 3.) ** 2\n"
        "g = jax.grad(nested_loss)(nested)",
        "nested_loss returns None: did you forget `return`?",
    ),
    "scale added, not multiplied": (
        "nested_scale_grad",
        'nested = {"layer": params, "scale": jnp.array(1.)}\n'
        "def nested_loss(p):\n"
        '    pred = p["scale"] + jnp.dot(p["layer"]["weight"], x) + p["layer"]["bias"]\n'
        "    return (pred - 3.) ** 2\n"
        "g = jax.grad(nested_loss)(nested)",
        "your prediction is 2 (or 4), not 1",
    ),
    "a cell that raised": (
        "repair_update",
        "fixed = 1 / 0",
        "Your last run of the exercise cell raised ZeroDivisionError",
    ),
}


def _attempts(nb, attempts: dict[str, tuple]) -> None:
    """Each attempt as a new exercise cell and check cell after the exercise's own check cell."""
    for n, (exercise_id, code, *_) in reversed(list(enumerate(attempts.values()))):
        at = next(i for i, c in enumerate(nb.cells) if c.get("id") == CHECK_CELLS[exercise_id]) + 1
        cell = nbformat.v4.new_code_cell(f"%%exercise {exercise_id}\n{code}", id=f"attempt-{n}")
        cell.metadata["tags"] = [f"exercise:{exercise_id}"]
        check = nbformat.v4.new_code_cell(f'_card = check_cell("{exercise_id}")\n_card', id=f"attempt-{n}-check")
        nb.cells[at:at] = [cell, check]


# a repair that reads the student's own lr, checked again after section 13's `for lr in (0.05, 0.01)`
LATE = {"repair with the notebook's lr": ("repair_update", REPAIR_WITH_LR)}


def test_lesson_01_honest_and_wrong_answers_with_a_restart_between_checks(tmp_path):
    nb = nbformat.read(CONTENT / LESSON, as_version=4)
    fill_in_answers(nb, LESSON)
    nb.cells = [c for c in nb.cells if c.get("id") not in SAVE_CELLS]
    attempts = {**HONEST, **WRONG, **LATE}  # every exercise of both is lesson 01's
    _attempts(nb, attempts)
    late = f"attempt-{len(attempts) - 1}"
    at = next(i for i, c in enumerate(nb.cells) if c.get("id") == late)
    nb.cells.insert(at, nbformat.v4.new_code_cell("lr = 0.05", id="my-lr"))
    at = next(i for i, c in enumerate(nb.cells) if c.get("id") == "diagnose-result") + 1
    nb.cells.insert(at, nbformat.v4.new_code_cell('_card = check_cell("repair_update")\n_card', id="late-check"))
    first_check = next(i for i, c in enumerate(nb.cells) if c.get("id") == "check-squared-norm")
    client = notebook_client(nb, tmp_path, timeout=CELL_TIMEOUT)
    with client.setup_kernel(env=kernel_env()):
        for index in range(first_check + 1):  # up to the first check
            client.execute_cell(nb.cells[index], index)
        record = json.loads((tmp_path / "pytree-lesson-evidence.json").read_text())
        assert [(c["exercise_id"], c["passed"]) for c in record["checks"]] == [("squared_norm", True)]
        run_sync(client.km.restart_kernel)(now=True)  # Kernel > Restart: this kernel's records are gone
        run_sync(client.kc.wait_for_ready)(timeout=120)
        for index, cell in enumerate(nb.cells):  # Run All in the new kernel
            client.execute_cell(cell, index)

    said = {
        name: cell_text(nb, f"attempt-{n}") + cell_text(nb, f"attempt-{n}-check") for n, name in enumerate(attempts)
    }
    for name in {**HONEST, **LATE}:
        assert "Check 1: passed, score 1.00" in said[name], (name, said[name][:2000])
    assert "passed, score 1.00" in cell_text(nb, "late-check"), cell_text(nb, "late-check")[:2000]
    # lesson 01 says under the cell what lesson 02 says: the loss returned nothing
    no_return = f"attempt-{list(attempts).index('no return in nested_loss')}"
    assert "nested_loss returns None: did you forget `return`?" in cell_text(nb, no_return), cell_text(nb, no_return)
    for name, (_, _, words) in WRONG.items():
        assert words in said[name], (name, said[name][:2000])
        assert "Check 1: not yet" in said[name], (name, said[name][:2000])

    record = json.loads((tmp_path / "pytree-lesson-evidence.json").read_text())
    assert len(record["sessions"]) == 2
    checks = record["checks"]
    # the first kernel's check, then each check of the second: the lesson's three, every attempt
    # and the repair's late check
    assert len(checks) == 1 + 3 + len(attempts) + 1, [c["exercise_id"] for c in checks]
    assert checks[0]["session"] == record["sessions"][0] and checks[0]["passed"]
    assert all(c["session"] == record["sessions"][1] for c in checks[1:])
    assert sum(c["passed"] and c["score"] == 1.0 for c in checks) == 1 + 3 + len(HONEST) + len(LATE) + 1
    raised = [c for c in checks if c.get("error")]
    assert [(c["exercise_id"], c["error"]) for c in raised] == [
        ("nested_scale_grad", "TypeError: Gradient only defined for scalar-output functions. Output was None."),
        ("repair_update", "ZeroDivisionError: division by zero"),
    ]
    markdown = (tmp_path / "pytree-lesson-evidence.md").read_text()
    assert "| Make it yours (`squared_norm`) | passed |" in markdown


def test_lesson_02_wrong_packed_gradients_get_their_sentence_and_are_all_kept(tmp_path):
    nb = nbformat.read(CONTENT / PACKED, as_version=4)
    fill_in_answers(nb, PACKED)
    nb.cells = [c for c in nb.cells if c.get("id") not in SAVE_CELLS]
    attempts = {
        case: ("grad_over_flat_params", FLAT.format(body=body).rstrip(), said)
        for case, (body, said) in FLAT_CASES.items()
    }
    _attempts(nb, attempts)
    notebook_client(nb, tmp_path, timeout=CELL_TIMEOUT).execute(env=kernel_env())
    for n, (case, (_, _, words)) in enumerate(attempts.items()):
        said = cell_text(nb, f"attempt-{n}") + cell_text(nb, f"attempt-{n}-check")
        assert words in said and "Check 1: not yet" in said, (case, said[:2000])
    record = json.loads((tmp_path / "packed-parameters-evidence.json").read_text())
    assert [c["passed"] for c in record["checks"]] == [True] + [False] * len(attempts)
