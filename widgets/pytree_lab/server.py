"""A jupyter_server extension: kernel websockets with TCP_NODELAY.

Every slider move is a small message to the kernel and a few small replies back. With Nagle's
algorithm on (jupyter_server's default) a small reply that follows another waits for the
browser's delayed ACK (~40 ms on Linux): a ~25 ms round trip takes ~50 ms. This extension sets
TCP_NODELAY on the server's kernel websockets, and on nothing else. It is enabled wherever
pytree-lab is installed (the wheel ships `etc/jupyter/jupyter_server_config.d/pytree_lab.json`);
turn it off with

    jupyter server extension disable pytree_lab

It replaces the class in the server's `kernel_websocket_connection_class` setting with a
subclass of whatever is configured, whose `connect()` sets TCP_NODELAY first and then does what
the configured class does. On a jupyter_server without that setting it logs a warning.
"""

from __future__ import annotations

import contextlib
from typing import Any

__all__ = ["nodelay_connection_class"]

EXTENSION = "pytree_lab"
OFF_SWITCH = f"jupyter server extension disable {EXTENSION}"
SETTING = "kernel_websocket_connection_class"
# set on the classes this module makes, so wrapping twice is a no-op
MARK = "_pytree_lab_nodelay"


def nodelay_connection_class(base: type) -> type:
    """A subclass of the kernel websocket connection class `base` that sets TCP_NODELAY first."""
    if getattr(base, MARK, False):
        return base

    def connect(self, *args, **kwargs):
        # The handler calls connect() right after the websocket handshake, before any kernel
        # message goes out. A closed stream or an unusual transport: stock behaviour for this
        # socket. The return value (a future, a coroutine or None) is the base's.
        with contextlib.suppress(Exception):
            self.websocket_handler.set_nodelay(True)
        return super(cls, self).connect(*args, **kwargs)

    cls = type(f"NoDelay{base.__name__}", (base,), {"connect": connect, MARK: True, "__module__": __name__})
    return cls


def _unsupported(serverapp: Any, why: str) -> None:
    import jupyter_server

    serverapp.log.warning(
        "pytree-lab: kernel websockets keep Nagle's algorithm (stock behaviour): %s "
        "(jupyter_server %s); small replies may wait ~40 ms for a delayed ACK.",
        why,
        jupyter_server.__version__,
    )


def _load_jupyter_server_extension(serverapp: Any) -> None:
    web_app = getattr(serverapp, "web_app", None)
    settings = getattr(web_app, "settings", None)
    if not isinstance(settings, dict) or settings.get(SETTING) is None:
        _unsupported(serverapp, f"this server has no {SETTING} setting")
        return
    try:
        from jupyter_server.services.kernels.connection.base import BaseKernelWebsocketConnection
    except ImportError as e:
        _unsupported(serverapp, f"cannot import the kernel websocket classes ({e})")
        return
    configured = settings[SETTING]
    if not (isinstance(configured, type) and issubclass(configured, BaseKernelWebsocketConnection)):
        _unsupported(serverapp, f"{SETTING} is {configured!r}, not a kernel websocket connection class")
        return
    if getattr(configured, MARK, False):
        return  # loaded twice: already on
    _wrap(serverapp, settings, configured)
    serverapp.log.info(
        "pytree-lab: TCP_NODELAY on kernel websockets (%s.%s); turn it off with `%s`",
        configured.__module__,
        configured.__qualname__,
        OFF_SWITCH,
    )
    # Extensions load in name order: one loaded after this one may set its own class. Once
    # every extension has loaded (the loop's first callbacks), wrap that one too.
    with contextlib.suppress(Exception):
        from tornado.ioloop import IOLoop

        IOLoop.current().add_callback(_wrap_if_replaced, serverapp, settings)


def _wrap(serverapp: Any, settings: dict, configured: type) -> None:
    wrapped = nodelay_connection_class(configured)
    settings[SETTING] = wrapped
    # Keep the ServerApp option in step, so its shutdown (close_all) and any extension that
    # reads the option after this one see the class actually in use.
    with contextlib.suppress(Exception):
        serverapp.kernel_websocket_connection_class = wrapped


def _wrap_if_replaced(serverapp: Any, settings: dict) -> None:
    from jupyter_server.services.kernels.connection.base import BaseKernelWebsocketConnection

    current = settings.get(SETTING)
    if getattr(current, MARK, False):
        return
    if isinstance(current, type) and issubclass(current, BaseKernelWebsocketConnection):
        _wrap(serverapp, settings, current)
        serverapp.log.info(
            "pytree-lab: another extension set %s.%s for kernel websockets; TCP_NODELAY kept on it",
            current.__module__,
            current.__qualname__,
        )
    else:
        _unsupported(serverapp, f"{SETTING} was replaced by {current!r}")
