"""Updates of the course's notebooks in the JupyterLite site: a student's copy of a notebook
(kept in the browser) is compared with the version the site now serves, and a newer version is put
beside the copy, never over it. `lite_kernel.setup()` calls `tell_of_updates` at the end."""

from __future__ import annotations

import asyncio
import html
import itertools
import json
import os
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlsplit, urlunsplit


def site_base_url(href: str) -> str:
    """The site's root URL from a page's or the kernel worker's address (…/lab/…, …/extensions/… -> …/)."""
    parts = urlsplit(href)
    path = parts.path
    for app in ("/extensions/", "/lab/", "/notebooks/", "/tree/", "/repl/", "/edit/", "/consoles/"):
        if app in path:
            path = path[: path.index(app) + 1]
            break
    else:
        path = path.rsplit("/", 1)[0] + "/"
    return urlunsplit((parts.scheme, parts.netloc, path, "", ""))


def _version_of(notebook: Any) -> tuple[str, str] | None:
    """(site_path, site_version) of a course notebook, given as its file or its text; None for
    any other notebook, and for one that cannot be read or is not JSON."""
    try:
        nb = json.loads(notebook if isinstance(notebook, str) else notebook.read_text())
    except (OSError, ValueError):
        return None
    meta = nb.get("metadata", {}).get("pytree_lab") if isinstance(nb, dict) else None
    if isinstance(meta, dict) and isinstance(meta.get("site_path"), str) and isinstance(meta.get("site_version"), str):
        return meta["site_path"], meta["site_version"]
    return None


def _beside(copy: Any, version: str) -> Any:
    """Where the new version goes beside the student's copy: a new file, never their copy (an
    earlier check's file of the same version is used again)."""
    for n in itertools.count(1):
        suffix = f"new version {version[:6]}" + (f", {n}" if n > 1 else "")
        candidate = copy.with_name(f"{copy.stem} ({suffix}).ipynb")
        if not candidate.exists():
            return candidate
        if (_version_of(candidate) or ("", ""))[1] == version:
            return candidate


async def find_updates(root: str, base_url: str, fetch_text: Any) -> list[dict]:
    """The course notebooks in `root` (the student's files) whose published version changed.

    For each: the student's copy stays as it is; the site's current version is written beside
    it as a new file (never over anything). `fetch_text(url)` returns the site file's text or
    None. Returns [{"site_path", "copy", "new"}] (paths relative to root)."""
    found = []
    root_path = Path(root)
    for copy in sorted(root_path.rglob("*.ipynb")):
        if ".ipynb_checkpoints" in copy.parts or "(new version " in copy.name:
            continue
        held = _version_of(copy)
        if held is None:
            continue
        site_path, version = held
        text = await fetch_text(base_url + "files/" + quote(site_path))
        if not text:
            continue
        published = _version_of(text)
        if published is None or published[1] == version:
            continue
        new = _beside(copy, published[1])
        if not new.exists():
            new.write_text(text)
        found.append(
            {
                "site_path": site_path,
                "copy": copy.relative_to(root_path).as_posix(),
                "new": new.relative_to(root_path).as_posix(),
            }
        )
    return found


def update_message(updates: list[dict], base_url: str) -> str:
    """HTML telling of each update, with one link that opens the new version (names escaped)."""
    items = []
    for u in updates:
        link = f"{base_url}lab/index.html?path={quote(u['new'])}"
        items.append(
            f"<li>The instructor published a newer version of <b>{html.escape(u['site_path'])}</b>. "
            f"Your copy <code>{html.escape(u['copy'])}</code> is kept as it is. "
            f"<a href=\"{html.escape(link)}\" target=\"_blank\">Open the new version beside your copy</a> "
            f"(saved as <code>{html.escape(u['new'])}</code>).</li>"
        )
    return "<ul class=\"pytree-lab-updates\">" + "".join(items) + "</ul>"


async def _fetch_text(url: str, seconds: float = 5.0) -> str | None:
    import js
    from pyodide.ffi import to_js

    options = to_js({"cache": "no-store"}, dict_converter=js.Object.fromEntries)
    try:
        response = await asyncio.wait_for(js.fetch(url, options), seconds)
        if not response.ok:
            return None
        return str(await asyncio.wait_for(response.text(), seconds))
    except Exception:
        return None


async def tell_of_updates(root: str = "/drive") -> list[dict]:
    """In the browser: say which course notebooks have a newer published version (silent when
    none has, or when the site cannot be read)."""
    import js

    if not os.path.isdir(root):
        return []
    base = site_base_url(str(js.location.href))
    updates = await find_updates(root, base, _fetch_text)
    if updates:
        from IPython.display import HTML, display

        display(HTML(update_message(updates, base)))
    return updates
