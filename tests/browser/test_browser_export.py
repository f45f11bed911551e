"""A played run kept as one HTML page (`ex.export_html`), opened from disk in Chromium with every
network request refused: stepped with its slider by mouse and keyboard, the numbers on screen
(loss, the bars' table, the diagram's cells) are the record's at that step (`ex.history_dict()`,
read from the kernel that played the run). A tree key written as HTML stays text. Screenshots,
light and dark (the page follows prefers-color-scheme)."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pytest

from pytree_lab.formatting import fmt_number

from .harness import Timeouts

pytestmark = pytest.mark.browser

SHOTS = Path(__file__).resolve().parents[2] / "artifacts" / "screenshots"
PATHS = ["params['w'][0]", "params['w'][1]", "params['b']"]
HOSTILE = "</script><img src=x onerror=alert(1)>"

CELLS = [
    "import json, numpy as np, optax\n"
    "from pytree_lab import StepExplorer\n"
    "X = np.array([[0., 1.], [1., 0.], [1., 1.]], np.float32)\n"
    "Y = np.array([1., 2., 3.], np.float32)\n"
    "def loss(p, x, y):\n"
    "    return ((x @ p['w'] + p['b'] - y) ** 2).mean()\n"
    "ex = StepExplorer(loss, {'w': np.array([0.5, -0.5], np.float32), 'b': np.float32(0.0)}, {'x': X, 'y': Y},\n"
    "                  optimizer=optax.adam(0.3))\n"
    "ex",
]

# what the replay page shows now: its step, the loss, the bars' table and the diagram's w and b cells
SHOWN = """() => {
  const cell = (path, col) => document.querySelector(
    `.ptl-trees .ptl-item[data-path="${path}"] > .ptl-line > .ptl-cell[data-column="${col}"] .ptl-val`)?.textContent;
  const loss = document.querySelector('.ptl-replay-loss');
  return {
    step: document.getElementById('ptl-replay').dataset.step,
    slider: document.querySelector('.ptl-replay-step').value,
    stepno: document.querySelector('.ptl-replay-stepno').textContent,
    loss: [loss.textContent, loss.dataset.value],
    table: [...document.querySelectorAll('.ptl-replay-table tbody tr')].map(tr =>
      [...tr.children].map((td, i) => i ? [td.textContent, td.dataset.value] : td.textContent)),
    diagram: ["params", "updated"].flatMap(col => [cell("['w']", col), cell("['b']", col)]),
  };
}"""


def open_offline(browser, path: Path, scheme: str = "light"):
    """The page from disk, every request that is not file:// refused; (context, page, requests, errors)."""
    context = browser.new_context(viewport={"width": 1200, "height": 900}, color_scheme=scheme)
    context.route("**", lambda route: route.continue_() if route.request.url.startswith("file:") else route.abort())
    page = context.new_page()
    requests, errors = [], []
    page.on("request", lambda r: requests.append(r.url))
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on("dialog", lambda d: (errors.append(f"dialog: {d.message}"), d.dismiss()))
    page.goto(path.as_uri())
    page.locator(".ptl-trees .ptl-item").first.wait_for()
    return context, page, requests, errors


def expected(record: dict, last_after: list, t: int) -> dict:
    """What the page should show at step t: the record's numbers (the bars' after: the next point's)."""
    n = len(record["loss"])
    before = [record[p][t] for p in PATHS]
    after = [record[p][t + 1] for p in PATHS] if t + 1 < n else last_after
    vec = lambda v: f"[{fmt_number(v[0])}, {fmt_number(v[1])}]"  # noqa: E731
    return {
        "step": str(t),
        "slider": str(t),
        "stepno": f"step {t} of {n - 1}",
        "loss": [f"loss {fmt_number(record['loss'][t])}", repr(record["loss"][t])],
        "table": [
            [label, [fmt_number(b), repr(b)], [fmt_number(a), repr(a)]]
            for label, b, a in zip(["w[0]", "w[1]", "b"], before, after)
        ],
        "diagram": [vec(before[:2]), fmt_number(before[2]), vec(after[:2]), fmt_number(after[2])],
    }


def shown(page) -> dict:
    got = page.evaluate(SHOWN)
    # the page writes each number as JS's shortest form; Python's repr of the same float64 may spell it otherwise
    got["loss"][1] = repr(float(got["loss"][1]))
    got["table"] = [[row[0]] + [[text, repr(float(v))] for text, v in row[1:]] for row in got["table"]]
    return got


@pytest.mark.jax_promotion(dtype="optax's adam raises a float to its int32 step count (bias correction)")
def test_a_played_run_replays_offline_with_the_record_s_numbers_at_each_step(open_nb, browser, tmp_path):
    nb = open_nb(CELLS, wait_for=".ptl-play-button")
    nb.panel.locator(".ptl-play-select").first.select_option("10")
    nb.kernel.wait_for("ex.play_control.steps_per_second", lambda v: v == 10)
    play = nb.panel.locator(".ptl-play-button").first
    play.click()
    nb.kernel.wait_for("len(ex.history)", lambda n: n >= 8, timeout=Timeouts.ROUND_TRIP * 4)
    play.click()  # pause
    assert nb.kernel.wait_for("ex.playing", lambda v: v is False) is False
    nb.run("ex.step(3)")
    record = nb.value("ex.history_dict()")
    n = len(record["loss"])
    assert n >= 11 and record["step"] == list(range(n))
    last_after = nb.value("[float(ex.result.updated['w'][0]), float(ex.result.updated['w'][1]), "
                          "float(ex.result.updated['b'])]")  # fmt: skip
    live_rows = nb.value("json.loads(ex.diagram.get_state(['rows'])['rows'])")
    path = Path(nb.value(f"str(ex.export_html({str(tmp_path / 'played')!r}))"))
    assert path == tmp_path / "played.html"
    (data,) = re.findall(r'id="ptl-replay-data">(.*?)</script>', path.read_text(encoding="utf-8"), re.S)
    assert json.loads(data)["diagram"]["steps"][-1]["rows"] == live_rows  # the last step as the live diagram drew it

    context, page, requests, errors = open_offline(browser, path)
    try:
        assert shown(page) == expected(record, last_after, n - 1)  # it opens where the run ended
        slider = page.locator(".ptl-replay-step")
        page.locator(".ptl-replay-values summary").click()  # the bars' values as a table
        # the mouse: a click at a quarter of the track, then a drag past its left end
        box = slider.bounding_box()
        page.mouse.click(box["x"] + box["width"] * 0.25, box["y"] + box["height"] / 2)
        t = int(slider.input_value())
        assert 0 < t < n - 1
        assert shown(page) == expected(record, last_after, t)
        page.mouse.move(box["x"] + box["width"] * 0.6, box["y"] + box["height"] / 2)
        page.mouse.down()
        page.mouse.move(box["x"] - 40, box["y"] + box["height"] / 2, steps=5)
        page.mouse.up()
        assert shown(page) == expected(record, last_after, 0)
        # the keyboard: arrows, Home, End
        slider.focus()
        for key, t in (("ArrowRight", 1), ("ArrowRight", 2), ("End", n - 1), ("ArrowLeft", n - 2), ("Home", 0)):
            page.keyboard.press(key)
            assert shown(page) == expected(record, last_after, t), key
        page.keyboard.press("ArrowRight")
        SHOTS.mkdir(parents=True, exist_ok=True)
        page.locator("main").screenshot(path=str(SHOTS / "export-replay-light.png"))
        # the loss line's log scale: the marker at step 1 where log10 of its loss puts it (plot: 10 to 170 px)
        lo, hi, at = min(record["loss"]), max(record["loss"]), record["loss"][1]
        marker = page.locator(".ptl-replay-marker")
        linear = float(marker.get_attribute("cy"))
        assert linear == pytest.approx(10 + (1 - (at - lo) / (hi - lo)) * 160, abs=1e-6)
        page.get_by_label("log-scale loss").check()
        log = math.log10
        assert float(marker.get_attribute("cy")) == pytest.approx(
            10 + (1 - (log(at) - log(lo)) / (log(hi) - log(lo))) * 160, abs=1e-6
        )
        assert errors == [] and requests and all(url.startswith("file://") for url in requests), (errors, requests)
    finally:
        context.close()
    context, page, requests, errors = open_offline(browser, path, "dark")
    try:
        page.locator(".ptl-replay-step").focus()
        page.keyboard.press("Home")
        page.keyboard.press("ArrowRight")
        assert shown(page) == expected(record, last_after, 1)
        colors = page.evaluate("(s => [s.backgroundColor, s.color])(getComputedStyle(document.body))")
        assert colors == ["rgb(17, 17, 17)", "rgb(245, 245, 245)"]  # the dark palette (_replay.css)
        page.locator("main").screenshot(path=str(SHOTS / "export-replay-dark.png"))
        assert errors == [] and all(url.startswith("file://") for url in requests), (errors, requests)
    finally:
        context.close()


def test_a_key_written_as_html_is_text_in_the_replay_page(browser, tmp_path):
    from pytree_lab import StepExplorer

    ex = StepExplorer(lambda p: (p[HOSTILE] - 3.0) ** 2, {HOSTILE: 1.0})
    ex.step(2)
    context, page, requests, errors = open_offline(browser, ex.export_html(tmp_path / "hostile.html"))
    try:
        assert page.locator("img").count() == 0 and errors == []
        assert page.locator(".ptl-replay-label").first.text_content().startswith("</script")
        assert page.locator(".ptl-replay-table tbody td").first.text_content() == HOSTILE
        assert HOSTILE in page.locator(".ptl-trees").first.text_content()
        assert all(url.startswith("file://") for url in requests)
    finally:
        context.close()
