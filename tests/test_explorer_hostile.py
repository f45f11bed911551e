"""The explorer against hostile losses, optimizers and page messages (issue 20, sections 4-6):
every case ends in a sentence in the widget, the kernel keeps answering, and the slider, the bars
and `result` agree with what the message says."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
import pytest

from pytree_lab import StepExplorer


def _alert(ex) -> str:
    value = ex.status.value
    assert 'role="alert"' in value, value
    return value


class _StrRaises(Exception):
    def __str__(self):
        raise RuntimeError("str of the error")

    def __repr__(self):
        raise RuntimeError("repr of the error")


class _StrExits(Exception):
    def __str__(self):
        raise SystemExit(3)

    def __repr__(self):
        raise SystemExit(4)


class _StrNotText(Exception):
    def __str__(self):
        return 42  # str() then raises TypeError


@pytest.mark.parametrize("kind", [_StrRaises, _StrExits, _StrNotText])
def test_a_loss_whose_error_cannot_be_printed_gets_a_message_and_keeps_the_views_on_the_last_good_step(kind):
    state = {"bad": False}

    def loss(p, x):
        if state["bad"]:
            raise kind()
        return jnp.sum((p["w"] * x) ** 2)

    ex = StepExplorer(loss, {"w": jnp.array([1.0, 2.0])}, {"x": jnp.array(3.0)})
    assert ex.result.loss == 45.0  # (3² + 6²)
    good = ex.result
    state["bad"] = True
    assert ex.set_loss(loss) is None  # retraced: raises now
    text = _alert(ex)
    assert f"The step failed: {kind.__name__}: (its message could not be shown: the exception&#x27;s __str__ failed)" in text
    ex.sliders["w[0]"].value = 0.5  # a move: the same message, nothing escapes
    assert f"{kind.__name__}" in _alert(ex)
    assert ex.step(3) is None and kind.__name__ in _alert(ex)
    assert ex.result is good  # the last good step: the bars say w = [1, 2] before, as the message says
    np.testing.assert_allclose(ex.chart_view.bars.y[0], [1.0, 2.0])
    assert not ex.text().startswith("StepExplorer (its text form failed")  # the text form still works
    state["bad"] = False
    r = ex.set_loss(loss)  # fixed: the slider's value is used
    assert r.loss == pytest.approx((0.5 * 3) ** 2 + 6.0 ** 2)
    np.testing.assert_allclose(ex.chart_view.bars.y[0], [0.5, 2.0])
