"""A real jupyter_server in a subprocess, and a Python client for its kernel websockets.

Used by tests/test_server_extension.py (does pytree_lab's server extension load, and what
does it set on which socket) and by the benchmark (kernel websocket round trips without a
browser). No pytest dependency.

- `start_server(python, base)`: `python -m jupyter_server` with its own config, data and
  runtime dirs under `base`, and the test-only probe extension (tests/serverprobe) that
  reports every live websocket's TCP_NODELAY as the kernel sees it.
- `EXTENSION_OFF`: the arguments that start one server without pytree_lab's extension.
- `KernelSocket`: the kernel websocket protocol as a browser speaks it (JSON messages with a
  `channel`), enough to send `execute_request` and wait for the kernel's `idle`.
"""

from __future__ import annotations

import json
import os
import secrets
import socket
import subprocess
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

PROBE_DIR = Path(__file__).resolve().parent / "serverprobe"
SERVER_START = 90.0  # a cold jupyter_server on 2 busy cores
KERNEL_READY = 90.0
REPLY = 60.0


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def server_env(base: Path, python: str | os.PathLike) -> dict:
    """Isolated Jupyter dirs under `base` (the person's own config never applies), the probe on the path."""
    env = dict(os.environ)
    for key in ("JUPYTER_CONFIG_PATH", "JUPYTER_PATH", "JUPYTER_PLATFORM_DIRS", "PYTHONPATH", "VIRTUAL_ENV"):
        env.pop(key, None)
    dirs = {
        "JUPYTER_CONFIG_DIR": "config",
        "JUPYTER_DATA_DIR": "data",
        "JUPYTER_RUNTIME_DIR": "runtime",
        "IPYTHONDIR": "ipython",
    }
    for key, name in dirs.items():
        (base / name).mkdir(parents=True, exist_ok=True)
        env[key] = str(base / name)
    env["PYTHONPATH"] = str(PROBE_DIR)
    env["JAX_PLATFORMS"] = "cpu"
    env["PYDEVD_DISABLE_FILE_VALIDATION"] = "1"
    env["PATH"] = os.pathsep.join([str(Path(python).parent), env.get("PATH", "")])
    return env


def _enable_probe(base: Path) -> None:
    d = base / "config" / "jupyter_server_config.d"
    d.mkdir(parents=True, exist_ok=True)
    (d / "nodelay_probe.json").write_text(json.dumps({"ServerApp": {"jpserver_extensions": {"nodelay_probe": True}}}))


# One server without pytree_lab's extension, whatever the environment's config enables: a
# jpserver_extensions entry given on the command line wins over config files.
EXTENSION_OFF = ["--ServerApp.jpserver_extensions=pytree_lab=False"]


def api_request(url: str, token: str, method: str, path: str, body: Any = None, timeout: float = 30.0) -> Any:
    """One call to a Jupyter server's REST API with its token: `body` and the answer as JSON."""
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(
        f"{url}{path}",
        data=data,
        method=method,
        headers={"Authorization": f"token {token}", "Content-Type": "application/json"},
    )
    with urllib.request.urlopen(req, timeout=timeout) as resp:
        raw = resp.read()
    return json.loads(raw) if raw else None


@dataclass
class Server:
    proc: subprocess.Popen
    base: Path
    port: int
    token: str
    log_path: Path

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def api(self, method: str, path: str, body: Any = None, timeout: float = 30.0) -> Any:
        return api_request(self.url, self.token, method, path, body, timeout)

    def probe(self) -> dict:
        return self.api("GET", "/nodelay-probe")

    def log(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return ""

    def start_kernel(self) -> str:
        return self.api("POST", "/api/kernels", {"name": "python3"})["id"]

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()  # SIGTERM: the server shuts its kernels down
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(20)

    def __enter__(self) -> Server:
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


def start_server(python: str | os.PathLike, base: Path, args: list[str] | None = None, probe: bool = True) -> Server:
    """`python -m jupyter_server` on a free port; returns once its API answers."""
    base.mkdir(parents=True, exist_ok=True)
    env = server_env(base, python)
    if probe:
        _enable_probe(base)
    root = base / "root"
    root.mkdir(exist_ok=True)
    token = secrets.token_hex(16)
    port = free_port()
    cmd = [
        str(python),
        "-m",
        "jupyter_server",
        "--no-browser",
        "--ServerApp.ip=127.0.0.1",
        f"--ServerApp.port={port}",
        "--ServerApp.port_retries=20",
        f"--IdentityProvider.token={token}",
        f"--ServerApp.root_dir={root}",
        *(args or []),
    ]
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        cmd.append("--allow-root")
    log_path = base / f"server-{port}.log"
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(cmd, cwd=root, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    server = Server(proc, base, port, token, log_path)
    wait_until_answering(server, base / "runtime", SERVER_START, "jupyter_server", lambda: server.log()[-4000:])
    return server


def wait_until_answering(
    server,
    runtime_dir: Path,
    timeout: float,
    name: str,
    log_tail: Callable[[], str],
    error: type[Exception] = RuntimeError,
) -> None:
    """Poll a just-started server (`proc`, `port`, `api`, `stop`) until its API answers.

    port_retries may have moved it: the server's own runtime file says where it is. If the
    process exits, or nothing answers within `timeout` seconds (then it is stopped), raises
    `error` naming the server and ending with `log_tail()`.
    """
    proc = server.proc
    deadline = time.monotonic() + timeout
    while True:
        if proc.poll() is not None:
            raise error(f"{name} exited with {proc.returncode}:\n{log_tail()}")
        for info in runtime_dir.glob(f"jpserver-{proc.pid}.json"):
            try:
                server.port = json.loads(info.read_text())["port"]
            except (OSError, ValueError, KeyError):
                pass
        try:
            server.api("GET", "/api/status", timeout=2.0)
            return
        except (urllib.error.URLError, ConnectionError, OSError):
            pass
        if time.monotonic() > deadline:
            server.stop()
            raise error(f"{name} did not answer within {timeout}s:\n{log_tail()}")
        time.sleep(0.2)


class KernelSocket:
    """One kernel websocket, as a browser opens it (legacy JSON protocol: each message names its channel)."""

    def __init__(self, server: Server, kernel_id: str):
        self.server = server
        self.kernel_id = kernel_id
        self.session = uuid.uuid4().hex
        self.ws = None
        self.sent = 0.0  # perf_counter() when the last request was written

    async def connect(self) -> KernelSocket:
        from tornado.httpclient import HTTPRequest
        from tornado.websocket import websocket_connect

        url = f"ws://127.0.0.1:{self.server.port}/api/kernels/{self.kernel_id}/channels?session_id={self.session}"
        req = HTTPRequest(url, headers={"Authorization": f"token {self.server.token}"})
        self.ws = await websocket_connect(req)
        # the kernel answers once it is ready
        await self.request("kernel_info_request", {}, timeout=KERNEL_READY)
        return self

    @property
    def local_address(self) -> list:
        return list(self.ws.stream.socket.getsockname())

    def _message(self, msg_type: str, content: dict, channel: str = "shell") -> dict:
        return {
            "header": {
                "msg_id": uuid.uuid4().hex,
                "msg_type": msg_type,
                "username": "test",
                "session": self.session,
                "date": datetime.now(UTC).isoformat(),
                "version": "5.3",
            },
            "parent_header": {},
            "metadata": {},
            "content": content,
            "buffers": [],
            "channel": channel,
        }

    async def request(self, msg_type: str, content: dict, timeout: float = REPLY) -> list[dict]:
        """Send on shell; return every message with it as parent until its reply and the kernel's idle."""
        import asyncio

        msg = self._message(msg_type, content)
        self.sent = time.perf_counter()
        await self.ws.write_message(json.dumps(msg))
        return await asyncio.wait_for(self._until_done(msg["header"]["msg_id"], msg_type), timeout)

    async def _until_done(self, msg_id: str, msg_type: str) -> list[dict]:
        got, replied, idle = [], False, False
        reply_type = msg_type.replace("_request", "_reply")
        while not (replied and idle):
            raw = await self.ws.read_message()
            if raw is None:
                raise ConnectionError("the kernel websocket closed")
            arrived = time.perf_counter()
            m = json.loads(raw)
            m["arrived"] = arrived  # perf_counter() when it was read here
            if m.get("parent_header", {}).get("msg_id") != msg_id:
                continue
            got.append(m)
            if m["msg_type"] == reply_type:
                replied = True
            if m["msg_type"] == "status" and m["content"].get("execution_state") == "idle":
                idle = True
        return got

    async def execute(self, code: str) -> list[dict]:
        return await self.request(
            "execute_request",
            {
                "code": code,
                "silent": False,
                "store_history": False,
                "user_expressions": {},
                "allow_stdin": False,
                "stop_on_error": True,
            },
        )

    async def close(self) -> None:
        if self.ws is not None:
            await close_websocket(self.ws)
            self.ws = None


async def close_websocket(ws, timeout: float = 10.0) -> None:
    """Close a tornado websocket client and wait until its socket is closed (no leaked fd)."""
    import asyncio

    stream = ws.protocol.stream if ws.protocol is not None else None
    ws.close()
    try:
        while await asyncio.wait_for(ws.read_message(), timeout) is not None:
            pass
    except TimeoutError:
        pass
    if stream is not None and not stream.closed():
        stream.close()


async def open_events_socket(server: Server):
    """The server's event-bus websocket: a websocket that is not a kernel's."""
    from tornado.httpclient import HTTPRequest
    from tornado.websocket import websocket_connect

    req = HTTPRequest(
        f"ws://127.0.0.1:{server.port}/api/events/subscribe", headers={"Authorization": f"token {server.token}"}
    )
    return await websocket_connect(req)
