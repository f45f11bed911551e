"""A real JupyterHub on 127.0.0.1, and students that use it through its REST API.

Used by tests/test_hub.py (the smoke test: hub + proxy + two students, one in Chromium) and by
`make bench`'s hub load test (bench/hub.py). No pytest dependency.

- `start_hub(base)`: `python -m jupyterhub` with the `DummyAuthenticator` (one shared password,
  for the Chromium student's login form), the `SimpleLocalProcessSpawner` (each student's
  `jupyterhub-singleuser` runs as this user, with its own home under `base`), and
  configurable-http-proxy from npm (`make hub-tools` installs it into .hub-tools/). Everything
  listens on 127.0.0.1 only. A service token with admin scopes creates the students and their
  tokens; each student then uses only its own token.
- `Student`: one student's REST calls (start and stop its server, start a kernel) and
  `StudentKernel`, its kernel websocket through the proxy (the JSON protocol a browser speaks),
  with slider moves sent as the explorer's own comm messages.
"""

from __future__ import annotations

import asyncio
import json
import os
import secrets
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

if __package__ == "tests":
    from tests.server_harness import free_port
else:
    from server_harness import free_port

REPO = Path(__file__).resolve().parents[1]
PROBE_DIR = Path(__file__).resolve().parent / "serverprobe"
CHP = REPO / ".hub-tools" / "node_modules" / ".bin" / "configurable-http-proxy"
HUB_START = 120.0
SERVER_START = 180.0  # a cold jupyterhub-singleuser on 2 busy cores
REPLY = 120.0
SERVICE = "course-bench"


class HubError(AssertionError):
    pass


def chp_path() -> Path:
    """configurable-http-proxy installed by `make hub-tools`; missing is an error, never a skip."""
    if not (CHP.is_file() and os.access(CHP, os.X_OK)):
        raise HubError(
            f"{CHP} is missing: the JupyterHub tests and benchmark need configurable-http-proxy "
            "from npm (`make hub-tools` installs it into .hub-tools/)"
        )
    return CHP


def request(
    url: str, token: str | None, method: str = "GET", body: Any = None, timeout: float = 30.0
) -> tuple[int, Any]:
    data = None if body is None else json.dumps(body).encode()
    headers = {"Content-Type": "application/json"}
    if token:
        headers["Authorization"] = f"token {token}"
    req = urllib.request.Request(url, data=data, method=method, headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            raw = resp.read()
            return resp.status, (json.loads(raw) if raw else None)
    except urllib.error.HTTPError as err:
        with err:  # the error holds the response's socket: closed here, not left to the GC
            raw = err.read()
        try:
            payload = json.loads(raw) if raw else None
        except ValueError:
            payload = raw.decode(errors="replace")
        return err.code, payload


CONFIG = """\
c = get_config()  # noqa: F821
c.JupyterHub.ip = "127.0.0.1"
c.JupyterHub.port = {port}
c.JupyterHub.hub_ip = "127.0.0.1"
c.JupyterHub.hub_port = {hub_port}
c.ConfigurableHTTPProxy.api_url = "http://127.0.0.1:{proxy_api_port}"
c.ConfigurableHTTPProxy.command = [{chp!r}]
c.ConfigurableHTTPProxy.should_start = True
c.JupyterHub.db_url = "sqlite:///{base}/jupyterhub.sqlite"
c.JupyterHub.cookie_secret_file = "{base}/jupyterhub_cookie_secret"
c.JupyterHub.cleanup_servers = True
c.JupyterHub.authenticator_class = "dummy"
c.DummyAuthenticator.password = {password!r}
c.Authenticator.allow_all = True
c.JupyterHub.spawner_class = "simple"
c.SimpleLocalProcessSpawner.home_dir_template = "{base}/home/{{username}}"
c.Spawner.cmd = [{singleuser!r}]
c.Spawner.args = {args!r}
c.Spawner.environment = {environment!r}
c.Spawner.default_url = "/lab"
c.Spawner.start_timeout = {server_start:.0f}
c.Spawner.http_timeout = {server_start:.0f}
c.JupyterHub.concurrent_spawn_limit = 0
c.JupyterHub.active_server_limit = 0
c.JupyterHub.services = [{{"name": {service!r}, "api_token": {service_token!r}}}]
c.JupyterHub.load_roles = [{{
    "name": "course-bench",
    "scopes": ["admin:users", "admin:servers", "tokens", "access:servers", "list:users", "read:users"],
    "services": [{service!r}],
}}]
"""


@dataclass
class Hub:
    proc: subprocess.Popen
    base: Path
    port: int
    service_token: str
    password: str
    log_path: Path
    students: dict = field(default_factory=dict)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def api(self, method: str, path: str, body: Any = None, token: str | None = None, timeout: float = 30.0):
        status, payload = request(f"{self.url}/hub/api{path}", token or self.service_token, method, body, timeout)
        if status >= 400:
            raise HubError(f"{method} /hub/api{path}: HTTP {status} {payload}\n{self.log_tail()}")
        return payload

    def log_tail(self, n: int = 60) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-n:])
        except OSError:
            return ""

    def add_student(self, name: str) -> Student:
        """Create the user and a token for it (the hub's REST API, as the course's admin service)."""
        status, _ = request(f"{self.url}/hub/api/users/{name}", self.service_token, "POST", {})
        if status not in (201, 409):
            raise HubError(f"creating {name}: HTTP {status}\n{self.log_tail()}")
        token = self.api("POST", f"/users/{name}/tokens", {"note": "pytree-lab student", "expires_in": 7200})["token"]
        student = Student(self, name, token)
        self.students[name] = student
        return student

    def processes(self) -> dict[str, int]:
        """pids of the hub and of its proxy (a node process the hub started)."""
        import psutil

        out = {"hub": self.proc.pid}
        try:
            for child in psutil.Process(self.proc.pid).children(recursive=True):
                cmd = " ".join(child.cmdline())
                if "configurable-http-proxy" in cmd:
                    out["proxy"] = child.pid
        except psutil.Error:
            pass
        return out

    def stop(self) -> None:
        for student in list(self.students.values()):
            try:
                student.stop_server(wait=0)
            except Exception:  # noqa: BLE001 - the hub stops the servers it spawned too
                pass
        if self.proc.poll() is None:
            self.proc.terminate()  # SIGTERM: the hub stops its proxy and (cleanup_servers) the servers
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(20)

    def __enter__(self) -> Hub:
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


def start_hub(
    base: Path,
    *,
    python: str | os.PathLike = sys.executable,
    probe: bool = False,
    extra_env: dict | None = None,
    extra_config: str = "",
) -> Hub:
    """`python -m jupyterhub` on free loopback ports; returns once the hub's API answers.
    `extra_config`: lines of jupyterhub_config.py after the harness's own."""
    base = Path(base)
    base.mkdir(parents=True, exist_ok=True)
    (base / "home").mkdir(exist_ok=True)
    chp = chp_path()
    python = Path(python)
    singleuser = python.parent / "jupyterhub-singleuser"
    if not singleuser.exists():
        raise HubError(f"{singleuser} is missing: install jupyterhub into this environment (the dev extra has it)")
    port, hub_port, api_port = free_port(), free_port(), free_port()
    service_token, password = secrets.token_hex(24), secrets.token_urlsafe(12)
    pythonpath = [str(REPO / "widgets")] + ([str(PROBE_DIR)] if probe else [])
    # the students' Jupyter config: the lab app reachable from page scripts (window.jupyterapp,
    # for the browser tests and the benchmark), no update checks and no news prompt
    config_dir = base / "jupyter-config"
    config_dir.mkdir(exist_ok=True)
    (config_dir / "jupyter_server_config.json").write_text(
        json.dumps(
            {
                "LabApp": {
                    "expose_app_in_browser": True,
                    "check_for_updates_class": "jupyterlab.NeverCheckForUpdate",
                    "news_url": "",
                }
            }
        )
    )
    environment = {
        "JAX_PLATFORMS": "cpu",
        "PYTHONPATH": os.pathsep.join(pythonpath),
        "PATH": os.pathsep.join([str(python.parent), "/usr/local/bin", "/usr/bin", "/bin"]),
        "PYDEVD_DISABLE_FILE_VALIDATION": "1",
        "JUPYTER_CONFIG_DIR": str(config_dir),
        **(extra_env or {}),
    }
    args = ["--ServerApp.ip=127.0.0.1"]
    if probe:
        args.append("--ServerApp.jpserver_extensions=nodelay_probe=True")
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        args.append("--ServerApp.allow_root=True")
    config = base / "jupyterhub_config.py"
    config.write_text(
        CONFIG.format(
            port=port,
            hub_port=hub_port,
            proxy_api_port=api_port,
            chp=str(chp),
            base=base,
            password=password,
            singleuser=str(singleuser),
            args=args,
            environment=environment,
            server_start=SERVER_START,
            service=SERVICE,
            service_token=service_token,
        )
        + extra_config
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith(("JUPYTER", "JPY_"))}
    env.pop("PYTHONPATH", None)
    env["PATH"] = os.pathsep.join([str(python.parent), env.get("PATH", "")])
    env["CONFIGPROXY_AUTH_TOKEN"] = secrets.token_hex(24)
    log_path = base / "jupyterhub.log"
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            [str(python), "-m", "jupyterhub", "-f", str(config)],
            cwd=base,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    hub = Hub(proc, base, port, service_token, password, log_path)
    deadline = time.monotonic() + HUB_START
    while True:
        if proc.poll() is not None:
            raise HubError(f"jupyterhub exited with {proc.returncode}:\n{hub.log_tail()}")
        try:
            status, _ = request(f"{hub.url}/hub/api/", None, timeout=2.0)
            if status == 200:
                return hub
        except (urllib.error.URLError, ConnectionError, OSError):
            pass
        if time.monotonic() > deadline:
            hub.stop()
            raise HubError(f"jupyterhub did not answer within {HUB_START}s:\n{hub.log_tail()}")
        time.sleep(0.3)


@dataclass
class Student:
    hub: Hub
    name: str
    token: str

    @property
    def server_url(self) -> str:
        return f"{self.hub.url}/user/{self.name}"

    @property
    def home(self) -> Path:
        return self.hub.base / "home" / self.name

    def api(self, method: str, path: str, body: Any = None, timeout: float = 30.0) -> Any:
        """The student's own jupyter server, through the proxy, with the student's token."""
        status, payload = request(f"{self.server_url}{path}", self.token, method, body, timeout)
        if status >= 400:
            raise HubError(f"{self.name}: {method} {path}: HTTP {status} {payload}")
        return payload

    def start_server(self, timeout: float = SERVER_START) -> float:
        """Ask the hub for the student's server and wait until it is ready; returns the seconds."""
        started = time.perf_counter()
        status, payload = request(f"{self.hub.url}/hub/api/users/{self.name}/server", self.token, "POST", {})
        if status not in (201, 202, 400):  # 400: already running
            raise HubError(f"{self.name}: starting the server: HTTP {status} {payload}\n{self.hub.log_tail()}")
        deadline = started + timeout
        while True:
            model = self.hub.api("GET", f"/users/{self.name}", token=self.token)
            server = (model.get("servers") or {}).get("")
            if server and server.get("ready"):
                return time.perf_counter() - started
            if time.perf_counter() > deadline:
                raise HubError(f"{self.name}: server not ready after {timeout}s\n{self.hub.log_tail()}")
            time.sleep(0.25)

    def stop_server(self, wait: float = 120.0) -> None:
        """Ask the hub to stop the student's server and wait until it has (`wait=0`: do not wait)."""
        request(f"{self.hub.url}/hub/api/users/{self.name}/server", self.hub.service_token, "DELETE", timeout=60)
        deadline = time.perf_counter() + wait
        while wait and self.hub.api("GET", f"/users/{self.name}").get("servers"):
            if time.perf_counter() > deadline:
                raise HubError(f"{self.name}: server not stopped after {wait}s\n{self.hub.log_tail()}")
            time.sleep(0.25)

    def start_kernel(self) -> str:
        return self.api("POST", "/api/kernels", {"name": "python3"})["id"]

    def kernel_pid(self, kernel_id: str) -> int | None:
        """The kernel's pid, from its connection file's neighbour: the process whose command line names it."""
        import psutil

        for proc in psutil.process_iter(["cmdline"]):
            cmd = proc.info.get("cmdline") or []
            if any(kernel_id in part for part in cmd) and any("ipykernel" in part for part in cmd):
                return proc.pid
        return None


class StudentKernel:
    """One kernel websocket through the proxy (the legacy JSON protocol: each message names its channel)."""

    def __init__(self, student: Student, kernel_id: str):
        self.student = student
        self.kernel_id = kernel_id
        self.session = uuid.uuid4().hex
        self.ws = None
        self.inbox: list[dict] = []  # messages not yet consumed by a waiter
        self._reader = None
        self._waiters: list = []

    async def connect(self) -> StudentKernel:
        from tornado.httpclient import HTTPRequest
        from tornado.websocket import websocket_connect

        url = (
            f"ws://127.0.0.1:{self.student.hub.port}/user/{self.student.name}/api/kernels/"
            f"{self.kernel_id}/channels?session_id={self.session}"
        )
        req = HTTPRequest(
            url, headers={"Authorization": f"token {self.student.token}"}, connect_timeout=REPLY, request_timeout=REPLY
        )
        self.ws = await websocket_connect(req, max_message_size=256 * 1024 * 1024)
        self._reader = asyncio.ensure_future(self._read())
        await self.request("kernel_info_request", {})
        return self

    async def _read(self) -> None:
        ws = self.ws
        while True:
            raw = await ws.read_message()
            if raw is None:
                for fut, _ in self._waiters:
                    if not fut.done():
                        fut.set_exception(ConnectionError("the kernel websocket closed"))
                return
            if not isinstance(raw, str):
                continue
            m = json.loads(raw)
            m["arrived"] = time.perf_counter()
            for fut, match in list(self._waiters):
                if not fut.done() and match(m):
                    fut.set_result(m)
                    self._waiters.remove((fut, match))
            self.inbox.append(m)
            if len(self.inbox) > 2000:
                del self.inbox[:1000]

    def _message(self, msg_type: str, content: dict, channel: str = "shell") -> dict:
        return {
            "header": {
                "msg_id": uuid.uuid4().hex,
                "msg_type": msg_type,
                "username": self.student.name,
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

    def wait_for(self, match) -> asyncio.Future:
        fut = asyncio.get_running_loop().create_future()
        self._waiters.append((fut, match))
        return fut

    async def request(self, msg_type: str, content: dict, timeout: float = REPLY) -> list[dict]:
        """Send on shell; return every message with it as parent, once the reply and idle both arrived."""
        msg = self._message(msg_type, content)
        msg_id = msg["header"]["msg_id"]
        reply_type = msg_type.replace("_request", "_reply")
        idle = self.wait_for(
            lambda m: (
                m.get("parent_header", {}).get("msg_id") == msg_id
                and m["msg_type"] == "status"
                and m["content"].get("execution_state") == "idle"
            )
        )
        reply = self.wait_for(
            lambda m: m.get("parent_header", {}).get("msg_id") == msg_id and m["msg_type"] == reply_type
        )
        await self.ws.write_message(json.dumps(msg))
        await asyncio.wait_for(asyncio.gather(idle, reply), timeout)
        return [m for m in self.inbox if m.get("parent_header", {}).get("msg_id") == msg_id]

    async def execute(self, code: str, timeout: float = REPLY) -> dict:
        """Run code; returns {"status", "stdout", "error"} (the reply's status, printed text, error name)."""
        msgs = await self.request(
            "execute_request",
            {
                "code": code,
                "silent": False,
                "store_history": True,
                "user_expressions": {},
                "allow_stdin": False,
                "stop_on_error": True,
            },
            timeout,
        )
        reply = next(m for m in msgs if m["msg_type"] == "execute_reply")
        stdout = "".join(m["content"].get("text", "") for m in msgs if m["msg_type"] == "stream")
        error = reply["content"].get("ename") if reply["content"].get("status") == "error" else None
        return {
            "status": reply["content"]["status"],
            "stdout": stdout,
            "error": error,
            "evalue": reply["content"].get("evalue"),
        }

    async def value(self, expr: str) -> Any:
        """A JSON-able Python value from the kernel."""
        out = await self.execute(f"import json as _j; print(_j.dumps({expr}))")
        if out["status"] != "ok":
            raise HubError(f"{self.student.name}: {expr}: {out['error']}: {out['evalue']}")
        return json.loads(out["stdout"].strip().splitlines()[-1])

    async def move_slider(self, comm_id: str, value: float, seq: int, timeout: float = REPLY) -> float:
        """One slider move as the page sends it (a custom comm message); returns the seconds until
        the kernel's `ack` for it arrived (the explorer has recomputed by then)."""
        acked = self.wait_for(
            lambda m: (
                m["msg_type"] == "comm_msg"
                and m["content"].get("comm_id") == comm_id
                and (m["content"].get("data", {}).get("state", {}) or {}).get("ack", -1) >= seq
            )
        )
        msg = self._message(
            "comm_msg",
            {"comm_id": comm_id, "data": {"method": "custom", "content": {"type": "move", "value": value, "seq": seq}}},
        )
        sent = time.perf_counter()
        await self.ws.write_message(json.dumps(msg))
        m = await asyncio.wait_for(acked, timeout)
        return m["arrived"] - sent

    async def close(self) -> None:
        """Close the websocket and wait for the server's close frame: tornado closes the socket
        only then (or on a timer), and a loop that ends first leaves the socket to the GC."""
        ws, reader = self.ws, self._reader
        self.ws = self._reader = None
        if ws is not None:
            ws.close()
        if reader is not None:
            try:
                await asyncio.wait_for(reader, REPLY)  # read_message() gives None once closed
            except (TimeoutError, asyncio.CancelledError):
                pass
        if ws is not None and ws.protocol is not None and ws.protocol.stream is not None:
            ws.protocol.stream.close()


def lesson_cells(name: str = "01_pytrees.ipynb") -> list[str]:
    """The code cells of a course notebook, as the student gets it."""
    nb = json.loads((REPO / "content" / name).read_text(encoding="utf-8"))
    return [
        "".join(c["source"]) if isinstance(c["source"], list) else c["source"]
        for c in nb["cells"]
        if c["cell_type"] == "code"
    ]


class HubLab:
    """One student's server in the shape tests/browser/harness.open_notebook uses (root_dir,
    api, session_for, connection_file, lab_url): the page is logged in through the hub."""

    def __init__(self, student: Student):
        self.student = student
        self.root_dir = student.home
        # jupyter_core's runtime dir under the student's HOME (the spawner sets HOME)
        self.runtime_dir = student.home / ".local" / "share" / "jupyter" / "runtime"

    def lab_url(self, path: str = "") -> str:
        return f"{self.student.server_url}/lab{('/tree/' + path) if path else ''}"

    def api(self, method: str, path: str, body: Any = None, timeout: float = 10.0) -> Any:
        return self.student.api(method, path, body, timeout)

    def session_for(self, path: str) -> dict:
        for s in self.api("GET", "/api/sessions"):
            if s.get("path") == path:
                return s
        raise HubError(f"{self.student.name}'s server has no session for {path!r}")

    def connection_file(self, kernel_id: str) -> Path:
        return self.runtime_dir / f"kernel-{kernel_id}.json"


def log_in(page, hub: Hub, name: str, timeout_ms: float = 120_000) -> None:
    """The hub's own login form (DummyAuthenticator), then JupyterLab loaded and restored."""
    page.goto(f"{hub.url}/hub/login", timeout=timeout_ms)
    page.fill("input[name=username]", name)
    page.fill("input[name=password]", hub.password)
    page.click("input[type=submit], button[type=submit]")
    page.wait_for_url(f"**/user/{name}/lab**", timeout=timeout_ms)
    page.wait_for_function("() => window.jupyterapp !== undefined", timeout=timeout_ms)
    page.evaluate("async () => { await window.jupyterapp.started; await window.jupyterapp.restored; }")


def server_pid(name: str) -> int | None:
    """The pid of a student's jupyterhub-singleuser (found by its JUPYTERHUB_USER)."""
    import psutil

    for proc in psutil.process_iter(["cmdline"]):
        cmd = " ".join(proc.info.get("cmdline") or [])
        if "jupyterhub-singleuser" not in cmd:
            continue
        try:
            if proc.environ().get("JUPYTERHUB_USER") == name:
                return proc.pid
        except psutil.Error:
            continue
    return None
