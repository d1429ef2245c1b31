"""The blocking face of the hub client, for threads: the front's requests
(``allkernels.upstream.call``), the bridge's (``bridge.http_link.Upstream``) and a Jupyter server's
kernel list (``bridge.remote``). HTTP and HTTPS over plain sockets, every byte written and read
through the codec (``protocol/wire_http11.py``), as the asyncio face does.

:func:`exchange` sends one request and reads its whole reply over a kept-alive connection: any
thread takes an idle connection to that hub (or opens one), and gives it back when the reply
ended cleanly; a connection that failed or ended mid-exchange is never reused. :func:`open_stream`
gives a stream its own connection, never kept. Timeouts, retries and the error are :mod:`.rules`'.
"""

from __future__ import annotations

import contextlib
import json
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any, NamedTuple

from ..protocol.wire_http11 import (
    CRLF,
    HEAD_END,
    MAX_HEAD_BYTES,
    BadResponse,
    ResponseHead,
    chunk_size,
    parse_response_head,
    request_bytes,
)
from ..protocol.wire_sse import SseParser
from .rules import (
    CONNECT_SECONDS,
    KERNELS_ROUTE,
    LIST_SECONDS,
    POOL_IDLE_SECONDS,
    POOL_MAX_HUBS,
    POOL_MAX_IDLE,
    REPLY_SECONDS,
    SERVER_SCHEME,
    ClosedWhileIdle,
    Endpoint,
    UpstreamError,
    authorization,
    tls_context,
)

# What a caller reading a stream itself (after open_stream) may see when the hub goes away.
STREAM_ERRORS = (OSError, BadResponse, UpstreamError)
READ_PIECE = 64 * 1024


class Reply(NamedTuple):
    """A whole reply: status, lower-cased headers, body."""

    status: int
    headers: dict[str, str]
    body: bytes


class HubConnection:
    """One connection to a hub (a socket, TLS for HTTPS): requests written and replies read through
    the codec. ``sock`` is None once closed; ``timeout`` bounds each read (None: never)."""

    def __init__(self, end: Endpoint, timeout: float | None):
        self.end = end
        self.timeout = timeout
        self.sock: socket.socket | None = None
        self._buf = bytearray()

    def connect(self) -> None:
        """Open within CONNECT_SECONDS; a failure here means the hub saw nothing."""
        end = self.end
        wait = min(CONNECT_SECONDS, self.timeout) if self.timeout is not None else CONNECT_SECONDS
        try:
            sock = socket.create_connection((end.host, end.port), wait)
            if end.https:  # the default context: the system's CAs (or SSL_CERT_FILE), the host name checked
                sock = tls_context().wrap_socket(sock, server_hostname=end.host)
        except OSError as exc:
            # (no address in the message: a front's client must never learn where a hub listens)
            raise UpstreamError(f"cannot connect to the hub: {str(exc) or 'timed out'}", sent=False) from None
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.settimeout(self.timeout)
        self.sock = sock

    def request(self, method: str, path: str, body: bytes | None, headers: dict[str, str]) -> None:
        if not any(name.lower() == "host" for name in headers):
            headers = {"Host": f"{self.end.host}:{self.end.port}", **headers}
        self._socket().sendall(request_bytes(method, path, headers, body))

    def getresponse(self) -> HubResponse:
        """The reply's head (raises ClosedWhileIdle when the connection ended before any byte of it)."""
        buf = self._buf
        while (end := buf.find(HEAD_END)) < 0:
            if len(buf) > MAX_HEAD_BYTES:
                raise BadResponse("the reply's head is too large")
            data = self._socket().recv(READ_PIECE)
            if not data:
                if not buf:
                    raise ClosedWhileIdle("the hub closed the connection")
                raise BadResponse("the hub closed the connection mid-head")
            buf += data
        head = parse_response_head(bytes(buf[:end]))
        del buf[: end + len(HEAD_END)]
        return HubResponse(self, head)

    def _socket(self) -> socket.socket:
        if self.sock is None:
            raise ConnectionError("the connection is closed")
        return self.sock

    def recv(self) -> bytes:
        """What arrived next (what was read past the head first); b"": the hub closed."""
        if self._buf:
            data = bytes(self._buf)
            self._buf.clear()
            return data
        return self._socket().recv(READ_PIECE)

    def unread(self, data: bytes) -> None:
        self._buf[:0] = data

    def close(self) -> None:
        sock, self.sock = self.sock, None
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.close()


class HubResponse:
    """A reply whose head was read: ``status``, ``getheader``, the body by :meth:`read` (whole) or
    :meth:`readline` (a stream's lines, de-chunked), ``will_close``."""

    def __init__(self, conn: HubConnection, head: ResponseHead):
        self.conn = conn
        self.head = head
        self.status = head.status
        self.will_close = head.closes
        self._left = None if head.chunked else head.length  # None: chunked or until the close
        self._done = head.bodiless or self._left == 0
        self._pending = b""

    def getheader(self, name: str, default: str | None = None) -> str | None:
        value = self.head.header(name)
        return default if value is None else value

    def getheaders(self) -> list[tuple[str, str]]:
        return list(self.head.headers)

    def _line(self) -> bytes:
        """A line of the chunked framing (a size line, the trailer's), without its CRLF."""
        data = b""
        while (i := data.find(CRLF)) < 0:
            more = self.conn.recv()
            if not more:
                raise BadResponse("the hub closed the stream mid-chunk")
            data += more
            if len(data) > MAX_HEAD_BYTES:
                raise BadResponse("a chunk line too long")
        self.conn.unread(data[i + 2 :])
        return data[:i]

    def _exactly(self, n: int) -> bytes:
        out = bytearray()
        while len(out) < n:
            more = self.conn.recv()
            if not more:
                raise BadResponse("the hub closed the connection mid-body")
            out += more
        self.conn.unread(bytes(out[n:]))
        return bytes(out[:n])

    def _piece(self) -> bytes:
        """The next piece of the body (b"": it ended)."""
        if self._done:
            return b""
        if self.head.chunked:
            size = chunk_size(self._line())
            if size == 0:
                while self._line():  # trailer fields, then the blank line
                    pass
                self._done = True
                return b""
            data = self._exactly(size)
            if self._exactly(2) != CRLF:
                raise BadResponse("malformed chunk")
            return data
        data = self.conn.recv()
        if self._left is None:  # the body ends with the connection
            self._done = not data
            return data
        if not data:
            raise BadResponse("the hub closed the connection before the end of the body")
        if len(data) > self._left:
            self.conn.unread(data[self._left :])
            data = data[: self._left]
        self._left -= len(data)
        self._done = self._left == 0
        return data

    def read(self) -> bytes:
        """The whole (rest of the) body."""
        out = [self._pending]
        self._pending = b""
        while piece := self._piece():
            out.append(piece)
        return b"".join(out)

    def readline(self) -> bytes:
        """The next line of the body with its end (b"": the body ended)."""
        while (i := self._pending.find(b"\n")) < 0:
            piece = self._piece()
            if not piece:
                line, self._pending = self._pending, b""
                return line
            self._pending += piece
        line, self._pending = self._pending[: i + 1], self._pending[i + 1 :]
        return line


_Conn = HubConnection


class _Pool:
    """Idle kept-alive connections by hub, shared by every thread; every open one, for close_all."""

    def __init__(self) -> None:
        self._idle: dict[tuple[bool, str, int], list[tuple[_Conn, float]]] = {}
        self._open: set[_Conn] = set()
        self._lock = threading.Lock()

    def take(self, end: Endpoint) -> _Conn | None:
        now = time.monotonic()
        with self._lock:
            conns = self._idle.get(end.key)
            while conns:
                conn, since = conns.pop()
                if now - since < POOL_IDLE_SECONDS and conn.sock is not None:
                    return conn
                self._open.discard(conn)
                conn.close()
        return None

    def new(self, end: Endpoint, timeout: float | None) -> _Conn:
        conn = HubConnection(end, timeout)
        with self._lock:
            self._open.add(conn)
        return conn

    def give(self, end: Endpoint, conn: _Conn) -> None:
        with self._lock:
            conns = self._idle.setdefault(end.key, [])
            if conn in self._open and len(conns) < POOL_MAX_IDLE and len(self._idle) <= POOL_MAX_HUBS:
                conns.append((conn, time.monotonic()))
                return
            self._open.discard(conn)
        conn.close()

    def drop(self, conn: _Conn) -> None:
        with self._lock:
            self._open.discard(conn)
        conn.close()

    def close_all(self) -> int:
        with self._lock:
            conns = list(self._open)
            self._open.clear()
            self._idle.clear()
        for conn in conns:
            with contextlib.suppress(Exception):
                conn.close()
        return len(conns)


_POOL = _Pool()


def exchange(
    end: Endpoint,
    method: str,
    headers: dict[str, str],
    body: bytes | None = None,
    timeout: float = REPLY_SECONDS,
    path: str | None = None,
) -> Reply:
    """One request and its whole reply over a kept-alive connection (any thread). A connection the
    hub closed while idle is replaced once (rules 1), by a new connection (another kept one may have
    been closed too: a proxy ends idle connections after a few seconds); nothing is sent twice otherwise."""
    for attempt in (1, 2):
        conn = _POOL.take(end) if attempt == 1 else None
        reused = conn is not None
        if conn is None:
            conn = _POOL.new(end, timeout)
            try:
                conn.connect()
            except UpstreamError:
                _POOL.drop(conn)
                raise
        elif conn.sock is not None:
            conn.timeout = timeout
            conn.sock.settimeout(timeout)
        try:
            conn.request(method, path or end.path, body, headers)
            resp = conn.getresponse()
            data = resp.read()
        except (ClosedWhileIdle, BrokenPipeError, ConnectionResetError) as exc:
            _POOL.drop(conn)
            if reused and attempt == 1:
                continue
            raise UpstreamError(f"the hub did not answer: {exc}") from None
        except (OSError, BadResponse) as exc:
            _POOL.drop(conn)
            raise UpstreamError(f"the hub did not answer: {str(exc) or 'timed out'}") from None
        except BaseException:  # anything else mid-request: never reused
            _POOL.drop(conn)
            raise
        reply = Reply(resp.status, {k.lower(): v for k, v in resp.getheaders()}, data)
        if resp.will_close:
            _POOL.drop(conn)
        else:
            _POOL.give(end, conn)
        return reply
    raise AssertionError("unreachable")


def open_stream(
    end: Endpoint, method: str, headers: dict[str, str], body: bytes | None = None, timeout: float | None = None
) -> tuple[HubConnection, HubResponse]:
    """A request on a connection of its own, the reply once its status is known (a stream: read it
    with :func:`sse_messages`, end it with ``conn.close()``; ``timeout``: per read, None never)."""
    conn = HubConnection(end, timeout)
    conn.connect()
    try:
        conn.request(method, end.path, body, headers)
        return conn, conn.getresponse()
    except (OSError, BadResponse, ClosedWhileIdle) as exc:
        conn.close()
        raise UpstreamError(f"the hub did not answer: {str(exc) or 'timed out'}") from None
    except BaseException:
        conn.close()
        raise


def sse_messages(resp: Any) -> Iterator[Any]:
    """The JSON payload of each SSE event of a response, as they arrive (anything with
    ``readline``; an event that is not JSON is skipped)."""
    parser = SseParser()
    while True:
        line = resp.readline()
        if not line:
            return
        for data in parser.feed(line):
            with contextlib.suppress(ValueError):
                yield json.loads(data)


def server_kernels(base: str, token: str, timeout: float = LIST_SECONDS) -> Reply:
    """``GET {base}mcp-notebook/kernels`` with a Jupyter token: the kernels of a Jupyter server
    that have a hub, as its server extension lists them (``bridge --server``, the JupyterHub service)."""
    headers = {"Accept": "application/json", **authorization(token, SERVER_SCHEME)}
    return exchange(Endpoint.of(base + KERNELS_ROUTE), "GET", headers, None, timeout)


def close_connections() -> int:
    """Close every connection to a hub, idle or in use (the process is stopping: the server
    extension's stop); how many were open. A later request connects anew."""
    return _POOL.close_all()
