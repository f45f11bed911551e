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
