"""libc's ``recv`` and ``send`` called through ``ctypes.PyDLL``: calls that keep the GIL (Linux).

A socket call from Python (``socket.recv``, ``os.read``) lets go of the GIL around the system call
and takes it back after. While a pure-Python cell runs, taking it back means waiting for the cell
to be asked to let go (one GIL switch interval): a second wait after the one every callback of the
hub's loop already paid. Called through ``PyDLL`` the same calls keep the GIL (they never block:
``MSG_DONTWAIT``), so a request is read, answered and its reply sent in one hold.
See docs/DESIGN.md, "The cell comes first", third cut.

:meth:`LibcSocket.precise_timers` sets the calling thread's timer slack to 1 ns (``prctl``): the
hub thread's wait for the GIL is a timed wait of one switch interval, which Linux otherwise lets
run up to 50 µs late (sixth cut).

:func:`load` answers None where this cannot be had (not Linux, no ctypes or libc symbols, the
portable path: ``MCP_NOTEBOOK_PORTABLE``); the transport then serves through its loop's own
sockets (transport/server.py).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

from .. import portable

MSG_DONTWAIT = 0x40  # Linux's values (this module is used on Linux only)
MSG_NOSIGNAL = 0x4000
SEND_FLAGS = MSG_DONTWAIT | MSG_NOSIGNAL  # never block, never SIGPIPE (EPIPE instead)
READ_BUFFER_BYTES = 256 * 1024  # what one read may take (uvloop's size too)
MAX_CALL_BYTES = 1 << 30  # a size passed as a C int (see _bind): larger writes take the socket's own send
PR_SET_TIMERSLACK = 29  # prctl's option (Linux): this thread's timer slack, in ns
PRECISE_SLACK_NS = 1  # (0 would mean "the thread's default" again)


class LibcSocket:
    """``recv(fd, pointer, size, flags)`` into a fixed buffer (:class:`ReadBuffer`) and
    ``send(fd, data, size, flags)`` of bytes, both keeping the GIL, and ``errno()`` (the failed
    call's errno). Sizes must stay below ``MAX_CALL_BYTES``."""

    __slots__ = ("_prctl", "errno", "recv", "send")

    def __init__(
        self,
        recv: Callable[..., int],
        send: Callable[..., int],
        errno: Callable[[], int],
        prctl: Callable[..., int] | None = None,
    ) -> None:
        self.recv = recv
        self.send = send
        self.errno = errno
        self._prctl = prctl

    def precise_timers(self) -> bool:
        """Wake the calling thread at its timers' exact times (timer slack 1 ns instead of Linux's
        50 µs default; this thread only). The hub thread asking for the GIL waits one switch
        interval on a timed condition variable before it asks the cell to let go: with the default
        slack that wait ends up to 50 µs late on every read during a busy cell. True: set."""
        if self._prctl is None:
            return False
        return self._prctl(PR_SET_TIMERSLACK, PRECISE_SLACK_NS, 0, 0, 0) == 0


class ReadBuffer:
    """A fixed buffer ``recv`` fills (``pointer``) and the bytes are copied out of (``view``).

    One per loop thread: the bytes are copied out before the GIL can be let go, by the same thread."""

    __slots__ = ("_array", "pointer", "size", "view")

    def __init__(self, size: int = READ_BUFFER_BYTES) -> None:
        import ctypes

        self._array = bytearray(size)
        self.size = size
        self.view = memoryview(self._array)
        self.pointer = ctypes.c_void_p(ctypes.addressof((ctypes.c_char * size).from_buffer(self._array)))


_loaded: list[LibcSocket | None] = []  # [] until load() ran once


def load() -> LibcSocket | None:
    """libc's socket calls that keep the GIL, or None where they cannot be had (see the module doc)."""
    if portable.ON or not sys.platform.startswith("linux"):
        return None
    if not _loaded:
        _loaded.append(_bind())
    return _loaded[0]


def _bind() -> LibcSocket | None:
    try:
        import ctypes

        libc: Any = ctypes.PyDLL(None, use_errno=True)  # PyDLL: the call keeps the GIL
        recv, send = libc.recv, libc.send
    except (ImportError, OSError, AttributeError):
        return None
    # No argtypes: converting through them costs ~1.7 us a call, about what the whole read costs
    # otherwise. Without them ctypes passes a Python int as a C int (sign-extended into the 64-bit
    # register, so right for sizes below 2**31: callers keep to that), bytes as a pointer to their
    # buffer, and a c_void_p as itself.
    recv.restype = ctypes.c_ssize_t
    send.restype = ctypes.c_ssize_t
    return LibcSocket(recv, send, ctypes.get_errno, getattr(libc, "prctl", None))
