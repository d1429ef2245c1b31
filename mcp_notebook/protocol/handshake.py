"""The handshake era (2024-11-05 … 2025-11-25): initialize and sessions, JSON-RPC batches,
notifications, the session's GET stream, resources/subscribe and logging/setLevel, DELETE."""

from __future__ import annotations

import secrets
import time
from dataclasses import dataclass, field
from typing import Any

from ..resource_hub import LIST_CHANGED, UPDATED
from ..types import ResourceNotFound
from . import jsonrpc as rpc
from .dispatch import LIST_METHODS, Dispatch, _uri_param
from .exchange import SESSION_NOT_FOUND, Ctx, HttpReply, HttpRequest
from .jsonrpc import RpcError
from .params import LOG_LEVELS, check_params
from .streams import Stream
from .tool_watch import session_key
from .versions import HANDSHAKE_VERSIONS, allows_batch, negotiate


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


class HandshakeEra(Dispatch):
    """Requests of a session opened by initialize, and the streams it holds."""

    _sessions: dict[str, Session]

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
        if msg.method == "resources/read":
            return self._read_reply(ctx, msg, {"Mcp-Session-Id": session.id})
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

    def _set_level(self, ctx: Ctx, params: dict[str, Any]) -> dict[str, Any]:
        level = params.get("level")
        if level not in LOG_LEVELS:
            raise RpcError(rpc.INVALID_PARAMS, f"Invalid params: level must be one of {', '.join(LOG_LEVELS)}")
        assert ctx.session is not None
        ctx.session.log_level = level
        return {}

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

    def sessions(self) -> list[Session]:
        with self._lock:
            return list(self._sessions.values())

    def _end_sessions(self) -> None:
        """Shutdown: end every session and its streams (the caller holds the lock)."""
        for session in list(self._sessions.values()):
            self._end_session(session)

    def _session_stream_closed(self, stream: Stream) -> None:
        """A session's GET stream went away (the caller holds the lock)."""
        session = self._sessions.get(stream.key)
        if session is not None and stream in session.streams:
            session.streams.remove(stream)

    def _notify_sessions(self, kind: str, uris: tuple[str, ...]) -> None:
        """A hub change, sent on the stream of every session that asked for it."""
        with self._lock:
            sessions = list(self._sessions.values())
        for session in sessions:
            if not session.streams:
                continue
            if kind == LIST_CHANGED:
                self._send(session, rpc.notification("notifications/resources/list_changed"))
            elif kind == UPDATED:
                for uri in uris:
                    if uri in session.subscriptions:
                        self._send(session, rpc.notification("notifications/resources/updated", {"uri": uri}))
