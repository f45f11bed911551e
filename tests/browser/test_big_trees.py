"""Big trees and fast hands in a real JupyterLab page.

A 10,000-leaf tree starts folded and the page holds only the rows it shows; a 50-layer MLP
and a small transformer's parameter tree render; selecting and folding work from both sides.
A burst of slider key presses ends with Python and the bars on the last value, no backlog.
"""

from __future__ import annotations

import pytest

from .harness import Timeouts
from .pages import read_bars, slider_handle, tree_item

pytestmark = pytest.mark.browser

PAGE = 200  # children the diagram renders per group before "show more" (static/diagram.js)

TREES = '''
import numpy as np
from pytree_lab import PytreeDiagram

rng = np.random.default_rng(0)
wide = {f"layer{i:04d}": {"w": rng.normal(size=3).astype(np.float32), "b": np.float32(i)} for i in range(5000)}
mlp = [{"w": rng.normal(size=(64, 64)).astype(np.float32), "b": np.zeros(64, np.float32)} for _ in range(50)]

def block(d):
    dense = lambda m, n: {"kernel": rng.normal(size=(m, n)).astype(np.float32), "bias": np.zeros(n, np.float32)}
    norm = lambda: {"scale": np.ones(d, np.float32), "bias": np.zeros(d, np.float32)}
    return {"attention": {"query": dense(d, d), "key": dense(d, d), "value": dense(d, d), "out": dense(d, d)},
            "norm1": norm(), "mlp": {"up": dense(d, 4 * d), "down": dense(4 * d, d)}, "norm2": norm()}

transformer = {"embed": rng.normal(size=(1000, 32)).astype(np.float32),
               "blocks": [block(32) for _ in range(4)],
               "final_norm": {"scale": np.ones(32, np.float32), "bias": np.zeros(32, np.float32)}}
'''


def diagram_box(nb, index: int):
    return nb.panel.locator(".ptl-diagram").nth(index)


def rendered(box) -> int:
    return box.locator('[role="treeitem"]').count()


@pytest.fixture(scope="module")
def trees_nb(open_module_nb):
    nb = open_module_nb(
        [
            TREES,
            "d_wide = PytreeDiagram(wide)\nd_wide",
            "d_mlp = PytreeDiagram(mlp)\nd_mlp",
            "d_tf = PytreeDiagram(transformer)\nd_tf",
            "d_opt = PytreeDiagram({'w': np.zeros(3, np.float32)}, extra={'optimizer state': {'mu': wide}})\nd_opt",
        ],
        wait_for='[role="tree"]',
    )
    for i in range(4):
        diagram_box(nb, i).locator('[role="tree"]').first.wait_for()
    return nb


def test_ten_thousand_leaves_fold_by_default_and_render_only_what_shows(trees_nb):
    nb = trees_nb
    box = diagram_box(nb, 0)
    # folded: the kernel sent the 5,000 layers' rows, and keeps their children until opened
    assert nb.value("len(d_wide.rows)") == 5000
    assert nb.value("len(d_wide.collapsed)") == 5000
    box.locator('[role="tree"]').first.evaluate("el => { el.dataset.probe = 'first drawing'; }")
    # first page of the 5,000 folded containers, nothing inside them
    assert rendered(box) == PAGE
    assert box.locator(".ptl-more").first.text_content() == f"show {PAGE} more of {5000 - PAGE}"
    assert box.locator('[role="treeitem"][aria-expanded="true"]').count() == 0
    assert "10000 leaves, 20000 numerical parameter values" in box.locator(".ptl-counts").first.text_content()

    # unfold one container with a click on its toggle: only its two children appear
    first = tree_item(box, "['layer0000']")
    first.locator(":scope > .ptl-line .ptl-toggle").click()
    assert first.get_attribute("aria-expanded") == "true"
    w0 = tree_item(box, "['layer0000']['w']")
    w0.wait_for(timeout=Timeouts.ms(Timeouts.ROUND_TRIP))  # the kernel sends them on the fold message
    assert rendered(box) == PAGE + 2
    assert nb.kernel.wait_for("'[\\'layer0000\\']' in d_wide.collapsed", lambda v: v is False) is False
    assert nb.value("len(d_wide.rows)") == 5002
    shown = w0.locator(":scope > .ptl-line .ptl-val").first.text_content()
    assert shown == nb.value("'[' + ', '.join(format(float(v), '.4g') for v in wide['layer0000']['w']) + ']'")
    assert box.locator(".ptl-loading").count() == 0

    # select a leaf by clicking it
    tree_item(box, "['layer0000']['b']").locator(":scope > .ptl-line").click()
    assert nb.wait_for_value("d_wide.selected_path", "['layer0000']['b']") == "['layer0000']['b']"

    # select from Python a leaf on a page not rendered yet: the page renders up to it and unfolds it
    nb.run("d_wide.selected_path = \"['layer4999']['w']\"")
    target = tree_item(box, "['layer4999']['w']")
    target.wait_for(timeout=Timeouts.ms(Timeouts.ROUND_TRIP))
    assert target.get_attribute("aria-selected") == "true"
    assert "mean" not in target.text_content()  # 3 values: shown as values
    assert tree_item(box, "['layer4999']").get_attribute("aria-expanded") == "true"
    assert nb.kernel.wait_for("'[\\'layer4999\\']' in d_wide.collapsed", lambda v: v is False) is False
    assert rendered(box) == 5000 + 2 + 2  # every page of top-level rows, two open containers
    shown = target.locator(":scope > .ptl-line .ptl-val").first.text_content()
    assert shown == nb.value("'[' + ', '.join(format(float(v), '.4g') for v in wide['layer4999']['w']) + ']'")
    # the rows were added to the tree on the page, not drawn anew
    assert box.locator('[role="tree"]').first.evaluate("el => el.dataset.probe") == "first drawing"

    # fold it again from the page
    tree_item(box, "['layer4999']").locator(":scope > .ptl-line .ptl-toggle").click()
    assert nb.kernel.wait_for("'[\\'layer4999\\']' in d_wide.collapsed", lambda v: v is True) is True
    assert target.is_hidden()


def test_keyboard_moves_through_visible_rows_only(trees_nb):
    box = diagram_box(trees_nb, 0)
    trees_nb.run("d_wide.collapsed = [r['p'] for r in d_wide.rows if not r['leaf']]; d_wide.selected_path = ''")
    box.locator('[role="treeitem"][aria-expanded="true"]').first.wait_for(state="detached")
    first = tree_item(box, "['layer0000']")
    first.locator(":scope > .ptl-line").click()
    box.page.keyboard.press("ArrowDown")
    focused = box.page.evaluate("() => document.activeElement.dataset.path")
    assert focused == "['layer0001']"  # the folded children of layer0000 are skipped
    box.page.keyboard.press("ArrowRight")
    assert tree_item(box, "['layer0001']").get_attribute("aria-expanded") == "true"
    tree_item(box, "['layer0001']['w']").wait_for(timeout=Timeouts.ms(Timeouts.ROUND_TRIP))  # sent on opening
    box.page.keyboard.press("ArrowRight")
    box.page.keyboard.press("Enter")
    assert trees_nb.wait_for_value("d_wide.selected_path", "['layer0001']['w']") == "['layer0001']['w']"


def test_opening_a_folded_container_while_the_kernel_is_busy_says_loading(trees_nb):
    nb, box = trees_nb, diagram_box(trees_nb, 0)
    assert nb.value("'[\\'layer0002\\']' in d_wide.collapsed and len(d_wide.rows)") < 5010
    # the kernel takes 4 s to send the rows (a busy kernel, a slow network)
    nb.run("import time; d_wide._send_rows = lambda send=d_wide._send_rows: (time.sleep(4), send())")
    item = tree_item(box, "['layer0002']")
    item.locator(":scope > .ptl-line .ptl-toggle").click()
    assert item.get_attribute("aria-expanded") == "true"
    loading = item.locator(":scope > .ptl-group > .ptl-loading")
    loading.wait_for(state="visible", timeout=Timeouts.ms(Timeouts.ROUND_TRIP))
    assert loading.text_content() == "loading…"
    assert tree_item(box, "['layer0002']['w']").count() == 0
    child = tree_item(box, "['layer0002']['w']")
    child.wait_for(timeout=Timeouts.ms(Timeouts.ROUND_TRIP + 4))  # the rows follow
    assert loading.count() == 0
    shown = child.locator(":scope > .ptl-line .ptl-val").first.text_content()
    nb.run("del d_wide._send_rows")
    assert shown == nb.value("'[' + ', '.join(format(float(v), '.4g') for v in wide['layer0002']['w']) + ']'")


def test_a_big_side_panel_starts_folded_and_gets_its_rows_as_opened(trees_nb):
    nb, box = trees_nb, diagram_box(trees_nb, 3)
    panel = box.locator(".ptl-panel")
    assert nb.value("[r['p'] for r in d_opt.panels[0]['rows']]") == ["['mu']"]
    assert rendered(panel) == 1
    tree_item(panel, "['mu']").locator(":scope > .ptl-line .ptl-toggle").click()
    layer = tree_item(panel, "['mu']['layer0003']")
    layer.wait_for(timeout=Timeouts.ms(Timeouts.ROUND_TRIP))
    assert rendered(panel) == 1 + PAGE  # its 5,000 layers, folded, a page of them drawn
    layer.locator(":scope > .ptl-line .ptl-toggle").click()
    w = tree_item(panel, "['mu']['layer0003']['w']")
    w.wait_for(timeout=Timeouts.ms(Timeouts.ROUND_TRIP))
    shown = w.locator(":scope > .ptl-line .ptl-val").first.text_content()
    assert shown == nb.value("'[' + ', '.join(format(float(v), '.4g') for v in wide['layer0003']['w']) + ']'")
    assert nb.value("len(d_opt.panels[0]['rows'])") == 1 + 5000 + 2
    assert tree_item(panel, "['mu']").get_attribute("aria-expanded") == "true"  # added in place, still open


def test_model_shaped_trees_render_summarised(trees_nb):
    nb = trees_nb
    mlp = diagram_box(nb, 1)
    assert nb.value("len(d_mlp.rows)") == 150 and nb.value("d_mlp.collapsed") == []
    assert rendered(mlp) == 150  # small enough to show open
    cell = tree_item(mlp, "[49]['w']").locator(":scope > .ptl-line > .ptl-cell").first
    assert "float32[64,64]" in cell.text_content() and "mean" in cell.text_content()
    # 50 x (64*64 + 64)
    assert "100 leaves, 208000 numerical parameter values" in mlp.locator(".ptl-counts").first.text_content()

    tf = diagram_box(nb, 2)
    rows = nb.value("len(d_tf.rows)")
    assert rendered(tf) == rows
    embed = tree_item(tf, "['embed']").locator(":scope > .ptl-line > .ptl-cell").first.text_content()
    assert "float32[1000,32]" in embed and "mean" in embed  # 32,000 values summarised, not shipped
    assert nb.value("len(d_tf.get_state()['rows'])") < 20_000  # rows travel as one small JSON text
    path = "['blocks'][3]['attention']['query']['kernel']"
    tree_item(tf, path).locator(":scope > .ptl-line").click()
    assert nb.wait_for_value("d_tf.selected_path", path) == path
    tree_item(tf, "['blocks'][3]").locator(":scope > .ptl-line .ptl-toggle").click()
    assert nb.kernel.wait_for("d_tf.collapsed", lambda v: v == ["['blocks'][3]"]) == ["['blocks'][3]"]
    assert tree_item(tf, path).is_hidden()


# --------------------------------------------------------------------------- a burst of slider moves

EXPLORER = '''
from pytree_lab import StepExplorer
ex = StepExplorer()
computed = []  # the slider values each kernel computation saw, in order
_compute = ex.session.compute
def recording(*args, **kwargs):
    computed.append((ex.sliders["x[0]"].value, ex.sliders["bias"].value))
    return _compute(*args, **kwargs)
ex.session.compute = recording
def settled():
    """The sliders' values with the step from them: read between two changes (a slider's step
    runs on the kernel's subshell thread, after its value is set)."""
    with ex.session.lock:
        r = ex.result
        values = {k: s.value for k, s in ex.sliders.items()}
        return {"values": values, "loss": r.loss, "w": r.updated["weight"], "b": r.updated["bias"]}
ex
'''


def lesson_step(x0, x1, target, lr, w0, w1, b):
    import jax
    import jax.numpy as jnp

    params = {"weight": jnp.array([w0, w1], jnp.float32), "bias": jnp.array(b, jnp.float32)}
    x = jnp.array([x0, x1], jnp.float32)

    def loss(p):
        return (jnp.dot(p["weight"], x) + p["bias"] - target) ** 2

    value, grads = jax.value_and_grad(loss)(params)
    updated = jax.tree.map(lambda p, g: p - jnp.float32(lr) * g, params, grads)
    return float(value), updated


def press_burst(page, handles, presses: int) -> None:
    """`presses` ArrowRight key presses at 60 Hz, cycling through the slider handles."""
    for k in range(presses):
        handle = handles[k % len(handles)]
        if len(handles) > 1 or k == 0:
            handle.focus()
        page.keyboard.press("ArrowRight")
        page.wait_for_timeout(16)


def settle(nb, expr: str, predicate) -> object:
    value = nb.kernel.wait_for(expr, predicate, timeout=Timeouts.ROUND_TRIP)
    assert predicate(value), (expr, value)
    return value


def expected_step(values: dict) -> tuple[float, dict]:
    keys = ("x[0]", "x[1]", "target", "learning_rate", "weight[0]", "weight[1]", "bias")
    return lesson_step(*(values[k] for k in keys))


def check_final_state(nb, n_before: int, presses: int) -> None:
    # the step of the last move may still be running on the subshell's thread when the sliders
    # already hold their final values: wait until the explorer's step is the one from them
    result = nb.kernel.wait_for(
        "settled()", lambda r: r["loss"] == pytest.approx(expected_step(r["values"])[0], rel=1e-5)
    )
    values = result["values"]
    loss, updated = expected_step(values)
    assert result["loss"] == pytest.approx(loss, rel=1e-5)
    assert result["w"] == pytest.approx(updated["weight"].tolist(), rel=1e-5)
    assert result["b"] == pytest.approx(float(updated["bias"]), rel=1e-5, abs=1e-6)
    # no backlog: at most one computation per press, in order, the last on the final values
    computed = nb.value("computed")[n_before:]
    assert 1 <= len(computed) <= presses
    assert computed[-1] == [values["x[0]"], values["bias"]]
    xs = [c[0] for c in computed]
    bs = [c[1] for c in computed]
    assert xs == sorted(xs) and bs == sorted(bs)  # never an older value after a newer one
    # the bars on the page show this last step
    expected = {"weight[0]": updated["weight"][0], "weight[1]": updated["weight"][1], "bias": updated["bias"]}
    figure = nb.panel.locator(".bqplot.figure").first

    def drawn():
        bars = read_bars(figure)
        return all(abs(bars["bars"][k][1] - float(v)) * bars["pixels_per_unit"] < 1.5 for k, v in expected.items())

    deadline = Timeouts.ROUND_TRIP * 1000
    waited = 0
    while not drawn() and waited < deadline:
        nb.page.wait_for_timeout(50)
        waited += 50
    assert drawn(), read_bars(figure)["bars"]
    # and nothing more arrives later
    nb.page.wait_for_timeout(500)
    assert len(nb.value("computed")) == n_before + len(computed)


def test_a_burst_of_key_presses_ends_on_the_last_value(open_nb):
    nb = open_nb([EXPLORER], wait_for=".bqplot rect.bar")
    handle = slider_handle(nb.panel, "x[0]")
    n_before = len(nb.value("computed"))
    press_burst(nb.page, [handle], 20)
    settle(nb, "ex.sliders['x[0]'].value", lambda v: v == pytest.approx(2.2))
    check_final_state(nb, n_before, 20)


def test_a_burst_across_two_sliders_leaves_no_backlog(open_nb):
    nb = open_nb([EXPLORER], wait_for=".bqplot rect.bar")
    handles = [slider_handle(nb.panel, "x[0]"), slider_handle(nb.panel, "bias")]
    n_before = len(nb.value("computed"))
    press_burst(nb.page, handles, 20)
    settle(
        nb,
        "(ex.sliders['x[0]'].value, ex.sliders['bias'].value)",
        lambda v: v[0] == pytest.approx(2.1) and v[1] == pytest.approx(0.1),
    )
    check_final_state(nb, n_before, 20)
