"""The stdio carrier: ``mcp-notebook bridge`` with no selector drives the all-kernels front's
``McpServer`` in its own process, from stdin/stdout: no loopback port, no token, one process.

The :class:`~.stdio.Bridge` turns each stdio JSON-RPC message into the HTTP exchange a hub would
get (a POST under the session's or the stateless request's headers, a GET for a session's stream,
a DELETE at exit) and hands it to its upstream. With a selector that upstream is HTTP to a hub
(``http_link.Upstream``); here it is :class:`StdioCarrier`, a carrier of the exchange driver
(``transport/driver.py``; docs/DESIGN.md, "Carriers"), like the loopback HTTP connection and the
control channel:

1. **Requests** are ``HttpRequest(method, lower-cased headers, body, admitted=True)``. Admission
   is the pipe's: whoever holds the bridge's stdin spawned it (the MCP stdio model), so there is
   no Host, Origin or token to check. Bodies are bounded as on the front's HTTP endpoint (413).
2. **The driver** answers each exchange on the bridge's thread that carries it
   (``ExchangeDriver.exchange_blocking`` with no pool: ``handle`` runs right there, no thread
   hop; the bridge's own pool of request threads bounds how many run at once). The front's
   connections to the kernels' hubs are kept alive and shared by every thread
   (``hubclient/blocking.py``), so a read reuses one whatever thread carries it. No head replay.
   A stream is pumped on the carrier's own event loop (a thread).
3. **Replies** reach the bridge's thread through a :class:`PipePort`: the driver's writes are
   queued, and :class:`Reading` reads them as the bridge reads a hub client response (``hubclient.blocking.HubResponse``). No
   keepalive comments: nothing in a process times out idle. The driver's guarantees hold as for
   every carrier: one final call, ``stream_closed`` for every stream however it ended.
4. **Stops**: the bridge ends its session first (DELETE), then :meth:`StdioCarrier.close` refuses
   what comes after (a 503), ends the streams still open, and waits (bounded) for every
   exchange's final call before it stops the loop; ``KernelsFront.close`` then closes the server.

``--channel`` reaches the same server through the front's ``HubRoute`` protocol (``address``).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import queue
import threading
from collections.abc import AsyncIterator, Awaitable
from typing import Any

from ..allkernels.front import MAX_BODY_BYTES
from ..hubclient.address import HubAddress
from ..protocol.exchange import HttpReply, HttpRequest, carrier_error
from ..protocol.jsonrpc import INVALID_REQUEST, dumps
from ..protocol.server import McpServer
from ..protocol.wire_sse import sse_data
from ..runtime import HubRecord
from ..transport.driver import ExchangeDriver, Port
from ..transport.loop import new_loop

log = logging.getLogger(__name__)
ACCEPT = "application/json, text/event-stream"
SSE = "text/event-stream"
STOP_SECONDS = 5.0  # how long close() waits for the exchanges in flight to get their final call
_END = object()  # queued after a port's final write


class _StreamHead(HttpReply):
    """The head of an event stream, as queued by :meth:`PipePort.open_stream`."""


class PipePort(Port):
    """The driver's port for one exchange: its writes, queued for the bridge's thread (see
    :class:`Reading`). Called on the carrier's loop; read on the bridge's thread."""

    keepalive = None  # nothing in a process times out idle

    def __init__(self, carrier: StdioCarrier):
        self.carrier = carrier
        self.queue: queue.SimpleQueue[Any] = queue.SimpleQueue()

    def send_reply(self, reply: HttpReply) -> None:
        self.queue.put(reply)
        self.queue.put(_END)
        self.carrier.finished()

    def open_stream(self, status: int, headers: dict[str, str], events: bytes, end: bool) -> Awaitable[None] | None:
        self.queue.put(_StreamHead(status, b"", {**headers, "Content-Type": SSE}))
        return self.send_events(events, end)

    def send_events(self, events: bytes, end: bool) -> Awaitable[None] | None:
        if events:
            self.queue.put(events)
        if end:
            self.queue.put(_END)
            self.carrier.finished()
        return None


class Reading:
    """One reply, read as the bridge reads a hub client response (``hubclient.blocking.HubResponse``) (``status``, ``getheader``,
    ``read``; ``readline`` gives a stream's next events, any chunking) and closed as it closes the
    connection (``close``; ``sock.shutdown`` ends a stream and wakes a blocked reader, as a cancel
    does over TCP)."""

    def __init__(self, carrier: StdioCarrier, port: PipePort):
        self.carrier = carrier
        self.port = port
        self.sock = self  # what the bridge shuts down to cancel
        head = port.queue.get()  # the status is known once the driver wrote the reply or the stream's head
        self.status = head.status
        self.headers = {k.lower(): v for k, v in head.headers.items()}
        self.stream = isinstance(head, _StreamHead)
        self._body = head.body or b""
        self._over = False  # the port's final write was read
        self._stopped = False

    def getheader(self, name: str, default: str | None = None) -> str | None:
        return self.headers.get(name.lower(), default)

    def readline(self) -> bytes:
        """The body once, or the stream's events as they come; b"" at the end."""
        if not self.stream:
            body, self._body = self._body, b""
            return body
        while not self._over and not self._stopped:
            piece = self.port.queue.get()
            if piece is _END:
                self._over = True
            elif piece:
                return piece
        return b""

    def read(self) -> bytes:
        """Everything: the body, or the stream's events until it ends."""
        pieces = []
        while piece := self.readline():
            pieces.append(piece)
        return b"".join(pieces)

    def shutdown(self, _how: int = 2) -> None:
        """Stop reading: a stream still open ends (the driver closes it at the server), and a
        blocked ``readline`` returns b""."""
        if self._stopped:
            return
        self._stopped = True
        if self.stream and not self._over:
            self.carrier.cancel(self.port)
            self.port.queue.put(b"")  # wakes a reader blocked on the queue

    def close(self) -> None:
        self.shutdown()


class StdioCarrier:
    """The bridge's upstream when it serves every kernel: the front's server, in this process."""

    def __init__(self, server: McpServer, record: HubRecord):
        self.server = server
        self.record = record
        self._loop = new_loop()  # the streams' (uvloop where installed)
        self._driver = ExchangeDriver(server, None, inline=False, loop=self._loop)
        self._open = 0  # exchanges started and not yet at their final call
        self._lock = threading.Condition()
        self._stopping = False
        self._thread = threading.Thread(target=self._loop.run_forever, name="mcp-notebook-stdio-loop", daemon=True)
        self._thread.start()

    def exchange(self, method: str, headers: dict[str, str], body: bytes | None = None) -> Reading:
        """One exchange with the server (see the module docstring, 1 to 3)."""
        h = {k.lower(): v for k, v in headers.items()}
        h.setdefault("accept", ACCEPT)
        port = PipePort(self)
        if body is not None:
            h.setdefault("content-type", "application/json")
            if len(body) > MAX_BODY_BYTES:
                limit = f"Payload too large: the limit is {MAX_BODY_BYTES} bytes"
                return self._refused(port, carrier_error(413, limit, INVALID_REQUEST))
        req = HttpRequest(method, h, body or b"", admitted=True)
        with self._lock:
            if self._stopping:
                return self._refused(port, carrier_error(503, "Service unavailable: the bridge is stopping"))
            self._open += 1
        self._driver.exchange_blocking(port, req)
        return Reading(self, port)

    def _refused(self, port: PipePort, reply: HttpReply) -> Reading:
        port.queue.put(reply)
        port.queue.put(_END)
        return Reading(self, port)

    def finished(self) -> None:
        """A port's final call was made (on the loop)."""
        with self._lock:
            self._open -= 1
            self._lock.notify_all()

    def cancel(self, port: PipePort) -> None:
        """End ``port``'s stream (from the bridge's thread): the driver closes it at the server."""

        def end() -> None:
            port.gone = True
            if port.exchange is not None:
                port.exchange.cancel()

        with contextlib.suppress(RuntimeError):  # the loop is closed: the stream ended with it
            self._loop.call_soon_threadsafe(end)

    def close(self) -> None:
        """Stop (after the bridge closed: its last answers are out): a request now is a 503; the
        streams still open end; every exchange in flight gets its final call (bounded); then the
        loop stops."""
        with self._lock:
            if self._stopping:
                return
            self._stopping = True
        with contextlib.suppress(RuntimeError):
            self._loop.call_soon_threadsafe(self._end_streams)
        with self._lock:
            done = self._lock.wait_for(lambda: self._open <= 0, STOP_SECONDS)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(STOP_SECONDS)
        if done and not self._thread.is_alive():
            self._loop.close()
        else:  # an answer still on its way would find a closed loop: leave it stopped
            log.warning("the stdio carrier stopped with %d exchange(s) unanswered", self._open)

    def _end_streams(self) -> None:
        for task in list(self._driver.tasks):
            task.cancel()  # each pump ends its stream (stream_closed, then the final call)

    # -- the surface of bridge.http_link.Upstream ---------------------------------------------------
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
        docs = sse_data(raw) if reading.stream else [raw] if raw.strip() else []
        replies = []
        for doc in docs:
            with contextlib.suppress(ValueError):
                replies.append(json.loads(doc))
        return reading.status, reading.headers, replies

    def address(self) -> HubAddress:
        """Where ``--channel`` watches: this server, through the front's ``HubRoute`` protocol."""
        return HubAddress("stdio://bridge/mcp", None, route=_ChannelRoute(self))


class _ChannelRoute:
    """``hubclient.address.HubRoute`` over a :class:`StdioCarrier` (the channel's listen)."""

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
