"""Server-to-client streams as outboxes: the protocol pushes messages, a carrier drains them.

A stream holds each message encoded once (compact JSON); an HTTP carrier drains them framed as SSE
events (:meth:`Stream.drain`), a message carrier as the messages themselves
(:meth:`Stream.drain_messages`: the stdio bridge). Pushing is thread-safe (hub events come from the
kernel's main thread or the hub's worker); the carrier installs a waker that schedules a drain.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Iterable
from typing import Any

from ..redact import REDACTOR
from .jsonrpc import dumps

MAX_BACKLOG = 1000
SSE_HEAD = b"event: message\ndata: "  # an event's framing: SSE_HEAD + message + SSE_END
SSE_END = b"\n\n"
_UPDATED = b'{"jsonrpc":"2.0","method":"notifications/resources/updated","params":{'
_URI_JSON: dict[str, bytes] = {}  # a URI's masked JSON, while the redactor's secrets stay the same
_URI_JSON_VERSION = [-1]


def sse_event(message: dict[str, Any]) -> bytes:
    return SSE_HEAD + dumps(message) + SSE_END


def updated_messages(uris: Iterable[str], meta: dict[str, Any] | None = None) -> list[bytes]:
    """``dumps(notification("notifications/resources/updated", {"_meta": meta, "uri": uri}))``
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
        out.append(head + enc + b"}}")
    return out


class Stream:
    """One open stream: a GET stream of a session, a subscriptions/listen stream, or a request's
    answer carrying its log messages before its result ("response")."""

    def __init__(self, kind: str, key: Any = None):
        self.kind = kind  # "session", "listen" or "response"
        self.key = key
        self._events: deque[bytes] = deque()  # the messages, encoded
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
        return self.push_encoded([dumps(m) for m in messages])

    def push_encoded(self, events: list[bytes]) -> bool:
        """Queue encoded messages in order, with one wake-up."""
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
                self._events.append(dumps(final))
            self.closed = True
        self._wake()

    def drain(self) -> list[bytes]:
        """The messages queued so far, as SSE events (an HTTP carrier's framing)."""
        return [SSE_HEAD + m + SSE_END for m in self.drain_messages()]

    def drain_messages(self) -> list[bytes]:
        """The messages queued so far, each encoded (a message carrier's: no framing)."""
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
