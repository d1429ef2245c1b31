"""The MCP server as a pure state machine: an HTTP request in, an HTTP reply out.

Both protocol eras share one hub: the handshake era (2024-11-05 … 2025-11-25: initialize,
sessions, GET stream, resources/subscribe) and the modern era (2026-07-28: stateless requests
carrying ``_meta``, ``server/discover``, ``subscriptions/listen``). The era is chosen per
request. No sockets or threads live here; a transport feeds :meth:`McpServer.handle` and drains
the :class:`Stream` objects it returns.
"""

from __future__ import annotations

import base64
import binascii
import json
import logging
import secrets
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..providers.base import InvalidResourceParams, ResourceNotFound, ResourceReadError
from ..resource_hub import LIST_CHANGED, UPDATED, Hub
from . import jsonrpc as rpc
from .jsonrpc import RpcError
from .params import LOG_LEVELS, check_params
from .security import host_allowed, origin_allowed, token_valid
from .streams import Stream
from .tool_watch import session_key
from .tools import Tools
from .versions import (
    ALL_VERSIONS,
    HANDSHAKE_VERSIONS,
    MODERN_VERSIONS,
    allows_batch,
    knows,
    negotiate,
)

log = logging.getLogger(__name__)

META_VERSION = "io.modelcontextprotocol/protocolVersion"
META_CAPS = "io.modelcontextprotocol/clientCapabilities"
META_LOG_LEVEL = "io.modelcontextprotocol/logLevel"
META_SERVER_INFO = "io.modelcontextprotocol/serverInfo"
META_SUB_ID = "io.modelcontextprotocol/subscriptionId"
META_CLIENT_INFO = "io.modelcontextprotocol/clientInfo"
MAX_STATELESS_CLIENTS = 50
MAX_COMPLETIONS = 100
# Requests whose handling never reaches user code or live values (see McpServer.may_run_user_code).
INLINE_METHODS = frozenset(
    {
        "ping",
        "initialize",
        "logging/setLevel",
        "server/discover",
        "resources/templates/list",
        "resources/unsubscribe",
        "tools/list",
    }
)
INLINE_BODY_LIMIT = 16384
# Listing methods answered from cached JSON, and the bytes between the id and the first item.
LIST_METHODS = {
    "resources/list": b',"result":{"resources":[',
    "resources/templates/list": b',"result":{"resourceTemplates":[',
}
SESSION_NOT_FOUND = -32001


@dataclass
class ServerSettings:
    name: str = "mcp-notebook"
    version: str = "0"
    title: str = "Jupyter kernel (mcp-notebook)"
    description: str = "Live variables, data and cells of a Jupyter kernel as MCP resources."
    instructions: str = ""
    page_size: int = 500
    max_batch: int = 50
    max_sessions: int = 64
    require_token: bool = True
    token: str = ""
    allowed_origins: tuple[str, ...] = ()
    allowed_hosts: tuple[str, ...] = ()


@dataclass
class HttpRequest:
    method: str
    headers: dict[str, str]  # lower-case names
    body: bytes = b""


@dataclass
class HttpReply:
    status: int
    body: bytes | None = None
    headers: dict[str, str] = field(default_factory=dict)
    stream: Stream | None = None

    @classmethod
    def json(cls, value: Any, status: int = 200, headers: dict[str, str] | None = None) -> HttpReply:
        h = {"Content-Type": "application/json"}
        h.update(headers or {})
        return cls(status, rpc.dumps(value), h)

    @classmethod
    def error(cls, err: RpcError, msg_id: Any = None, headers: dict[str, str] | None = None) -> HttpReply:
        if msg_id is None:
            msg_id = err.request_id
        return cls.json(rpc.error(msg_id, err), err.status if err.status != 200 else 400, headers)


@dataclass
class Session:
    id: str
    version: str
    client_info: dict[str, Any]
    capabilities: dict[str, Any]
    initialized: bool = False
    log_level: str | None = None
    subscriptions: set[str] = field(default_factory=set)
    streams: list[Stream] = field(default_factory=list)
    last_used: float = field(default_factory=time.monotonic)


@dataclass
class Listen:
    stream: Stream
    sub_id: rpc.RequestId
    uris: frozenset[str]
    list_changed: bool


@dataclass
class Ctx:
    """What one request is handled under."""

    version: str
    session: Session | None = None
    meta: dict[str, Any] = field(default_factory=dict)
    headers: dict[str, str] = field(default_factory=dict)
    logs: list[tuple[str, Any]] = field(default_factory=list)

    @property
    def modern(self) -> bool:
        return self.session is None

    @property
    def log_level(self) -> str | None:
        """The threshold for this request: per request (_meta) or per session (logging/setLevel)."""
        if self.session is not None:
            return self.session.log_level
        return self.meta.get(META_LOG_LEVEL)

    def log(self, level: str, data: Any) -> None:
        """Queue a log message for this request's own response stream, if the client asked for logs."""
        threshold = self.log_level
        if threshold is not None and LOG_LEVELS.index(level) >= LOG_LEVELS.index(threshold):
            self.logs.append((level, data))


class McpServer:
    """Decodes, validates and dispatches MCP requests against a Hub."""

    def __init__(self, hub: Hub, settings: ServerSettings):
        self.hub = hub
        self.settings = settings
        self._sessions: dict[str, Session] = {}
        self._listens: dict[int, Listen] = {}
        self._lock = threading.RLock()
        self.closed = False
        self.on_activity: Callable[[], None] | None = None
        self.activity_listeners: list[Callable[[], None]] = []  # e.g. widgets; called like on_activity
        self._stateless: dict[tuple[str, str], tuple[float, str]] = {}  # (name, version) -> (last seen, revision)
        hub.add_listener(self.on_hub_event)
        self.tools = Tools(hub, settings.page_size)
        self._handshake: dict[str, Callable[[Ctx, dict[str, Any]], dict[str, Any]]] = {
            "ping": self._ping,
            "logging/setLevel": self._set_level,
            "resources/list": self._list,
            "resources/templates/list": self._templates,
            "resources/read": self._read,
            "resources/subscribe": self._subscribe,
            "resources/unsubscribe": self._unsubscribe,
            "completion/complete": self._complete,
            "tools/list": self.tools.list_tools,
            "tools/call": self.tools.call_tool,
        }
        self._modern: dict[str, Callable[[Ctx, dict[str, Any]], dict[str, Any]]] = {
            "server/discover": self._discover,
            "resources/list": self._list,
            "resources/templates/list": self._templates,
            "resources/read": self._read,
            "completion/complete": self._complete,
            "tools/list": self.tools.list_tools,
            "tools/call": self.tools.call_tool,
        }
        self._cacheable = {
            "server/discover",
            "resources/list",
            "resources/templates/list",
            "resources/read",
            "tools/list",
        }
        # (method, version, id(provider)) -> (token, items when untokened, encoded items)
        self._encoded: dict[tuple[str, str, int], tuple[Any, list[Any] | None, list[bytes]]] = {}

    # == entry point =========================================================================
    def may_run_user_code(self, req: HttpRequest) -> bool:
        """Whether answering ``req`` may call into user code or touch live values (reprs, custom
        resources, completers, digests, frames). Transports answer the others on their own loop.

        Only the body is looked at; anything unusual (large, batched, unparsable) says True.
        resources/list counts as safe only when every provider declares ``list_is_pure``.
        Requests that fail admission (Host, Origin, token) are answered inline without looking at
        the body at all, and any body shape is handled without raising.
        """
        if req.method != "POST" or self.admit(req.headers) is not None:
            return False
        if len(req.body) > INLINE_BODY_LIMIT or req.body[:1] != b"{":
            return True
        try:
            msg = json.loads(req.body)
        except (ValueError, UnicodeDecodeError, RecursionError):
            return False  # a parse error is all the answer
        if not isinstance(msg, dict) or "id" not in msg:
            return not isinstance(msg, dict)  # notifications and responses run nothing
        method = msg.get("method")
        if not isinstance(method, str):
            return False  # an invalid request: the error is all the answer
        if method == "resources/list":
            return not all(getattr(p, "list_is_pure", False) for p in self.hub.providers())
        return method not in INLINE_METHODS

    def handle(self, req: HttpRequest) -> HttpReply:
        """Answer one HTTP request. Never raises for bad input."""
        try:
            denied = self.admit(req.headers)
        except Exception:  # headers come from a transport as str -> str; be safe anyway
            log.exception("admission check failed")
            denied = self._status(400, "Bad Request: unreadable headers")
        if denied is not None:
            return denied
        try:
            if req.method == "POST":
                return self._post(req)
            if req.method == "GET":
                return self._get(req)
            if req.method == "DELETE":
                return self._delete(req)
            return self._status(405, "Method not allowed", {"Allow": "GET, POST, DELETE"})
        except RpcError as err:
            return HttpReply.error(err)
        except Exception:
            log.exception("unexpected error handling a request")
            return HttpReply.error(RpcError(rpc.INTERNAL_ERROR, "Internal error", status=500))

    def admit(self, headers: dict[str, str]) -> HttpReply | None:
        """The reply refusing a request by its headers alone (Host, Origin, token), or None to go on.

        Transports call this as soon as a request head is complete, before reading the body.
        """
        s = self.settings
        if not host_allowed(headers, s.allowed_hosts):
            return self._status(403, "Forbidden: Host header is not a loopback name or one of MCPHub.allowed_hosts")
        if not origin_allowed(headers, s.allowed_origins, s.allowed_hosts):
            return self._status(403, "Forbidden: Origin is not allowed")
        if s.require_token and not token_valid(headers, s.token):
            return self._status(
                401,
                "Unauthorized: send 'Authorization: Bearer <token>'",
                {"WWW-Authenticate": 'Bearer realm="mcp-notebook"'},
            )
        return None

    @staticmethod
    def _status(status: int, message: str, headers: dict[str, str] | None = None) -> HttpReply:
        return HttpReply.json(rpc.error(None, RpcError(rpc.INVALID_REQUEST, message)), status, headers)

    # == POST =================================================================================
    def _post(self, req: HttpRequest) -> HttpReply:
        ctype = req.headers.get("content-type", "application/json").split(";")[0].strip().lower()
        if ctype != "application/json":
            return self._status(415, "Unsupported Media Type: POST bodies must be application/json")
        body = rpc.parse_body(req.body)
        if isinstance(body, list):
            return self._batch(req, body)
        if self._is_modern(req.headers, body):
            return self._modern_post(req, body)
        return self._handshake_post(req, body)

    @staticmethod
    def _is_modern(headers: dict[str, str], body: Any) -> bool:
        if headers.get("mcp-protocol-version") in MODERN_VERSIONS:
            return True
        if isinstance(body, dict):
            params = body.get("params")
            meta = params.get("_meta") if isinstance(params, dict) else None
            return isinstance(meta, dict) and META_VERSION in meta and body.get("method") != "initialize"
        return False

    # -- handshake era ------------------------------------------------------------------------
    def _handshake_post(self, req: HttpRequest, body: Any) -> HttpReply:
        msg_id = rpc.request_id_of(body)
        try:
            msg = rpc.to_message(body)
        except RpcError as err:
            return HttpReply.error(err, msg_id)
        if msg.method == "initialize":
            return self._initialize(msg)
        session, problem = self._session_of(req.headers)
        if problem is not None:
            return problem
        assert session is not None
        if msg.is_response or msg.is_notification:
            self._notification(session, msg)
            return HttpReply(202)
        ctx = Ctx(session.version, session, headers=req.headers)
        if msg.method in LIST_METHODS:
            fast = self._list_reply(ctx, msg, {"Mcp-Session-Id": session.id})
            if fast is not None:
                return fast
        return self._answer(ctx, self._dispatch(ctx, msg), {"Mcp-Session-Id": session.id})

    def _batch(self, req: HttpRequest, items: list[Any]) -> HttpReply:
        if not items:
            return HttpReply.error(RpcError(rpc.INVALID_REQUEST, "Invalid Request: empty batch", status=400))
        if len(items) > self.settings.max_batch:
            return HttpReply.error(
                RpcError(
                    rpc.INVALID_REQUEST,
                    f"Invalid Request: batch of {len(items)} exceeds {self.settings.max_batch}",
                    status=400,
                )
            )
        if any(isinstance(i, dict) and i.get("method") == "initialize" for i in items):
            return HttpReply.error(
                RpcError(rpc.INVALID_REQUEST, "Invalid Request: initialize must not be batched", status=400)
            )
        session, problem = self._session_of(req.headers)
        if problem is not None:
            return problem
        assert session is not None
        if not allows_batch(session.version):
            return HttpReply.error(
                RpcError(
                    rpc.INVALID_REQUEST,
                    f"Invalid Request: JSON-RPC batches are not part of MCP {session.version}",
                    status=400,
                )
            )
        replies = []
        ctx = Ctx(session.version, session, headers=req.headers)
        for item in items:
            try:
                msg = rpc.to_message(item)
            except RpcError as err:
                replies.append(rpc.error(rpc.request_id_of(item), err))
                continue
            if msg.is_request:
                replies.append(self._dispatch(ctx, msg))
            else:
                self._notification(session, msg)
        if not replies:
            return HttpReply(202)
        return HttpReply.json(replies, headers={"Mcp-Session-Id": session.id})

    def _session_of(self, headers: dict[str, str]) -> tuple[Session | None, HttpReply | None]:
        version = headers.get("mcp-protocol-version")
        if version is not None and version not in HANDSHAKE_VERSIONS:
            return None, self._status(400, f"Bad Request: unsupported MCP-Protocol-Version {version!r}")
        sid = headers.get("mcp-session-id")
        if not sid:
            return None, self._status(400, "Bad Request: Mcp-Session-Id header is required (send initialize first)")
        with self._lock:
            session = self._sessions.get(sid)
            if session is not None:
                session.last_used = time.monotonic()
        if session is None:
            err = RpcError(SESSION_NOT_FOUND, "Session not found: it ended or never existed; initialize again")
            return None, HttpReply.json(rpc.error(None, err), 404)
        return session, None

    def _initialize(self, msg: rpc.Message) -> HttpReply:
        if msg.id is None:
            return self._status(400, "Invalid Request: initialize must be a request with an id")
        params = msg.params
        try:
            check_params("initialize", params)
        except RpcError as err:
            return HttpReply.json(rpc.error(msg.id, err), 400)
        version = negotiate(params["protocolVersion"])
        client_info = params.get("clientInfo") or {}
        caps = params.get("capabilities") or {}
        session = Session(secrets.token_urlsafe(24), version, client_info, caps)
        with self._lock:
            self._sessions[session.id] = session
            self._evict_sessions()
        result: dict[str, Any] = {
            "protocolVersion": version,
            "capabilities": self._capabilities(version),
            "serverInfo": self._server_info(version),
        }
        if self.settings.instructions:
            result["instructions"] = self.settings.instructions
        self._touch()
        return HttpReply.json(rpc.result(msg.id, result), headers={"Mcp-Session-Id": session.id})

    def _evict_sessions(self) -> None:
        excess = len(self._sessions) - self.settings.max_sessions
        if excess <= 0:
            return
        oldest = sorted(self._sessions.values(), key=lambda s: (bool(s.streams), s.last_used))
        for session in oldest[:excess]:
            self._end_session(session)

    def _notification(self, session: Session, msg: rpc.Message) -> None:
        if msg.method == "notifications/initialized":
            session.initialized = True
            self._touch()

    def _delete(self, req: HttpRequest) -> HttpReply:
        if "mcp-session-id" not in req.headers:
            return self._status(405, "Method not allowed: DELETE ends a handshake-era session", {"Allow": "POST"})
        session, problem = self._session_of(req.headers)
        if problem is not None:
            return problem
        assert session is not None
        with self._lock:
            self._end_session(session)
        return HttpReply(200)

    def _end_session(self, session: Session) -> None:
        self._sessions.pop(session.id, None)
        self.tools.watches.forget(session_key(session.id))
        for uri in session.subscriptions:
            self.hub.unwatch(uri)
        session.subscriptions.clear()
        for stream in session.streams:
            stream.close()
        session.streams.clear()
        self._touch()

    # -- GET stream ---------------------------------------------------------------------------
    def _get(self, req: HttpRequest) -> HttpReply:
        if "mcp-session-id" not in req.headers:
            return self._status(
                405, "Method not allowed: GET opens the stream of a handshake-era session", {"Allow": "POST"}
            )
        accept = req.headers.get("accept", "")
        if "text/event-stream" not in accept and "*/*" not in accept:
            return self._status(406, "Not Acceptable: GET needs 'Accept: text/event-stream'")
        session, problem = self._session_of(req.headers)
        if problem is not None:
            return problem
        assert session is not None
        stream = Stream("session", session.id)
        with self._lock:
            session.streams.append(stream)
        self._touch()
        return HttpReply(200, headers={"Mcp-Session-Id": session.id}, stream=stream)

    def stream_closed(self, stream: Stream) -> None:
        """The transport saw the client go away: release what the stream held."""
        with self._lock:
            stream.close()
            if stream.kind == "session":
                session = self._sessions.get(stream.key)
                if session is not None and stream in session.streams:
                    session.streams.remove(stream)
            else:
                listen = self._listens.pop(id(stream), None)
                if listen is not None:
                    for uri in listen.uris:
                        self.hub.unwatch(uri)
        self._touch()

    # -- modern era ---------------------------------------------------------------------------
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
        return self._answer(ctx, self._dispatch(ctx, msg))

    def _modern_ctx(self, headers: dict[str, str], msg: rpc.Message) -> Ctx:
        meta = msg.params.get("_meta")
        if not isinstance(meta, dict) or META_VERSION not in meta:
            raise RpcError(rpc.INVALID_PARAMS, f"Invalid params: _meta[{META_VERSION!r}] is required", status=400)
        version = meta[META_VERSION]
        if not isinstance(version, str):
            raise RpcError(rpc.INVALID_PARAMS, f"Invalid params: _meta[{META_VERSION!r}] must be a string", status=400)
        header_version = headers.get("mcp-protocol-version")
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
            raise RpcError(
                rpc.INVALID_PARAMS,
                f"Invalid params: _meta[{META_LOG_LEVEL!r}] must be one of {', '.join(LOG_LEVELS)}",
                status=400,
            )
        if msg.is_request:
            self._check_modern_headers(headers, msg, version)
            self._seen_stateless(meta.get(META_CLIENT_INFO), version)
        return Ctx(version, None, meta, headers)

    def _seen_stateless(self, info: Any, version: str) -> None:
        """Remember a modern-era client by its clientInfo (no session to list it by); O(1) per request."""
        info = info if isinstance(info, dict) else {}
        key = (str(info.get("name") or "?")[:100], str(info.get("version") or "")[:50])
        with self._lock:
            new = key not in self._stateless
            self._stateless[key] = (time.monotonic(), version)
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
        named = {"resources/read": "uri", "tools/call": "name"}.get(msg.method or "")
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

    # == dispatch =============================================================================
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
            if msg.method in self._cacheable:
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

    # -- methods ------------------------------------------------------------------------------
    def _ping(self, ctx: Ctx, params: dict[str, Any]) -> dict[str, Any]:
        return {}

    def _set_level(self, ctx: Ctx, params: dict[str, Any]) -> dict[str, Any]:
        level = params.get("level")
        if level not in LOG_LEVELS:
            raise RpcError(rpc.INVALID_PARAMS, f"Invalid params: level must be one of {', '.join(LOG_LEVELS)}")
        assert ctx.session is not None
        ctx.session.log_level = level
        return {}

    def _discover(self, ctx: Ctx, params: dict[str, Any]) -> dict[str, Any]:
        out: dict[str, Any] = {
            "supportedVersions": list(reversed(ALL_VERSIONS)),
            "capabilities": self._capabilities(ctx.version),
            "ttlMs": 60_000,
        }
        if self.settings.instructions:
            out["instructions"] = self.settings.instructions
        return out

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

    def _subscribe(self, ctx: Ctx, params: dict[str, Any]) -> dict[str, Any]:
        uri = _uri_param(params)
        self.hub.provider_for(uri)  # ResourceNotFound for URIs nothing serves
        if ctx.log_level is not None:  # only pay for the existence check when someone listens
            try:
                self.hub.read(uri)
            except ResourceNotFound:
                ctx.log("info", {"message": f"{uri} does not exist yet; an update follows when it appears", "uri": uri})
            except Exception:
                pass
        session = ctx.session
        assert session is not None
        self.hub.watch(uri)  # before the check below: the session may end (DELETE, eviction) meanwhile
        with self._lock:
            live = self._sessions.get(session.id) is session
            new = live and uri not in session.subscriptions
            if new:
                session.subscriptions.add(uri)
        if not new:
            self.hub.unwatch(uri)
        if not live:
            raise RpcError(SESSION_NOT_FOUND, "Session not found: it ended while subscribing; initialize again")
        self._touch()
        return {}

    def _unsubscribe(self, ctx: Ctx, params: dict[str, Any]) -> dict[str, Any]:
        uri = _uri_param(params)
        assert ctx.session is not None
        with self._lock:
            had = uri in ctx.session.subscriptions
            ctx.session.subscriptions.discard(uri)
        if had:
            self.hub.unwatch(uri)
        self._touch()
        return {}

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

    # -- descriptors ----------------------------------------------------------------------------
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

    # == notifications ===========================================================================
    def on_hub_event(self, kind: str, uris: tuple[str, ...]) -> None:
        """Fan a hub change out to the sessions and listen streams that asked for it."""
        with self._lock:
            sessions = list(self._sessions.values())
            listens = list(self._listens.values())
        for session in sessions:
            if not session.streams:
                continue
            if kind == LIST_CHANGED:
                self._send(session, rpc.notification("notifications/resources/list_changed"))
            elif kind == UPDATED:
                for uri in uris:
                    if uri in session.subscriptions:
                        self._send(session, rpc.notification("notifications/resources/updated", {"uri": uri}))
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

    @staticmethod
    def _send(session: Session, message: dict[str, Any]) -> None:
        """Each message goes on exactly one stream: the newest one still open."""
        for stream in reversed(session.streams):
            if stream.push(message):
                return

    def log(self, level: str, data: Any, logger: str = "mcp-notebook") -> None:
        """Send a log message to sessions whose level admits it (handshake era)."""
        rank = LOG_LEVELS.index(level)
        with self._lock:
            sessions = list(self._sessions.values())
        for session in sessions:
            if session.log_level is not None and rank >= LOG_LEVELS.index(session.log_level):
                self._send(
                    session, rpc.notification("notifications/message", {"level": level, "logger": logger, "data": data})
                )

    # == introspection and shutdown ===============================================================
    def sessions(self) -> list[Session]:
        with self._lock:
            return list(self._sessions.values())

    def listens(self) -> list[Listen]:
        with self._lock:
            return list(self._listens.values())

    def close(self) -> None:
        """End every stream gracefully (listen streams get their final result) and forget sessions."""
        self.hub.remove_listener(self.on_hub_event)
        self.tools.watches.close()
        with self._lock:
            self.closed = True
            for session in list(self._sessions.values()):
                self._end_session(session)
            for listen in list(self._listens.values()):
                final = rpc.result(listen.sub_id, {"resultType": "complete", "_meta": {META_SUB_ID: listen.sub_id}})
                listen.stream.close(final)
                for uri in listen.uris:
                    self.hub.unwatch(uri)
            self._listens.clear()

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


def encode_cursor(offset: int) -> str:
    return base64.urlsafe_b64encode(json.dumps({"o": offset}).encode()).decode().rstrip("=")


def decode_cursor(cursor: Any) -> int:
    """Offset of an opaque cursor; -32602 for anything we did not issue."""
    if cursor is None:
        return 0
    invalid = RpcError(rpc.INVALID_PARAMS, "Invalid params: invalid cursor")
    if not isinstance(cursor, str) or len(cursor) > 200:
        raise invalid
    try:
        data = json.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
        offset = data["o"]
    except (ValueError, KeyError, TypeError, binascii.Error):
        raise invalid from None
    if not isinstance(offset, int) or isinstance(offset, bool) or offset < 0:
        raise invalid
    return offset


def decode_header_value(value: str) -> str:
    """Undo the ``=?base64?…?=`` form used for header values that are not plain ASCII."""
    if value.startswith("=?base64?") and value.endswith("?="):
        try:
            return base64.b64decode(value[9:-2], validate=True).decode("utf-8")
        except (binascii.Error, UnicodeDecodeError):
            return value
    return value
