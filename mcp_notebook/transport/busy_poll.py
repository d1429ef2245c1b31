"""Keep the hub's loop polling for a moment after a reply, so a client's next request finds it awake.

On a keep-alive connection a client sends its next request tens of microseconds after our reply.
Sleeping in ``epoll_wait`` in between costs a wake-up of the hub thread for every request, which on
a virtual machine (an inter-processor interrupt through the hypervisor) is the largest single cost
of a small read: see docs/DESIGN.md for the figures.

On asyncio's loop, :class:`PollingSelector` polls (``epoll_wait`` with a zero timeout) in one tight
loop for ``window`` seconds after the last reply, then sleeps as before; on another loop (uvloop),
:class:`BusyPoll` keeps a callback pending for that long, which makes the loop poll instead of
sleep. An idle hub never polls, and the hub turns polling off while a cell runs (``enabled``), so
it never competes with the user's code for the GIL.
"""

from __future__ import annotations

import asyncio
import selectors
import time
from typing import Any

from .. import portable

_now = time.perf_counter


class BusyPoll:
    """Poll (instead of sleeping) for ``window`` seconds after each :meth:`touch`, while ``enabled``."""

    def __init__(self, window: float) -> None:
        self.window = window
        self.enabled = True
        self._until = 0.0
        self._pending = False
        self.spins = 0  # loop iterations spent polling (for tests and benchmarks)
        self.in_selector = False  # set by PollingSelector: it polls itself, no callbacks needed

    @property
    def active(self) -> bool:
        """Polling may happen: a window, enabled, and not the portable path (MCP_NOTEBOOK_PORTABLE)."""
        return self.window > 0 and self.enabled and not portable.ON

    def touch(self) -> None:
        """A reply went out: keep the loop awake for another ``window`` (call on the loop thread)."""
        if not self.active:
            return
        self._until = _now() + self.window
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
