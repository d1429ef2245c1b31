"""The stdio carrier: ``mcp-notebook bridge`` with no selector drives the all-kernels front's
``McpServer`` in its own process, from stdin/stdout: no loopback port, no token, one process.

The :class:`~.stdio.Bridge` turns each stdio JSON-RPC message into the HTTP exchange a hub would
get (a POST under the session's or the stateless request's headers, a GET for a session's stream,
a DELETE at exit) and hands it to its upstream. With a selector that upstream is HTTP to a hub
(``stdio.Upstream``); here it is :class:`StdioCarrier`, which carries each exchange to the server
by the carrier contract (docs/DESIGN.md, "Carriers"):

1. **Requests** are ``HttpRequest(method, lower-cased headers, body, admitted=True)``. Admission
   is the pipe's: whoever holds the bridge's stdin spawned it (the MCP stdio model), so there is
   no Host, Origin or token to check. Bodies are bounded as on the front's HTTP endpoint (413).
2. **Answers**: ``answer_inline(req, remember=False)`` on the calling thread (a bridge request
   thread; the stdin thread for initialize and notifications, which it answers at once), else
   ``handle(req)`` on the carrier's pool of ``WORKERS`` threads, which live as long as the bridge:
   their keep-alive connections to the kernels' hubs (``allkernels.upstream``, one per thread) are
   reused from one read to the next, where a bridge request thread ends with its request. No head
   replay (``remember=False``).
3. **Replies**: a body as it is, then ``after_send``; a stream drained whenever its waker fires,
   until it is closed and drained or the reader stops it (a cancel, the bridge closing). No
   keepalive: nothing in a process times out idle. ``stream_closed`` once, however it ended.
4. **Stops**: the bridge ends its session first (DELETE), then the pool stops (a request after
   that is a 503) and ``KernelsFront.close`` closes the server (streams get their final events).

A reply is read through the surface of ``http.client`` the bridge uses (:class:`Reading`), and
``--channel`` reaches the same server through the front's ``Carrier`` protocol (``address``).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
from collections.abc import AsyncIterator
from concurrent.futures import CancelledError, ThreadPoolExecutor
from typing import Any

from ..allkernels.front import MAX_BODY_BYTES
from ..allkernels.upstream import HubAddress
from ..protocol.exchange import HttpReply, HttpRequest, carrier_error
from ..protocol.jsonrpc import INVALID_REQUEST, dumps
from ..protocol.server import McpServer
from ..protocol.wire_sse import sse_data
from ..runtime import HubRecord

ACCEPT = "application/json, text/event-stream"
SSE = "text/event-stream"
WORKERS = 4  # as many as the loopback HTTP carrier's pool


class Reading:
    """One reply, read as the bridge reads an ``http.client`` response (``status``, ``getheader``,
    ``read``; ``readline`` gives a stream's next events, any chunking) and closed as it closes the
    connection (``close``; ``sock.shutdown`` wakes a blocked reader, as a cancel does over TCP)."""

    def __init__(self, server: McpServer, reply: HttpReply):
        self.server = server
        self.status = reply.status
        self.headers = {k.lower(): v for k, v in reply.headers.items()}
        self.stream = reply.stream
        self.sock = self  # what the bridge shuts down to cancel
        self._body = reply.body or b""
        self._after_send = reply.after_send
        self._woken = threading.Event()
        self._stopped = False
        self._released = threading.Lock()
        if self.stream is not None:
            self.headers["content-type"] = SSE
            self.stream.set_waker(self._woken.set)

    def getheader(self, name: str, default: str | None = None) -> str | None:
        return self.headers.get(name.lower(), default)

    def readline(self) -> bytes:
        """The body once, or the stream's events as they come; b"" at the end."""
        stream = self.stream
        if stream is None:
            body, self._body = self._body, b""
            return body
        while not self._stopped:
            self._woken.clear()  # before looking: a push after this wakes the wait below
            closed = stream.closed
            events = stream.drain()
            if events:
                return b"".join(events)
            if closed:
                break
            self._woken.wait()
        self.close()
        return b""

    def read(self) -> bytes:
        """Everything: the body, or the stream's events until it is closed."""
        pieces = []
        while piece := self.readline():
            pieces.append(piece)
        return b"".join(pieces)

    def shutdown(self, _how: int = 2) -> None:
        """Stop reading (a blocked ``readline`` returns b"")."""
        self._stopped = True
        self._woken.set()

    def close(self) -> None:
        self.shutdown()
        if not self._released.acquire(blocking=False):
            return  # closed already
        if self.stream is not None:
            self.server.stream_closed(self.stream)
        elif self._after_send is not None:
            self._after_send()


class StdioCarrier:
    """The bridge's upstream when it serves every kernel: the front's server, in this process."""

    def __init__(self, server: McpServer, record: HubRecord):
        self.server = server
        self.record = record
        self._pool = ThreadPoolExecutor(WORKERS, thread_name_prefix="mcp-notebook-stdio")

    def exchange(self, method: str, headers: dict[str, str], body: bytes | None = None) -> Reading:
        """One exchange with the server (see the module docstring, 1 and 2)."""
        h = {k.lower(): v for k, v in headers.items()}
        h.setdefault("accept", ACCEPT)
        if body is not None:
            h.setdefault("content-type", "application/json")
            if len(body) > MAX_BODY_BYTES:
                limit = f"Payload too large: the limit is {MAX_BODY_BYTES} bytes"
                return Reading(self.server, carrier_error(413, limit, INVALID_REQUEST))
        req = HttpRequest(method, h, body or b"", admitted=True)
        reply = self.server.answer_inline(req, False)
        if reply is None:
            try:
                reply = self._pool.submit(self.server.handle, req).result()
            except (RuntimeError, CancelledError):  # the pool is shut down: the bridge is stopping
                reply = carrier_error(503, "the bridge is stopping")
        return Reading(self.server, reply)

    def close(self) -> None:
        """Stop the pool (after the bridge closed: its last answers are out)."""
        self._pool.shutdown(wait=False, cancel_futures=True)

    # -- the surface of bridge.stdio.Upstream ---------------------------------------------------
    def open(
        self, method: str, headers: dict[str, str], body: bytes | None = None, timeout: float | None = None
    ) -> tuple[Reading, Reading]:
        """The reply once its status is known: (connection, response), one object here."""
        reading = self.exchange(method, headers, body)
        return reading, reading

    def call(self, headers: dict[str, str], message: Any) -> tuple[int, dict[str, str], list[Any]]:
        """POST one message; (status, headers, the JSON-RPC messages of the reply)."""
        reading = self.exchange("POST", headers, dumps(message))
        try:
            raw = reading.read()
        finally:
            reading.close()
        docs = sse_data(raw) if reading.stream is not None else [raw] if raw.strip() else []
        replies = []
        for doc in docs:
            with contextlib.suppress(ValueError):
                replies.append(json.loads(doc))
        return reading.status, reading.headers, replies

    def address(self) -> HubAddress:
        """Where ``--channel`` watches: this server, through the front's ``Carrier`` protocol."""
        return HubAddress("stdio://bridge/mcp", None, carrier=_ChannelCarrier(self))


class _ChannelCarrier:
    """``allkernels.upstream.Carrier`` over a :class:`StdioCarrier` (the channel's listen)."""

    def __init__(self, carrier: StdioCarrier):
        self.carrier = carrier

    def call(self, headers: dict[str, str], body: bytes, timeout: float) -> tuple[int, str, bytes]:
        reading = self.carrier.exchange("POST", headers, body)
        try:
            return reading.status, reading.getheader("content-type") or "", reading.read()
        finally:
            reading.close()

    async def open(self, headers: dict[str, str], body: bytes, timeout: float) -> _AsyncReading:
        return _AsyncReading(await asyncio.to_thread(self.carrier.exchange, "POST", headers, body))


class _AsyncReading:
    """A :class:`Reading` for a loop: its blocking reads on a worker thread, ended by ``close``."""

    def __init__(self, reading: Reading):
        self.reading = reading
        self.status = reading.status

    async def chunks(self) -> AsyncIterator[bytes]:
        while piece := await asyncio.to_thread(self.reading.readline):
            yield piece

    def close(self) -> None:
        self.reading.close()
