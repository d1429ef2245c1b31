"""Server-to-client SSE streams as outboxes: the protocol pushes, a transport drains.

Pushing is thread-safe (hub events come from the kernel's main thread or the hub's worker);
the transport installs a waker that schedules a drain on its own event loop.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Iterable
from typing import Any

from ..redact import REDACTOR
from .jsonrpc import dumps

MAX_BACKLOG = 1000
_UPDATED = b'event: message\ndata: {"jsonrpc":"2.0","method":"notifications/resources/updated","params":{'
_URI_JSON: dict[str, bytes] = {}  # a URI's masked JSON, while the redactor's secrets stay the same
_URI_JSON_VERSION = [-1]


def sse_event(message: dict[str, Any]) -> bytes:
    return b"event: message\ndata: " + dumps(message) + b"\n\n"


def updated_events(uris: Iterable[str], meta: dict[str, Any] | None = None) -> list[bytes]:
    """``sse_event(notification("notifications/resources/updated", {"_meta": meta, "uri": uri}))``
    for each URI, byte for byte, built from parts: the masked ``_meta`` once per stream and each
    URI's masked JSON once per redactor version (a cell that changes 1,000 watched values)."""
    head = _UPDATED
    if meta is not None:
        head += b'"_meta":' + dumps(REDACTOR.mask_obj(meta)) + b","
    head += b'"uri":'
    if _URI_JSON_VERSION[0] != REDACTOR.version or len(_URI_JSON) > 50_000:
        _URI_JSON.clear()
        _URI_JSON_VERSION[0] = REDACTOR.version
    out = []
    for uri in uris:
        enc = _URI_JSON.get(uri)
        if enc is None:
            enc = _URI_JSON[uri] = dumps(REDACTOR.mask(uri))
        out.append(head + enc + b"}}\n\n")
    return out


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
        return self.push_many((message,))

    def push_many(self, messages: Iterable[dict[str, Any]]) -> bool:
        """Queue messages in order, with one wake-up of the transport for all of them (a cell that
        changes 1,000 watched values wakes each stream once, not 1,000 times)."""
        return self.push_events([sse_event(m) for m in messages])

    def push_events(self, events: list[bytes]) -> bool:
        """Queue encoded SSE events in order, with one wake-up."""
        with self._lock:
            if self.closed:
                return False
            self._events.extend(events)
            excess = len(self._events) - MAX_BACKLOG
            for _ in range(max(0, excess)):  # a stalled reader must not grow memory forever
                self._events.popleft()
            self.dropped += max(0, excess)
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
