"""Every diagram on first paint: the build runs each notebook on the Lite engine and stores its outputs.

The site's kernel needs seconds to start; until then a notebook would show empty outputs. So the
build runs every notebook in the CPython mirror of the Lite kernel (mirror_env.py: the site's own
wheels, numpy and pandas at the lock's versions, `import jax` giving the Lite engine) and keeps
what each cell showed. A widget output becomes a *stored widget*: the state of the models it
shows (their anywidget modules by sha256: the page runs only modules the site ships) under
MIME, beside its text form. The page draws it with the site's own renderer
(stored_outputs/static/remoteEntry.js) before any kernel exists, inert, with a quiet line saying
it is not live yet; running the cell replaces it as any output is replaced. Stored cells keep no
execution count (their prompt reads `[ ]:`). Model ids are numbered in order and the run's
folder is written as the browser's (/drive), so the same notebooks give the same bytes.
"""

from __future__ import annotations

import contextlib
import copy
import fcntl
import hashlib
import json
import os
import re
import shutil
from pathlib import Path

if __package__:
    from . import mirror_env
else:
    import mirror_env

HERE = Path(__file__).resolve().parent
MIME = "application/vnd.pytree-lab.stored-widget+json"
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
WIDGET_STATE = "application/vnd.jupyter.widget-state+json"
EXTENSION_NAME = "@pytree-lab/stored-outputs"
EXTENSION_SOURCE = HERE / "stored_outputs"
BROWSER_CWD = "/drive"  # the Pyodide kernel's folder for the site's notebooks
CELL_TIMEOUT = 300
PREVIEWS = "previews"  # the extension's static/previews/<notebook path>.json (`preview`)
REF = re.compile(r"(?:IPY_MODEL_|anywidget:)([0-9a-f]{32})\b")  # a model named in another's state


class FirstPaintError(RuntimeError):
    """A notebook could not be run for its stored outputs; the message says which and why."""


def run_notebooks(paths: list[Path], site: Path, env_dir: Path) -> tuple[dict[str, str], dict[str, str]]:
    """Run each notebook in the mirror of the site's kernel and store its outputs, in place.

    Returns ({notebook: what happened}, {sha256: text} of the widget modules the outputs use).

    A cell that raises there ends that notebook's stored outputs (the cells after it may need
    what it failed to make): it keeps the outputs before it, and its name is in the result.
    """
    import nbformat
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError

    report: dict[str, str] = {}
    modules: dict[str, str] = {}
    with locked(env_dir):
        mirror_env.make(site, env_dir)
        old = os.environ.get("JUPYTER_PATH")
        os.environ["JUPYTER_PATH"] = str(mirror_env.jupyter_path(env_dir))
        try:
            for path in paths:
                nb = nbformat.read(path, as_version=4)
                metadata = copy.deepcopy(nb.metadata)  # the site's (kernel, language_info, version)
                workdir = path.parent / f".run-{path.stem}"
                workdir.mkdir()
                client = NotebookClient(
                    nb,
                    kernel_name=mirror_env.KERNEL_NAME,
                    timeout=CELL_TIMEOUT,
                    store_widget_state=True,
                    record_timing=False,
                    resources={"metadata": {"path": str(workdir)}},
                )
                try:
                    client.execute()
                    report[path.name] = "ran"
                except CellExecutionError as err:
                    failed = next((i for i, c in enumerate(nb.cells) if _raised(c)), len(nb.cells))
                    for cell in nb.cells[failed:]:
                        if cell.cell_type == "code":
                            cell.outputs, cell.execution_count = [], None
                    first_line = str(err).strip().splitlines()[-1][:200] if str(err).strip() else "an error"
                    report[path.name] = f"stored up to cell {failed} (it raised in the mirror: {first_line})"
                finally:
                    shutil.rmtree(workdir, ignore_errors=True)
                widgets = nb.metadata.get("widgets")
                nb.metadata = metadata
                if widgets:
                    nb.metadata["widgets"] = widgets
                ran = json.loads(json.dumps(nb))  # strings whole: the page takes outputs as they are
                modules.update(modules_of(ran.get("metadata", {}).get("widgets", {}).get(WIDGET_STATE, {})))
                stored = store(ran, str(workdir))
                path.write_text(json.dumps(stored, indent=1, ensure_ascii=False) + "\n")
        finally:
            if old is None:
                os.environ.pop("JUPYTER_PATH", None)
            else:
                os.environ["JUPYTER_PATH"] = old
    return report, modules


@contextlib.contextmanager
def locked(env_dir: Path):
    """The mirror environment held for this process alone (concurrent builds and tests share it)."""
    env_dir.parent.mkdir(parents=True, exist_ok=True)
    with (env_dir.parent / f".{env_dir.name}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def _raised(cell) -> bool:
    return cell.cell_type == "code" and any(o.get("output_type") == "error" for o in cell.get("outputs", []))


def store(nb: dict, workdir: str = "") -> dict:
    """The executed notebook with every widget output stored (see the module's text)."""
    nb = copy.deepcopy(nb)
    state = nb.get("metadata", {}).pop("widgets", {}).get(WIDGET_STATE, {}).get("state", {})
    ids: dict[str, str] = {}  # kernel's random id -> "m<n>", in order of first use

    def number(model_id: str) -> str:
        if model_id not in ids:
            ids[model_id] = f"m{len(ids) + 1}"
        return ids[model_id]

    def models_of(model_id: str) -> dict:
        found, todo = {}, [model_id]
        while todo:
            mid = todo.pop(0)
            if mid in found or mid not in state:
                continue
            found[mid] = state[mid]
            todo += REF.findall(json.dumps(state[mid]["state"]))
        return found

    def renamed(value):
        text = json.dumps(value, sort_keys=True)
        text = REF.sub(lambda m: m[0][: -len(m[1])] + number(m[1]), text)
        return json.loads(text)

    for cell in nb.get("cells", []):
        if cell.get("cell_type") != "code":
            continue
        cell["execution_count"] = None
        cell.get("metadata", {}).pop("execution", None)
        for out in cell.get("outputs", []):
            if "execution_count" in out:
                out["execution_count"] = None
            for key in ("text", "data"):
                if workdir and key in out:
                    out[key] = json.loads(json.dumps(out[key]).replace(workdir, BROWSER_CWD))
            view = out.get("data", {}).pop(WIDGET_VIEW, None)
            if view is None:
                continue
            models, root = {}, number(view["model_id"])
            for mid, model in models_of(view["model_id"]).items():
                key = number(mid)
                kept = {k: v for k, v in model["state"].items() if not k.startswith("_view") and k != "_dom_classes"}
                kept["_dom_classes"] = model["state"].get("_dom_classes", [])
                for trait in ("_esm", "_css"):
                    if isinstance(kept.get(trait), str):
                        kept[trait] = {"sha256": hashlib.sha256(kept[trait].encode()).hexdigest()}
                models[key] = renamed({"name": model["model_name"], "state": kept})
            out["data"][MIME] = {"model_id": root, "models": models}
    return nb


def modules_of(widget_state: dict) -> dict[str, str]:
    """{sha256: text} of every anywidget module and stylesheet in a notebook's widget state."""
    found = {}
    for model in widget_state.get("state", {}).values():
        for trait in ("_esm", "_css"):
            text = model["state"].get(trait)
            if isinstance(text, str):
                found[hashlib.sha256(text.encode()).hexdigest()] = text
    return found


def write_extension(dest: Path, modules: dict[str, str], previews: dict[str, dict] | None = None) -> Path:
    """The stored outputs' renderer (a JupyterLab mime extension) with the modules the stored
    widgets use, each under its sha256: the page runs no module a notebook brings itself; and
    each notebook's preview (`preview`) under static/previews/<its path>.json."""
    shutil.copytree(EXTENSION_SOURCE, dest)
    folder = dest / "static" / "modules"
    folder.mkdir(parents=True, exist_ok=True)
    for sha, text in sorted(modules.items()):
        (folder / sha).write_text(text)
    for rel, data in sorted((previews or {}).items()):
        out = dest / "static" / PREVIEWS / f"{rel}.json"
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(data, sort_keys=True, ensure_ascii=False) + "\n")
    return dest


# The tags and attributes a preview's Markdown keeps (what nbconvert's Markdown gives a lesson:
# headings, lists, tables, code, links, images); everything else is taken out by bleach.
_MARKDOWN_TAGS = {
    *("h1", "h2", "h3", "h4", "h5", "h6", "p", "br", "hr", "em", "strong", "code", "pre", "blockquote"),
    *("ul", "ol", "li", "a", "img", "table", "thead", "tbody", "tr", "th", "td", "span", "div", "del", "sup", "sub"),
}
_MARKDOWN_ATTRIBUTES = {"a": ["href", "title"], "img": ["src", "alt", "title"], "*": ["id", "class"]}


def preview(path: Path, storage: str) -> dict:
    """A stored notebook as the site's page draws it before JupyterLab has started (remoteEntry.js,
    `preview`): Markdown as HTML (rendered by nbconvert, then cleaned by bleach), code highlighted
    by pygments (which escapes it), outputs as stored widgets, PNG images or text. `storage` is the
    browser storage of the students' files: a notebook a student saved there opens as saved,
    without this preview."""
    import bleach
    from nbconvert.filters import markdown2html_mistune
    from pygments import highlight
    from pygments.formatters import HtmlFormatter
    from pygments.lexers import PythonLexer

    nb = json.loads(path.read_text())
    cells: list[dict] = []
    for cell in nb.get("cells", []):
        source = "".join(cell.get("source", ""))
        if cell.get("cell_type") == "markdown":
            html = markdown2html_mistune(source)
            cells.append({"markdown": bleach.clean(html, _MARKDOWN_TAGS, _MARKDOWN_ATTRIBUTES, strip=True)})
        elif cell.get("cell_type") == "code":
            code = highlight(source, PythonLexer(), HtmlFormatter(nowrap=True)) if source else ""
            cells.append({"code": code, "outputs": [_preview_output(out) for out in cell.get("outputs", [])]})
        else:  # a raw cell, as text (one entry per cell: the page finds JupyterLab's cell by index)
            cells.append({"raw": source})
    return {"storage": storage, "cells": cells}


def _preview_output(out: dict) -> dict:
    if out.get("output_type") == "stream":
        return {"text": "".join(out.get("text", ""))}
    if out.get("output_type") == "error":
        return {"text": f"{out.get('ename', '')}: {out.get('evalue', '')}"}
    data = out.get("data", {})
    text = "".join(data.get("text/plain", ""))
    if MIME in data:
        return {"stored": data[MIME], "text": text}
    if "image/png" in data:
        return {"png": "".join(data["image/png"]).strip(), "text": text}
    return {"text": text}
