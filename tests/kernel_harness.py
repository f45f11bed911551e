"""A real kernel for the tests that need one (jupyter_client + ipykernel): started with this
Python's folder on PATH and JAX on the CPU, run cell by cell, shut down at the end."""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator
from pathlib import Path


@contextlib.contextmanager
def real_kernel(cwd: Path | str) -> Iterator[tuple]:
    """(kernel manager, blocking client) of a fresh python3 kernel working in `cwd`."""
    from jupyter_client.manager import start_new_kernel

    env = dict(
        os.environ,
        JAX_PLATFORMS="cpu",
        PATH=os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")]),
    )
    km, kc = start_new_kernel(kernel_name="python3", env=env, cwd=str(cwd))
    try:
        yield km, kc
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)


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
