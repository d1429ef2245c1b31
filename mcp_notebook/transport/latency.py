"""What keeps a read's latency low, none of it HTTP: request heads admitted before, remembered by
their bytes; polling for a moment after a reply; a shorter GIL switch interval while a cell runs.

**Heads.** Request heads admitted before, remembered by their bytes.

A client repeats its head byte for byte (only the body's id changes), and parsing and admission
(Host, Origin, token) are pure functions of those bytes and the server's settings: a head seen
before under the same settings object skips both. The memory is bounded (cleared when full) and
keeps only heads with a body of known length. Each head keeps the server's replay memo, opaque
here: the server alone knows what it means (protocol/fast_read.py, protocol/families.py). While
the memory is ``full`` a connection with a head family tries it before looking a head up (a client
rotating over more URIs than it holds: docs/DESIGN.md, "Many connections, third cut").

**Busy poll.** Keep the hub's loop polling for a moment after a reply, so a client's next
request finds it awake.

On a keep-alive connection a client sends its next request tens of microseconds after our reply.
Sleeping in ``epoll_wait`` in between costs a wake-up of the hub thread for every request, which on
a virtual machine (an inter-processor interrupt through the hypervisor) is the largest single cost
of a small read: see docs/DESIGN.md for the figures.

On asyncio's loop, :class:`PollingSelector` polls (``epoll_wait`` with a zero timeout) in one tight
loop for ``window`` seconds after the last reply, then sleeps as before; on another loop (uvloop),
:class:`BusyPoll` keeps a callback pending for that long, which makes the loop poll instead of
sleep. An idle hub never polls, and the hub turns polling off while a cell runs (``enabled``), so
it never competes with the user's code for the GIL.

**Switch interval.** A shorter GIL switch interval while a cell runs and a client is connected
(docs/DESIGN.md, "The cell comes first").

While a pure-Python cell runs, the kernel's main thread holds the GIL; the hub thread waits for it
before it can answer a read, and CPython only asks the running thread to let go after the switch
interval (5 ms by default), once per hand-over. uvloop takes the GIL twice per request (to lend a
buffer, then to deliver the bytes), and the cell often wins it back in between, so a read during a
busy cell took one or two full intervals. With a shorter interval each wait is that much shorter;
on Linux the hub's own transport (held_stream.py) makes it one wait per request.

The interval is process-wide, so it is lowered only while both hold: a cell is running and a
client that passed admission is connected; it is never raised above the user's own setting, and it
is put back exactly as it was (unless the user changed it meanwhile: theirs wins) when the cell
ends, the last client leaves, or the hub stops. ``MCPHub.switch_interval_us = 0`` turns it off.
"""

from __future__ import annotations

import asyncio
import selectors
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

from .. import portable
from ..protocol.wire_http11 import HEAD_END, BadRequest, RequestHead, parse_head

# -- heads admitted before ---------------------------------------------------------------------
HEADS_KEPT = 256  # admitted heads remembered per transport (cleared when full)
HEAD_KEPT_BYTES = 4096  # longer heads are not remembered


class AdmittedHead:
    """A head admitted under ``settings`` (``block``: its bytes with the blank line), the protocol's
    replay memo for requests sent with it, if any, and the encoded header lines of its replies."""

    __slots__ = ("block", "keep_alive", "proto", "replay", "reply_block", "reply_headers", "seen", "settings")

    def __init__(self, block: bytes, proto: RequestHead, settings: object):
        self.block = block
        self.proto = proto
        self.settings = settings
        self.keep_alive = proto.keep_alive and proto.is_http11
        self.replay: object | None = None
        self.seen = False  # a request was answered under this head (a replay is learnt on the second)
        self.reply_headers: dict[str, str] | None = None
        self.reply_block = b""


class AdmittedHeads:
    """The bounded memory of admitted heads of one transport."""

    __slots__ = ("_heads", "full")

    def __init__(self) -> None:
        self._heads: dict[bytes, AdmittedHead] = {}
        self.full = False  # no head may be adopted (an attribute: read after every family read)

    def get(self, block: bytes, settings: object) -> AdmittedHead | None:
        """The remembered head with these bytes (no blank line), if admitted under ``settings``."""
        known = self._heads.get(block)
        return known if known is not None and known.settings is settings else None

    def remember(self, block: bytes, head: RequestHead, settings: object) -> AdmittedHead | None:
        """Remember a head that passed admission under ``settings`` (None: not kept)."""
        if len(block) > HEAD_KEPT_BYTES or head.chunked:
            return None
        if len(self._heads) >= HEADS_KEPT:
            self.clear()
        known = self._heads[block] = AdmittedHead(block + HEAD_END, head.copy(), settings)
        self.full = len(self._heads) >= HEADS_KEPT - 1
        return known

    def adopt(self, block: bytes, like: AdmittedHead, memo: Callable[[], object]) -> None:
        """Remember ``block`` (a head with its blank line) as admitted like ``like``, with the replay
        memo ``memo()``: the server answered a request with these bytes from ``like``'s memo (they
        differ only in values admission does not read). A head remembered already without a memo
        (its first request was not learnt) takes this one. Never clears the memory."""
        known = self._heads.get(block[:-4])
        if known is not None:
            if known.replay is None and known.settings is like.settings:
                known.replay, known.seen = memo(), True
            return
        if len(block) > HEAD_KEPT_BYTES:
            return
        try:
            parsed = parse_head(block[:-4])
        except BadRequest:
            return
        head = self._heads[block[:-4]] = AdmittedHead(block, parsed, like.settings)
        head.replay, head.seen = memo(), True
        self.full = len(self._heads) >= HEADS_KEPT - 1

    def clear(self) -> None:
        """Forget every head."""
        self._heads.clear()
        self.full = False

    def __len__(self) -> int:
        return len(self._heads)


class ConnectionMemos:
    """One connection's memos of what it was sent (performance, not HTTP state: forgetting them
    changes no reply): the remembered head being read and the one sent last (the fast path's
    replay), and the server's head family learnt on this connection (protocol/families.py)."""

    __slots__ = ("admitted", "family", "family_first", "family_head", "family_tries", "last_head")

    def __init__(self) -> None:
        self.admitted: AdmittedHead | None = None  # the remembered form of the head being read
        self.last_head: AdmittedHead | None = None  # the remembered head this connection sent last
        self.family: object | None = None  # the server's memo of requests like one head's (families.py)
        self.family_head: AdmittedHead | None = None  # ... the head it was learnt on
        self.family_tries = 0  # attempts at learning one (bounded per connection)
        self.family_first = False  # try the family before the memory of heads (it misses this client's)


# -- polling after a reply ---------------------------------------------------------------------
_now = time.perf_counter
CROWD_WINDOWS = 20  # replies to two clients within one window: no polling for this many windows


class BusyPoll:
    """Poll (instead of sleeping) for ``window`` seconds after each :meth:`touch`, while ``enabled``
    and while the replies go to one client at a time."""

    def __init__(self, window: float) -> None:
        self.window = window
        self.enabled = True
        self._until = 0.0
        self._pending = False
        self._last = 0.0  # when the last reply went out
        self._source: object = None  # ... and to which connection
        self._crowded_until = 0.0  # replies to several clients close together: no polling until then
        self.spins = 0  # loop iterations spent polling (for tests and benchmarks)
        self.in_selector = False  # set by PollingSelector: it polls itself, no callbacks needed

    @property
    def active(self) -> bool:
        """Polling may happen: a window, enabled, and not the portable path (MCP_NOTEBOOK_PORTABLE)."""
        return self.window > 0 and self.enabled and not portable.ON

    def touch(self, source: object = None) -> None:
        """A reply went out to ``source`` (a connection): keep the loop awake for another ``window``,
        unless another connection got one within the last window (call on the loop thread)."""
        if self.window <= 0 or not self.enabled or portable.ON:  # (not active, inlined: every reply)
            return
        now = _now()
        if source is not self._source:
            if now - self._last < self.window:  # several clients at once: their requests batch in one wait
                self._crowded_until = now + CROWD_WINDOWS * self.window
            self._source = source
        self._last = now
        if now < self._crowded_until:
            return
        self._until = now + self.window
        if self.in_selector:
            return
        if not self._pending:
            self._pending = True
            asyncio.get_running_loop().call_soon(self._spin)

    def _spin(self) -> None:
        if self.enabled and _now() < self._until:
            self.spins += 1
            asyncio.get_running_loop().call_soon(self._spin)
        else:
            self._pending = False


class PollingSelector(selectors.DefaultSelector):  # type: ignore[misc,valid-type]
    """For asyncio's own loop: poll without sleeping while ``poll`` is hot, in one tight loop."""

    def __init__(self, poll: BusyPoll) -> None:
        super().__init__()
        self.poll = poll
        poll.in_selector = True

    def select(self, timeout: float | None = None) -> list[tuple[selectors.SelectorKey, Any]]:
        poll = self.poll
        if timeout != 0 and poll.enabled:
            until = poll._until
            if timeout is not None:
                until = min(until, _now() + timeout)
            select = super().select
            while _now() < until:
                poll.spins += 1
                events = select(0)
                if events:
                    return events
        return super().select(timeout)


# -- the switch interval while a cell runs -----------------------------------------------------
class CellSwitchInterval:
    """Owns the process's switch interval while (cell running) and (a client connected)."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds  # the interval wanted; <= 0: never touch the process setting
        self.cell_running = False
        self.clients = 0
        self._lock = threading.Lock()
        self.saved: float | None = None  # the user's interval, while ours is in force (read by the hub's hooks)
        self._ours = 0.0  # what the interpreter reported after we set ours

    @property
    def lowered(self) -> bool:
        return self.saved is not None

    def cell(self, running: bool) -> None:
        """The kernel's main thread starts (True) or ends (False) a cell (``cell_running`` is also
        read by held_stream.py: socket calls that keep the GIL while a cell runs). The hub's cell
        hooks inline these three lines (no call a cell): keep them in step."""
        self.cell_running = running  # first: a client arriving after the check below sees it
        if not self.clients and self.saved is None:
            return  # no client, nothing lowered: nothing to do (every cell, no lock)
        self.update()

    def client(self, delta: int) -> None:
        """A client connection passed admission (+1) or closed (-1) (on the hub thread)."""
        with self._lock:
            self.clients = max(0, self.clients + delta)
        self.update()

    def restore(self) -> None:
        """Put the user's interval back (the hub stops); nothing is lowered again until a new cell."""
        self.cell_running = False
        self.update()

    def update(self) -> None:
        """Lower or restore the interval to fit (cell running, clients); any thread."""
        with self._lock:
            want = self.cell_running and self.clients > 0 and self.seconds > 0
            if want and self.saved is None:
                saved = sys.getswitchinterval()
                if self.seconds < saved:
                    sys.setswitchinterval(self.seconds)
                    self.saved, self._ours = saved, sys.getswitchinterval()
            elif not want and self.saved is not None:
                if sys.getswitchinterval() == self._ours:  # else the user set another one meanwhile
                    sys.setswitchinterval(self.saved)
                self.saved = None
