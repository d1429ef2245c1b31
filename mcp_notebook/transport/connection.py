"""One client connection on the hub's loop: drives the HTTP/1.1 reader, admits, hands off, writes.

Requests on a connection are read and answered one at a time, in order. A request is admitted
(path, Host, Origin, token) as soon as its head is complete: a refused one is answered at once
and its body is never parsed (what is still on the way is dropped for a moment, then the
connection closes). A request the protocol answers inline (a flat read, a cheap method) is
answered on the loop; one that may run user code goes to the owner's worker pool, so the loop
never stalls; a reply that is an event stream is pumped by a task. The exchange driver
(driver.py) runs that sequence; the connection is its ``Port``. Deadlines: a head within
``head_timeout`` of its first byte (of the connection's start or last reply, for a connection no
request was admitted on yet, which also gets no long idle time), a body within ``body_timeout``
of its head; the owner's periodic sweep checks them.

The connection's HTTP/1.1 state (each side's, the bytes read) is the sans-IO machine of
http11_state.py: the connection asks it (may I read, is the client gone, idle?) and makes its
transitions; what stays here is asyncio's plumbing (the transport, flow control), the deadline
(loop time, which the machine does not know), whether a client passed admission, and the memos
of the fast path (heads.ConnectionMemos).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
from collections.abc import Awaitable
from typing import TYPE_CHECKING, Protocol, cast

from ..protocol import wire_http11 as http11
from ..protocol.exchange import ENDPOINT_PATH, carrier_error
from ..protocol.security import cors_headers, origin_allowed
from ..protocol.server import HttpReply, HttpRequest, McpServer
from ..protocol.streams import Stream
from ..protocol.wire_http11 import BadRequest, RequestHead
from .driver import ExchangeDriver, Port
from .http11_state import CLOSED, DISCARD, IDLE, SEND_BODY, ConnectionState
from .latency import AdmittedHead, AdmittedHeads, BusyPoll, ConnectionMemos

log = logging.getLogger(__name__)
IDLE_SECONDS = 300.0  # keep-alive time of a connection some request was admitted on
LINGER_SECONDS = 2.0  # after refusing a request whose body is still coming: drop it this long, then close
PATH = ENDPOINT_PATH
FAMILY_TRIES = 4  # times a connection asks the server for a head family (protocol/families.py)


if TYPE_CHECKING:  # a type only: not made at import (DESIGN, "Loading, eighth cut")

    class Owner(Protocol):
        """What a connection needs of the transport that accepted it (transport/server.py)."""

        mcp: McpServer
        heads: AdmittedHeads
        max_body_bytes: int
        head_timeout: float
        body_timeout: float
        stopping: bool
        driver: ExchangeDriver
        busy_poll: BusyPoll
        streams: set[Stream]
        connections: dict[Connection, None]

        def admit_connection(self, conn: Connection) -> bool: ...

        def client_count(self, delta: int) -> None: ...


class Connection(asyncio.Protocol, Port):
    """One client connection (see the module docstring); the exchange driver's port for the
    request being answered."""

    def __init__(self, owner: Owner):
        self.owner = owner
        self.loop = asyncio.get_running_loop()
        self.io: asyncio.Transport | None = None
        self.http = ConnectionState(owner.max_body_bytes)  # both sides' HTTP/1.1 state, the bytes read
        self.buf = self.http.reader.buf  # the same bytearray, for the checks on the hot path
        self.memos = ConnectionMemos()
        self.trusted = False  # a request on this connection passed admission (a client is connected)
        self.paused_reading = False  # asyncio flow control: a client racing ahead is not read
        self._writable: asyncio.Future[None] | None = None
        self._head: RequestHead | None = None  # the head of the request being answered
        self._deadline = 0.0  # loop time the armed deadline expires at (checked by the owner's sweep)
        self._timer_kind = ""  # which deadline is armed; "" for none
        self._reading = False  # inside _process: a reply written meanwhile must not recurse into it

    @property
    def gone(self) -> bool:  # type: ignore[override]
        """For the driver: the client left, or half-closed while a long-lived stream is written
        (it will read no more of it: the stream ends with what it has)."""
        return self.http.client_gone

    @property
    def idle(self) -> bool:
        """Between requests: nothing read of the next one and nothing being answered."""
        return self.http.idle and not self.buf

    # -- asyncio callbacks ---------------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.io = cast(asyncio.Transport, transport)  # held_stream.py's, or asyncio's or uvloop's (not a subclass)
        if not self.owner.admit_connection(self):
            self.http.close()
            transport.abort()
            return
        self._wait_for_request()
        sock = transport.get_extra_info("socket")
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def data_received(self, data: bytes) -> None:
        http = self.http
        if http.idle and not self.buf:
            # The usual case: one whole request in one read, nothing else pending, and a head
            # byte-for-byte equal to one admitted before under the same settings (a client repeats
            # its head); parsing and admission are pure functions of those bytes and settings.
            settings = self.owner.mcp.core.settings  # (McpServer.settings, without its property call)
            memos = self.memos
            head = memos.last_head
            if head is None or head.settings is not settings or not data.startswith(head.block):
                # The family first when the memory of heads does not hold this client's (a client
                # rotating over more URIs than it keeps): no hash of the head, no per-head objects.
                first = memos.family_first
                if first and self._family_read(data, settings):
                    if self.paused_reading or http.eof:
                        self._process()
                    return
                end = data.find(http11.HEAD_END)  # (http11.head_end, inlined)
                head = self.owner.heads.get(data[:end], settings) if end > 0 else None
                if head is None and not first and memos.family is not None and self._family_read(data, settings):
                    if self.paused_reading or http.eof:
                        self._process()
                    return
            if head is not None and len(data) == len(head.block) + head.proto.length:
                memos.last_head = head
                self._timer_kind = ""
                if not self.trusted:
                    self._trust()
                body = data[len(head.block) :]
                if not self._replay(head, body) and (memos.family is None or not self._family_read(data, settings)):
                    http.whole_request(head.proto.keep_alive)
                    self._dispatch(head.proto, body, head)
                if self.paused_reading or http.eof:
                    self._process()
                return
        if http.client == DISCARD:
            if http.dropped(len(data)):
                self.close()  # the refused body is all in
            return
        if http.closed:
            return
        if self._timer_kind == "idle" and self.trusted and not self.buf:
            self._arm("head", self.owner.head_timeout)  # the first byte of the next request
        self.buf += data
        if http.ours == IDLE:
            self._process()
        elif len(self.buf) > http11.MAX_HEAD_BYTES + self.owner.max_body_bytes and not self.paused_reading:
            self.paused_reading = True  # a client racing ahead: stop reading until we catch up
            assert self.io is not None
            self.io.pause_reading()

    def _replay(self, head: AdmittedHead, body: bytes) -> bool:
        """Answer a request the protocol recognises as the last one sent with this head but for its
        id; False: it does not (or the server stops, or the connection is not plain keep-alive)."""
        memo = head.replay
        if memo is None or not head.keep_alive or self.owner.stopping:
            return False
        reply = self.owner.mcp.replay(memo, body)
        if reply is None:
            return False
        self._write_replayed(head, reply)
        return True

    def _family_read(self, data: bytes, settings: object) -> bool:
        """Answer ``data`` (one whole request) when the server finds it a member of this connection's
        head family (protocol/families.py); False: it is not one (or not cached), take the usual path."""
        memos = self.memos
        like = memos.family_head
        assert like is not None
        if like.settings is not settings:
            memos.family = memos.family_head = None
            memos.family_first = False
            return False
        mcp = self.owner.mcp
        family = memos.family
        found = None if self.owner.stopping else mcp.family_reply(family, data)
        if found is None:
            return False
        reply, head_length = found
        self._timer_kind = ""
        self._write_replayed(like, reply)
        heads = self.owner.heads
        if not heads.full:  # this very head again (a few URIs in turn): a plain replay
            heads.adopt(data[:head_length], like, lambda: mcp.member_memo(family))
        # The memory of heads full: it does not hold this client's heads; the family first from now
        # on (no hash of each head, no per-head objects), until the memory has room again.
        memos.family_first = heads.full
        return True

    def _write_replayed(self, head: AdmittedHead, reply: HttpReply) -> None:
        """Write a replayed reply (keep-alive), then its bookkeeping; go on with the next request.
        Both sides stay IDLE: the request was read whole and answered in this one step."""
        if reply.headers is not head.reply_headers:  # the status line and header lines, encoded once
            head.reply_headers = reply.headers
            origin = head.proto.headers.get("origin")
            head.reply_block = http11.header_lines(
                reply.headers if origin is None else {**reply.headers, **cors_headers(origin)}
            )
        payload = reply.body or b""
        io = self.io
        if io is not None and self.http.client != CLOSED:  # (_write, inlined: this runs for every replayed read)
            io.write(  # http11.whole_reply_bytes, inlined
                http11.REPLY_200 % (http11.Date.now(), head.reply_block, len(payload), payload)
                if reply.status == 200
                else http11.REPLY_ANY
                % (http11.status_line(reply.status), http11.Date.now(), head.reply_block, len(payload), payload)
            )
        after = reply.after_send
        if after is not None:
            after()
        self._next_cycle()

    def eof_received(self) -> bool:
        """The client will send no more: answer the complete requests already read, then close."""
        if self.http.peer_eof():  # nothing answered, a refused body, or a long-lived stream's client gone
            self.close()
        return True  # keep the transport open for the replies still to be written

    def _trust(self) -> None:
        """The first request admitted on this connection: a client is connected."""
        self.trusted = True
        self.owner.client_count(1)

    def connection_lost(self, exc: Exception | None) -> None:
        self.http.lost()
        if self.trusted:
            self.owner.client_count(-1)
        self.owner.connections.pop(self, None)
        self._cancel_timer()
        if self.exchange is not None:
            self.exchange.cancel()  # a stream being written ends now
        if self._writable is not None and not self._writable.done():
            self._writable.set_result(None)

    def pause_writing(self) -> None:
        self._writable = self.loop.create_future()

    def resume_writing(self) -> None:
        if self._writable is not None and not self._writable.done():
            self._writable.set_result(None)
        self._writable = None

    # -- reading ---------------------------------------------------------------------------------
    def _process(self) -> None:
        """Answer every complete request in the buffer, until one is answered asynchronously."""
        if self._reading:
            return
        self._reading = True
        http = self.http
        try:
            while http.may_read:
                if http.between_requests or not self._next_request():
                    break  # (an empty buffer between requests holds nothing to read)
        except BadRequest as exc:
            self._fail(exc)
        except Exception:  # a bug must still answer the client, not drop its connection
            log.exception("reading a request failed")
            self._fail(BadRequest("internal error", 500))
        finally:
            self._reading = False
        if self.paused_reading and not http.busy and self.io is not None and http.client != CLOSED:
            self.paused_reading = False
            self.io.resume_reading()
        if http.eof and http.ours == IDLE:
            self.close()

    def _next_request(self) -> bool:
        """Read one request as far as the buffer goes; True: one was dispatched or refused and the
        connection goes on with the next."""
        http = self.http
        if http.client != SEND_BODY:
            block = http.next_head()
            if block is None:
                return False
            head = self._admit(block)
            if head is None:
                return True  # refused and answered: the loop goes on if the connection does
            if not self.trusted:
                self._trust()
            http.head_admitted(head)
            self._cancel_timer()
        head = http.reader.head
        assert head is not None
        body = http.next_body()
        if body is None:
            if self._timer_kind != "body":
                self._arm("body", self.owner.body_timeout)
            if http.reader.send_continue():
                self._write(http11.CONTINUE)
            return False
        memos = self.memos
        admitted, memos.admitted = memos.admitted, None
        self._dispatch(head, body, admitted)
        return True

    def _admit(self, block: bytes) -> RequestHead | None:
        """The head of these bytes, admitted; None: refused (and answered)."""
        owner = self.owner
        settings = owner.mcp.settings
        known = owner.heads.get(block, settings)
        if known is not None:  # parsed and admitted before under these settings
            self.memos.admitted = known
            return known.proto
        head = http11.parse_head(block)
        if head.path != PATH:
            refusal: HttpReply | None = HttpReply(404, b"Not Found", {"Content-Type": "text/plain"})
        else:
            refusal = owner.mcp.admit(head.headers, head.method)
        if refusal is not None:
            self._refuse(head, refusal)
            return None
        if head.length <= owner.max_body_bytes:
            self.memos.admitted = owner.heads.remember(block, head, settings)
        return head

    def _refuse(self, head: RequestHead, reply: HttpReply) -> None:
        """Answer a refused request without parsing its body; a body still on its way is dropped,
        then the connection closes."""
        self.http.head_refused(head)
        self._reply(head, reply)

    def _dispatch(self, head: RequestHead, body: bytes, admitted: AdmittedHead | None = None) -> None:
        """Hand a whole request (the state machine has it being answered) to the exchange driver."""
        self._cancel_timer()
        req = HttpRequest(head.method, head.headers, body, admitted=True)  # _admit ran on the head
        # A replay is learnt on a head's second request, not its first: a client whose requests
        # all differ (another URI in each) would pay for learning what is never replayed.
        # (On the first sight too while this connection may still learn a head family.)
        memos = self.memos
        family = memos.family is None and memos.family_tries < FAMILY_TRIES
        learn = admitted is not None and admitted.replay is None and (admitted.seen or family)
        if admitted is not None:
            admitted.seen = True
        self._head = head
        self.owner.driver.start(self, req, learn)
        if admitted is not None and req.replay is not None:
            admitted.replay = req.replay  # the next such request, with another id, is replayed
            if family:
                self._learn_family(admitted)

    def _learn_family(self, admitted: AdmittedHead) -> None:
        """Ask the server for a head family of a keep-alive head whose request it just learnt as a
        replay (bounded tries: a client whose requests have none stops paying for it)."""
        memos = self.memos
        memos.family_tries += 1
        if admitted.keep_alive:
            memos.family = self.owner.mcp.learn_family(admitted.block, admitted.replay)
            memos.family_head = admitted if memos.family is not None else None

    # -- writing ---------------------------------------------------------------------------------
    # The Port: the driver writes the reply to the request being answered (self._head) through these.
    def send_reply(self, reply: HttpReply) -> None:
        """Write a whole reply; go on with the next request, or close."""
        head = self._head
        assert head is not None
        headers = reply.headers
        if "origin" in head.headers:
            headers = self._cors(head, headers)
        keep = self.http.keep and not self.owner.stopping
        self._write(http11.reply_bytes(reply.status, headers, reply.body or b"", keep=keep, head=head))
        self._done(keep)

    def open_stream(self, status: int, headers: dict[str, str], events: bytes, end: bool) -> Awaitable[None] | None:
        head = self._head
        assert head is not None and self.exchange is not None and self.exchange.stream is not None
        stream = self.exchange.stream
        http = self.http
        # (a long-lived stream, GET or subscriptions/listen, ends when its client half-closes)
        http.stream_opened(stream.kind != "response", head.is_http11)
        if not end:
            self.owner.streams.add(stream)  # the transport's stop lets it write its final events
        headers = self._cors(head, headers)
        self._write(http11.stream_head_bytes(status, headers, keep=http.keep, head=head))
        return self.send_events(events, end)

    def send_events(self, events: bytes, end: bool) -> Awaitable[None] | None:
        head = self._head
        assert head is not None
        chunked = head.is_http11
        data = http11.chunk_bytes(events, chunked) if events else b""
        if end:
            self._write(data + http11.LAST_CHUNK if chunked else data)
            if self.exchange is not None and self.exchange.stream is not None:
                self.owner.streams.discard(self.exchange.stream)
            self._done(self.http.keep and not self.owner.stopping)
            return None
        if data:
            self._write(data)
        return self._writable

    def _cors(self, head: RequestHead, headers: dict[str, str]) -> dict[str, str]:
        """A page's request: CORS fields only for an Origin we allow."""
        origin = head.headers.get("origin")
        if origin is not None and "Access-Control-Allow-Origin" not in headers:
            s = self.owner.mcp.settings
            if origin_allowed(head.headers, s.allowed_origins, s.allowed_hosts):
                return {**headers, **cors_headers(origin)}
        return headers

    def _reply(self, head: RequestHead, reply: HttpReply) -> None:
        """A reply of the connection's own (a refusal, a bad request) to ``head``'s request."""
        self._head = head
        self.send_reply(reply)

    def _done(self, keep: bool) -> None:
        """The reply is written: go on with the next request, or close."""
        http = self.http
        if http.reply_done(keep):
            self._next_cycle()
        elif http.client == DISCARD:
            self._arm("linger", LINGER_SECONDS)
            if self.io is not None and self.io.can_write_eof():
                self.io.write_eof()  # the reply is complete; the client may still be sending
        elif not http.closed:
            self.close()

    def _next_cycle(self) -> None:
        """Both sides IDLE after a reply: wait for the next request, or read it if it is here.
        (Every read pays this: the usual case, a trusted connection with nothing buffered, arms the
        idle deadline inline, and a busy poll turned off for a running cell is not called.)"""
        if self.trusted and not self.buf:
            self._timer_kind = "idle"  # (_wait_for_request's usual case, inlined)
            self._deadline = self.loop.time() + IDLE_SECONDS
        else:
            self._wait_for_request()
        poll = self.owner.busy_poll
        if poll.enabled:
            poll.touch(self)
        if self.buf or self.paused_reading or self.http.eof:
            self._process()

    def _write(self, data: bytes) -> None:
        if self.io is not None and self.http.client != CLOSED:  # (not once the connection is lost)
            self.io.write(data)

    def _fail(self, exc: BadRequest) -> None:
        """Answer a request we do not serve (or that did not arrive in time), then close."""
        if self.http.ours != IDLE:  # a bug after the request was handed off: no second reply
            log.error("a request failed while it was being answered (%s): closing", exc)
            self.evict()
            return
        self.http.failed()
        status = exc.status
        if status == 413:
            limit = self.owner.max_body_bytes
            reply = carrier_error(413, f"Payload too large: the limit is {limit} bytes", -32600)
        else:
            reply = HttpReply(status, f"{http11.reason(status)}: {exc}".encode(), {"Content-Type": "text/plain"})
        self._reply(http11.RequestHead.unread(), reply)

    # -- deadlines ------------------------------------------------------------------------------
    def _wait_for_request(self) -> None:
        """Between requests: a long idle time once a request was admitted here, else a head deadline."""
        if self.buf:
            self._arm("head", self.owner.head_timeout)
        elif self.trusted:
            self._arm("idle", IDLE_SECONDS)
        else:
            self._arm("first", self.owner.head_timeout)

    def _arm(self, kind: str, seconds: float) -> None:
        """Arm one deadline (replacing any other); two stores, no timer per request."""
        self._timer_kind = kind
        self._deadline = self.loop.time() + seconds

    def _cancel_timer(self) -> None:
        self._timer_kind = ""

    def check_deadline(self, now: float) -> None:
        """Called by the owner's periodic sweep: act on an armed deadline that has passed."""
        kind = self._timer_kind
        if kind and now >= self._deadline:
            self._expired(kind)

    def _expired(self, kind: str) -> None:
        self._timer_kind = ""
        http = self.http
        if http.busy or http.closed:
            return
        if kind in ("idle", "linger") or http.between_requests:
            self.close()
        else:  # a head or body that did not arrive in time (slowloris)
            self._fail(BadRequest(f"the request {'body' if kind == 'body' else 'head'} did not arrive in time", 408))

    def evict(self) -> None:
        """Make room for a new connection: drop this one now."""
        self.http.close()
        self._cancel_timer()
        self.owner.connections.pop(self, None)
        if self.io is not None:
            self.io.abort()

    def close(self) -> None:
        """Close once what is buffered is written."""
        self.http.close()
        self._cancel_timer()
        if self.io is not None and not self.io.is_closing():
            self.io.close()
