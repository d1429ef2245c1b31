"""Client sockets served through the loop's ``add_reader``, read and written with calls that keep
the GIL: one GIL hand-off per request while a cell runs (Linux; docs/DESIGN.md, "The cell comes
first", third cut).

uvloop's own transport takes the GIL twice per read (to lend a buffer, then to deliver the bytes)
and a busy cell often wins it back in between. Here the loop's poll callback takes it once; in that
callback the bytes are read (libc ``recv`` through ``PyDLL``, transport/libc_socket.py), handed to
the same protocol object every transport feeds (transport/connection.py: every rule of reading,
admission and hardening is shared), and a reply written inline is sent the same way, before the
GIL is let go. Only what does not fit at once (a reply of megabytes, a slow reader) is buffered
and written when the socket is writable, through the socket's own ``send``. The libc calls are
made while a cell runs or the worker pool answers requests (another thread of ours then waits for
the GIL, and letting go of it in a socket call means waiting for it again); otherwise nobody waits
for the GIL, and the socket's own ``recv``/``send`` cost less than a ctypes call.

:class:`HeldTransport` is the part of ``asyncio.Transport`` the connection uses (write, close,
abort, write_eof, pause/resume reading, flow control with ``pause_writing``/``resume_writing``,
``get_extra_info``), with asyncio's semantics: ``connection_lost`` comes later, on the loop, once;
``eof_received`` returning True keeps the transport open for the replies still to be written.
:class:`HeldListener` accepts connections on a listening socket.
"""

from __future__ import annotations

import asyncio
import collections
import errno
import logging
import os
import socket
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from .libc_socket import MAX_CALL_BYTES, MSG_DONTWAIT, SEND_FLAGS, LibcSocket, ReadBuffer

log = logging.getLogger(__name__)
AGAIN = (errno.EAGAIN, errno.EWOULDBLOCK, errno.EINTR)
HIGH_WATER = 64 * 1024  # asyncio's defaults: pause_writing above, resume_writing at or below LOW_WATER
LOW_WATER = 16 * 1024
IDLE_READ_BYTES = 64 * 1024  # one read between cells at most (a bytes object: below malloc's mmap threshold)
READS_PER_WAKE = 16  # reads per readiness of a client socket, at most
ACCEPTS_PER_WAKE = 64  # connections accepted per readiness of the listening socket
OUT_OF_FDS = (errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM)
ACCEPT_PAUSE_SECONDS = 1.0  # out of descriptors: stop accepting this long


if TYPE_CHECKING:  # a type only: not made at import (DESIGN, "Loading, eighth cut")

    class CellState(Protocol):
        """Whether the kernel's main thread runs a cell (transport/latency.py's CellSwitchInterval)."""

        cell_running: bool

    class PoolState(Protocol):
        """How many requests the worker pool is answering (transport/driver.py's ExchangeDriver)."""

        in_pool: int


class HeldTransport(asyncio.Transport):
    """One accepted client socket (see the module docstring)."""

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        sock: socket.socket,
        protocol: asyncio.Protocol,
        libc: LibcSocket,
        buffer: ReadBuffer,
        cell: CellState,
        pool: PoolState,
    ) -> None:
        super().__init__(
            {"socket": sock, "peername": _address(sock.getpeername), "sockname": _address(sock.getsockname)}
        )
        self._loop = loop
        self._sock = sock
        self._fd = sock.fileno()
        self._protocol = protocol
        self._recv, self._send, self._errno = libc.recv, libc.send, libc.errno
        self._in = buffer
        self._cell = cell  # cell.cell_running or pool.in_pool: keep the GIL in socket calls
        self._pool = pool
        self._out: collections.deque[memoryview] = collections.deque()
        self._out_size = 0
        self._high, self._low = HIGH_WATER, LOW_WATER
        self._writing_paused = False  # the protocol was told to pause writing
        self._reading = False  # the reader callback is registered
        self._paused = False  # pause_reading() in force
        self._eof_in = False  # the peer sent EOF
        self._eof_out = False  # write_eof() was called
        self._closing = False
        self._lost = False  # connection_lost is scheduled (or ran)
        self._writes = 0  # writes so far (a read that wrote nothing reads again: _read_ready)

    def start(self) -> None:
        """Tell the protocol, then read (unless it closed the transport at once)."""
        self._protocol.connection_made(self)
        if not self._closing and not self._paused:
            self._start_reading()

    # -- reading ---------------------------------------------------------------------------
    def _start_reading(self) -> None:
        if not self._reading:
            self._reading = True
            self._loop.add_reader(self._fd, self._read_ready)

    def _stop_reading(self) -> None:
        if self._reading:
            self._reading = False
            self._loop.remove_reader(self._fd)

    def _read_ready(self) -> None:
        """The socket is readable: read and hand the bytes to the protocol (the hot path, kept
        flat: a request and its reply cost this and :meth:`write`).

        A read that wrote no reply (part of a request, or one answered later) reads again: uvloop
        stops a reader for good when the poll reports an error (a reset that arrived with the last
        bytes) after running it once, and the next read finds the reset (or EAGAIN, the usual
        case), so such a connection ends now, not at its deadline. A read that handed a request to
        the worker pool does not: its reply, written later, finds a reset."""
        pool = self._pool
        reads = 1 + READS_PER_WAKE
        while reads:
            reads -= 1
            handed = pool.in_pool
            if self._cell.cell_running or handed:  # libc's recv, keeping the GIL (see _recv_failed)
                buf = self._in
                n = self._recv(self._fd, buf.pointer, buf.size, MSG_DONTWAIT)
                if n <= 0:
                    if n == 0:
                        self._read_eof()
                    else:
                        self._recv_failed()
                    return
                data = buf.view[:n].tobytes()  # copied out before the GIL can go
            else:  # no other thread of ours waits for the GIL: the socket's own recv
                try:
                    data = self._sock.recv(IDLE_READ_BYTES)
                except (BlockingIOError, InterruptedError):
                    return
                except OSError as exc:
                    self._fatal_error(exc, "recv failed")
                    return
                if not data:
                    self._read_eof()
                    return
            writes = self._writes
            try:
                self._protocol.data_received(data)
            except (SystemExit, KeyboardInterrupt):
                raise
            except BaseException as exc:
                self._fatal_error(exc, "data_received failed")
                return
            if self._writes != writes or pool.in_pool != handed or not self._reading:
                return

    def _recv_failed(self) -> None:
        """libc's recv (called inline by :meth:`_read_ready` while a cell runs or the pool answers:
        it keeps the GIL; otherwise the socket's own ``recv``, cheaper than a ctypes call when
        nobody waits for the GIL) returned -1: nothing now, or an error that ends the connection."""
        err = self._errno()
        if err not in AGAIN:
            self._fatal_error(OSError(err, os.strerror(err)), "recv failed")

    def _read_eof(self) -> None:
        self._eof_in = True
        self._stop_reading()
        try:
            keep_open = self._protocol.eof_received()
        except (SystemExit, KeyboardInterrupt):
            raise
        except BaseException as exc:
            self._fatal_error(exc, "eof_received failed")
            return
        if not keep_open:
            self.close()

    def pause_reading(self) -> None:
        if not self._closing and not self._paused:
            self._paused = True
            self._stop_reading()

    def resume_reading(self) -> None:
        if not self._closing and self._paused:
            self._paused = False
            if not self._eof_in:
                self._start_reading()

    def is_reading(self) -> bool:
        return self._reading

    # -- writing ---------------------------------------------------------------------------
    def write(self, data: bytes | bytearray | memoryview) -> None:
        if (
            type(data) is bytes
            and not self._out
            and not self._lost
            and not self._eof_out
            and len(data) < MAX_CALL_BYTES
        ):
            self._writes += 1  # the hot path: nothing buffered, sent now
            if self._cell.cell_running or self._pool.in_pool:  # libc's send, keeping the GIL
                n = self._send(self._fd, data, len(data), SEND_FLAGS)
                if n < 0:
                    n = self._send_failed()
            else:  # no other thread of ours waits for the GIL: the socket's own send
                try:
                    n = self._sock.send(data)
                except (BlockingIOError, InterruptedError):
                    n = 0
                except OSError as exc:
                    self._fatal_error(exc, "send failed")
                    return
            if 0 <= n < len(data):
                self._buffer_rest(data, n)
            return
        if self._eof_out:
            raise RuntimeError("Cannot call write() after write_eof()")
        if self._lost or not data:
            return
        self._writes += 1
        data = bytes(data)
        if self._out:
            self._out.append(memoryview(data))
            self._out_size += len(data)
            self._maybe_pause_protocol()
        else:
            self._buffer_rest(data, 0)

    def _send_failed(self) -> int:
        """libc's send (called inline by :meth:`write` while a cell runs or the pool answers)
        returned -1: 0 when the socket takes nothing now, -1 on an error (handled: the connection
        ends)."""
        err = self._errno()
        if err in AGAIN:
            return 0
        self._fatal_error(OSError(err, os.strerror(err)), "send failed")
        return -1

    def _buffer_rest(self, data: bytes, n: int) -> None:
        """Keep what ``send`` did not take (all but ``n`` bytes) for when the socket is writable."""
        rest = memoryview(data)[n:]
        self._out.append(rest)
        self._out_size += len(rest)
        self._loop.add_writer(self._fd, self._write_ready)
        self._maybe_pause_protocol()

    def writelines(self, list_of_data: Any) -> None:
        self.write(b"".join(list_of_data))

    def _write_ready(self) -> None:
        out = self._out
        while out:
            try:
                n = self._sock.send(out[0])
            except (BlockingIOError, InterruptedError):
                break
            except (SystemExit, KeyboardInterrupt):
                raise
            except BaseException as exc:
                self._fatal_error(exc, "send failed")
                return
            self._out_size -= n
            if n == len(out[0]):
                out.popleft()
            else:
                out[0] = out[0][n:]
                break
        self._maybe_resume_protocol()
        if out:
            return
        self._loop.remove_writer(self._fd)
        if self._closing:
            self._schedule_lost(None)
        elif self._eof_out:
            self._shutdown_write()

    def can_write_eof(self) -> bool:
        return True

    def write_eof(self) -> None:
        if self._closing or self._eof_out:
            return
        self._eof_out = True
        if not self._out:
            self._shutdown_write()

    def _shutdown_write(self) -> None:
        try:
            self._sock.shutdown(socket.SHUT_WR)
        except OSError as exc:
            self._fatal_error(exc, "shutdown failed")

    def get_write_buffer_size(self) -> int:
        return self._out_size

    def get_write_buffer_limits(self) -> tuple[int, int]:
        return self._low, self._high

    def set_write_buffer_limits(self, high: int | None = None, low: int | None = None) -> None:
        if high is None:
            high = HIGH_WATER if low is None else 4 * low
        if low is None:
            low = high // 4
        if not high >= low >= 0:
            raise ValueError(f"high ({high!r}) must be >= low ({low!r}) must be >= 0")
        self._high, self._low = high, low
        self._maybe_pause_protocol()

    def _maybe_pause_protocol(self) -> None:
        if self._out_size > self._high and not self._writing_paused:
            self._writing_paused = True
            self._call_protocol(self._protocol.pause_writing, "pause_writing failed")

    def _maybe_resume_protocol(self) -> None:
        if self._writing_paused and self._out_size <= self._low:
            self._writing_paused = False
            self._call_protocol(self._protocol.resume_writing, "resume_writing failed")

    def _call_protocol(self, method: Callable[[], None], what: str) -> None:
        try:
            method()
        except (SystemExit, KeyboardInterrupt):
            raise
        except BaseException as exc:
            self._loop.call_exception_handler({"message": what, "exception": exc, "transport": self})

    # -- closing ---------------------------------------------------------------------------
    def is_closing(self) -> bool:
        return self._closing

    def close(self) -> None:
        """Stop reading; close once what is buffered is written."""
        if self._closing:
            return
        self._closing = True
        self._stop_reading()
        if not self._out:
            self._schedule_lost(None)

    def abort(self) -> None:
        self._force_close(None)

    def _fatal_error(self, exc: BaseException, message: str) -> None:
        if not isinstance(exc, OSError):  # a peer's reset or a broken pipe is ordinary; anything else is not
            self._loop.call_exception_handler(
                {"message": message, "exception": exc, "transport": self, "protocol": self._protocol}
            )
        self._force_close(exc)

    def _force_close(self, exc: BaseException | None) -> None:
        if self._lost:
            return
        if self._out:
            self._out.clear()
            self._out_size = 0
            self._loop.remove_writer(self._fd)
        self._closing = True
        self._stop_reading()
        self._schedule_lost(exc)

    def _schedule_lost(self, exc: BaseException | None) -> None:
        if not self._lost:
            self._lost = True
            self._loop.call_soon(self._connection_lost, exc)

    def _connection_lost(self, exc: BaseException | None) -> None:
        try:
            self._protocol.connection_lost(exc if isinstance(exc, Exception) else None)
        finally:
            self._loop.remove_reader(self._fd)  # (before the descriptor can be reused)
            self._loop.remove_writer(self._fd)
            self._sock.close()

    def get_protocol(self) -> asyncio.BaseProtocol:
        return self._protocol

    def set_protocol(self, protocol: asyncio.BaseProtocol) -> None:
        self._protocol = protocol  # type: ignore[assignment]


def _address(call: Callable[[], Any]) -> Any:
    try:
        return call()
    except OSError:  # (a peer that left already)
        return None


class HeldListener:
    """Accepts connections on a listening socket and serves each through a :class:`HeldTransport`
    feeding a new ``factory()`` protocol; ``close`` stops accepting (the socket is the caller's)."""

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        sock: socket.socket,
        factory: Callable[[], asyncio.Protocol],
        libc: LibcSocket,
        cell: CellState,
        pool: PoolState,
    ) -> None:
        self._loop = loop
        self._cell = cell
        self._pool = pool
        self._sock = sock
        self._factory = factory
        self._libc = libc
        self._buffer = ReadBuffer()  # shared by this loop's connections: one thread reads
        self._serving = False
        self._resume: asyncio.TimerHandle | None = None
        self._start()

    def _start(self) -> None:
        self._resume = None
        if not self._serving:
            self._serving = True
            self._loop.add_reader(self._sock.fileno(), self._accept_ready)

    def _accept_ready(self) -> None:
        for _ in range(ACCEPTS_PER_WAKE):
            try:
                conn, _addr = self._sock.accept()
            except (BlockingIOError, InterruptedError, ConnectionAbortedError):
                return
            except OSError as exc:
                if exc.errno in OUT_OF_FDS:  # try again in a moment; the connections open are served
                    log.warning("accepting a connection failed (%s): pausing for %s s", exc, ACCEPT_PAUSE_SECONDS)
                    self.close()
                    self._resume = self._loop.call_later(ACCEPT_PAUSE_SECONDS, self._start)
                else:
                    log.warning("accepting a connection failed: %s", exc)
                return
            try:
                conn.setblocking(False)
                HeldTransport(
                    self._loop, conn, self._factory(), self._libc, self._buffer, self._cell, self._pool
                ).start()
            except Exception:
                log.exception("serving an accepted connection failed")
                conn.close()

    def close(self) -> None:
        """Stop accepting (connections already accepted go on)."""
        if self._resume is not None:
            self._resume.cancel()
            self._resume = None
        if self._serving:
            self._serving = False
            self._loop.remove_reader(self._sock.fileno())
