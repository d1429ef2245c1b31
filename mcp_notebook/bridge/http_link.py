"""The bridge's link to a hub over HTTP or HTTPS (a kernel's hub, or a Jupyter server's front for
``mcp-notebook bridge --server``), through the hub client; the all-kernels bridge's link is the
stdio carrier instead (``bridge/stdio_carrier.py``), with no HTTP at all."""

from __future__ import annotations

import contextlib
import json
from typing import Any

from ..hubclient.address import HubAddress
from ..hubclient.blocking import HubConnection, HubResponse, exchange, open_stream
from ..hubclient.rules import HUB_SCHEME, REASON_HEADER, REPLY_SECONDS, SERVER_SCHEME, UpstreamError, authorization
from ..protocol.wire_sse import sse_data
from ..runtime import HubRecord


class Upstream:
    """One hub over HTTP or HTTPS, through the hub client: requests over kept-alive connections,
    each stream on a connection of its own."""

    def __init__(self, record: HubRecord):
        self.record = record
        self.remote = bool(record.info.get("remote"))  # a Jupyter server's (mcp-notebook bridge --server)
        self.hub = HubAddress(record.url, record.token, SERVER_SCHEME if self.remote else HUB_SCHEME)

    def _headers(self, headers: dict[str, str], body: bytes | None) -> dict[str, str]:
        h = {"Accept": "application/json, text/event-stream", **headers}
        if body is not None:
            h["Content-Type"] = "application/json"
        return {**h, **authorization(self.hub.token, self.hub.scheme)}

    def _refused(self, status: int, reason: str | None) -> None:
        """remote: the server refused the token, or its extension (not the hub) says the kernel has no hub."""
        if self.remote and (status in (401, 403) or reason):
            raise UpstreamError(f"HTTP {status} from the Jupyter server for {self.hub.path}")

    def open(
        self, method: str, headers: dict[str, str], body: bytes | None = None, timeout: float | None = REPLY_SECONDS
    ) -> tuple[HubConnection, HubResponse]:
        """A stream (or a DELETE): its own connection, the reply once its status is known."""
        conn, resp = open_stream(self.hub.endpoint, method, self._headers(headers, body), body, timeout)
        try:
            self._refused(resp.status, resp.getheader(REASON_HEADER))
        except UpstreamError:
            conn.close()
            raise
        return conn, resp

    def address(self) -> HubAddress | None:
        """Where ``--channel`` watches: this hub, over HTTP or HTTPS."""
        return self.hub

    def call(self, headers: dict[str, str], message: Any) -> tuple[int, dict[str, str], list[Any]]:
        """POST one message; (status, headers, JSON-RPC messages of the reply, whether JSON or SSE)."""
        body = json.dumps(message).encode()
        status, rheaders, data = exchange(self.hub.endpoint, "POST", self._headers(headers, body), body)
        self._refused(status, rheaders.get(REASON_HEADER.lower()))
        if "text/event-stream" not in rheaders.get("content-type", ""):
            return status, rheaders, [json.loads(data)] if data.strip() else []
        replies = []
        for doc in sse_data(data):
            with contextlib.suppress(ValueError):
                replies.append(json.loads(doc))
        return status, rheaders, replies
