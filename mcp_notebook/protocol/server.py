"""The MCP server as a pure state machine: an HTTP request in, an HTTP reply out.

Both protocol eras share one hub: the handshake era (:mod:`.handshake`: initialize, sessions,
GET stream, resources/subscribe) and the stateless era (:mod:`.stateless`, 2026-07-28: requests
carrying ``_meta``, ``server/discover``, ``subscriptions/listen``), over one shared dispatch
(:mod:`.dispatch`). This module chooses the era per request and admits requests by their
headers. No sockets or threads live here; a transport feeds :meth:`McpServer.handle` and drains
the :class:`Stream` objects it returns.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

from ..resource_hub import Hub
from . import jsonrpc as rpc
from .cursors import decode_cursor, encode_cursor
from .dispatch import LIST_METHODS, MAX_COMPLETIONS, Dispatch
from .exchange import (
    META_CAPS,
    META_CLIENT_INFO,
    META_LOG_LEVEL,
    META_SERVER_INFO,
    META_SUB_ID,
    META_VERSION,
    SESSION_NOT_FOUND,
    Ctx,
    HttpReply,
    HttpRequest,
    ServerSettings,
)
from .fast_read import FastReads
from .handshake import HandshakeEra, Session
from .jsonrpc import RpcError
from .security import host_allowed, origin_allowed, token_valid
from .stateless import MAX_STATELESS_CLIENTS, Listen, StatelessEra, decode_header_value
from .streams import Stream
from .tools import Tools
from .versions import MODERN_VERSIONS

__all__ = [
    "INLINE_METHODS",
    "LIST_METHODS",
    "MAX_COMPLETIONS",
    "MAX_STATELESS_CLIENTS",
    "META_CAPS",
    "META_CLIENT_INFO",
    "META_LOG_LEVEL",
    "META_SERVER_INFO",
    "META_SUB_ID",
    "META_VERSION",
    "SESSION_NOT_FOUND",
    "Ctx",
    "Dispatch",
    "HttpReply",
    "HttpRequest",
    "Listen",
    "McpServer",
    "ServerSettings",
    "Session",
    "decode_cursor",
    "decode_header_value",
    "encode_cursor",
]

log = logging.getLogger(__name__)

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


class McpServer(HandshakeEra, StatelessEra, FastReads):
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
        # (method, version, id(provider)) -> (token, items when untokened, encoded items)
        self._read_cache: dict[tuple[str, bool, str], tuple[Any, bytes]] = {}
        self._encoded: dict[tuple[str, str, int], tuple[Any, list[Any] | None, list[bytes]]] = {}

    def answer_inline(self, req: HttpRequest, remember: bool = False) -> HttpReply | None:
        """The reply to ``req`` when it can be given at once on the carrier's own thread (a cached
        read, or a request that runs no user code), else None: call :meth:`handle` on a worker.

        With ``remember``, sets ``req.replay`` to a memo when a later request under the same head
        bytes may be answered by :meth:`replay`.
        """
        fast = self.fast_read(req, remember)
        if fast is not None:
            return fast
        if not self.may_run_user_code(req):
            return self.handle(req)
        return None

    def may_run_user_code(self, req: HttpRequest) -> bool:
        """Whether answering ``req`` may call into user code or touch live values (reprs, custom
        resources, completers, digests, frames). Transports answer the others on their own loop.

        Only the body is looked at; anything unusual (large, batched, unparsable) says True.
        resources/list counts as safe only when every provider declares ``list_is_pure``; resources/read
        when the provider of its URI says it cannot run user code (``Hub.may_run_user_code``).
        Requests that fail admission (Host, Origin, token) are answered inline without looking at
        the body at all, and any body shape is handled without raising.
        """
        if req.method != "POST" or (not req.admitted and self.admit(req.headers) is not None):
            return False
        if len(req.body) > INLINE_BODY_LIMIT or req.body[:1] != b"{":
            return True
        if req.parsed is not None:
            msg = req.parsed[0]
        else:
            try:
                msg = rpc.parse_body(req.body)
            except RpcError:
                return False  # a parse error is all the answer
            except Exception:
                return True
            req.parsed = (msg,)
        if not isinstance(msg, dict) or "id" not in msg:
            return not isinstance(msg, dict)  # notifications and responses run nothing
        method = msg.get("method")
        if not isinstance(method, str):
            return False  # an invalid request: the error is all the answer
        if method == "resources/list":
            return not all(getattr(p, "list_is_pure", False) for p in self.hub.providers())
        if method == "resources/read":
            params = msg.get("params")
            uri = params.get("uri") if isinstance(params, dict) else None
            return not isinstance(uri, str) or len(uri) > 8192 or self.hub.may_run_user_code(uri)
        return method not in INLINE_METHODS

    def handle(self, req: HttpRequest) -> HttpReply:
        """Answer one HTTP request. Never raises for bad input."""
        try:
            denied = None if req.admitted else self.admit(req.headers)
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

    def _post(self, req: HttpRequest) -> HttpReply:
        ctype = req.headers.get("content-type", "application/json").split(";")[0].strip().lower()
        if ctype != "application/json":
            return self._status(415, "Unsupported Media Type: POST bodies must be application/json")
        body = req.parsed[0] if req.parsed is not None else rpc.parse_body(req.body)
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

    def stream_closed(self, stream: Stream) -> None:
        """The transport saw the client go away: release what the stream held."""
        with self._lock:
            stream.close()
            if stream.kind == "session":
                self._session_stream_closed(stream)
            else:
                self._listen_stream_closed(stream)
        self._touch()

    def on_hub_event(self, kind: str, uris: tuple[str, ...]) -> None:
        """Fan a hub change out to the sessions and listen streams that asked for it."""
        self._notify_sessions(kind, uris)
        self._notify_listens(kind, uris)

    def close(self) -> None:
        """End every stream gracefully (listen streams get their final result) and forget sessions."""
        self.hub.remove_listener(self.on_hub_event)
        self.tools.watches.close()
        with self._lock:
            self.closed = True
            self._end_sessions()
            self._end_listens()
