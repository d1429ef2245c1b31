"""Streamable HTTP for one McpServer: the listening socket, the hub thread and its loop.

The kernel's main thread is busy while a cell runs, so requests are answered elsewhere: a daemon
thread runs its own loop (loop.py) and accepts connections (connection.py), which speak HTTP/1.1
(protocol/wire_http11.py) and hand requests to the protocol. The socket is bound by the caller's thread, so an
error (address in use) surfaces in the cell that loaded us; the thread only serves. Requests that
may run user code (a ``__repr__``, a custom resource) go to a small worker pool so they never
stall the loop; the rest, and event streams, are handled on the loop itself. On Linux the client
sockets are read and written with calls that keep the GIL (held_stream.py: one GIL hand-off per
request while a cell runs); elsewhere, on the portable path, or with ``held_sockets=False``,
through the loop's own transports. Both feed the same Connection.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from ..logs import log, loop_exception_handler
from ..protocol.server import McpServer
from ..protocol.streams import Stream
from .connection import LINGER_SECONDS, PATH, Connection
from .driver import ExchangeDriver
from .held_stream import HeldListener
from .latency import AdmittedHeads, BusyPoll, CellSwitchInterval
from .libc_socket import load as load_libc_socket
from .loop import bind_socket, new_loop

HEAD_SECONDS = 10.0  # a request head must be complete this long after its first byte
BODY_SECONDS = 60.0  # a body must be complete this long after its head
MAX_CONNECTIONS = 256
BUSY_POLL_SECONDS = 50e-6  # keep polling this long after a reply (see latency.py)
HOLD_LIMIT = 2.0  # start(hold=True): the thread waits at most this long for release()


class HttpTransport:
    """Owns the listening socket, the server thread and its loop, and the connections' shared
    state (limits, worker pool and exchange driver, remembered heads, open streams)."""

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
        switch_interval: float = 0.0,
        held_sockets: bool = True,
    ):
        self.mcp = mcp
        self.max_body_bytes = max_body_bytes
        self.max_connections = max_connections
        self.head_timeout = head_timeout
        self.body_timeout = body_timeout
        self.streams: set[Stream] = set()
        self.connections: dict[Connection, None] = {}  # oldest first
        self.stopping = False
        # four workers; each thread runs _worker_started first
        self.executor = ThreadPoolExecutor(4, "mcp-notebook-req", self._worker_started)
        self.driver = ExchangeDriver(mcp, self.executor)  # the connections' exchanges
        self._sockets = [bind_socket(host, port)]
        self.host = host
        self.port = self._sockets[0].getsockname()[1]
        self._loop: asyncio.AbstractEventLoop | None = None
        self._servers: list[asyncio.AbstractServer | HeldListener] = []
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()  # the thread's loop and listeners are made (or failed)
        self._go = threading.Event()  # the thread may make its loop (start(hold=True) until release())
        self._sweep: asyncio.TimerHandle | None = None
        self.busy_poll = BusyPoll(busy_poll_seconds)
        self.heads = AdmittedHeads()
        self.loop_kind = loop_kind
        self.switch = CellSwitchInterval(switch_interval)  # the GIL switch interval during cells
        # Client sockets read and written with calls that keep the GIL (held_stream.py), where they
        # can be had (Linux, not the portable path); else the loop's own transports.
        self._libc = load_libc_socket() if held_sockets else None
        self.precise_timers = False  # the hub thread's timer slack is 1 ns (set on the thread, held path)

    def _worker_started(self) -> None:
        """A worker thread of the pool starts: its GIL waits end on time too (held path)."""
        if self._libc is not None:
            self._libc.precise_timers()

    @property
    def held_sockets(self) -> bool:
        """Whether connections are served by held_stream.py (one GIL hand-off per request)."""
        return self._libc is not None

    def admit_connection(self, conn: Connection) -> bool:
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
                if other.http.closed:
                    continue
                if not other.trusted and not other.http.busy:
                    victim = other
                    break
                if fallback is None and other.idle:
                    fallback = other
            victim = victim or fallback
            if victim is not None:
                victim.evict()
            elif sum(1 for other in conns if not other.http.closed) >= self.max_connections:
                return False
        conns[conn] = None
        if self._sweep is None:
            self._schedule_sweep()
        return True

    def client_count(self, delta: int) -> None:
        """A connection passed admission (+1) or one that had closed (-1)."""
        self.switch.client(delta)

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
    def loop(self) -> asyncio.AbstractEventLoop | None:
        """The hub thread's loop (once started): other carriers run their exchanges on it."""
        return self._loop

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}{PATH}"

    def start(self, on_ready: Callable[[], None] | None = None, wait: bool = True, hold: bool = False) -> None:
        """Start the server thread. It makes its loop (importing uvloop there) and listeners, calls
        ``on_ready`` (another carrier that needs the loop), then serves. With ``wait`` False, return
        at once: the socket listens already, so a client that connects before the loop turns waits
        in the backlog until it does, and an error on the thread goes to the log and leaves
        ``alive`` False (docs/DESIGN.md, "Loading, sixth cut"); else wait, and raise that error.
        With ``hold``, the thread does nothing until :meth:`release` (or ``HOLD_LIMIT`` seconds):
        the caller's remaining steps do not wait for the GIL behind its imports (docs/DESIGN.md,
        "Loading, seventh cut")."""
        if not hold:
            self._go.set()
        self._thread = threading.Thread(target=self._run, args=(on_ready,), name="mcp-notebook-http", daemon=True)
        self._thread.start()
        if wait and not self.wait_ready():
            raise RuntimeError("the MCP HTTP server did not start (its log says why)")

    def release(self) -> None:
        """Let a thread started with ``hold`` make its loop and serve (idempotent)."""
        self._go.set()

    def wait_ready(self, timeout: float = 10.0) -> bool:
        """Wait until the thread has made its loop and listeners (or failed to); True if it did.
        A thread still held is released first: whoever waits for it wants it serving."""
        self._go.set()
        return self._ready.wait(timeout) and self._loop is not None

    def _make_loop(self) -> asyncio.AbstractEventLoop:
        loop = new_loop(self.loop_kind, self.busy_poll)
        loop.set_exception_handler(loop_exception_handler)  # the loop's errors go to our log, not stderr
        asyncio.set_event_loop(loop)
        try:
            for sock in self._sockets:
                if self._libc is not None:  # add_reader: no need for the loop to run
                    self._servers.append(
                        HeldListener(loop, sock, lambda: Connection(self), self._libc, self.switch, self.driver)
                    )
                else:  # the loop's own server: made by its first turn
                    loop.create_task(self._serve(sock))
        except BaseException:
            loop.close()
            raise
        return loop

    async def _serve(self, sock: socket.socket) -> None:
        try:
            server = await asyncio.get_running_loop().create_server(lambda: Connection(self), sock=sock)
        except Exception:
            log.exception("the MCP HTTP server could not serve on its socket")
            return
        self._servers.append(server)
        if self.stopping:  # stopped while it was being made
            server.close()

    def _run(self, on_ready: Callable[[], None] | None) -> None:
        self._go.wait(HOLD_LIMIT)  # a caller that never releases (an error) delays serving, no more
        if self._libc is not None:  # its GIL waits end on time (libc_socket.py, precise_timers)
            self.precise_timers = self._libc.precise_timers()
        try:
            loop = self._make_loop()
        except BaseException:
            log.exception("the MCP HTTP server could not start")
            self._ready.set()
            return
        self._loop = loop
        if on_ready is not None:
            try:
                on_ready()
            except Exception:
                log.exception("starting with the server's loop")
        self._ready.set()
        try:
            loop.run_forever()
        finally:
            with contextlib.suppress(Exception):
                loop.run_until_complete(loop.shutdown_asyncgens())
            loop.close()

    def stop(self, timeout: float = 5.0) -> None:
        """End streams, close the socket and connections, stop the loop, join the thread."""
        if self._thread is not None:
            self._go.set()
            self._ready.wait(timeout)  # stopped just after start: its loop exists, or never will
        self.mcp.close()
        self.switch.restore()
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
            conn.close()
        for _ in range(50):  # closing flushes buffered replies first
            if not self.connections:
                break
            await asyncio.sleep(0.02)
        for conn in list(self.connections):
            if conn.io is not None:
                conn.io.abort()
        for task in list(self.driver.tasks):
            task.cancel()

    @property
    def alive(self) -> bool:
        return self._thread is not None and self._thread.is_alive()
