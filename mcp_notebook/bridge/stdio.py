"""``mcp-notebook bridge``: MCP over stdio, forwarded to a kernel's hub over loopback HTTP, or (no
selector: every kernel) to the all-kernels front in this process through the stdio carrier.

stdin/stdout carry newline-delimited JSON-RPC (the MCP stdio transport); diagnostics go to
stderr. Handshake-era traffic uses one hub session: initialize is passed through, later POSTs
carry its Mcp-Session-Id, and a GET SSE stream brings server notifications to stdout.
2026-07-28 requests are stateless and forwarded as they are (subscriptions/listen streams too).
The hub and its token come from the runtime files, so the host's config holds no secret. When
the kernel restarts, the bridge finds the new hub of the same kernel or notebook, initializes
again and re-subscribes, then tells the client that everything may have changed.
"""

from __future__ import annotations

import contextlib
import functools
import os
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

from ..hubclient.address import Feed, HubAddress, Link
from ..hubclient.blocking import STREAM_ERRORS
from ..protocol.jsonrpc import INVALID_REQUEST, RpcError, dumps, refuse_batch
from ..revisions import META_SUB_ID, STATELESS, allows_batch, classify
from ..runtime import HubRecord
from .claude_push import ClaudePush
from .http_link import Upstream
from .hub_selection import POLL_SECONDS, FrontRecord, FrontSelector, NoHub, Selector
from .stdio_input import (
    MAX_INFLIGHT,
    MAX_WAITING,
    Ledger,
    Oversize,
    RequestPool,
    batch_version,
    check,
    decode,
    oversize_error,
    owed_ids,
    read_lines,
)

NO_HUB = -32000  # implementation-defined range
FAILED = (*STREAM_ERRORS, ValueError)  # no hub answered there (ValueError: not JSON, not a hub)
MAX_LISTENS = 64  # open subscriptions/listen streams (their own bound: they last, requests do not)
BUSY = -32001
DRAIN_SECONDS = 5.0
GONE = "the bridge is closing (stdin ended) before the hub answered this request"


def _error(msg_id: Any, code: int, message: str, data: Any = None) -> dict[str, Any]:
    err: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        err["data"] = data
    return {"jsonrpc": "2.0", "id": msg_id, "error": err}


def errors_for(msg: Any, code: int, text: str) -> Any:
    """The same error for each request of a line (a batch's as one array); None: none is owed."""
    ids = owed_ids(msg)
    if not ids:
        return None
    return [_error(i, code, text) for i in ids] if isinstance(msg, list) else _error(ids[0], code, text)


def relisten_notes(sub_id: Any, honoured: dict[str, Any]) -> list[dict[str, Any]]:
    """What a listen re-established on a new hub tells the client: what it watches may have changed."""
    meta = {META_SUB_ID: sub_id}
    notes: list[dict[str, Any]] = []
    if honoured.get("resourcesListChanged"):
        notes.append({"jsonrpc": "2.0", "method": "notifications/resources/list_changed", "params": {"_meta": meta}})
    for uri in honoured.get("resourceSubscriptions") or []:
        notes.append(
            {"jsonrpc": "2.0", "method": "notifications/resources/updated", "params": {"_meta": meta, "uri": uri}}
        )
    return notes


def track(subscriptions: set[str], msg: dict[str, Any], replies: list[Any]) -> None:
    """Remember subscriptions, to restore them on a new hub."""
    method = msg.get("method")
    params = msg.get("params")
    uri = params.get("uri") if isinstance(params, dict) else None
    ok = any(isinstance(r, dict) and r.get("id") == msg.get("id") and "result" in r for r in replies)
    if ok and isinstance(uri, str):
        if method == "resources/subscribe":
            subscriptions.add(uri)
        elif method == "resources/unsubscribe":
            subscriptions.discard(uri)


def _subscribe(n: int, uri: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": f"bridge-sub-{n}", "method": "resources/subscribe", "params": {"uri": uri}}


def _ours(replies: list[Any], msg_id: Any) -> list[Any]:
    """A hub's refusal before it read the body (a 413: id null) answers the one message sent."""
    return [{**r, "id": msg_id} if isinstance(r, dict) and "error" in r and r.get("id") is None else r for r in replies]


class Bridge:
    """Reads stdin, writes stdout; one hub session at a time, replaced when the kernel restarts."""

    def __init__(
        self,
        selector: Selector,
        out: IO[bytes] | None = None,
        reconnect_timeout: float = 30.0,
        log: IO[str] | None = None,
        channel: bool = False,
        connect: Callable[[HubRecord], Link] = Upstream,
    ):
        self.selector = selector
        self.connect = connect  # the upstream for a hub record (HTTP; the stdio carrier for a front)
        self.out = out or sys.stdout.buffer
        self.log_file = log or sys.stderr
        self.reconnect_timeout = reconnect_timeout
        self._out_lock = threading.Lock()
        self._conn_lock = threading.RLock()
        self._closing = threading.Event()
        self._pool = RequestPool(self._busy, self._failed)  # stdin is never blocked: cancels go through
        self._ledger = Ledger()  # every request read and not yet answered: answered at close at the latest
        # handshake-era session state
        self.up: Link | None = None
        self.session_id: str | None = None
        self.version: str | None = None
        self.init_message: dict[str, Any] | None = None
        self.subscriptions: set[str] = set()
        self.generation = 0
        # stateless-era listen streams: request id -> open connection
        self._listens: dict[Any, Feed | None] = {}  # None: opening
        self._listens_lock = threading.Lock()  # never held while waiting for a hub
        self.channel: ClaudePush | None = ClaudePush(self.write, self._channel_hub) if channel else None

    def _channel_hub(self) -> HubAddress | None:
        """Where the channel watches what the session read: the hub (or front) it talks to."""
        try:
            address = (self.up or self.connect(self.selector.find())).address()
        except NoHub:
            return None
        if address is None:
            self.log("--channel: this upstream cannot be watched; no events for it")
        return address

    # == stdio =================================================================================
    def run(self, stdin: IO[bytes] | None = None) -> int:
        src = stdin or sys.stdin.buffer
        self.log(f"bridging stdio to {self.selector.describe()}")
        for raw in read_lines(src):
            if isinstance(raw, Oversize):
                self.write(oversize_error(raw))
                continue
            line = raw.strip()
            if not line:
                continue
            msg, problem = decode(line)
            if problem is not None:
                self.write(problem)
                continue
            self._ledger.owe(owed_ids(msg))
            try:
                self.dispatch(msg, len(line))
            except Exception as exc:  # a bug: said on stderr and to the client, and the bridge reads on
                self.log(f"could not handle a message: {exc!r}")
                self._answer_all(msg, -32603, "the bridge could not handle this message")
        self.close()
        return 0

    def write(self, message: Any) -> None:
        if self.channel is not None:
            message = self.channel.outgoing(message)
        data = dumps(message) + b"\n"  # never fails on text (a hub's reply may hold anything)
        with self._out_lock:
            if not self._ledger.paid(message):
                return  # the bridge settled its answers as it closed: this one was given already
            try:
                self.out.write(data)
                self.out.flush()
            except (BrokenPipeError, ValueError):
                self._closing.set()

    def log(self, text: str) -> None:
        with contextlib.suppress(Exception):
            print(f"mcp-notebook bridge: {text}", file=self.log_file, flush=True)

    def dispatch(self, msg: Any, size: int = 0) -> None:
        """Initialize and notifications in order, on this thread; requests on their own threads
        (``size``: the bytes the message took on stdin, for the link's bound)."""
        if self.channel is not None:
            for item in msg if isinstance(msg, list) else [msg]:
                self.channel.incoming(item)
        if isinstance(msg, list):  # a 2025-03-26 batch: answer it as one array
            self._spawn(self._batch, msg)
            return
        method = msg.get("method")
        if method == "initialize":
            self._initialize(msg, size)
        elif method == "notifications/cancelled" and self._cancel_listen(msg):
            return
        elif "id" not in msg or method is None:
            self._notify(msg)
        elif method == "subscriptions/listen" and classify({}, msg) == STATELESS:
            self._open_listen(msg)
        else:
            self._spawn(functools.partial(self._request, size=size), msg)

    def _spawn(self, fn: Callable[[Any], None], msg: Any) -> None:
        self._pool.submit(fn, msg)

    def _answer_all(self, msg: Any, code: int, text: str) -> None:
        answer = errors_for(msg, code, text)
        if answer is not None:
            self.write(answer)

    def _busy(self, msg: Any) -> None:
        self._answer_all(msg, BUSY, f"the bridge has {MAX_INFLIGHT} requests in flight and {MAX_WAITING} waiting")

    def _failed(self, msg: Any, exc: Exception) -> None:
        """A bug: the request still gets an answer, the bridge goes on."""
        self.log(f"a request failed: {exc!r}")
        self._answer_all(msg, -32603, "the bridge could not handle this request")

    def _open_listen(self, msg: dict[str, Any]) -> None:
        """A listen holds its thread for its life: its own bound, never a request slot."""
        sub_id = msg["id"]
        with self._listens_lock:
            if sub_id in self._listens:
                problem = "Invalid Request: a subscriptions/listen with this id is open (cancel it first)"
            elif len(self._listens) >= MAX_LISTENS:
                problem = f"Invalid Request: at most {MAX_LISTENS} subscriptions/listen may be open; cancel one first"
            else:
                problem = ""
                self._listens[sub_id] = None
        if problem:
            self.write(_error(sub_id, -32600, problem))
            return
        threading.Thread(target=self._listen, args=(msg,), name="mcp-notebook-bridge-listen", daemon=True).start()

    def _batch(self, items: list[Any]) -> None:
        """A batch where the revision has them (2025-03-26 and before): each request answered in one
        array, notifications forwarded and answered nothing; elsewhere each request gets the error."""
        version = batch_version(items, self.version)
        if version is not None and not allows_batch(version):
            text = f"Invalid Request: JSON-RPC batches are not part of MCP {version}"
            self.write(refuse_batch(items, RpcError(INVALID_REQUEST, text)))
            return
        replies: list[Any] = []
        for item in items:
            if (problem := check(item)) is not None:
                replies.append(problem)
            elif "id" not in item or item.get("method") is None:  # a notification, a response: no answer
                self._notify(item)
            else:
                try:
                    replies += self._handle(item)
                except Exception as exc:  # a bug: this item's answer says so, the others go on
                    self.log(f"a batched request failed: {exc!r}")
                    replies.append(_error(item["id"], -32603, "the bridge could not handle this request"))
        if replies:
            self.write(replies)

    def _request(self, msg: dict[str, Any], size: int = 0) -> None:
        for reply in self._handle(msg, size):
            self.write(reply)

    def _handle(self, msg: dict[str, Any], size: int = 0) -> list[Any]:
        if classify({}, msg) == STATELESS:
            if msg.get("method") == "subscriptions/listen":  # in a batch: answered as one request
                return [_error(msg.get("id"), -32600, "Invalid Request: subscriptions/listen cannot be batched")]
            return self._stateless(msg, size)
        return self._forward(msg, size)

    # == handshake era ===========================================================================
    def _initialize(self, msg: dict[str, Any], size: int = 0) -> None:
        with self._conn_lock:
            try:
                record = self.selector.find(prefer=self.up.record if self.up else None)
                reply = self._open_session(record, msg, size)
                self.init_message = msg  # what a reconnect replays: an initialize the hub accepted
            except NoHub as exc:
                self.log(str(exc))
                self.write(_error(msg.get("id"), NO_HUB, str(exc)))
                return
            except FAILED as exc:
                self.write(_error(msg.get("id"), NO_HUB, f"The hub did not answer initialize: {exc}"))
                return
        self.log(f"connected to {record.describe()}")
        self.write(reply)

    def _open_session(self, record: HubRecord, init: dict[str, Any], size: int = 0) -> Any:
        """initialize against ``record``; keeps the session and returns the hub's reply."""
        up = self.connect(record)
        status, session_id, replies = up.call(init, size=size)
        if status != 200 or not replies or "result" not in replies[0]:
            detail = replies[0].get("error", {}).get("message") if replies and isinstance(replies[0], dict) else ""
            raise OSError(f"HTTP {status} {detail}".strip())
        self.up = up
        self.session_id = session_id
        self.version = replies[0]["result"].get("protocolVersion")
        self.generation += 1
        return replies[0]

    def _notify(self, msg: dict[str, Any]) -> None:
        """Forward a notification (or a response to a server request) once; never wait for a hub."""
        if self.up is None:
            return
        with contextlib.suppress(*FAILED):
            self.up.call(msg, self.session_id, self.version)
        if msg.get("method") == "notifications/initialized":
            self._start_stream(self.generation)

    def _forward(self, msg: dict[str, Any], size: int = 0) -> list[Any]:
        msg_id = msg.get("id")
        if self.init_message is None:
            return [_error(msg_id, -32600, "Invalid Request: send initialize first")]
        for attempt in range(2):
            gen, up, sid, version = self.generation, self.up, self.session_id, self.version
            try:
                if up is None:
                    raise ConnectionError("no hub")
                status, _, replies = up.call(msg, sid, version, size)
            except FAILED:
                status, replies = 0, []
            if status in (0, 401, 404) and attempt == 0:
                try:  # the kernel restarted or the hub was reloaded: find the new one
                    self._reconnect(gen)
                except NoHub as exc:
                    return [_error(msg_id, NO_HUB, str(exc))]
                continue
            if status == 0:
                return [_error(msg_id, NO_HUB, self.selector.no_hub_message())]
            track(self.subscriptions, msg, replies)
            return _ours(replies, msg_id)
        return [_error(msg_id, NO_HUB, self.selector.no_hub_message())]

    def _reconnect(self, gen: int) -> None:
        """Replace a dead session by one on the current hub (same kernel or notebook)."""
        with self._conn_lock:
            if self.generation != gen and self.up is not None:
                return  # another thread already did it
            if self.init_message is None:
                raise NoHub(self.selector.no_hub_message())
            old = self.up.record if self.up is not None else None
            wait = self.reconnect_timeout if self.up is not None else min(2.0, self.reconnect_timeout)
            deadline = time.monotonic() + wait
            while True:
                try:
                    record = self.selector.find(old, max(0.0, deadline - time.monotonic()), self._closing)
                    self._open_session(record, {**self.init_message, "id": "bridge-reconnect"})
                    break
                except NoHub:
                    self.up, self.session_id = None, None
                    raise
                except FAILED:  # found a file; no hub answers there yet
                    if time.monotonic() >= deadline or self._closing.is_set():
                        self.up, self.session_id = None, None
                        raise NoHub(self.selector.no_hub_message()) from None
                    time.sleep(POLL_SECONDS)
            up, sid, version = self.up, self.session_id, self.version
            assert up is not None
            with contextlib.suppress(*FAILED):
                up.call({"jsonrpc": "2.0", "method": "notifications/initialized"}, sid, version)
            for n, uri in enumerate(sorted(self.subscriptions)):
                with contextlib.suppress(*FAILED):
                    up.call(_subscribe(n, uri), sid, version)
            self._start_stream(self.generation)
        self.log(f"reconnected to {record.describe()}")
        self.write({"jsonrpc": "2.0", "method": "notifications/resources/list_changed"})
        for uri in sorted(self.subscriptions):
            self.write({"jsonrpc": "2.0", "method": "notifications/resources/updated", "params": {"uri": uri}})

    def _start_stream(self, gen: int) -> None:
        if self.session_id and self.up is not None:
            args = (gen, self.up, self.session_id, self.version)
            threading.Thread(target=self._stream, args=args, name="mcp-notebook-bridge-sse", daemon=True).start()

    def _stream(self, gen: int, up: Link, session_id: str, version: str | None) -> None:
        """Copy the session's stream to stdout; when it breaks, reconnect (the kernel restarted)."""
        try:
            feed: Feed | None = up.stream(session_id, version)
        except STREAM_ERRORS:
            feed = None
        if feed is not None:
            try:
                if feed.streaming:
                    for message in feed.messages():
                        if gen != self.generation or self._closing.is_set():
                            return
                        self.write(message)
            except STREAM_ERRORS:
                pass
            finally:
                feed.close()
        if gen != self.generation or self._closing.is_set():
            return
        try:
            self._reconnect(gen)
        except NoHub as exc:
            self.log(f"lost the hub: {exc}")

    # == stateless era ===========================================================================
    def _stateless_up(self, wait: float) -> Link:
        with self._conn_lock:
            if self.up is None:
                self.up = self.connect(self.selector.find(None, wait, self._closing))
            return self.up

    def _drop(self, up: Link) -> None:
        with self._conn_lock:
            if self.up is up:
                self.up = None

    def _stateless(self, msg: dict[str, Any], size: int = 0) -> list[Any]:
        msg_id = msg.get("id")
        for attempt in range(2):
            try:
                up = self._stateless_up(self.reconnect_timeout if attempt else 0.0)
            except NoHub as exc:
                return [_error(msg_id, NO_HUB, str(exc))]
            try:
                status, _, replies = up.call(msg, size=size)
            except FAILED:
                status, replies = 0, []
            if status not in (0, 401):
                return _ours(replies, msg_id)
            self._drop(up)
        return [_error(msg_id, NO_HUB, self.selector.no_hub_message())]

    def _listen(self, msg: dict[str, Any]) -> None:
        """Keep a subscriptions/listen stream open across hub restarts until the client cancels it."""
        sub_id = msg.get("id")  # registered by _open_listen
        acknowledged = False
        retry_until: float | None = None  # while re-establishing a broken listen
        try:
            while sub_id in self._listens and not self._closing.is_set():
                if retry_until is not None:
                    if time.monotonic() >= retry_until:
                        self.write(_error(sub_id, NO_HUB, self.selector.no_hub_message()))
                        return
                    time.sleep(POLL_SECONDS)
                try:
                    up = self._stateless_up(self.reconnect_timeout if acknowledged else 0.0)
                    feed = up.listen(msg)
                except NoHub as exc:
                    self.write(_error(sub_id, NO_HUB, str(exc)))
                    return
                except STREAM_ERRORS:
                    self._drop(up)
                    if not acknowledged:
                        self.write(_error(sub_id, NO_HUB, self.selector.no_hub_message()))
                        return
                    if retry_until is None:
                        retry_until = time.monotonic() + self.reconnect_timeout
                    continue
                with self._listens_lock:
                    if sub_id not in self._listens:  # cancelled while the hub was answering
                        feed.close()
                        return
                    self._listens[sub_id] = feed
                if not feed.streaming:
                    try:  # a JSON-RPC error; anything else means no hub answered there
                        for message in feed.messages():
                            self.write(message)
                    except ValueError:
                        self.write(_error(sub_id, NO_HUB, self.selector.no_hub_message()))
                    finally:
                        feed.close()
                    return
                try:
                    saw_ack, ended = self._relay_listen(sub_id, feed, acknowledged)
                finally:
                    feed.close()
                if ended:
                    return
                if saw_ack:
                    acknowledged, retry_until = True, None
                self._drop(up)
                if retry_until is None:
                    retry_until = time.monotonic() + self.reconnect_timeout
        finally:
            self._listens.pop(sub_id, None)

    def _relay_listen(self, sub_id: Any, feed: Feed, acknowledged: bool) -> tuple[bool, bool]:
        """Copy one listen stream to stdout until it breaks; (an acknowledgement came, the hub ended
        the subscription gracefully). A listen re-established on a new hub is not acknowledged
        twice: the client is told instead that what it watches may have changed."""
        saw_ack = False
        try:
            for message in feed.messages():
                if message.get("method") == "notifications/subscriptions/acknowledged":
                    saw_ack = True
                    if acknowledged:
                        self._replay(sub_id, (message.get("params") or {}).get("notifications") or {})
                        continue
                    acknowledged = True
                self.write(message)
                if message.get("id") == sub_id:
                    return saw_ack, True
        except STREAM_ERRORS:
            pass
        return saw_ack, False

    def _replay(self, sub_id: Any, honoured: dict[str, Any]) -> None:
        """After a re-listen on a new hub, say that what the client watches may have changed."""
        for note in relisten_notes(sub_id, honoured):
            self.write(note)

    def _cancel_listen(self, msg: dict[str, Any]) -> bool:
        params = msg.get("params")
        request_id = params.get("requestId") if isinstance(params, dict) else None
        if isinstance(request_id, bool) or not isinstance(request_id, (str, int)):
            return False  # not a listen of ours (a malformed cancel goes to the hub, which ignores it)
        with self._listens_lock:
            if request_id not in self._listens:
                return False
            feed = self._listens.pop(request_id, None)
        if feed is not None:
            feed.cancel()
        return True

    # == shutdown ================================================================================
    def close(self) -> None:
        """stdin ended: end the hub session (DELETE) and every stream."""
        self._closing.set()
        for request_id in list(self._listens):
            self._cancel_listen({"params": {"requestId": request_id}})
        self._pool.drain(DRAIN_SECONDS)  # let answers to the last requests go out
        self._pool.stop()
        self._settle()
        up, sid = self.up, self.session_id
        self.generation += 1
        if up is not None and sid:
            with contextlib.suppress(*STREAM_ERRORS):
                up.end_session(sid, self.version)
        if self.channel is not None:
            self.channel.close()

    def _settle(self) -> None:
        """Every request still unanswered gets its error; nothing is written for it afterwards."""
        with self._out_lock:
            data = b"".join(dumps(_error(i, NO_HUB, GONE)) + b"\n" for i in self._ledger.settle())
            with contextlib.suppress(BrokenPipeError, ValueError, OSError):
                self.out.write(data)
                self.out.flush()


def run_bridge(
    notebook: str | None, kernel: str | None, reconnect_timeout: float, latest: bool = False, channel: bool = False
) -> int:
    """Bridge stdio to one kernel's hub (a selector, or ``latest``), else to every kernel: a front
    in this process (mcp_notebook.allkernels) driven through the stdio carrier, no port, no token."""
    if notebook or kernel or latest:
        return Bridge(Selector(notebook, kernel), reconnect_timeout=reconnect_timeout, channel=channel).run()
    from ..allkernels.directory import LocalDirectory
    from ..allkernels.front import KernelsFront
    from .stdio_carrier import StdioCarrier

    front = KernelsFront(LocalDirectory())
    count = lambda: len(front.provider.kernels(fresh=True)[0])  # noqa: E731
    record = FrontRecord(Path(), {"pid": os.getpid(), "started_at": time.time()}, True, count=count)
    carrier = StdioCarrier(front.server, record)
    try:
        selector = FrontSelector(record)
        return Bridge(selector, reconnect_timeout=reconnect_timeout, channel=channel, connect=lambda _: carrier).run()
    finally:
        carrier.close()
        front.close()
