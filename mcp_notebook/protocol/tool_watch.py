"""Watches held for tool-only clients, so ``changes_since`` sees in-place edits of what they read.

Hosts such as Claude Code and Codex never subscribe: they call ``read_resource`` and poll
``changes_since``. Every resource such a client reads is watched for it through the hub's watch
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
from dataclasses import dataclass, field
from typing import Any

from ..resource_hub import Hub

IDLE_SECONDS = 30 * 60.0
MAX_PER_CLIENT = 32
MAX_CLIENTS = 64
VARS_PREFIX = "nb://vars/"
FRAMES_PREFIX = "nb://frames/"


@dataclass(frozen=True)
class Facts:
    """What a client saw of a variable: its type, len/shape, and identity."""

    type: str
    shape: tuple | int | None
    ident: int

    def text(self) -> str:
        return f"{self.type} {_shape_text(self.shape)}".strip()


@dataclass
class ClientWatches:
    key: str
    last_call: float = field(default_factory=time.monotonic)
    uris: OrderedDict[str, Facts | None] = field(default_factory=OrderedDict)
    seen_seq: int | None = None  # journal position of the client's last look (cursor-less changes_since)
    names: frozenset[str] | None = None  # exposed variable names at the client's last look ("added")


def canonical(uri: str) -> str:
    """One watch per resource, not per page: nb:// URIs without their query (pages, formats)."""
    if uri.startswith("nb://"):
        return uri.split("?", 1)[0].split("#", 1)[0]
    return uri


def variable_name(uri: str) -> str | None:
    """The variable behind nb://vars/NAME, nb://frames/NAME and nb://frames/NAME/schema."""
    uri = canonical(uri)
    for prefix in (VARS_PREFIX, FRAMES_PREFIX):
        if uri.startswith(prefix):
            name = uri[len(prefix) :]
            name = name.removesuffix("/schema")
            return name or None
    return None


def _variables(hub: Hub) -> Any:
    for provider in hub.providers():
        if hasattr(provider, "value") and hasattr(provider, "exposed_names"):
            return provider
    return None


def exposed_names(hub: Hub) -> frozenset[str] | None:
    """The exposed variable names (one C-level copy; no values touched)."""
    variables = _variables(hub)
    return frozenset(variables.exposed_names()) if variables is not None else None


def facts_of(hub: Hub, uri: str) -> Facts | None:
    """Cheap facts of the variable behind ``uri``, or None (not a variable, gone, or hidden). No user code."""
    name = variable_name(uri)
    variables = _variables(hub) if name is not None else None
    if variables is None:
        return None
    try:
        value = variables.value(name)
    except Exception:
        return None
    from ..providers.variables import cheap_shape

    try:
        shape = cheap_shape(value)
    except Exception:
        shape = None
    return Facts(type(value).__name__, shape, id(value))


def change_line(uri: str, before: Facts | None, after: Facts | None, added: bool = False) -> str:
    """One line saying what happened to ``uri``, given what the client saw before (if anything);
    ``added``: the variable did not exist at the client's last look."""
    if after is None:
        return f"{uri}: removed (or no longer exposed)" if variable_name(uri) is not None else f"{uri}: changed"
    if before is None:
        return f"{uri}: {'added' if added else 'now'} {after.text()}"
    if before.ident == after.ident:
        if before.shape != after.shape:
            return f"{uri}: changed in place, {after.type} {_shape_text(before.shape)} → {_shape_text(after.shape)}"
        return f"{uri}: changed in place, {after.text()}"
    return f"{uri}: rebound, {before.text()} → {after.text()}"


def _shape_text(shape: tuple | int | None) -> str:
    if shape is None:
        return ""
    if isinstance(shape, int):
        return f"len {shape}"
    return f"shape {tuple(shape)}"


class ToolWatches:
    """Per-client watches on the hub for resources read through tools."""

    def __init__(
        self,
        hub: Hub,
        idle_seconds: float = IDLE_SECONDS,
        max_per_client: int = MAX_PER_CLIENT,
        max_clients: int = MAX_CLIENTS,
    ):
        self.hub = hub
        self.idle_seconds = idle_seconds
        self.max_per_client = max(1, max_per_client)
        self.max_clients = max(1, max_clients)
        self._clients: OrderedDict[str, ClientWatches] = OrderedDict()
        self._lock = threading.Lock()
        self._closed = False
        hub.add_listener(self._on_hub_event)

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
        self.hub.remove_listener(self._on_hub_event)
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
        uri = canonical(uri)
        facts = facts_of(self.hub, uri)
        names = exposed_names(self.hub) if record.names is None else None
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
            self.hub.watch(uri)
        for old in evicted:
            self.hub.unwatch(old)

    def describe(self, record: ClientWatches, uris: list[str]) -> list[str]:
        """One line per changed URI; the client's remembered facts move on to the current state."""
        lines = []
        known_names, now_names = record.names, exposed_names(self.hub)
        for uri in uris:
            after = facts_of(self.hub, uri)
            with self._lock:
                before = record.uris.get(uri)
                if uri in record.uris:
                    record.uris[uri] = after
            name = variable_name(uri)
            added = known_names is not None and name is not None and name not in known_names
            lines.append(change_line(uri, before, after, added))
        record.names = now_names
        return lines

    def _release(self, record: ClientWatches) -> None:
        for uri in list(record.uris):
            self.hub.unwatch(uri)
        record.uris.clear()

    def _on_hub_event(self, kind: str, uris: tuple[str, ...]) -> None:
        if self._clients:
            self.sweep()


def session_key(session_id: str) -> str:
    return f"session:{session_id}"


def client_key(ctx: Any) -> str:
    """The session id, or in the stateless era the clientInfo the request carries."""
    session = getattr(ctx, "session", None)
    if session is not None:
        return session_key(session.id)
    meta = getattr(ctx, "meta", None) or {}
    info = meta.get("io.modelcontextprotocol/clientInfo")
    if isinstance(info, dict):
        return f"client:{info.get('name', '?')}/{info.get('version', '?')}"
    return "client:anonymous"
