"""The stateless era (2026-07-28): every request carries ``_meta`` (revision, capabilities,
log level) mirrored in headers; server/discover; subscriptions/listen streams; clients are
remembered by clientInfo since there is no session to list them by."""

from __future__ import annotations

import base64
import binascii
import time
from dataclasses import dataclass
from typing import Any

from ..resource_hub import LIST_CHANGED, UPDATED
from . import jsonrpc as rpc
from .dispatch import LIST_METHODS, Dispatch
from .exchange import (
    META_CAPS,
    META_CLIENT_INFO,
    META_LOG_LEVEL,
    META_SUB_ID,
    META_VERSION,
    Ctx,
    HttpReply,
    HttpRequest,
)
from .jsonrpc import RpcError
from .params import LOG_LEVELS, check_params
from .streams import Stream
from .versions import ALL_VERSIONS, MODERN_VERSIONS

MAX_STATELESS_CLIENTS = 50


@dataclass
class Listen:
    stream: Stream
    sub_id: rpc.RequestId
    uris: frozenset[str]
    list_changed: bool


# Methods whose request names its target in an Mcp-Name header: the param it must equal.
_NAMED = {"resources/read": "uri", "tools/call": "name"}


class StatelessEra(Dispatch):
    """Stateless requests and the listen streams subscriptions/listen opens."""

    _listens: dict[int, Listen]
    _stateless: dict[tuple[str, str], tuple[float, str]]
    closed: bool

    def _modern_post(self, req: HttpRequest, body: Any) -> HttpReply:
        msg_id = rpc.request_id_of(body)
        try:
            msg = rpc.to_message(body)
            if msg.is_response:
                return HttpReply(202)
            ctx = self._modern_ctx(req.headers, msg)
        except RpcError as err:
            return HttpReply.error(err, msg_id)
        if msg.is_notification:
            return HttpReply(202)
        if msg.method == "subscriptions/listen":
            return self._listen(ctx, msg)
        if msg.method not in self._modern:
            err = RpcError(rpc.METHOD_NOT_FOUND, f"Method not found: {msg.method}")
            return HttpReply.json(rpc.error(msg.id, err), 404)
        if msg.method in LIST_METHODS:
            fast = self._list_reply(ctx, msg)
            if fast is not None:
                return fast
        if msg.method == "resources/read":
            return self._read_reply(ctx, msg)
        return self._answer(ctx, self._dispatch(ctx, msg))

    def _modern_ctx(self, headers: dict[str, str], msg: rpc.Message) -> Ctx:
        meta = msg.params.get("_meta")
        if not isinstance(meta, dict) or META_VERSION not in meta:
            raise RpcError(rpc.INVALID_PARAMS, f"Invalid params: _meta[{META_VERSION!r}] is required", status=400)
        version = meta[META_VERSION]
        header_version = headers.get("mcp-protocol-version")
        if header_version == version and version in MODERN_VERSIONS and isinstance(meta.get(META_CAPS), dict):
            # The usual request: versions agree and are ours, capabilities present. Same checks, fewer steps.
            level = meta.get(META_LOG_LEVEL)
            if level is not None and (not isinstance(level, str) or level not in LOG_LEVELS):
                self._bad_level()
            if msg.is_request:
                if headers.get("mcp-method") != msg.method or msg.method in _NAMED:
                    self._check_modern_headers(headers, msg, version)
                self._seen_stateless(meta.get(META_CLIENT_INFO), version)
            return Ctx(version, None, meta, headers)
        if not isinstance(version, str):
            raise RpcError(rpc.INVALID_PARAMS, f"Invalid params: _meta[{META_VERSION!r}] must be a string", status=400)
        if header_version is not None and header_version != version:  # a mismatch wins over an unsupported version
            raise RpcError(
                rpc.HEADER_MISMATCH,
                f"Header mismatch: MCP-Protocol-Version {header_version!r} must equal _meta protocolVersion {version!r}",
                status=400,
            )
        if version not in MODERN_VERSIONS:
            raise RpcError(
                rpc.UNSUPPORTED_VERSION,
                f"Unsupported protocol version {version!r}",
                {"supported": list(MODERN_VERSIONS), "requested": version},
                status=400,
            )
        if not isinstance(meta.get(META_CAPS), dict):
            raise RpcError(rpc.INVALID_PARAMS, f"Invalid params: _meta[{META_CAPS!r}] (object) is required", status=400)
        level = meta.get(META_LOG_LEVEL)
        if level is not None and (not isinstance(level, str) or level not in LOG_LEVELS):
            self._bad_level()
        if msg.is_request:
            self._check_modern_headers(headers, msg, version)
            self._seen_stateless(meta.get(META_CLIENT_INFO), version)
        return Ctx(version, None, meta, headers)

    @staticmethod
    def _bad_level() -> None:
        raise RpcError(
            rpc.INVALID_PARAMS,
            f"Invalid params: _meta[{META_LOG_LEVEL!r}] must be one of {', '.join(LOG_LEVELS)}",
            status=400,
        )

    def _seen_stateless(self, info: Any, version: str) -> None:
        """Remember a modern-era client by its clientInfo (no session to list it by); O(1) per request."""
        info = info if isinstance(info, dict) else {}
        key = (str(info.get("name") or "?")[:100], str(info.get("version") or "")[:50])
        now = time.monotonic()
        seen = self._stateless.get(key)
        if seen is not None and seen[1] == version and now - seen[0] < 1.0:
            return  # seen within the last second: the idle time shown is good enough without the lock
        with self._lock:
            new = key not in self._stateless
            self._stateless[key] = (now, version)
            if new and len(self._stateless) > MAX_STATELESS_CLIENTS:
                del self._stateless[min(self._stateless, key=lambda k: self._stateless[k][0])]
        if new:
            self._touch()

    def stateless_clients(self, within: float = 300.0) -> list[tuple[str, str, str, float]]:
        """(name, version, revision, seconds idle) of modern-era clients seen in the last ``within`` seconds."""
        now = time.monotonic()
        with self._lock:
            seen = list(self._stateless.items())
        return [(k[0], k[1], rev, now - at) for k, (at, rev) in seen if now - at <= within]

    @staticmethod
    def _check_modern_headers(headers: dict[str, str], msg: rpc.Message, version: str) -> None:
        def mismatch(text: str) -> RpcError:
            return RpcError(rpc.HEADER_MISMATCH, f"Header mismatch: {text}", status=400)

        header_version = headers.get("mcp-protocol-version")
        if header_version != version:
            raise mismatch(f"MCP-Protocol-Version {header_version!r} must equal _meta protocolVersion {version!r}")
        if headers.get("mcp-method") != msg.method:
            raise mismatch(f"Mcp-Method {headers.get('mcp-method')!r} must equal the method {msg.method!r}")
        named = _NAMED.get(msg.method or "")
        if named is not None:
            name = headers.get("mcp-name")
            if name is None or decode_header_value(name) != msg.params.get(named):
                raise mismatch(f"Mcp-Name {name!r} must equal params.{named}")

    def _listen(self, ctx: Ctx, msg: rpc.Message) -> HttpReply:
        try:
            check_params("subscriptions/listen", msg.params)
        except RpcError as err:
            return HttpReply.json(rpc.error(msg.id, err), 400)
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
        # The acknowledgement goes first, before any hub event can reach the stream.
        stream.push(
            rpc.notification(
                "notifications/subscriptions/acknowledged",
                {"_meta": {META_SUB_ID: msg.id}, "notifications": honoured},
            )
        )
        with self._lock:
            if self.closed:
                return self._status(503, "Service unavailable: the hub is stopping")
            self._listens[id(stream)] = listen
        for uri in listen.uris:
            self.hub.watch(uri)
        self._touch()
        return HttpReply(200, stream=stream)

    def _discover(self, ctx: Ctx, params: dict[str, Any]) -> dict[str, Any]:
        out: dict[str, Any] = {
            "supportedVersions": list(reversed(ALL_VERSIONS)),
            "capabilities": self._capabilities(ctx.version),
            "ttlMs": 60_000,
        }
        if self.settings.instructions:
            out["instructions"] = self.settings.instructions
        return out

    def listens(self) -> list[Listen]:
        with self._lock:
            return list(self._listens.values())

    def _end_listens(self) -> None:
        """Shutdown: close every listen stream with its final result (the caller holds the lock)."""
        for listen in list(self._listens.values()):
            final = rpc.result(listen.sub_id, {"resultType": "complete", "_meta": {META_SUB_ID: listen.sub_id}})
            listen.stream.close(final)
            for uri in listen.uris:
                self.hub.unwatch(uri)
        self._listens.clear()

    def _listen_stream_closed(self, stream: Stream) -> None:
        """A listen stream went away (the caller holds the lock)."""
        listen = self._listens.pop(id(stream), None)
        if listen is not None:
            for uri in listen.uris:
                self.hub.unwatch(uri)

    def _notify_listens(self, kind: str, uris: tuple[str, ...]) -> None:
        """A hub change, sent on every listen stream that asked for it."""
        with self._lock:
            listens = list(self._listens.values())
        for listen in listens:
            meta = {META_SUB_ID: listen.sub_id}
            if kind == LIST_CHANGED and listen.list_changed:
                listen.stream.push(rpc.notification("notifications/resources/list_changed", {"_meta": meta}))
            elif kind == UPDATED:
                for uri in uris:
                    if uri in listen.uris:
                        listen.stream.push(
                            rpc.notification("notifications/resources/updated", {"_meta": meta, "uri": uri})
                        )


def decode_header_value(value: str) -> str:
    """Undo the ``=?base64?…?=`` form used for header values that are not plain ASCII."""
    if value.startswith("=?base64?") and value.endswith("?="):
        try:
            return base64.b64decode(value[9:-2], validate=True).decode("utf-8")
        except (binascii.Error, UnicodeDecodeError):
            return value
    return value
