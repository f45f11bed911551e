"""What front ends we cannot run here (Colab, VS Code) need from pytree-lab, checked in the kernel.

- Colab renders third-party widgets only with its custom widget manager, which anywidget names in
  its views' display metadata. The explorer is an ipywidgets VBox (of anywidgets and bqplot), so
  it must carry the same metadata. Colab's module is not installable, so the test gives the
  kernel a stand-in `google.colab.output` exposing the two names anywidget reads (the function
  that enables the manager and the manager's URL); anywidget's own code does the rest.
- No widget front end needs a CDN: every model and view module of every widget a lesson shows is
  a JupyterLab extension installed with the Python packages, and pytree-lab's own ES modules and
  stylesheets import nothing from the network.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
MANAGER = "https://ssl.gstatic.com/colaboratory-static/widgets/colab-cdn-widget-manager/0123abcd/manager.min.js"

COLAB = textwrap.dedent(f"""
    import json, sys, types
    enabled = []
    output = types.ModuleType("google.colab.output")
    output.enable_custom_widget_manager = lambda: enabled.append(True)
    output._widgets = types.SimpleNamespace(_installed_url={MANAGER!r})
    google = types.ModuleType("google"); colab = types.ModuleType("google.colab")
    google.colab, colab.output = colab, output
    sys.modules.update({{"google": google, "google.colab": colab, "google.colab.output": output}})

    from pytree_lab import PytreeDiagram, StepExplorer
    from pytree_lab.course import grad_structure_quiz
    out = {{}}
    for name, widget in [("explorer", StepExplorer()), ("diagram", PytreeDiagram({{"w": 1.0}})),
                         ("quiz", grad_structure_quiz())]:
        bundle = widget._repr_mimebundle_()
        data, metadata = bundle if isinstance(bundle, tuple) else (bundle, {{}})
        out[name] = {{"metadata": metadata, "view": data.get({WIDGET_VIEW!r}, {{}}).get("model_id") == widget.model_id,
                      "text": "text/plain" in data and "text/html" in data}}
    out["enabled"] = len(enabled)
    print("RESULT", json.dumps(out))
""")


def test_in_colab_the_explorer_names_the_custom_widget_manager_like_anywidget():
    run = subprocess.run(
        [sys.executable, "-c", COLAB],
        capture_output=True,
        text=True,
        timeout=300,
        env={**__import__("os").environ, "JAX_PLATFORMS": "cpu"},
    )
    assert run.returncode == 0, run.stderr[-3000:]
    (line,) = [ln for ln in run.stdout.splitlines() if ln.startswith("RESULT ")]
    out = json.loads(line[len("RESULT ") :])
    expected = {WIDGET_VIEW: {"colab": {"custom_widget_manager": {"url": MANAGER}}}}
    for name in ("explorer", "diagram", "quiz"):
        assert out[name] == {"metadata": expected, "view": True, "text": True}, name
    assert out["enabled"] == 1  # anywidget turned Colab's manager on, once


def test_outside_colab_the_bundle_is_unchanged():
    from pytree_lab import StepExplorer

    ex = StepExplorer()
    try:
        bundle = ex._repr_mimebundle_()
        assert isinstance(bundle, dict)  # no metadata part where there is nothing to say
        assert bundle[WIDGET_VIEW]["model_id"] == ex.model_id
        assert "params" in bundle["text/plain"]
    finally:
        ex.close()


def _labextensions() -> set[str]:
    """The JupyterLab extensions installed in this environment (as a front end finds them)."""
    from jupyter_core.paths import jupyter_path

    found = set()
    for base in jupyter_path("labextensions"):
        for pkg in Path(base).glob("**/package.json"):
            if pkg.parent.parent.name == "labextensions" or pkg.parent.parent.parent.name == "labextensions":
                found.add(json.loads(pkg.read_text())["name"])
    return found


# the model/view modules @jupyter-widgets/jupyterlab-manager itself provides
# an import or @import from the network (http, https or protocol-relative)
REMOTE = re.compile(r"""(import\s*(\(|[^;]*?from)\s*["'](https?:)?//)|(@import\s+url\(\s*["']?(https?:)?//)""")
MANAGER_MODULES = {"@jupyter-widgets/base", "@jupyter-widgets/controls", "@jupyter-widgets/output"}


def test_every_widget_module_is_an_installed_extension_and_nothing_loads_from_a_cdn():
    from ipywidgets.widgets.widget import _instances  # every live widget (Widget.widgets, deprecated)

    from pytree_lab import PackedView, PytreeDiagram, StepExplorer
    from pytree_lab.course import grad_structure_quiz

    before = set(_instances)
    shown = [
        StepExplorer(),
        PytreeDiagram({"w": 1.0}),
        grad_structure_quiz(),
        PackedView({"w": __import__("numpy").zeros(2)}),
    ]
    try:
        created = [_instances[k] for k in set(_instances) - before]
        modules = {w._model_module for w in created} | {w._view_module for w in created if w._view_module}
        assert {"anywidget", "bqplot", "@jupyter-widgets/controls"} <= modules
        installed = _labextensions()
        assert "@jupyter-widgets/jupyterlab-manager" in installed
        assert modules - MANAGER_MODULES <= installed, modules - MANAGER_MODULES - installed
        for w in created:
            for trait in ("_esm", "_css"):
                source = getattr(w, trait, None)
                if isinstance(source, str):
                    assert not REMOTE.search(source), (type(w).__name__, trait, REMOTE.search(source).group(0))
                    if trait == "_esm":
                        assert "export default" in source  # the module itself, inline, not a URL
    finally:
        for w in shown:
            w.close()


@pytest.mark.parametrize(
    "source, remote",
    [
        ('import * as d3 from "https://esm.sh/d3@7";', True),
        ("const m = await import('//cdn.jsdelivr.net/npm/x');", True),
        ('@import url("https://fonts.example/x.css");', True),
        ('import { x } from "./local.js";', False),
        ('// see https://example.org\nexport default { render() {} };', False),
    ],
)
def test_the_cdn_check_itself(source, remote):
    assert bool(REMOTE.search(source)) is remote
