"""Handshake-era MCP sessions shared by the service's replicas, through the store.

A session made at one replica (``initialize``) is recorded before its reply goes: its id (as a
hash), its grant, the negotiated revision, the client's info and capabilities, its log level and
subscriptions. Another replica that gets a request of that session it does not know adopts it from
the store (only with a token of the same grant), subscriptions included, so a GET stream reopened
there after the first replica died carries the session's notifications. Changes (subscribe,
unsubscribe, setLevel) and ends (DELETE, a revoked grant) reach the other replicas within a second
(``follow``, every second off the event loop); until then, a replica's copy may lag by that second.
"""

from __future__ import annotations

import functools
import json
import threading
import time
from collections.abc import Callable
from typing import Any

from ..allkernels.front import KernelsFront
from ..protocol.handshake import HandshakeEra, Session
from .store import Store, digest

MAX_CLIENT_BYTES = 16_384  # what a session row keeps of the client's info and capabilities


class SharedSessions:
    """The store's side of every grant front's handshake-era sessions."""

    def __init__(self, store: Store):
        self.store = store
        self._since = time.time() - 60.0
        self._following = threading.Lock()  # one follow at a time (one may wait for listens)
        self._written: dict[str, float] = {}  # session hash -> when this replica last wrote it

    def attach(self, front: KernelsFront, family: str) -> None:
        """Record the sessions clients make, change and end at ``front`` (a grant's)."""
        front.server.handshake.observer = functools.partial(self._record, family)

    def _record(self, family: str, event: str, session: Session) -> None:
        """On the request's worker, before its reply: the next request may reach another replica."""
        if len(self._written) > 10_000:
            self._written.clear()
        self._written[digest(session.id)] = time.time()  # a row older than this is stale here
        if event == "deleted":
            self.store.end_session(session.id)
            return
        client = _bounded({"info": session.client_info, "capabilities": session.capabilities})
        subscriptions = sorted(session.subscriptions)
        self.store.save_session(
            session.id, family, session.version, client, session.log_level, subscriptions, event == "created"
        )

    def adopt(self, front: KernelsFront, family: str, sid: str) -> bool:
        """The session ``sid`` of grant ``family`` made at another replica, now known here too (off
        the event loop: its subscriptions wait for the kernels' listens); False: the store has no
        such live session of this grant (the request then gets the protocol's 404)."""
        row = self.store.session(sid)
        if row is None or row.ended or row.family != family:
            return False
        client = row.client if isinstance(row.client, dict) else {}
        session = Session(sid, row.version, client.get("info") or {}, client.get("capabilities") or {})
        session.log_level, session.subscriptions = row.log_level, set(row.subscriptions)
        front.server.handshake.adopt(session)
        return True

    def follow(self, front_of: Callable[[str], KernelsFront | None]) -> None:
        """Sessions changed or ended at any replica since the last look: the copies here follow."""
        if not self._following.acquire(blocking=False):
            return
        try:
            self._follow(front_of)
        finally:
            self._following.release()

    def _follow(self, front_of: Callable[[str], KernelsFront | None]) -> None:
        rows, self._since = self.store.sessions_since(self._since)
        for row in rows:
            front = front_of(row.family)
            if front is None or row.updated < self._written.get(row.hash, 0.0):
                continue  # not here, or read before this replica's own newer write committed
            era: HandshakeEra = front.server.handshake
            for session in era.sessions():
                if digest(session.id) != row.hash:
                    continue
                if row.ended:
                    era.drop(session.id)
                elif session.log_level != row.log_level or session.subscriptions != set(row.subscriptions):
                    era.sync(session.id, row.log_level, set(row.subscriptions))


def _bounded(client: dict[str, Any]) -> dict[str, Any]:
    """The client's info and capabilities as a row keeps them: whole when small (as clients send
    them), else the name and version only (a client may send a body of megabytes)."""
    if len(json.dumps(client)) <= MAX_CLIENT_BYTES:
        return client
    info = client.get("info") if isinstance(client.get("info"), dict) else {}
    short = {"name": str(info.get("name", ""))[:200], "version": str(info.get("version", ""))[:100]}
    caps = client.get("capabilities")
    keep = isinstance(caps, dict) and len(json.dumps(caps)) <= MAX_CLIENT_BYTES // 2
    return {"info": short, "capabilities": caps if keep else {}}
