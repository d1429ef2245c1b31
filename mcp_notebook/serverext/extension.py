"""The server extension as a jupyter_server ``ExtensionApp``: its settings (traits, configured as
``c.MCPNotebookExtension.*``), its state (the hub finder, the proxy's connection pool, the requests
piped right now, the all-kernels front, started on first use) and its routes, whose handlers reach
that state through jupyter_server's ``ExtensionHandlerMixin`` (``handler.extensionapp``). When the
server stops (before Jupyter shuts the kernels down) everything it opened is closed: the piped
requests, the front and its upstream listens, the keep-alive connections to hubs, the pool, the
control channels and their wires.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import TYPE_CHECKING, Any

from jupyter_server.extension.application import ExtensionApp
from traitlets import Enum, Int
from traitlets.config import Config

from ..inkernel.config import MAX_BODY_BYTES
from . import KERNEL_ID

if TYPE_CHECKING:
    from ..allkernels.front import KernelsFront
    from ..hubclient.aio import ConnectionPool
    from .front import ServerDirectory
    from .handlers import McpProxyHandler
    from .hubs import HubFinder

STOP_SECONDS = 10.0  # the longest the stop waits for the piped requests, and for the front, to close
ROUTES = ["auto", "tcp", "control"]
# The settings' section and names until 0.1.x (``c.MCPNotebookProxy.carrier``): still read for one
# release, with a warning naming the new ones.
DEPRECATED_SECTION = "MCPNotebookProxy"
DEPRECATED_NAMES = {"carrier": "route", "max_body_bytes": "max_body_bytes"}


class MCPNotebookExtension(ExtensionApp):
    """The server extension: settings, state and routes on load, everything closed on stop."""

    name = "mcp_notebook"
    load_other_extensions = True

    max_body_bytes = Int(
        MAX_BODY_BYTES, help="Largest MCP request body the server passes to a hub (HTTP 413 above)."
    ).tag(config=True)
    route = Enum(
        ROUTES,
        "auto",
        help="How the server reaches a kernel's hub: auto (loopback TCP when the hub's runtime file is on this "
        "host, else the kernel's control channel: a kernel gateway, a non-local provisioner), tcp only, or "
        "control only (e.g. kernels in containers that share the server's provisioner).",
    ).tag(config=True)

    finder: HubFinder
    pool: ConnectionPool
    pipes: set[McpProxyHandler]  # requests piped to a hub right now (the stop ends them)
    _front: tuple[KernelsFront, ServerDirectory] | None = None

    def initialize_settings(self) -> None:
        from jupyter_core.paths import jupyter_runtime_dir

        from ..hubclient.aio import ConnectionPool
        from .hubs import HubFinder

        self._read_deprecated_settings()
        serverapp: Any = self.serverapp
        km = serverapp.kernel_manager
        gateway = bool(getattr(getattr(serverapp, "gateway_config", None), "gateway_enabled", False))
        dirs = [getattr(km, "connection_dir", None), getattr(serverapp, "runtime_dir", None), jupyter_runtime_dir()]
        self.finder = HubFinder(km, [d for d in dirs if d], gateway=gateway, route=self.route)
        self.pool = ConnectionPool()
        self.pipes = set()

    def _read_deprecated_settings(self) -> None:
        """``c.MCPNotebookProxy.*`` (the names until 0.1.x) applied where the new name is not set."""
        config = self.config
        old = config[DEPRECATED_SECTION] if DEPRECATED_SECTION in config else Config()
        new = config[type(self).__name__] if type(self).__name__ in config else Config()
        moved = {DEPRECATED_NAMES[k]: v for k, v in old.items() if k in DEPRECATED_NAMES}
        moved = {k: v for k, v in moved.items() if k not in new}
        for name in old:
            self.log.warning(
                "mcp-notebook: c.%s.%s is deprecated: use c.%s.%s",
                DEPRECATED_SECTION,
                name,
                type(self).__name__,
                DEPRECATED_NAMES.get(name, name),
            )
        if moved:
            self.update_config(Config({type(self).__name__: moved}))

    def front(self) -> tuple[KernelsFront, ServerDirectory]:
        """The server's front for every kernel, started on first use."""
        if self._front is None:
            from ..allkernels.front import KernelsFront
            from .front import ServerDirectory

            directory = ServerDirectory(self.finder)
            self._front = (KernelsFront(directory), directory)
        return self._front

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
        from ..hubclient.blocking import close_connections

        pipes = list(getattr(self, "pipes", ()))
        with contextlib.suppress(Exception):
            await asyncio.wait_for(asyncio.gather(*(p.end() for p in pipes), return_exceptions=True), STOP_SECONDS)
        found, self._front = self._front, None
        if found is not None:  # its listens close on their own loop thread, which may need this loop
            with contextlib.suppress(Exception):
                await asyncio.wait_for(asyncio.to_thread(found[0].close), STOP_SECONDS)
        closed = await asyncio.to_thread(close_connections)
        pool = getattr(self, "pool", None)
        if pool is not None:
            await pool.aclose()
        finder = getattr(self, "finder", None)
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
