"""Listen streams shared by the fronts of one user in one process (the JupyterHub service: a front
per grant, and fifty grants of one user would each listen to each of the user's kernels).

A front's wish for a kernel is split in two: the URIs every front wants (``common``: the kernel's
``nb://kernel``, which tells a front which kernel is current, and the kernel's list changes) and
the rest (what its own client subscribed to). Each part is one stream, keyed by the user (the
scope), the kernel, its hub's URL and the exact URI set: fronts whose parts are equal share that
stream; a part nobody else wants is a stream of its own, as before. So a kernel's common stream
is opened once per process whatever the number of grants, a front whose client watches nothing
adds no stream at all, and a change reaches the process once per stream that carries it.

An event is routed, on the thread that read it, to every front registered for its stream *at that
moment*: a front's routing never waits (it works from what its last look at the kernels found,
see ``KernelsProvider._upstream``), so no thread is woken per front and event. A front that
unsubscribed, or was muted (its grant revoked), gets nothing more: a mute waits for a routing in
progress to that front and none follows. Because a stream's URI set is exactly what each of its
fronts asked for, no front ever hears of a URI it did not watch, and the scope keeps users apart
even where a hub's URL would not.

What may wait (a front's look at its kernels every second, which can ask JupyterHub about the
user; computing a front's wish after a change) runs on a few threads shared by every front
(``FRONT_THREADS``), one timer ticking them all: a front never has a thread of its own.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from .. import hop_trace
from ..hubclient.address import HubAddress
from .upstream import Listens, Notify, Wanted

log = logging.getLogger(__name__)
SEP = "\x00"
COMMON = "c"  # the key's last part: the common stream (list changes too) or the front's own ("o")
OWN = "o"
FRONT_THREADS = 4  # what the fronts do that may wait (ticks, wishes): a few threads for all of them

Wish = tuple[HubAddress, frozenset[str]]
Keys = dict[str, tuple[str, HubAddress, frozenset[str]]]  # stream key -> (kernel id, hub, URIs)


class Schemes:
    """The URI schemes each kernel serves (kernel id -> schemes, learnt from its templates) and the
    kernels whose templates were read since their last list change: one per front, or one shared by
    the fronts of a user (a list change makes one of them read the templates again, not each)."""

    def __init__(self) -> None:
        self.known: dict[str, frozenset[str]] = {}
        self.fresh: set[str] = set()


class _Streams(Listens):
    """The shared streams: one :class:`Listens` loop; a stream stays open when only the token it
    would be opened with changes (another front's, when the one that opened it leaves: the next
    reopening uses it)."""

    def same(self, open_wish: Wish, wish: Wish) -> bool:
        return open_wish[0].url == wish[0].url and open_wish[1] == wish[1]


class Tap:
    """One front's face of the shared streams, with the face of a :class:`Listens` its provider
    uses (``every``, ``poke``, ``wait_covering``, ``listening``, ``close``) but no thread of its
    own: its wish is computed on the shared threads and registered with the :class:`SharedListens`."""

    def __init__(self, shared: SharedListens, scope: str, common: frozenset[str], notify: Notify, wanted: Wanted):
        self.shared, self.scope, self.common = shared, scope, common
        self.notify, self.wanted = notify, wanted
        self.keys: Keys = {}
        self.muted = False
        self._gate = threading.RLock()  # held while routing to this front, and to mute it
        self._syncing = threading.Lock()  # one wish computed at a time: posts keep their order
        self._poked = threading.Event()
        self.tick: Callable[[], None] | None = None
        self.ticking = False

    def every(self, seconds: float, tick: Callable[[], None]) -> None:
        """``tick`` now and at each of the shared timer's ticks (``seconds`` is the timer's own)."""
        self.tick = tick
        self.shared.start_tick(self)

    def poke(self) -> None:
        """What is wanted may have changed: computed again on a shared thread (coalesced)."""
        if self._poked.is_set() or self.muted:
            return
        self._poked.set()
        self.shared.submit(self._sync)

    def _sync(self) -> None:
        with self._syncing:
            self._poked.clear()  # before reading: a change after this point pokes again
            try:
                wanted = self.wanted()
            except Exception:
                log.exception("kernels: what to listen for could not be computed")
                return
            self.apply(wanted)

    def apply(self, wanted: dict[str, Wish]) -> None:
        keys: Keys = {}
        for kernel_id, (hub, uris) in wanted.items():
            head = SEP.join((self.scope, kernel_id, hub.url, ""))
            parts = ((uris & self.common, COMMON), (uris - self.common, OWN))
            for part, kind in parts:
                if part:
                    keys[head + "\n".join(sorted(part)) + SEP + kind] = (kernel_id, hub, part)
        self.shared.register(self, keys)

    def route(self, key: str, kind: str, uri: str | None) -> None:
        """A shared stream's event, on its reading thread: on to this front if it still wants it."""
        with self._gate:
            found = self.keys.get(key)
            if found is not None and not self.muted:  # still registered now: unsubscribed or muted, nothing
                if hop_trace.ON:
                    hop_trace.stamp("tap.route", uri or "")
                self.notify(found[0], kind, uri)

    def wait_covering(self, key: str, uri: str, timeout: float) -> bool:
        """Until one of this front's streams for kernel ``key`` carries ``uri`` and is open."""
        streams = self.shared.streams

        def covered() -> bool:
            mine = list(self.keys.items())
            return any(k == key and uri in uris and streams.covers(sk, uri) for sk, (k, _, uris) in mine)

        return streams.wait(covered, timeout)

    def listening(self) -> dict[str, frozenset[str]]:
        """The URIs of each kernel carried by this front's open streams."""
        out: dict[str, frozenset[str]] = {}
        for sk, (kernel_id, _, uris) in list(self.keys.items()):
            if all(self.shared.streams.covers(sk, u) for u in uris):
                out[kernel_id] = out.get(kernel_id, frozenset()) | uris
        return out

    def mute(self) -> None:
        """Nothing more reaches this front, from when this returns (any thread but the streams'
        own); its streams go if nobody else shares them, its ticks stop."""
        with self._gate:
            self.muted = True
        self.shared.register(self, {})
        self.shared.stop_tick(self)

    def close(self) -> None:
        self.mute()


class SharedListens:
    """The process's shared streams, the fronts registered for each, and the fronts' shared timer
    and threads (see the module docstring)."""

    def __init__(self, tick_seconds: float = 1.0, loop: asyncio.AbstractEventLoop | None = None) -> None:
        """``loop``: a running loop whose thread reads and routes the streams (see :class:`Listens`)."""
        self._lock = threading.Lock()
        self._taps: dict[str, list[Tap]] = {}  # stream key -> the fronts registered, first is whose hub opens it
        self._ticked: list[Tap] = []
        self._schemes: dict[str, Schemes] = {}
        self.tick_seconds = tick_seconds
        self.streams = _Streams(self._event, lists=lambda key: key.endswith(SEP + COMMON), loop=loop)
        self._pool = ThreadPoolExecutor(FRONT_THREADS, thread_name_prefix="mcp-notebook-fronts")
        self.streams.every(tick_seconds, self._tick_all)

    def tap(self, scope: str, common: frozenset[str], notify: Notify, wanted: Wanted) -> Tap:
        """A front's face (``scope``: whose kernels, e.g. the JupyterHub user)."""
        return Tap(self, scope, common, notify, wanted)

    def schemes(self, scope: str) -> Schemes:
        """The kernels' URI schemes as the fronts of ``scope`` learn them (shared by them)."""
        with self._lock:
            if len(self._schemes) > 4096:
                self._schemes.clear()
            return self._schemes.setdefault(scope, Schemes())

    def submit(self, job: Callable[[], None]) -> None:
        with contextlib.suppress(RuntimeError):  # shut down: nothing more to do
            self._pool.submit(job)

    def start_tick(self, tap: Tap) -> None:
        with self._lock:
            if tap not in self._ticked:
                self._ticked.append(tap)
        self._tick_one(tap)

    def stop_tick(self, tap: Tap) -> None:
        with self._lock:
            if tap in self._ticked:
                self._ticked.remove(tap)

    def _tick_all(self) -> None:
        """The timer (on the streams' loop): each front's tick, on the shared threads; a front whose
        last tick still runs (JupyterHub slow to answer) is skipped this time."""
        with self._lock:
            taps = list(self._ticked)
        for tap in taps:
            self._tick_one(tap)

    def _tick_one(self, tap: Tap) -> None:
        if tap.ticking or tap.tick is None:
            return
        tap.ticking = True
        tick = tap.tick

        def run() -> None:
            try:
                if not tap.muted:
                    tick()
            except Exception:
                log.exception("kernels refresh failed")
            finally:
                tap.ticking = False

        self.submit(run)

    def register(self, tap: Tap, keys: Keys) -> None:
        """``tap`` wants exactly the streams of ``keys`` (any thread); the streams follow."""
        with self._lock:
            if tap.muted:
                keys = {}
            for key in tap.keys.keys() - keys.keys():
                taps = self._taps.get(key, [])
                if tap in taps:
                    taps.remove(tap)
                if not taps:
                    self._taps.pop(key, None)
            tap.keys = keys
            for key in keys:
                taps = self._taps.setdefault(key, [])
                if tap not in taps:
                    taps.append(tap)
            wanted = {key: (taps[0].keys[key][1], taps[0].keys[key][2]) for key, taps in self._taps.items()}
            self.streams.post(wanted)  # under the lock: posts keep the order their sets were made in
        self.streams.told()  # a waiter whose stream was already open (another front's) is covered now

    def _event(self, key: str, kind: str, uri: str | None) -> None:
        """One upstream event (the streams' thread): routed here to each front registered now."""
        with self._lock:
            taps = list(self._taps.get(key, ()))
        for tap in taps:
            try:
                tap.route(key, kind, uri)
            except Exception:
                log.exception("routing a kernel's notification failed")

    def counts(self) -> tuple[int, int]:
        """(streams wanted, front registrations): for tests and figures."""
        with self._lock:
            return len(self._taps), sum(len(t) for t in self._taps.values())

    def close(self) -> None:
        self.streams.close()
        self._pool.shutdown(wait=False, cancel_futures=True)


__all__ = ["Schemes", "SharedListens", "Tap"]
