"""pytree_lab's jupyter_server extension (pytree_lab/server.py): TCP_NODELAY on kernel websockets.

The wheel is built from this checkout and installed into a fresh virtual environment that has
nothing of pytree-lab but that wheel (its dependencies come from the development environment
through a path entry, so the install takes seconds). Servers are real `python -m
jupyter_server` processes of that environment; a test-only probe extension in the server
reports TCP_NODELAY on each live websocket as the operating system has it (`getsockopt`).
No timings here: the effect on round trips is measured by `make bench`.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest
from server_harness import EXTENSION_OFF, KernelSocket, close_websocket, open_events_socket, server_env, start_server

REPO = Path(__file__).resolve().parents[1]
CONFIG_ENTRY = "etc/jupyter/jupyter_server_config.d/pytree_lab.json"
ACTIVE = "pytree-lab: TCP_NODELAY on kernel websockets"
STOCK = "jupyter_server.services.kernels.connection.channels.ZMQChannelsWebsocketConnection"


def _run(*cmd, **kw) -> subprocess.CompletedProcess:
    out = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, timeout=600, **kw)
    assert out.returncode == 0, f"{cmd} failed ({out.returncode}):\n{out.stdout}\n{out.stderr}"
    return out


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    _run(
        sys.executable,
        "-m",
        "pip",
        "wheel",
        "--quiet",
        "--disable-pip-version-check",
        "--no-deps",
        "--wheel-dir",
        out,
        REPO,
    )
    (whl,) = out.glob("pytree_lab-*.whl")
    return whl


@pytest.fixture(scope="module")
def clean_venv(tmp_path_factory, wheel) -> Path:
    """A new venv with only the wheel installed; jupyter_server & co. reachable via a path entry."""
    venv = tmp_path_factory.mktemp("venv") / "env"
    _run(sys.executable, "-m", "venv", "--without-pip", venv)
    python = venv / "bin" / "python"
    purelib = Path(_run(python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])").stdout.strip())
    # A path line only: the development environment's own .pth files (its editable
    # pytree_lab among them) are not processed, so pytree_lab can come from the wheel alone.
    (purelib / "dev_site_packages.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    # no pytree_lab package there (an editable install leaves the wheel's course notebooks in a
    # bare pytree_lab/ folder of site-packages: a namespace with no module, origin None)
    gone = _run(python, "-c", "import importlib.util as u; s = u.find_spec('pytree_lab'); print(s and s.origin)")
    assert gone.stdout.strip() == "None"
    _run(
        sys.executable,
        "-m",
        "pip",
        "--python",
        python,
        "install",
        "--quiet",
        "--disable-pip-version-check",
        "--no-deps",
        "--no-index",
        wheel,
    )
    return venv


def _python(venv: Path) -> Path:
    return venv / "bin" / "python"


async def _open_sockets(server):
    kernel = KernelSocket(server, server.start_kernel())
    await kernel.connect()
    events = await open_events_socket(server)
    return kernel, events


def _socket_of(probe: dict, address: list) -> dict:
    (ws,) = [w for w in probe["websockets"] if w["peer"] == address]
    return ws


async def _kernel_answers(kernel: KernelSocket) -> str:
    await kernel.execute("x = 6 * 7")
    msgs = await kernel.execute("print(x)")
    return "".join(m["content"]["text"] for m in msgs if m["msg_type"] == "stream")


def test_wheel_ships_the_config_that_enables_the_extension(wheel, clean_venv, tmp_path):
    with zipfile.ZipFile(wheel) as z:
        shipped = [n for n in z.namelist() if n.endswith(CONFIG_ENTRY)]
        assert shipped == [f"pytree_lab-0.1.0.data/data/{CONFIG_ENTRY}"]
        assert json.loads(z.read(shipped[0])) == {"ServerApp": {"jpserver_extensions": {"pytree_lab": True}}}
    installed = clean_venv / CONFIG_ENTRY
    assert json.loads(installed.read_text()) == {"ServerApp": {"jpserver_extensions": {"pytree_lab": True}}}
    # the server's own view of its extensions, in that environment
    listed = _run(
        _python(clean_venv), "-m", "jupyter_server", "extension", "list", env=server_env(tmp_path, _python(clean_venv))
    )
    text = re.sub(r"\x1b\[[0-9;]*m", "", listed.stdout + listed.stderr)  # its colours
    # enabled by the venv's own config dir, and it imports (validates) there
    assert re.search(
        rf"Config dir: {re.escape(str(clean_venv))}/etc/jupyter\n\s+pytree_lab enabled\n"
        r"\s+- Validating pytree_lab\.\.\.\n\s+pytree_lab 0\.1\.0 OK",
        text,
    ), text


def test_editable_install_gets_the_config_too():
    # `make lab` and the browser tests use the editable install in .venv
    installed = Path(sys.prefix) / CONFIG_ENTRY
    assert json.loads(installed.read_text()) == {"ServerApp": {"jpserver_extensions": {"pytree_lab": True}}}


def test_kernel_websockets_get_tcp_nodelay_and_nothing_else_does(clean_venv, tmp_path):
    with start_server(_python(clean_venv), tmp_path) as server:

        async def main():
            kernel, events = await _open_sockets(server)
            try:
                answer = await _kernel_answers(kernel)
                return answer, server.probe(), kernel.local_address, list(events.stream.socket.getsockname())
            finally:
                await kernel.close()
                await close_websocket(events)

        answer, probe, kernel_addr, events_addr = asyncio.run(main())
        log = server.log()
    assert answer == "42\n"
    # pytree_lab came from the wheel in the clean venv, not from the checkout
    assert probe["pytree_lab_file"] == str(
        clean_venv
        / "lib"
        / f"python{sys.version_info[0]}.{sys.version_info[1]}"
        / "site-packages"
        / "pytree_lab"
        / "__init__.py"
    )
    assert probe["setting_mro"][:2] == ["pytree_lab.server.NoDelayZMQChannelsWebsocketConnection", STOCK]
    k = _socket_of(probe, kernel_addr)
    assert k["handler"] == "jupyter_server.services.kernels.websocket.KernelWebsocketHandler"
    assert k["nodelay"] is True
    e = _socket_of(probe, events_addr)
    assert e["handler"] != k["handler"] and e["nodelay"] is False
    # said once at startup, with the off switch
    assert log.count(ACTIVE) == 1, log
    assert "jupyter server extension disable pytree_lab" in log


def test_a_configured_connection_class_is_wrapped_not_replaced(clean_venv, tmp_path):
    args = ["--ServerApp.kernel_websocket_connection_class=nodelay_probe.CustomConnection"]
    with start_server(_python(clean_venv), tmp_path, args) as server:

        async def main():
            kernel, events = await _open_sockets(server)
            try:
                return server.probe(), kernel.local_address
            finally:
                await kernel.close()
                await close_websocket(events)

        probe, addr = asyncio.run(main())
        log = server.log()
    assert probe["setting_mro"][:3] == [
        "pytree_lab.server.NoDelayCustomConnection",
        "nodelay_probe.CustomConnection",
        STOCK,
    ]
    assert probe["custom_connects"] == 1  # the configured class still does its own connect
    k = _socket_of(probe, addr)
    assert k["connection_mro"][:2] == probe["setting_mro"][:2]
    assert k["nodelay"] is True
    assert "(nodelay_probe.CustomConnection)" in log


def test_a_class_set_by_an_extension_loaded_later_is_wrapped_too(clean_venv, tmp_path):
    # zz_replacer (tests/serverprobe) loads after pytree_lab and puts its own class in the settings
    with start_server(_python(clean_venv), tmp_path, ["--ServerApp.jpserver_extensions=zz_replacer=True"]) as server:

        async def main():
            kernel, events = await _open_sockets(server)
            try:
                return server.probe(), kernel.local_address
            finally:
                await kernel.close()
                await close_websocket(events)

        probe, addr = asyncio.run(main())
        log = server.log()
    assert "zz_replacer | extension was successfully loaded" in log
    assert probe["setting_mro"][:2] == ["pytree_lab.server.NoDelayCustomConnection", "nodelay_probe.CustomConnection"]
    assert probe["custom_connects"] == 1
    assert _socket_of(probe, addr)["nodelay"] is True
    assert "another extension set nodelay_probe.CustomConnection for kernel websockets; TCP_NODELAY kept" in log


def test_the_off_switch_restores_stock_behaviour(clean_venv, tmp_path):
    python = _python(clean_venv)
    env = server_env(tmp_path, python)
    # the documented command, as a person runs it in the environment pytree-lab is installed in
    _run(python, "-m", "jupyter_server", "extension", "disable", "pytree_lab", env=env)
    try:
        assert json.loads((clean_venv / CONFIG_ENTRY).read_text())["ServerApp"]["jpserver_extensions"] == {
            "pytree_lab": False
        }
        with start_server(python, tmp_path) as server:

            async def main():
                kernel, events = await _open_sockets(server)
                try:
                    return await _kernel_answers(kernel), server.probe(), kernel.local_address
                finally:
                    await kernel.close()
                    await close_websocket(events)

            answer, probe, addr = asyncio.run(main())
            log = server.log()
    finally:
        _run(python, "-m", "jupyter_server", "extension", "enable", "pytree_lab", env=env)
    assert answer == "42\n"
    assert probe["setting_mro"][0] == STOCK
    assert probe["pytree_lab_file"] is None  # not even imported
    k = _socket_of(probe, addr)
    assert k["connection_mro"][0] == STOCK and k["nodelay"] is False
    assert "pytree-lab" not in log
    assert json.loads((clean_venv / CONFIG_ENTRY).read_text())["ServerApp"]["jpserver_extensions"] == {
        "pytree_lab": True
    }


def test_one_server_can_run_without_it(clean_venv, tmp_path):
    # what the benchmark's "stock" server uses: the extension stays enabled in the environment
    with start_server(_python(clean_venv), tmp_path, EXTENSION_OFF) as server:

        async def main():
            kernel, events = await _open_sockets(server)
            try:
                return server.probe(), kernel.local_address
            finally:
                await kernel.close()
                await close_websocket(events)

        probe, addr = asyncio.run(main())
        log = server.log()
    assert probe["setting_mro"][0] == STOCK
    assert _socket_of(probe, addr)["nodelay"] is False
    assert ACTIVE not in log
    assert "nodelay_probe | extension was successfully loaded" in log  # the other extensions still load


# ------------------------------------------------------------------ fail soft, in this process


class _Captured(logging.Handler):
    def __init__(self):
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record):
        self.records.append(record)


def _serverapp(settings: dict):
    """A real ServerApp whose web application has `settings` (not started)."""
    from jupyter_server.serverapp import ServerApp
    from tornado.web import Application

    app = ServerApp()
    app.web_app = Application(**settings)
    captured = _Captured()
    app.log.addHandler(captured)
    return app, captured


def test_a_server_without_the_setting_keeps_stock_behaviour_with_a_warning():
    from pytree_lab.server import _load_jupyter_server_extension

    # jupyter_server 1.x: no kernel_websocket_connection_class in the web app's settings
    app, captured = _serverapp({"some_setting": 1})
    try:
        _load_jupyter_server_extension(app)
        assert app.web_app.settings.get("kernel_websocket_connection_class") is None
        (rec,) = captured.records
        assert rec.levelno == logging.WARNING
        assert (
            "keep Nagle's algorithm" in rec.getMessage() and "no kernel_websocket_connection_class" in rec.getMessage()
        )
    finally:
        app.log.removeHandler(captured)


def test_a_setting_that_is_not_a_connection_class_is_left_alone():
    from pytree_lab.server import _load_jupyter_server_extension

    app, captured = _serverapp({"kernel_websocket_connection_class": "not.a.Class"})
    try:
        _load_jupyter_server_extension(app)
        assert app.web_app.settings["kernel_websocket_connection_class"] == "not.a.Class"
        (rec,) = captured.records
        assert rec.levelno == logging.WARNING and "'not.a.Class'" in rec.getMessage()
    finally:
        app.log.removeHandler(captured)


def test_loading_twice_wraps_once_and_logs_once():
    from jupyter_server.services.kernels.connection.channels import ZMQChannelsWebsocketConnection

    from pytree_lab.server import _load_jupyter_server_extension

    app, captured = _serverapp({"kernel_websocket_connection_class": ZMQChannelsWebsocketConnection})
    try:
        _load_jupyter_server_extension(app)
        _load_jupyter_server_extension(app)
        cls = app.web_app.settings["kernel_websocket_connection_class"]
        assert cls.__mro__[1] is ZMQChannelsWebsocketConnection
        assert app.kernel_websocket_connection_class is cls
        assert [r.levelno for r in captured.records] == [logging.INFO]
        assert ACTIVE in captured.records[0].getMessage()
    finally:
        app.log.removeHandler(captured)
        app.clear_instance()
