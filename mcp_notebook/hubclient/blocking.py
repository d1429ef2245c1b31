"""The blocking face of the hub client (``http.client``, HTTP and HTTPS), for threads: the front's
requests (``allkernels.upstream.call``), the bridge's (``bridge.http_link.Upstream``) and a Jupyter
server's kernel list (``bridge.remote``).

:func:`exchange` sends one request and reads its whole reply over a kept-alive connection: any
thread takes an idle connection to that hub (or opens one), and gives it back when the reply
ended cleanly; a connection that failed or ended mid-exchange is never reused. :func:`open_stream`
gives a stream its own connection, never kept. Timeouts, retries and the error are :mod:`.rules`'.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import threading
import time
from collections.abc import Iterator
from typing import Any, NamedTuple

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
    Endpoint,
    UpstreamError,
    authorization,
)

# What a caller reading a stream itself (after open_stream) may see when the hub goes away.
STREAM_ERRORS = (OSError, http.client.HTTPException, UpstreamError)
# The hub closed a kept-alive connection while it was idle: it never saw the request (rules 1).
_IDLE_CLOSED = (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError)

_Conn = http.client.HTTPConnection


class Reply(NamedTuple):
    """A whole reply: status, lower-cased headers, body."""

    status: int
    headers: dict[str, str]
    body: bytes


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
        conn = _connection(end, timeout)
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


def _connection(end: Endpoint, timeout: float | None) -> _Conn:
    if end.https:  # the default context: the system's CAs, the host name checked
        return http.client.HTTPSConnection(end.host, end.port, timeout=timeout)
    return http.client.HTTPConnection(end.host, end.port, timeout=timeout)


def _connect(conn: _Conn, end: Endpoint, timeout: float | None) -> None:
    """Open ``conn`` within CONNECT_SECONDS; a failure here means the hub saw nothing."""
    conn.timeout = min(CONNECT_SECONDS, timeout) if timeout is not None else CONNECT_SECONDS
    try:
        conn.connect()
    except OSError as exc:
        conn.close()
        # (no address in the message: a front's client must never learn where a hub listens)
        raise UpstreamError(f"cannot connect to the hub: {str(exc) or 'timed out'}", sent=False) from None
    if conn.sock is not None:
        conn.sock.settimeout(timeout)
    conn.timeout = timeout


def exchange(
    end: Endpoint,
    method: str,
    headers: dict[str, str],
    body: bytes | None = None,
    timeout: float = REPLY_SECONDS,
    path: str | None = None,
) -> Reply:
    """One request and its whole reply over a kept-alive connection (any thread). A connection the
    hub closed while idle is replaced once (rules 1); nothing is sent twice otherwise."""
    for attempt in (1, 2):
        conn = _POOL.take(end)
        reused = conn is not None
        if conn is None:
            conn = _POOL.new(end, timeout)
            try:
                _connect(conn, end, timeout)
            except UpstreamError:
                _POOL.drop(conn)
                raise
        elif conn.sock is not None:
            conn.sock.settimeout(timeout)
        try:
            conn.request(method, path or end.path, body, headers)
            resp = conn.getresponse()
            data = resp.read()
        except _IDLE_CLOSED as exc:
            _POOL.drop(conn)
            if reused and attempt == 1:
                continue
            raise UpstreamError(f"the hub did not answer: {exc}") from None
        except (OSError, http.client.HTTPException) as exc:
            _POOL.drop(conn)
            raise UpstreamError(f"the hub did not answer: {str(exc) or 'timed out'}") from None
        except BaseException:  # anything else mid-request (a header http.client refused): never reused
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
) -> tuple[_Conn, http.client.HTTPResponse]:
    """A request on a connection of its own, the reply once its status is known (a stream: read it
    with :func:`sse_messages`, end it with ``conn.close()``; ``timeout``: per read, None never)."""
    conn = _connection(end, timeout)
    _connect(conn, end, timeout)
    try:
        conn.request(method, end.path, body, headers)
        return conn, conn.getresponse()
    except (OSError, http.client.HTTPException) as exc:
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
    that have a hub, as its server extension lists them (``bridge --server``, the Hub service)."""
    headers = {"Accept": "application/json", **authorization(token, SERVER_SCHEME)}
    return exchange(Endpoint.of(base + KERNELS_ROUTE), "GET", headers, None, timeout)


def close_connections() -> int:
    """Close every connection to a hub, idle or in use (the process is stopping: the server
    extension's stop); how many were open. A later request connects anew."""
    return _POOL.close_all()
