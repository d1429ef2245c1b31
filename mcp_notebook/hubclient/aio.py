"""The asyncio face of the hub client: HTTP/1.1 requests to hubs over HTTP or HTTPS, bodies read
chunk by chunk (the server extension's pipe, the front's listens, ``bridge --channel``). Its rules
(timeouts, keep-alive, retries, the error) are :mod:`.rules`'; HTTPS as the blocking face does it
(the default context: the system's CAs or ``SSL_CERT_FILE``, the host name checked).

It exists so the proxy can stream: every chunk of an SSE reply is handed on as it arrives, the
reader waits while the client is slow (back-pressure), and closing it ends the request at once
(the hub sees the connection go away and cancels the stream). Connections whose short reply
ended cleanly go back to a small keep-alive pool; streams and broken replies never do.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Mapping

from ..protocol.wire_http11 import HEAD_END, ResponseHead, chunk_size, parse_response_head, request_bytes
from .rules import (
    CONNECT_SECONDS,
    POOL_IDLE_SECONDS,
    POOL_MAX_HUBS,
    POOL_MAX_IDLE,
    REPLY_SECONDS,
    ClosedWhileIdle,
    UpstreamError,
    tls_context,
)

MAX_HEAD_BYTES = 64 * 1024
READ_PIECE = 64 * 1024

_Conn = tuple[asyncio.StreamReader, asyncio.StreamWriter]
Key = tuple[bool, str, int]  # (https, host, port): what a kept-alive connection is kept under


class ConnectionPool:
    """Idle keep-alive connections to hubs, by (host, port)."""

    def __init__(self) -> None:
        self._idle: dict[Key, list[tuple[asyncio.StreamReader, asyncio.StreamWriter, float]]] = {}

    def take(self, key: Key) -> _Conn | None:
        conns = self._idle.get(key)
        now = time.monotonic()
        while conns:
            reader, writer, since = conns.pop()
            if now - since < POOL_IDLE_SECONDS and not writer.is_closing() and not reader.at_eof():
                return reader, writer
            writer.close()
        return None

    def give(self, key: Key, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        conns = self._idle.setdefault(key, [])
        if len(conns) >= POOL_MAX_IDLE or len(self._idle) > POOL_MAX_HUBS:
            writer.close()
            return
        conns.append((reader, writer, time.monotonic()))

    def close(self) -> None:
        for conns in self._idle.values():
            for _, writer, _ in conns:
                writer.close()
        self._idle.clear()

    async def aclose(self, timeout: float = 5.0) -> None:
        """Close every idle connection and wait (bounded) until each is closed."""
        writers = [writer for conns in self._idle.values() for _, writer, _ in conns]
        self.close()
        for writer in writers:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(writer.wait_closed(), timeout)


class UpstreamResponse:
    """Status and headers of the hub's reply (its head, parsed by the codec); :meth:`chunks` yields
    the body as it arrives."""

    def __init__(
        self,
        head: ResponseHead,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        pool: tuple[ConnectionPool, Key] | None = None,
    ):
        self.head = head
        self.status = head.status
        self.reason = head.reason
        self.headers = head.headers
        self._reader = reader
        self._writer = writer
        self._pool = pool
        self.complete = False  # the body ended as the hub declared it would

    def header(self, name: str) -> str | None:
        return self.head.header(name)

    @property
    def chunked(self) -> bool:
        return self.head.chunked

    @property
    def length(self) -> int | None:
        return self.head.length

    async def chunks(self) -> AsyncIterator[bytes]:
        """The body, piece by piece, up to 64 KiB at a time (an HTTP chunk in one piece or more).

        ``complete`` is True afterwards when the body ended as declared; a broken connection
        raises :class:`UpstreamError`.
        """
        reader = self._reader
        try:
            if self.head.bodiless:
                self.complete = True
                return
            if self.chunked:
                while True:
                    line = await reader.readline()
                    if not line.endswith(b"\n"):
                        raise UpstreamError("the hub closed the stream mid-chunk")
                    size = chunk_size(line)
                    if size == 0:
                        while (await reader.readline()).strip():  # trailers, then the blank line
                            pass
                        self.complete = True
                        return
                    while size:  # in pieces: a chunk's declared size is the hub's word, not memory to hold
                        data = await reader.read(min(size, READ_PIECE))
                        if not data:
                            raise UpstreamError("the hub closed the stream mid-chunk")
                        size -= len(data)
                        yield data
                    await reader.readexactly(2)
            length = self.length
            if length is not None:
                left = length
                while left:
                    data = await reader.read(min(left, READ_PIECE))
                    if not data:
                        raise UpstreamError("the hub closed the connection before the end of the body")
                    left -= len(data)
                    yield data
                self.complete = True
                return
            while data := await reader.read(READ_PIECE):  # no framing: the body ends with the connection
                yield data
            self.complete = True
        except (asyncio.IncompleteReadError, OSError, ValueError) as exc:  # (OSError: ssl.SSLError too)
            raise UpstreamError(f"the hub's reply broke off: {exc}") from exc

    def reusable(self) -> bool:
        framed = self.chunked or self.length is not None
        streaming = "text/event-stream" in (self.header("content-type") or "")
        return self.complete and framed and not streaming and "close" not in (self.header("connection") or "").lower()

    def close(self) -> None:
        """Done with the reply: back to the pool when it ended cleanly, else closed (the hub sees it)."""
        if self._pool is not None and self.reusable():
            pool, key = self._pool
            self._pool = None
            pool.give(key, self._reader, self._writer)
            return
        self._pool = None
        with contextlib.suppress(Exception):
            self._writer.close()


async def request(
    host: str,
    port: int,
    method: str,
    path: str,
    headers: Mapping[str, str],
    body: bytes | None = None,
    head_timeout: float = REPLY_SECONDS,
    pool: ConnectionPool | None = None,
    *,
    https: bool = False,
) -> UpstreamResponse:
    """Send one request and read the status line and headers (within ``head_timeout`` seconds);
    ``https``: over TLS, the certificate and the host name verified.

    With a ``pool``, an idle connection is tried first; if the hub had closed it (nothing came
    back), the request goes once more on a fresh connection (rule 1 of :mod:`.rules`).
    """
    key = (https, host, port)
    data = request_bytes(method, path, dict(headers), body)
    reused = pool.take(key) if pool is not None else None
    if reused is not None:
        reader, writer = reused
        try:
            return await _exchange(reader, writer, data, head_timeout, pool, key)
        except ClosedWhileIdle:
            pass  # closed by the hub while idle: it never saw this request
    try:
        tls = {"ssl": tls_context(), "server_hostname": host} if https else {}
        reader, writer = await asyncio.wait_for(
            asyncio.open_connection(host, port, limit=MAX_HEAD_BYTES, **tls), CONNECT_SECONDS
        )
    except (OSError, asyncio.TimeoutError) as exc:  # (a certificate refused: ssl.SSLError, an OSError)
        # (no address in the message: a front's client must never learn where a hub listens)
        raise UpstreamError(f"cannot connect to the hub: {str(exc) or 'timed out'}", sent=False) from exc
    try:
        return await _exchange(reader, writer, data, head_timeout, pool, key)
    except ClosedWhileIdle as exc:
        raise UpstreamError(f"the hub closed the connection: {exc.__cause__}") from exc


async def _exchange(
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
    data: bytes,
    head_timeout: float,
    pool: ConnectionPool | None,
    key: Key,
) -> UpstreamResponse:
    try:
        writer.write(data)
        await writer.drain()
        raw = await asyncio.wait_for(reader.readuntil(HEAD_END), head_timeout)
        head = parse_response_head(raw[: -len(HEAD_END)])
    except (ConnectionError, asyncio.IncompleteReadError) as exc:
        writer.close()
        if not isinstance(exc, asyncio.IncompleteReadError) or not exc.partial:
            raise ClosedWhileIdle(str(exc)) from exc
        raise UpstreamError(f"the hub did not answer: {exc}") from exc
    except (OSError, asyncio.LimitOverrunError, asyncio.TimeoutError, ValueError) as exc:
        writer.close()
        raise UpstreamError(f"the hub did not answer: {str(exc) or 'timed out'}") from exc
    except BaseException:
        writer.close()
        raise
    return UpstreamResponse(head, reader, writer, (pool, key) if pool is not None else None)
