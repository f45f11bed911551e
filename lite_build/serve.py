"""Serve a built JupyterLite site on 127.0.0.1, as any static host would.

    python lite_build/serve.py [DIR] [--port N] [--mbit R]   (port 0 = pick a free one)

Only static files: what works here works on GitHub Pages, Netlify or a plain web folder.
Cache headers as docs/hosting.md gives them for a static server: files whose names carry a hash
of their content (`cache_control`) may be kept a year without asking again; every other file
(Pyodide's core, the wheels, whose names keep their version when a rebuild changes their bytes,
the notebooks, the settings) is asked for again each visit (`no-cache`) and answered "304 Not
Modified" while it is unchanged. `--mbit R`: every response's bytes share one link of R Mbit/s,
as a school network would (the benchmark's slow-link condition).
"""

from __future__ import annotations

import argparse
import bisect
import functools
import json
import re
import sys
import threading
import time
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import ClassVar
from urllib.parse import quote, urlsplit

DEFAULT_SITE = Path(__file__).resolve().parent / "_output"

# Names the build gives from the content (checked on built sites: the same name always has the
# same bytes): JupyterLab's and the extensions' bundles (`build/1031.b91a70b.js`,
# `extensions/anywidget/static/remoteEntry.698dcaf7.js`) and the stored outputs' widget modules
# (`extensions/@pytree-lab/stored-outputs/static/modules/<sha256>`).
CONTENT_NAMED = re.compile(
    r"^(build|extensions/.+/static)/[^/]+\.[0-9a-f]{7,20}\.js$|^extensions/.+/static/modules/[0-9a-f]{64}$"
)
KEEP = "public, max-age=31536000, immutable"
ASK_AGAIN = "no-cache"


def cache_control(path: str) -> str:
    """The Cache-Control header for a file of the site (`path` relative to its root)."""
    return KEEP if CONTENT_NAMED.match(path.lstrip("/")) else ASK_AGAIN


class Link:
    """One link of `bytes_per_s` that all responses share, each chunk in turn (first come, first
    served): what a slow network gives the page, its kernel's worker and its service worker alike."""

    def __init__(self, bytes_per_s: float):
        self.bytes_per_s = float(bytes_per_s)
        self._free_at = 0.0
        self._lock = threading.Lock()

    def send(self, n: int) -> None:
        """Return when `n` more bytes have passed the link."""
        with self._lock:
            self._free_at = max(time.monotonic(), self._free_at) + n / self.bytes_per_s
            until = self._free_at
        time.sleep(max(0.0, until - time.monotonic()))


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
        # A rebuilt site must never be mixed with cached files of the previous build: only a file
        # named by its content is kept without asking
        self.send_header("Cache-Control", cache_control(urlsplit(self.path).path))
        super().end_headers()

    def copyfile(self, source, outputfile):
        link = self.server.link
        while chunk := source.read(16 * 1024):
            if link is not None:
                link.send(len(chunk))
            # Counted before the write: a client that has read every byte must find them all counted
            # (counted after, the last chunk could still be missing when its reader returns)
            with self.server.lock:
                self.server.sent += len(chunk)
                self.server.timeline.append((time.monotonic(), self.server.sent))
            outputfile.write(chunk)


class QuietServer(ThreadingHTTPServer):
    """A page reload or a closed tab ends requests mid-transfer: that is no error to report."""

    daemon_threads = True
    link: Link | None = None  # the slow link responses share, if any
    sent = 0  # bytes of file content sent (not headers), for the benchmark
    lock = threading.Lock()

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.timeline: list[tuple[float, int]] = []  # (time.monotonic(), bytes sent so far) per chunk

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

    def __init__(self, directory: Path, port: int = 0, host: str = "127.0.0.1", mbit: float | None = None):
        self.directory = Path(directory).resolve()
        if not (self.directory / "jupyter-lite.json").exists():
            raise FileNotFoundError(f"{self.directory} is not a built JupyterLite site (run `make lite-build`)")
        handler = functools.partial(SiteHandler, directory=str(self.directory))
        self.httpd = QuietServer((host, port), handler)
        self.limit(mbit)
        self.thread = threading.Thread(target=self.httpd.serve_forever, name="lite-site", daemon=True)

    @property
    def url(self) -> str:
        host, port = self.httpd.server_address[:2]
        return f"http://{host}:{port}"

    def limit(self, mbit: float | None) -> None:
        """Share one link of `mbit` Mbit/s among all responses from now on (None: no limit)."""
        self.httpd.link = Link(mbit * 1e6 / 8) if mbit else None

    @property
    def sent(self) -> int:
        """Bytes of file content sent so far (a 304 answer sends none)."""
        return self.httpd.sent

    def sent_before(self, when: float) -> int:
        """Bytes of file content sent before `when` (a time.monotonic())."""
        with self.httpd.lock:
            timeline = self.httpd.timeline[:]
        i = bisect.bisect_right(timeline, (when, float("inf")))
        return timeline[i - 1][1] if i else 0

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
    parser.add_argument("--mbit", type=float, default=None, help="share one link of this many Mbit/s (a slow network)")
    args = parser.parse_args(argv)
    try:
        server = SiteServer(args.directory, args.port, mbit=args.mbit)
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
