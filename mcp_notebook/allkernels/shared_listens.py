"""Listen streams shared by the fronts of one user in one process (the JupyterHub service: a front
per grant, and fifty grants of one user would each listen to each of the user's kernels).

A front's wish for a kernel is split in two: the URIs every front wants (``common``: the kernel's
``nb://kernel``, which tells a front which kernel is current, and the kernel's list changes) and
the rest (what its own client subscribed to). Each part is one stream, keyed by the user (the
scope), the kernel, its hub's URL and the exact URI set: fronts whose parts are equal share that
stream; a part nobody else wants is a stream of its own, as before. So a kernel's common stream
is opened once per process whatever the number of grants, a front whose client watches nothing
adds no stream at all, and a change reaches the process once per stream that carries it.

An event is handed to every front registered for its stream *at delivery time*, on that front's
own thread (a slow front never holds the shared reading loop): a front that unsubscribed, or was
muted (its grant revoked), gets nothing more at once. Because a stream's URI set is exactly what
each of its fronts asked for, no front ever hears of a URI it did not watch, and the scope keeps
users apart even where a hub's URL would not.
"""

from __future__ import annotations

import threading

from ..hubclient.address import HubAddress
from .upstream import Listens, Notify, Wanted

SEP = "\x00"
COMMON = "c"  # the key's last part: the common stream (list changes too) or the front's own ("o")
OWN = "o"

Wish = tuple[HubAddress, frozenset[str]]


class _Streams(Listens):
    """The shared streams: one :class:`Listens` loop; a stream stays open when only the token it
    would be opened with changes (another front's, when the one that opened it leaves: the next
    reopening uses it)."""

    def same(self, open_wish: Wish, wish: Wish) -> bool:
        return open_wish[0].url == wish[0].url and open_wish[1] == wish[1]


class Tap(Listens):
    """One front's face of the shared streams: its own loop thread ticks and computes what it wants
    (as a :class:`Listens` does), and :meth:`apply` registers that with the :class:`SharedListens`
    instead of opening streams of its own."""

    def __init__(self, shared: SharedListens, scope: str, common: frozenset[str], notify: Notify, wanted: Wanted):
        self.shared, self.scope, self.common = shared, scope, common
        self.keys: dict[str, tuple[str, HubAddress, frozenset[str]]] = {}  # stream key -> (kernel id, hub, URIs)
        self.muted = False
        super().__init__(notify, wanted)

    def apply(self, wanted: dict[str, Wish]) -> None:
        keys: dict[str, tuple[str, HubAddress, frozenset[str]]] = {}
        for kernel_id, (hub, uris) in wanted.items():
            head = SEP.join((self.scope, kernel_id, hub.url, ""))
            parts = ((uris & self.common, COMMON), (uris - self.common, OWN))
            for part, kind in parts:
                if part:
                    keys[head + "\n".join(sorted(part)) + SEP + kind] = (kernel_id, hub, part)
        self.shared.register(self, keys)

    def deliver(self, key: str, kind: str, uri: str | None) -> None:
        """A shared stream's event (its reading thread): on to this front's own thread."""
        try:
            self._loop.call_soon_threadsafe(self._deliver, key, kind, uri)
        except RuntimeError:  # closed
            pass

    def _deliver(self, key: str, kind: str, uri: str | None) -> None:
        found = self.keys.get(key)
        if found is not None and not self.muted:  # still registered now: unsubscribed or muted, nothing
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
        """Nothing more reaches this front, from now on (any thread); its streams go if nobody else
        shares them."""
        self.muted = True
        self.shared.register(self, {})

    def close(self) -> None:
        self.mute()
        super().close()


class SharedListens:
    """The process's shared streams and the fronts registered for each (see the module docstring)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._taps: dict[str, list[Tap]] = {}  # stream key -> the fronts registered, first is whose hub opens it
        self.streams = _Streams(self._event, lists=lambda key: key.endswith(SEP + COMMON))

    def tap(self, scope: str, common: frozenset[str], notify: Notify, wanted: Wanted) -> Tap:
        """A front's face (``scope``: whose kernels, e.g. the JupyterHub user)."""
        return Tap(self, scope, common, notify, wanted)

    def register(self, tap: Tap, keys: dict[str, tuple[str, HubAddress, frozenset[str]]]) -> None:
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
        with self._lock:
            taps = list(self._taps.get(key, ()))
        for tap in taps:
            tap.deliver(key, kind, uri)

    def counts(self) -> tuple[int, int]:
        """(streams wanted, front registrations): for tests and figures."""
        with self._lock:
            return len(self._taps), sum(len(t) for t in self._taps.values())

    def close(self) -> None:
        self.streams.close()


__all__ = ["SharedListens", "Tap"]
