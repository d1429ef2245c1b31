"""Talking to the kernels' hubs: stateless-era requests from any thread, and one listen stream per
hub on a single event loop (no thread per kernel).

Every request is self-contained (MCP 2026-07-28): the hub's token goes with it and never leaves
this process. A hub that goes away mid-request is a clean :class:`HubGone`, never a hang (every
call has a deadline).
"""

from __future__ import annotations

import asyncio
import contextlib
import http.client
import itertools
import json
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol
from urllib.parse import urlsplit

from ..protocol.eras import META_CAPS, META_CLIENT_INFO, META_SUB_ID, META_VERSION
from ..revisions import STATELESS_VERSIONS
from ..transport.client import UpstreamError, request
from ..version import __version__

log = logging.getLogger(__name__)
VERSION = STATELESS_VERSIONS[-1]
CALL_SECONDS = 60.0
RETRY_SECONDS = 1.0
_ids = itertools.count(1)
_NAMED = {"resources/read": "uri", "tools/call": "name"}


class HubGone(Exception):
    """The hub did not answer (it stopped, or its kernel died)."""


class HubError(Exception):
    """The hub answered with a JSON-RPC error."""

    def __init__(self, error: dict[str, Any]):
        super().__init__(str(error.get("message", "error")))
        self.code = int(error.get("code", -32603))
        self.data = error.get("data")


class Carrier(Protocol):
    """Another way to a hub than loopback HTTP (the server extension's control channel): one
    exchange at a time, usable from any thread or loop."""

    def call(self, headers: dict[str, str], body: bytes, timeout: float) -> tuple[int, str, bytes]:
        """POST and read the whole reply: status, content type, body (from a thread, not a loop)."""
        ...

    async def open(self, headers: dict[str, str], body: bytes, timeout: float) -> Any:
        """POST; the reply once its status is known (``status``, ``chunks()``, ``close()``)."""
        ...


@dataclass(frozen=True)
class HubAddress:
    """Where a kernel's hub listens, and its token; or the carrier that reaches it."""

    url: str
    token: str | None
    scheme: str = "Bearer"  # "token" for a Jupyter server's endpoint
    carrier: Carrier | None = field(default=None, compare=False)

    @property
    def host(self) -> str:
        return urlsplit(self.url).hostname or "127.0.0.1"

    @property
    def port(self) -> int:
        return urlsplit(self.url).port or 80

    @property
    def path(self) -> str:
        return urlsplit(self.url).path or "/mcp"

    def headers(self, method: str, params: dict[str, Any]) -> dict[str, str]:
        out = {
            "Host": f"{self.host}:{self.port}",
            "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream",
            "MCP-Protocol-Version": VERSION,
            "Mcp-Method": method,
        }
        named = _NAMED.get(method)
        if named and isinstance(params.get(named), str) and params[named].isascii():
            out["Mcp-Name"] = params[named]
        if self.token:
            out["Authorization"] = f"{self.scheme} {self.token}"
        return out


def message(method: str, params: dict[str, Any]) -> dict[str, Any]:
    """A stateless request: the revision and our identity in ``_meta``."""
    meta = {
        META_VERSION: VERSION,
        META_CAPS: {},
        META_CLIENT_INFO: {"name": "mcp-notebook-kernels", "version": __version__},
    }
    return {"jsonrpc": "2.0", "id": next(_ids), "method": method, "params": {**params, "_meta": meta}}


_local = threading.local()  # each worker thread keeps one keep-alive connection per hub


def _connection(hub: HubAddress, timeout: float) -> tuple[http.client.HTTPConnection, bool]:
    """This thread's connection to ``hub`` and whether it was used before."""
    conns: dict[tuple[str, int], http.client.HTTPConnection] = _local.__dict__.setdefault("conns", {})
    key = (hub.host, hub.port)
    conn = conns.get(key)
    if conn is not None:
        conn.timeout = timeout
        return conn, True
    if len(conns) > 64:
        for old in conns.values():
            old.close()
        conns.clear()
    conn = conns[key] = http.client.HTTPConnection(hub.host, hub.port, timeout=timeout)
    return conn, False


def call(hub: HubAddress, method: str, params: dict[str, Any], timeout: float = CALL_SECONDS) -> dict[str, Any]:
    """The result of one request to ``hub`` (any thread; a keep-alive connection per thread). A
    connection the hub closed while idle is replaced once; nothing is sent twice otherwise."""
    body = json.dumps(message(method, params)).encode()
    if hub.carrier is not None:
        try:
            status, kind, raw = hub.carrier.call(hub.headers(method, params), body, timeout)
        except (UpstreamError, TimeoutError, OSError) as exc:
            raise HubGone(f"the hub did not answer: {exc}") from None
        return _result(_last_reply(raw, "text/event-stream" in kind), hub, status)
    for attempt in (1, 2):
        conn, reused = _connection(hub, timeout)
        try:
            conn.request("POST", hub.path, body, hub.headers(method, params))
            resp = conn.getresponse()
            raw = resp.read()
            kind = resp.getheader("Content-Type") or ""
            if resp.will_close:
                conn.close()
            break
        except (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError) as exc:
            conn.close()
            _local.conns.pop((hub.host, hub.port), None)
            if reused and attempt == 1:
                continue
            raise HubGone(f"the hub did not answer: {exc}") from None
        except (OSError, http.client.HTTPException) as exc:
            conn.close()
            _local.conns.pop((hub.host, hub.port), None)
            raise HubGone(f"the hub did not answer: {exc}") from None
    return _result(_last_reply(raw, "text/event-stream" in kind), hub, resp.status)


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


def sse_data(raw: bytes) -> list[bytes]:
    """The ``data`` of each complete event in ``raw`` (events end with a blank line)."""
    out = []
    for event in raw.replace(b"\r\n", b"\n").split(b"\n\n"):
        lines = [line[5:].lstrip() for line in event.split(b"\n") if line.startswith(b"data:")]
        if lines:
            out.append(b"\n".join(lines))
    return out


Notify = Callable[[str, str, str | None], None]  # (hub key, "updated" | "list_changed", uri)


class Listens:
    """One ``subscriptions/listen`` stream per hub, on one loop thread, each covering what is
    watched on that hub; re-opened when the set changes or the stream breaks."""

    def __init__(self, notify: Notify, tick: Callable[[], None] | None = None, tick_seconds: float = 1.0):
        self.notify = notify
        self._loop = asyncio.new_event_loop()
        self._tasks: dict[str, tuple[frozenset[str], asyncio.Task[None]]] = {}
        self._thread = threading.Thread(target=self._loop.run_forever, name="mcp-notebook-kernels", daemon=True)
        self._thread.start()
        if tick is not None:
            self._loop.call_soon_threadsafe(self._tick, tick, tick_seconds)

    def _tick(self, tick: Callable[[], None], seconds: float) -> None:
        try:
            tick()
        except Exception:
            log.exception("kernels refresh failed")
        self._loop.call_later(seconds, self._tick, tick, seconds)

    def keep(self, keys: set[str]) -> None:
        """Stop listening on every hub not under one of ``keys``."""

        def drop() -> None:
            for key in [k for k in self._tasks if k not in keys]:
                self._tasks.pop(key)[1].cancel()

        self._loop.call_soon_threadsafe(drop)

    def want(self, key: str, hub: HubAddress | None, uris: frozenset[str]) -> None:
        """Listen on ``hub`` (None: stop) for ``uris`` and list changes, under ``key``."""
        self._loop.call_soon_threadsafe(self._reconcile, key, hub, uris)

    def _reconcile(self, key: str, hub: HubAddress | None, uris: frozenset[str]) -> None:
        current = self._tasks.get(key)
        if current is not None and hub is not None and current[0] == uris and not current[1].done():
            return
        if current is not None:
            current[1].cancel()
            del self._tasks[key]
        if hub is not None:
            self._tasks[key] = (uris, self._loop.create_task(self._listen(key, hub, uris)))

    async def _listen(self, key: str, hub: HubAddress, uris: frozenset[str]) -> None:
        params = {"notifications": {"resourcesListChanged": True, "resourceSubscriptions": sorted(uris)}}
        while True:
            try:
                await self._stream(key, hub, params)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # a hub that went away: try again while we still want it
                log.info("listen on %s ended: %s", hub.url, exc)
            await asyncio.sleep(RETRY_SECONDS)

    async def _stream(self, key: str, hub: HubAddress, params: dict[str, Any]) -> None:
        body = json.dumps(message("subscriptions/listen", params)).encode()
        headers = hub.headers("subscriptions/listen", params)
        if hub.carrier is not None:
            resp = await hub.carrier.open(headers, body, 10.0)
        else:
            resp = await request(hub.host, hub.port, "POST", hub.path, headers, body, 10.0)
        try:
            if resp.status != 200:
                raise UpstreamError(f"listen answered {resp.status}")
            pending = b""
            async for piece in resp.chunks():
                pending += piece
                *events, pending = pending.replace(b"\r\n", b"\n").split(b"\n\n")
                for data in sse_data(b"\n\n".join(events) + b"\n\n"):
                    self._event(key, data)
        finally:
            resp.close()

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
            tasks = [task for _, task in self._tasks.values()]
            self._tasks.clear()
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

        if self._loop.is_closed():
            return
        with contextlib.suppress(Exception):
            asyncio.run_coroutine_threadsafe(stop(), self._loop).result(5)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)
        if not self._thread.is_alive():
            self._loop.close()
