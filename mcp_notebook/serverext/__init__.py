"""The Jupyter server extension: MCP to the kernels of a (remote) Jupyter server, through its own auth.

Routes (all authenticated with the server's identity provider):

- ``{base_url}mcp-notebook/kernels``: JSON list of this server's kernels that have a hub.
- ``{base_url}mcp-notebook/kernels/{kernel_id}/mcp``: the kernel's MCP endpoint (POST/GET/DELETE),
  piped to its hub on loopback with the hub's own token, or over the kernel's control channel
  when the hub is on another host (a kernel gateway, a non-local provisioner).
- ``{base_url}mcp-notebook/mcp`` and ``…/focus``: every kernel behind one endpoint (front.py).

A jupyter_server ``ExtensionApp`` (:class:`MCPNotebookExtension`), enabled by
``jupyter-config/server-config/mcp_notebook.json`` (installed into ``etc/jupyter/jupyter_server_config.d``)
or ``--ServerApp.jpserver_extensions=mcp_notebook=True``. Its stop (the server's shutdown, before
the kernels are shut down) closes what it opened: the front and its upstream listens, the
connections to hubs, the kernels' control channels and their wires.
Settings: ``c.MCPNotebookProxy.max_body_bytes``, ``c.MCPNotebookProxy.carrier``.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from jupyter_server.extension.application import ExtensionApp
from traitlets import Enum, Int
from traitlets.config import LoggingConfigurable

KERNEL_ID = r"(?P<kernel_id>\w+-\w+-\w+-\w+-\w+)"  # the server's own kernel id pattern
STOP_SECONDS = 10.0  # the longest the extension's stop waits for the front to close


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


class MCPNotebookExtension(ExtensionApp):
    """The server extension's lifecycle: settings and routes on load, everything closed on stop.
    Its settings stay on :class:`MCPNotebookProxy` (``c.MCPNotebookProxy.carrier``)."""

    name = "mcp_notebook"
    load_other_extensions = True

    def initialize_settings(self) -> None:
        from jupyter_core.paths import jupyter_runtime_dir

        from ..transport.client import ConnectionPool
        from .hubs import HubFinder

        serverapp: Any = self.serverapp
        proxy = MCPNotebookProxy(parent=serverapp)
        km = serverapp.kernel_manager
        gateway = bool(getattr(getattr(serverapp, "gateway_config", None), "gateway_enabled", False))
        dirs = [getattr(km, "connection_dir", None), getattr(serverapp, "runtime_dir", None), jupyter_runtime_dir()]
        self.settings.update(
            mcp_notebook_finder=HubFinder(km, [d for d in dirs if d], gateway=gateway, carrier=proxy.carrier),
            mcp_notebook_pool=ConnectionPool(),
            mcp_notebook_max_body_bytes=proxy.max_body_bytes,
        )

    def initialize_handlers(self) -> None:
        from .front import FocusHandler, FrontHandler
        from .handlers import KernelsHandler, McpProxyHandler

        self.handlers.extend(
            [
                ("mcp-notebook/kernels/?", KernelsHandler),
                (f"mcp-notebook/kernels/{KERNEL_ID}/mcp/?", McpProxyHandler),
                ("mcp-notebook/mcp/?", FrontHandler),
                ("mcp-notebook/focus/?", FocusHandler),
            ]
        )
        base = self.serverapp.base_url if self.serverapp is not None else "/"
        self.log.info(
            "mcp-notebook: MCP for every kernel of this server at %smcp-notebook/mcp (one kernel: kernels/<id>/mcp)",
            base,
        )

    async def stop_extension(self) -> None:
        """End the piped requests, close the front (its listens end at the hubs), the connections to
        hubs, the control channels. Never raises: Jupyter shuts the kernels down after this."""
        try:
            await self._close_all()
        except Exception:
            self.log.exception("mcp-notebook: stopping the extension failed")

    async def _close_all(self) -> None:
        from ..allkernels.upstream import close_connections

        settings = self._web_settings()
        pipes = list(settings.get("mcp_notebook_pipes") or ())  # requests piped to a hub right now
        with contextlib.suppress(Exception):
            await asyncio.wait_for(asyncio.gather(*(p.end() for p in pipes), return_exceptions=True), STOP_SECONDS)
        found = settings.pop("mcp_notebook_front", None)
        if found is not None:  # its listens close on their own loop thread, which may need this loop
            with contextlib.suppress(Exception):
                await asyncio.wait_for(asyncio.to_thread(found[0].close), STOP_SECONDS)
        closed = await asyncio.to_thread(close_connections)
        pool = settings.get("mcp_notebook_pool")
        if pool is not None:
            await pool.aclose()
        finder = settings.get("mcp_notebook_finder")
        channels = list(finder.channels.values()) if finder is not None else []
        if finder is not None:
            finder.channels.clear()
        await asyncio.gather(*(channel.aclose() for channel in channels), return_exceptions=True)
        self.log.info(
            "mcp-notebook: stopped (front %s, %d piped requests, %d hub connections, %d control channels closed)",
            "closed" if found is not None else "never started",
            len(pipes),
            closed,
            len(channels),
        )

    def _web_settings(self) -> dict[str, Any]:
        web_app = getattr(self.serverapp, "web_app", None)
        return web_app.settings if web_app is not None else {}


def _jupyter_server_extension_points() -> list[dict[str, Any]]:
    return [{"module": "mcp_notebook.serverext", "app": MCPNotebookExtension}]
