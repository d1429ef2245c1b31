"""What one caller may ask of the service: registration's size, rate and total, sign-ins pending
at once (bounded and expiring), each per calling address; and the turns unauthenticated requests
take on the event loop.

The address is the one the last proxy saw: the last ``X-Forwarded-For`` entry (configurable-http-
proxy appends the address it received the request from), else the connection's peer. An entry a
caller writes itself comes before it and is never read.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from typing import Any

from .store import Store

MAX_NAME = 200  # client_name and other short strings
MAX_FIELD = 2000  # any other string (a URI)
MAX_REDIRECT_URIS = 10
MAX_LIST = 20  # grant_types, response_types, contacts...
MAX_BODY = 16 * 1024


def caller_address(headers: Any, remote_ip: str | None) -> str:
    forwarded = headers.get("X-Forwarded-For") or ""
    last = forwarded.rsplit(",", 1)[-1].strip()
    return last or remote_ip or "?"


def registration_problem(data: dict[str, Any]) -> str | None:
    """Why a registration's metadata is refused for its size (None: within the limits)."""
    uris = data.get("redirect_uris")
    if isinstance(uris, list) and len(uris) > MAX_REDIRECT_URIS:
        return f"at most {MAX_REDIRECT_URIS} redirect_uris"
    if len(data) > 40:
        return "too many fields"
    for key, value in data.items():
        if len(str(key)) > MAX_NAME:
            return "a field name is too long"
        values = value if isinstance(value, list) else [value]
        if len(values) > MAX_LIST:
            return f"{key}: at most {MAX_LIST} values"
        for item in values:
            limit = MAX_NAME if key in ("client_name", "software_id", "software_version", "scope") else MAX_FIELD
            if not isinstance(item, str | int | float | bool) or item is None:
                return f"{key}: only strings and numbers"
            if isinstance(item, str) and len(item) > limit:
                return f"{key}: at most {limit} characters"
    return None


class RateLimit:
    """A token bucket per address in the store (every replica counts together): ``burst`` at once,
    then ``per_minute``."""

    def __init__(self, store: Store, per_minute: float, burst: int):
        self.store, self.rate, self.burst = store, per_minute / 60.0, burst

    def allow(self, address: str) -> bool:
        return self.store.take(address, self.rate, self.burst)


class PendingSignIns:
    """Authorization requests waiting for the user's sign-in and consent, in the store (any replica
    answers the consent): each expires after ``seconds``; at most ``per_address`` per calling
    address and ``total`` in all."""

    def __init__(self, store: Store, seconds: float = 600.0, total: int = 1000, per_address: int = 20):
        self.store, self.seconds, self.total, self.per_address = store, seconds, total, per_address

    def add(self, query: str, address: str) -> tuple[str, str] | None:
        """A new pending id and the browser's nonce; None when the caps are reached."""
        return self.store.add_pending(query, address, self.seconds, self.total, self.per_address)

    def get(self, pending: str) -> tuple[str, str] | None:
        """(query, nonce) of a pending request not expired."""
        return self.store.pending(pending, self.seconds)

    def pop(self, pending: str) -> None:
        self.store.drop_pending(pending)


class Turns:
    """The unauthenticated endpoints' handlers take turns on the event loop: a few at a time (as
    many steps as fit in ``batch_seconds``, judged by the last batch), each batch in a loop iteration
    of its own, and together at most ``share`` of the loop's time while they queue (after a batch
    that took t, the next waits t * (1 / share - 1)). So a burst of them (a hundred at once) is
    answered spread out, interleaved with the signed-in users' reads, instead of ahead of them; a
    lone request waits for nothing. At most ``waiting`` wait; past that a request is refused at
    once (``take`` returns False)."""

    MAX_BATCH = 32

    def __init__(self, waiting: int = 512, share: float = 0.25, batch_seconds: float = 0.002):
        self.waiting, self.rest, self.batch_seconds = waiting, 1.0 / share - 1.0, batch_seconds
        self._queue: deque[asyncio.Future[None]] = deque()
        self._handing = False
        self._batch = 1  # steps handed over at once (grows while steps are short)
        self._given = (0.0, 0)  # when the last batch was handed over (perf_counter), its size

    async def take(self) -> bool:
        """Wait for this request's turn (False: too many wait, refuse it). The turn is the rest of
        the caller's synchronous step: the next batch is handed over once this one ended."""
        if len(self._queue) >= self.waiting:
            return False
        loop = asyncio.get_running_loop()
        turn = loop.create_future()
        self._queue.append(turn)
        if not self._handing:
            self._handing = True
            loop.call_soon(self._hand_over)
        await turn
        return True

    def _hand_over(self) -> None:
        """Wake the next batch of waiters (their steps run in the next iteration, with whatever I/O
        became ready), and come back right after them."""
        woken = 0
        while self._queue and woken < self._batch:
            turn = self._queue.popleft()
            if not turn.done():  # a caller that went away (its connection closed)
                turn.set_result(None)
                woken += 1
        if not woken:
            self._handing = False
            return
        self._given = (time.perf_counter(), woken)
        asyncio.get_running_loop().call_soon(self._after_batch)

    def _after_batch(self) -> None:
        """Right after the batch's steps: size the next batch by theirs, and hand it over after a
        rest in proportion to the time they took."""
        if not self._queue:
            self._handing = False
            return
        took = time.perf_counter() - self._given[0]
        step = took / self._given[1]
        self._batch = max(1, min(self.MAX_BATCH, int(self.batch_seconds / step) if step > 0 else self.MAX_BATCH))
        asyncio.get_running_loop().call_later(took * self.rest, self._hand_over)
