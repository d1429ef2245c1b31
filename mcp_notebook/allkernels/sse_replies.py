"""A front's streamed replies written by a tornado handler (the server extension's front and the
JupyterHub service): the stream's events as they come, a keepalive comment every 15 s, the front
told when the client goes away. One copy for both handlers."""

from __future__ import annotations

import asyncio
from typing import Any

from tornado.iostream import StreamClosedError

from ..protocol.exchange import HttpReply
from ..protocol.streams import Stream

KEEPALIVE_SECONDS = 15.0


class SseReplies:
    """Mixed into a ``tornado.web.RequestHandler``: ``_send_reply`` writes one reply (a body, or a
    stream as it comes); call ``_wake_stream`` from ``on_connection_close``."""

    _client_gone = False
    _wake: asyncio.Event | None = None

    async def _send_reply(self, front: Any, reply: HttpReply) -> None:
        """Write ``reply``: its status and headers, then its body, or its stream until it ends."""
        handler: Any = self
        handler.set_status(reply.status)
        handler.clear_header("Content-Type")
        for name, value in reply.headers.items():
            handler.set_header(name, value)
        if reply.stream is None:
            handler.finish(reply.body or b"")
            if reply.after_send is not None:
                reply.after_send()
            return
        await self._stream(front, reply.stream)

    async def _stream(self, front: Any, stream: Stream) -> None:
        handler: Any = self
        handler.set_header("Content-Type", "text/event-stream")
        handler.set_header("Cache-Control", "no-store")
        handler.set_header("X-Accel-Buffering", "no")
        loop = asyncio.get_running_loop()
        wake = self._wake = asyncio.Event()
        stream.set_waker(lambda: loop.call_soon_threadsafe(wake.set))
        try:
            await handler.flush()
            while not self._client_gone:
                closed = stream.closed
                events = stream.drain()
                if events:
                    handler.write(b"".join(events))
                    await handler.flush()
                if closed:
                    break
                try:
                    await asyncio.wait_for(wake.wait(), KEEPALIVE_SECONDS)
                except asyncio.TimeoutError:
                    handler.write(b": keepalive\n\n")
                    await handler.flush()
                wake.clear()
            if not self._client_gone:
                handler.finish()
        except StreamClosedError:
            self._client_gone = True
        finally:
            front.server.stream_closed(stream)

    def _wake_stream(self) -> None:
        """The client went away: the stream loop wakes and ends."""
        self._client_gone = True
        if self._wake is not None:
            self._wake.set()
