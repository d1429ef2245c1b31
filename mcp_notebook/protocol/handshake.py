"""The handshake era (2024-11-05 … 2025-11-25): initialize and sessions, JSON-RPC batches,
notifications, the session's GET stream, resources/subscribe and logging/setLevel, DELETE.

:class:`HandshakeEra` owns its method table, its (empty) result decoration, the session check
of the flat read path, and the fan-out of changes to its sessions' streams.
"""

from __future__ import annotations

import functools
import secrets
import time
from collections.abc import Callable
from typing import Any, cast

from ..resources import LIST_CHANGED, UPDATED
from ..revisions import HANDSHAKE, HANDSHAKE_VERSIONS, allows_batch, negotiate
from ..types import ResourceNotFound
from . import jsonrpc as rpc
from .apps import offered
from .core import Core, Handler, ReadAccess, uri_param
from .exchange import SESSION_NOT_FOUND, Answer, Context, Ctx, session_key
from .jsonrpc import LOG_LEVELS, RpcError, check_params, dumps
from .streams import Stream, updated_messages

_monotonic = time.monotonic


class Session:
    """A handshake-era session: what initialize said, and what the client holds under it."""

    def __init__(self, id: str, version: str, client_info: dict[str, Any], capabilities: dict[str, Any]) -> None:
        self.id = id
        self.version = version
        self.client_info = client_info
        self.capabilities = capabilities
        self.log_level: str | None = None
        self.subscriptions: set[str] = set()
        self.streams: list[Stream] = []
        self.last_used = time.monotonic()

    def __repr__(self) -> str:
        return f"Session({self.id[:6]!r}…, {self.version!r})"


class HandshakeEra:
    """Requests of a session opened by initialize, and the streams it holds."""

    name = HANDSHAKE
    not_found = rpc.RESOURCE_NOT_FOUND

    def __init__(self, core: Core):
        self.core = core
        self._sessions: dict[str, Session] = {}
        # Told (on the request's worker, before the reply goes) when a client made, changed or
        # ended a session: "created", "changed", "deleted". A carrier whose sessions must outlive
        # its process (the JupyterHub service's replicas) records them; None: nobody asks.
        self.observer: Callable[[str, Session], None] | None = None
        self.methods: dict[str, Handler] = {
            **core.handlers,
            "ping": core.ping,
            "logging/setLevel": self._set_level,
            "resources/subscribe": self._subscribe,
            "resources/unsubscribe": self._unsubscribe,
        }

    def decorate(self, ctx: Ctx, method: str, value: dict[str, Any]) -> dict[str, Any]:
        return value  # results are plain in this era

    # -- requests -----------------------------------------------------------------------
    def post(self, context: Context, body: Any) -> Answer:
        """One JSON-RPC message (initialize, a request, a notification or a response)."""
        msg_id = rpc.request_id_of(body)
        try:
            msg = rpc.to_message(body)
        except RpcError as err:
            return Answer.error(err, msg_id)
        if msg.method == "initialize":
            return self._initialize(msg)
        session, problem = self._session_of(context)
        if problem is not None:
            return problem
        assert session is not None
        if msg.is_response or msg.is_notification:
            self._notification(session, msg)
            return Answer(status=202)
        ctx = Ctx(session.version, session, streams=context.streams)
        return self.core.request(self, ctx, msg, session.id)

    def batch(self, context: Context, items: list[Any]) -> Answer:
        """A JSON-RPC batch (2025-03-26 and before), answered as one array."""
        problem = self._batch_problem(items)
        if problem is not None:
            return _refused(items, f"Invalid Request: {problem}")
        session, refusal = self._session_of(context)
        if refusal is not None:
            return refusal
        assert session is not None
        if not allows_batch(session.version):
            return _refused(items, f"Invalid Request: JSON-RPC batches are not part of MCP {session.version}")
        replies = []
        ctx = Ctx(session.version, session)
        for item in items:
            try:
                msg = rpc.to_message(item)
            except RpcError as err:
                replies.append(rpc.error(rpc.request_id_of(item), err))
                continue
            if msg.is_request:
                replies.append(self.core.run(self, ctx, msg))
            else:
                self._notification(session, msg)
        if not replies:
            return Answer(status=202)
        return Answer(replies, session_id=session.id)

    def _batch_problem(self, items: list[Any]) -> str | None:
        if not items:
            return "empty batch"
        if len(items) > self.core.settings.max_batch:
            return f"batch of {len(items)} exceeds {self.core.settings.max_batch}"
        if any(isinstance(i, dict) and i.get("method") == "initialize" for i in items):
            return "initialize must not be batched"
        return None

    def open_stream(self, context: Context) -> Answer:
        """The session's stream of notifications (HTTP: GET)."""
        session, problem = self._session_of(context)
        if problem is not None:
            return problem
        assert session is not None
        stream = Stream("session", session.id)
        with self.core.lock:
            session.streams.append(stream)
        self.core.touch()
        return Answer(session_id=session.id, stream=stream)

    def end_session(self, context: Context) -> Answer:
        """End the session (HTTP: DELETE)."""
        session, problem = self._session_of(context)
        if problem is not None:
            return problem
        assert session is not None
        with self.core.lock:
            self._end_session(session)
        self._observe("deleted", session)
        return Answer()

    # -- sessions -----------------------------------------------------------------------
    def _session_of(self, context: Context) -> tuple[Session | None, Answer | None]:
        version = context.version
        if version is not None and version not in HANDSHAKE_VERSIONS:
            return None, Answer.refusal(400, f"Bad Request: unsupported MCP-Protocol-Version {version!r}")
        sid = context.session_id
        if not sid:
            return None, Answer.refusal(400, "Bad Request: Mcp-Session-Id header is required (send initialize first)")
        session = self._touch_session(sid)
        if session is None:
            err = RpcError(SESSION_NOT_FOUND, "Session not found: it ended or never existed; initialize again")
            return None, Answer(rpc.error(None, err), 404)
        return session, None

    def _touch_session(self, sid: str) -> Session | None:
        """The live session ``sid``, marked as used now; None when it ended or never existed.
        No lock: one dict lookup and one attribute store are atomic, and a session is ended by
        taking it out of the dict (under the lock) before its DELETE is answered, so a read after
        that finds nothing (this runs for every replayed read of a session)."""
        session = self._sessions.get(sid)
        if session is not None:
            session.last_used = _monotonic()
        return session

    def _initialize(self, msg: rpc.Message) -> Answer:
        if msg.id is None:
            return Answer.refusal(400, "Invalid Request: initialize must be a request with an id")
        params = msg.params
        try:
            check_params("initialize", params)
        except RpcError as err:
            return Answer(rpc.error(msg.id, err), 400)
        version = negotiate(params["protocolVersion"])
        session = Session(
            secrets.token_urlsafe(24), version, params.get("clientInfo") or {}, params.get("capabilities") or {}
        )
        with self.core.lock:
            self._sessions[session.id] = session
            self._evict_sessions()
        self._observe("created", session)
        core = self.core
        result: dict[str, Any] = {
            "protocolVersion": version,
            "capabilities": core.capabilities(version, offered(session.capabilities)),
            "serverInfo": core.server_info(version),
        }
        if core.settings.instructions:
            result["instructions"] = core.settings.instructions
        core.touch()
        return Answer(rpc.result(msg.id, result), session_id=session.id)

    def _evict_sessions(self) -> None:
        excess = len(self._sessions) - self.core.settings.max_sessions
        if excess <= 0:
            return
        oldest = sorted(self._sessions.values(), key=lambda s: (bool(s.streams), s.last_used))
        for session in oldest[:excess]:
            self._end_session(session)

    def _notification(self, session: Session, msg: rpc.Message) -> None:
        if msg.method == "notifications/initialized":
            self.core.touch()

    def _end_session(self, session: Session) -> None:
        """Forget ``session``: its tool watches, subscriptions and streams (the caller holds the lock)."""
        resources = self.core.resources
        self._sessions.pop(session.id, None)
        tools = self.core.tools_made
        if tools is not None:
            tools.watches.forget(session_key(session.id))
        for uri in session.subscriptions:
            resources.unwatch(uri)
        session.subscriptions.clear()
        for stream in session.streams:
            stream.close()
        session.streams.clear()
        self.core.touch()

    def sessions(self) -> list[Session]:
        with self.core.lock:
            return list(self._sessions.values())

    def _observe(self, event: str, session: Session) -> None:
        if self.observer is not None:
            self.observer(event, session)

    # -- sessions made elsewhere (another process of the same carrier) ----------------------
    def knows(self, sid: str) -> bool:
        return sid in self._sessions

    def adopt(self, session: Session) -> Session:
        """A session another process made, kept here as if made here (its subscriptions watched);
        the one already here when there is one."""
        with self.core.lock:
            found = self._sessions.get(session.id)
            if found is not None:
                return found
            wanted, session.subscriptions = set(session.subscriptions), set()
            self._sessions[session.id] = session
            self._evict_sessions()
        self.sync(session.id, session.log_level, wanted)
        return session

    def sync(self, sid: str, log_level: str | None, subscriptions: set[str]) -> None:
        """A session changed elsewhere: its log level and subscriptions become these."""
        resources = self.core.resources
        with self.core.lock:
            session = self._sessions.get(sid)
            if session is None:
                return
            session.log_level = log_level
            gone, new = session.subscriptions - subscriptions, subscriptions - session.subscriptions
            session.subscriptions = set(subscriptions)
        resources.watch_all(sorted(new))  # waits (bounded) until a front's listens cover them
        for uri in gone:
            resources.unwatch(uri)
        if new or gone:
            self.core.touch()

    def drop(self, sid: str) -> None:
        """A session ended elsewhere (DELETE at another process) ends here too, streams included."""
        with self.core.lock:
            session = self._sessions.get(sid)
            if session is not None:
                self._end_session(session)

    # -- handlers of this era -------------------------------------------------------------
    def _set_level(self, ctx: Ctx, params: dict[str, Any]) -> dict[str, Any]:
        level = params.get("level")
        if level not in LOG_LEVELS:
            raise RpcError(rpc.INVALID_PARAMS, f"Invalid params: level must be one of {', '.join(LOG_LEVELS)}")
        session = cast(Session, ctx.session)
        session.log_level = level
        self._observe("changed", session)
        return {}

    def _subscribe(self, ctx: Ctx, params: dict[str, Any]) -> dict[str, Any]:
        uri = uri_param(params)
        resources = self.core.resources
        resources.provider_for(uri)  # ResourceNotFound for URIs nothing serves
        if ctx.log_level is not None:  # only pay for the existence check when someone listens
            try:
                resources.read(uri)
            except ResourceNotFound:
                ctx.log("info", {"message": f"{uri} does not exist yet; an update follows when it appears", "uri": uri})
            except Exception:
                pass
        session = cast(Session, ctx.session)
        resources.watch(uri)  # before the check below: the session may end (DELETE, eviction) meanwhile
        with self.core.lock:
            live = self._sessions.get(session.id) is session
            new = live and uri not in session.subscriptions
            if new:
                session.subscriptions.add(uri)
        if not new:
            resources.unwatch(uri)
        if not live:
            raise RpcError(SESSION_NOT_FOUND, "Session not found: it ended while subscribing; initialize again")
        if new:
            self._observe("changed", session)
        self.core.touch()
        return {}

    def _unsubscribe(self, ctx: Ctx, params: dict[str, Any]) -> dict[str, Any]:
        uri = uri_param(params)
        session = cast(Session, ctx.session)
        with self.core.lock:
            had = uri in session.subscriptions
            session.subscriptions.discard(uri)
        if had:
            self.core.resources.unwatch(uri)
            self._observe("changed", session)
        self.core.touch()
        return {}

    # -- the flat read path -------------------------------------------------------------
    def read_access(self, headers: dict[str, str], meta: Any, uri: str) -> ReadAccess | None:
        """A plainly well-formed read of a live session (no ``_meta``, a handshake revision or none
        in the header); None: let the general path answer (and report any error)."""
        header_version = headers.get("mcp-protocol-version")
        if meta is not None or (header_version is not None and header_version not in HANDSHAKE_VERSIONS):
            return None
        sid = headers.get("mcp-session-id")
        session = self._touch_session(sid) if sid else None
        if session is None:
            return None
        return ReadAccess(
            session.version, {"Content-Type": "application/json", "Mcp-Session-Id": session.id}, session.id
        )

    def after_read(self, access: ReadAccess) -> None:
        """Nothing to record once a session's flat read is answered (its use was marked)."""

    def replay_checks(self, access: ReadAccess) -> tuple[Callable[[], object], None]:
        """A replayed read's session must still be there (it is marked as used); nothing after."""
        return functools.partial(self._touch_session, access.asker), None

    # -- notifications --------------------------------------------------------------------
    def notify(self, kind: str, uris: tuple[str, ...]) -> None:
        """A change of the resources, sent on the stream of every session that asked for it."""
        if not self._sessions:  # after every cell, most often with no session: no lock, no list
            return
        for session in self.sessions():
            if not session.streams:
                continue
            if kind == LIST_CHANGED:
                _send(session, rpc.notification("notifications/resources/list_changed"))
            elif kind == UPDATED:
                hits = sorted(session.subscriptions.intersection(uris))
                if hits:
                    _send_encoded(session, updated_messages(hits))

    def log(self, level: str, data: Any, logger: str = "mcp-notebook") -> None:
        """Send a log message to sessions whose level admits it."""
        rank = LOG_LEVELS.index(level)
        for session in self.sessions():
            if session.log_level is not None and rank >= LOG_LEVELS.index(session.log_level):
                _send(
                    session, rpc.notification("notifications/message", {"level": level, "logger": logger, "data": data})
                )

    def stream_closed(self, stream: Stream) -> None:
        """A session's GET stream went away (the caller holds the lock)."""
        session = self._sessions.get(stream.key)
        if session is not None and stream in session.streams:
            session.streams.remove(stream)

    def end(self) -> None:
        """Shutdown: end every session and its streams (the caller holds the lock)."""
        for session in list(self._sessions.values()):
            self._end_session(session)


def _send(session: Session, message: dict[str, Any]) -> None:
    """Each message goes on exactly one stream: the newest one still open."""
    _send_encoded(session, [dumps(message)])


def _send_encoded(session: Session, messages: list[bytes]) -> None:
    for stream in reversed(session.streams):
        if stream.push_encoded(messages):
            return


def _refused(items: list[Any], text: str) -> Answer:
    """A batch refused as a whole: 400, each request in it answered with the error by its id."""
    return Answer(rpc.refuse_batch(items, RpcError(rpc.INVALID_REQUEST, text)), 400)
