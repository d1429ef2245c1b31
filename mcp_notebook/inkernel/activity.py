"""What views show of a running hub, without ipywidgets: recent notifications, rows of sessions
and listen streams, and main-thread scheduling (used by the widgets and the JupyterLab comm).

Change listeners and server activity callbacks run on the kernel's main thread, the exact-check
worker or the HTTP thread. Widgets must change on the main thread, so :class:`MainThread` hands callbacks
to the kernel's event loop (``kernel.io_loop``, a tornado IOLoop on the main thread in ipykernel
6.29+ and 7.x; ``add_callback`` is thread-safe). Without a kernel (plain IPython, an
InteractiveShell in tests) there are no comms to protect, so callbacks run at once.
"""

from __future__ import annotations

import logging
import threading
import time
import weakref
from collections import deque
from collections.abc import Callable
from typing import Any

log = logging.getLogger(__name__)

MAX_RECENT = 50


class MainThread:
    """Runs callbacks on the kernel's main thread, coalescing repeats of the same key."""

    def __init__(self, shell: Any = None):
        kernel = getattr(shell, "kernel", None)
        self._loop = getattr(kernel, "io_loop", None)
        self._pending: set[Any] = set()
        self._lock = threading.Lock()

    @property
    def deferred(self) -> bool:
        """True when callbacks go through the kernel's loop (False: they run immediately)."""
        return self._loop is not None

    def call(self, key: Any, fn: Callable[[], None]) -> None:
        """Run ``fn`` soon on the main thread; a ``key`` already pending is not queued twice."""
        if self._loop is None:
            _guarded(fn)
            return
        with self._lock:
            if key in self._pending:
                return
            self._pending.add(key)

        def run() -> None:
            with self._lock:
                self._pending.discard(key)
            _guarded(fn)

        try:
            self._loop.add_callback(run)
        except RuntimeError:  # the loop is closed: the kernel is shutting down
            with self._lock:
                self._pending.discard(key)


def _guarded(fn: Callable[[], None]) -> None:
    try:
        fn()
    except Exception:  # a view must never break the kernel's loop or the hub
        log.exception("widget update failed")


class Notice:
    """One change the hub announced to its listeners (and so to subscribed clients)."""

    __slots__ = ("at", "kind", "uris")

    def __init__(self, at: float, kind: str, uris: tuple[str, ...]) -> None:
        self.at = at
        self.kind = kind  # "updated" or "list_changed"
        self.uris = uris

    def __repr__(self) -> str:
        return f"Notice({self.at!r}, {self.kind!r}, {self.uris!r})"

    def line(self) -> str:
        stamp = time.strftime("%H:%M:%S", time.localtime(self.at))
        return f"{stamp} {self.kind} {' '.join(self.uris)}".rstrip()


class RecentNotifications:
    """A bounded ring buffer of hub notifications, filled by a hub listener (any thread)."""

    def __init__(self, maxlen: int = MAX_RECENT):
        self._items: deque[tuple[float, str, tuple[str, ...]]] = deque(maxlen=maxlen)  # Notice's fields
        self._lock = threading.Lock()
        self.total = 0

    def __call__(self, kind: str, uris: tuple[str, ...]) -> None:
        with self._lock:
            self._items.append((time.time(), kind, tuple(uris)))  # a Notice when read: no Python call a cell
            self.total += 1

    def items(self) -> list[Notice]:
        with self._lock:
            items = list(self._items)
        return [Notice(*item) for item in items]


_RECENT: weakref.WeakKeyDictionary[Any, RecentNotifications] = weakref.WeakKeyDictionary()


def recent_notifications(hub: Any) -> RecentNotifications:
    """The ring buffer of ``hub`` (a Resources), attached as a listener on first use."""
    buffer = _RECENT.get(hub)
    if buffer is None:
        buffer = _RECENT[hub] = RecentNotifications()
        hub.add_listener(buffer)
    return buffer


def sorted_copy(values: Any) -> list[str]:
    """Sorted copy of a set another thread may be changing (retry instead of locking it)."""
    for _ in range(5):
        try:
            return sorted(values)
        except RuntimeError:
            continue
    return []


def session_rows(server: Any) -> list[dict[str, Any]]:
    """One row per handshake-era session: client, revision, subscriptions, open streams (no token)."""
    rows = []
    for s in server.sessions():
        info = s.client_info or {}
        rows.append(
            {
                "session": s.id[:8],
                "client": f"{info.get('name', '?')} {info.get('version', '')}".strip(),
                "version": s.version,
                "subscriptions": sorted_copy(s.subscriptions),
                "streams": sum(1 for st in list(s.streams) if not st.closed),
            }
        )
    return rows


def listen_rows(server: Any) -> list[dict[str, Any]]:
    """One row per open subscriptions/listen stream (2026-07-28)."""
    return [
        {"id": str(listen.sub_id), "uris": sorted_copy(listen.uris), "list_changed": bool(listen.list_changed)}
        for listen in server.listens()
    ]
