"""A view added as docs/development.md says (one file: the class and its entry in `VIEWS`) is drawn
everywhere the explorer's views are, each through the registry (explorer/views.py): the live
explorer, presenter mode, the replay page (`export_html`) and `OptimizerComparison`. The view is
the docs' own code block, written to a module of its own and imported. Oracles: the lesson's
numbers derived by hand (weight [1, -1], bias 0, x [2, 1], target 3) and `jax.grad` called here on
the params each point holds."""

from __future__ import annotations

import html
import importlib
import json
import math
import re
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import optax
import pytest

from pytree_lab import OptimizerComparison, StepExplorer, lesson
from pytree_lab.explorer import views

DOCS = Path(__file__).resolve().parents[1] / "docs" / "development.md"


@pytest.fixture
def gradnorm(tmp_path, monkeypatch):
    """The docs' view module (its one code block under "Adding a view"), imported: the registry
    as it then is, put back after the test."""
    section = DOCS.read_text(encoding="utf-8").split("### Adding a view", 1)[1].split("\n## ", 1)[0]
    (code,) = re.findall(r"```python\n(.*?)```", section, re.S)
    (tmp_path / "gradnorms.py").write_text(code, encoding="utf-8")
    monkeypatch.setattr(views, "VIEWS", views.VIEWS)  # (restored after the test)
    monkeypatch.syspath_prepend(str(tmp_path))
    module = importlib.import_module("gradnorms")
    yield module.GradNormView
    sys.modules.pop("gradnorms", None)


def norms(params) -> dict[str, float]:
    """The gradient's norm by leaf at `params`, by jax.grad here."""
    grads = jax.grad(lesson.lesson_loss)(params, **lesson.lesson_inputs())
    return {jax.tree_util.keystr(p): float(jnp.linalg.norm(g)) for p, g in jax.tree_util.tree_leaves_with_path(grads)}


def text(found: dict[str, float]) -> str:
    return "Gradient norm by leaf: " + ", ".join(f"{k} {v:.4g}" for k, v in found.items())


# by hand: error w·x + b − 3 = −2 at the start, grads 2·error·x = [−8, −4] (norm √80) and −4; one
# step of 0.05 to weight [1.4, −0.8], bias 0.2: error −0.8, grads [−3.2, −1.6] (norm 1.6·√5), −1.6;
# a second to [1.56, −0.72], 0.28: error −0.32, grads [−1.28, −0.64] (norm 0.64·√5), −0.64
HAND = [
    {"['bias']": 4.0, "['weight']": math.sqrt(80)},
    {"['bias']": 1.6, "['weight']": 1.6 * math.sqrt(5)},
    {"['bias']": 0.64, "['weight']": 0.64 * math.sqrt(5)},
]


def in_children(widget, target) -> bool:
    return widget is target or any(in_children(c, target) for c in getattr(widget, "children", ()))


def test_the_docs_view_is_in_the_live_explorer_and_in_presenter_mode(gradnorm):
    assert views.VIEWS[-1] is gradnorm  # one file: the class, and its entry in VIEWS
    for presenter in (False, True):
        ex = StepExplorer(presenter=presenter)
        view = ex.views["GradNormView"]
        assert ex.grad_norms is view.label and in_children(ex, view.label)
        assert view.norms == pytest.approx(HAND[0], rel=1e-6)
        ex.step(1)
        assert view.norms == pytest.approx(HAND[1], rel=1e-6) == norms(ex.params)
        assert view.label.value == html.escape(text(HAND[1])) and text(HAND[1]) in ex.text()
        assert ("ptl-presenter" in ex._dom_classes) is presenter  # presenter mode: the same views, drawn large
        ex.close()


def test_the_docs_view_is_in_the_replay_page_at_every_point(gradnorm, tmp_path):
    ex = StepExplorer()
    ex.step(2)
    page = (ex.export_html(tmp_path / "run")).read_text(encoding="utf-8")
    (blob,) = re.findall(r'<script type="application/json" id="ptl-replay-data">(.*?)</script>', page, re.S)
    (shown,) = [v for v in json.loads(blob)["views"] if v["name"] == "GradNormView"]
    record = ex.history_dict()
    at = [{"weight": jnp.array(record["params['weight'][0]"][t : t + 1] + record["params['weight'][1]"][t : t + 1]),
           "bias": jnp.float32(record["params['bias']"][t])} for t in range(3)]  # fmt: skip
    assert shown["text"] == [text(norms(p)) for p in at]  # each point's own step, drawn by the view
    assert [text(h) for h in HAND] == shown["text"]
    assert shown["text"][1] == "Gradient norm by leaf: ['bias'] 1.6, ['weight'] 3.578"


@pytest.mark.jax_promotion(dtype="optax's adam raises a float to its int32 step count (bias correction)")
def test_the_docs_view_is_in_the_comparison_once_for_each_optimizer(gradnorm):
    opts = {"sgd": optax.sgd(0.05), "adam": optax.adam(0.1)}
    cmp = OptimizerComparison(lesson.lesson_loss, lesson.lesson_params(), lesson.lesson_inputs(), opts)
    for name in opts:
        view = cmp.views[name]["GradNormView"]
        assert in_children(cmp, view.label) and view.norms == pytest.approx(HAND[0], rel=1e-6)
    cmp.step(1)
    sgd, adam = (cmp.views[n]["GradNormView"] for n in opts)
    assert sgd.norms == pytest.approx(HAND[1], rel=1e-6)  # sgd(0.05): the hand-derived step
    # adam's first step moves each element by 0.1 against its gradient's sign: weight [1.1, -0.9], bias
    # 0.1; error -1.6, grads [-6.4, -3.2] (norm 3.2·√5) and -3.2
    assert adam.norms == pytest.approx({"['bias']": 3.2, "['weight']": 3.2 * math.sqrt(5)}, rel=1e-5)
    assert adam.norms == pytest.approx(norms(cmp.params["adam"]), rel=1e-6)
    assert f"sgd: {text(sgd.norms)}" in cmp.text() and f"adam: {text(adam.norms)}" in cmp.text()
    cmp.close()
