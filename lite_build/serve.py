"""Serve a built JupyterLite site on 127.0.0.1, as any static host would.

    python lite_build/serve.py [DIR] [--port N]      (port 0 = pick a free one)

Only static files: what works here works on GitHub Pages, Netlify or a plain web folder.
"""

from __future__ import annotations

import argparse
import functools
import json
import sys
import threading
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import ClassVar
from urllib.parse import quote

DEFAULT_SITE = Path(__file__).resolve().parent / "_output"


class SiteHandler(SimpleHTTPRequestHandler):
    # Browsers refuse ES modules and wasm streaming under a generic content type.
    extensions_map: ClassVar[dict[str, str]] = {
        **SimpleHTTPRequestHandler.extensions_map,
        ".js": "text/javascript",
        ".mjs": "text/javascript",
        ".wasm": "application/wasm",
        ".json": "application/json",
        ".ipynb": "application/json",
        ".whl": "application/octet-stream",
        ".zip": "application/zip",
    }

    def log_message(self, format, *args):  # noqa: A002 - the base class's signature
        pass  # a page load is hundreds of requests; keep the terminal readable

    def end_headers(self):
        # A rebuilt site must never be mixed with cached files of the previous build.
        self.send_header("Cache-Control", "no-cache")
        super().end_headers()


class QuietServer(ThreadingHTTPServer):
    """A page reload or a closed tab ends requests mid-transfer: that is no error to report."""

    daemon_threads = True

    def handle_error(self, request, client_address):
        err = sys.exc_info()[1]
        if isinstance(err, (ConnectionError, TimeoutError)):  # broken pipe, reset, aborted
            return
        print(f"error serving {client_address[0]}: {type(err).__name__}: {err}", file=sys.stderr, flush=True)


def first_notebook(directory: Path) -> str | None:
    """The site's first course notebook (its manifest lists them in order), as a path in the site."""
    try:
        manifest = json.loads((directory / "pytree-lab-site.json").read_text())
        first = manifest["notebooks"][0]["path"]
    except (OSError, ValueError, KeyError, IndexError, TypeError):
        found = sorted(p.relative_to(directory / "files").as_posix() for p in (directory / "files").glob("*.ipynb"))
        return found[0] if found else None
    return first[len("files/") :] if first.startswith("files/") else first


class SiteServer:
    """A threaded static server for one site folder; use as a context manager."""

    def __init__(self, directory: Path, port: int = 0, host: str = "127.0.0.1"):
        self.directory = Path(directory).resolve()
        if not (self.directory / "jupyter-lite.json").exists():
            raise FileNotFoundError(f"{self.directory} is not a built JupyterLite site (run `make lite-build`)")
        handler = functools.partial(SiteHandler, directory=str(self.directory))
        self.httpd = QuietServer((host, port), handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, name="lite-site", daemon=True)

    @property
    def url(self) -> str:
        host, port = self.httpd.server_address[:2]
        return f"http://{host}:{port}"

    def start(self) -> SiteServer:
        self.thread.start()
        return self

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(timeout=10)

    def __enter__(self) -> SiteServer:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Serve the built pytree-lab JupyterLite site.")
    parser.add_argument("directory", nargs="?", type=Path, default=DEFAULT_SITE)
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args(argv)
    try:
        server = SiteServer(args.directory, args.port)
    except (FileNotFoundError, OSError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    print(f"Serving {server.directory}", flush=True)
    first = first_notebook(server.directory)
    if first:
        print(f"First lesson: {server.url}/lab/index.html?path={quote(first)}", flush=True)
    print(f"All notebooks: {server.url}/lab/index.html   (Ctrl+C to stop)", flush=True)
    try:
        server.httpd.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.httpd.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
