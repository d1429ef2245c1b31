"""A shorter GIL switch interval while a cell runs and a client is connected (docs/DESIGN.md,
"The cell comes first").

While a pure-Python cell runs, the kernel's main thread holds the GIL; the hub thread waits for it
before it can answer a read, and CPython only asks the running thread to let go after the switch
interval (5 ms by default), once per hand-over. uvloop takes the GIL twice per request (to lend a
buffer, then to deliver the bytes), and the cell often wins it back in between, so a read during a
busy cell took one or two full intervals. With a shorter interval each wait is that much shorter.

The interval is process-wide, so it is lowered only while both hold: a cell is running and a
client that passed admission is connected; it is never raised above the user's own setting, and it
is put back exactly as it was (unless the user changed it meanwhile: theirs wins) when the cell
ends, the last client leaves, or the hub stops. ``MCPHub.switch_interval_us = 0`` turns it off.
"""

from __future__ import annotations

import sys
import threading


class CellSwitchInterval:
    """Owns the process's switch interval while (cell running) and (a client connected)."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds  # the interval wanted; <= 0: never touch the process setting
        self.cell_running = False
        self.clients = 0
        self._lock = threading.Lock()
        self._saved: float | None = None  # the user's interval, while ours is in force
        self._ours = 0.0  # what the interpreter reported after we set ours

    @property
    def lowered(self) -> bool:
        return self._saved is not None

    def cell(self, running: bool) -> None:
        """The kernel's main thread starts (True) or ends (False) a cell."""
        self.cell_running = running
        self._update()

    def client(self, delta: int) -> None:
        """A client connection passed admission (+1) or closed (-1) (on the hub thread)."""
        with self._lock:
            self.clients = max(0, self.clients + delta)
        self._update()

    def restore(self) -> None:
        """Put the user's interval back (the hub stops); nothing is lowered again until a new cell."""
        self.cell_running = False
        self._update()

    def _update(self) -> None:
        with self._lock:
            want = self.cell_running and self.clients > 0 and self.seconds > 0
            if want and self._saved is None:
                saved = sys.getswitchinterval()
                if self.seconds < saved:
                    sys.setswitchinterval(self.seconds)
                    self._saved, self._ours = saved, sys.getswitchinterval()
            elif not want and self._saved is not None:
                if sys.getswitchinterval() == self._ours:  # else the user set another one meanwhile
                    sys.setswitchinterval(self._saved)
                self._saved = None
