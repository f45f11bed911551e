"""A real kernel for the tests that need one (jupyter_client + ipykernel): started with this
Python's folder on PATH and JAX on the CPU, run cell by cell, shut down at the end.

Every kernel the tests start in this process talks over Unix sockets in a folder of its own
(ZeroMQ's ipc transport), never TCP ports: the suite's workers start kernels side by side, and a
port jupyter_client found free can be taken by another worker's kernel before this one binds it
(the kernel dies before replying, "Address already in use")."""

from __future__ import annotations

import contextlib
import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from jupyter_client.manager import AsyncKernelManager, KernelManager


def _sockets() -> dict[str, str]:
    """A kernel manager's settings for sockets in a new folder (short: a socket path has a limit)."""
    return {"transport": "ipc", "ip": os.path.join(tempfile.mkdtemp(prefix="pytree-lab-test-kernel-"), "kernel")}


class IpcKernelManager(AsyncKernelManager):
    """nbclient's kernel manager on Unix sockets (`NotebookClient(kernel_manager_class=...)`); the
    folder goes with the kernel."""

    def __init__(self, **kw: Any) -> None:
        super().__init__(**{**kw, **_sockets()})

    async def _async_cleanup_resources(self, restart: bool = False) -> None:
        await super()._async_cleanup_resources(restart=restart)
        if not restart:
            shutil.rmtree(os.path.dirname(self.ip), ignore_errors=True)


def notebook_client(nb: Any, folder: Path | str, *, timeout: int = 300, kernel_name: str = "python3", **kw: Any):
    """nbclient's client for `nb`, run in `folder` by a kernel on sockets of its own; a cell that
    raises fails the run."""
    from nbclient import NotebookClient

    return NotebookClient(
        nb,
        timeout=timeout,
        kernel_name=kernel_name,
        kernel_manager_class=IpcKernelManager,
        allow_errors=False,
        resources={"metadata": {"path": str(folder)}},
        **kw,
    )


def kernel_env(**extra: str) -> dict[str, str]:
    """The environment a test's kernel runs in: JAX on the CPU, this Python's folder first on PATH
    (the kernelspec runs `python`), Jupyter's usual folders."""
    path = os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])
    env = dict(os.environ, JAX_PLATFORMS="cpu", PATH=path, **extra)
    env.pop("JUPYTER_PLATFORM_DIRS", None)
    return env


@contextlib.contextmanager
def real_kernel(cwd: Path | str) -> Iterator[tuple]:
    """(kernel manager, blocking client) of a fresh python3 kernel working in `cwd`."""
    km = KernelManager(kernel_name="python3", **_sockets())
    try:
        km.start_kernel(env=kernel_env(), cwd=str(cwd))
        kc = km.client()
        kc.start_channels()
        try:
            kc.wait_for_ready(timeout=60)
            yield km, kc
        finally:
            kc.stop_channels()
    finally:
        if km.has_kernel:
            km.shutdown_kernel(now=True)
        shutil.rmtree(os.path.dirname(km.ip), ignore_errors=True)


def output(kc, code: str, timeout: float = 120) -> str:
    """What a cell prints (streams and its result), once the kernel is idle; a cell that raises
    fails the test with its traceback."""
    msg_id = kc.execute(code)
    text, error = [], None
    while True:
        msg = kc.get_iopub_msg(timeout=timeout)
        if msg["parent_header"].get("msg_id") != msg_id:
            continue
        kind = msg["msg_type"]
        if kind == "stream":
            text.append(msg["content"]["text"])
        elif kind == "execute_result":
            text.append(msg["content"]["data"]["text/plain"])
        elif kind == "error":
            error = "\n".join(msg["content"]["traceback"])
        elif kind == "status" and msg["content"]["execution_state"] == "idle":
            break
    assert error is None, error
    return "".join(text)


def send_intent(kc, comm_id: str, content: dict) -> None:
    """A widget's custom message as the page sends it, on the widget's comm."""
    kc.shell_channel.send(
        kc.session.msg("comm_msg", {"comm_id": comm_id, "data": {"method": "custom", "content": content}})
    )
