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
    if os.environ.get("ANYWIDGET_HMR") == "1":
        return path  # (without the shared part below: a widget then says nothing of a lost kernel)
    text = path.read_text(encoding="utf-8")
    if name.endswith(".js") and ("watchKernel(" in text or "kernelGone(" in text):
        # what the modules share goes before the text of each that uses it (one file per
        # widget: no imports); the slider proxy, sent with every slider, uses none of it
        text = SHARED_JS + "\n" + text
    return text


SHARED_JS = (STATIC / "_kernel_gone.js").read_text(encoding="utf-8")
