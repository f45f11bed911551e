"""Unknown keyword arguments are refused, naming the closest valid one.

`StepExplorer(learning_rat=0.1)` would otherwise run at the default rate, and
`PytreeDiagram(p, grad=g)` drop `g`: a typo must be an error that says what was meant.
"""

from __future__ import annotations

import difflib
import inspect
from collections.abc import Iterable
from typing import Any

__all__ = ["refuse_unknown", "widget_keywords", "refuse_unknown_widget_keywords"]


def refuse_unknown(owner: str, given: Iterable[str], valid: Iterable[str]) -> None:
    """Raise TypeError for the first name in `given` that is not in `valid`, with the closest
    valid name (difflib) or the list of valid names."""
    valid = list(dict.fromkeys(valid))
    for name in given:
        if name in valid:
            continue
        shown = [v for v in valid if not v.startswith("_")]
        close = difflib.get_close_matches(str(name), shown, n=1)
        hint = f"did you mean {close[0]!r}?" if close else f"it takes {', '.join(map(repr, shown))}."
        raise TypeError(f"{owner}() got an unexpected keyword argument {name!r}: {hint}")


def widget_keywords(cls: Any, own: Iterable[str]) -> list[str]:
    """The keywords a widget class takes: its own arguments, then its traits (ipywidgets passes
    trait values such as layout= or tooltip= through to the widget)."""
    return list(own) + sorted(cls.class_trait_names())


def refuse_unknown_widget_keywords(widget: Any, kwargs: dict) -> None:
    """`refuse_unknown` for a widget's constructor: its class's own arguments and its traits."""
    cls = type(widget)
    own = [
        name
        for name, p in inspect.signature(cls.__init__).parameters.items()
        if name != "self" and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
    ]
    refuse_unknown(cls.__name__, kwargs, widget_keywords(cls, own))
