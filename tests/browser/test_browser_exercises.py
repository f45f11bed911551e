"""The exercise widgets in a real JupyterLab: clicks reach Python, results are announced in the
aria-live region, student text stays text, a reference solution appears only after checks, the
quiz locks after its first answer, PackedView links leaves and positions element by element, and
the evidence file lands in the notebook's folder."""

import json
import pathlib

import pytest

from .harness import DARK, LIGHT, Timeouts, set_theme

pytestmark = pytest.mark.browser

SHOTS = pathlib.Path(__file__).resolve().parents[2] / "artifacts" / "screenshots"

CELLS = [
    # 0: two answers to the packed-parameters task; the first check compiles, so warm it up here
    """\
import jax, jax.numpy as jnp
import pytree_lab
from pytree_lab.course import check, check_button, grad_structure_quiz, lesson_prediction
from pytree_lab.exercises import Evidence, EvidenceButton

def mean_version(flat_params, x):
    return jax.grad(lambda p: jnp.mean((x @ p[:-1] + p[-1]) ** 2))(flat_params)

def sum_version(flat_params, x):
    return jax.grad(lambda p: jnp.sum((x @ p[:-1] + p[-1]) ** 2))(flat_params)

check("grad_over_flat_params", mean_version, evidence=Evidence())
answers = {"flat": mean_version}
flat_button = check_button("grad_over_flat_params", lambda: answers["flat"])
flat_button""",
    # 1: a tree answer carrying markup in a string leaf
    """\
g = {"layer": {"weight": jnp.array([-8.0, -4.0]), "bias": jnp.array(-4.0)}, "scale": jnp.array(-4.0),
     "name": "<img src=x onerror=window.__ptl_injected=1>"}
tree_button = check_button("nested_scale_grad", "g")
tree_button""",
    # 2
    """\
prompt = lesson_prediction("which_weight_changes_more")
prompt""",
    # 3
    """\
quiz = grad_structure_quiz()
quiz""",
    # 4
    """\
save_button = EvidenceButton()
save_button""",
    # 5: a check button nobody has clicked yet, of a practice exercise (the course's are graded:
    # they reveal no solution)
    """\
import dataclasses
from pytree_lab.course import exercise
from pytree_lab.exercises import CheckButton
fresh = CheckButton(dataclasses.replace(exercise("grad_over_flat_params"), graded=False), lambda: mean_version)
fresh""",
    # 6: the packed view, a dict layout beside a tuple layout
    """\
from pytree_lab import PackedView
params = {"w": jnp.array([1.0, 2.0]), "b": jnp.array([0.5])}
view = PackedView(params, layouts={"(w, b)": (params["w"], params["b"])})
view""",
]


@pytest.fixture(scope="module")
def exercises_nb(open_module_nb):
    nb = open_module_nb(CELLS, wait_for=".ptl-ex")
    outputs = nb.panel.locator(".jp-CodeCell .jp-OutputArea")
    outputs.nth(len(CELLS) - 1).locator(".ptl-packed").wait_for()
    widgets = [outputs.nth(i).locator(".ptl-ex") for i in range(len(CELLS) - 1)]
    return nb, widgets + [outputs.nth(len(CELLS) - 1).locator(".ptl-packed")]


def wait_text(locator, text: str, timeout: float = Timeouts.ROUND_TRIP) -> None:
    locator.page.wait_for_function(
        "([el, text]) => el.textContent === text",
        arg=[locator.element_handle(), text],
        timeout=Timeouts.ms(timeout),
    )


def test_check_button_click_is_checked_in_python_and_announced(exercises_nb):
    nb, (flat, *_) = exercises_nb
    status = flat.locator(".ptl-ex-status")
    live = flat.locator('[aria-live="polite"]')
    assert live.count() == 1 and live.get_attribute("role") == "status"
    assert live.locator(".ptl-ex-status").count() == 1  # the announced text sits in the live region
    assert flat.locator(".ptl-ex-title").text_content() == "Gradient of packed parameters"

    flat.get_by_role("button", name="Check my answer").click()
    wait_text(status, "Check 1: not yet, score 0.20 (1 of 5 cases right).")
    assert nb.value("flat_button.status") == "failed"
    assert nb.value("flat_button.result.score") == pytest.approx(0.2)
    feedback = flat.locator(".ptl-ex-feedback")
    assert feedback.is_visible()
    assert "a mean where a sum was asked" in feedback.text_content()
    assert feedback.text_content() == nb.value("flat_button.feedback")
    assert flat.get_attribute("data-status") == "failed"

    nb.run('answers["flat"] = sum_version')  # the student fixes the cell
    flat.get_by_role("button", name="Check my answer").click()
    wait_text(status, "Check 2: passed, score 1.00 (5 of 5 cases right).")
    assert nb.value("flat_button.status") == "passed"
    assert flat.get_attribute("data-status") == "passed"


def test_student_markup_in_feedback_is_shown_as_text(exercises_nb):
    nb, (_, tree, *_) = exercises_nb
    tree.get_by_role("button", name="Check my answer").click()
    status = tree.locator(".ptl-ex-status")
    wait_text(status, "Check 1: not yet, score 0.75 (3 of 4 parts right).")
    feedback = tree.locator(".ptl-ex-feedback")
    assert "Extra leaf ['name'] is text ('<img src=x onerror" in feedback.text_content()
    assert feedback.locator("img").count() == 0
    assert nb.page.evaluate("() => window.__ptl_injected") is None


def test_prediction_then_reveal(exercises_nb):
    nb, (_, _, prompt, *_) = exercises_nb
    assert prompt.locator("label.ptl-ex-prompt").text_content() == "Which weight changes more, and why?"
    reveal = prompt.get_by_role("button", name="Reveal the answer")
    status = prompt.locator(".ptl-ex-status")
    reveal.click()
    wait_text(status, "Type your prediction first, then reveal the answer.")
    assert nb.value("prompt.revealed") is False

    box = prompt.get_by_label("Which weight changes more, and why?")
    box.fill("weight[0]: its input 2 is larger")
    reveal.click()
    nb.kernel.wait_for("prompt.revealed", lambda v: v is True)
    answer = nb.value("prompt.answer")
    assert answer.startswith("weight[0] changes more: weight[0] moves by 0.4 and weight[1] by 0.2")
    wait_text(status, "Revealed. Compare it with your prediction:")
    # the answer is read with the announcement: it is inside the same live region
    assert prompt.locator('[aria-live="polite"] .ptl-ex-answer').text_content() == answer
    assert nb.value("prompt.prediction") == "weight[0]: its input 2 is larger"
    assert box.get_attribute("readonly") is not None and reveal.is_disabled()


def test_quiz_choice_and_explanation(exercises_nb):
    nb, (*_, quiz, _, _, _) = exercises_nb
    assert quiz.locator("legend").text_content() == "What structure does grad(loss)(params) have?"
    quiz.get_by_label("A pytree corresponding to params").check()
    nb.kernel.wait_for("quiz.selected", lambda v: v == 1)
    quiz.get_by_role("button", name="Check answer").click()
    status = quiz.locator(".ptl-ex-status")
    nb.kernel.wait_for("quiz.answered", lambda v: v is True)
    wait_text(status, "Correct.")
    explanation = quiz.locator('[aria-live="polite"] .ptl-ex-explanation')
    assert explanation.is_visible()
    assert explanation.text_content() == (
        "The answer: A pytree corresponding to params. The differentiated input determines the gradient "
        "structure. Each floating-point parameter leaf gets a corresponding gradient leaf."
    )
    # locked: every choice disabled, the check button too, and each choice explained
    radios = quiz.locator("input[type=radio]")
    assert radios.count() == 4 and all(radios.nth(i).is_disabled() for i in range(4))
    assert quiz.get_by_role("button", name="Check answer").is_disabled()
    notes = quiz.locator(".ptl-ex-note")
    assert notes.nth(0).text_content().startswith("Not this one:")
    assert "sorting" in notes.nth(3).text_content()
    # a page write of another choice is refused by Python: the first answer stays
    nb.run("quiz.set_state({'selected': 0}); quiz.submit()")
    assert nb.value("[quiz.selected, quiz.correct, len(quiz.evidence.quiz)]") == [1, True, 1]


def test_reference_solution_only_after_checks(exercises_nb):
    nb, (*_, widget, _) = exercises_nb
    reveal = widget.get_by_role("button", name="Show a reference solution")
    assert reveal.is_hidden()  # not offered before an attempt
    nb.run("fresh.set_state({'solution': 'forged'})")  # nor can the page write it
    assert nb.value("fresh.solution") == ""
    for n in (1, 2):
        widget.get_by_role("button", name="Check my answer").click()
        nb.kernel.wait_for("[fresh.attempts, fresh.busy]", lambda v, n=n: v == [n, False])
        wait_text(widget.locator(".ptl-ex-status"), nb.value("fresh.announcement"))
    assert "A reference solution is available" in widget.locator(".ptl-ex-status").text_content()
    assert reveal.is_visible()
    reveal.click()
    solution = widget.locator(".ptl-ex-solution")
    solution.wait_for()
    assert "return jax.grad(loss)(flat_params)" in solution.text_content()
    assert solution.text_content() == nb.value("fresh.solution")
    assert reveal.is_hidden()


def test_packed_view_both_ways_at_element_level(exercises_nb):
    nb, (*_, view) = exercises_nb
    dict_layout = view.locator('[data-layout="0"]')
    dict_layout.get_by_role("button", name="params['w']").click()
    nb.kernel.wait_for("view.highlight.get('positions')", lambda v: v == [1, 2])
    pressed = dict_layout.locator('.ptl-packed-cell[aria-pressed="true"]')
    pressed.nth(1).wait_for()
    assert [pressed.nth(i).get_attribute("data-position") for i in range(pressed.count())] == ["1", "2"]
    lit = dict_layout.locator('.ptl-packed-element[data-lit="true"]')
    assert [lit.nth(i).get_attribute("data-label") for i in range(lit.count())] == ["params['w'][0]", "params['w'][1]"]
    # a position lights its one element, not the whole leaf
    dict_layout.locator('.ptl-packed-cell[data-position="2"]').click()
    nb.kernel.wait_for("view.readout", lambda v: v == "packed[2] holds params['w'][1]")
    wait_text(view.locator(".ptl-packed-readout"), "packed[2] holds params['w'][1]")
    lit.first.wait_for()
    view.page.wait_for_function(
        "(el) => el.querySelectorAll('.ptl-packed-element[data-lit=\"true\"]').length === 1",
        arg=dict_layout.element_handle(),
        timeout=Timeouts.ms(Timeouts.ROUND_TRIP),
    )
    assert lit.first.get_attribute("data-label") == "params['w'][1]"
    # positions are integer indices, with the values beside them; the tuple layout is weights first
    cells = dict_layout.locator(".ptl-packed-index")
    assert [cells.nth(i).text_content() for i in range(3)] == ["0", "1", "2"]
    tuple_values = view.locator('[data-layout="1"] .ptl-packed-value')
    assert [tuple_values.nth(i).text_content() for i in range(3)] == ["1", "2", "0.5"]


def test_a_packed_view_past_its_cap_draws_the_cap_and_counts_the_rest(open_nb):
    nb = open_nb(
        [
            "import numpy as np\n"
            "from pytree_lab import PackedView\n"
            "big = PackedView({'w': np.arange(3000, dtype=np.float32).reshape(60, 50), 'b': np.zeros(2, np.float32)})\n"
            "big"
        ],
        wait_for=".ptl-packed",
    )
    view = nb.panel.locator(".ptl-packed").first
    view.locator(".ptl-packed-more").first.wait_for()
    cap = nb.value("PackedView.MAX_DRAWN")
    assert view.locator(".ptl-packed-cell").count() == cap
    assert view.locator(".ptl-packed-more").first.text_content() == f"… {3002 - cap:,} more positions, not drawn"
    assert view.locator(".ptl-packed-more").nth(1).text_content() == f"… {3000 - (cap - 2):,} more elements"
    view.get_by_role("button", name="params['w']").click()
    nb.kernel.wait_for("big.readout", lambda v: v == "params['w'] occupies packed positions 2 to 3001 (3,000 values)")
    wait_text(view.locator(".ptl-packed-readout"), "params['w'] occupies packed positions 2 to 3001 (3,000 values)")


def test_evidence_button_writes_into_the_notebooks_folder(exercises_nb):
    nb, (*_, save, _, _) = exercises_nb
    nb.run('pytree_lab.check("squared_norm", 96.0)')
    save.get_by_role("button", name="Save my evidence").click()
    nb.kernel.wait_for("save_button.saved_path", bool)
    notebook = (nb.server.root_dir / nb.path).resolve()
    markdown = notebook.parent / "pytree-lab-evidence.md"
    assert pathlib.Path(nb.value("save_button.saved_path")).resolve() == markdown
    wait_text(save.locator(".ptl-ex-status"), nb.value("save_button.announcement"))
    text = markdown.read_text()
    assert text.index("## Summary") < text.index("## Checks")
    assert "Make it yours (`squared_norm`): passed, score 1.00" in text
    assert json.loads(markdown.with_suffix(".json").read_text())["checks"][-1]["exercise_id"] == "squared_norm"


def test_after_a_kernel_restart_the_exercise_widgets_say_so_when_clicked(open_nb):
    """A check card, a quiz, a prediction and the evidence button of a restarted kernel answer
    no click: clicking one tells the student why and what to run, as the sliders do."""
    from .harness import _FIND_PANEL

    nb = open_nb(
        [
            "from pytree_lab.course import check_button, grad_structure_quiz, lesson_prediction\n"
            "from pytree_lab.exercises import EvidenceButton\n"
            "norm_squared = 96.0\n"
            "card = check_button('squared_norm')\n"
            "card",
            "grad_structure_quiz()",
            "lesson_prediction('which_weight_changes_more')",
            "EvidenceButton()",
        ],
        wait_for=".ptl-ex-evidence",
    )
    notice = nb.panel.locator(".pytree-lab-kernel-gone")
    card = nb.panel.locator(".ptl-ex-check").first
    card.get_by_role("button", name="Check my answer").click()
    nb.kernel.wait_for("card.status", lambda s: s in ("passed", "failed"), Timeouts.ROUND_TRIP * 4)
    wait_text(card.locator(".ptl-ex-status"), nb.value("card.announcement"))
    assert notice.count() == 0  # a live kernel: no notice

    nb.page.evaluate(
        "async (path) => {" + _FIND_PANEL + "await find(path).sessionContext.session.kernel.restart(); }",
        nb.path,
    )
    assert nb.value("'card' in globals()") is False
    nb.panel.locator("[data-ptl-kernel-gone]").first.wait_for(
        state="attached", timeout=Timeouts.ms(Timeouts.ROUND_TRIP)
    )
    assert notice.count() == 0  # said when used, not all over the notebook at once
    clicks = [
        card.get_by_role("button", name="Check my answer"),
        nb.panel.locator(".ptl-ex-quiz").first.get_by_role("button", name="Check answer"),
        nb.panel.locator(".ptl-ex-predict").first.get_by_role("button", name="Reveal the answer"),
        nb.panel.locator(".ptl-ex-evidence").first.get_by_role("button", name="Save my evidence"),
    ]
    for n, button in enumerate(clicks, start=1):
        button.click()
        nb.page.wait_for_function(
            "(n) => document.querySelectorAll('.pytree-lab-kernel-gone').length >= n",
            arg=n,
            timeout=Timeouts.ms(Timeouts.ROUND_TRIP),
        )
    texts = notice.all_inner_texts()
    assert len(texts) == 4, texts
    for text in texts:
        assert "kernel that was restarted or stopped" in text and "Run its cell again" in text, text
    # each notice sits in the widget that was clicked
    for kind in ("check", "quiz", "predict", "evidence"):
        widget = nb.panel.locator(f".ptl-ex-{kind}").first.locator("xpath=..")
        assert widget.locator(".pytree-lab-kernel-gone").count() == 1, kind
    assert card.locator(".ptl-ex-status").text_content().startswith("Check 1: ")  # the last live verdict stays
    assert nb.value("1 + 1") == 2  # the new kernel heard nothing of the clicks and runs code
    SHOTS.mkdir(parents=True, exist_ok=True)
    try:
        for theme, name in ((LIGHT, "light"), (DARK, "dark")):
            set_theme(nb.page, theme)
            path = SHOTS / f"check-card-kernel-gone-{name}.png"
            card.locator("xpath=..").screenshot(path=str(path))
            assert path.stat().st_size > 5_000
    finally:
        set_theme(nb.page, LIGHT)
