"""The before/after bars in a real JupyterLab (issue 22 §1-2): a click on a diagram leaf that has
no bar brings its elements into the chart and says so; tick labels are unique and neither
overlap each other nor the axis title, at 1024 and 1440 px, light and dark.

The explorer is a flax-style XOR MLP ({'Dense_0': {'kernel': (2, 8), 'bias': (8,)}, 'Dense_1':
{'kernel': (8, 1), 'bias': (1,)}}): its 24 default bars are Dense_0's; Dense_1 has none.
"""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from .harness import DARK, LIGHT, Timeouts, set_theme
from .pages import tree_cell

pytestmark = pytest.mark.browser
ARTIFACTS = Path(__file__).resolve().parents[2] / "artifacts" / "screenshots"

CELLS = [
    "import jax, jax.numpy as jnp, optax\n"
    "from pytree_lab import StepExplorer\n"
    "k1, k2 = jax.random.split(jax.random.PRNGKey(0))\n"
    "params = {'Dense_0': {'kernel': jax.random.normal(k1, (2, 8)) * 0.5, 'bias': jnp.zeros(8)},\n"
    "          'Dense_1': {'kernel': jax.random.normal(k2, (8, 1)) * 0.5, 'bias': jnp.zeros(1)}}\n"
    "X = jnp.array([[0., 0.], [0., 1.], [1., 0.], [1., 1.]]); Y = jnp.array([0., 1., 1., 0.])\n"
    "def loss(p, x):\n"
    "    h = jnp.tanh(x @ p['Dense_0']['kernel'] + p['Dense_0']['bias'])\n"
    "    return jnp.mean(((h @ p['Dense_1']['kernel'] + p['Dense_1']['bias'])[:, 0] - Y) ** 2)\n"
    "ex = StepExplorer(loss, params, {'x': X}, optimizer=optax.adam(0.1))\n"
    "ex",
]

# Each text of the bar chart's axes, as boxes in screen coordinates, and the figure's box.
_AXIS_BOXES = """(fig) => {
  const box = (e) => { const r = e.getBoundingClientRect();
    return {text: e.textContent, left: r.left, right: r.right, top: r.top, bottom: r.bottom}; };
  const axes = [...fig.querySelectorAll('svg.svg-background g.axis')].map(a => ({
    ticks: [...a.querySelectorAll(':scope > g.tick text')].map(box).filter(t => t.text),
    title: [...a.querySelectorAll(':scope > text')].map(box).filter(t => t.text),
  }));
  const svg = fig.querySelector('svg.svg-background');
  const bars = [...fig.querySelectorAll('rect.bar')].map(box);
  return {axes, figure: box(fig), svg: svg ? box(svg) : null, last_bar: bars.length ? bars[bars.length - 1] : null};
}"""


def _overlap(a: dict, b: dict) -> bool:
    return not (
        a["right"] <= b["left"] or b["right"] <= a["left"] or a["bottom"] <= b["top"] or b["bottom"] <= a["top"]
    )


@pytest.fixture(scope="module")
def nb(open_module_nb):
    nb = open_module_nb(CELLS, wait_for='[role="tree"]')
    nb.panel.locator(".ptl-bars-box .bqplot rect.bar").first.wait_for(state="attached")
    return nb


def bar_figure(nb):
    return nb.panel.locator(".ptl-bars-box .bqplot.figure").first


def x_ticks_in_page(nb) -> list[str]:
    boxes = bar_figure(nb).evaluate(_AXIS_BOXES)
    (x_axis,) = [a for a in boxes["axes"] if a["title"] and a["title"][0]["text"] == "parameter element"]
    return [t["text"] for t in x_axis["ticks"]]


def wait_ticks(nb, predicate, what: str) -> list[str]:
    """The x tick labels the page shows, once `predicate` holds for them."""
    deadline = nb.page.evaluate("() => performance.now()") + Timeouts.ms(Timeouts.ROUND_TRIP)
    while True:
        ticks = x_ticks_in_page(nb)
        if predicate(ticks):
            return ticks
        if nb.page.evaluate("() => performance.now()") > deadline:
            raise AssertionError(f"the page never showed {what}: {ticks}")
        nb.page.wait_for_timeout(100)


def test_clicking_a_leaf_without_bars_brings_it_into_the_chart(nb):
    nb.run('ex.selected_path = ""')
    before = wait_ticks(nb, lambda t: len(t) == 24, "24 bars")
    assert before == nb.value("[ex.chart_view.tick_labels[x] for x in ex.chart_view.bars.x]")
    assert not any(t.startswith("Dense_1/") for t in before)
    assert not nb.panel.locator(".ptl-bars-note").is_visible()
    # a click on Dense_1's kernel in the diagram (params column)
    tree_cell(nb.panel, "['Dense_1']['kernel']", "params").click()
    assert nb.wait_for_value("ex.selected_path", "['Dense_1']['kernel']") == "['Dense_1']['kernel']"
    after = wait_ticks(nb, lambda t: "Dense_1/kernel[0,0]" in t, "Dense_1's kernel")
    expected = [f"params['Dense_1']['kernel'][{i},0]" for i in range(8)]
    bars = nb.value("[str(x) for x in ex.chart_view.bars.x]")
    assert bars[-8:] == expected and len(bars) == 24
    assert after == nb.value("[ex.chart_view.tick_labels[x] for x in ex.chart_view.bars.x]")
    assert after[-8:] == [f"Dense_1/kernel[{i},0]" for i in range(8)] and after[0] == "Dense_0/kernel[0,0]"
    assert sorted(nb.value("list(ex.chart_view.bars.selected)")) == list(range(16, 24))
    # the note says so, visibly, beside the chart; the text form says it too
    note = nb.panel.locator(".ptl-bars-note")
    note.wait_for(state="visible", timeout=Timeouts.ms(Timeouts.ROUND_TRIP))
    assert "Dense_1/kernel" in note.text_content() and "8 values" in note.text_content()
    assert note.text_content() == nb.value("ex.chart_view.note")
    assert note.text_content() in nb.value("ex.text()")
    # the bars drawn: the selected leaf's before values are Python's (read as heights in pixels)
    heights = bar_figure(nb).evaluate("(fig) => [...fig.querySelectorAll('g.bargroup')].length")
    assert heights == 24
    # labels in the page are unique
    assert len(set(after)) == len(after)


def check_axis_texts(nb, lab_page, width: int, must_show: list[str]) -> list[str]:
    """At `width` px: the x ticks are unique, no tick overlaps another or its axis title, and
    every text of the axes lies inside the figure (nothing cut). Returns the x ticks."""
    lab_page.set_viewport_size({"width": width, "height": 900})
    bar_figure(nb).scroll_into_view_if_needed()  # the notebook lays out only what is near the view
    # bqplot redraws 300 ms after its figure's last change of size (a debounced ResizeObserver), and
    # the row around it may lay out again after a theme change or a note: read the boxes once two
    # readings 400 ms apart agree, the figure's, its drawing's and where its last tick and bar are
    deadline = lab_page.evaluate("() => performance.now()") + Timeouts.ms(Timeouts.ROUND_TRIP)
    last = None
    while True:
        boxes = bar_figure(nb).evaluate(_AXIS_BOXES)
        fig, svg, bar = boxes["figure"], boxes["svg"], boxes["last_bar"]
        ticks = [t for a in boxes["axes"] for t in a["ticks"]]
        shape = [round(b[k]) for b in (fig, svg, bar, *ticks[-1:]) if b for k in ("left", "right")]
        if svg and shape == last:
            break
        if lab_page.evaluate("() => performance.now()") > deadline:
            raise AssertionError(f"the chart never settled at {width} px: {fig} {svg}")
        last = shape
        lab_page.wait_for_timeout(400)
    x_axis = next(a for a in boxes["axes"] if a["title"] and a["title"][0]["text"] == "parameter element")
    y_axis = next(a for a in boxes["axes"] if a["title"] and a["title"][0]["text"] == "parameter value")
    ticks = x_axis["ticks"]
    texts = [t["text"] for t in ticks]
    assert len(ticks) == 24 and len(set(texts)) == 24, texts
    assert all(name in texts for name in must_show), texts
    for a, b in itertools.pairwise(ticks):
        assert not _overlap(a, b), (a, b)
    for axis in (x_axis, y_axis):
        for t in axis["ticks"]:
            assert not _overlap(t, axis["title"][0]), (t, axis["title"][0])
    fig = boxes["figure"]
    for t in ticks + x_axis["title"] + y_axis["title"]:
        assert fig["left"] - 1 <= t["left"] and t["right"] <= fig["right"] + 1, {
            "tick": t,
            "figure": fig,
            "svg": boxes["svg"],
            "last bar": boxes["last_bar"],
        }
        assert fig["top"] - 1 <= t["top"] and t["bottom"] <= fig["bottom"] + 1, t
    return texts


def shoot(nb, name: str, row: bool = False) -> None:
    shot = ARTIFACTS / f"{name}.png"
    shot.parent.mkdir(parents=True, exist_ok=True)
    box = nb.panel.locator(".ptl-bars-box").first
    (box.locator("xpath=..") if row else box).screenshot(path=str(shot))


@pytest.mark.parametrize("width", [1024, 1440])
@pytest.mark.parametrize("theme", [LIGHT, DARK])
def test_tick_labels_are_unique_and_clear_of_the_axis_title(nb, lab_page, width, theme):
    nb.run("ex.selected_path = \"['Dense_1']['kernel']\"")  # both kernels in the chart
    wait_ticks(nb, lambda t: "Dense_1/kernel[0,0]" in t, "Dense_1's kernel")
    set_theme(lab_page, theme)
    try:
        check_axis_texts(nb, lab_page, width, ["Dense_0/kernel[0,0]", "Dense_1/kernel[0,0]"])
        name = f"bars-mlp-{width}-{'dark' if theme == DARK else 'light'}"
        shoot(nb, name)
        if width == 1440:
            shoot(nb, name + "-row", row=True)
    finally:
        lab_page.set_viewport_size({"width": 1400, "height": 1000})


TRANSFORMER = [
    "import jax, jax.numpy as jnp\n"
    "from pytree_lab import StepExplorer\n"
    "D = 4\n"
    "def block(i):\n"
    "    w = lambda *s: jnp.full(s, 0.1 * (i + 1))\n"
    "    return {'ln1': {'scale': jnp.ones(D), 'bias': jnp.zeros(D)},\n"
    "            'attn': {n: {'w': w(D, D), 'b': jnp.zeros(D)} for n in 'qkvo'},\n"
    "            'ln2': {'scale': jnp.ones(D), 'bias': jnp.zeros(D)},\n"
    "            'mlp': {'fc1': {'w': w(D, 2 * D), 'b': jnp.zeros(2 * D)},\n"
    "                    'fc2': {'w': w(2 * D, D), 'b': jnp.zeros(D)}}}\n"
    "params = {'embedding': jnp.ones((6, D)) * 0.2, 'block_0': block(0), 'block_1': block(1),\n"
    "          'ln_f': {'scale': jnp.ones(D), 'bias': jnp.zeros(D)},\n"
    "          'out': {'w': jnp.ones((D, 6)) * 0.1, 'b': jnp.zeros(6)}}\n"
    "assert len(jax.tree.leaves(params)) == 37\n"
    "def loss(p, x):\n"
    "    return sum(jnp.sum(jnp.sin(leaf * x)) for leaf in jax.tree.leaves(p))\n"
    "ex = StepExplorer(loss, params, {'x': jnp.array(1.5)},\n"
    "                  bars=['block_0/attn/q/w', \"['block_1']['attn']['q']['w']\"])\n"
    "ex",
]


def test_a_transformer_s_long_labels_are_unique_and_clear_of_the_title(open_nb, lab_page):
    """Two attention layers' query weights: the labels keep the block that tells them apart."""
    tnb = open_nb(TRANSFORMER, wait_for='[role="tree"]')
    tnb.panel.locator(".ptl-bars-box .bqplot rect.bar").first.wait_for(state="attached")
    assert "first 24" in tnb.panel.locator(".ptl-bars-note").text_content()
    try:
        for width in (1024, 1440):
            texts = check_axis_texts(tnb, lab_page, width, ["block_0/attn/q/w[0,0]", "block_1/attn/q/w[0,0]"])
            assert texts == tnb.value("[ex.chart_view.tick_labels[x] for x in ex.chart_view.bars.x]")
            shoot(tnb, f"bars-transformer-{width}-light")
    finally:
        lab_page.set_viewport_size({"width": 1400, "height": 1000})


FAILING = [
    "import jax.numpy as jnp\n"
    "from pytree_lab import StepExplorer\n"
    "def loss(p, x):\n"
    "    raise ValueError('this loss fails on purpose')\n"
    "ex = StepExplorer(loss, {'w': jnp.array([1.0, 2.0])}, {'x': jnp.array([1.0, 1.0])})\n"
    "ex",
]


def test_a_failed_first_step_draws_no_loss_point_and_whole_ticks(open_nb, lab_page):
    """Before any step worked the loss line has no point (none at loss 0) and its step axis
    reads 0 and 1, not "0 0 0 0 0 1 1 1"; the empty bar chart draws without a page error."""
    errors_before = len(lab_page.pytree_lab_errors)
    fnb = open_nb(FAILING, wait_for=".pytree-lab-alert")
    assert "fails on purpose" in fnb.panel.locator(".pytree-lab-alert").first.text_content()
    line = fnb.panel.locator(".bqplot.figure").filter(has_text="Loss at each step").first
    line.scroll_into_view_if_needed()
    line.locator("g.axis").first.wait_for(state="attached")
    read = line.evaluate("""(fig) => ({
      ticks: [...fig.querySelectorAll('g.axis')].map(a => [...a.querySelectorAll(':scope > g.tick text')]
        .map(t => t.textContent)),
      titles: [...fig.querySelectorAll('g.axis > text')].map(t => t.textContent),
      path: (fig.querySelector('path.line') || {getAttribute: () => ''}).getAttribute('d') || '',
      dots: fig.querySelectorAll('.dot, path.dot').length,
    })""")
    step_axis = read["ticks"][read["titles"].index("step")]
    assert step_axis == ["0", "1"], read
    assert read["dots"] == 0 and not any(ch.isdigit() for ch in read["path"]), read
    assert fnb.value("ex.history") == [] and fnb.value("len(ex.history_view.point.x)") == 0
    assert lab_page.pytree_lab_errors[errors_before:] == []
