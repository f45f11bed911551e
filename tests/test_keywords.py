"""Widgets and functions refuse what they do not know: an unknown keyword is a TypeError naming
the closest valid one, and every public trait says its type, default and who writes it."""

from __future__ import annotations

import pytest

from pytree_lab import PackedView, PytreeDiagram, StepExplorer
from pytree_lab.chart import BarTable
from pytree_lab.exercises import Quiz


def test_a_typo_in_the_explorers_arguments_is_an_error_naming_the_argument_meant():
    with pytest.raises(TypeError, match="did you mean 'learning_rate'"):
        StepExplorer(learning_rat=0.1)
    with pytest.raises(TypeError, match="did you mean 'max_sliders'"):
        StepExplorer(max_slider=3)


def test_the_diagram_does_not_drop_a_misspelt_tree():
    params, grads = {"w": 1.0}, {"w": 2.0}
    with pytest.raises(TypeError, match="did you mean 'grads'"):
        PytreeDiagram(params, grad=grads)


def test_other_widgets_refuse_typos_too_and_keep_taking_their_traits():
    with pytest.raises(TypeError, match="did you mean 'name'"):
        PackedView({"w": [1.0, 2.0]}, nme="p")
    with pytest.raises(TypeError, match="did you mean 'explanation'"):
        Quiz("2 + 2?", ["3", "4"], 1, "four", explaination="x")
    d = PytreeDiagram({"w": 1.0}, grads={"w": 2.0}, layout={"width": "300px"})
    assert d.columns == ["params", "grads"]
    ex = StepExplorer(layout={"width": "90%"})
    assert ex.layout.width == "90%" and ex.result.loss == 4.0
    ex.close()


@pytest.mark.parametrize("widget", [StepExplorer, PytreeDiagram, PackedView, BarTable])
def test_every_public_trait_says_its_type_default_and_writer(widget):
    ours = [base for base in widget.__mro__ if base.__module__.startswith("pytree_lab")]
    own = {
        name: trait
        for name, trait in widget.class_traits().items()
        if not name.startswith("_") and any(name in vars(base) for base in ours)
    }
    assert own
    for name, trait in own.items():
        text = trait.help or ""
        assert "default" in text and ("kernel" in text or "page" in text), (widget.__name__, name, text)
