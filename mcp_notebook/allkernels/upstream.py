"""Talking to the kernels' hubs: stateless-era requests from any thread, and one listen stream per
hub on a single event loop (no thread per kernel), both through the hub client (hubclient/).

Every request is self-contained (MCP 2026-07-28): the hub's token goes with it and never leaves
this process. A hub that goes away mid-request is a clean :class:`HubGone`, never a hang (every
call has a deadline).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import logging
import threading
from collections.abc import Callable
from typing import Any

from .. import hop_trace
from ..hubclient.address import VERSION, HubAddress
from ..hubclient.aio import request
from ..hubclient.blocking import exchange
from ..hubclient.rules import CALL_SECONDS, LISTEN_OPEN_SECONDS, UpstreamError
from ..protocol.wire_sse import sse_data
from ..revisions import META_CAPS, META_CLIENT_INFO, META_SUB_ID, META_VERSION
from ..version import __version__

__all__ = ["HubError", "HubGone", "Listens", "call", "message"]
log = logging.getLogger(__name__)
RETRY_SECONDS = 1.0
# The most an event may hold before its end: a hub that never ends one (a user's own server,
# hostile or broken) ends its stream instead of growing a buffer on a loop other users share.
MAX_EVENT_BYTES = 1 << 20
_ids = itertools.count(1)


NO_ANSWER = "the hub did not answer"


class HubGone(Exception):
    """The hub did not answer (it stopped, or its kernel died)."""


class HubError(Exception):
    """The hub answered with a JSON-RPC error."""

    def __init__(self, error: dict[str, Any]):
        super().__init__(str(error.get("message", "error")))
        self.code = int(error.get("code", -32603))
        self.data = error.get("data")


def message(method: str, params: dict[str, Any]) -> dict[str, Any]:
    """A stateless request: the revision and our identity in ``_meta``."""
    meta = {
        META_VERSION: VERSION,
        META_CAPS: {},
        META_CLIENT_INFO: {"name": "mcp-notebook-kernels", "version": __version__},
    }
    meta = {**(params.get("_meta") or {}), **meta}  # (a front's own keys, e.g. budget.META_SCALE)
    return {"jsonrpc": "2.0", "id": next(_ids), "method": method, "params": {**params, "_meta": meta}}


def call(hub: HubAddress, method: str, params: dict[str, Any], timeout: float = CALL_SECONDS) -> dict[str, Any]:
    """The result of one request to ``hub`` (any thread; a kept-alive connection, see hubclient)."""
    body = json.dumps(message(method, params)).encode()
    headers = hub.headers(method, params)
    try:
        if hub.route is not None:
            status, kind, raw = hub.route.call(headers, body, timeout)
        else:
            status, rheaders, raw = exchange(hub.endpoint, "POST", headers, body, timeout)
            kind = rheaders.get("content-type", "")
    except (UpstreamError, TimeoutError, OSError) as exc:
        text = str(exc)  # the hub client's own errors say what happened already
        raise HubGone(text if text.startswith(NO_ANSWER) else f"{NO_ANSWER}: {text}") from None
    return _result(_last_reply(raw, "text/event-stream" in kind), hub, status)


def _result(reply: dict[str, Any] | None, hub: HubAddress, status: int) -> dict[str, Any]:
    if reply is None:
        raise HubGone(f"the hub answered {status} without a JSON-RPC reply")
    if "error" in reply:
        raise HubError(reply["error"])
    return reply.get("result") or {}


def _last_reply(raw: bytes, sse: bool) -> dict[str, Any] | None:
    try:
        docs = [json.loads(d) for d in sse_data(raw)] if sse else [json.loads(raw)]
    except ValueError:
        return None
    replies = [d for d in docs if isinstance(d, dict) and ("result" in d or "error" in d)]
    return replies[-1] if replies else None


Notify = Callable[[str, str, str | None], None]  # (hub key, "updated" | "list_changed", uri)
Wanted = Callable[[], dict[str, tuple[HubAddress, frozenset[str]]]]  # hub key -> (hub, URIs to watch)


class Listens:
    """One ``subscriptions/listen`` stream per hub, on one loop thread, each covering what is
    watched on that hub.

    Each wanted hub has one task for as long as it is wanted, holding at most one stream at a time:
    when what is watched changes, the open stream is closed and the same task opens the next one
    with the set wanted *then* (read on the loop thread, so no older set can overtake a newer one).
    Tasks are not cancelled to change a set, so a cancellation lost in flight can never leave a
    second stream behind; a hub sees at most one listen from a front (plus, for a moment, one it
    has not yet noticed closing)."""

    def __init__(
        self,
        notify: Notify,
        wanted: Wanted | None = None,
        lists: Callable[[str], bool] | None = None,
        loop: asyncio.AbstractEventLoop | None = None,
    ):
        """``loop``: a running loop to listen on (its thread reads and routes the events: the
        JupyterHub service's own, so an event is written to its clients without a thread hop);
        None: a loop on a thread of its own."""
        self.notify = notify
        self._wanted_now = wanted or dict
        self._lists = lists or (lambda key: True)  # which keys' streams ask for list changes
        self._own_loop = loop is None
        self._loop = loop or asyncio.new_event_loop()
        self._wanted: dict[str, tuple[HubAddress, frozenset[str]]] = {}
        self._tasks: dict[str, asyncio.Task[None]] = {}
        # key -> (wish, response, the task reading it)
        self._open: dict[str, tuple[tuple[HubAddress, frozenset[str]], Any, asyncio.Task[None]]] = {}
        self._wake: dict[str, asyncio.Event] = {}
        self._poked = threading.Event()
        self._opened = threading.Condition()  # told each time a stream opens (wait_covering)
        self._thread: threading.Thread | None = None
        if self._own_loop:
            self._thread = threading.Thread(target=self._loop.run_forever, name="mcp-notebook-kernels", daemon=True)
            self._thread.start()

    def on_loop(self) -> bool:
        """Called on the thread that runs the streams' loop."""
        if self._thread is not None:
            return threading.current_thread() is self._thread
        try:
            return asyncio.get_running_loop() is self._loop
        except RuntimeError:
            return False

    def every(self, seconds: float, tick: Callable[[], None]) -> None:
        """Call ``tick`` on the loop thread now and every ``seconds``."""
        self._loop.call_soon_threadsafe(self._tick, tick, seconds)

    def _tick(self, tick: Callable[[], None], seconds: float) -> None:
        try:
            tick()
        except Exception:
            log.exception("kernels refresh failed")
        self._loop.call_later(seconds, self._tick, tick, seconds)

    def poke(self) -> None:
        """What is wanted may have changed: look again on the loop thread (coalesced; any thread)."""
        if self._poked.is_set():
            return
        self._poked.set()
        with contextlib.suppress(RuntimeError):  # the loop is closed: nothing to listen for
            self._loop.call_soon_threadsafe(self._sync)

    def _sync(self) -> None:
        self._poked.clear()  # before reading: a change after this point pokes again
        try:
            wanted = self._wanted_now()
        except Exception:
            log.exception("kernels: what to listen for could not be computed")
            return
        self.apply(wanted)

    def apply(self, wanted: dict[str, tuple[HubAddress, frozenset[str]]]) -> None:
        """Listen on exactly these hubs for these URIs (on the loop thread)."""
        self._wanted = dict(wanted)
        for key in [k for k in self._tasks if k not in wanted]:
            self._tasks.pop(key).cancel()
            self._close_open(key)
        for key, wish in wanted.items():
            opened = self._open.get(key)
            if opened is not None and not self.same(opened[0], wish):
                self._close_open(key)  # its task reopens with the new set
            if key in self._wake:
                self._wake[key].set()
            if key not in self._tasks:
                self._tasks[key] = task = self._loop.create_task(self._run(key))
                task.add_done_callback(lambda t, k=key: self._tasks.pop(k, None) if self._tasks.get(k) is t else None)

    def same(self, open_wish: tuple[HubAddress, frozenset[str]], wish: tuple[HubAddress, frozenset[str]]) -> bool:
        """Whether an open stream can stay for ``wish`` (here: the very same wish)."""
        return open_wish == wish

    def post(self, wanted: dict[str, tuple[HubAddress, frozenset[str]]]) -> None:
        """:meth:`apply` on the loop thread, soon (any thread; posts run in their order)."""
        with contextlib.suppress(RuntimeError):  # the loop is closed: nothing to listen for
            self._loop.call_soon_threadsafe(self.apply, wanted)

    def want(self, key: str, hub: HubAddress | None, uris: frozenset[str]) -> None:
        """Listen on ``hub`` (None: stop) for ``uris`` under ``key``, the other keys unchanged (any thread)."""

        def one() -> None:
            wanted = dict(self._wanted)
            if hub is None:
                wanted.pop(key, None)
            else:
                wanted[key] = (hub, uris)
            self.apply(wanted)

        with contextlib.suppress(RuntimeError):
            self._loop.call_soon_threadsafe(one)

    def wait_covering(self, key: str, uri: str, timeout: float) -> bool:
        """Wait (bounded; never on the loop thread) until the open stream of ``key`` covers ``uri``:
        the hub answered that listen, so a change it makes from now on is told here."""
        if self.on_loop():
            return False

        return self.wait(lambda: self.covers(key, uri), timeout)

    def covers(self, key: str, uri: str) -> bool:
        """The open stream of ``key`` carries ``uri``."""
        opened = self._open.get(key)
        return opened is not None and uri in opened[0][1]

    def wait(self, done: Callable[[], bool], timeout: float) -> bool:
        """Wait (bounded) until ``done()``, looked at again each time a stream opens or :meth:`told`."""
        if self.on_loop():
            return done()
        with self._opened:
            return self._opened.wait_for(done, timeout)

    def told(self) -> None:
        """Something a waiter of :meth:`wait` looks at changed (any thread)."""
        with self._opened:
            self._opened.notify_all()

    def listening(self) -> dict[str, frozenset[str]]:
        """The URIs of each open upstream stream (tests and views)."""
        return {key: opened[0][1] for key, opened in list(self._open.items())}

    def _close_open(self, key: str) -> None:
        opened = self._open.pop(key, None)
        if opened is not None:
            with contextlib.suppress(Exception):
                opened[1].close()
            opened[2].cancel()

    async def _run(self, key: str) -> None:
        wake = self._wake[key] = asyncio.Event()
        try:
            while key in self._wanted:
                wish = self._wanted[key]
                wake.clear()
                try:
                    await self._stream(key, wish)
                except asyncio.CancelledError:
                    raise
                except Exception as exc:  # a hub that went away: try again while we still want it
                    log.info("listen on %s ended: %s", wish[0].url, exc)
                if self._wanted.get(key) == wish:  # not a new set: the hub ended it, wait a little
                    with contextlib.suppress(asyncio.TimeoutError):
                        await asyncio.wait_for(wake.wait(), RETRY_SECONDS)
        finally:
            if self._wake.get(key) is wake:
                del self._wake[key]

    async def _stream(self, key: str, wish: tuple[HubAddress, frozenset[str]]) -> None:
        hub, uris = wish
        params = {"notifications": {"resourcesListChanged": self._lists(key), "resourceSubscriptions": sorted(uris)}}
        body = json.dumps(message("subscriptions/listen", params)).encode()
        headers = hub.headers("subscriptions/listen", params)
        if hub.route is not None:
            resp = await hub.route.open(headers, body, LISTEN_OPEN_SECONDS)
        else:
            end = hub.endpoint
            resp = await request(
                end.host, end.port, "POST", end.path, headers, body, LISTEN_OPEN_SECONDS, https=end.https
            )
        if self._wanted.get(key) != wish:
            resp.close()
            return  # the set changed while this one was opening
        if resp.status != 200:  # refused: never counted as open (wait_covering), tried again later
            resp.close()
            raise UpstreamError(f"listen answered {resp.status}")
        # The reading runs as its own task: a new set cancels it (and closes the reply), whatever
        # the carrier, since not every carrier's reader wakes up when its reply is closed.
        reader = self._loop.create_task(self._read(key, resp))
        self._open[key] = (wish, resp, reader)
        with self._opened:
            self._opened.notify_all()
        try:
            await asyncio.wait({reader})
        finally:
            if not reader.done():
                reader.cancel()
            if key in self._open and self._open[key][1] is resp:
                del self._open[key]
            resp.close()
        if not reader.cancelled():
            reader.result()  # how it ended (an error: the caller waits a little, then reopens)

    async def _read(self, key: str, resp: Any) -> None:
        pending = b""
        async for piece in resp.chunks():
            if hop_trace.ON:
                hop_trace.stamp("listen.read", hop_trace.uri_in(piece))
            pending += piece
            *events, pending = pending.replace(b"\r\n", b"\n").split(b"\n\n")
            if len(pending) > MAX_EVENT_BYTES:
                raise UpstreamError(f"an event over {MAX_EVENT_BYTES} bytes")  # the stream ends, reopened later
            for data in sse_data(b"\n\n".join(events) + b"\n\n"):
                self._event(key, data)

    def _event(self, key: str, data: bytes) -> None:
        with contextlib.suppress(ValueError):
            msg = json.loads(data)
            method = msg.get("method") if isinstance(msg, dict) else None
            params = msg.get("params") or {}
            if method == "notifications/resources/updated" and isinstance(params.get("uri"), str):
                self.notify(key, "updated", params["uri"])
            elif method == "notifications/resources/list_changed":
                self.notify(key, "list_changed", None)
            elif method is None and META_SUB_ID in str(msg):
                return  # the listen's final result

    def close(self) -> None:
        """End every listen (the hubs see their connections close), then the loop."""

        async def stop() -> None:
            self._wanted = {}
            tasks = list(self._tasks.values())
            self._tasks.clear()
            for key in list(self._open):
                self._close_open(key)
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

        if self._loop.is_closed():
            return
        if not self._own_loop:  # not ours to stop: every listen ends, the loop runs on
            with contextlib.suppress(RuntimeError):
                if self.on_loop():
                    self._loop.create_task(stop())
                else:
                    asyncio.run_coroutine_threadsafe(stop(), self._loop).result(5)
            return
        with contextlib.suppress(Exception):
            asyncio.run_coroutine_threadsafe(stop(), self._loop).result(5)
        self._loop.call_soon_threadsafe(self._loop.stop)
        assert self._thread is not None
        self._thread.join(5)
        if not self._thread.is_alive():
            self._loop.close()
