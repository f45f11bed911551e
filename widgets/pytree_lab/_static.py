"""The widgets' ES modules and stylesheets (static/), as anywidget should get them."""

from __future__ import annotations

import os
import pathlib

STATIC = pathlib.Path(__file__).parent / "static"


def static_asset(name: str) -> str | pathlib.Path:
    """A static file's text for anywidget.

    Given a path, anywidget connects every instance to the file's change signal, which keeps
    each widget (and the trees it holds) alive after `close()`; the text does not.
    `ANYWIDGET_HMR=1` (live reload while editing the JS) gets the path.
    """
    path = STATIC / name
    return path if os.environ.get("ANYWIDGET_HMR") == "1" else path.read_text(encoding="utf-8")
