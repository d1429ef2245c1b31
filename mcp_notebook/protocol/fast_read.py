"""The flat path for the most frequent request: a repeated resources/read whose encoded reply is cached.

Both eras answer such a read from the read cache of :class:`~.dispatch.Dispatch` (the provider's
``read_token`` unchanged: only the id is spliced in). Through the general path that still takes a
dozen calls (era choice, message and ``_meta`` validation, header checks, context, cache lookup);
here the same checks run in one function. Anything not plainly a well-formed read with a cache hit
(another method, a batch, a log level, an encoded Mcp-Name, a missing session, a stale entry, any
doubt) returns None and takes the general path, which also produces every error. Replies are
byte-for-byte those of the general path; ``tests/test_fast_read.py`` checks that over generated
requests. A cache hit never runs user code, so the transport answers it on its own loop.
"""

from __future__ import annotations

import functools
import re
import time
from typing import Any, NamedTuple

from . import jsonrpc as rpc
from .dispatch import Dispatch
from .exchange import META_CAPS, META_CLIENT_INFO, META_LOG_LEVEL, META_VERSION, HttpReply, HttpRequest
from .params import check_params
from .versions import HANDSHAKE_VERSIONS, MODERN_VERSIONS

_MAX_URI = 8192
_REPLY_START = b'{"jsonrpc":"2.0","id":'
_ID_FIELD = re.compile(rb'"id"\s*:\s*([0-9]+)(?![0-9])')
MAX_ID_DIGITS = 15


class ReadShape(NamedTuple):
    """A cached read's body around its integer id, and what answering it again needs."""

    prefix: bytes
    suffix: bytes
    key: tuple[str, bool, str]
    uri: str
    version: str
    session_id: str | None
    client_info: Any
    reply_headers: dict[str, str]
    after_send: Any  # the bookkeeping after a replayed reply is written (a modern client was seen), or None


def body_shape(body: bytes, msg: dict[str, Any]) -> tuple[bytes, bytes] | None:
    """``body`` split around the bytes of its top-level integer id, or None.

    Proved, not guessed: the split is kept only when putting another number between the two
    parts parses to the same message with only ``id`` changed. Any body made of the same two
    parts around a JSON integer is then the same request with another id.
    """
    msg_id = msg.get("id")
    if type(msg_id) is not int or msg_id < 0:
        return None
    digits = b"%d" % msg_id
    found = [m for m in _ID_FIELD.finditer(body) if m.group(1) == digits]
    if len(found) != 1:
        return None
    prefix, suffix = body[: found[0].start(1)], body[found[0].end(1) :]
    other = 7 if msg_id != 7 else 8
    try:
        again = rpc.parse_body(prefix + b"%d" % other + suffix)
    except Exception:
        return None
    if type(again) is not dict or again.get("id") != other or type(again.get("id")) is not int:
        return None
    if {**again, "id": msg_id} != msg:
        return None
    return prefix, suffix


def id_between(body: bytes, prefix: bytes, suffix: bytes) -> int | None:
    """The integer id of ``body`` when it is ``prefix`` + a JSON integer + ``suffix``, else None."""
    if len(body) <= len(prefix) + len(suffix) or not body.startswith(prefix) or not body.endswith(suffix):
        return None
    middle = body[len(prefix) : len(body) - len(suffix)]
    if len(middle) > MAX_ID_DIGITS or not middle.isdigit() or (middle[0] == 48 and len(middle) > 1):
        return None  # (bytes.isdigit: ASCII digits only; no leading zero, as JSON requires)
    return int(middle)


class FastReads(Dispatch):
    """Part of :class:`~.server.McpServer`: :meth:`fast_read` and :meth:`replay_read`."""

    _sessions: dict[str, Any]

    def _seen_stateless(self, info: Any, version: str) -> None:  # pragma: no cover - StatelessEra's
        raise NotImplementedError

    def fast_read(self, req: HttpRequest, learn: bool = False) -> HttpReply | None:
        """The reply to an admitted POST that is a cached read, or None (take the general path).

        Sets ``req.parsed`` when the body parsed, so the general path does not parse it again;
        with ``learn``, also ``req.replay`` when the request can be replayed (see replay_read).
        """
        headers = req.headers
        ctype = headers.get("content-type")
        if req.method != "POST" or not req.admitted or (ctype is not None and ctype != "application/json"):
            return None
        body = req.body
        if len(body) > 16384 or body[:1] != b"{":
            return None
        try:
            msg = rpc.parse_body(body)
        except Exception:
            return None
        if type(msg) is not dict:
            return None
        req.parsed = (msg,)
        if msg.get("method") != "resources/read" or msg.get("jsonrpc") != "2.0":
            return None
        msg_id = msg.get("id")
        if type(msg_id) is not int and type(msg_id) is not str:
            return None
        params = msg.get("params")
        if type(params) is not dict:
            return None
        uri = params.get("uri")
        if type(uri) is not str or len(uri) > _MAX_URI or uri.startswith("=?base64?"):
            return None
        header_version = headers.get("mcp-protocol-version")
        meta = params.get("_meta")
        if header_version in MODERN_VERSIONS:
            if (
                type(meta) is not dict
                or meta.get(META_VERSION) != header_version
                or type(meta.get(META_CAPS)) is not dict
                or META_LOG_LEVEL in meta
                or headers.get("mcp-method") != "resources/read"
                or headers.get("mcp-name") != uri
            ):
                return None
            version: str = header_version
            key = (version, True, uri)
            extra: dict[str, str] | None = None
        else:
            if meta is not None or (header_version is not None and header_version not in HANDSHAKE_VERSIONS):
                return None
            sid = headers.get("mcp-session-id")
            if not sid:
                return None
            with self._lock:
                session = self._sessions.get(sid)
                if session is None:
                    return None
                session.last_used = time.monotonic()
            version = session.version
            key = (version, False, uri)
            extra = {"Mcp-Session-Id": session.id}
        tail = self._cached_read(key, uri)
        if tail is None:
            return None
        try:
            check_params("resources/read", params)
        except Exception:
            return None
        client_info = None
        if extra is None:
            client_info = meta.get(META_CLIENT_INFO)  # type: ignore[union-attr]
            self._seen_stateless(client_info, version)
            reply_headers = {"Content-Type": "application/json"}
        else:
            reply_headers = {"Content-Type": "application/json", **extra}
        if learn and type(msg_id) is int:
            shape = body_shape(body, msg)
            if shape is not None:
                sid = None if extra is None else extra["Mcp-Session-Id"]
                after = None if sid is not None else functools.partial(self._seen_stateless, client_info, version)
                req.replay = ReadShape(shape[0], shape[1], key, uri, version, sid, client_info, reply_headers, after)
        return HttpReply(200, _REPLY_START + rpc.dumps(msg_id) + tail, reply_headers)

    def replay(self, shape: ReadShape, body: bytes) -> HttpReply | None:
        """The reply to ``body`` sent under the head that ``shape`` was learnt on, when it is that
        read again with another integer id; None: take the usual path (``answer_inline``).

        Everything the body and head decide was checked when the shape was learnt (same head
        bytes, same body bytes around the id); what may have changed since is checked again: the
        session, the cache entry and the value behind it.
        """
        prefix, suffix = shape.prefix, shape.suffix
        if len(body) <= len(prefix) + len(suffix) or not body.startswith(prefix) or not body.endswith(suffix):
            return None
        middle = body[len(prefix) : len(body) - len(suffix)]
        if len(middle) > MAX_ID_DIGITS or not middle.isdigit() or (middle[0] == 48 and len(middle) > 1):
            return None  # (bytes.isdigit: ASCII digits only; no leading zero, as JSON requires)
        sid = shape.session_id
        if sid is not None:
            with self._lock:
                session = self._sessions.get(sid)
                if session is None:
                    return None
                session.last_used = time.monotonic()
        tail = self._cached_read(shape.key, shape.uri)
        if tail is None:
            return None
        return HttpReply(200, b"%s%s%s" % (_REPLY_START, middle, tail), shape.reply_headers, None, shape.after_send)

    def replay_read(self, shape: ReadShape, msg_id: int) -> bytes | None:
        """The reply body (status 200, ``shape.reply_headers``) to a request that is ``shape``'s
        request with another integer id, or None. Call :meth:`replayed` once it is sent.

        Everything the body and head decide was checked when the shape was learnt (same head
        bytes, same body bytes around the id); what may have changed since is checked again: the
        session, the cache entry and the value behind it.
        """
        sid = shape.session_id
        if sid is not None:
            with self._lock:
                session = self._sessions.get(sid)
                if session is None:
                    return None
                session.last_used = time.monotonic()
        tail = self._cached_read(shape.key, shape.uri)
        return None if tail is None else b"%s%d%s" % (_REPLY_START, msg_id, tail)

    def replayed(self, shape: ReadShape) -> None:
        """Bookkeeping of a replayed read, after its reply left (a modern client was seen)."""
        if shape.session_id is None:
            self._seen_stateless(shape.client_info, shape.version)
