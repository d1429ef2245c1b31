"""A front's exchanges carried by a tornado handler (the server extension's front and the JupyterHub
service): a ``Port`` of the exchange driver (transport/driver.py) writing through the handler, a
stream's events as they come with a keepalive comment every 15 s, the driver told when the client
goes away. One copy for both handlers."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from tornado.iostream import StreamClosedError

from ..protocol.exchange import HttpReply, HttpRequest
from ..transport.driver import ExchangeDriver, Port


def no_delay(handler: Any) -> None:
    """An event stream's events go out as written: tornado leaves Nagle's algorithm on while a reply
    is open, so an event written while the last one is unacknowledged would wait for its ACK."""
    stream = getattr(handler.request.connection, "stream", None)
    if stream is not None and not stream.closed():
        stream.set_nodelay(True)  # tornado turns it off again once the reply is finished


class HandlerPort(Port):
    """One exchange written by a ``tornado.web.RequestHandler``; ``on_stream(+1 / -1)`` is told
    when a stream opens and when it ends."""

    def __init__(self, handler: Any, on_stream: Callable[[int], None] | None = None):
        self.handler = handler
        self.on_stream = on_stream
        self.streaming = False

    def _head(self, status: int, headers: dict[str, str]) -> None:
        handler = self.handler
        handler.set_status(status)
        handler.clear_header("Content-Type")
        for name, value in headers.items():
            handler.set_header(name, value)

    def send_reply(self, reply: HttpReply) -> None:
        if self.gone:
            return
        self._head(reply.status, reply.headers)
        self.handler.finish(reply.body or b"")

    def open_stream(self, status: int, headers: dict[str, str], events: bytes, end: bool) -> Awaitable[None] | None:
        if not self.gone:
            self._head(status, headers)
            self.handler.set_header("Content-Type", "text/event-stream")
            self.handler.set_header("Cache-Control", "no-store")
            self.handler.set_header("X-Accel-Buffering", "no")
        if not end:
            no_delay(self.handler)
            self.streaming = True
            if self.on_stream is not None:
                self.on_stream(+1)
        return self.send_events(events, end)

    def send_events(self, events: bytes, end: bool) -> Awaitable[None] | None:
        if end and self.streaming:
            self.streaming = False
            if self.on_stream is not None:
                self.on_stream(-1)
        if self.gone:
            return None
        if events:
            self.handler.write(events)
        if end:
            self.handler.finish()
            return None
        return self._flushed(self.handler.flush())  # on the socket now; the driver waits until it is out

    async def _flushed(self, flushing: Awaitable[None]) -> None:
        try:
            await flushing
        except StreamClosedError:
            self.gone = True


class SseReplies:
    """Mixed into a ``tornado.web.RequestHandler``: ``_exchange`` drives one request through a
    front's server (every request on a worker: the front's answers may reach other hosts); call
    ``_wake_stream`` from ``on_connection_close``."""

    _port: HandlerPort | None = None

    async def _exchange(self, server: Any, req: HttpRequest, on_stream: Callable[[int], None] | None = None) -> None:
        """Drive ``req`` until its reply is written (a body, or a stream until it ends)."""
        driver = ExchangeDriver(server, None, inline=False)
        self._port = HandlerPort(self, on_stream)
        await driver.serve(self._port, req)

    def _wake_stream(self) -> None:
        """The client went away: an open stream ends now (the server lets go of it)."""
        port = self._port
        if port is not None:
            port.gone = True
            if port.exchange is not None:
                port.exchange.cancel()
