"""The stateless era (2026-07-28): every request carries ``_meta`` (revision, capabilities, log
level) mirrored in headers; server/discover; subscriptions/listen streams; clients are
remembered by clientInfo since there is no session to list them by.

:class:`StatelessEra` owns its method table, its result decoration (``resultType``, serverInfo,
cache hints), the checks of the flat read path, and the fan-out of changes to listen streams.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from typing import Any

from ..budget import META_SCALE
from ..resources import LIST_CHANGED, UPDATED
from ..revisions import (
    ALL_VERSIONS,
    META_CAPS,
    META_CLIENT_INFO,
    META_LOG_LEVEL,
    META_SERVER_INFO,
    META_SUB_ID,
    META_VERSION,
    STATELESS,
    STATELESS_VERSIONS,
)
from . import jsonrpc as rpc
from .core import Core, Handler, ReadAccess
from .exchange import Answer, Context, Ctx
from .jsonrpc import LOG_LEVELS, RpcError, check_params
from .streams import Stream, updated_messages
from .wire_stateless import NAMED_PARAM, decode_header_value

MAX_CLIENTS = 50  # clients remembered by clientInfo (for the panel's list)
CLIENTS_SEEN_SECONDS = 300.0  # a client seen this recently is listed (the panel's clients)
# Results a client may cache (they carry ttlMs and cacheScope).
CACHEABLE = frozenset({"server/discover", "resources/list", "resources/templates/list", "resources/read", "tools/list"})
_NAMED = NAMED_PARAM  # (wire_stateless.py: the rules both ends share)
_JSON_HEADERS = {"Content-Type": "application/json"}


class Listen:
    """One subscriptions/listen stream: the URIs it follows, and whether it takes list changes."""

    __slots__ = ("list_changed", "stream", "sub_id", "uris")

    def __init__(self, stream: Stream, sub_id: rpc.RequestId, uris: frozenset[str], list_changed: bool) -> None:
        self.stream = stream
        self.sub_id = sub_id
        self.uris = uris
        self.list_changed = list_changed


class StatelessEra:
    """Stateless requests and the listen streams subscriptions/listen opens."""

    name = STATELESS
    not_found = rpc.INVALID_PARAMS

    def __init__(self, core: Core):
        self.core = core
        self._listens: dict[int, Listen] = {}
        self._clients: dict[tuple[str, str], tuple[float, str]] = {}  # (name, version) -> (last seen, revision)
        self.methods: dict[str, Handler] = {**core.handlers, "server/discover": self._discover}

    def decorate(self, ctx: Ctx, method: str, value: dict[str, Any]) -> dict[str, Any]:
        """Every result says it is complete and who answered; cacheable ones carry cache hints."""
        value["resultType"] = "complete"
        value.setdefault("_meta", {})[META_SERVER_INFO] = self.core.server_info(ctx.version)
        if method in CACHEABLE:
            value.setdefault("ttlMs", 0)
            value.setdefault("cacheScope", "private")
        return value

    # -- requests -----------------------------------------------------------------------
    def post(self, context: Context, body: Any) -> Answer:
        msg_id = rpc.request_id_of(body)
        try:
            msg = rpc.to_message(body)
            if msg.is_response:
                return Answer(status=202)
            ctx = self._ctx(context, msg)
        except RpcError as err:
            return Answer.error(err, msg_id)
        if msg.is_notification:
            return Answer(status=202)
        if msg.method == "subscriptions/listen":
            return self._listen(ctx, msg)
        if msg.method not in self.methods:
            err = RpcError(rpc.METHOD_NOT_FOUND, f"Method not found: {msg.method}")
            return Answer(rpc.error(msg.id, err), 404)
        return self.core.request(self, ctx, msg)

    def _ctx(self, context: Context, msg: rpc.Message) -> Ctx:
        """The request's context, once its ``_meta`` (and over HTTP its headers) pass this era's checks."""
        meta = msg.params.get("_meta")
        if not isinstance(meta, dict) or META_VERSION not in meta:
            raise RpcError(rpc.INVALID_PARAMS, f"Invalid params: _meta[{META_VERSION!r}] is required", status=400)
        version = meta[META_VERSION]
        header_version = context.version
        mirrored = context.mirrored
        usual = (
            (header_version == version or (not mirrored and header_version is None))
            and version in STATELESS_VERSIONS
            and isinstance(meta.get(META_CAPS), dict)
        )
        if not usual:  # the usual request (versions agree and are ours) needs none of these checks
            _check_version(version, header_version, meta)
        level = meta.get(META_LOG_LEVEL)
        if level is not None and (not isinstance(level, str) or level not in LOG_LEVELS):
            raise RpcError(
                rpc.INVALID_PARAMS,
                f"Invalid params: _meta[{META_LOG_LEVEL!r}] must be one of {', '.join(LOG_LEVELS)}",
                status=400,
            )
        if msg.is_request:
            if mirrored and (not usual or context.method != msg.method or msg.method in _NAMED):
                _check_headers(context, msg, version)
            self.seen(meta.get(META_CLIENT_INFO), version)
        return Ctx(version, None, meta, context.streams)

    def _listen(self, ctx: Ctx, msg: rpc.Message) -> Answer:
        try:
            check_params("subscriptions/listen", msg.params)
        except RpcError as err:
            return Answer(rpc.error(msg.id, err), 400)
        wanted = msg.params["notifications"]
        uris = wanted.get("resourceSubscriptions") or []
        honoured: dict[str, Any] = {}
        if wanted.get("resourcesListChanged"):
            honoured["resourcesListChanged"] = True
        if uris:
            honoured["resourceSubscriptions"] = list(dict.fromkeys(uris))
        assert msg.id is not None
        stream = Stream("listen", msg.id)
        listen = Listen(stream, msg.id, frozenset(uris), bool(honoured.get("resourcesListChanged")))
        # The acknowledgement goes first, before any change can reach the stream.
        stream.push(
            rpc.notification(
                "notifications/subscriptions/acknowledged",
                {"_meta": {META_SUB_ID: msg.id}, "notifications": honoured},
            )
        )
        core = self.core
        with core.lock:
            if core.closed:
                return Answer.refusal(503, "Service unavailable: the hub is stopping")
            self._listens[id(stream)] = listen
        core.resources.watch_all(listen.uris)
        core.touch()
        return Answer(stream=stream)

    def _discover(self, ctx: Ctx, params: dict[str, Any]) -> dict[str, Any]:
        out: dict[str, Any] = {
            "supportedVersions": list(reversed(ALL_VERSIONS)),
            "capabilities": self.core.capabilities(ctx.version, ctx.apps),
            "ttlMs": 60_000,
        }
        if self.core.settings.instructions:
            out["instructions"] = self.core.settings.instructions
        return out

    # -- clients, remembered by clientInfo --------------------------------------------------
    def seen(self, info: Any, version: str) -> None:
        """Remember a client by its clientInfo (no session to list it by); O(1) per request."""
        self._seen_as(_client_key(info), version)

    def _seen_as(self, key: tuple[str, str], version: str) -> None:
        """:meth:`seen` for the client ``key`` (its name and version, cut to size)."""
        now = time.monotonic()
        last = self._clients.get(key)
        if last is not None and last[1] == version and now - last[0] < 1.0:
            return  # seen within the last second: the idle time shown is good enough without the lock
        with self.core.lock:
            new = key not in self._clients
            self._clients[key] = (now, version)
            if new and len(self._clients) > MAX_CLIENTS:
                del self._clients[min(self._clients, key=lambda k: self._clients[k][0])]
        if new:
            self.core.touch()

    def clients(self, within: float = CLIENTS_SEEN_SECONDS) -> list[tuple[str, str, str, float]]:
        """(name, version, revision, seconds idle) of the clients seen in the last ``within`` seconds."""
        now = time.monotonic()
        with self.core.lock:
            seen = list(self._clients.items())
        return [(k[0], k[1], rev, now - at) for k, (at, rev) in seen if now - at <= within]

    # -- the flat read path -------------------------------------------------------------
    def read_access(self, headers: dict[str, str], meta: Any, uri: str) -> ReadAccess | None:
        """A plainly well-formed stateless read (revisions agree and are ours, capabilities present,
        no log level, Mcp-Method and Mcp-Name as sent); None: let the general path answer."""
        version = headers.get("mcp-protocol-version")
        if (
            type(meta) is not dict
            or meta.get(META_VERSION) != version
            or version not in STATELESS_VERSIONS
            or type(meta.get(META_CAPS)) is not dict
            or META_LOG_LEVEL in meta
            or META_SCALE in meta  # a front's scaled read (budget.py): never the cached full one
            or headers.get("mcp-method") != "resources/read"
            or headers.get("mcp-name") != uri
        ):
            return None
        return ReadAccess(version, _JSON_HEADERS, meta.get(META_CLIENT_INFO))

    def after_read(self, access: ReadAccess) -> None:
        """Bookkeeping once a flat read is answered: the client was seen."""
        self.seen(access.asker, access.version)

    def replay_checks(self, access: ReadAccess) -> tuple[None, Callable[[], None]]:
        """Nothing can end between stateless requests; once a replayed reply is written, the client
        was seen."""
        return None, functools.partial(self._seen_as, _client_key(access.asker), access.version)

    # -- notifications --------------------------------------------------------------------
    def listens(self) -> list[Listen]:
        with self.core.lock:
            return list(self._listens.values())

    def notify(self, kind: str, uris: tuple[str, ...]) -> None:
        """A change of the resources, sent on every listen stream that asked for it (the URIs each
        listen watches, found by set intersection: listens x URIs is never walked)."""
        if not self._listens:  # after every cell, most often with no listen stream: no lock, no list
            return
        changed = frozenset(uris)
        for listen in self.listens():
            meta = {META_SUB_ID: listen.sub_id}
            if kind == LIST_CHANGED and listen.list_changed:
                listen.stream.push(rpc.notification("notifications/resources/list_changed", {"_meta": meta}))
            elif kind == UPDATED:
                hits = sorted(listen.uris & changed)
                if hits:
                    listen.stream.push_encoded(updated_messages(hits, meta))

    def stream_closed(self, stream: Stream) -> None:
        """A listen stream went away (the caller holds the lock)."""
        listen = self._listens.pop(id(stream), None)
        if listen is not None:
            for uri in listen.uris:
                self.core.resources.unwatch(uri)

    def end(self) -> None:
        """Shutdown: close every listen stream with its final result (the caller holds the lock)."""
        for listen in list(self._listens.values()):
            final = rpc.result(listen.sub_id, {"resultType": "complete", "_meta": {META_SUB_ID: listen.sub_id}})
            listen.stream.close(final)
            for uri in listen.uris:
                self.core.resources.unwatch(uri)
        self._listens.clear()


def _check_version(version: Any, header_version: str | None, meta: dict[str, Any]) -> None:
    """The revision checks of an unusual request: a mismatch is reported before an unsupported
    revision (as the conformance suite expects), then missing capabilities."""
    if not isinstance(version, str):
        raise RpcError(rpc.INVALID_PARAMS, f"Invalid params: _meta[{META_VERSION!r}] must be a string", status=400)
    if header_version is not None and header_version != version:
        raise RpcError(
            rpc.HEADER_MISMATCH,
            f"Header mismatch: MCP-Protocol-Version {header_version!r} must equal _meta protocolVersion {version!r}",
            status=400,
        )
    if version not in STATELESS_VERSIONS:
        raise RpcError(
            rpc.UNSUPPORTED_VERSION,
            f"Unsupported protocol version {version!r}",
            {"supported": list(STATELESS_VERSIONS), "requested": version},
            status=400,
        )
    if not isinstance(meta.get(META_CAPS), dict):
        raise RpcError(rpc.INVALID_PARAMS, f"Invalid params: _meta[{META_CAPS!r}] (object) is required", status=400)


def _check_headers(context: Context, msg: rpc.Message, version: str) -> None:
    """MCP-Protocol-Version, Mcp-Method and Mcp-Name must say what the body says (-32020)."""

    def mismatch(text: str) -> RpcError:
        return RpcError(rpc.HEADER_MISMATCH, f"Header mismatch: {text}", status=400)

    header_version = context.version
    if header_version != version:
        raise mismatch(f"MCP-Protocol-Version {header_version!r} must equal _meta protocolVersion {version!r}")
    if context.method != msg.method:
        raise mismatch(f"Mcp-Method {context.method!r} must equal the method {msg.method!r}")
    named = _NAMED.get(msg.method or "")
    if named is not None:
        name = context.name
        plain = name is None or not name.startswith("=?base64?")  # (only that form is decoded)
        if name is None or (name if plain else decode_header_value(name)) != msg.params.get(named):
            raise mismatch(f"Mcp-Name {name!r} must equal params.{named}")


def _client_key(info: Any) -> tuple[str, str]:
    """A client's name and version from its clientInfo, cut to size (a replay computes it once)."""
    info = info if isinstance(info, dict) else {}
    return str(info.get("name") or "?")[:100], str(info.get("version") or "")[:50]
