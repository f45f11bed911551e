"""Every public synced trait of every public widget says what it holds (type, default) and who
writes it: the kernel, or the page (the traits in the class's `_page_intents`)."""

from __future__ import annotations

import inspect

import anywidget
import ipywidgets
import pytest

import pytree_lab
import pytree_lab.course
import pytree_lab.exercises
from pytree_lab.slider import Slider, SliderModule


def _public_widgets() -> list[type]:
    found = {Slider, SliderModule}
    for module in (pytree_lab, pytree_lab.exercises, pytree_lab.course):
        for name in getattr(module, "__all__", ()):
            obj = getattr(module, name, None)
            if inspect.isclass(obj) and issubclass(obj, ipywidgets.Widget):
                found.add(obj)
    return sorted(found, key=lambda cls: cls.__qualname__)


BASE = set(anywidget.AnyWidget.class_traits(sync=True)) | set(ipywidgets.VBox.class_traits(sync=True))
WIDGETS = _public_widgets()


def _own_synced(cls: type) -> dict:
    return {
        name: trait
        for name, trait in cls.class_traits(sync=True).items()
        if not name.startswith("_") and name not in BASE
    }


def test_the_public_widgets_are_found():
    names = {cls.__name__ for cls in WIDGETS}
    assert {
        "StepExplorer",
        "PytreeDiagram",
        "PackedView",
        "Slider",
        "CheckButton",
        "PredictionPrompt",
        "Quiz",
        "EvidenceButton",
    } <= names
    assert sum(len(_own_synced(cls)) for cls in WIDGETS) > 60


@pytest.mark.parametrize("cls", WIDGETS, ids=lambda cls: cls.__name__)
def test_every_public_synced_trait_says_what_it_holds_and_who_writes_it(cls):
    intents = getattr(cls, "_page_intents", frozenset())
    for name, trait in _own_synced(cls).items():
        text = trait.help or ""
        assert len(text) > 20, f"{cls.__name__}.{name} has no help"
        if name in intents:
            assert "Written by the page" in text, f"{cls.__name__}.{name}: the page writes it"
        else:
            assert "Written by the kernel" in text, f"{cls.__name__}.{name}: the kernel writes it"
