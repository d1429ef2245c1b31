"""The stdio bridge's input: newline-delimited JSON-RPC read in bounded lines, decoded strictly,
and answered by a pool that never blocks the thread reading stdin (so cancels always go through).

Each bad line becomes the JSON-RPC error it deserves, with the line's id when one can be told
(never a dead bridge): a line over :data:`MAX_LINE_BYTES` is dropped unread past its head (-32600
naming the limit; the id salvaged from the head when it stands before the big part), bytes that
are not UTF-8 JSON or nest too deep are -32700, a lone surrogate is refused as the hub refuses it
(``jsonrpc.parse_body``), and a value that is not a JSON-RPC 2.0 message is -32600/-32602
(``jsonrpc.to_message``). What passes has the types the bridge relies on: an object with a
string method, a string or integer id, object params.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import IO, Any

from ..protocol.jsonrpc import INVALID_REQUEST, RequestId, RpcError, error, parse_body, request_id_of, to_message
from ..revisions import META_VERSION, STATELESS, classify

MAX_INFLIGHT = 32  # requests answered at once (each on its own thread); more wait in a queue
MAX_WAITING = 1024  # requests queued behind those; beyond, answered "busy" at once
IDLE_SECONDS = 2.0  # how long a request thread with nothing to do waits for the next request
MAX_LINE_BYTES = 4 * 1024 * 1024  # above the hub's own default body limit (MCPHub.max_body_bytes, 1 MB)
SALVAGE_BYTES = 64 * 1024  # how much of an oversized line is kept to find its id
_SKIP_BYTES = 1 << 16
_STRING = re.compile(rb'"(?:[^"\\]|\\.)*"', re.DOTALL)
_INTERESTING = re.compile(rb'["{}\[\]]')
_ID_VALUE = re.compile(rb'\s*:\s*(-?[0-9]{1,18}|"(?:[^"\\\x00-\x1f]|\\.){0,200}")(?=\s*[,}])')


@dataclass
class Oversize:
    """A line longer than the limit: only its head was kept."""

    head: bytes


def read_lines(src: IO[bytes], limit: int = MAX_LINE_BYTES) -> Iterator[bytes | Oversize]:
    """The lines of ``src``, each at most ``limit`` bytes; a longer one is skipped in bounded reads
    (never held whole in memory) and given as :class:`Oversize`."""
    while True:
        raw = src.readline(limit + 1)
        if not raw:
            return
        if len(raw) > limit and not raw.endswith(b"\n"):
            head = raw[:SALVAGE_BYTES]
            while True:
                rest = src.readline(_SKIP_BYTES)
                if not rest or rest.endswith(b"\n"):
                    break
            yield Oversize(head)
            continue
        yield raw


def oversize_error(line: Oversize, limit: int = MAX_LINE_BYTES) -> dict[str, Any]:
    err = RpcError(INVALID_REQUEST, f"Invalid Request: a stdin line may hold at most {limit} bytes (one message)")
    return error(salvage_id(line.head), err)


def decode(line: bytes) -> tuple[Any, dict[str, Any] | None]:
    """(message, None) for a line that holds a JSON-RPC message or a batch, else (None, its error reply)."""
    try:
        value = parse_body(line)
    except RpcError as err:
        return None, error(err.request_id, err)
    if isinstance(value, list):
        if not value:
            return None, error(None, RpcError(INVALID_REQUEST, "Invalid Request: an empty batch"))
        return value, None
    problem = check(value)
    return (None, problem) if problem is not None else (value, None)


def check(value: Any) -> dict[str, Any] | None:
    """The error reply for a value that is not one JSON-RPC 2.0 message, or None."""
    try:
        to_message(value)
    except RpcError as err:
        return error(request_id_of(value), err)
    return None


def salvage_id(head: bytes) -> RequestId | None:
    """The top-level ``"id"`` of a JSON object's first bytes, when it is there whole; else None."""
    depth, i, n = 0, 0, len(head)
    while i < n:
        found = _INTERESTING.search(head, i)
        if found is None:
            return None
        i = found.start()
        char = head[i : i + 1]
        if char == b'"':
            string = _STRING.match(head, i)
            if string is None:
                return None  # cut inside a string: nothing after this is reliable
            if depth == 1 and string.group() == b'"id"':
                value = _ID_VALUE.match(head, string.end())
                if value is not None:
                    return _clean_id(value.group(1))
            i = string.end()
            continue
        if depth == 0 and char != b"{":
            return None  # a batch, or not an object: no one id to answer
        depth += 1 if char in (b"{", b"[") else -1
        if depth <= 0:
            return None
        i += 1
    return None


def _clean_id(raw: bytes) -> RequestId | None:
    try:
        value = json.loads(raw)
    except ValueError:
        return None
    return request_id_of({"id": value})


def owed_ids(msg: Any) -> list[RequestId]:
    """The ids a decoded line is owed answers for: each request's (a notification, a response and a
    subscriptions/listen, which a cancel may end without an answer, are owed none)."""
    items = msg if isinstance(msg, list) else [msg]
    return [
        i
        for m in items
        if isinstance(m, dict)
        and isinstance(m.get("method"), str)
        and m["method"] != "subscriptions/listen"
        and (i := request_id_of(m)) is not None
    ]


def batch_version(items: list[Any], session: str | None) -> str | None:
    """The revision a batch is read under: a stateless item's, else the session's (None: none yet)."""
    for item in items:
        if isinstance(item, dict) and classify({}, item) == STATELESS:
            return str(item["params"]["_meta"].get(META_VERSION))
    return session


class Ledger:
    """Every request id read on stdin and not yet answered on stdout (a count per id: a client may
    reuse one). ``paid`` is called with each message written; ``settle`` answers what is left, once.
    Its own lock, held only for the counts: the stdin thread never waits for a write to stdout."""

    def __init__(self) -> None:
        self._owed: dict[tuple[bool, RequestId], int] = {}
        self._lock = threading.Lock()
        self.closed = False

    def owe(self, ids: list[RequestId]) -> None:
        if not ids:
            return
        with self._lock:
            for i in ids:
                key = (type(i) is str, i)
                self._owed[key] = self._owed.get(key, 0) + 1

    def paid(self, message: Any) -> bool:
        """Strike the answers in ``message`` off; False once settled (nothing more may be written)."""
        with self._lock:
            if self.closed:
                return False
            for item in message if isinstance(message, list) else [message]:
                if type(item) is dict and "method" not in item:
                    i = item.get("id")
                    key = (type(i) is str, i)
                    n = self._owed.get(key, 0)
                    if n > 1:
                        self._owed[key] = n - 1
                    elif n:
                        del self._owed[key]
            return True

    def settle(self) -> list[RequestId]:
        """The ids still owed (each as often as owed); nothing is accepted afterwards."""
        with self._lock:
            left = [i for (_, i), n in self._owed.items() for _ in range(n)]
            self._owed.clear()
            self.closed = True
        return left


Job = Callable[[Any], None]


class RequestPool:
    """At most ``threads`` requests answered at once, ``waiting`` more queued; beyond that ``busy``
    is called at once. A request that raises is passed to ``failed`` (it must still be answered).
    A worker with nothing to do waits ``idle`` seconds for the next request before it ends, so
    requests one after another reuse a thread instead of starting one each."""

    def __init__(
        self,
        busy: Callable[[Any], None],
        failed: Callable[[Any, Exception], None],
        threads: int = MAX_INFLIGHT,
        waiting: int = MAX_WAITING,
        idle: float = IDLE_SECONDS,
    ):
        self._busy, self._failed = busy, failed
        self._threads, self._max_waiting = threads, waiting
        self._idle_seconds = idle
        self._cond = threading.Condition()
        self.workers = 0  # threads alive
        self.idle = 0  # of them, waiting for a request
        self._stopped = False
        self._waiting: deque[tuple[Job, Any]] = deque()

    def submit(self, fn: Job, msg: Any) -> None:
        """Run ``fn(msg)`` on a request thread, or queue it; never blocks."""
        with self._cond:
            queued = len(self._waiting) - self.idle  # (what an idle worker is about to take is not queued)
            if queued < 0:  # a worker waiting for work takes it
                self._waiting.append((fn, msg))
                self._cond.notify_all()  # (drain() may wait on the condition too)
                return
            start = self.workers < self._threads
            if start:
                self.workers += 1
            elif queued < self._max_waiting:
                self._waiting.append((fn, msg))
                return
        if start:
            threading.Thread(target=self._work, args=(fn, msg), name="mcp-notebook-bridge-req", daemon=True).start()
        else:
            self._busy(msg)

    def _work(self, fn: Job, msg: Any) -> None:
        while True:
            try:
                fn(msg)
            except Exception as exc:
                self._failed(msg, exc)
            with self._cond:
                job = self._next()
                if job is None:
                    self.workers -= 1
                    self._cond.notify_all()
                    return
                fn, msg = job

    def _next(self) -> tuple[Job, Any] | None:
        """The next queued request, waiting for one at most the idle time (the lock is held)."""
        deadline = time.monotonic() + self._idle_seconds
        self.idle += 1
        self._cond.notify_all()  # drain() counts the busy workers
        try:
            while not self._waiting:
                left = deadline - time.monotonic()
                if left <= 0 or self._stopped:
                    return None
                self._cond.wait(left)
            return self._waiting.popleft()
        finally:
            self.idle -= 1

    def drain(self, seconds: float) -> None:
        """Wait (at most ``seconds``) for every request to be answered."""
        deadline = time.monotonic() + seconds
        with self._cond:
            while (self.workers > self.idle or self._waiting) and time.monotonic() < deadline:
                self._cond.wait(max(0.0, deadline - time.monotonic()))

    def stop(self) -> None:
        """Let the idle workers end now (after ``drain``)."""
        with self._cond:
            self._stopped = True
            self._cond.notify_all()
