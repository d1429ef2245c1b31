"""Streamable HTTP over tornado, served from a daemon thread with its own asyncio loop.

The kernel's main thread is busy while a cell runs, so requests must be answered elsewhere.
The socket is bound by the caller's thread (errors surface in the cell that loaded us); the
thread only serves. POST bodies are handled on a small worker pool so a slow read (user code in
a ``__repr__``) never stalls the loop; SSE streams are pumped on the loop itself.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import threading
from concurrent.futures import ThreadPoolExecutor

import tornado.httpserver
import tornado.netutil
import tornado.web
from tornado.iostream import StreamClosedError

from ..protocol.server import HttpReply, HttpRequest, McpServer
from ..protocol.streams import Stream

log = logging.getLogger(__name__)
KEEPALIVE_SECONDS = 15.0
PATH = "/mcp"


class _McpHandler(tornado.web.RequestHandler):
    """One endpoint, three verbs; everything else is the protocol's business."""

    def initialize(self, transport: HttpTransport) -> None:  # tornado's hook, not __init__
        self.transport = transport
        self._gone = asyncio.Event()

    def set_default_headers(self) -> None:
        self.clear_header("Server")
        self.set_header("Cache-Control", "no-store")

    def check_xsrf_cookie(self) -> None:  # token auth, not cookies
        return None

    def on_connection_close(self) -> None:
        self._gone.set()

    def _request(self) -> HttpRequest | None:
        headers = {k.lower(): v for k, v in self.request.headers.get_all()}
        limit = self.transport.max_body_bytes
        if len(self.request.body) > limit:
            self._send(
                HttpReply.json(
                    {
                        "jsonrpc": "2.0",
                        "id": None,
                        "error": {"code": -32600, "message": f"Payload too large: the limit is {limit} bytes"},
                    },
                    413,
                )
            )
            return None
        return HttpRequest(self.request.method or "", headers, self.request.body)

    async def post(self) -> None:
        req = self._request()
        if req is None:
            return
        loop = asyncio.get_running_loop()
        reply = await loop.run_in_executor(self.transport.executor, self.transport.mcp.handle, req)
        await self._answer(reply)

    async def get(self) -> None:
        req = self._request()
        if req is not None:
            await self._answer(self.transport.mcp.handle(req))

    async def delete(self) -> None:
        req = self._request()
        if req is not None:
            await self._answer(self.transport.mcp.handle(req))

    async def options(self) -> None:
        req = self._request()
        if req is not None:
            await self._answer(self.transport.mcp.handle(req))

    async def put(self) -> None:
        await self.options()

    async def patch(self) -> None:
        await self.options()

    def _send(self, reply: HttpReply) -> None:
        self.set_status(reply.status)
        for name, value in reply.headers.items():
            self.set_header(name, value)
        if reply.body is not None:
            self.write(reply.body)

    async def _answer(self, reply: HttpReply) -> None:
        if reply.stream is None:
            self._send(reply)
            return
        stream = reply.stream
        self.transport.streams.add(stream)
        try:
            self._send(reply)
            self.set_header("Content-Type", "text/event-stream")
            self.set_header("X-Accel-Buffering", "no")
            await self._pump(stream)
        finally:
            self.transport.streams.discard(stream)
            self.transport.mcp.stream_closed(stream)

    async def _pump(self, stream: Stream) -> None:
        loop = asyncio.get_running_loop()
        ready = asyncio.Event()
        stream.set_waker(lambda: loop.call_soon_threadsafe(ready.set))
        try:
            await self.flush()
            while not self._gone.is_set():
                closed = stream.closed
                events = stream.drain()
                for event in events:
                    self.write(event)
                if events:
                    await self.flush()
                if closed:
                    return
                waiter = asyncio.ensure_future(ready.wait())
                gone = asyncio.ensure_future(self._gone.wait())
                done, pending = await asyncio.wait(
                    {waiter, gone}, timeout=KEEPALIVE_SECONDS, return_when=asyncio.FIRST_COMPLETED
                )
                for task in pending:
                    task.cancel()
                ready.clear()
                if not done:
                    self.write(b": keepalive\n\n")
                    await self.flush()
        except StreamClosedError:
            return


class HttpTransport:
    """Owns the listening socket, the server thread and its loop."""

    def __init__(self, mcp: McpServer, host: str, port: int, max_body_bytes: int):
        self.mcp = mcp
        self.max_body_bytes = max_body_bytes
        self.streams: set[Stream] = set()
        self.executor = ThreadPoolExecutor(max_workers=4, thread_name_prefix="mcp-notebook-req")
        self._sockets = tornado.netutil.bind_sockets(
            port, address=host, family=socket.AF_INET if ":" not in host else socket.AF_INET6
        )
        self.host = host
        self.port = self._sockets[0].getsockname()[1]
        self._loop: asyncio.AbstractEventLoop | None = None
        self._server: tornado.httpserver.HTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._started = threading.Event()
        self._error: BaseException | None = None

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
        loop = asyncio.new_event_loop()
        self._loop = loop
        asyncio.set_event_loop(loop)
        try:
            # No access log: the server thread must never write into the user's cell output.
            app = tornado.web.Application([(PATH, _McpHandler, {"transport": self})], log_function=lambda handler: None)
            self._server = tornado.httpserver.HTTPServer(
                app,
                max_body_size=max(self.max_body_bytes * 4, 1 << 20),
                idle_connection_timeout=300,
                xheaders=False,
            )
            self._server.add_sockets(self._sockets)
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
        if self._server is not None:
            self._server.stop()
        for _ in range(50):  # let stream pumps write their final events
            if not self.streams:
                break
            await asyncio.sleep(0.02)
        if self._server is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.close_all_connections(), 2)

    @property
    def alive(self) -> bool:
        return self._thread is not None and self._thread.is_alive()
