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


def test_a_preview_is_the_notebook_as_text_and_stored_widgets_with_nothing_that_runs(tmp_path):
    """What the page draws before JupyterLab (first_paint.preview): one entry per cell, Markdown as
    HTML with anything that could run taken out, code escaped, outputs as stored widgets, PNGs or
    text; written under the extension's previews/ by the notebook's path, the same bytes each time."""
    nb = first_paint.store(executed(["a" * 32, "b" * 32, "c" * 32, "d" * 32], "/w"), "/w")
    nb["cells"][:0] = [
        {
            "cell_type": "markdown",
            "metadata": {},
            "source": ["# Trees\n", "*w* <script>alert(1)</script>", "<img src=x onerror=alert(2)>"],
        },
        {"cell_type": "raw", "metadata": {}, "source": "<b>raw</b>"},
        {
            "cell_type": "code",
            "execution_count": None,
            "metadata": {},
            "source": "x = 1 < 2",
            "outputs": [
                {"output_type": "error", "ename": "ValueError", "evalue": "no <b>", "traceback": []},
                {
                    "output_type": "display_data",
                    "metadata": {},
                    "data": {"image/png": "iVBOR\n", "text/plain": "<Figure>"},
                },
            ],
        },
    ]
    (tmp_path / "lessons").mkdir()
    path = tmp_path / "lessons" / "one.ipynb"
    path.write_text(json.dumps(nb))
    got = first_paint.preview(path, "pytree-lab: course")
    assert got["storage"] == "pytree-lab: course"
    markdown, raw, code, stored = got["cells"]
    assert markdown["markdown"].startswith('<h1 id="Trees">Trees')
    assert "<em>w</em>" in markdown["markdown"]
    assert "<script" not in markdown["markdown"] and "onerror" not in markdown["markdown"]
    assert raw == {"raw": "<b>raw</b>"}  # drawn as text by the page
    assert "&lt;" in code["code"] and "<" not in code["code"].replace("<span", "").replace("</span", "")
    assert code["outputs"] == [{"text": "ValueError: no <b>"}, {"png": "iVBOR", "text": "<Figure>"}]
    # the cell's print, then its widget as the notebook stores it (with its text form)
    assert stored["outputs"] == [
        {"text": "saved in /drive\n"},
        {"stored": nb["cells"][3]["outputs"][1]["data"][first_paint.MIME], "text": "the text form"},
    ]
    assert stored["outputs"][1]["stored"]["model_id"] == "m1"
    ext = first_paint.write_extension(tmp_path / "ext", {}, {"lessons/one.ipynb": got})
    written = (ext / "static" / first_paint.PREVIEWS / "lessons" / "one.ipynb.json").read_bytes()
    assert json.loads(written) == got
    again = first_paint.write_extension(
        tmp_path / "ext2", {}, {"lessons/one.ipynb": first_paint.preview(path, got["storage"])}
    )
    assert (again / "static" / first_paint.PREVIEWS / "lessons" / "one.ipynb.json").read_bytes() == written
