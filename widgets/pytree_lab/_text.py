"""Widgets that still read where no widget front end runs (HTML exports, plain consoles)."""

from __future__ import annotations

import html


class TextForm:
    """Mixin for a widget with a `text()` method: its mimebundle carries that text as
    text/plain and as an escaped <pre> (text/html) beside the live view."""

    def text(self) -> str:  # pragma: no cover - every widget defines its own
        raise NotImplementedError

    def _repr_mimebundle_(self, **kwargs):
        bundle = super()._repr_mimebundle_(**kwargs)
        data = bundle[0] if isinstance(bundle, tuple) else bundle
        if isinstance(data, dict) and not isinstance(bundle, tuple):
            # A composite (the explorer is an ipywidgets VBox of anywidgets and bqplot) gets the
            # metadata anywidget gives its own views: in Colab it names the custom widget manager
            # that renders third-party widgets (empty elsewhere).
            metadata = _anywidget_repr_metadata()
            if metadata:
                bundle = (data, metadata)
        if isinstance(data, dict):
            text = self.text()
            data["text/plain"] = text
            data["text/html"] = (
                '<pre class="pytree-lab-text" style="font-family:monospace">' + html.escape(text) + "</pre>"
            )
        return bundle


def _anywidget_repr_metadata() -> dict:
    try:
        from anywidget._util import get_repr_metadata
    except ImportError:  # pragma: no cover - an anywidget without it: nothing to add
        return {}
    return get_repr_metadata()
