"""The server extension as a jupyter_server ``ExtensionApp``: its settings and routes when the
server loads it, and everything it opened closed when the server stops (before Jupyter shuts the
kernels down): the requests piped to a hub right now, the all-kernels front and its upstream
listens, the keep-alive connections to hubs, the proxy's pool, the control channels and their wires.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from jupyter_server.extension.application import ExtensionApp

from . import KERNEL_ID, MCPNotebookProxy

STOP_SECONDS = 10.0  # the longest the stop waits for the piped requests, and for the front, to close
WATCH_MS = 500  # how often the kernels are looked at (new ones watched, gone ones closed, restarts)


def served_kernels(app: Any, serverapp: Any, proxy: MCPNotebookProxy, finder: Any) -> Any:
    """The watch over the kernels without a hub (serverside/), reading its settings live."""
    from ..serverside.watch import KernelWatch

    root = str(
        getattr(serverapp, "root_dir", "")
        or getattr(getattr(serverapp, "contents_manager", None), "root_dir", "")
        or "."
    )
    watch = KernelWatch(
        serverapp.kernel_manager,
        lambda: app.notebook_paths,
        root,
        lambda: bool(proxy.variable_snippets),
        lambda: float(proxy.snippet_seconds),
        lambda kernel_id: not finder.gateway and finder.remote_reason(kernel_id) is None,
        lambda kernel_id: finder.record(kernel_id) is not None,
    )
    return watch


class MCPNotebookExtension(ExtensionApp):
    """The server extension's lifecycle: settings and routes on load, everything closed on stop.
    Its settings stay on :class:`MCPNotebookProxy` (``c.MCPNotebookProxy.carrier``)."""

    name = "mcp_notebook"
    load_other_extensions = True

    def initialize_settings(self) -> None:
        from jupyter_core.paths import jupyter_runtime_dir

        from ..hubclient.aio import ConnectionPool
        from .hubs import HubFinder

        serverapp: Any = self.serverapp
        proxy = MCPNotebookProxy(parent=serverapp)
        km = serverapp.kernel_manager
        gateway = bool(getattr(getattr(serverapp, "gateway_config", None), "gateway_enabled", False))
        dirs = [getattr(km, "connection_dir", None), getattr(serverapp, "runtime_dir", None), jupyter_runtime_dir()]
        finder = HubFinder(km, [d for d in dirs if d], gateway=gateway, carrier=proxy.carrier)
        self.kernel_watch = served_kernels(self, serverapp, proxy, finder) if proxy.serve_without_hub else None
        self.settings.update(
            mcp_notebook_finder=finder,
            mcp_notebook_pool=ConnectionPool(),
            mcp_notebook_max_body_bytes=proxy.max_body_bytes,
        )

    kernel_watch: Any = None  # serverside.watch.KernelWatch: the kernels without a hub, served from here
    notebook_paths: dict[str, str] = {}  # kernel id -> notebook path, refreshed from the sessions

    async def _start_jupyter_server_extension(self, serverapp: Any) -> None:
        """On the running loop: watch the kernels from now on (what they publish before is not seen)."""
        if self.kernel_watch is not None:
            from tornado.ioloop import PeriodicCallback

            self.notebook_paths = {}
            self._watch_tick = PeriodicCallback(self._sync_kernels, WATCH_MS)
            self._watch_tick.start()
            await self._sync_kernels()

    async def _sync_kernels(self) -> None:
        watch = self.kernel_watch
        if watch is None:
            return
        sessions = getattr(self.serverapp, "session_manager", None)
        if sessions is not None and watch.served:
            with contextlib.suppress(Exception):
                listed = await sessions.list_sessions()
                self.notebook_paths = {(s.get("kernel") or {}).get("id"): s["path"] for s in listed if s.get("path")}
        watch.sync()

    def initialize_handlers(self) -> None:
        from .front import FocusHandler, FrontHandler
        from .handlers import KernelsHandler
        from .served import DocumentHandler
        from .served import KernelMcpHandler as McpProxyHandler

        self.handlers.extend(
            [
                ("mcp-notebook/kernels/?", KernelsHandler),
                (f"mcp-notebook/kernels/{KERNEL_ID}/mcp/?", McpProxyHandler),
                (f"mcp-notebook/kernels/{KERNEL_ID}/document/?", DocumentHandler),
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
        tick = getattr(self, "_watch_tick", None)
        if tick is not None:
            tick.stop()
        if self.kernel_watch is not None:  # on this loop: the IOPub streams belong to it (each kernel's
            with contextlib.suppress(Exception):  # own server closes on a thread of its own)
                self.kernel_watch.close()
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
