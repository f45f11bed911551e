"""The explorer's session on its own, without a widget: its rules (a slider move, a step, a run,
a reset, a refused tree, a failing loss) checked against numbers derived by hand, and the whole
lesson step in a Python where ipywidgets, anywidget and bqplot cannot be imported."""

from __future__ import annotations

import json
import subprocess
import sys

import jax.numpy as jnp
import pytest

from pytree_lab.explorer.session import ExplorerSession

# The lesson's point: weight [1, -1], bias 0, x [2, 1], target 3, learning rate 0.05.
# prediction 2 - 1 + 0 = 1, error -2, loss 4; grads 2·(-2)·[2, 1] = [-8, -4] and 2·(-2) = -4;
# updated [1, -1] - 0.05·[-8, -4] = [1.4, -0.8] and 0 - 0.05·(-4) = 0.2; then prediction
# 2.8 - 0.8 + 0.2 = 2.2 and loss (2.2 - 3)² = 0.64.


def _lesson() -> ExplorerSession:
    session = ExplorerSession()
    session.plan_sliders(None, 12)
    return session


def _step(session: ExplorerSession):
    computed = session.compute()
    assert computed.result is not None, computed.failure
    session.commit(computed)
    return computed.result


def test_the_lesson_step_by_hand():
    session = _lesson()
    result = _step(session)
    assert float(result.loss) == pytest.approx(4.0)
    assert [float(v) for v in result.grads["weight"]] == pytest.approx([-8.0, -4.0])
    assert float(result.grads["bias"]) == pytest.approx(-4.0)
    assert [float(v) for v in result.updated["weight"]] == pytest.approx([1.4, -0.8])
    assert float(result.updated["bias"]) == pytest.approx(0.2)
    assert float(result.loss_after) == pytest.approx(0.64)
    assert list(session.history) == pytest.approx([4.0]) and session.step_number == 0


def test_a_slider_move_changes_the_same_point():
    session = _lesson()
    _step(session)
    assert {"bias", "weight[0]", "weight[1]"} <= set(session.values)
    session.move("bias", 0.5)  # prediction 1.5, error -1.5: loss 2.25, grads [-6, -3] and -3
    result = _step(session)
    assert float(result.loss) == pytest.approx(2.25)
    assert [float(v) for v in result.grads["weight"]] == pytest.approx([-6.0, -3.0])
    assert float(result.updated["bias"]) == pytest.approx(0.5 + 0.05 * 3)
    assert list(session.history) == pytest.approx([2.25])  # the point moved: not a new one


def test_run_two_steps_then_reset():
    session = _lesson()
    _step(session)
    assert session.run(2) == ""
    # second step from [1.4, -0.8, 0.2]: error -0.8, grads [-3.2, -1.6] and -1.6, so
    # [1.56, -0.72, 0.28], prediction 3.12 - 0.72 + 0.28 = 2.68, loss 0.32² = 0.1024
    # the run records the points it left; the one it stops on is recorded when its step is shown
    assert list(session.history) == pytest.approx([4.0, 0.64])
    assert session.values["weight[0]"] == pytest.approx(1.56, rel=1e-6)
    assert session.values["bias"] == pytest.approx(0.28, rel=1e-5)
    result = _step(session)
    assert float(result.loss) == pytest.approx(0.1024, rel=1e-5)  # float32, two steps on
    assert list(session.history) == pytest.approx([4.0, 0.64, 0.1024], rel=1e-5) and session.step_number == 2
    assert session.reset() == ""
    assert list(session.history) == [] and session.values["weight[0]"] == 1.0
    assert float(_step(session).loss) == pytest.approx(4.0)


def test_a_tree_of_another_shape_is_refused_and_the_point_kept():
    session = _lesson()
    before = _step(session)
    said = session.set_tree("params", {"weight": jnp.array([1.0, -1.0, 2.0]), "bias": jnp.array(0.0)})
    assert said and "weight" in said
    assert float(_step(session).loss) == float(before.loss) == pytest.approx(4.0)


def test_a_failing_loss_is_a_sentence_and_the_last_good_step_stays():
    session = _lesson()
    good = _step(session)

    def broken(p, x, target):
        raise ValueError("the loss broke here")

    session.set_loss(broken)
    computed = session.compute()
    assert computed.result is None and "ValueError: the loss broke here" in computed.failure
    assert session.last_good is good and "in broken" in session.last_traceback


def test_the_user_trees_are_copied_not_aliased():
    params = {"weight": jnp.array([1.0, -1.0]), "bias": jnp.array(0.0)}
    inputs = {"x": jnp.array([2.0, 1.0]), "target": jnp.array(3.0)}

    def loss(p, x, target):
        return (jnp.dot(p["weight"], x) + p["bias"] - target) ** 2

    session = ExplorerSession(loss, params, inputs, 0.05)
    session.plan_sliders(None, 12)
    session.move("weight[0]", 3.0)
    result = _step(session)
    assert float(result.params["weight"][0]) == 3.0
    assert [float(v) for v in params["weight"]] == [1.0, -1.0]  # the caller's tree is as it was


_WITHOUT_WIDGETS = r"""
import sys
for name in ("ipywidgets", "anywidget", "bqplot", "traitlets"):
    sys.modules[name] = None  # importing it raises ImportError
from pytree_lab.explorer.session import ExplorerSession
session = ExplorerSession()
session.plan_sliders(None, 12)
computed = session.compute()
session.commit(computed)
import json
r = computed.result
print(json.dumps([float(r.loss), [float(v) for v in r.updated["weight"]], float(r.loss_after)]))
print(sorted(n for n in sys.modules if n.split(".")[0] in ("ipywidgets", "anywidget", "bqplot") and sys.modules[n]))
"""


def test_the_session_runs_the_lesson_step_where_no_widget_package_can_be_imported():
    done = subprocess.run([sys.executable, "-c", _WITHOUT_WIDGETS], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    first, loaded = done.stdout.splitlines()[:2]
    loss, weight, after = json.loads(first)
    assert loss == pytest.approx(4.0) and weight == pytest.approx([1.4, -0.8]) and after == pytest.approx(0.64)
    assert loaded == "[]"
