"""The stdio carrier: ``mcp-notebook bridge`` with no selector drives the all-kernels front's
``McpServer`` in its own process, from stdin/stdout: no loopback port, no token, one process, and
no HTTP: messages are carried as messages.

The :class:`~.stdio.Bridge` decodes each stdin line once and hands the message to its upstream (a
``hubclient.address.Link``). With a selector that upstream is HTTP to a hub (``http_link.Upstream``,
HTTP only where there is HTTP); here it is :class:`StdioCarrier`, which hands it to the server's
message entry (``McpServer.carry``, beneath its HTTP face; docs/DESIGN.md, "Messages carried as
messages"):

1. **Messages** go in decoded, with their :class:`~mcp_notebook.protocol.exchange.Context` (the
   session the bridge opened and its revision; no headers to check). Admission is the pipe's:
   whoever holds the bridge's stdin spawned it (the MCP stdio model), so there is no Host, Origin or
   token to check. A message is bounded as a body on the front's HTTP endpoint
   (``max_message_bytes``, ``MAX_BODY_BYTES``: the bytes it took on stdin; over it, -32600 by its id).
2. **Answers** come back as messages (``Answer.messages``: a request's log notifications, then its
   reply), on the bridge's thread that carried the message: no thread hop, no pool (the bridge's own
   pool of request threads bounds how many run at once; the front's connections to the kernels'
   hubs are shared by every thread, ``hubclient/blocking.py``). The bridge encodes them once, to stdout.
3. **Streams** (a session's notifications, a subscriptions/listen) are read as messages by the
   bridge's thread that relays them (:class:`StreamFeed`, woken by the stream's waker): no SSE
   framing. ``stream_closed`` is called once for every stream, however it ended (a cancel, the end).
4. **Stops**: the bridge ends its session first, then :meth:`StdioCarrier.close` refuses what comes
   after (503's error), ends the streams still open and waits (bounded) for the calls in flight;
   ``KernelsFront.close`` then closes the server.

``--channel`` reaches the same server through the front's ``HubRoute`` protocol (``address``), an
HTTP-shaped route (headers and bytes, as the control channel's): it goes through ``McpServer.handle``.
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
from collections.abc import AsyncIterator, Iterator
from typing import Any

from ..allkernels.front import MAX_BODY_BYTES
from ..hubclient.address import HubAddress, Replied
from ..protocol.exchange import Answer, Context, HttpRequest
from ..protocol.jsonrpc import INVALID_REQUEST, RpcError, error, request_id_of
from ..protocol.server import McpServer
from ..protocol.streams import SSE_END, SSE_HEAD
from ..runtime import HubRecord

log = logging.getLogger(__name__)
STOP_SECONDS = 5.0  # how long close() waits for the calls in flight


class StreamFeed:
    """One server stream as the bridge reads it (``hubclient.address.Feed``): its messages as they
    are pushed, on the reading thread; ``cancel`` from any thread ends it and frees it at the server."""

    def __init__(self, carrier: StdioCarrier, answer: Answer):
        self.carrier = carrier
        self.answer = answer
        self.stream = answer.stream
        self.streaming = self.stream is not None
        self._wake = threading.Event()
        self._stopped = False  # cancelled: nothing more is given
        self._released = False
        if self.stream is not None:
            self.stream.set_waker(self._wake.set)

    def encoded(self) -> Iterator[list[bytes]]:
        """The stream's messages, each encoded, in the batches they were pushed, until it ends."""
        stream = self.stream
        assert stream is not None
        while not self._stopped:
            closed = stream.closed
            batch = stream.drain_messages()
            if batch and not self._stopped:
                yield batch
            if closed:
                break
            self._wake.wait()
            self._wake.clear()
        self.release()

    def messages(self) -> Iterator[Any]:
        if self.stream is None:
            yield from self.answer.messages()  # a whole answer (an error) instead of a stream
            return
        for batch in self.encoded():
            for data in batch:
                yield json.loads(data)

    def cancel(self) -> None:
        self._stopped = True
        self.release()
        self._wake.set()  # a reader waiting for messages returns

    def close(self) -> None:
        self.cancel()

    def release(self) -> None:
        """Tell the server the stream is over (once)."""
        with self.carrier.lock:
            if self._released:
                return
            self._released = True
            self.carrier.feeds.discard(self)
        if self.stream is not None:
            self.carrier.server.stream_closed(self.stream)


class StdioCarrier:
    """The bridge's link when it serves every kernel: the front's server, in this process, message
    by message (``hubclient.address.Link``)."""

    def __init__(self, server: McpServer, record: HubRecord, max_message_bytes: int = MAX_BODY_BYTES):
        self.server = server
        self.record = record
        self.max_message_bytes = max_message_bytes
        self.lock = threading.Condition()
        self.feeds: set[StreamFeed] = set()  # streams open, ended at close
        self._calls = 0  # messages being answered
        self._stopping = False

    def _begin(self) -> bool:
        with self.lock:
            if self._stopping:
                return False
            self._calls += 1
            return True

    def _done(self) -> None:
        with self.lock:
            self._calls -= 1
            self.lock.notify_all()

    def _carry(self, context: Context, message: Any, size: int = 0) -> Answer:
        if size > self.max_message_bytes:
            text = f"Invalid Request: a message may hold at most {self.max_message_bytes} bytes (payload too large)"
            return Answer(error(request_id_of(message), RpcError(INVALID_REQUEST, text)), 413)
        if not self._begin():
            return Answer(error(request_id_of(message), RpcError(-32000, "the bridge is stopping")), 503)
        try:
            return self.server.carry(context, message)
        finally:
            self._done()

    def _feed(self, answer: Answer) -> StreamFeed:
        feed = StreamFeed(self, answer)
        if feed.stream is not None:
            with self.lock:
                stopping = self._stopping
                self.feeds.add(feed)
            if stopping:
                feed.cancel()
        return feed

    # -- the surface of hubclient.address.Link ----------------------------------------------------
    def call(self, message: Any, session_id: str | None = None, version: str | None = None, size: int = 0) -> Replied:
        """One message, answered on this thread; the answer's messages (logs, then the reply)."""
        answer = self._carry(Context(session_id, version, streams=True), message, size)
        if answer.stream is not None:  # a stream asked for by a call (the bridge listens through listen())
            self._feed(answer).cancel()
            return Replied(answer.status, answer.session_id, [])
        return Replied(answer.status, answer.session_id, answer.messages())

    def listen(self, message: dict[str, Any]) -> StreamFeed:
        """A stateless subscriptions/listen: its stream, read as messages."""
        return self._feed(self._carry(Context(streams=True), message))

    def stream(self, session_id: str, version: str | None) -> StreamFeed:
        """The session's stream of notifications."""
        if not self._begin():
            return StreamFeed(self, Answer(error(None, RpcError(-32000, "the bridge is stopping")), 503))
        try:
            return self._feed(self.server.open_stream(Context(session_id, version)))
        finally:
            self._done()

    def end_session(self, session_id: str, version: str | None) -> None:
        self.server.end_session(Context(session_id, version))

    def address(self) -> HubAddress:
        """Where ``--channel`` watches: this server, through the front's ``HubRoute`` protocol."""
        return HubAddress("stdio://bridge/mcp", None, route=_ChannelRoute(self))

    def close(self) -> None:
        """Stop (after the bridge closed: its last answers are out): a message now is refused; the
        streams still open end (freed at the server); the calls in flight are waited for (bounded)."""
        with self.lock:
            if self._stopping:
                return
            self._stopping = True
            feeds = list(self.feeds)
        for feed in feeds:
            feed.cancel()
        with self.lock:
            if not self.lock.wait_for(lambda: self._calls <= 0, STOP_SECONDS):
                log.warning("the stdio carrier stopped with %d message(s) unanswered", self._calls)


class _ChannelRoute:
    """``hubclient.address.HubRoute`` over a :class:`StdioCarrier` (the channel's listen): an
    HTTP-shaped route, answered by the server's HTTP face in this process."""

    def __init__(self, carrier: StdioCarrier):
        self.carrier = carrier

    def _request(self, headers: dict[str, str], body: bytes) -> tuple[int, str, bytes, StreamFeed | None]:
        req = HttpRequest("POST", {k.lower(): v for k, v in headers.items()}, body, admitted=True)
        reply = self.carrier.server.handle(req)
        if reply.stream is None:
            return reply.status, reply.headers.get("Content-Type", ""), reply.body or b"", None
        return reply.status, "text/event-stream", b"", self.carrier._feed(Answer(stream=reply.stream))

    def call(self, headers: dict[str, str], body: bytes, timeout: float) -> tuple[int, str, bytes]:
        status, kind, raw, feed = self._request(headers, body)
        if feed is not None:  # a request's log messages before its result: a stream that is over
            raw = b"".join(SSE_HEAD + m + SSE_END for batch in feed.encoded() for m in batch)
        return status, kind, raw

    async def open(self, headers: dict[str, str], body: bytes, timeout: float) -> _AsyncReading:
        status, _, raw, feed = await asyncio.to_thread(self._request, headers, body)
        return _AsyncReading(status, raw, feed)


class _AsyncReading:
    """A route's reply for a loop: a stream's messages as SSE events, read on a worker thread."""

    def __init__(self, status: int, body: bytes, feed: StreamFeed | None):
        self.status = status
        self.body = body
        self.feed = feed
        self._batches = feed.encoded() if feed is not None else None

    async def chunks(self) -> AsyncIterator[bytes]:
        if self._batches is None:
            if self.body:
                yield self.body
            return
        while (batch := await asyncio.to_thread(next, self._batches, None)) is not None:
            yield b"".join(SSE_HEAD + m + SSE_END for m in batch)

    def close(self) -> None:
        if self.feed is not None:
            self.feed.cancel()
