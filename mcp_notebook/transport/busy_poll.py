"""Keep the hub's loop polling for a moment after a reply, so a client's next request finds it awake.

On a keep-alive connection a client sends its next request tens of microseconds after our reply.
Sleeping in ``epoll_wait`` in between costs a wake-up of the hub thread for every request, which on
a virtual machine (an inter-processor interrupt through the hypervisor) is the largest single cost
of a small read: measured 9.8k -> 13.3k reads/s on one connection from this alone (docs/DESIGN.md).

While a callback is pending, asyncio's and uvloop's loops poll with a zero timeout instead of
sleeping; :class:`BusyPoll` keeps one such callback going for ``window`` seconds after the last
reply and then lets the loop sleep as before. An idle hub never polls, and the hub turns polling
off while a cell runs (``enabled``), so it never competes with the user's code for the GIL.
"""

from __future__ import annotations

import asyncio
import time

_now = time.perf_counter


class BusyPoll:
    """Poll (instead of sleeping) for ``window`` seconds after each :meth:`touch`, while ``enabled``."""

    def __init__(self, window: float) -> None:
        self.window = window
        self.enabled = True
        self._until = 0.0
        self._pending = False
        self.spins = 0  # loop iterations spent polling (for tests and benchmarks)

    def touch(self) -> None:
        """A reply went out: keep the loop awake for another ``window`` (call on the loop thread)."""
        if self.window <= 0 or not self.enabled:
            return
        self._until = _now() + self.window
        if not self._pending:
            self._pending = True
            asyncio.get_running_loop().call_soon(self._spin)

    def _spin(self) -> None:
        if self.enabled and _now() < self._until:
            self.spins += 1
            asyncio.get_running_loop().call_soon(self._spin)
        else:
            self._pending = False
