"""Watches held for tool-only clients, so ``changes_since`` sees in-place edits of what they read.

Hosts such as Claude Code and Codex never subscribe: they call ``read_resource`` and poll
``changes_since``. Every resource such a client reads is watched for it through the watch
refcounts, exactly as a subscription would be (cheap fingerprint after each cell, exact digest
off the main thread), so ``df["sales"] *= 1.5`` reaches the change journal.

A client is its handshake-era session, or in the stateless 2026-07-28 era the clientInfo its
requests carry (there is no session to end). Its watches go when its session ends, after
``IDLE_SECONDS`` without a tool call, or, beyond ``MAX_PER_CLIENT``, least recently read first.

For each watched URI we also keep cheap facts (type, len/shape, identity) as of the client's last
look, to say in one line what changed: "changed in place", "rebound", shape before → after.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict

from ..providers.base import Facts, shape_text
from ..resources import Resources

IDLE_SECONDS = 30 * 60.0
MAX_PER_CLIENT = 32
MAX_CLIENTS = 64


class ClientWatches:
    """One client's watched URIs (with the facts it last saw of each) and where it last looked."""

    __slots__ = ("key", "last_call", "names", "seen_seq", "seen_skip", "uris")

    def __init__(self, key: str) -> None:
        self.key = key
        self.last_call = time.monotonic()
        self.uris: OrderedDict[str, Facts | None] = OrderedDict()
        self.seen_seq: int | None = None  # journal position of the client's last look (cursor-less changes_since)
        self.seen_skip = 0  # URIs of the entry after seen_seq already seen (a page cut inside an entry)
        self.names: frozenset[str] | None = None  # exposed variable names at the client's last look ("added")


def change_line(uri: str, before: Facts | None, after: Facts | None, *, added: bool = False, variable: bool) -> str:
    """One line saying what happened to ``uri``, given what the client saw before (if anything);
    ``added``: the variable did not exist at the client's last look; ``variable``: ``uri`` shows a
    namespace variable (so no facts now means it is gone)."""
    if after is None:
        return f"{uri}: removed (or no longer exposed)" if variable else f"{uri}: changed"
    if before is None:
        return f"{uri}: {'added' if added else 'now'} {after.text()}"
    if before.ident == after.ident:
        if before.shape != after.shape:
            return f"{uri}: changed in place, {after.type} {shape_text(before.shape)} → {shape_text(after.shape)}"
        return f"{uri}: changed in place, {after.text()}"
    return f"{uri}: rebound, {before.text()} → {after.text()}"


class ToolWatches:
    """Per-client watches on the resources read through tools."""

    def __init__(
        self,
        resources: Resources,
        idle_seconds: float = IDLE_SECONDS,
        max_per_client: int = MAX_PER_CLIENT,
        max_clients: int = MAX_CLIENTS,
    ):
        self.resources = resources
        self.idle_seconds = idle_seconds
        self.max_per_client = max(1, max_per_client)
        self.max_clients = max(1, max_clients)
        self._clients: OrderedDict[str, ClientWatches] = OrderedDict()
        self._lock = threading.Lock()
        self._closed = False
        resources.add_listener(self._on_change, (self._clients,))  # called only while a client watches

    # -- clients ------------------------------------------------------------------------
    def client(self, key: str) -> ClientWatches:
        """The client's record (created on first use), marked as active now; idle ones are swept."""
        self.sweep()
        with self._lock:
            record = self._clients.get(key)
            if record is None:
                record = self._clients[key] = ClientWatches(key)
            self._clients.move_to_end(key)
            record.last_call = time.monotonic()
            excess = list(self._clients.values())[: max(0, len(self._clients) - self.max_clients)]
            for old in excess:
                del self._clients[old.key]
        for old in excess:
            self._release(old)
        return record

    def forget(self, key: str) -> None:
        """The client went away (its session ended): drop its watches."""
        with self._lock:
            record = self._clients.pop(key, None)
        if record is not None:
            self._release(record)

    def sweep(self, now: float | None = None) -> None:
        """Drop clients idle for longer than ``idle_seconds``."""
        now = time.monotonic() if now is None else now
        with self._lock:
            idle = [c for c in self._clients.values() if now - c.last_call > self.idle_seconds]
            for record in idle:
                del self._clients[record.key]
        for record in idle:
            self._release(record)

    def close(self) -> None:
        self.resources.remove_listener(self._on_change)
        with self._lock:
            records = list(self._clients.values())
            self._clients.clear()
            self._closed = True
        for record in records:
            self._release(record)

    def counts(self) -> tuple[int, int]:
        """(clients, watched resources) for status displays."""
        with self._lock:
            return len(self._clients), sum(len(c.uris) for c in self._clients.values())

    def snapshot(self) -> list[tuple[str, float, list[str]]]:
        """(client key, seconds since its last tool call, watched URIs) per client, for ``%mcp clients``."""
        now = time.monotonic()
        with self._lock:
            return [(c.key, now - c.last_call, list(c.uris)) for c in self._clients.values()]

    # -- watches ------------------------------------------------------------------------
    def note_read(self, record: ClientWatches, uri: str) -> None:
        """The client read ``uri``: watch it (most recently read last) and remember what it saw."""
        resources = self.resources
        uri = resources.canonical(uri)
        facts = resources.facts(uri)
        names = resources.variable_names() if record.names is None else None
        with self._lock:
            if self._closed or self._clients.get(record.key) is not record:
                return
            if names is not None:
                record.names = names
            new = uri not in record.uris
            record.uris[uri] = facts
            record.uris.move_to_end(uri)
            evicted = []
            while len(record.uris) > self.max_per_client:
                evicted.append(record.uris.popitem(last=False)[0])
        if new:
            resources.watch(uri)
        for old in evicted:
            resources.unwatch(old)

    def describe(self, record: ClientWatches, uris: list[str]) -> list[str]:
        """One line per changed URI; the client's remembered facts move on to the current state."""
        resources = self.resources
        lines = []
        known_names, now_names = record.names, resources.variable_names()
        for uri in uris:
            after = resources.facts(uri)
            with self._lock:
                before = record.uris.get(uri)
                if uri in record.uris:
                    record.uris[uri] = after
            name = resources.variable_name(uri)
            added = known_names is not None and name is not None and name not in known_names
            lines.append(change_line(uri, before, after, added=added, variable=name is not None))
        record.names = now_names
        return lines

    def _release(self, record: ClientWatches) -> None:
        for uri in list(record.uris):
            self.resources.unwatch(uri)
        record.uris.clear()

    def _on_change(self, kind: str, uris: tuple[str, ...]) -> None:
        if self._clients:
            self.sweep()
