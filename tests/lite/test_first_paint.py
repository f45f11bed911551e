"""lite_build/first_paint.py's storing of an executed notebook, without a kernel: the same outputs give
the same bytes whatever ids the kernel drew, a widget output keeps only the models it shows (modules
by sha256), the run's folder reads as the browser's, and no execution count is kept.

The notebooks' own run on the Lite engine, and the page drawing what was stored, are tested on the
built site in Chromium (tests/lite/test_lite_offline.py)."""

from __future__ import annotations

import hashlib
import json

from lite_build import first_paint

ESM = "export default { render({ model, el }) { el.textContent = model.get('value'); } };"


def executed(ids: list[str], workdir: str) -> dict:
    """A notebook as nbclient leaves it: one widget (a box holding an anywidget), a print, timings."""
    box, child, layout, unused = ids
    state = {
        box: {
            "model_name": "VBoxModel",
            "model_module": "@jupyter-widgets/controls",
            "state": {"children": [f"IPY_MODEL_{child}"], "layout": f"IPY_MODEL_{layout}", "_view_name": "VBoxView"},
        },
        child: {
            "model_name": "AnyModel",
            "model_module": "anywidget",
            "state": {"_esm": ESM, "value": 1.5, "module": f"anywidget:{child}", "_dom_classes": ["x"]},
        },
        layout: {"model_name": "LayoutModel", "model_module": "@jupyter-widgets/base", "state": {}},
        unused: {"model_name": "LayoutModel", "model_module": "@jupyter-widgets/base", "state": {}},
    }
    return {
        "metadata": {"widgets": {first_paint.WIDGET_STATE: {"state": state}}},
        "cells": [
            {
                "cell_type": "code",
                "execution_count": 3,
                "metadata": {"execution": {"iopub.status.idle": "2026-12-06T00:00:00Z"}},
                "source": "w",
                "outputs": [
                    {"output_type": "stream", "name": "stdout", "text": f"saved in {workdir}\n"},
                    {
                        "output_type": "execute_result",
                        "execution_count": 3,
                        "metadata": {},
                        "data": {
                            first_paint.WIDGET_VIEW: {"model_id": box, "version_major": 2},
                            "text/plain": "the text form",
                        },
                    },
                ],
            }
        ],
    }


def test_stored_outputs_are_the_same_bytes_whatever_the_kernels_ids():
    one = first_paint.store(executed(["a" * 32, "b" * 32, "c" * 32, "d" * 32], "/tmp/x/.run-1"), "/tmp/x/.run-1")
    two = first_paint.store(executed(["1" * 32, "2" * 32, "3" * 32, "4" * 32], "/tmp/y/.run-1"), "/tmp/y/.run-1")
    assert json.dumps(one) == json.dumps(two)
    cell = one["cells"][0]
    assert cell["execution_count"] is None and "execution" not in cell["metadata"]
    stream, result = cell["outputs"]
    assert stream["text"] == "saved in /drive\n"
    assert result["execution_count"] is None and first_paint.WIDGET_VIEW not in result["data"]
    assert result["data"]["text/plain"] == "the text form"
    stored = result["data"][first_paint.MIME]
    # the box, its child and its layout, numbered in the order they are met; the unused model is left out
    assert stored["model_id"] == "m1" and sorted(stored["models"]) == ["m1", "m2", "m3"]
    assert stored["models"]["m1"]["state"]["children"] == ["IPY_MODEL_m2"]
    anywidget = stored["models"]["m2"]
    assert anywidget["name"] == "AnyModel" and anywidget["state"]["module"] == "anywidget:m2"
    assert anywidget["state"]["_esm"] == {"sha256": hashlib.sha256(ESM.encode()).hexdigest()}
    assert anywidget["state"]["value"] == 1.5 and anywidget["state"]["_dom_classes"] == ["x"]
    assert "widgets" not in one["metadata"]  # the widget manager has nothing to restore


def test_the_site_ships_each_module_once_under_its_sha256(tmp_path):
    nb = executed(["a" * 32, "b" * 32, "c" * 32, "d" * 32], "/w")
    modules = first_paint.modules_of(nb["metadata"]["widgets"][first_paint.WIDGET_STATE])
    assert modules == {hashlib.sha256(ESM.encode()).hexdigest(): ESM}
    ext = first_paint.write_extension(tmp_path / "ext", modules)
    assert json.loads((ext / "package.json").read_text())["name"] == first_paint.EXTENSION_NAME
    assert (ext / "static" / "modules" / hashlib.sha256(ESM.encode()).hexdigest()).read_text() == ESM
