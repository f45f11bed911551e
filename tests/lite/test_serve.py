"""`make lite`'s server (lite_build/serve.py): it prints the first lesson's URL, serves the
site's files, and a page reload (requests cut off mid-transfer) prints no traceback."""

from __future__ import annotations

import json
import re
import socket
import struct
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def fake_site(folder: Path) -> Path:
    (folder / "files").mkdir(parents=True)
    (folder / "jupyter-lite.json").write_text("{}")
    for name in ("01_pytrees.ipynb", "02_packed_parameters.ipynb"):
        (folder / "files" / name).write_text("{}")
    (folder / "big.bin").write_bytes(b"x" * 30_000_000)
    (folder / "pytree-lab-site.json").write_text(
        json.dumps(
            {
                "notebooks": [
                    {"path": "files/01_pytrees.ipynb", "bytes": 2},
                    {"path": "files/02_packed_parameters.ipynb"},
                ]
            }
        )
    )
    return folder


def test_make_lite_server_prints_the_first_lesson_and_no_traceback_on_reload(tmp_path):
    site = fake_site(tmp_path / "site")
    proc = subprocess.Popen(
        [sys.executable, str(ROOT / "lite_build" / "serve.py"), str(site), "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        lines = [proc.stdout.readline() for _ in range(3)]
        first = re.fullmatch(
            r"First lesson: (http://127\.0\.0\.1:(\d+))/lab/index\.html\?path=01_pytrees\.ipynb\n", lines[1]
        )
        assert lines[0] == f"Serving {site.resolve()}\n" and first, lines
        base, port = first[1], int(first[2])
        assert lines[2] == f"All notebooks: {base}/lab/index.html   (Ctrl+C to stop)\n"
        with urllib.request.urlopen(f"{base}/files/01_pytrees.ipynb", timeout=30) as r:
            assert r.read() == b"{}" and r.headers["Content-Type"] == "application/json"
        # reloads: requests for a big file, each cut off with a reset after a few bytes
        for _ in range(5):
            s = socket.create_connection(("127.0.0.1", port), timeout=30)
            s.sendall(b"GET /big.bin HTTP/1.1\r\nHost: x\r\n\r\n")
            assert s.recv(64).startswith(b"HTTP/1.0 200")
            s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            s.close()
        # the server still answers
        with urllib.request.urlopen(f"{base}/jupyter-lite.json", timeout=30) as r:
            assert r.read() == b"{}"
        time.sleep(1)  # let the cut-off transfers end in the server's threads
    finally:
        proc.terminate()
        _out, err = proc.communicate(timeout=30)
    assert "Traceback" not in err and err == "", err


def test_only_content_named_files_are_kept_without_asking_and_unchanged_ones_answer_304(tmp_path):
    from lite_build.serve import SiteServer

    site = fake_site(tmp_path / "site")
    named = {
        "build/1031.b91a70b.js": True,
        "extensions/anywidget/static/remoteEntry.698dcaf7.js": True,
        "extensions/@pytree-lab/stored-outputs/static/modules/" + "0a" * 32: True,
        "build/bootstrap.js": False,  # no hash in the name
        "pypi/pytree_lab-0.1.0-py3-none-any.whl": False,  # a rebuild keeps the name, not the bytes
        "static/pyodide/pyodide.asm.wasm": False,
    }
    for path in named:
        (site / path).parent.mkdir(parents=True, exist_ok=True)
        (site / path).write_bytes(b"x")
    with SiteServer(site) as server:
        for path, kept in named.items():
            with urllib.request.urlopen(f"{server.url}/{path}", timeout=30) as r:
                assert r.headers["Cache-Control"] == ("public, max-age=31536000, immutable" if kept else "no-cache")
                modified = r.headers["Last-Modified"]
        again = urllib.request.Request(f"{server.url}/jupyter-lite.json", headers={"If-Modified-Since": modified})
        try:
            urllib.request.urlopen(again, timeout=30)
            raise AssertionError("an unchanged file was sent again")
        except urllib.error.HTTPError as err:
            assert err.code == 304


def test_a_limited_server_shares_its_rate_among_all_responses(tmp_path):
    from concurrent.futures import ThreadPoolExecutor

    from lite_build.serve import SiteServer

    site = fake_site(tmp_path / "site")
    (site / "half.bin").write_bytes(b"y" * 500_000)
    with SiteServer(site, mbit=16) as server:  # 2 MB/s
        started = time.monotonic()
        with ThreadPoolExecutor(2) as pool:
            sizes = list(pool.map(lambda _: len(urllib.request.urlopen(f"{server.url}/half.bin").read()), range(2)))
        elapsed = time.monotonic() - started
        assert sizes == [500_000, 500_000] and server.sent == 1_000_000
        assert elapsed >= 0.49, elapsed  # 1 MB at 2 MB/s: half a second, however many connections
        server.limit(None)
        assert len(urllib.request.urlopen(f"{server.url}/big.bin").read()) == 30_000_000
        assert server.sent == 31_000_000
