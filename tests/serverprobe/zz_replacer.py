"""Test-only: a jupyter_server extension, loaded after pytree_lab (name order), that replaces the
kernel websocket connection class in the web app's settings with its own, as another extension might."""

from nodelay_probe import CustomConnection


def _jupyter_server_extension_points():
    return [{"module": __name__}]


def _load_jupyter_server_extension(serverapp):
    serverapp.web_app.settings["kernel_websocket_connection_class"] = CustomConnection
