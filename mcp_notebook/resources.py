"""The kernel's resources: provider registry, URI routing, watched URIs, and change fan-out.

Usable in-process without any transport. Thread model: reads may come from any thread;
``after_cell`` runs on the kernel's main thread and stays O(number of names); exact change
checks for watched resources run on a worker thread of their own. Listeners are called from
whichever thread detected the change and must hand work to their own thread themselves.
"""

from __future__ import annotations

import itertools
import logging
import queue
import secrets
import threading
import time
from collections import Counter, deque
from collections.abc import Callable, Iterable, Sized
from typing import Any

from .guard import guarding
from .providers.base import (
    NO_CHANGE,
    Facts,
    InvalidResourceParams,
    LazyProvider,
    Provider,
    ResourceNotFound,
    ResourceReadError,
)
from .providers.optional import missing_package
from .redact import REDACTOR
from .types import Contents, Resource, ResourceTemplate

log = logging.getLogger(__name__)

LIST_CHANGED = "list_changed"
UPDATED = "updated"
_ASK: Any = object()  # after_cell(): no cell number given, ask cell_of()
Listener = Callable[[str, tuple[str, ...]], None]
JournalEntry = tuple[int, float, str, tuple[str, ...], int | None]  # (seq, unix time, kind, uris, cell seq)


class ChangeJournal:
    """A bounded ring buffer of recent changes, for clients that poll instead of subscribing.

    ``epoch`` is new for every set of resources (every hub), so a cursor from a previous kernel is
    recognised as stale.
    """

    def __init__(self, maxlen: int = 1000):
        self.epoch = secrets.token_hex(4)
        self._entries: deque[JournalEntry] = deque(maxlen=maxlen)
        self._seq = 0
        # A plain lock (taken in C) and a condition on it that is notified only while someone waits:
        # appends come after every cell, waiters (long-polling clients) are rare.
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        self._waiting = 0
        self.closed = False

    @property
    def seq(self) -> int:
        return self._seq

    def append(self, kind: str, uris: tuple[str, ...], cell: int | None = None) -> None:
        """One change; ``cell``: the nb://cells/{seq} whose execution caused it, when one did."""
        with self._lock:
            self._seq += 1
            self._entries.append((self._seq, time.time(), kind, uris, cell))
            if self._waiting:
                self._cond.notify_all()

    def since(self, seq: int) -> tuple[list[JournalEntry], bool]:
        """Entries after ``seq``, and whether older ones were already dropped from the buffer."""
        with self._lock:
            entries = [e for e in self._entries if e[0] > seq]
            gap = bool(self._entries) and self._entries[0][0] > seq + 1 and self._seq > seq
            return entries, gap

    def wait(self, seq: int, timeout: float) -> bool:
        """Block until something newer than ``seq`` arrives (or the resources close); bounded by ``timeout``."""
        with self._lock:
            self._waiting += 1
            try:
                return self._cond.wait_for(lambda: self._seq > seq or self.closed, timeout=max(0.0, timeout))
            finally:
                self._waiting -= 1

    def close(self) -> None:
        with self._lock:
            self.closed = True
            self._cond.notify_all()


class Resources:
    """Routes URIs to providers and tells listeners what changed."""

    def __init__(self, providers: Iterable[Provider] = ()):
        self._providers: list[Provider] = []
        self._snapshots: list[Provider] = []  # the providers with something to compare after a cell
        self._snapshots_unwatched: list[Provider] = []  # of them, those that may report with nothing watched
        # (listener, gates), a tuple made again on each change (rare): a cell's fan-out iterates it with no
        # copy, and skips a listener whose gates (its owner's containers) are all empty (issue #48)
        self._listeners: tuple[tuple[Listener, tuple[Sized, ...]], ...] = ()
        self._listeners_lock = threading.Lock()  # its own: a listener may be added from under the hub's lock
        self._watched: Counter[str] = Counter()
        self._watched_now: frozenset[str] | None = frozenset()  # its keys; None: made again when next asked
        self._digests: dict[str, bytes | None] = {}
        # The cell after which each watched URI was last announced as updated: an exact check queued
        # by an earlier cell that runs late (after that cell) must not announce the same change again.
        self._announced: dict[str, int] = {}
        self._lock = threading.Lock()
        self._jobs: queue.SimpleQueue[Callable[[], None] | None] = queue.SimpleQueue()
        self._worker: threading.Thread | None = None
        self.cells_seen = 0
        self.journal = ChangeJournal()
        # Bumped whenever anything listed may have changed (every cell, every changed(), new providers);
        # listing caches read it before listing and key on it. next() on a count is atomic.
        self._generations = itertools.count(1)
        self.generation = 0
        # Cells whose exact checks have not finished: changes_since settles on them before answering.
        # A plain lock (taken in C after every cell) and a condition notified only while someone waits.
        self._unsettled = 0
        self._settle_lock = threading.Lock()
        self._settled = threading.Condition(self._settle_lock)
        self._settle_waiting = 0
        # The cells the journal names (follow_cells): the number of the cell that just ran, its URI,
        # and who is told of watched URIs an exact check found changed in place, with that cell.
        self.cell_of: Callable[[], int | None] = lambda: None
        self.cell_uri: Callable[[int], str] = str
        self.on_exact: Callable[[tuple[str, ...], int | None], None] | None = None
        for provider in providers:
            self.add_provider(provider)

    # -- registry -----------------------------------------------------------------------
    def follow_cells(
        self,
        cell_of: Callable[[], int | None],
        cell_uri: Callable[[int], str],
        on_exact: Callable[[tuple[str, ...], int | None], None] | None = None,
    ) -> None:
        """Name cells in the journal: ``cell_of()`` the hub's number of the cell that just ran,
        ``cell_uri(seq)`` its URI; ``on_exact(uris, seq)`` told of in-place changes (lineage)."""
        self.cell_of, self.cell_uri, self.on_exact = cell_of, cell_uri, on_exact

    def add_provider(self, provider: Provider) -> None:
        self._providers.append(provider)
        if isinstance(provider, LazyProvider):  # nothing to compare until built: then its real provider's
            provider.when_built(self._compares)
        else:
            self._compares(provider)
        self.generation = next(self._generations)

    def _compares(self, provider: Provider) -> None:
        """Called after every cell from now on, unless it keeps the base's snapshot (compares nothing).
        (A lazy provider built on a server thread is appended while a cell's loop may walk the list:
        it is then compared from that cell or the next.)"""
        if type(provider).snapshot is not Provider.snapshot:
            self._snapshots.append(provider)
            if provider.snapshot_unwatched:
                self._snapshots_unwatched.append(provider)

    def providers(self) -> list[Provider]:
        return list(self._providers)

    def provider_for(self, uri: str) -> Provider:
        """The provider that serves ``uri``; ResourceNotFound when none does."""
        provider = self.owner(uri)
        if provider is None:
            raise ResourceNotFound(uri)
        return provider

    def list_resources(self, apps: bool = False) -> list[Resource]:
        """Every listed resource; the Apps views (``apps_only`` providers) only with ``apps``."""
        out: list[Resource] = []
        for provider in self._providers:
            if apps or not provider.apps_only:
                out.extend(provider.list_resources())
        return out

    def list_templates(self) -> list[ResourceTemplate]:
        out: list[ResourceTemplate] = []
        for provider in self._providers:
            out.extend(provider.list_templates())
        return out

    def read(self, uri: str, provider: Provider | None = None) -> list[Contents]:
        """Contents of ``uri`` (from ``provider`` when the caller already looked it up)."""
        if provider is None:
            provider = self.provider_for(uri)
        try:
            with guarding(("read", uri.split("?", 1)[0])):  # a stuck read blocks only this resource
                return provider.read(uri)
        except (ResourceNotFound, InvalidResourceParams, ResourceReadError):
            raise
        except Exception as exc:  # a library the read needs is missing: say which, and how to install it
            missing = missing_package(exc, f"reading {uri}")
            if missing is None:
                raise
            raise missing from None

    def owner(self, uri: str) -> Provider | None:
        """The provider that serves ``uri``, or None."""
        for provider in self._providers:
            if uri.startswith(provider.uri_prefixes) and provider.owns(uri):
                return provider
        return None

    def may_run_user_code(self, uri: str) -> bool:
        """Whether reading ``uri`` may run user code (see Provider.may_run_user_code); unknown: True."""
        provider = self.owner(uri)
        if provider is None:
            return True  # nothing serves it: keep the general path
        try:
            return provider.may_run_user_code(uri)
        except Exception:
            return True

    def list_is_pure(self) -> bool:
        """Whether listing runs no user code and touches no live value (every provider declares so)."""
        return all(provider.list_is_pure for provider in self._providers)

    # -- what the tools tell about the values behind URIs ---------------------------------
    def canonical(self, uri: str) -> str:
        """The URI a watch of ``uri`` is kept under (pages of one resource share one watch)."""
        provider = self.owner(uri)
        return uri if provider is None else provider.canonical(uri)

    def variable_name(self, uri: str) -> str | None:
        """The namespace name ``uri`` is about (it may be gone since), or None."""
        provider = self.owner(uri)
        return None if provider is None else provider.variable_name(uri)

    def facts(self, uri: str) -> Facts | None:
        """Cheap facts of the value behind ``uri`` (no user code), or None."""
        provider = self.owner(uri)
        try:
            return None if provider is None else provider.facts(uri)
        except Exception:
            return None

    def variable_names(self) -> frozenset[str] | None:
        """The exposed namespace names (one C-level copy), from the provider that declares them."""
        for provider in self._providers:
            names = provider.variable_names()
            if names is not None:
                return names
        return None

    def complete(self, template: str, argument: str, value: str, context: dict[str, str]) -> list[str] | None:
        """Completion values, or None when no provider knows the template; values holding a secret are left out."""
        for provider in self._providers:
            values = provider.complete(template, argument, value, context)
            if values is not None:
                mask = REDACTOR.mask
                return [v for v in values if mask(v) == v]
        return None

    # -- listeners and watched URIs -----------------------------------------------------
    def add_listener(self, listener: Listener, gates: tuple[Sized, ...] = ()) -> None:
        """Tell ``listener`` of every change; with ``gates`` (containers its owner keeps, never replaced),
        only while one of them is not empty (the server's sessions and listen streams: with nobody
        connected a cell's change costs it no call)."""
        with self._listeners_lock:
            self._listeners = (*self._listeners, (listener, gates))

    def remove_listener(self, listener: Listener) -> None:
        with self._listeners_lock:
            pairs = list(self._listeners)
            for i, (known, _) in enumerate(pairs):
                if known == listener:  # the first one, as list.remove did
                    del pairs[i]
                    self._listeners = tuple(pairs)
                    return

    def watch(self, uri: str) -> None:
        """Count one more watcher of ``uri``; the first one records a baseline digest.

        The baseline is taken right here (on the caller's thread, a request or widget), so that a
        change made by the very next cell is measured against the state the watcher saw.
        """
        self.watch_all((uri,))

    def watch_all(self, uris: Iterable[str]) -> None:
        """``watch`` each of ``uris``; their owners are told once the whole set is counted
        (``Provider.watched_now``: a front's listen reopens once for a listen's set, not per URI)."""
        firsts: dict[int, tuple[Provider, list[str]]] = {}
        for uri in uris:
            with self._lock:
                self._watched[uri] += 1
                first = self._watched[uri] == 1
                if first:
                    self._watched_now = None
            if not first:
                continue
            self._record_digest(uri)
            provider = self._tell_owner(uri, True)
            if provider is not None:
                firsts.setdefault(id(provider), (provider, []))[1].append(uri)
        for provider, told in firsts.values():
            try:
                provider.watched_now(told)
            except Exception:
                log.exception("watching %s failed", told[:3])

    def unwatch(self, uri: str) -> None:
        with self._lock:
            last = self._watched[uri] <= 1
            if last:
                self._watched.pop(uri, None)
                self._watched_now = None
                self._digests.pop(uri, None)
                self._announced.pop(uri, None)
            else:
                self._watched[uri] -= 1
        if last:
            self._tell_owner(uri, False)

    def _tell_owner(self, uri: str, watched: bool) -> Provider | None:
        provider = self.owner(uri)
        if provider is not None:
            try:
                provider.watching(uri, watched)
            except Exception:
                log.exception("watching %s failed", uri)
        return provider

    def watched(self) -> frozenset[str]:
        now = self._watched_now  # every cell asks: made once per change of the set, not per cell
        if now is None:
            with self._lock:
                now = self._watched_now = frozenset(self._watched)
        return now

    # -- change detection ---------------------------------------------------------------
    def after_cell(self, seq: Any = _ASK) -> None:
        """Main thread, after each cell: cheap snapshots, then exact checks off-thread. ``seq``: the
        hub's number of the cell that ran, when the caller has it (else ``cell_of()`` is asked).
        One call a cell: the cheap part and the settle count in one function (issue #48)."""
        with self._settle_lock:
            self._unsettled += 1
        queued = False
        try:
            self.cells_seen += 1
            if seq is _ASK:
                try:
                    seq = self.cell_of()
                except Exception:
                    seq = None
            watched = self._watched_now
            if watched is None:
                watched = self.watched()
            list_changed = False  # the providers' changes merged here: no ChangeSet made
            all_updated: set[str] = set()
            maybe: set[str] = set()
            for provider in self._snapshots if watched else self._snapshots_unwatched:
                try:
                    changes = provider.snapshot(watched)
                except Exception:  # a provider must never break the user's cell
                    log.exception("snapshot of %r failed", provider)
                    continue
                if changes is NO_CHANGE:  # most providers, most cells: nothing to merge
                    continue
                list_changed |= changes.list_changed
                all_updated |= changes.updated
                maybe |= changes.maybe
            self.generation = next(self._generations)  # after the snapshots changed provider state
            if list_changed:
                self._emit(LIST_CHANGED, (), seq)
            updated = tuple(sorted(all_updated & watched)) if watched else ()
            cell = self.cells_seen
            if updated:
                for uri in updated:
                    self._announced[uri] = cell
                self._emit(UPDATED, updated, seq)
            unwatched = all_updated - watched if watched else all_updated
            if unwatched:  # nobody subscribed, but polling clients (changes_since) see them
                self.journal.append(UPDATED, tuple(sorted(unwatched)), seq)
            recheck = (maybe & watched) - all_updated
            if updated or recheck:
                self._submit(lambda: self._exact_check(updated, recheck, cell, seq))
                queued = True
        finally:
            if queued:
                self._submit(self._settle_one)  # runs after the exact checks this cell queued
            else:  # _settle_one, inlined (most cells)
                with self._settle_lock:
                    self._unsettled -= 1
                    if self._settle_waiting:
                        self._settled.notify_all()

    def _settle_one(self) -> None:
        with self._settle_lock:
            self._unsettled -= 1
            if self._settle_waiting:
                self._settled.notify_all()

    def settle(self, timeout: float) -> bool:
        """Wait (bounded) until the exact checks of finished cells have run, so their changes are journaled."""
        with self._settle_lock:
            self._settle_waiting += 1
            try:
                return self._settled.wait_for(lambda: self._unsettled <= 0, timeout=max(0.0, timeout))
            finally:
                self._settle_waiting -= 1

    def changed(self, uris: Iterable[str] = (), list_changed: bool = False) -> None:
        """Report changes from outside a cell (custom resources, settings)."""
        self.generation = next(self._generations)
        if list_changed:
            self._emit(LIST_CHANGED, ())
        watched = self.watched()
        updated = tuple(sorted(set(uris) & watched))
        if updated:
            self._emit(UPDATED, updated)
            self._submit(lambda: self._exact_check(updated, set()))
        if set(uris) - watched:
            self.journal.append(UPDATED, tuple(sorted(set(uris) - watched)))

    def _exact_check(
        self, refresh: tuple[str, ...], recheck: set[str], cell: int | None = None, seq: int | None = None
    ) -> None:
        for i, uri in enumerate(refresh, 1):
            self._record_digest(uri)
            if not i % 64:
                time.sleep(0)  # let the hub's loop write the notifications this cell queued (the GIL)
        changed = []
        for uri in sorted(recheck):
            if cell is not None and self._announced.get(uri, 0) > cell:
                continue  # a later cell already announced (and will re-baseline) this URI

            before = self._digests.get(uri)
            after = self._digest(uri)
            if after != before:
                self._digests[uri] = after
                changed.append(uri)
        if changed:
            self._moved_in_place(changed)
            self._emit(UPDATED, tuple(changed), seq)
            if self.on_exact is not None and cell is not None:
                try:
                    self.on_exact(tuple(changed), seq)
                except Exception:
                    log.exception("lineage of exact changes failed")

    def _moved_in_place(self, uris: list[str]) -> None:
        """Changes the exact check found (in place): their variables' modification times move, and
        the digests are taken again with the new time in the renderings."""
        names = {self.variable_name(uri) for uri in uris} - {None}
        moved = False
        for name in names:
            for provider in self._providers:
                try:
                    moved |= provider.changed_in_place(name)  # type: ignore[arg-type]
                except Exception:
                    log.exception("changed_in_place(%r) failed", name)
        if moved:
            self.generation = next(self._generations)  # cached reads carrying the old time are stale
            for uri in uris:
                self._record_digest(uri)

    def _record_digest(self, uri: str) -> None:
        if uri in self._watched:
            self._digests[uri] = self._digest(uri)

    def _digest(self, uri: str) -> bytes | None:
        try:
            with guarding(("read", uri.split("?", 1)[0])):
                return self.provider_for(uri).digest(uri)
        except Exception:
            return None

    def _emit(self, kind: str, uris: tuple[str, ...], cell: int | None = None) -> None:
        self.journal.append(kind, uris, cell)
        for listener, gates in self._listeners:  # a tuple: a listener added meanwhile is told from the next change
            if gates and not any(gates):  # nobody its owner would tell (read without their locks, as they do)
                continue
            try:
                listener(kind, uris)
            except Exception:
                log.exception("hub listener failed")

    # -- worker -------------------------------------------------------------------------
    def _submit(self, job: Callable[[], None]) -> None:
        if self._worker is None or not self._worker.is_alive():
            self._worker = threading.Thread(target=self._run_jobs, name="mcp-notebook-hub", daemon=True)
            self._worker.start()
        self._jobs.put(job)

    def _run_jobs(self) -> None:
        while True:
            job = self._jobs.get()
            if job is None:
                return
            try:
                job()
            except Exception:
                log.exception("hub job failed")

    def drain(self, timeout: float = 5.0) -> bool:
        """Wait until queued exact checks have run (tests and widgets use this)."""
        done = threading.Event()
        self._submit(done.set)
        return done.wait(timeout)

    def close(self) -> None:
        """Stop the worker; listeners are dropped."""
        self._listeners = ()
        self.journal.close()
        if self._worker is not None and self._worker.is_alive():
            self._jobs.put(None)
            self._worker.join(timeout=2)
        self._worker = None
