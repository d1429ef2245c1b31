"""Server-to-client SSE streams as outboxes: the protocol pushes, a transport drains.

Pushing is thread-safe (hub events come from the kernel's main thread or the hub's worker);
the transport installs a waker that schedules a drain on its own event loop.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable
from typing import Any

from .jsonrpc import dumps

MAX_BACKLOG = 1000


def sse_event(message: dict[str, Any]) -> bytes:
    return b"event: message\ndata: " + dumps(message) + b"\n\n"


class Stream:
    """One open SSE stream: a GET stream of a session, or a subscriptions/listen stream."""

    def __init__(self, kind: str, key: Any = None):
        self.kind = kind  # "session" or "listen"
        self.key = key
        self._events: deque[bytes] = deque()
        self._lock = threading.Lock()
        self._waker: Callable[[], None] | None = None
        self.closed = False  # no more events will be added
        self.dropped = 0

    def set_waker(self, waker: Callable[[], None]) -> None:
        self._waker = waker
        if self._events or self.closed:
            waker()

    def push(self, message: dict[str, Any]) -> bool:
        with self._lock:
            if self.closed:
                return False
            if len(self._events) >= MAX_BACKLOG:  # a stalled reader must not grow memory forever
                self._events.popleft()
                self.dropped += 1
            self._events.append(sse_event(message))
        self._wake()
        return True

    def close(self, final: dict[str, Any] | None = None) -> None:
        with self._lock:
            if self.closed:
                return
            if final is not None:
                self._events.append(sse_event(final))
            self.closed = True
        self._wake()

    def drain(self) -> list[bytes]:
        with self._lock:
            events = list(self._events)
            self._events.clear()
        return events

    def _wake(self) -> None:
        waker = self._waker
        if waker is not None:
            try:
                waker()
            except RuntimeError:  # the transport's loop is already gone
                pass
