"""``kernels/{id}/mcp`` for a kernel served from the server's own side (mcp_notebook.serverside):
answered by the kernel's in-process server when it has no hub (the watch lives on the ExtensionApp,
``kernel_watch``); and ``kernels/{id}/document``, where JupyterLab pushes the live notebook of such a
kernel (the Lab comm reaches only an in-kernel hub)."""

from __future__ import annotations

import json

from jupyter_server.auth.decorator import authorized
from tornado import web

from ..allkernels.sse_replies import SseReplies
from ..serverside.watch import served_here
from .handlers import McpProxyHandler, _ExtensionHandler

MAX_DOCUMENT_BYTES = 8 * 1024 * 1024  # what the JupyterLab extension pushes at most (MAX_PUSH_CHARS)


@web.stream_request_body
class KernelMcpHandler(SseReplies, McpProxyHandler):
    """``kernels/{id}/mcp``: piped to the kernel's hub, or answered here for a kernel without one."""

    async def _proxy(self, kernel_id: str) -> None:
        watch = self.extensionapp.kernel_watch
        if watch is not None:
            await watch.settled(kernel_id)  # a gateway kernel's hub asked about once, not per request
        served = served_here(watch, self.finder, kernel_id)
        if served is None:
            await super()._proxy(kernel_id)
            return
        await self._exchange(served.server, self.request_for_here())

    def on_connection_close(self) -> None:
        super().on_connection_close()
        self._wake_stream()


class DocumentHandler(_ExtensionHandler):
    """``POST kernels/{id}/document`` ``{"nb": {...}, "path": "..."}``: the live document of a notebook
    whose kernel has no hub (204); a kernel with a hub gets it over the Lab comm (409)."""

    _track_activity = False

    @web.authenticated
    @authorized(action="write")
    async def post(self, kernel_id: str) -> None:  # type: ignore[override]
        body = self.request.body or b""
        if len(body) > MAX_DOCUMENT_BYTES:
            raise web.HTTPError(413, f"the document is at most {MAX_DOCUMENT_BYTES} bytes")
        if not self.finder.known(kernel_id):
            raise web.HTTPError(404, f"no kernel {kernel_id} on this server")
        watch = self.extensionapp.kernel_watch
        if watch is not None:
            await watch.settled(kernel_id)
        served = served_here(watch, self.finder, kernel_id)
        if served is None:
            raise web.HTTPError(409, "this kernel has an mcp-notebook hub: its document goes over the Lab comm")
        try:
            doc = json.loads(body)
            served.notebook.set_document(doc["nb"], source="jupyterlab (server route)")
        except (ValueError, RecursionError, KeyError, TypeError) as exc:
            raise web.HTTPError(400, f'the body must be {{"nb": <a notebook>}}: {str(exc)[:200]}') from None
        self.set_status(204)
        self.finish()
