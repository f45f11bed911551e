"""Keys and focus stay inside pytree-lab widgets, in a real JupyterLab (issue 18, section 2).

Typing in any widget (a revealed prediction's read-only box, a quiz, a rating, a slider, the
diagram, the packed view, a button, a locked choice) never reaches the notebook's command
mode: the notebook keeps its cells, their types and their sources. Radio groups and ids are
unique per widget; a quiz answers from the keyboard alone and the focus never falls to <body>.
"""

import time

import pytest

from .harness import Timeouts

pytestmark = pytest.mark.browser

CELLS = [
    # 0
    """\
import jax.numpy as jnp
import pytree_lab
from pytree_lab.course import check_button, grad_structure_quiz, lesson_prediction
from pytree_lab.slider import Slider
prompt = lesson_prediction("which_weight_changes_more")
prompt""",
    # 1, 2: two quizzes on one page
    "quiz_a = grad_structure_quiz()\nquiz_a",
    "quiz_b = grad_structure_quiz()\nquiz_b",
    # 3
    "s = Slider(1.0, description='x', min=-2.0, max=6.0, step=0.5)\ns",
    # 4
    """\
params = {"w": jnp.array([1.0, 2.0]), "b": jnp.array(0.5)}
diagram = pytree_lab.PytreeDiagram(params)
diagram""",
    # 5
    """\
view = pytree_lab.PackedView(params, layouts={"(w, b)": (params["w"], params["b"])})
view""",
    # 6
    'button = check_button("grad_over_flat_params", lambda: None)\nbutton',
    # 7: a Markdown-like marker: the last cell, so a new cell or a deleted one changes the count
    "'end'",
]

# What a student types by accident or habit: every single-key command-mode shortcut that edits
# the notebook (insert above/below, delete, cut, paste, to Markdown / raw / code, undo, merge).
# Escape is not among them: it leaves the widget for its cell (test_escape_and_shift_or_ctrl_enter...)
LEAK_KEYS = ["b", "a", "d", "d", "m", "r", "y", "x", "c", "v", "z", "Shift+M", "1", "d", "d"]


@pytest.fixture(scope="module")
def keys_nb(open_module_nb):
    nb = open_module_nb(CELLS, wait_for=".ptl-packed")
    outputs = nb.panel.locator(".jp-CodeCell .jp-OutputArea")
    outputs.nth(4).locator('[role="treeitem"]').first.wait_for()
    return nb, outputs


def cells(nb) -> list:
    """(type, source) of every cell of the notebook, from the page's own notebook model."""
    return nb.page.evaluate(
        """(path) => {
          for (const w of window.jupyterapp.shell.widgets('main')) {
            if (w.context && w.context.path === path && w.content && w.content.model) {
              const cells = w.content.model.cells, out = [];
              for (let i = 0; i < cells.length; i++)
                out.push([cells.get(i).type, cells.get(i).sharedModel.getSource()]);
              return out;
            }
          }
          return null;
        }""",
        nb.path,
    )


def type_keys(page) -> None:
    for key in LEAK_KEYS:
        page.keyboard.press(key)


def assert_cells_kept(nb, before, where: str) -> None:
    after = cells(nb)
    assert after == before, f"keys typed in {where} changed the notebook: {before} -> {after}"


def focus_inside(locator) -> bool:
    return locator.evaluate(
        "(root) => root.contains(document.activeElement) && document.activeElement !== document.body"
    )


def test_keys_typed_in_every_widget_leave_the_notebook_as_it_was(keys_nb):
    nb, outputs = keys_nb
    page = nb.page
    before = cells(nb)
    assert len(before) == len(CELLS) and all(kind == "code" for kind, _ in before)

    # the prediction: typed text is the student's; after the reveal its box is read-only
    prompt = outputs.nth(0).locator(".ptl-ex")
    box = prompt.locator("textarea")
    box.click()
    page.keyboard.type("bd dm")
    nb.wait_for_value("prompt.prediction", "bd dm")
    prompt.get_by_role("button", name="Reveal the answer").click()
    nb.kernel.wait_for("prompt.revealed", lambda v: v is True)
    box.click()
    type_keys(page)
    assert_cells_kept(nb, before, "the revealed prediction's read-only box")
    assert nb.value("prompt.prediction") == "bd dm"  # read-only: the keys changed nothing
    # the rating, shown after the reveal
    prompt.get_by_label("partly right").click()
    nb.wait_for_value("prompt.self_rating", "partly")
    type_keys(page)
    assert_cells_kept(nb, before, "the rating")
    # the locked Reveal button and the prompt's own text
    prompt.locator(".ptl-ex-title").click()
    type_keys(page)
    assert_cells_kept(nb, before, "the prediction's title")

    # a quiz choice, then the same choice once the quiz is answered (disabled)
    quiz = outputs.nth(1).locator(".ptl-ex")
    quiz.locator('input[type="radio"]').nth(1).click()
    nb.wait_for_value("quiz_a.selected", 1)
    type_keys(page)
    assert_cells_kept(nb, before, "a quiz choice")
    quiz.get_by_role("button", name="Check answer").click()
    nb.kernel.wait_for("quiz_a.answered", lambda v: v is True)
    quiz.locator(".ptl-ex-choice").nth(0).click(force=True)  # a locked choice
    type_keys(page)
    assert_cells_kept(nb, before, "a locked quiz choice")

    # the slider: letters do not move it; the notebook does not see them
    handle = outputs.nth(3).locator('input[type="range"]')
    handle.focus()
    type_keys(page)
    assert_cells_kept(nb, before, "the slider")
    assert nb.value("s.value") == 1.0

    # the diagram: a row, then its header text
    diagram = outputs.nth(4)
    diagram.locator('[role="treeitem"]').first.click()
    type_keys(page)
    assert_cells_kept(nb, before, "a diagram row")
    diagram.locator(".ptl-head").click(force=True)
    type_keys(page)
    assert_cells_kept(nb, before, "the diagram's header")

    # the packed view's position buttons
    outputs.nth(5).locator(".ptl-packed-cell").first.click()
    type_keys(page)
    assert_cells_kept(nb, before, "the packed view")

    # a check button, focused, and its task text
    check = outputs.nth(6).locator(".ptl-ex")
    check.get_by_role("button", name="Check my answer").focus()
    type_keys(page)
    check.locator(".ptl-ex-task").click()
    type_keys(page)
    assert_cells_kept(nb, before, "a check button")

    # the notebook itself still answers its shortcuts: the test's keys do reach it from a cell
    nb.panel.locator(".jp-Cell").nth(7).locator(".jp-InputPrompt").click()
    page.keyboard.press("Escape")
    page.keyboard.press("b")
    page.wait_for_function(
        "([path, n]) => [...window.jupyterapp.shell.widgets('main')].some("
        "w => w.context && w.context.path === path && w.content.model.cells.length === n)",
        arg=[nb.path, len(CELLS) + 1],
        timeout=Timeouts.ms(Timeouts.ROUND_TRIP),
    )
    page.keyboard.press("d")
    page.keyboard.press("d")
    page.wait_for_function(
        "([path, n]) => [...window.jupyterapp.shell.widgets('main')].some("
        "w => w.context && w.context.path === path && w.content.model.cells.length === n)",
        arg=[nb.path, len(CELLS)],
        timeout=Timeouts.ms(Timeouts.ROUND_TRIP),
    )
    assert_cells_kept(nb, before, "the notebook (b then d d, typed in command mode)")


def test_ids_and_radio_groups_are_unique_per_widget(keys_nb):
    nb, outputs = keys_nb
    ids = nb.panel.evaluate("(p) => [...p.querySelectorAll('.ptl-ex [id], .ptl-slider [id]')].map(e => e.id)")
    assert len(ids) >= 2 and len(ids) == len(set(ids))
    # every label points at the control of its own widget
    for_targets = nb.panel.evaluate(
        """(p) => [...p.querySelectorAll('.ptl-ex label[for], .ptl-slider label[for]')].map(l => {
             const target = document.getElementById(l.htmlFor);
             const root = l.closest('.ptl-ex, .ptl-slider');
             return target !== null && root.contains(target);
           })"""
    )
    assert for_targets and all(for_targets)
    names = [
        outputs.nth(i).locator('input[type="radio"]').evaluate_all("rs => [...new Set(rs.map(r => r.name))]")
        for i in (1, 2)
    ]
    assert len(names[0]) == 1 and len(names[1]) == 1 and names[0] != names[1]


def test_a_quiz_answers_from_the_keyboard_alone(keys_nb):
    nb, outputs = keys_nb
    page = nb.page
    quiz = outputs.nth(2).locator(".ptl-ex")  # quiz_b, not answered yet
    other = outputs.nth(1).locator('input[type="radio"]')
    other_checked = other.evaluate_all("rs => rs.map(r => r.checked)")
    before = cells(nb)
    radios = quiz.locator('input[type="radio"]')
    n = radios.count()
    assert n >= 3

    # Tab reaches the group: from the quiz's question, the first choice takes the focus
    quiz.locator("legend").click()
    page.keyboard.press("Tab")
    assert radios.nth(0).evaluate("r => r === document.activeElement")
    page.keyboard.press("Space")
    nb.wait_for_value("quiz_b.selected", 0)
    # arrows move between the choices and choose, within this quiz only
    page.keyboard.press("ArrowDown")
    nb.wait_for_value("quiz_b.selected", 1)
    page.keyboard.press("ArrowDown")
    nb.wait_for_value("quiz_b.selected", 2)
    page.keyboard.press("ArrowUp")
    assert nb.wait_for_value("quiz_b.selected", 1) == 1
    assert radios.nth(1).evaluate("r => r === document.activeElement && r.checked")
    assert other.evaluate_all("rs => rs.map(r => r.checked)") == other_checked  # the other quiz kept its choice
    assert_cells_kept(nb, before, "a quiz driven by the arrow keys")

    # Enter answers with the choice made; the focus goes to the verdict, not to <body>
    page.keyboard.press("Enter")
    nb.kernel.wait_for("quiz_b.answered", lambda v: v is True)
    assert nb.value("quiz_b.selected") == 1
    page.wait_for_function("(el) => el.querySelector('button').disabled", arg=quiz.element_handle())
    assert focus_inside(quiz)
    assert quiz.locator(".ptl-ex-live").evaluate("r => r === document.activeElement")
    assert_cells_kept(nb, before, "a quiz answered with Enter")


def test_check_and_reveal_keep_the_focus(keys_nb, open_nb):
    nb = open_nb(
        [
            "from pytree_lab.course import grad_structure_quiz, lesson_prediction\nq = grad_structure_quiz()\nq",
            'p = lesson_prediction("which_weight_changes_more")\np',
        ],
        wait_for=".ptl-ex-predict",
    )
    page = nb.page
    quiz = nb.panel.locator(".ptl-ex-quiz")
    quiz.locator('input[type="radio"]').nth(0).focus()
    page.keyboard.press("Space")
    nb.wait_for_value("q.selected", 0)
    page.keyboard.press("Tab")
    button = quiz.get_by_role("button", name="Check answer")
    assert button.evaluate("b => b === document.activeElement")
    page.keyboard.press("Space")
    nb.kernel.wait_for("q.answered", lambda v: v is True)
    page.wait_for_function("(b) => b.disabled", arg=button.element_handle())
    assert focus_inside(quiz)

    prompt = nb.panel.locator(".ptl-ex-predict")
    prompt.locator("textarea").click()
    page.keyboard.type("weight[0]")
    page.keyboard.press("Tab")
    reveal = prompt.get_by_role("button", name="Reveal the answer")
    assert reveal.evaluate("b => b === document.activeElement")
    page.keyboard.press("Enter")
    nb.kernel.wait_for("p.revealed", lambda v: v is True)
    page.wait_for_function("(b) => b.disabled", arg=reveal.element_handle())
    assert focus_inside(prompt)
    assert nb.value("p.prediction") == "weight[0]"


def test_click_on_the_slider_then_arrows_move_it(keys_nb):
    nb, outputs = keys_nb
    page = nb.page
    handle = outputs.nth(3).locator('input[type="range"]')
    nb.run("s.value = 1.0")
    page.wait_for_function("(el) => el.value === '1'", arg=handle.element_handle())
    box = handle.bounding_box()
    # the thumb of 1.0 on [-2, 6]: 3/8 of the way along the track
    page.mouse.click(box["x"] + box["width"] * 3 / 8, box["y"] + box["height"] / 2)
    assert handle.evaluate("el => el === document.activeElement")
    start = nb.value("s.value")
    page.keyboard.press("ArrowRight")
    page.keyboard.press("ArrowRight")
    assert nb.wait_for_value("s.value", start + 1.0) == start + 1.0


EXPLORER = [
    """\
import jax.numpy as jnp
from pytree_lab import StepExplorer
params = {"وزن": jnp.array([1.0, -1.0]), "bias": jnp.array(0.0)}
def loss(p, x, target):
    return (jnp.dot(p["وزن"], x) + p["bias"] - target) ** 2
ex = StepExplorer(loss, params, {"x": jnp.array([2.0, 1.0]), "target": jnp.array(3.0)}, learning_rate=0.05)
ex""",
    "'end'",
]


def test_explorer_keys_bar_table_and_right_to_left_labels(open_nb):
    nb = open_nb(EXPLORER, wait_for=".ptl-bars")
    page = nb.page
    explorer = nb.panel.locator(".pytree-lab-explorer")
    before = cells(nb)

    # keys in the explorer's stock parts (ipywidgets buttons, checkbox, status, bqplot figure)
    explorer.get_by_role("button", name="Reset").focus()
    type_keys(page)
    assert_cells_kept(nb, before, "the explorer's Reset button")
    boxes = explorer.locator(".pytree-lab-controls input[type='checkbox']")
    assert boxes.count() == 2  # the bars' fixed y range, the loss line's log scale
    for i in range(2):
        boxes.nth(i).focus()
        type_keys(page)
        assert_cells_kept(nb, before, f"the explorer's checkbox {i}")
    explorer.locator(".bqplot").first.click(position={"x": 5, "y": 5})
    type_keys(page)
    assert_cells_kept(nb, before, "the bar chart")
    assert nb.value("ex.result.params['bias'].tolist()") == 0.0  # no key took a step
    # Play / Pause and its speed menu keep their keys too; Space on the button plays and pauses
    play = explorer.locator(".ptl-play-button")
    play.focus()
    type_keys(page)
    assert_cells_kept(nb, before, "the Play button")
    explorer.locator(".ptl-play-select").focus()
    type_keys(page)
    assert_cells_kept(nb, before, "the playing speed menu")
    explorer.locator(".ptl-play-step").click()  # the control's own text, not a control
    assert focus_inside(explorer.locator(".ptl-play"))
    type_keys(page)
    assert_cells_kept(nb, before, "the Play control's text")
    assert nb.value("(ex.playing, len(ex.history))") == [False, 1]
    play.focus()
    page.keyboard.press(" ")
    assert nb.kernel.wait_for("ex.playing", bool) is True
    page.wait_for_function("(b) => b.getAttribute('aria-label') === 'Pause training'", arg=play.element_handle())
    page.keyboard.press(" ")
    assert nb.kernel.wait_for("ex.playing", lambda v: v is False) is False
    assert_cells_kept(nb, before, "Space on the Play button")
    nb.run("ex.reset()")
    assert nb.value("[len(ex.history), ex.playing, ex.result.params['bias'].tolist()]") == [1, False, 0.0]

    # the chart: a figure with a name, described by the table of its values; its drawing an image
    # of that name (not the figure, which holds bqplot's toolbar buttons); the loss line named too
    figure = explorer.locator("[role='figure'][aria-describedby]").first
    figure.wait_for()
    name = "A gradient tree matches parameter leaves: before and after value of each parameter element"
    assert figure.get_attribute("aria-label") == name
    assert figure.locator("svg").first.evaluate("s => [s.getAttribute('role'), s.getAttribute('aria-label')]") == [
        "img",
        name,
    ]
    explorer.locator("[role='figure'][aria-label='Loss at each step']").wait_for()
    table_id = figure.get_attribute("aria-describedby")
    bars = explorer.locator(f"#{table_id}")
    assert bars.locator("summary").text_content() == "Bar values (before and after, as a table)"
    # keyboard only: the summary opens it, Tab reaches an element, Enter selects its leaf
    bars.locator("summary").focus()
    page.keyboard.press("Enter")
    page.keyboard.press("Tab")
    page.keyboard.press("Tab")
    page.keyboard.press("Tab")  # وزن[0], وزن[1], bias
    assert bars.locator(".ptl-bars-pick").nth(2).evaluate("b => b === document.activeElement")
    page.keyboard.press("Enter")
    assert nb.wait_for_value("ex.selected_path", "['bias']") == "['bias']"
    assert nb.value("list(ex.chart_view.bars.selected)") == [2]
    bars.locator(".ptl-bars-pick[aria-pressed='true']").wait_for()
    # the values shown are the lesson's step: w = [1, -1] -> [1.4, -0.8], b = 0 -> 0.2. The keys
    # above went no further than the page and the kernel's selection, so the reset's own messages
    # may still be on their way to the page on a busy machine: the table is read until it has them
    lesson = [["\u2068وزن\u2069[0]", "1", "1.4"], ["\u2068وزن\u2069[1]", "-1", "-0.8"], ["bias", "0", "0.2"]]
    deadline = time.monotonic() + Timeouts.ROUND_TRIP
    while True:
        rows = bars.locator("tbody tr").evaluate_all("trs => trs.map(tr => [...tr.children].map(c => c.textContent))")
        if rows == lesson or time.monotonic() > deadline:
            break
        page.wait_for_timeout(100)
    assert rows == lesson
    assert_cells_kept(nb, before, "the bar table")
    # letters on an element's button and on the table's own text: no cell inserted, deleted or
    # changed, no step taken, the selection kept (Enter and Space select; these keys do not)
    kernel_side = nb.value("[ex.selected_path, len(ex.history), ex.playing]")
    assert kernel_side[0] == "['bias']" and kernel_side[2] is False
    bars.locator(".ptl-bars-pick").nth(0).focus()
    type_keys(page)
    assert_cells_kept(nb, before, "a button of the bar table")
    bars.locator("tbody td").nth(1).click()
    assert focus_inside(bars)
    type_keys(page)
    assert_cells_kept(nb, before, "the bar table's values")
    assert len(cells(nb)) == len(EXPLORER)
    assert nb.value("[ex.selected_path, len(ex.history), ex.playing]") == kernel_side

    # right-to-left keys read in order: the key, then its index (never "[0]وزن")
    label = explorer.locator("label.ptl-slider-label", has_text="وزن").first
    assert label.text_content() == "وزن[0]"
    order = label.evaluate(
        """(l) => {
             const key = l.querySelector('bdi').getBoundingClientRect();
             const range = document.createRange();
             const index = [...l.childNodes].find(n => n.nodeType === 3 && n.textContent === '[0]');
             range.selectNodeContents(index);
             return [key.left, key.right, range.getBoundingClientRect().left];
           }"""
    )
    assert order[0] < order[2] and order[1] <= order[2] + 0.5
    row = nb.panel.locator('[role="treeitem"][data-path="[\'وزن\']"] bdi.ptl-key')
    assert row.text_content() == "وزن"
    ticks = explorer.locator(".bqplot g.tick text").evaluate_all("ts => ts.map(t => t.textContent)")
    assert "\u2068وزن\u2069[0]" in ticks


# Each widget kind in its own cell; each cell counts its runs, so a run the keys ask for shows in
# the kernel
GO_ON = [
    "import jax.numpy as jnp\nimport pytree_lab\nfrom pytree_lab.course import grad_structure_quiz\n"
    "from pytree_lab.slider import Slider\nruns = {}\nparams = {'w': jnp.array([1.0, 2.0]), 'b': jnp.array(0.5)}",
    "runs['slider'] = runs.get('slider', 0) + 1\nSlider(1.0, description='x', min=-2.0, max=6.0, step=0.5)",
    "runs['diagram'] = runs.get('diagram', 0) + 1\npytree_lab.PytreeDiagram(params)",
    "runs['packed'] = runs.get('packed', 0) + 1\n"
    "pytree_lab.PackedView(params, layouts={'(w, b)': (params['w'], params['b'])})",
    "runs['quiz'] = runs.get('quiz', 0) + 1\ngrad_structure_quiz()",
    "runs['explorer'] = runs.get('explorer', 0) + 1\npytree_lab.StepExplorer()",
    "'end'",
]

# (what, its cell, the control focused: how a student reaches it)
CONTROLS = [
    ("slider", 1, lambda out: out.locator('input[type="range"]').focus()),
    ("diagram", 2, lambda out: out.locator('[role="treeitem"]').first.click()),
    ("packed", 3, lambda out: out.locator(".ptl-packed-cell").first.click()),
    ("quiz", 4, lambda out: out.locator('input[type="radio"]').first.focus()),
    ("explorer", 5, lambda out: out.locator(".ptl-bars summary").focus()),  # the chart's table
    ("explorer", 5, lambda out: out.locator(".bqplot").first.click(position={"x": 5, "y": 5})),  # the chart
    ("explorer", 5, lambda out: out.locator(".ptl-play-button").focus()),  # the play bar
]

NOTEBOOK_STATE = """(path) => {
  const w = [...window.jupyterapp.shell.widgets('main')].find(w => w.context && w.context.path === path);
  const nb = w.content, a = document.activeElement;
  return {mode: nb.mode, active: nb.activeCellIndex,
          focusedCell: nb.widgets.findIndex(c => c.node === a), inside: nb.widgets.findIndex(c => c.node.contains(a))};
}"""


@pytest.fixture(scope="module")
def go_on_nb(open_module_nb):
    nb = open_module_nb(GO_ON, wait_for=".ptl-bars")
    nb.panel.locator(".ptl-packed-cell").first.wait_for()
    return nb


def state(nb) -> dict:
    return nb.page.evaluate(NOTEBOOK_STATE, nb.path)


@pytest.mark.parametrize("control", range(len(CONTROLS)), ids=[f"{c[0]}-{i}" for i, c in enumerate(CONTROLS)])
def test_escape_and_shift_or_ctrl_enter_go_on_from_every_widget(go_on_nb, control):
    nb = go_on_nb
    page = nb.page
    what, index, reach = CONTROLS[control]
    output = nb.panel.locator(".jp-Cell").nth(index).locator(".jp-OutputArea")
    before = cells(nb)

    # Escape: the focus leaves the widget for its cell, in command mode; the arrows then move on
    reach(output)
    assert state(nb)["inside"] == index
    page.keyboard.press("Escape")
    assert state(nb) == {"mode": "command", "active": index, "focusedCell": index, "inside": index}
    page.keyboard.press("ArrowDown")
    assert state(nb)["active"] == index + 1
    assert_cells_kept(nb, before, f"Escape in the {what}")

    # Ctrl+Enter runs the widget's cell and stays on it; Shift+Enter runs it and goes to the next
    runs = nb.value("runs")[what]
    reach(output)
    page.keyboard.press("Control+Enter")
    assert nb.wait_for_value(f"runs[{what!r}]", runs + 1) == runs + 1
    assert state(nb)["active"] == index
    output.locator(".ptl-slider, .ptl-diagram, .ptl-packed-cell, .ptl-ex, .ptl-bars").first.wait_for()
    reach(output)
    page.keyboard.press("Shift+Enter")
    assert nb.wait_for_value(f"runs[{what!r}]", runs + 2) == runs + 2
    assert state(nb)["active"] == index + 1
    assert_cells_kept(nb, before, f"Shift+Enter and Ctrl+Enter in the {what}")
    output.locator(".ptl-slider, .ptl-diagram, .ptl-packed-cell, .ptl-ex, .ptl-bars").first.wait_for()


def test_the_packed_view_is_one_tab_stop_with_arrows_inside(go_on_nb):
    nb = go_on_nb
    page = nb.page
    view = nb.panel.locator(".jp-Cell").nth(3).locator(".ptl-packed")
    view.locator(".ptl-packed-cell").first.wait_for()
    buttons = view.locator("button")
    # each layout (the one given and ravel_pytree's): three positions, then two leaves (flatten order)
    order = buttons.evaluate_all(
        "bs => bs.map(b => b.closest('[data-layout]').dataset.layout + ':' + (b.dataset.position ?? b.dataset.path))"
    )
    assert order[:5] == ["0:0", "0:1", "0:2", "0:['b']", "0:['w']"] and len(order) == 10
    assert buttons.evaluate_all("bs => bs.map(b => b.tabIndex)") == [0] + [-1] * 9
    focused = """() => { const a = document.activeElement;
                           return a.closest('[data-layout]').dataset.layout + ':'
                                  + (a.dataset.position ?? a.dataset.path); }"""
    # Tab from the cell before it: the view's one stop, then out of the view
    nb.panel.locator(".jp-Cell").nth(2).locator('[role="treeitem"]').first.click()
    tabs = 0
    while not focus_inside(view) and tabs < 20:
        page.keyboard.press("Tab")
        tabs += 1
    assert page.evaluate(focused) == "0:0"
    page.keyboard.press("ArrowRight")
    assert page.evaluate(focused) == "0:1"
    page.keyboard.press("ArrowDown")
    assert page.evaluate(focused) == "0:2"
    page.keyboard.press("ArrowRight")
    assert page.evaluate(focused) == "0:['b']"
    page.keyboard.press("End")
    assert page.evaluate(focused) == order[-1]
    page.keyboard.press("ArrowRight")  # the last stays the last
    assert page.evaluate(focused) == order[-1]
    page.keyboard.press("Home")
    page.keyboard.press("ArrowRight")
    page.keyboard.press("ArrowLeft")
    page.keyboard.press("ArrowUp")  # the first stays the first
    assert page.evaluate(focused) == "0:0"
    page.keyboard.press("ArrowRight")
    page.keyboard.press("Enter")  # selects position 1 (w[1] in the layout (w, b))
    view.locator('[data-layout="0"] .ptl-packed-cell[data-position="1"][aria-pressed="true"]').wait_for()
    assert buttons.evaluate_all("bs => bs.map(b => b.tabIndex)") == [-1, 0] + [-1] * 8
    page.keyboard.press("Tab")  # one Tab leaves the view: the quiz in the next cell
    assert not focus_inside(view)
    assert focus_inside(nb.panel.locator(".jp-Cell").nth(4).locator(".ptl-ex"))


def test_the_explorers_seven_sliders_show_without_scrolling_their_box(go_on_nb):
    box = go_on_nb.panel.locator(".jp-Cell").nth(5).locator(".ptl-ex-sliders")
    box.locator(".ptl-slider").first.wait_for()
    seen = box.evaluate(
        """(b) => { const r = b.getBoundingClientRect();
             return {n: b.querySelectorAll('.ptl-slider').length, scrolls: b.scrollHeight > b.clientHeight,
                     cut: [...b.querySelectorAll('.ptl-slider')].filter(s => {
                       const q = s.getBoundingClientRect(); return q.top < r.top - 0.5 || q.bottom > r.bottom + 0.5;
                     }).length}; }"""
    )
    # the lesson's explorer: weight[0], weight[1], bias, x[0], x[1], target and the learning rate
    assert seen == {"n": 7, "scrolls": False, "cut": 0}


SAVED = """(path) => {
  const w = [...window.jupyterapp.shell.widgets('main')].find(w => w.context && w.context.path === path);
  return {dirty: w.context.model.dirty, modified: w.context.contentsModel && w.context.contentsModel.last_modified};
}"""


def test_ctrl_s_in_a_widget_saves_the_notebook(go_on_nb):
    """Ctrl+S with the focus on a slider saves the notebook (JupyterLab's save): the dirty marker
    goes and the file on disk is written again. The slider keeps the focus; its own keys stay its own."""
    nb = go_on_nb
    page = nb.page
    output = nb.panel.locator(".jp-Cell").nth(1).locator(".jp-OutputArea")
    slider = output.locator('input[type="range"]')
    page.evaluate(
        """(path) => { const w = [...window.jupyterapp.shell.widgets('main')]
             .find(w => w.context && w.context.path === path); w.context.model.dirty = true; }""",
        nb.path,
    )
    before = page.evaluate(SAVED, nb.path)
    assert before["dirty"] is True
    page.wait_for_timeout(1100)  # the file's time moves on by a second at least
    slider.focus()
    page.keyboard.press("Control+s")
    page.wait_for_function(f"(path) => !({SAVED})(path).dirty", arg=nb.path, timeout=Timeouts.ms(Timeouts.ROUND_TRIP))
    after = page.evaluate(SAVED, nb.path)
    assert after["modified"] != before["modified"], (before, after)
    assert slider.evaluate("el => el === document.activeElement")
    before_cells = cells(nb)
    page.keyboard.press("s")  # a plain s (command mode: nothing) stays in the widget
    assert_cells_kept(nb, before_cells, "s in the slider")
