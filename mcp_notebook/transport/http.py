"""Streamable HTTP on a minimal HTTP/1.1 server, served from a daemon thread with its own asyncio loop.

The kernel's main thread is busy while a cell runs, so requests must be answered elsewhere.
The socket is bound by the caller's thread (errors surface in the cell that loaded us); the
thread only serves. One endpoint needs little of HTTP: requests with a Content-Length or
chunked body, keep-alive (requests on a connection are answered in order), ``Expect:
100-continue``, size limits, and chunked SSE replies. Anything else gets a plain 400 and the
connection is closed. Requests that may run user code (a ``__repr__``, a custom resource) go
to a small worker pool so they never stall the loop; the rest, and SSE streams, are handled on
the loop itself.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import re
import socket
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from email.utils import formatdate
from http import HTTPStatus
from typing import cast

from ..logs import loop_exception_handler
from ..protocol.server import HttpReply, HttpRequest, McpServer
from ..protocol.streams import Stream
from .busy_poll import BusyPoll, PollingSelector

log = logging.getLogger(__name__)
KEEPALIVE_SECONDS = 15.0
IDLE_SECONDS = 300.0  # keep-alive time of a connection some request was admitted on
HEAD_SECONDS = 10.0  # a request head must be complete this long after its first byte
BODY_SECONDS = 60.0  # a body must be complete this long after its head
LINGER_SECONDS = 2.0  # after refusing a request whose body is still coming: drop it this long, then close
MAX_CONNECTIONS = 256
BUSY_POLL_SECONDS = 50e-6  # keep polling this long after a reply (see busy_poll.py)
MAX_HEAD_BYTES = 65536
PATH = "/mcp"
_VERSIONS = ("HTTP/1.1", "HTTP/1.0")
# Fields that must not appear twice with different values (RFC 9112 3.2, 6.3).
_HEXDIGITS = frozenset(b"0123456789abcdefABCDEF")
_SINGLE = frozenset({"host", "content-length"})
_TOKEN_CHARS = frozenset("!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")


def _reason(status: int) -> str:
    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return "Unknown"


class _Date:
    """The Date header line, formatted once per second."""

    second = -1
    line = b""

    @classmethod
    def now(cls) -> bytes:
        second = int(time.time())
        if second != cls.second:
            cls.line = b"Date: " + formatdate(second, usegmt=True).encode() + b"\r\n"
            cls.second = second
        return cls.line


_STATUS_LINES: dict[int, bytes] = {}
_HEADER_BLOCKS: dict[tuple[tuple[str, str], ...], bytes] = {}


def _status_line(status: int) -> bytes:
    line = _STATUS_LINES.get(status)
    if line is None:
        line = _STATUS_LINES[status] = b"HTTP/1.1 %d %s\r\n" % (status, _reason(status).encode())
    return line


def _header_lines(headers: dict[str, str]) -> bytes:
    """The reply's own header lines (plus Cache-Control), encoded once per distinct set."""
    key = tuple(headers.items())
    block = _HEADER_BLOCKS.get(key)
    if block is None:
        lines = [b"Cache-Control: no-store\r\n"]
        for name, value in key:
            if "\r" in value or "\n" in value:
                continue
            lines.append(f"{name}: {value}\r\n".encode("latin-1", "replace"))
        block = b"".join(lines)
        if len(_HEADER_BLOCKS) >= 256:
            _HEADER_BLOCKS.clear()
        _HEADER_BLOCKS[key] = block
    return block


class BadRequest(Exception):
    """The bytes are not an HTTP/1.1 request we serve; answered with ``status`` and a close."""

    def __init__(self, message: str, status: int = 400):
        super().__init__(message)
        self.status = status


class _Head:
    __slots__ = ("chunked", "headers", "keep_alive", "length", "method", "path", "version")

    def __init__(self, method: str, path: str, version: str, headers: dict[str, str]):
        self.method = method
        self.path = path
        self.version = version
        self.headers = headers
        conn = headers.get("connection", "").lower()
        if version == "HTTP/1.1":
            self.keep_alive = "close" not in conn
        else:
            self.keep_alive = "keep-alive" in conn
        te = headers.get("transfer-encoding")
        self.chunked = te is not None
        if te is not None and te.strip().lower() != "chunked":
            raise BadRequest(f"unsupported Transfer-Encoding {te!r}")  # 400: no 5xx for client input
        if te is not None and "content-length" in headers:
            raise BadRequest("both Content-Length and Transfer-Encoding")  # RFC 9112 6.3: a smuggling sign
        raw = headers.get("content-length")
        if raw is None or self.chunked:
            self.length = 0
        elif raw.isdigit() and raw.isascii():
            self.length = int(raw)
        else:
            raise BadRequest("invalid Content-Length")


_HEADS_KEPT = 256  # admitted heads remembered per transport (cleared when full)
_HEAD_KEPT_BYTES = 4096  # longer heads are not remembered


def parse_head(block: bytes) -> _Head:
    """Request line and header fields (without the blank line); raises BadRequest."""
    try:
        text = block.decode("latin-1")
    except UnicodeDecodeError:  # pragma: no cover - latin-1 decodes everything
        raise BadRequest("undecodable request head") from None
    lines = text.split("\r\n")
    parts = lines[0].split(" ")
    if len(parts) != 3 or parts[2] not in _VERSIONS or not parts[0] or not set(parts[0]) <= _TOKEN_CHARS:
        raise BadRequest("malformed request line")
    headers: dict[str, str] = {}
    for line in lines[1:]:
        name, sep, value = line.partition(":")
        if not sep or not name or name != name.strip() or not set(name) <= _TOKEN_CHARS:
            raise BadRequest("malformed header field")
        key, value = name.lower(), value.strip(" \t")
        if key in _SINGLE and key in headers and headers[key] != value:
            raise BadRequest(f"conflicting {name} fields")  # framing or target would be ambiguous
        if key == "transfer-encoding" and key in headers:
            raise BadRequest("repeated Transfer-Encoding")
        headers[key] = value
    return _Head(parts[0], parts[1].partition("?")[0], parts[2], headers)


# A complete chunk-size line: hex size, optional extensions (ignored), CRLF. Anything else takes the
# slow path, which also tells incomplete from malformed.
_CHUNK_LINE = re.compile(rb"[ \t]*([0-9A-Fa-f]{1,32})[ \t]*(?:;[^\r\n]{0,1000})?\r\n")


class ChunkedBody:
    """Incremental decoder of a chunked body: every byte is looked at once, whatever the chunking.

    ``feed(buf, pos)`` decodes from ``pos`` as far as the bytes go and returns the offset up to which
    it consumed them (the caller drops those); ``done`` tells when the last chunk and the trailer
    are in, ``body`` holds the data. A line (chunk size, trailer field) is scanned only from where the
    previous feed stopped, so a size line or a body trickled one byte at a time costs linear time.
    """

    __slots__ = ("_chunks", "_need", "_scanned", "_state", "_trailer", "body", "done", "limit")
    _SIZE, _DATA, _DATA_END, _TRAILER = range(4)
    MAX_SIZE_LINE = 1024
    # Real clients send chunks of kilobytes; a body in tens of thousands of tiny chunks is an attack
    # on the decoder's per-chunk cost, refused once it gets there (a bound on the work per request).
    MAX_CHUNKS = 16384

    def __init__(self, limit: int):
        self.limit = limit
        self.body = bytearray()
        self.done = False
        self._state = self._SIZE
        self._need = 0
        self._scanned = 0  # bytes of the current line already searched for its CRLF
        self._trailer = 0
        self._chunks = 0

    def feed(self, buf: bytearray | bytes, pos: int = 0) -> int:
        end = len(buf)
        match = _CHUNK_LINE.match
        while not self.done:
            state = self._state
            if state == self._SIZE and self._scanned == 0:  # fast path: a whole size line and its data
                m = match(buf, pos)
                if m is not None:
                    pos = m.end()
                    size = int(m.group(1), 16)
                    if not size or end - pos < size + 2:
                        self._start_chunk(m.group(1))  # the last chunk, or one still arriving
                        continue
                    self._chunks += 1
                    if self._chunks > self.MAX_CHUNKS or len(self.body) + size > self.limit:
                        self._start_chunk(m.group(1))  # raises the right error
                    if buf[pos + size : pos + size + 2] != b"\r\n":
                        raise BadRequest("malformed chunk")
                    self.body += buf[pos : pos + size]
                    pos += size + 2
                    continue
            if state == self._DATA:
                take = min(self._need, end - pos)
                if take <= 0:
                    break
                self.body += buf[pos : pos + take]
                self._need -= take
                pos += take
                if self._need == 0:
                    self._state = self._DATA_END
            elif state == self._DATA_END:
                if end - pos < 2:
                    break
                if buf[pos : pos + 2] != b"\r\n":
                    raise BadRequest("malformed chunk")
                pos += 2
                self._state = self._SIZE
            else:
                eol = buf.find(b"\r\n", pos + max(0, self._scanned - 1))
                if eol < 0:
                    self._scanned = end - pos
                    cap = self.MAX_SIZE_LINE if state == self._SIZE else MAX_HEAD_BYTES - self._trailer
                    if self._scanned > cap:
                        raise BadRequest("malformed chunk size" if state == self._SIZE else "trailer too large")
                    break
                line = bytes(buf[pos:eol])
                self._scanned = 0
                pos = eol + 2
                if state == self._SIZE:
                    if len(line) > self.MAX_SIZE_LINE:
                        raise BadRequest("malformed chunk size")
                    self._start_chunk(line.split(b";", 1)[0].strip())
                elif not line:  # the blank line after the trailer fields (ignored)
                    self.done = True
                else:
                    self._trailer += len(line) + 2
                    if self._trailer > MAX_HEAD_BYTES:
                        raise BadRequest("trailer too large")
        return pos

    def _start_chunk(self, size_text: bytes) -> int:
        """Begin the chunk announced by ``size_text`` (hex digits); returns its size."""
        if not size_text or not set(size_text) <= _HEXDIGITS:
            raise BadRequest("malformed chunk size")
        size = int(size_text, 16)
        if size == 0:
            self._state = self._TRAILER
            return 0
        if len(self.body) + size > self.limit:
            raise BadRequest("body too large", 413)
        self._chunks += 1
        if self._chunks > self.MAX_CHUNKS:
            raise BadRequest(f"more than {self.MAX_CHUNKS} chunks in one body")
        self._need = size
        self._state = self._DATA
        return size


def parse_chunked(buf: bytearray | bytes, start: int, limit: int) -> tuple[bytes, int] | None:
    """A chunked body starting at ``start``: (body, end offset), or None while incomplete."""
    decoder = ChunkedBody(limit)
    end = decoder.feed(buf, start)
    return (bytes(decoder.body), end) if decoder.done else None


class _Connection(asyncio.Protocol):
    """One client connection: requests are read and answered one at a time, in order.

    Reading costs time linear in the bytes received: the head is searched only past what was
    searched before, a chunked body is decoded incrementally. A request is admitted (Host, Origin,
    token) as soon as its head is complete: a refused one is answered at once and its body is never
    parsed (what is still on the way is dropped for a moment, then the connection closes). Deadlines:
    a head within ``head_timeout`` of its first byte (of the connection's start or last reply, for a
    connection no request was admitted on yet, which also gets no long idle time), a body within
    ``body_timeout`` of its head.
    """

    def __init__(self, server: HttpTransport):
        self.server = server
        self.loop = asyncio.get_running_loop()
        self.io: asyncio.Transport | None = None
        self.buf = bytearray()
        self.head: _Head | None = None
        self.chunks: ChunkedBody | None = None
        self.busy = False  # a request is being answered (on the executor, or as a stream)
        self.streaming = False  # ... as a long-lived stream (GET or subscriptions/listen)
        self.closing = False
        self.gone = False
        self.trusted = False  # a request on this connection passed admission
        self.discarding = 0  # bytes still expected of a refused request's body (-1: unknown); dropped
        self.peer_done = False  # the client half-closed: answer what is complete, then close
        self.paused_reading = False
        self._writable: asyncio.Future[None] | None = None
        self._wake: asyncio.Event | None = None
        self._deadline = 0.0  # loop time the armed deadline expires at (checked by HttpTransport's sweep)
        self._timer_kind = ""  # which deadline is armed; "" for none
        self._head_scanned = 0
        self._continued = False
        self._reading = False  # inside _process: a reply written meanwhile must not recurse into it
        self._admitted: _AdmittedHead | None = None  # the remembered form of the head being read
        self._last_head: _AdmittedHead | None = None  # the remembered head this connection sent last

    @property
    def idle(self) -> bool:
        """Between requests: nothing read of the next one and nothing being answered."""
        return not self.busy and self.head is None and not self.buf and not self.closing

    # -- asyncio callbacks ---------------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.io = cast(asyncio.Transport, transport)  # asyncio's or uvloop's (not a subclass)
        if not self.server.admit_connection(self):
            self.closing = True
            transport.abort()
            return
        self._wait_for_request()
        sock = transport.get_extra_info("socket")
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def data_received(self, data: bytes) -> None:
        if not self.buf and self.head is None and not self.busy and not self.closing and not self.discarding:
            # The usual case: one whole request in one read, nothing else pending, and a head
            # byte-for-byte equal to one admitted before under the same settings (a client repeats
            # its head). Parsing and admission are pure functions of those bytes and settings.
            mcp = self.server.mcp
            head = self._last_head
            if head is None or head.settings is not mcp.settings or not data.startswith(head.block):
                end = data.find(b"\r\n\r\n")
                head = self.server.admitted_head(data[:end]) if end > 0 else None
            if head is not None and len(data) == len(head.block) + head.proto.length:
                self._last_head = head
                self._timer_kind = ""
                self.trusted = True
                body = data[len(head.block) :]
                if not self._replay(head, body):
                    self._dispatch(head.proto, body, head)
                if self.paused_reading or self.peer_done:
                    self._process()
                return
        if self.discarding:
            self._discard(len(data))
            return
        if self.closing:
            return
        if self._timer_kind == "idle" and self.trusted and not self.buf:
            self._arm("head", self.server.head_timeout)  # the first byte of the next request
        self.buf += data
        if not self.busy:
            self._process()
        elif len(self.buf) > MAX_HEAD_BYTES + self.server.max_body_bytes and not self.paused_reading:
            self.paused_reading = True  # a client racing ahead: stop reading until we catch up
            assert self.io is not None
            self.io.pause_reading()

    def _replay(self, head: _AdmittedHead, body: bytes) -> bool:
        """Answer a request the protocol recognises as the last one sent with this head but for its
        id; False: it does not (or the server stops, or the connection is not plain keep-alive)."""
        memo = head.replay
        if memo is None or not head.keep_alive or self.server.stopping:
            return False
        reply = self.server.mcp.replay(memo, body)
        if reply is None:
            return False
        payload = reply.body or b""
        if reply.headers is not head.reply_headers:
            head.reply_headers, head.reply_block = reply.headers, _header_lines(reply.headers)
        self._write(
            b"%s%s%sContent-Length: %d\r\n\r\n%s" % (_status_line(reply.status), _Date.now(), head.reply_block, len(payload), payload)
        )
        if reply.after_send is not None:
            reply.after_send()
        self._done(True)
        return True

    def eof_received(self) -> bool:
        """The client will send no more: answer the complete requests already read, then close."""
        self.peer_done = True
        if self.discarding or not self.busy or self.streaming:  # a long-lived stream's client is gone
            self._close()
        return True  # keep the transport open for the replies still to be written

    def connection_lost(self, exc: Exception | None) -> None:
        self.gone = True
        self.server.connections.pop(self, None)
        self._cancel_timer()
        if self._wake is not None:
            self._wake.set()
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
        try:
            while not self.busy and not self.closing and not self.gone and not self.discarding:
                if (not self.buf and self.head is None) or not self._next_request():
                    break  # (an empty buffer between requests holds nothing to read)
        except BadRequest as exc:
            self._fail(exc)
        except Exception:  # a bug must still answer the client, not drop its connection
            log.exception("reading a request failed")
            self._fail(BadRequest("internal error", 500))
        finally:
            self._reading = False
        if self.paused_reading and not self.busy and self.io is not None and not self.gone:
            self.paused_reading = False
            self.io.resume_reading()
        if self.peer_done and not self.busy and not self.discarding:
            self._close()

    def _next_request(self) -> bool:
        buf = self.buf
        head = self.head
        if head is None:
            if buf and buf[0] in (13, 10):  # stray blank lines (CR, LF) between requests are allowed
                del buf[: len(buf) - len(buf.lstrip(b"\r\n"))]
                self._head_scanned = 0
            end = buf.find(b"\r\n\r\n", max(0, self._head_scanned - 3))
            if end < 0:
                self._head_scanned = len(buf)
                if len(buf) > MAX_HEAD_BYTES:
                    raise BadRequest("request head too large", 431)
                return False
            if end > MAX_HEAD_BYTES:
                raise BadRequest("request head too large", 431)
            block = bytes(buf[:end])
            del buf[: end + 4]
            self._head_scanned = 0
            self._continued = False
            known = self.server.admitted_head(block)
            if known is not None:  # parsed and admitted before under these settings
                head = known.proto
                self._admitted = known
            else:
                head = parse_head(block)
                refusal = self._admission(head)
                if refusal is not None:
                    return self._refuse(head, refusal)
                if not head.chunked and head.length <= self.server.max_body_bytes:
                    self._admitted = self.server.remember_head(block, head)
            self.trusted = True
            self.head = head
            if head.chunked:
                self.chunks = ChunkedBody(self.server.max_body_bytes)
            elif head.length > self.server.max_body_bytes:
                raise BadRequest("body too large", 413)
            self._cancel_timer()
        if head.chunked:
            chunks = self.chunks
            assert chunks is not None
            del buf[: chunks.feed(buf)]
            if not chunks.done:
                self._body_pending(head)
                return False
            body = bytes(chunks.body)
            self.chunks = None
        else:
            if len(buf) < head.length:
                self._body_pending(head)
                return False
            body = bytes(buf[: head.length])
            del buf[: head.length]
        self.head = None
        admitted, self._admitted = self._admitted, None
        self._dispatch(head, body, admitted)
        return True

    def _admission(self, head: _Head) -> HttpReply | None:
        """The reply refusing a request by its head alone, or None: it goes on to its body."""
        if head.path != PATH:
            return HttpReply(404, b"Not Found", {"Content-Type": "text/plain"})
        return self.server.mcp.admit(head.headers)

    def _refuse(self, head: _Head, reply: HttpReply) -> bool:
        """Answer a refused request without parsing its body. True: go on with the next request."""
        if not head.chunked and len(self.buf) >= head.length:
            del self.buf[: head.length]  # the body is already here: skip it, keep the connection
            self._reply(head, reply)
            return True
        self.discarding = -1 if head.chunked else head.length - len(self.buf)
        self.buf.clear()
        head.keep_alive = False
        self._reply(head, reply)
        return False

    def _discard(self, size: int) -> None:
        """Drop bytes of a refused body; close once it is all in (known length) or at the linger deadline."""
        if self.discarding > 0:
            self.discarding = max(self.discarding - size, 0) or -2
        if self.discarding == -2:
            self._close()

    def _body_pending(self, head: _Head) -> None:
        if self._timer_kind != "body":
            self._arm("body", self.server.body_timeout)
        if (
            not self._continued
            and head.version == "HTTP/1.1"
            and head.headers.get("expect", "").lower() == "100-continue"
        ):
            self._continued = True
            self._write(b"HTTP/1.1 100 Continue\r\n\r\n")

    def _dispatch(self, head: _Head, body: bytes, admitted: _AdmittedHead | None = None) -> None:
        self._cancel_timer()
        req = HttpRequest(head.method, head.headers, body, admitted=True)  # _admission ran on the head
        mcp = self.server.mcp
        reply = mcp.answer_inline(req, admitted is not None and admitted.replay is None)
        if reply is not None:
            if admitted is not None and req.replay is not None:
                admitted.replay = req.replay  # the next such request, with another id, is replayed
            self._reply(head, reply)
            return
        self.busy = True
        try:
            future = self.loop.run_in_executor(self.server.executor, mcp.handle, req)
        except RuntimeError:  # the executor is shut down: the hub is stopping
            self.busy = False
            self._reply(head, _error(503, "Service unavailable: the hub is stopping"))
            return
        future.add_done_callback(lambda f: self._answered(head, f))

    def _answered(self, head: _Head, future: asyncio.Future[HttpReply]) -> None:
        if future.cancelled():
            return
        if future.exception() is not None:  # handle() never raises; a dying executor might
            self._reply(head, _error(500, "Internal error"))
        else:
            self._reply(head, future.result())

    # -- writing ---------------------------------------------------------------------------------
    def _reply(self, head: _Head, reply: HttpReply) -> None:
        if reply.stream is not None:
            self.busy = True
            self.streaming = reply.stream.kind != "response"
            task = self.loop.create_task(self._stream(head, reply, reply.stream))
            self.server.tasks.add(task)
            task.add_done_callback(self.server.tasks.discard)
            return
        body = reply.body or b""
        keep = head.keep_alive and not self.server.stopping
        out = self._status_and_headers(head, reply, keep)
        if reply.status in (204, 304):
            body = b""
        else:
            out.append(b"Content-Length: %d\r\n\r\n" % len(body))
        if head.method == "HEAD":
            body = b""
        out.append(body)
        self._write(b"".join(out))
        if reply.after_send is not None:
            reply.after_send()
        self._done(keep)

    def _status_and_headers(self, head: _Head, reply: HttpReply, keep: bool) -> list[bytes]:
        out = [_status_line(reply.status), _Date.now(), _header_lines(reply.headers)]
        if not keep:
            out.append(b"Connection: close\r\n")
        elif head.version == "HTTP/1.0":
            out.append(b"Connection: keep-alive\r\n")
        return out

    def _done(self, keep: bool) -> None:
        """The reply is written: go on with the next request, or close."""
        self.busy = False
        self.streaming = False
        if self.gone:
            return
        if not keep:
            if self.discarding:
                self._arm("linger", LINGER_SECONDS)
                if self.io is not None and self.io.can_write_eof():
                    self.io.write_eof()  # the reply is complete; the client may still be sending
            else:
                self._close()
            return
        self._wait_for_request()
        self.server.busy_poll.touch()
        if self.buf or self.paused_reading or self.peer_done:
            self._process()

    async def _stream(self, head: _Head, reply: HttpReply, stream: Stream) -> None:
        server = self.server
        server.streams.add(stream)
        chunked = head.version == "HTTP/1.1"
        keep = chunked and head.keep_alive
        try:
            out = self._status_and_headers(head, reply, keep)
            out.append(b"Content-Type: text/event-stream\r\nX-Accel-Buffering: no\r\n")
            out.append(b"Transfer-Encoding: chunked\r\n\r\n" if chunked else b"\r\n")
            self._write(b"".join(out))
            await self._pump(stream, chunked)
            if chunked:
                self._write(b"0\r\n\r\n")
        finally:
            server.streams.discard(stream)
            server.mcp.stream_closed(stream)
        if not self.gone:
            self._done(keep and not server.stopping)

    async def _pump(self, stream: Stream, chunked: bool) -> None:
        wake = self._wake = asyncio.Event()
        loop = self.loop
        stream.set_waker(lambda: loop.call_soon_threadsafe(wake.set))
        try:
            while not self.gone:
                closed = stream.closed
                events = stream.drain()
                if events:
                    await self._send_chunk(b"".join(events), chunked)
                if closed or self.gone or (self.peer_done and self.streaming):
                    return  # a client that half-closed will not read a long-lived stream: end it
                try:
                    await asyncio.wait_for(wake.wait(), KEEPALIVE_SECONDS)
                except asyncio.TimeoutError:
                    await self._send_chunk(b": keepalive\n\n", chunked)
                wake.clear()
        finally:
            self._wake = None

    async def _send_chunk(self, data: bytes, chunked: bool) -> None:
        self._write(b"%x\r\n%s\r\n" % (len(data), data) if chunked else data)
        if self._writable is not None:
            await self._writable

    def _write(self, data: bytes) -> None:
        if self.io is not None and not self.gone:
            self.io.write(data)

    def _fail(self, exc: BadRequest) -> None:
        status = exc.status
        if status == 413:
            limit = self.server.max_body_bytes
            reply = _error(413, f"Payload too large: the limit is {limit} bytes", -32600)
        else:
            reply = HttpReply(status, f"{_reason(status)}: {exc}".encode(), {"Content-Type": "text/plain"})
        self.head = None
        self.chunks = None
        self.buf.clear()
        head = _Head("POST", "", "HTTP/1.1", {"connection": "close"})
        self._reply(head, reply)

    # -- deadlines ------------------------------------------------------------------------------
    def _wait_for_request(self) -> None:
        """Between requests: a long idle time once a request was admitted here, else a head deadline."""
        if self.buf:
            self._arm("head", self.server.head_timeout)
        elif self.trusted:
            self._arm("idle", IDLE_SECONDS)
        else:
            self._arm("first", self.server.head_timeout)

    def _arm(self, kind: str, seconds: float) -> None:
        """Arm one deadline (replacing any other); two stores, no timer per request."""
        self._timer_kind = kind
        self._deadline = self.loop.time() + seconds

    def _cancel_timer(self) -> None:
        self._timer_kind = ""

    def check_deadline(self, now: float) -> None:
        """Called by the transport's periodic sweep: act on an armed deadline that has passed."""
        kind = self._timer_kind
        if kind and now >= self._deadline:
            self._expired(kind)

    def _expired(self, kind: str) -> None:
        self._timer_kind = ""
        if self.gone or self.busy or self.closing:
            return
        if kind in ("idle", "linger") or (not self.buf and self.head is None):
            self._close()
        else:  # a head or body that did not arrive in time (slowloris)
            self._fail(BadRequest(f"the request {'body' if kind == 'body' else 'head'} did not arrive in time", 408))

    def evict(self) -> None:
        """Make room for a new connection: drop this one now."""
        self.closing = True
        self._cancel_timer()
        self.server.connections.pop(self, None)
        if self.io is not None:
            self.io.abort()

    def _close(self) -> None:
        self.closing = True
        self._cancel_timer()
        if self.io is not None and not self.io.is_closing():
            self.io.close()  # flushes what is buffered first


def _error(status: int, message: str, code: int = -32603) -> HttpReply:
    return HttpReply.json({"jsonrpc": "2.0", "id": None, "error": {"code": code, "message": message}}, status)


def new_loop(kind: str = "auto", poll: BusyPoll | None = None) -> asyncio.AbstractEventLoop:
    """The hub thread's own loop: uvloop's when installed (``kind`` "auto", the default, or
    "uvloop"), else asyncio's. ``MCP_NOTEBOOK_LOOP`` (auto, uvloop, asyncio) overrides ``kind``.

    uvloop reads and waits without the GIL and writes without giving it up, so a read during a
    busy cell waits for the GIL once instead of twice (p50 ~5.6 vs ~10 ms), and serves more reads
    per second; see docs/DESIGN.md. asyncio's loop gets the polling selector instead.
    """
    kind = os.environ.get("MCP_NOTEBOOK_LOOP", "") or kind
    if kind != "asyncio":
        try:
            import uvloop
        except ImportError:
            if kind == "uvloop":
                log.warning("uvloop was asked for but is not installed; using asyncio")
        else:
            return uvloop.new_event_loop()
    if poll is not None:
        return asyncio.SelectorEventLoop(PollingSelector(poll))
    return asyncio.new_event_loop()


def bind_socket(host: str, port: int) -> socket.socket:
    """A listening, non-blocking TCP socket; errors (address in use) surface to the caller."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        if os.name != "nt":  # reuse a port in TIME_WAIT; an active listener still conflicts
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(128)
        sock.setblocking(False)
    except BaseException:
        sock.close()
        raise
    return sock


class _AdmittedHead:
    """A head admitted under ``settings`` (``block``: its bytes with the blank line), the protocol's
    replay memo for requests sent with it, if any, and the encoded header lines of its replies."""

    __slots__ = ("block", "keep_alive", "proto", "replay", "reply_block", "reply_headers", "settings")

    def __init__(self, block: bytes, proto: _Head, settings: object):
        self.block = block
        self.proto = proto
        self.settings = settings
        self.keep_alive = proto.keep_alive and proto.version == "HTTP/1.1"
        self.replay: object | None = None
        self.reply_headers: dict[str, str] | None = None
        self.reply_block = b""


class HttpTransport:
    """Owns the listening socket, the server thread and its loop."""

    def __init__(
        self,
        mcp: McpServer,
        host: str,
        port: int,
        max_body_bytes: int,
        *,
        max_connections: int = MAX_CONNECTIONS,
        head_timeout: float = HEAD_SECONDS,
        body_timeout: float = BODY_SECONDS,
        busy_poll_seconds: float = BUSY_POLL_SECONDS,
        loop_kind: str = "auto",
    ):
        self.mcp = mcp
        self.max_body_bytes = max_body_bytes
        self.max_connections = max_connections
        self.head_timeout = head_timeout
        self.body_timeout = body_timeout
        self.streams: set[Stream] = set()
        self.tasks: set[asyncio.Task[None]] = set()
        self.connections: dict[_Connection, None] = {}  # oldest first
        self.refused_connections = 0
        self.stopping = False
        self.executor = ThreadPoolExecutor(max_workers=4, thread_name_prefix="mcp-notebook-req")
        self._sockets = [bind_socket(host, port)]
        self.host = host
        self.port = self._sockets[0].getsockname()[1]
        self._loop: asyncio.AbstractEventLoop | None = None
        self._servers: list[asyncio.AbstractServer] = []
        self._thread: threading.Thread | None = None
        self._started = threading.Event()
        self._error: BaseException | None = None
        self._sweep: asyncio.TimerHandle | None = None
        self.busy_poll = BusyPoll(busy_poll_seconds)
        # Heads admitted before, by their bytes (see _Connection.data_received); bounded.
        self.admitted_heads: dict[bytes, _AdmittedHead] = {}
        self.loop_kind = loop_kind

    def admit_connection(self, conn: _Connection) -> bool:
        """Register a new connection; at the cap, make room or refuse it.

        Room is made by dropping the oldest connection no request was admitted on (a client without
        the token, a trickling head), else the oldest idle keep-alive one; connections answering a
        request or holding a stream are never dropped. A real client therefore always gets in,
        however many unauthenticated connections trickle.
        """
        conns = self.connections
        if len(conns) >= self.max_connections:
            victim = fallback = None
            for other in conns:  # oldest first
                if other.closing:
                    continue
                if not other.trusted and not other.busy:
                    victim = other
                    break
                if fallback is None and other.idle:
                    fallback = other
            victim = victim or fallback
            if victim is not None:
                victim.evict()
            elif sum(1 for other in conns if not other.closing) >= self.max_connections:
                self.refused_connections += 1
                return False
        conns[conn] = None
        if self._sweep is None:
            self._schedule_sweep()
        return True

    def admitted_head(self, block: bytes) -> _AdmittedHead | None:
        """The remembered head with these bytes, if it was admitted under the current settings."""
        known = self.admitted_heads.get(block)
        return known if known is not None and known.settings is self.mcp.settings else None

    def remember_head(self, block: bytes, head: _Head) -> _AdmittedHead | None:
        """A head that passed admission: the next identical one skips parsing and admission
        (both are pure functions of the head's bytes and the settings)."""
        if len(block) > _HEAD_KEPT_BYTES:
            return None
        heads = self.admitted_heads
        if len(heads) >= _HEADS_KEPT:
            heads.clear()
        proto = _Head(head.method, head.path, head.version, head.headers)  # never handed to _refuse
        known = heads[block] = _AdmittedHead(block + b"\r\n\r\n", proto, self.mcp.settings)
        return known

    def _sweep_interval(self) -> float:
        """How often deadlines are checked: a fifth of the shortest one, between 20 ms and 1 s."""
        shortest = min(self.head_timeout, self.body_timeout, LINGER_SECONDS)
        return min(1.0, max(0.02, shortest / 5))

    def _schedule_sweep(self) -> None:
        loop = asyncio.get_running_loop()
        self._sweep = loop.call_later(self._sweep_interval(), self._sweep_deadlines)

    def _sweep_deadlines(self) -> None:
        """One timer for every connection's deadline (instead of a timer armed and cancelled per
        request); runs while any connection is open."""
        self._sweep = None
        if not self.connections:
            return
        now = asyncio.get_running_loop().time()
        for conn in list(self.connections):
            conn.check_deadline(now)
        if self.connections:
            self._schedule_sweep()

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}{PATH}"

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="mcp-notebook-http", daemon=True)
        self._thread.start()
        if not self._started.wait(10):
            raise RuntimeError("the MCP HTTP server thread did not start")
        if self._error is not None:
            raise RuntimeError(f"the MCP HTTP server failed to start: {self._error}")

    def _run(self) -> None:
        loop = new_loop(self.loop_kind, self.busy_poll)
        loop.set_exception_handler(loop_exception_handler)  # the loop's errors go to our log, not stderr
        self._loop = loop
        asyncio.set_event_loop(loop)
        try:
            for sock in self._sockets:
                server = loop.run_until_complete(loop.create_server(lambda: _Connection(self), sock=sock))
                self._servers.append(server)
        except BaseException as exc:  # surfaced by start()
            self._error = exc
            self._started.set()
            loop.close()
            return
        self._started.set()
        try:
            loop.run_forever()
        finally:
            with contextlib.suppress(Exception):
                loop.run_until_complete(loop.shutdown_asyncgens())
            loop.close()

    def stop(self, timeout: float = 5.0) -> None:
        """End streams, close the socket and connections, stop the loop, join the thread."""
        self.mcp.close()
        loop = self._loop
        if loop is not None and self._thread is not None and self._thread.is_alive():
            future = asyncio.run_coroutine_threadsafe(self._shutdown(), loop)
            with contextlib.suppress(Exception):
                future.result(timeout)
            loop.call_soon_threadsafe(loop.stop)
            self._thread.join(timeout)
        for sock in self._sockets:
            with contextlib.suppress(OSError):
                sock.close()
        self.executor.shutdown(wait=False, cancel_futures=True)

    async def _shutdown(self) -> None:
        self.stopping = True
        for server in self._servers:
            server.close()
        for _ in range(50):  # let stream pumps write their final events
            if not self.streams:
                break
            await asyncio.sleep(0.02)
        for conn in list(self.connections):
            conn._close()
        for _ in range(50):  # closing flushes buffered replies first
            if not self.connections:
                break
            await asyncio.sleep(0.02)
        for conn in list(self.connections):
            if conn.io is not None:
                conn.io.abort()
        for task in list(self.tasks):
            task.cancel()

    @property
    def alive(self) -> bool:
        return self._thread is not None and self._thread.is_alive()
