"""``{base_url}mcp-notebook/mcp``: every kernel of this Jupyter server behind one MCP endpoint, with
Jupyter's auth; and ``{base_url}mcp-notebook/focus``, where the JupyterLab extension reports the
notebook the user looks at (its kernel becomes the one bare URIs address).

The front (mcp_notebook.allkernels) runs in the server process, one per server, started at its first
request; this module is its carrier over tornado (DESIGN, "Carriers"): Jupyter authenticates,
the request is driven by the exchange driver (``McpServer.handle`` on a worker thread), streams
are written as SSE (allkernels/sse_replies.py).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

from jupyter_server.auth.decorator import authorized
from tornado import web

from ..allkernels.directory import KernelEntry, write_focus
from ..allkernels.sse_replies import SseReplies
from ..hubclient.address import HubAddress
from ..serverside.kernel import spec_of
from ..serverside.watch import served_here
from .control_client import LoopBridge
from .handlers import McpProxyHandler, _ExtensionHandler
from .hubs import HubFinder

MAX_FOCUS_BODY = 4096  # {"kernel_id": "<uuid>"} is 50 bytes


class ServerDirectory:
    """The kernels of this server that have a hub (the server extension's finder), their notebook
    paths (sessions) and execution states (the kernel manager)."""

    FRESH_SECONDS = 0.25  # a listing this recent is answered again without looking

    def __init__(self, finder: HubFinder, kernel_watch: Callable[[], Any] = lambda: None):
        self.finder = finder
        self.kernel_watch = kernel_watch  # the ExtensionApp's watch over kernels without a hub (or None)
        self.paths: dict[str, str] = {}  # kernel id -> notebook path, refreshed by requests
        self.paths_at = 0.0
        self.focus: tuple[str, float] | None = None
        self._entries: list[KernelEntry] = []
        self._specs: dict[str, dict[str, Any]] = {}  # kernel id -> its kernelspec's language and display name
        self._looked = 0.0

    def entries(self, fresh: bool = False) -> list[KernelEntry]:
        if not fresh and time.monotonic() - self._looked < self.FRESH_SECONDS:
            return list(self._entries)
        self._entries = self._look()
        self._looked = time.monotonic()
        return list(self._entries)

    def _look(self) -> list[KernelEntry]:
        finder = self.finder
        ids = finder.kernel_ids()
        by_channel = finder.channel_hubs_now(ids)  # kernels on another host: over their control channel
        out = []
        for kernel_id in ids:
            try:
                state = finder.kernel_manager.get_kernel(kernel_id).execution_state
            except Exception:
                state = None
            info = by_channel.get(kernel_id)
            if info is not None and finder.loop is not None:
                bridge = LoopBridge(finder.channel(kernel_id), finder.loop)
                hub = HubAddress(f"control://{kernel_id}", None, route=bridge)
                notebook = info.get("notebook_path") or self.paths.get(kernel_id)
                out.append(KernelEntry(kernel_id, notebook, hub, float(info.get("started_at") or 0), state))
                continue
            record = finder.record(kernel_id) if kernel_id not in by_channel else None
            if record is None or finder.by_channel(kernel_id):
                watch = self.kernel_watch()
                served = (
                    served_here(watch, finder, kernel_id, channel_silent=True) if kernel_id not in by_channel else None
                )
                if served is not None:  # no hub: served from the server's side
                    out.append(served_entry(served, self.paths.get(kernel_id), state))
                continue
            notebook = record.notebook_path or self.paths.get(kernel_id)
            spec = self._spec(kernel_id)
            hub = HubAddress(record.url, record.token)
            out.append(
                KernelEntry(
                    kernel_id,
                    notebook,
                    hub,
                    record.started_at,
                    state,
                    language=spec["language"] or None,
                    display_name=spec["display_name"] or None,
                )
            )
        return sorted(out, key=lambda e: e.started_at)

    def _spec(self, kernel_id: str) -> dict[str, Any]:
        """A kernel's language and display name (its kernelspec read once per kernel)."""
        found = self._specs.get(kernel_id)
        if found is None:
            if len(self._specs) > 1024:
                self._specs.clear()
            found = self._specs[kernel_id] = spec_of(self.finder.kernel_manager, _kernel(self.finder, kernel_id))
        return found

    def focused(self) -> tuple[str, float] | None:
        return self.focus


def served_entry(served: Any, notebook: str | None, state: str | None) -> KernelEntry:
    """A kernel served from the server's side, as the front's directory lists it."""
    return KernelEntry(
        served.kernel_id,
        notebook,
        served.address(),
        served.watched_since,
        served.state or state,  # by its IOPub (a gateway kernel's model in the server lags)
        language=served.language or None,
        display_name=served.display_name or None,
        served_by="jupyter-server",
    )


def _kernel(finder: HubFinder, kernel_id: str) -> Any:
    try:
        return finder.kernel_manager.get_kernel(kernel_id)
    except Exception:
        return None


async def refresh_paths(handler: Any, directory: ServerDirectory) -> None:
    """The notebook paths of the server's sessions (looked up at most once a second)."""
    sessions = handler.settings.get("session_manager")
    if sessions is None or time.monotonic() - directory.paths_at < 1.0:
        return
    directory.paths_at = time.monotonic()
    try:
        listed = await sessions.list_sessions()
    except Exception:
        return
    directory.paths = {(s.get("kernel") or {}).get("id"): s["path"] for s in listed if s.get("path")}


@web.stream_request_body
class FrontHandler(SseReplies, McpProxyHandler):
    """POST/GET/DELETE of MCP, answered by the server's front for every kernel."""

    @web.authenticated
    @authorized(action="execute")
    async def post(self) -> None:  # type: ignore[override]
        await self._serve()

    @web.authenticated
    @authorized(action="execute")
    async def get(self) -> None:  # type: ignore[override]
        await self._serve()

    @web.authenticated
    @authorized(action="execute")
    async def delete(self) -> None:  # type: ignore[override]
        await self._serve()

    async def _serve(self) -> None:
        req = self.request_for_here()
        front, directory = self.extensionapp.front()
        await refresh_paths(self, directory)
        await self._exchange(front.server, req)

    def on_connection_close(self) -> None:
        super().on_connection_close()
        self._wake_stream()


class FocusHandler(_ExtensionHandler):
    """``POST {base_url}mcp-notebook/focus`` ``{"kernel_id": ...}``: the notebook the user looks at."""

    _track_activity = False
    accepts_jupyterhub_scope = False  # the user's own panel moves the focus, never the JupyterHub service

    @web.authenticated
    @authorized(action="write")
    async def post(self) -> None:  # type: ignore[override]
        body = self.request.body or b"{}"
        if len(body) > MAX_FOCUS_BODY:
            raise web.HTTPError(413, f"the focus body is at most {MAX_FOCUS_BODY} bytes")
        try:
            doc = json.loads(body)
        except (ValueError, RecursionError):  # not JSON, or nested too deeply to read
            raise web.HTTPError(400, 'the body must be a JSON object {"kernel_id": "..."}') from None
        kernel_id = doc.get("kernel_id") if isinstance(doc, dict) else None
        if not isinstance(kernel_id, str) or not self.finder.known(kernel_id):
            raise web.HTTPError(400, "kernel_id must name a kernel of this server")
        _, directory = self.extensionapp.front()
        directory.focus = (kernel_id, time.time())
        for d in self.finder.dirs[-1:]:  # the user's runtime dir: a local bridge follows the focus too
            try:
                write_focus(d, kernel_id)
            except OSError:
                pass
        self.set_status(204)
        self.finish()
