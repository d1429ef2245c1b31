"""What carriers and the protocol share, and what every request is handled under: settings, the
HTTP request/reply pair (the HTTP carriers' seam), a message's :class:`Context` and its
:class:`Answer` (the seam beneath HTTP, for carriers of messages: the stdio bridge), the
per-request context and the small status replies."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from ..budget import RESULT_CHARS
from ..revisions import META_CAPS, META_CLIENT_INFO, META_LOG_LEVEL
from . import jsonrpc as rpc
from .apps import offered
from .jsonrpc import LOG_LEVELS, RpcError
from .jsonrpc import lone_surrogate_path as lone_surrogate_path  # for carriers: text JSON cannot carry
from .streams import Stream

SESSION_NOT_FOUND = -32001
ENDPOINT_PATH = "/mcp"  # where a carrier of HTTP requests serves the endpoint
# Bodies up to this size are parsed on the carrier's thread to decide where a request is answered.
INLINE_BODY_LIMIT = 16384


class ServerSettings:
    """A server's settings, fixed when it is made: a change is a new object (:meth:`replace`)."""

    __slots__ = (
        "allowed_hosts",
        "allowed_origins",
        "description",
        "instructions",
        "max_batch",
        "max_result_chars",
        "max_sessions",
        "name",
        "page_size",
        "require_token",
        "title",
        "token",
        "version",
    )

    def __init__(
        self,
        name: str = "mcp-notebook",
        version: str = "0",
        title: str = "Jupyter kernel (mcp-notebook)",
        description: str = "Live variables, data and cells of a Jupyter kernel as MCP resources.",
        instructions: str = "",
        page_size: int = 500,
        max_result_chars: int = RESULT_CHARS,  # a result as sent fits this (see budget.py)
        max_batch: int = 50,
        max_sessions: int = 64,
        require_token: bool = True,
        token: str = "",
        allowed_origins: tuple[str, ...] = (),
        allowed_hosts: tuple[str, ...] = (),
    ) -> None:
        self.name = name
        self.version = version
        self.title = title
        self.description = description
        self.instructions = instructions
        self.page_size = page_size
        self.max_result_chars = max_result_chars
        self.max_batch = max_batch
        self.max_sessions = max_sessions
        self.require_token = require_token
        self.token = token
        self.allowed_origins = allowed_origins
        self.allowed_hosts = allowed_hosts

    def replace(self, **changes: Any) -> ServerSettings:
        """A copy with ``changes`` (field names as in the constructor)."""
        return ServerSettings(**{name: changes.get(name, getattr(self, name)) for name in self.__slots__})

    def __repr__(self) -> str:  # the token is never shown
        return f"ServerSettings(name={self.name!r}, version={self.version!r}, page_size={self.page_size!r})"


class HttpRequest:
    __slots__ = ("admitted", "body", "headers", "method", "parsed", "replay")

    def __init__(
        self,
        method: str,
        headers: dict[str, str],  # lower-case names
        body: bytes = b"",
        # Set by a transport that already ran McpServer.admit on these headers (skip it again).
        admitted: bool = False,
        # The strictly parsed body, once may_run_user_code parsed it (handle does not parse it again).
        parsed: Any = None,
        # Set by McpServer.answer_inline(req, remember=True): an opaque memo a carrier keeps with the
        # request's head and hands to McpServer.replay with a later body sent under the same head.
        replay: Any = None,
    ) -> None:
        self.method = method
        self.headers = headers
        self.body = body
        self.admitted = admitted
        self.parsed = parsed
        self.replay = replay

    def __repr__(self) -> str:  # no headers: they carry the token
        return f"HttpRequest({self.method!r}, body={self.body[:80]!r})"


class HttpReply:
    __slots__ = ("after_send", "body", "headers", "status", "stream")

    def __init__(
        self,
        status: int,
        body: bytes | None = None,
        headers: dict[str, str] | None = None,
        stream: Stream | None = None,
        # Bookkeeping the carrier runs once the reply is written (never before: it must not delay it).
        after_send: Callable[[], None] | None = None,
    ) -> None:
        self.status = status
        self.body = body
        self.headers = {} if headers is None else headers
        self.stream = stream
        self.after_send = after_send

    def __repr__(self) -> str:
        return f"HttpReply({self.status!r}, {self.body!r}, {self.headers!r})"

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


if TYPE_CHECKING:  # a type only: not made at import (DESIGN, "Loading, eighth cut")

    class SessionView(Protocol):
        """What a request's context needs of a handshake-era session."""

        id: str
        log_level: str | None
        capabilities: dict[str, Any]


def session_key(session_id: str) -> str:
    """The key a handshake-era session's tool watches are kept under."""
    return f"session:{session_id}"


class Context:
    """What one message is carried under beside its body, beneath HTTP: what the HTTP face reads
    from a request's headers (:meth:`of_headers`), or what a carrier of messages knows itself (the
    stdio bridge: the session it opened, the revision it negotiated). Admission (Host, Origin,
    token) is done before: a context is of an admitted peer."""

    __slots__ = ("method", "mirrored", "name", "session_id", "streams", "version")

    def __init__(
        self,
        session_id: str | None = None,  # the handshake-era session (HTTP: Mcp-Session-Id)
        version: str | None = None,  # the revision the carrier names (HTTP: MCP-Protocol-Version)
        streams: bool = False,  # the peer takes notifications before a reply (HTTP: Accept names SSE)
        # HTTP only: the stateless era mirrors a request in headers that must say what its body says
        # (Mcp-Method, Mcp-Name; MCP-Protocol-Version = version). A message carrier has none to check.
        mirrored: bool = False,
        method: str | None = None,  # Mcp-Method, as sent
        name: str | None = None,  # Mcp-Name, as sent
    ) -> None:
        self.session_id = session_id
        self.version = version
        self.streams = streams
        self.mirrored = mirrored
        self.method = method
        self.name = name

    @classmethod
    def of_headers(cls, headers: dict[str, str]) -> Context:
        """The context an HTTP request's (lower-cased) headers give its body."""
        get = headers.get
        return cls(
            get("mcp-session-id"),
            get("mcp-protocol-version"),
            "text/event-stream" in get("accept", ""),
            True,
            get("mcp-method"),
            get("mcp-name"),
        )


class Answer:
    """What the server says to one message or batch, beneath HTTP: reply messages, no head, no
    encoding forced (:meth:`McpServer.carry`). The HTTP face turns it into an :class:`HttpReply`
    (:func:`http_reply`); a carrier of messages writes ``notes`` then ``reply`` as they are."""

    __slots__ = ("encoded", "notes", "reply", "session_id", "status", "stream")

    def __init__(
        self,
        reply: Any = None,  # one message, or a batch's array; None: nothing is owed (a notification)
        status: int = 200,  # the HTTP face's status (202: nothing owed; 4xx: refused as a whole)
        encoded: bytes | None = None,  # the reply already encoded (a cached read or listing); reply is None
        notes: list[dict[str, Any]] | None = None,  # notifications before the reply (logs)
        session_id: str | None = None,  # the session it belongs to (HTTP: Mcp-Session-Id)
        stream: Stream | None = None,  # a stream opened by the message: its messages come as they happen
    ) -> None:
        self.reply = reply
        self.status = status
        self.encoded = encoded
        self.notes = [] if notes is None else notes
        self.session_id = session_id
        self.stream = stream

    def __repr__(self) -> str:
        return f"Answer({self.reply!r}, {self.status!r}, encoded={self.encoded!r}, notes={self.notes!r})"

    @classmethod
    def error(cls, err: RpcError, msg_id: Any = None) -> Answer:
        if msg_id is None:
            msg_id = err.request_id
        return cls(rpc.error(msg_id, err), err.status if err.status != 200 else 400)

    @classmethod
    def refusal(cls, status: int, message: str) -> Answer:
        """A refusal of the whole message: a JSON-RPC error with a null id."""
        return cls(rpc.error(None, RpcError(rpc.INVALID_REQUEST, message)), status)

    def messages(self) -> list[Any]:
        """What goes back, in order, as decoded messages (a cached reply is decoded)."""
        reply = rpc.parse_body(self.encoded) if self.encoded is not None else self.reply
        return [*self.notes, reply] if reply is not None else list(self.notes)


def http_reply(answer: Answer) -> HttpReply:
    """An answer as the HTTP face sends it: JSON, an SSE stream (one opened, or a request's log
    messages before its result), or no body (202)."""
    headers = {"Mcp-Session-Id": answer.session_id} if answer.session_id is not None else {}
    if answer.stream is not None:
        return HttpReply(answer.status, headers=headers, stream=answer.stream)
    if answer.notes:
        stream = Stream("response")
        stream.push_many(answer.notes)
        stream.close(answer.reply if answer.encoded is None else rpc.parse_body(answer.encoded))
        return HttpReply(200, headers=headers, stream=stream)
    if answer.encoded is not None:
        return HttpReply(answer.status, answer.encoded, {"Content-Type": "application/json", **headers})
    if answer.reply is None:
        return HttpReply(answer.status, headers=headers)
    return HttpReply.json(answer.reply, answer.status, headers)


class Ctx:
    """What one request is handled under: its revision, and its session (handshake era) or its
    ``_meta`` (stateless era)."""

    __slots__ = ("logs", "meta", "session", "streams", "version")

    def __init__(
        self,
        version: str,
        session: SessionView | None = None,
        meta: dict[str, Any] | None = None,
        streams: bool = False,  # the peer takes the request's log messages before its reply
        logs: list[tuple[str, Any]] | None = None,
    ) -> None:
        self.version = version
        self.session = session
        self.meta = {} if meta is None else meta
        self.streams = streams
        self.logs = [] if logs is None else logs

    @property
    def client_key(self) -> str:
        """Who is asking, for per-client tool watches: the session, or the clientInfo a stateless
        request carries (there is no session to end)."""
        if self.session is not None:
            return session_key(self.session.id)
        info = self.meta.get(META_CLIENT_INFO)
        if isinstance(info, dict):
            return f"client:{info.get('name', '?')}/{info.get('version', '?')}"
        return "client:anonymous"

    @property
    def apps(self) -> bool:
        """Whether the client offered the MCP Apps extension (its session's, or this request's, capabilities)."""
        caps = self.session.capabilities if self.session is not None else self.meta.get(META_CAPS)
        return offered(caps)

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


def carrier_error(status: int, message: str, code: int = rpc.INTERNAL_ERROR) -> HttpReply:
    """A JSON-RPC error without an id, for a failure of the carrier itself (413, 500, 503)."""
    return HttpReply.json(rpc.error(None, RpcError(code, message)), status)


def status_reply(status: int, message: str, headers: dict[str, str] | None = None) -> HttpReply:
    """A plain HTTP-level refusal carrying a JSON-RPC error with a null id."""
    return HttpReply.json(rpc.error(None, RpcError(rpc.INVALID_REQUEST, message)), status, headers)
