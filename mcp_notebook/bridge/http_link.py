"""The bridge's link to a hub over HTTP or HTTPS (a kernel's hub, or a Jupyter server's front for
``mcp-notebook bridge --server``), through the hub client: each message the bridge hands it becomes
an HTTP exchange here, and only here (HTTP only where there is HTTP). The all-kernels bridge's link
is the stdio carrier instead (``bridge/stdio_carrier.py``), with no HTTP at all."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from typing import Any

from ..hubclient.address import HubAddress, Replied
from ..hubclient.blocking import HubConnection, HubResponse, exchange, open_stream, sse_messages
from ..hubclient.rules import (
    HUB_SCHEME,
    REASON_HEADER,
    REPLY_SECONDS,
    SERVER_SCHEME,
    STREAM_IDLE_SECONDS,
    UpstreamError,
    authorization,
)
from ..protocol.wire_sse import sse_data
from ..protocol.wire_stateless import request_headers
from ..revisions import META_VERSION, STATELESS, classify
from ..runtime import HubRecord

SSE = "text/event-stream"


def message_headers(message: Any, session_id: str | None, version: str | None) -> dict[str, str]:
    """The MCP headers of one message: its session's, or a stateless request's (its ``_meta`` names
    the revision, mirrored in MCP-Protocol-Version, Mcp-Method and Mcp-Name)."""
    h: dict[str, str] = {}
    if session_id:
        h["Mcp-Session-Id"] = session_id
    if version:
        h["MCP-Protocol-Version"] = version
    if isinstance(message, dict) and classify({}, message) == STATELESS:
        params = message.get("params") or {}
        h.update(request_headers(str(message.get("method")), params, str(params["_meta"][META_VERSION])))
    return h


class HttpFeed:
    """A stream over its own HTTP connection (``hubclient.address.Feed``)."""

    def __init__(self, conn: HubConnection, resp: HubResponse):
        self.conn = conn
        self.resp = resp
        self.streaming = resp.status == 200 and SSE in (resp.getheader("content-type") or "")

    def messages(self) -> Iterator[Any]:
        if self.streaming:
            yield from sse_messages(self.resp)
            return
        yield json.loads(self.resp.read())  # a JSON-RPC error; ValueError: no hub answered there

    def cancel(self) -> None:
        sock = self.conn.sock
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.shutdown(2)  # wakes a reader blocked on the socket

    def close(self) -> None:
        self.conn.close()


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

    def _open(
        self, method: str, headers: dict[str, str], body: bytes | None = None, timeout: float | None = REPLY_SECONDS
    ) -> HttpFeed:
        """A stream (or a DELETE): its own connection, the reply once its status is known."""
        conn, resp = open_stream(self.hub.endpoint, method, self._headers(headers, body), body, timeout)
        try:
            self._refused(resp.status, resp.getheader(REASON_HEADER))
        except UpstreamError:
            conn.close()
            raise
        return HttpFeed(conn, resp)

    def address(self) -> HubAddress | None:
        """Where ``--channel`` watches: this hub, over HTTP or HTTPS."""
        return self.hub

    def call(self, message: Any, session_id: str | None = None, version: str | None = None, size: int = 0) -> Replied:
        """POST one message; the JSON-RPC messages of the reply, whether JSON or SSE (the hub bounds
        the body it reads: ``size`` is not needed here)."""
        body = json.dumps(message).encode()
        headers = self._headers(message_headers(message, session_id, version), body)
        status, rheaders, data = exchange(self.hub.endpoint, "POST", headers, body)
        self._refused(status, rheaders.get(REASON_HEADER.lower()))
        sid = rheaders.get("mcp-session-id")
        if SSE not in rheaders.get("content-type", ""):
            return Replied(status, sid, [json.loads(data)] if data.strip() else [])
        replies = []
        for doc in sse_data(data):
            with contextlib.suppress(ValueError):
                replies.append(json.loads(doc))
        return Replied(status, sid, replies)

    def stream(self, session_id: str, version: str | None) -> HttpFeed:
        """GET the session's stream."""
        headers = {**message_headers(None, session_id, version), "Accept": SSE}
        return self._open("GET", headers, timeout=STREAM_IDLE_SECONDS)

    def listen(self, message: dict[str, Any]) -> HttpFeed:
        """POST a subscriptions/listen; its stream (no reply deadline: it lasts)."""
        return self._open("POST", message_headers(message, None, None), json.dumps(message).encode(), timeout=None)

    def end_session(self, session_id: str, version: str | None) -> None:
        """DELETE the session."""
        self._open("DELETE", message_headers(None, session_id, version), timeout=2.0).close()
