"""A run kept as one HTML page that replays it offline (`ex.export_html`): the numbers the page
holds, read back from the file. Oracles: the live explorer's own diagram at each step it showed
(its synced rows, panels and counts), the record (`history`, `history_dict()`), and a hand-written
optax step; compared bit for bit. The page in a browser: tests/browser/test_browser_export.py."""

from __future__ import annotations

import json
import re

import jax
import numpy as np
import optax
import pytest

from pytree_lab import StepExplorer
from pytree_lab.explorer import export

X = np.array([[0.0, 1.0], [1.0, 0.0], [1.0, 1.0]], np.float32)
Y = np.array([1.0, 2.0, 3.0], np.float32)
optax_adam = pytest.mark.jax_promotion(dtype="optax's adam raises a float to its int32 step count (bias correction)")
HOSTILE = "</script><img src=x onerror=alert(1)>"


def loss(p, x, y):
    return ((x @ p["w"] + p["b"] - y) ** 2).mean()


def start():
    return {"w": np.array([0.5, -0.5], np.float32), "b": np.float32(0.0)}


def read(path) -> dict:
    """The numbers a page holds (its JSON data script), as the page reads them."""
    text = path.read_text(encoding="utf-8")
    (blob,) = re.findall(r'<script type="application/json" id="ptl-replay-data">(.*?)</script>', text, re.S)
    return json.loads(blob)


def live(ex) -> dict:
    """What the live diagram shows now, as the page gets it (its synced traits)."""
    got = ex.diagram.get_state(["rows", "panels", "counts"])
    return {"rows": json.loads(got["rows"]), "panels": json.loads(got["panels"]), "counts": got["counts"]}


@optax_adam
def test_each_point_holds_what_the_live_explorer_showed_there_and_the_record(tmp_path):
    ex = StepExplorer(loss, start(), {"x": X, "y": Y}, optimizer=optax.adam(0.3))
    shown = {0: live(ex)}
    for t in (1, 2, 3):
        ex.step(1)
        shown[t] = live(ex)
    ex.sliders["b"].value = 0.25  # the current point moved (by a slider): what the page shows at 3
    shown[3] = live(ex)
    ex.step(6)  # six points no diagram showed, then the last one
    shown[9] = live(ex)
    page = read(ex.export_html(tmp_path / "run"))
    assert (tmp_path / "run.html").exists() and len(page["diagram"]["steps"]) == 10
    for t, want in shown.items():
        assert page["diagram"]["steps"][t] == want, t  # every row's text, the moments and the state panel
    d = ex.history_dict()
    assert page["loss"] == d["loss"] == list(ex.history)  # the JSON numbers are the float64s, exactly
    assert page["bars"]["labels"] == ["w[0]", "w[1]", "b"]
    paths = page["bars"]["paths"]
    assert paths == ["params['w'][0]", "params['w'][1]", "params['b']"]
    for t in range(10):
        assert page["bars"]["before"][t] == [d[p][t] for p in paths], t
        if t not in (2, 9):  # the step from each point lands on the next (but where the slider moved it)
            assert page["bars"]["after"][t] == [d[p][t + 1] for p in paths], t
    r = ex.result  # the last point's after: the live step's updated
    assert page["bars"]["after"][9] == [float(r.updated["w"][0]), float(r.updated["w"][1]), float(r.updated["b"])]
    assert page["start"] == 9 and page["loss_text"][0] == "4.5" and page["rate_text"] == [""] * 10
    assert page["note"] == "10 points, recorded by StepExplorer; replayed without a kernel."
    ex.set_inputs({"x": X, "y": Y + 1})  # another batch: the points before (not the current one, moved) used the first
    note = export.page_data(ex)["note"]
    assert "At 9 step(s) (first: 0) the loss recorded differs" in note, note


@optax_adam
def test_the_page_s_grads_and_moments_are_a_hand_written_optax_step_s():
    opt = optax.adam(0.3)
    ex = StepExplorer(loss, start(), {"x": X, "y": Y}, optimizer=opt)
    ex.step(4)
    params, state = jax.tree.map(np.asarray, start()), opt.init(start())
    for _ in range(4):
        grads = jax.grad(loss)(params, X, Y)
        updates, state = opt.update(grads, state, params)
        params = optax.apply_updates(params, updates)
    grads = jax.grad(loss)(params, X, Y)
    _, state = opt.update(grads, state, params)
    data = export.page_data(ex)
    step = data["diagram"]["steps"][4]
    cols = data["diagram"]["columns"]
    assert cols == ["params", "grads", "adam mu", "adam nu", "updated"]
    row = step["rows"]["path"].index("['b']")
    cell = {c: step["rows"]["cells"][i]["value"][row] for i, c in enumerate(cols)}
    fmt = export.fmt_number
    assert cell["grads"] == fmt(grads["b"]) and cell["adam mu"] == fmt(state[0].mu["b"])
    assert cell["adam nu"] == fmt(state[0].nu["b"]) and cell["params"] == fmt(params["b"])


def test_a_hostile_key_stays_text_inside_the_data_and_a_file_not_its_own_is_kept(tmp_path):
    ex = StepExplorer(lambda p: (p[HOSTILE] - 3.0) ** 2, {HOSTILE: np.float32(1.0)})  # p − η·g, rate 0.05
    ex.step(2)
    mine = tmp_path / "run.html"
    mine.write_text("the lecturer's notes", encoding="utf-8")
    path = ex.export_html(mine)
    assert path == tmp_path / "run-2.html" and mine.read_text(encoding="utf-8") == "the lecturer's notes"
    assert ex.export_html(path) == path  # its own file: written again
    text = path.read_text(encoding="utf-8")
    assert text.lower().count("</script") == 2 and "<img" not in text  # the data and the module end once each
    data = read(path)
    assert data["bars"]["labels"] == [HOSTILE] and f"[{HOSTILE!r}]" in data["diagram"]["steps"][0]["rows"]["path"]
    # x = 1, 1.2, 1.38 (x − 0.05·2(x − 3)); loss (x − 3)²
    assert data["loss"] == pytest.approx([4.0, 3.24, 2.6244]) and data["rate_text"] == ["0.05"] * 3
    assert [row[0] for row in data["bars"]["before"]] == pytest.approx([1.0, 1.2, 1.38])


def test_a_run_too_big_for_one_page_is_refused_before_its_points_are_drawn(tmp_path, monkeypatch):
    ex = StepExplorer(lambda p: (p["w"] ** 2).sum(), {"w": np.ones(40, np.float32)})
    ex.step(50)
    monkeypatch.setattr(export, "MAX_BYTES", 100_000)  # a point: 0.7 kB of rows, 24 bars of 4 numbers (51: 118 kB)
    drawn, step_at = [], ex.session.step_at
    monkeypatch.setattr(ex.session, "step_at", lambda *a: drawn.append(a) or step_at(*a))
    with pytest.raises(ValueError, match=r"too big for one page: about 1\d\d,\d\d\d bytes .* ex.save\(path\)"):
        ex.export_html(tmp_path / "big.html")
    assert len(drawn) == 1 and not (tmp_path / "big.html").exists()


def test_a_run_with_no_step_on_record_says_so(tmp_path):
    ex = StepExplorer(lambda p: p["w"] ** 2 + p["nothing"], {"w": np.float32(1.0)})  # fails at the start
    with pytest.raises(ValueError, match="no run to export yet"):
        ex.export_html(tmp_path / "run.html")
    assert not (tmp_path / "run.html").exists()


@optax_adam
def test_a_100_step_mlp_with_adam_stays_small(tmp_path):
    rng = np.random.default_rng(0)
    x, y = rng.normal(size=(16, 2)).astype(np.float32), rng.normal(size=(16, 2)).astype(np.float32)

    def mlp(p, x, y):
        return ((jax.nn.tanh(x @ p["w1"] + p["b1"][None]) @ p["w2"] + p["b2"][None] - y) ** 2).mean()

    params = {
        "w1": rng.normal(size=(2, 8)).astype(np.float32),
        "b1": np.zeros(8, np.float32),
        "w2": rng.normal(size=(8, 2)).astype(np.float32),
        "b2": np.zeros(2, np.float32),
    }
    ex = StepExplorer(mlp, params, {"x": x, "y": y}, optimizer=optax.adam(0.05))
    ex.step(100)
    path = ex.export_html(tmp_path / "mlp.html")
    size = path.stat().st_size
    assert 100_000 < size < 2_000_000, size  # about 5.5 kB a point: the diagram's rows, text for text
    text = path.read_text(encoding="utf-8")
    assert "http://" not in text.replace("http://www.w3.org/2000/svg", "") and "https://" not in text
    assert len(read(path)["loss"]) == 101


def test_a_loss_that_fails_when_the_run_is_computed_again_is_one_sentence_and_writes_nothing(tmp_path):
    # the loss's host callback raises once the run is over: the export's step is the user's code again
    over = {"now": False}

    def check(v):
        if over["now"]:
            raise SystemExit("the lab machine was switched off")

    def watched(p, x, y):
        jax.debug.callback(check, p["b"])
        return loss(p, x, y)

    ex = StepExplorer(watched, start(), {"x": X, "y": Y}, learning_rate=0.1)
    ex.step(2)
    over["now"] = True
    with pytest.raises(ValueError, match=r"^Point 0 of the run could not be computed again: ") as err:
        ex.export_html(tmp_path / "run.html")
    assert "\n" not in str(err.value) and not list(tmp_path.iterdir())
    assert len(ex.history) == 3 and ex.session.good_now  # the record and the explorer are as they were
    ex.close()
