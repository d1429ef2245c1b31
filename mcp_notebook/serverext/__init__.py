"""The Jupyter server extension: MCP to the kernels of a (remote) Jupyter server, through its own auth.

Routes (all authenticated with the server's identity provider):

- ``{base_url}mcp-notebook/kernels``: JSON list of this server's kernels that have a hub.
- ``{base_url}mcp-notebook/kernels/{kernel_id}/mcp``: the kernel's MCP endpoint (POST/GET/DELETE),
  piped to its hub on loopback with the hub's own token, or over the kernel's control channel
  when the hub is on another host (a kernel gateway, a non-local provisioner).

Enabled by ``jupyter-config/server-config/mcp_notebook.json`` (installed into
``etc/jupyter/jupyter_server_config.d``) or ``--ServerApp.jpserver_extensions=mcp_notebook=True``.
Settings: ``c.MCPNotebookProxy.max_body_bytes``, ``c.MCPNotebookProxy.carrier``.
"""

from __future__ import annotations

from typing import Any

from traitlets import Enum, Int
from traitlets.config import LoggingConfigurable

KERNEL_ID = r"(?P<kernel_id>\w+-\w+-\w+-\w+-\w+)"  # the server's own kernel id pattern


class MCPNotebookProxy(LoggingConfigurable):
    """Settings of the mcp-notebook server extension."""

    max_body_bytes = Int(1_000_000, help="Largest MCP request body the server passes to a hub (HTTP 413 above).").tag(
        config=True
    )
    carrier = Enum(
        ["auto", "tcp", "control"],
        "auto",
        help="How the server reaches a kernel's hub: auto (loopback TCP when the hub's runtime file is on this "
        "host, else the kernel's control channel: a kernel gateway, a non-local provisioner), tcp only, or "
        "control only (e.g. kernels in containers that share the server's provisioner).",
    ).tag(config=True)


def _load_jupyter_server_extension(serverapp: Any) -> None:
    from jupyter_core.paths import jupyter_runtime_dir
    from jupyter_server.utils import url_path_join

    from ..transport.client import ConnectionPool
    from .front import FocusHandler, FrontHandler
    from .handlers import KernelsHandler, McpProxyHandler
    from .hubs import HubFinder

    settings = MCPNotebookProxy(parent=serverapp)
    km = serverapp.kernel_manager
    gateway = bool(getattr(getattr(serverapp, "gateway_config", None), "gateway_enabled", False))
    dirs = [getattr(km, "connection_dir", None), getattr(serverapp, "runtime_dir", None), jupyter_runtime_dir()]
    finder = HubFinder(km, [d for d in dirs if d], gateway=gateway, carrier=settings.carrier)
    web_app = serverapp.web_app
    web_app.settings["mcp_notebook_finder"] = finder
    web_app.settings["mcp_notebook_pool"] = ConnectionPool()
    web_app.settings["mcp_notebook_max_body_bytes"] = settings.max_body_bytes
    base = web_app.settings.get("base_url", "/")
    web_app.add_handlers(
        ".*$",
        [
            (url_path_join(base, "mcp-notebook", "kernels") + "/?", KernelsHandler),
            (url_path_join(base, "mcp-notebook", "kernels", KERNEL_ID, "mcp") + "/?", McpProxyHandler),
            (url_path_join(base, "mcp-notebook", "mcp") + "/?", FrontHandler),
            (url_path_join(base, "mcp-notebook", "focus") + "/?", FocusHandler),
        ],
    )
    serverapp.log.info(
        "mcp-notebook: MCP for every kernel of this server at %smcp-notebook/mcp (one kernel: kernels/<id>/mcp)", base
    )
