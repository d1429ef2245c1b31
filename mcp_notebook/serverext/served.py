"""``kernels/{id}/mcp`` for a kernel served from the server's own side (mcp_notebook.serverside):
answered by the kernel's in-process server when it has no hub (the watch lives on the ExtensionApp,
``kernel_watch``)."""

from __future__ import annotations

from tornado import web

from ..allkernels.sse_replies import SseReplies
from ..protocol.exchange import HttpRequest
from ..serverside.watch import served_here
from .handlers import McpProxyHandler


@web.stream_request_body
class KernelMcpHandler(SseReplies, McpProxyHandler):
    """``kernels/{id}/mcp``: piped to the kernel's hub, or answered here for a kernel without one."""

    async def _proxy(self, kernel_id: str) -> None:
        served = served_here(self.settings, self.finder, kernel_id)
        if served is None:
            await super()._proxy(kernel_id)
            return
        if self._refusal is not None:
            raise self._refusal
        if self._overflow:
            limit = self.settings.get("mcp_notebook_max_body_bytes", 1_000_000)
            raise web.HTTPError(413, f"request body larger than {limit} bytes")
        headers = {name.lower(): value for name, value in self.request.headers.get_all()}
        headers.pop("authorization", None)  # Jupyter's credential stays here
        method = self.request.method or "GET"
        req = HttpRequest(method, headers, bytes(self._body) if method == "POST" else b"", admitted=True)
        await self._exchange(served.server, req)

    def on_connection_close(self) -> None:
        super().on_connection_close()
        self._wake_stream()
