"""A test-only jupyter_server extension: reports the live websockets of the server it runs in.

GET /nodelay-probe answers, for every open websocket of the server process, its handler and
connection classes, the peer address and TCP_NODELAY as the kernel reports it
(`getsockopt`), plus which kernel websocket connection class the server is using and where
pytree_lab was imported from. `CustomConnection` stands for another extension's (or a
person's) own kernel websocket connection class.
"""

from __future__ import annotations

import gc
import json
import socket
import sys

from jupyter_server.base.handlers import JupyterHandler
from jupyter_server.services.kernels.connection.channels import ZMQChannelsWebsocketConnection
from tornado import web
from tornado.websocket import WebSocketHandler


class CustomConnection(ZMQChannelsWebsocketConnection):
    """A configured connection class of someone else's: counts its connects."""

    connects = 0

    def connect(self):
        type(self).connects += 1
        CustomConnection.connects = type(self).connects
        return super().connect()


def _mro(cls: type) -> list[str]:
    return [f"{c.__module__}.{c.__qualname__}" for c in cls.__mro__]


class ProbeHandler(JupyterHandler):
    @web.authenticated
    def get(self):
        sockets = []
        for obj in gc.get_objects():
            if not isinstance(obj, WebSocketHandler):
                continue
            ws = obj.ws_connection
            stream = getattr(ws, "stream", None)
            sock = getattr(stream, "socket", None)
            if sock is None:
                continue
            connection = getattr(obj, "connection", None)
            sockets.append(
                {
                    "handler": f"{type(obj).__module__}.{type(obj).__qualname__}",
                    "connection_mro": _mro(type(connection)) if connection is not None else [],
                    "peer": list(sock.getpeername()),
                    "nodelay": bool(sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY)),
                }
            )
        setting = self.settings.get("kernel_websocket_connection_class")
        pytree_lab = sys.modules.get("pytree_lab")
        self.finish(
            json.dumps(
                {
                    "websockets": sockets,
                    "setting_mro": _mro(setting) if isinstance(setting, type) else [repr(setting)],
                    "pytree_lab_file": getattr(pytree_lab, "__file__", None),
                    "custom_connects": CustomConnection.connects,
                    "python": sys.executable,
                }
            )
        )


def _jupyter_server_extension_points():
    return [{"module": __name__}]


def _load_jupyter_server_extension(serverapp):
    serverapp.web_app.add_handlers(".*$", [(serverapp.base_url.rstrip("/") + "/nodelay-probe", ProbeHandler)])
