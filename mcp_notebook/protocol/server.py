"""The MCP server as a pure state machine: a message and its context in, an answer out
(:meth:`McpServer.carry`); and on top of that, an HTTP request in, an HTTP reply out
(:meth:`McpServer.handle`).

:class:`McpServer` composes one :class:`~.core.Core` (resources, settings, tools, caches, the
handlers both eras share) with one object per era (:class:`~.handshake.HandshakeEra`,
:class:`~.stateless.StatelessEra`) and the flat read path (:class:`~.fast_read.FlatReads`). It
admits requests by their headers, asks :func:`mcp_notebook.revisions.classify` which era a message belongs to and
hands it over. No sockets or threads live here.

**What a carrier calls** (loopback HTTP today; any carrier of one HTTP exchange at a time):
``admit`` at head time, ``answer_inline`` on its own thread (None: ``handle`` on a worker),
``replay`` for a body repeated under a remembered head (``learn_family``, ``family_reply`` and
``member_memo`` for requests like a remembered head's), ``stream_closed`` when a client leaves
a stream, ``close`` at shutdown. docs/DESIGN.md ("Carriers") states the contract.

**What a carrier of messages calls** (the stdio bridge; no HTTP head, no JSON encoded and decoded
again, no SSE framing): ``carry(context, message)`` with a decoded message or batch,
``open_stream(context)`` and ``end_session(context)`` for a handshake-era session, and
``stream_closed`` when it stops reading a stream. The HTTP face is built on the same calls, so
every rule (batches by revision, sessions, the stateless era's checks, masking) is one code path.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..resources import Resources
from ..revisions import HANDSHAKE, STATELESS, STATELESS_VERSIONS, classify
from . import jsonrpc as rpc
from .core import Core
from .exchange import (
    INLINE_BODY_LIMIT,
    Answer,
    Context,
    HttpReply,
    HttpRequest,
    ServerSettings,
    http_reply,
    status_reply,
)
from .families import Families
from .fast_read import FlatReads
from .handshake import HandshakeEra, Session
from .jsonrpc import MAX_URI, RpcError
from .security import host_allowed, origin_allowed, preflight_headers, token_valid
from .stateless import CLIENTS_SEEN_SECONDS, Listen, StatelessEra
from .streams import Stream

if TYPE_CHECKING:
    from .tools import Tools

log = logging.getLogger(__name__)
_NO_HEADERS: dict[str, str] = {}  # the era from the message alone, once the context's revision is not stateless

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


class McpServer:
    """Decodes, validates and dispatches MCP requests against the kernel's resources."""

    def __init__(self, resources: Resources, settings: ServerSettings):
        self.core = Core(resources, settings)
        self.handshake = HandshakeEra(self.core)
        self.stateless = StatelessEra(self.core)
        self._eras = {HANDSHAKE: self.handshake, STATELESS: self.stateless}
        self.flat = FlatReads(self.core, self._eras)
        # replay(memo, body) -> HttpReply | None: the reply to ``body`` under the head ``memo`` was
        # learnt on (see answer_inline), or None: the usual path. Bound here, not wrapped: it is
        # the hottest call there is.
        self.replay = self.flat.replay
        # Head families (families.py), reads of one URI after another in either era:
        # learn_family(head bytes, memo) -> family | None, once a request under that head was learnt
        # as ``memo``; family_reply(family, request bytes) -> (HttpReply, head length) | None; and
        # member_memo(family): the replay memo of the member it answered last, for that member's head.
        self.families = Families(self.flat)
        self.learn_family = self.families.learn
        self.family_reply = self.families.answer
        self.member_memo = self.families.member_memo
        # called only while a session or a listen stream exists (issue #48: most cells, nobody connected)
        resources.add_listener(self.on_change, (self.handshake._sessions, self.stateless._listens))

    # -- shared state, as the hub and its views see it ------------------------------------
    @property
    def resources(self) -> Resources:
        return self.core.resources

    @property
    def settings(self) -> ServerSettings:
        return self.core.settings

    @settings.setter
    def settings(self, settings: ServerSettings) -> None:
        self.core.settings = settings

    @property
    def tools(self) -> Tools:
        return self.core.tools

    @property
    def on_activity(self) -> Callable[[], None] | None:
        return self.core.on_activity

    @on_activity.setter
    def on_activity(self, callback: Callable[[], None] | None) -> None:
        self.core.on_activity = callback

    @property
    def activity_listeners(self) -> list[Callable[[], None]]:
        """Called (without blocking) whenever sessions, streams or clients change; e.g. widgets."""
        return self.core.activity_listeners

    def sessions(self) -> list[Session]:
        return self.handshake.sessions()

    def listens(self) -> list[Listen]:
        return self.stateless.listens()

    def stateless_clients(self, within: float = CLIENTS_SEEN_SECONDS) -> list[tuple[str, str, str, float]]:
        return self.stateless.clients(within)

    def log(self, level: str, data: Any, logger: str = "mcp-notebook") -> None:
        """A log message to the handshake-era sessions whose level admits it."""
        self.handshake.log(level, data, logger)

    # -- what a carrier calls -------------------------------------------------------------
    def admit(self, headers: dict[str, str], method: str | None = None) -> HttpReply | None:
        """The reply refusing a request by its headers alone (Host, Origin, token), or None to go on.

        Carriers call this as soon as a request head is complete, before reading the body. A CORS
        preflight (``method`` OPTIONS) from an allowed Origin is answered here, without the token
        (browsers send none with it); the request it clears still needs one.
        """
        s = self.settings
        if not host_allowed(headers, s.allowed_hosts):
            return status_reply(403, "Forbidden: Host header is not a loopback name or one of MCPHub.allowed_hosts")
        if not origin_allowed(headers, s.allowed_origins, s.allowed_hosts):
            return status_reply(403, "Forbidden: Origin is not allowed")
        if method == "OPTIONS":
            return HttpReply(204, None, preflight_headers(headers))
        if s.require_token and not token_valid(headers, s.token):
            return status_reply(
                401,
                "Unauthorized: send 'Authorization: Bearer <token>'",
                {"WWW-Authenticate": 'Bearer realm="mcp-notebook"'},
            )
        return None

    def answer_inline(self, req: HttpRequest, remember: bool = False) -> HttpReply | None:
        """The reply to ``req`` when it can be given at once on the carrier's own thread (a cached
        read, or a request that runs no user code), else None: call :meth:`handle` on a worker.

        With ``remember``, sets ``req.replay`` to a memo when a later request under the same head
        bytes may be answered by :meth:`replay`.
        """
        fast = self.flat.answer(req, remember)
        if fast is not None:
            return fast
        if not self.may_run_user_code(req):
            return self.handle(req)
        return None

    def may_run_user_code(self, req: HttpRequest) -> bool:
        """Whether answering ``req`` may call into user code or touch live values (reprs, custom
        resources, completers, digests, frames). Carriers answer the others on their own thread.

        Only the body is looked at; anything unusual (large, batched, unparsable) says True.
        resources/list counts as safe only when every provider declares ``list_is_pure``;
        resources/read when the provider of its URI says it cannot run user code. Requests that
        fail admission are answered inline without looking at the body at all, and any body shape
        is handled without raising.
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
            return not self.resources.list_is_pure()
        if method == "resources/read":
            params = msg.get("params")
            uri = params.get("uri") if isinstance(params, dict) else None
            return not isinstance(uri, str) or len(uri) > MAX_URI or self.resources.may_run_user_code(uri)
        return method not in INLINE_METHODS

    def handle(self, req: HttpRequest) -> HttpReply:
        """Answer one HTTP request. Never raises for bad input."""
        try:
            denied = None if req.admitted else self.admit(req.headers)
        except Exception:  # headers come from a carrier as str -> str; be safe anyway
            log.exception("admission check failed")
            denied = status_reply(400, "Bad Request: unreadable headers")
        if denied is not None:
            return denied
        try:
            if req.method == "POST":
                return self._post(req)
            if req.method == "GET":
                return self._get(req.headers)
            if req.method == "DELETE":
                if "mcp-session-id" not in req.headers:
                    return status_reply(
                        405, "Method not allowed: DELETE ends a handshake-era session", {"Allow": "POST"}
                    )
                return http_reply(self.end_session(Context.of_headers(req.headers)))
            return status_reply(405, "Method not allowed", {"Allow": "GET, POST, DELETE"})
        except RpcError as err:
            return HttpReply.error(err)
        except Exception:
            log.exception("unexpected error handling a request")
            return HttpReply.error(RpcError(rpc.INTERNAL_ERROR, "Internal error", status=500))

    def _post(self, req: HttpRequest) -> HttpReply:
        ctype = req.headers.get("content-type", "application/json").split(";")[0].strip().lower()
        if ctype != "application/json":
            return status_reply(415, "Unsupported Media Type: POST bodies must be application/json")
        body = req.parsed[0] if req.parsed is not None else rpc.parse_body(req.body)
        return http_reply(self._carry(Context.of_headers(req.headers), body))

    def _get(self, headers: dict[str, str]) -> HttpReply:
        """GET: the session's stream, once the head asks for one as HTTP says."""
        if "mcp-session-id" not in headers:
            return status_reply(
                405, "Method not allowed: GET opens the stream of a handshake-era session", {"Allow": "POST"}
            )
        accept = headers.get("accept", "")
        if "text/event-stream" not in accept and "*/*" not in accept:
            return status_reply(406, "Not Acceptable: GET needs 'Accept: text/event-stream'")
        return http_reply(self.open_stream(Context.of_headers(headers)))

    # -- what a carrier of messages calls (beneath HTTP) ----------------------------------------
    def carry(self, context: Context, message: Any) -> Answer:
        """The answer to one decoded JSON-RPC message or batch from an admitted peer, under
        ``context``. Never raises for bad input: the answer is then the JSON-RPC error."""
        try:
            return self._carry(context, message)
        except RpcError as err:
            return Answer.error(err)
        except Exception:
            log.exception("unexpected error handling a message")
            return Answer.error(RpcError(rpc.INTERNAL_ERROR, "Internal error", status=500))

    def _carry(self, context: Context, message: Any) -> Answer:
        if isinstance(message, list):
            return self.handshake.batch(context, message)
        if context.version in STATELESS_VERSIONS:
            return self.stateless.post(context, message)
        return self._eras[classify(_NO_HEADERS, message)].post(context, message)

    def open_stream(self, context: Context) -> Answer:
        """A handshake-era session's stream of notifications (HTTP: GET)."""
        return self.handshake.open_stream(context)

    def end_session(self, context: Context) -> Answer:
        """End a handshake-era session (HTTP: DELETE)."""
        return self.handshake.end_session(context)

    def stream_closed(self, stream: Stream) -> None:
        """The carrier saw the client go away: release what the stream held."""
        with self.core.lock:
            stream.close()
            if stream.kind == "session":
                self.handshake.stream_closed(stream)
            else:
                self.stateless.stream_closed(stream)
        self.core.touch()

    def on_change(self, kind: str, uris: tuple[str, ...]) -> None:
        """Fan a change of the resources out to the streams of both eras that asked for it."""
        if not (self.handshake._sessions or self.stateless._listens):  # most cells: nobody connected, no call
            return
        self.handshake.notify(kind, uris)
        self.stateless.notify(kind, uris)

    def close(self) -> None:
        """End every stream gracefully (listen streams get their final result) and forget sessions."""
        core = self.core
        core.resources.remove_listener(self.on_change)
        if core.tools_made is not None:
            core.tools_made.watches.close()
        with core.lock:
            core.closed = True
            self.handshake.end()
            self.stateless.end()
