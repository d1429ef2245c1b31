"""The shared dispatch of MCP methods, era-agnostic: list, templates, read, complete, ping,
tools; the cached-JSON fast path for listings; capabilities and serverInfo per revision.

:class:`Dispatch` is the base of both era classes (:mod:`.handshake`, :mod:`.stateless`); it
holds the state they share (hub, settings, tools, lock) and the calls both make.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

from ..redact import REDACTOR
from ..resource_hub import Hub
from ..types import InvalidResourceParams, ResourceNotFound, ResourceReadError
from . import jsonrpc as rpc
from .cursors import decode_cursor, encode_cursor
from .exchange import META_SERVER_INFO, Ctx, HttpReply, ServerSettings, status_reply
from .jsonrpc import RpcError
from .params import check_params
from .streams import Stream
from .tools import Tools
from .versions import knows

log = logging.getLogger("mcp_notebook.protocol.server")

MAX_COMPLETIONS = 100
# Listing methods answered from cached JSON, and the bytes between the id and the first item.
LIST_METHODS = {
    "resources/list": b',"result":{"resources":[',
    "resources/templates/list": b',"result":{"resourceTemplates":[',
}
# Results a modern-era client may cache (they carry ttlMs and cacheScope).
CACHEABLE = frozenset({"server/discover", "resources/list", "resources/templates/list", "resources/read", "tools/list"})

READ_CACHE_SIZE = 4096  # encoded read replies kept (cleared when full)

Handler = Callable[[Ctx, dict[str, Any]], dict[str, Any]]


class Dispatch:
    """Method handlers both eras share, and the state they work on."""

    hub: Hub
    settings: ServerSettings
    tools: Tools
    _lock: threading.RLock
    _handshake: dict[str, Handler]
    _modern: dict[str, Handler]
    _read_cache: dict[tuple[str, bool, str], tuple[Any, bytes]]
    _encoded: dict[tuple[str, str, int], tuple[Any, list[Any] | None, list[bytes]]]
    on_activity: Callable[[], None] | None
    activity_listeners: list[Callable[[], None]]

    _status = staticmethod(status_reply)

    def _dispatch(self, ctx: Ctx, msg: rpc.Message) -> dict[str, Any]:
        assert msg.method is not None and msg.id is not None
        table = self._handshake if ctx.session is not None else self._modern
        handler = table.get(msg.method)
        if handler is None:
            return rpc.error(msg.id, RpcError(rpc.METHOD_NOT_FOUND, f"Method not found: {msg.method}"))
        try:
            check_params(msg.method, msg.params)
            value = handler(ctx, msg.params)
        except RpcError as err:
            return rpc.error(msg.id, err)
        except ResourceNotFound as exc:
            code = rpc.INVALID_PARAMS if ctx.modern else rpc.RESOURCE_NOT_FOUND
            return rpc.error(msg.id, RpcError(code, str(exc), {"uri": exc.uri}))
        except InvalidResourceParams as exc:
            return rpc.error(msg.id, RpcError(rpc.INVALID_PARAMS, f"Invalid params: {exc}"))
        except ResourceReadError as exc:
            ctx.log("error", {"message": str(exc), "method": msg.method})
            return rpc.error(msg.id, RpcError(rpc.INTERNAL_ERROR, str(exc)))
        except Exception as exc:
            log.exception("%s failed", msg.method)
            return rpc.error(msg.id, RpcError(rpc.INTERNAL_ERROR, f"Internal error: {type(exc).__name__}: {exc}"))
        if ctx.modern:
            value["resultType"] = "complete"
            value.setdefault("_meta", {})[META_SERVER_INFO] = self._server_info(ctx.version)
            if msg.method in CACHEABLE:
                value.setdefault("ttlMs", 0)
                value.setdefault("cacheScope", "private")
        return rpc.result(msg.id, value)

    @staticmethod
    def _answer(ctx: Ctx, reply: dict[str, Any], headers: dict[str, str] | None = None) -> HttpReply:
        """JSON, or an SSE response carrying this request's log messages before its result."""
        if not ctx.logs or "text/event-stream" not in ctx.headers.get("accept", ""):
            return HttpReply.json(reply, headers=headers)
        stream = Stream("response")
        for level, data in ctx.logs:
            stream.push(
                rpc.notification("notifications/message", {"level": level, "logger": "mcp-notebook", "data": data})
            )
        stream.close(reply)
        return HttpReply(200, headers=dict(headers or {}), stream=stream)

    def _ping(self, ctx: Ctx, params: dict[str, Any]) -> dict[str, Any]:
        return {}

    def _page(self, items: list[Any], params: dict[str, Any], key: str, version: str) -> dict[str, Any]:
        offset = decode_cursor(params.get("cursor"))
        size = self.settings.page_size
        page = items[offset : offset + size]
        out: dict[str, Any] = {key: [item.to_json(version) for item in page]}
        if offset + size < len(items):
            out["nextCursor"] = encode_cursor(offset + size)
        return out

    def _list_reply(self, ctx: Ctx, msg: rpc.Message, headers: dict[str, str] | None = None) -> HttpReply | None:
        """resources/list and templates/list from cached per-item JSON; None: take the general path.

        Equivalent to ``_answer(ctx, _dispatch(ctx, msg))`` for these methods (they never log), but
        every listed item is encoded once per provider state and revision, not once per request.
        """
        try:
            check_params(msg.method or "", msg.params)
            items = self._encoded_listing(msg.method or "", ctx.version)
            offset = decode_cursor(msg.params.get("cursor"))
        except Exception:  # errors are reported (and logged) by the general path
            return None
        size = self.settings.page_size
        rest: dict[str, Any] = {}
        if offset + size < len(items):
            rest["nextCursor"] = encode_cursor(offset + size)
        if ctx.modern:
            rest["resultType"] = "complete"
            rest["_meta"] = {META_SERVER_INFO: self._server_info(ctx.version)}
            rest["ttlMs"] = 0
            rest["cacheScope"] = "private"
        tail = b"," + rpc.dumps(rest)[1:] if rest else b"}"
        body = b"".join(
            (
                b'{"jsonrpc":"2.0","id":',
                rpc.dumps(msg.id),
                LIST_METHODS[msg.method or ""],
                b",".join(items[offset : offset + size]),
                b"]",
                tail,
                b"}",
            )
        )
        h = {"Content-Type": "application/json"}
        h.update(headers or {})
        return HttpReply(200, body, h)

    def _read_reply(self, ctx: Ctx, msg: rpc.Message, headers: dict[str, str] | None = None) -> HttpReply:
        """resources/read, from the encoded reply of an earlier read while the provider's
        ``read_token`` is unchanged (only the id is spliced in); the general path otherwise."""
        uri = msg.params.get("uri")
        stamp = self._read_stamp(uri) if isinstance(uri, str) and len(uri) <= 8192 else None
        if stamp is None:
            return self._answer(ctx, self._dispatch(ctx, msg), headers)
        key = (ctx.version, ctx.modern, uri)
        entry = self._read_cache.get(key)
        if entry is None or entry[0] != stamp:
            reply = self._dispatch(ctx, msg)
            if "result" not in reply or ctx.logs:
                return self._answer(ctx, reply, headers)
            if len(self._read_cache) >= READ_CACHE_SIZE:
                self._read_cache.clear()
            entry = (stamp, b',"result":' + rpc.dumps(reply["result"]) + b"}")
            self._read_cache[key] = entry
        else:
            try:
                check_params("resources/read", msg.params)
            except RpcError:  # reported by the general path
                return self._answer(ctx, self._dispatch(ctx, msg), headers)
        h = {"Content-Type": "application/json"}
        if headers:
            h.update(headers)
        return HttpReply(200, b'{"jsonrpc":"2.0","id":' + rpc.dumps(msg.id) + entry[1], h)

    def _read_stamp(self, uri: str) -> tuple[Any, ...] | None:
        """What a cached encoded read of ``uri`` must match to be served again: the provider's
        read token, the hub generation (settings change in cells) and the redactor's version;
        None: reads of ``uri`` are not cached."""
        token = self.hub.read_token(uri)
        return None if token is None else (token, self.hub.generation, REDACTOR.version)

    def _cached_read(self, key: tuple[str, bool, str], uri: str) -> bytes | None:
        """The encoded result tail of a cached read still valid for ``uri``, or None."""
        entry = self._read_cache.get(key)
        if entry is None or entry[0] != self._read_stamp(uri):
            return None
        return entry[1]

    def _encoded_listing(self, method: str, version: str) -> list[bytes]:
        """Every listed item of every provider as compact JSON, in listing order.

        A provider with ``list_token()`` is re-listed only when its token or the hub's generation
        moves (both read before listing); any other provider is listed every time and its items
        are re-encoded only when they differ from the previous listing.
        """
        templates = method == "resources/templates/list"
        generation = self.hub.generation
        out: list[bytes] = []
        for provider in self.hub.providers():
            key = (method, version, id(provider))
            entry = self._encoded.get(key)
            token_of = None if templates else getattr(provider, "list_token", None)
            if token_of is not None:
                token = (generation, token_of())
                if entry is not None and entry[0] == token:
                    out.extend(entry[2])
                    continue
                listed: list[Any] = provider.list_resources()
            else:
                token = None
                listed = provider.list_templates() if templates else provider.list_resources()
                if entry is not None and entry[0] is None and entry[1] == listed:
                    out.extend(entry[2])
                    continue
            encoded = [rpc.dumps(item.to_json(version)) for item in listed]
            self._encoded[key] = (token, listed if token is None else None, encoded)
            out.extend(encoded)
        return out

    def _list(self, ctx: Ctx, params: dict[str, Any]) -> dict[str, Any]:
        return self._page(self.hub.list_resources(), params, "resources", ctx.version)

    def _templates(self, ctx: Ctx, params: dict[str, Any]) -> dict[str, Any]:
        return self._page(self.hub.list_templates(), params, "resourceTemplates", ctx.version)

    def _read(self, ctx: Ctx, params: dict[str, Any]) -> dict[str, Any]:
        uri = _uri_param(params)
        contents = self.hub.read(uri)
        if not contents:
            raise ResourceNotFound(uri)
        return {"contents": [c.to_json(ctx.version) for c in contents]}

    def _complete(self, ctx: Ctx, params: dict[str, Any]) -> dict[str, Any]:
        ref = params.get("ref")
        arg = params.get("argument")
        if not isinstance(ref, dict) or not isinstance(arg, dict):
            raise RpcError(rpc.INVALID_PARAMS, "Invalid params: ref and argument (objects) are required")
        name, value = arg.get("name"), arg.get("value", "")
        if not isinstance(name, str) or not isinstance(value, str):
            raise RpcError(rpc.INVALID_PARAMS, "Invalid params: argument.name and argument.value must be strings")
        kind = ref.get("type")
        if kind == "ref/prompt":
            if not isinstance(ref.get("name"), str):
                raise RpcError(rpc.INVALID_PARAMS, "Invalid params: ref.name is required", {"param": "ref.name"})
            values: list[str] = []  # this server has no prompts
        elif kind == "ref/resource":
            template = ref.get("uri")
            if not isinstance(template, str):
                raise RpcError(rpc.INVALID_PARAMS, "Invalid params: ref.uri (string) is required")
            context = params.get("context") or {}
            known = context.get("arguments") if isinstance(context, dict) else None
            values = self.hub.complete(template, name, value, known if isinstance(known, dict) else {}) or []
        else:
            raise RpcError(rpc.INVALID_PARAMS, f"Invalid params: unknown ref type {kind!r}")
        return {
            "completion": {
                "values": values[:MAX_COMPLETIONS],
                "total": len(values),
                "hasMore": len(values) > MAX_COMPLETIONS,
            }
        }

    def _capabilities(self, version: str) -> dict[str, Any]:
        caps: dict[str, Any] = {"resources": {"subscribe": True, "listChanged": True}}
        caps["tools"] = {}
        if knows(version, "completions_capability"):
            caps["completions"] = {}
        if not knows(version, "modern"):
            caps["logging"] = {}
        return caps

    def _server_info(self, version: str) -> dict[str, Any]:
        s = self.settings
        info: dict[str, Any] = {"name": s.name, "version": s.version}
        if knows(version, "title"):
            info["title"] = s.title
        if knows(version, "icons"):
            info["description"] = s.description
        return info

    def _touch(self) -> None:
        """Sessions or streams changed: tell on_activity and every activity listener (they must not block)."""
        callbacks = [self.on_activity] if self.on_activity is not None else []
        for callback in callbacks + list(self.activity_listeners):
            try:
                callback()
            except Exception:
                log.exception("activity callback failed")


def _uri_param(params: dict[str, Any]) -> str:
    uri = params.get("uri")
    if not isinstance(uri, str) or not uri:
        raise RpcError(rpc.INVALID_PARAMS, "Invalid params: uri (non-empty string) is required")
    if len(uri) > 8192:
        raise RpcError(rpc.INVALID_PARAMS, "Invalid params: uri is longer than 8192 characters")
    return uri
