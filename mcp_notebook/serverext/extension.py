"""The server extension as a jupyter_server ``ExtensionApp``: its settings (traits, configured as
``c.MCPNotebookExtension.*``), its state (the hub finder, the proxy's connection pool, the requests
piped right now, the all-kernels front, started on first use) and its routes, whose handlers reach
that state through jupyter_server's ``ExtensionHandlerMixin`` (``handler.extensionapp``). When the
server stops (before Jupyter shuts the kernels down) everything it opened is closed: the piped
requests, the front and its upstream listens, the keep-alive connections to hubs, the pool, the
control channels and their wires, the IOPub watch over kernels without a hub.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import TYPE_CHECKING, Any

from jupyter_server.extension.application import ExtensionApp
from traitlets import Bool, Enum, Float, Int
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
WATCH_MS = 500  # how often the kernels are looked at (new ones watched, gone ones closed, restarts)
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
    serve_without_hub = Bool(
        True,
        help="Serve kernels that have no mcp-notebook hub (R, xeus-python, Julia, a Python kernel without "
        "%load_ext) from the server's side: their cells and outputs as the server sees them on IOPub, their "
        "notebook, and R variables through inspect_request. Nothing is loaded into the kernel.",
    ).tag(config=True)
    variable_snippets = Bool(
        False,
        help="Opt in to the read-only snippets that list an R kernel's variables (nb://vars) and page its data "
        "frames (nb://frames/{name}): run silently while the kernel is idle, bounded by setTimeLimit inside R, "
        "assigning nothing, moving no execution count, printing nothing (docs/kernels.md shows them).",
    ).tag(config=True)
    snippet_seconds = Float(
        2.0, help="The longest a variable snippet may run inside the kernel (R's setTimeLimit), in seconds."
    ).tag(config=True)
    settle_heap = Bool(
        True,
        help="Once the server runs, collect once and freeze what survived (gc.freeze), so the collector's full "
        "passes stop walking the server's start-up heap (~280,000 objects with JupyterLab: 200-340 ms each, every "
        "request waiting, every few seconds of steady reads). Nothing is left uncollected that reference counting "
        "frees; False leaves the collector alone.",
    ).tag(config=True)

    finder: HubFinder
    pool: ConnectionPool
    pipes: set[McpProxyHandler]  # requests piped to a hub right now (the stop ends them)
    _front: tuple[KernelsFront, ServerDirectory] | None = None
    kernel_watch: Any = None  # serverside.watch.KernelWatch: the kernels without a hub, served from here
    notebook_paths: dict[str, str] = {}  # kernel id -> notebook path, refreshed from the sessions

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
        self.kernel_watch = watch = self._served_kernels() if self.serve_without_hub else None
        if watch is not None:
            self.finder.hubless = watch.hubless

    def _served_kernels(self) -> Any:
        """The watch over the kernels without a hub (serverside/), reading its settings live."""
        from ..serverside.watch import KernelWatch

        serverapp: Any = self.serverapp
        finder = self.finder
        root = str(
            getattr(serverapp, "root_dir", "")
            or getattr(getattr(serverapp, "contents_manager", None), "root_dir", "")
            or "."
        )
        return KernelWatch(
            serverapp.kernel_manager,
            lambda: self.notebook_paths,
            root,
            lambda: bool(self.variable_snippets),
            lambda: float(self.snippet_seconds),
            lambda kernel_id: not finder.gateway and finder.remote_reason(kernel_id) is None,
            lambda kernel_id: finder.record(kernel_id) is not None,
            self._gateway_feed if finder.gateway else None,
            finder.probe if finder.gateway else None,
            self._gateway_asker if finder.gateway else None,
        )

    @staticmethod
    def _gateway_asker(feed: Any, idle: Any, mark_ours: Any) -> Any:
        """Variable reads of a gateway kernel over its feed's websocket (idle only, as for local ones)."""
        from .gateway_feed import GatewayAsker

        return GatewayAsker(feed, idle, mark_ours)

    def _gateway_feed(self, kernel_id: str, on_message: Any, on_close: Any) -> Any:
        """A gateway kernel's IOPub as the gateway relays it (serverext/gateway_feed.py)."""
        from .gateway_feed import GatewayFeed

        if self.finder.loop is None:
            self.finder.loop = asyncio.get_running_loop()
        return GatewayFeed(kernel_id, on_message, on_close)

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

            directory = ServerDirectory(self.finder, lambda: self.kernel_watch)
            self._front = (KernelsFront(directory), directory)
        return self._front

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
        if self.settle_heap:  # once the loop runs: every extension loaded, the server listening
            from tornado.ioloop import IOLoop

            (getattr(self.serverapp, "io_loop", None) or IOLoop.current()).add_callback(self._settle_heap)

    def _settle_heap(self) -> None:
        import gc
        import time

        from ..heap import settle_heap

        if not gc.isenabled():
            return  # someone runs without the collector: nothing walks the heap
        started = time.perf_counter()
        frozen = settle_heap()
        ms = 1000.0 * (time.perf_counter() - started)
        self.log.info("mcp-notebook: the server's start-up heap is settled (%d objects frozen, %.0f ms)", frozen, ms)

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
        tick = getattr(self, "_watch_tick", None)
        if tick is not None:
            tick.stop()
        if self.kernel_watch is not None:  # on this loop: the IOPub streams belong to it (each kernel's
            with contextlib.suppress(Exception):  # own server closes on a thread of its own)
                self.kernel_watch.close()
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
