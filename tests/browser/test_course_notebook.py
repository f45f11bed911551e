"""The pytree lesson notebook itself, in a real JupyterLab page: run it, then use its widgets.

The notebook is the committed content/01_pytrees.ipynb with the exercise scaffolds replaced by
the reference solutions (course_source/solutions/), as a student who has done the work would have it.
Each browser action ends in an assertion on the page (the aria-live announcement) and on the
Python state in the notebook's kernel.
"""

from __future__ import annotations

import nbformat
import pytest

from . import harness
from .harness import Timeouts

pytestmark = pytest.mark.browser

# tests/ is on sys.path for the browser package (pytest's prepend import mode), as for any test
from test_notebooks import CONTENT, LESSON, fill_in_answers  # noqa: E402

# Tag a cell's DOM node with its notebook cell id, so locators can find a cell by id.
_TAG_CELLS = (
    """
async (path) => {"""
    + harness._FIND_PANEL
    + """
  const w = find(path);
  for (const cell of w.content.widgets) cell.node.dataset.pytreeLabCell = cell.model.id;
}
"""
)


def open_course_notebook(page, server, nb, name: str) -> harness.Notebook:
    """Open a whole .ipynb (markdown and tags included) through the harness and run it.

    `harness.open_notebook` writes plain code cells; here the notebook file is written as it is
    and the harness is told not to overwrite it, so opening, running and error collection are
    exactly the harness's.
    """
    nbformat.write(nb, server.root_dir / name)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(harness, "write_notebook", lambda root, name, cells: name)
        opened = harness.open_notebook(page, server, name, [], wait_for='[role="tree"]')
    page.evaluate(_TAG_CELLS, name)
    return opened


@pytest.fixture(scope="module")
def lesson(lab_page, lab_server):
    nb = nbformat.read(CONTENT / LESSON, as_version=4)
    # the solutions go in; predictions and the quiz are left for the page to answer
    fill_in_answers(nb, LESSON, interactions=False)
    opened = open_course_notebook(lab_page, lab_server, nb, "course_lesson.ipynb")
    yield opened
    opened.close()


def cell(nb, cell_id: str):
    return nb.panel.locator(f'[data-pytree-lab-cell="{cell_id}"]')


def announcement(widget) -> str:
    return widget.locator('[aria-live="polite"]').first.inner_text().strip()


def wait_announcement(widget, text: str) -> None:
    widget.locator('[aria-live="polite"]', has_text=text).first.wait_for(timeout=Timeouts.ms(Timeouts.ROUND_TRIP))


def test_check_button_announces_the_result_and_python_holds_it(lesson):
    widget = cell(lesson, "check-squared-norm").locator("section.ptl-ex-check")
    widget.scroll_into_view_if_needed()
    # the run itself checked once; the printed result is in the cell's output
    assert "is 96." in cell(lesson, "check-squared-norm").inner_text()
    assert lesson.value("squared_norm_check.attempts") == 1

    widget.get_by_role("button", name="Check my answer").click()
    wait_announcement(widget, "Check 2")
    assert announcement(widget).startswith("Check 2: passed, score 1.00")
    state = lesson.wait_for_value("squared_norm_check.attempts", 2)
    assert state == 2
    assert lesson.value("[squared_norm_check.result.passed, squared_norm_check.result.score]") == [True, 1.0]

    # the button reads the variable when clicked: a wrong answer now is graded as wrong
    lesson.run("norm_squared = jnp.sqrt(norm_squared)")  # a new value, without an exercise-cell run
    widget.get_by_role("button", name="Check my answer").click()
    wait_announcement(widget, "Check 3")
    assert announcement(widget).startswith("Check 3: not yet, score 0.50 (1 of 2 values right)")
    # the square root was taken outside the exercise cell: the cell run again at the other cases
    # gives the squared norm, so no near-miss explains every case and none is named
    feedback = widget.locator(".ptl-ex-feedback").inner_text()
    assert "norm_squared: You gave 9.798, which is not the squared norm of all gradient leaves." in feedback
    assert "no square root" not in feedback
    assert lesson.value("[squared_norm_check.result.passed, squared_norm_check.result.score]") == [False, 0.5]
    lesson.run("norm_squared = norm_squared ** 2")


def test_quiz_in_the_page(lesson):
    widget = cell(lesson, "quiz").locator("section.ptl-ex-quiz")  # the first of the lesson's questions
    widget.scroll_into_view_if_needed()
    widget.locator("label.ptl-ex-choice", has_text="A pytree corresponding to params").click()
    lesson.wait_for_value("quiz_grad.selected", 1)
    widget.get_by_role("button", name="Check answer").click()
    wait_announcement(widget, "Correct.")
    assert "Each floating-point parameter leaf gets a corresponding gradient leaf" in announcement(widget)
    assert lesson.value("[quiz_grad.answered, quiz_grad.correct]") == [True, True]
    # locked after the first answer
    assert widget.get_by_role("button", name="Check answer").is_disabled()
    assert widget.locator("input[type=radio]").first.is_disabled()


def test_prediction_typed_then_revealed(lesson):
    widget = cell(lesson, "predict-which-weight").locator("section.ptl-ex-predict")
    widget.scroll_into_view_if_needed()
    widget.locator("textarea").fill("weight[0], because its input is 2")
    widget.get_by_role("button", name="Reveal the answer").click()
    wait_announcement(widget, "weight[0] changes more")
    predictions = lesson.value(
        "[(p['prediction'], p['answer']) for p in __import__('pytree_lab').exercises.default_evidence().predictions]"
    )
    assert len(predictions) == 1
    typed, answer = predictions[0]
    assert typed == "weight[0], because its input is 2" and answer.startswith("weight[0] changes more")


def test_the_course_notebooks_open_unmodified(lab_page, lab_server):
    """Opening a lesson (its kernel started, nothing run) leaves it unmodified: no unsaved-changes
    mark, nothing for autosave to write. JupyterLab itself stores the running kernel's
    language_info in every notebook it opens (a notebook saved under another Python version is
    marked modified); the copies here carry this kernel's, so anything else that modified a lesson
    on open (a cell, its metadata, a widget) fails this test."""
    import json
    import subprocess
    import sys

    # what the kernel the server starts (this venv's ipykernel) answers, read in a process of its
    # own: importing ipykernel here would hand this worker's later widgets kernel-less comms
    language_info = json.loads(
        subprocess.run(
            [
                sys.executable,
                "-c",
                "import json; from ipykernel.ipkernel import IPythonKernel as K; print(json.dumps(K.language_info))",
            ],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    )
    seen = {}
    for name in (LESSON, "02_packed_parameters.ipynb", "03_instructor_demo.ipynb"):
        copy = f"unopened_{name}"
        nb = json.loads((CONTENT / name).read_text())
        nb["metadata"]["language_info"] = language_info
        (lab_server.root_dir / copy).write_text(json.dumps(nb, indent=1))
        before = (lab_server.root_dir / copy).read_bytes()
        seen[name] = lab_page.evaluate(
            "async (path) => {"
            + harness._FIND_PANEL
            + """
              const app = window.jupyterapp;
              await app.commands.execute('docmanager:open', {path, factory: 'Notebook'});
              const w = find(path);
              await w.context.ready;
              await w.sessionContext.ready;
              await w.sessionContext.session.kernel.info;
              // the kernel's language_info reaches the model after kernel_info: give it a moment
              await new Promise(r => setTimeout(r, 1500));
              const tab = app.shell.currentWidget === w && document.querySelector(
                '#jp-main-dock-panel .lm-TabBar-tab.lm-mod-current');
              const out = {dirty: w.context.model.dirty,
                           tabDirty: !!(tab && tab.classList.contains('jp-mod-dirty')),
                           kernel: w.sessionContext.session.kernel.name};
              await w.sessionContext.shutdown();
              w.dispose();
              return out;
            }""",
            copy,
        )
        assert (lab_server.root_dir / copy).read_bytes() == before, name
    assert seen == {name: {"dirty": False, "tabDirty": False, "kernel": "python3"} for name in seen}, seen
