"""MCP to a kernel's hub over the kernel's control channel, from the server extension's side.

One :class:`KernelChannel` per kernel, on the server's event loop, over a wire (wires.py). It
learns the hub's token with ``mcp_info_request`` (only a peer that may already execute code in
the kernel can send it: docs/DESIGN.md, "Kernels anywhere"), sends each HTTP exchange as an
``mcp_request`` and hands the ``mcp_reply`` messages back as a :class:`ChannelResponse`, which
reads like the loopback pipe's ``UpstreamResponse``: status, headers, then the body piece by piece.
Closing a response before its end sends ``mcp_cancel`` (the hub ends the stream). While streams
are open the channel says it is alive every 20 s; the hub ends the streams of a silent sender.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import AsyncIterator, Callable
from typing import Any
from urllib.parse import urlsplit

from ..hubclient.rules import UpstreamError
from ..transport.control_wire import CANCEL, INFO, KEEPALIVE, KEEPALIVE_SECONDS, REPLY, REQUEST
from .wires import Wire, WireClosed

INFO_SECONDS = 5.0  # a kernel that does not answer mcp_info_request this fast has no hub for us
NO_HUB_SECONDS = 3.0  # "no hub" is remembered this long for a request naming the kernel
LISTING_NO_HUB_SECONDS = 30.0  # and this long for listings (each probe of a kernel without a hub
# makes ipykernel publish busy/idle: a frontend would see the kernel blink at every poll)
REPLY_SECONDS = 60.0  # the first reply message of a request (a slow __repr__ included)
MAX_QUEUED = 4096  # reply messages waiting for a slow reader, per request


class KernelHasNoHub(Exception):
    """The kernel answered that it has no hub for us (or did not answer at all)."""

    def __init__(self, reason: str, message: str):
        super().__init__(message)
        self.reason = reason
        self.message = message


class ChannelResponse:
    """One exchange's reply: ``status`` and ``headers`` known, the body still arriving."""

    def __init__(self, channel: KernelChannel, msg_id: str, queue: asyncio.Queue[dict[str, Any] | None], first: dict):
        self._channel = channel
        self._msg_id = msg_id
        self._queue = queue
        status = first.get("status")
        self.status = status if type(status) is int and 100 <= status <= 599 else 502  # a malformed reply: bad gateway
        self.reason = ""
        raw = first.get("headers") if isinstance(first.get("headers"), dict) else {}
        self.headers = [(str(k), str(v)) for k, v in raw.items()]
        self.complete = False
        self._pending = [first.get("body") or ""] if first.get("body") else []
        self._final = bool(first.get("final"))

    def header(self, name: str) -> str | None:
        name = name.lower()
        return next((v for k, v in self.headers if k.lower() == name), None)

    @property
    def length(self) -> int | None:
        return None  # the body comes in pieces; its length is known only at the end

    @property
    def streaming(self) -> bool:
        return "text/event-stream" in (self.header("content-type") or "")

    async def chunks(self) -> AsyncIterator[bytes]:
        """The body: each reply message's piece as it comes; ``complete`` once the final one came."""
        for piece in self._pending:
            yield piece.encode()
        self._pending = []
        while not self._final:
            msg = await self._queue.get()
            if msg is None:
                raise UpstreamError("the kernel's control channel closed mid-reply")
            piece = msg.get("body") or ""
            self._final = bool(msg.get("final"))
            if piece:
                yield piece.encode()
        self.complete = True
        self._channel.done(self._msg_id)

    async def read(self) -> bytes:
        return b"".join([piece async for piece in self.chunks()])

    def close(self) -> None:
        """Stop reading; a reply not read to its end is cancelled at the hub."""
        self._channel.done(self._msg_id, cancel=not self._final)


class KernelChannel:
    """A kernel's hub, reached over its control channel (see the module docstring)."""

    def __init__(self, kernel_id: str, make_wire: Callable[[], Wire]):
        self.kernel_id = kernel_id
        self._make_wire = make_wire
        self._wire: Wire | None = None
        self._opening: asyncio.Future[Wire] | None = None
        self._pending: dict[str, asyncio.Queue[dict[str, Any] | None]] = {}
        self._streams: set[str] = set()
        self._info: dict[str, Any] | None = None
        self._no_hub: tuple[float, KernelHasNoHub] | None = None
        self._keepalive: asyncio.Task[None] | None = None
        self.last_used = time.monotonic()

    # -- the wire ------------------------------------------------------------------------------
    async def _ensure_wire(self) -> Wire:
        if self._wire is not None and not self._wire.closed:
            return self._wire
        if self._opening is None:
            self._opening = asyncio.ensure_future(self._open())
        try:
            return await asyncio.shield(self._opening)
        finally:
            if self._opening is not None and self._opening.done():
                self._opening = None

    async def _open(self) -> Wire:
        wire = self._make_wire()
        try:
            await wire.open(self._on_message, self._on_close)
        except Exception as exc:
            raise UpstreamError(f"could not reach the control channel of kernel {self.kernel_id}: {exc}") from None
        self._wire = wire
        self._info = None  # a new connection learns the token again
        return wire

    def _on_message(self, msg: dict[str, Any]) -> None:
        parent = (msg.get("parent_header") or {}).get("msg_id")
        queue = self._pending.get(parent) if parent else None
        if queue is None:
            return
        if queue.qsize() >= MAX_QUEUED:  # a reader that stopped reading: end its exchange
            self.done(parent, cancel=True)
            queue.put_nowait(None)
            return
        if msg.get("msg_type") != REPLY:
            queue.put_nowait(msg)
            return
        content = msg.get("content")
        ok = isinstance(content, dict) and isinstance(content.get("body", ""), str)
        queue.put_nowait(content if ok else {"status": 502, "body": "", "final": True})  # malformed: ended

    def _on_close(self) -> None:
        for queue in self._pending.values():
            queue.put_nowait(None)
        self._pending.clear()
        self._streams.clear()
        self._info = None

    def _send(self, wire: Wire, msg_type: str, content: dict[str, Any]) -> tuple[str, asyncio.Queue]:
        queue: asyncio.Queue[dict[str, Any] | None] = asyncio.Queue()
        try:
            msg_id = wire.send(msg_type, content)
        except WireClosed as exc:
            raise UpstreamError(str(exc)) from None
        self._pending[msg_id] = queue
        self.last_used = time.monotonic()
        return msg_id, queue

    def done(self, msg_id: str, cancel: bool = False) -> None:
        """Forget an exchange; with ``cancel``, tell the hub to end it."""
        if self._pending.pop(msg_id, None) is None:
            return
        self._streams.discard(msg_id)
        wire = self._wire
        if cancel and wire is not None and not wire.closed:
            with contextlib.suppress(WireClosed):
                wire.send(CANCEL, {"request": msg_id})

    # -- what the server extension asks --------------------------------------------------------
    async def info(self, timeout: float = INFO_SECONDS, no_hub_seconds: float = NO_HUB_SECONDS) -> dict[str, Any]:
        """The hub's runtime facts, token included (kept in this process only). A kernel found
        without a hub is not asked again for ``no_hub_seconds``."""
        if self._info is not None and self._wire is not None and not self._wire.closed:
            return self._info
        if self._no_hub is not None and time.monotonic() - self._no_hub[0] < no_hub_seconds:
            raise self._no_hub[1]
        wire = await self._ensure_wire()
        msg_id, queue = self._send(wire, INFO, {})
        try:
            reply = await asyncio.wait_for(queue.get(), timeout)
        except asyncio.TimeoutError:
            raise self._remember(KernelHasNoHub("no_answer", "")) from None
        finally:
            self._pending.pop(msg_id, None)
        content = (reply or {}).get("content") or {}
        if content.get("status") != "ok":
            raise self._remember(
                KernelHasNoHub(str(content.get("reason") or "error"), str(content.get("message") or ""))
            )
        self._no_hub = None
        self._info = content
        return content

    def _remember(self, exc: KernelHasNoHub) -> KernelHasNoHub:
        self._no_hub = (time.monotonic(), exc)
        return exc

    def forget_info(self) -> None:
        """The hub refused its token (it was reloaded): ask again next time."""
        self._info = None

    async def request(self, method: str, headers: dict[str, str], body: bytes | None) -> ChannelResponse:
        """Send one HTTP exchange to the hub; the reply once its status is known."""
        info = await self.info()
        wire = await self._ensure_wire()
        hub_headers = {k.lower(): v for k, v in headers.items()}
        parts = urlsplit(str(info.get("url") or "http://127.0.0.1/mcp"))
        hub_headers["host"] = parts.netloc or "127.0.0.1"
        if info.get("token"):
            hub_headers["authorization"] = f"Bearer {info['token']}"
        text = (body or b"").decode("utf-8", "replace")
        msg_id, queue = self._send(wire, REQUEST, {"method": method, "headers": hub_headers, "body": text})
        try:
            first = await asyncio.wait_for(queue.get(), REPLY_SECONDS)
        except asyncio.TimeoutError:
            self.done(msg_id, cancel=True)
            raise UpstreamError(f"the hub of kernel {self.kernel_id} did not answer in {REPLY_SECONDS:.0f} s") from None
        except asyncio.CancelledError:
            self.done(msg_id, cancel=True)
            raise
        if first is None:
            raise UpstreamError(f"the control channel of kernel {self.kernel_id} closed")
        reply = ChannelResponse(self, msg_id, queue, first)
        if reply.streaming and not first.get("final"):
            self._streams.add(msg_id)
            self._keep_alive()
        return reply

    def _keep_alive(self) -> None:
        if self._keepalive is None or self._keepalive.done():
            self._keepalive = asyncio.ensure_future(self._beat())

    async def _beat(self) -> None:
        while self._streams:
            await asyncio.sleep(KEEPALIVE_SECONDS)
            wire = self._wire
            if wire is None or wire.closed:
                return
            with contextlib.suppress(WireClosed):
                wire.send(KEEPALIVE, {})

    @property
    def idle(self) -> bool:
        return not self._pending

    @property
    def is_open(self) -> bool:
        return self._wire is not None and not self._wire.closed

    def close(self) -> None:
        """Close the wire; every exchange still open is cancelled at the hub first (a listen whose
        opening was under way would otherwise stay open there until its keepalive ran out)."""
        wire = self._wire
        if wire is not None and not wire.closed:
            for msg_id in list(self._pending):
                with contextlib.suppress(WireClosed):
                    wire.send(CANCEL, {"request": msg_id})
        if wire is not None:
            wire.close()
        self._on_close()
        if self._keepalive is not None:
            self._keepalive.cancel()

    async def aclose(self) -> None:
        """:meth:`close`, then wait until the wire's reader and the keepalive have ended (the server stops)."""
        wire, keepalive = self._wire, self._keepalive
        self.close()
        if wire is not None:
            await wire.wait_closed()
        if keepalive is not None:
            await asyncio.gather(keepalive, return_exceptions=True)


class LoopBridge:
    """A :class:`KernelChannel` used from other threads and loops (the front's worker threads and
    its listen loop); the channel itself stays on the server's loop. A ``hubclient.address.HubRoute``."""

    def __init__(self, channel: KernelChannel, loop: asyncio.AbstractEventLoop):
        self.channel = channel
        self.loop = loop

    def call(self, headers: dict[str, str], body: bytes, timeout: float) -> tuple[int, str, bytes]:
        async def whole() -> tuple[int, str, bytes]:
            reply = await self.channel.request("POST", headers, body)
            try:
                return reply.status, reply.header("content-type") or "", await reply.read()
            finally:
                reply.close()

        future = asyncio.run_coroutine_threadsafe(asyncio.wait_for(whole(), timeout), self.loop)
        try:
            return future.result(timeout + 1)
        except (asyncio.TimeoutError, TimeoutError):
            future.cancel()
            raise UpstreamError(f"no reply from kernel {self.channel.kernel_id} in {timeout:.0f} s") from None

    async def open(self, headers: dict[str, str], body: bytes, timeout: float) -> _BridgedResponse:
        """POST; the reply once its status is known. A caller that gives up (cancelled, timed out)
        never leaves the reply open behind it: a listen stream the hub would keep for nobody."""
        abandoned = threading.Event()

        async def opened() -> ChannelResponse:
            reply = await self.channel.request("POST", headers, body)
            if abandoned.is_set():
                reply.close()
            return reply

        future = asyncio.run_coroutine_threadsafe(opened(), self.loop)
        try:
            reply = await asyncio.wait_for(asyncio.shield(asyncio.wrap_future(future)), timeout)
        except BaseException:
            abandoned.set()
            future.add_done_callback(self._close_late)
            raise
        return _BridgedResponse(reply, self.loop)

    def _close_late(self, future: Any) -> None:
        if not future.cancelled() and future.exception() is None:
            with contextlib.suppress(RuntimeError):
                self.loop.call_soon_threadsafe(future.result().close)


class _BridgedResponse:
    """A :class:`ChannelResponse` read from another loop: each piece fetched on the channel's loop."""

    def __init__(self, reply: ChannelResponse, loop: asyncio.AbstractEventLoop):
        self._reply = reply
        self._loop = loop
        self.status = reply.status

    async def chunks(self) -> AsyncIterator[bytes]:
        pieces = self._reply.chunks()
        while True:
            step = asyncio.run_coroutine_threadsafe(pieces.__anext__(), self._loop)  # type: ignore[arg-type]
            try:
                yield await asyncio.wrap_future(step)
            except StopAsyncIteration:
                return

    def close(self) -> None:
        with contextlib.suppress(RuntimeError):
            self._loop.call_soon_threadsafe(self._reply.close)
