"""The flat path for the most frequent request: a resources/read whose encoded reply is cached.

Through the general path a cached read still takes a dozen calls (era choice, message and
``_meta`` validation, header checks, context, cache lookup); here the same checks run in one
function: the era-free ones first, then the era's own (``read_access``), then the core's cache.
Anything not plainly a well-formed read with a cache hit (another method, a batch, a log level,
an encoded Mcp-Name, a missing session, a stale entry, any doubt) returns None and takes the
general path, which also produces every error. Replies are byte-for-byte those of the general
path; ``tests/test_fast_read.py`` checks that over generated requests. A cache hit never runs
user code, so a carrier answers it on its own thread.

**Replays.** A client repeats its head and its body; only the id moves. When the flat path
answers a read it may learn the body's *shape* (the bytes before and after its integer id,
proved by re-parsing), and a later body made of the same two parts around a JSON integer is
that same request with another id: only what may have changed since (the session, the cache
entry, the value behind it) is checked again.

**Other URIs under one head.** A session's head (the handshake era) names no URI: a client reading
one resource after another sends the same head bytes (while the body's length holds) with another
URI in the body. A shape learnt under such a head also keeps the body's bytes around its URI and
its id (:class:`BodyFamily`, proved like the shape); a body made of those three parts around a
plain URI and a JSON integer is that read of the other URI, answered from the same reply cache
(shared by every connection and session; its entry found by the URI's bytes, ``Core.plain_reads``).
So the head's one memo, shared by every connection that sends it, answers all of them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Protocol

from ..lazy_re import LazyPatterns
from ..revisions import classify
from . import jsonrpc as rpc
from .core import PLAIN_BYTES, REPLY_START, CachedRead, Core, ReadAccess, ReadKey
from .exchange import INLINE_BODY_LIMIT, HttpReply, HttpRequest
from .jsonrpc import MAX_URI, check_params

_ID_FIELD = rb'"id"\s*:\s*([0-9]+)(?![0-9])'
MAX_ID_DIGITS = 15
# A URI whose JSON string is the URI itself (no quote, backslash, control or non-ASCII character)
# and whose header value is too; not the "=?base64?...?=" form of Mcp-Name (it starts with "=").
PLAIN_URI = rb"[A-Za-z0-9:/._~!$&'()*+,;@%?#\[\]-][A-Za-z0-9:/._~!$&'()*+,;=@%?#\[\]-]*"
_RE = LazyPatterns(id_field=_ID_FIELD, plain_uri=PLAIN_URI)  # at the first learnt family, or after loading
__all__ = ["PLAIN_BYTES", "BodyFamily", "FlatReads", "ReadShape"]  # (PLAIN_BYTES: core's, for families.py)
PROBE_URI = b"probe:family/0"


if TYPE_CHECKING:  # a type only: not made at import ("Loading, eighth cut")

    class ReadEra(Protocol):
        """What the flat path needs of an era."""

        def read_access(self, headers: dict[str, str], meta: Any, uri: str) -> ReadAccess | None: ...

        def after_read(self, access: Any) -> None: ...

        def replay_checks(self, access: Any) -> tuple[Callable[[], object] | None, Callable[[], None] | None]:
            """What a replay of ``access`` checks before answering (a falsy result: it ended; None:
            nothing can end) and does once its reply is written (None: nothing)."""
            ...


class BodyFamily:
    """A read body's bytes around its one quoted URI and its id, in order (``p URI q ID r`` when
    ``uri_first``, else ``p ID q URI r``): bodies that differ from the learnt one only there. This and
    ReadShape are plain classes, not ``NamedTuple``s (~0.15 ms each to create: "Loading, eighth cut")."""

    __slots__ = ("lengths", "parts", "reads", "uri_first")

    def __init__(
        self,
        parts: tuple[bytes, bytes, bytes],
        lengths: tuple[int, int, int],
        uri_first: bool,
        reads: dict[bytes, CachedRead],
    ) -> None:
        self.parts = parts
        self.lengths = lengths
        self.uri_first = uri_first
        self.reads = reads  # the core's cached reads of plain URIs of this revision, by their bytes


class ReadShape:
    """A cached read's body around its integer id, and what answering it again needs."""

    _FIELDS = ("after_send", "key", "msg", "others", "prefix", "reply", "reply_headers", "still_open", "suffix")
    __slots__ = (*_FIELDS, "id_at", "id_end")

    def __init__(
        self,
        prefix: bytes,
        suffix: bytes,
        key: ReadKey,
        reply_headers: dict[str, str],
        still_open: Callable[[], object] | None,
        after_send: Callable[[], None] | None,
        reply: HttpReply,  # reused by every replay of this shape (its body replaced each time)
        msg: dict[str, Any],  # the parsed request it was learnt on
        others: BodyFamily | None = None,  # bodies of other URIs under the same head (a head naming none)
    ) -> None:
        self.prefix, self.suffix, self.key, self.reply_headers = prefix, suffix, key, reply_headers
        self.still_open, self.after_send, self.reply, self.msg, self.others = still_open, after_send, reply, msg, others
        self.id_at, self.id_end = len(prefix), len(suffix)  # where a replayed body's id starts; bytes after it

    def replace(self, **changes: Any) -> ReadShape:
        """A copy with ``changes`` (what ``NamedTuple._replace`` did)."""
        fields = {name: getattr(self, name) for name in self._FIELDS}
        return ReadShape(**{**fields, **changes})


class FlatReads:
    """Cached reads of both eras in one function, and their replays."""

    def __init__(self, core: Core, eras: Mapping[str, ReadEra]):
        self.core = core
        self.eras = eras

    def answer(self, req: HttpRequest, learn: bool = False) -> HttpReply | None:
        """The reply to an admitted POST that is a cached read, or None (take the general path).

        Sets ``req.parsed`` when the body parsed, so the general path does not parse it again;
        with ``learn``, also ``req.replay`` when the request can be replayed (see :meth:`replay`).
        """
        headers = req.headers
        ctype = headers.get("content-type")
        if req.method != "POST" or not req.admitted or (ctype is not None and ctype != "application/json"):
            return None
        msg = _parsed_object(req)
        if msg is None or msg.get("method") != "resources/read" or msg.get("jsonrpc") != "2.0":
            return None
        msg_id = msg.get("id")
        params = msg.get("params")
        if (type(msg_id) is not int and type(msg_id) is not str) or type(params) is not dict:
            return None
        uri = params.get("uri")
        if type(uri) is not str or len(uri) > MAX_URI or uri.startswith("=?base64?"):
            return None
        era = self.eras[classify(headers, msg)]
        access = era.read_access(headers, params.get("_meta"), uri)
        if access is None:
            return None
        key = (access.version, uri)
        tail = self.core.cached_read(key)
        if tail is None or not _params_ok(params):
            return None
        era.after_read(access)
        if learn and type(msg_id) is int:
            shape = body_shape(req.body, msg)
            if shape is not None:
                still_open, after_send = era.replay_checks(access)
                reply = HttpReply(200, None, access.reply_headers, None, after_send)
                memo = ReadShape(*shape, key, access.reply_headers, still_open, after_send, reply, msg)
                if "mcp-name" not in headers:  # the head names no URI (a session's): others may follow
                    memo = memo.replace(others=self.body_family(memo))
                req.replay = memo
        return HttpReply(200, REPLY_START + rpc.dumps(msg_id) + tail, access.reply_headers)

    def replay(self, shape: ReadShape, body: bytes) -> HttpReply | None:
        """The reply to ``body`` sent under the head ``shape`` was learnt on, when it is that read
        again with another integer id; None: take the usual path. Its ``after_send`` does the
        bookkeeping once the reply is written. The reply object is the shape's own, reused: the
        carrier writes it before it replays the next request of this head (it does, on its loop)."""
        if shape.others is not None:  # a session's head: the learnt URI is one of the others
            return self.replay_other(shape, body)
        start, end = shape.id_at, len(body) - shape.id_end  # id_between, inlined: the hottest call there is
        if not 0 < end - start <= MAX_ID_DIGITS or not body.startswith(shape.prefix) or not body.endswith(shape.suffix):
            return None
        digits = body[start:end]
        if not digits.isdigit() or (digits[0] == 48 and end - start > 1):
            return None  # (bytes.isdigit: ASCII digits only; no leading zero, as JSON requires)
        if shape.still_open is not None and not shape.still_open():
            return None
        tail = self.core.cached_read(shape.key)
        if tail is None:
            return None
        reply = shape.reply
        reply.body = b"".join((REPLY_START, digits, tail))  # (join: the cheapest of the three ways)
        return reply

    def replay_other(self, shape: ReadShape, body: bytes) -> HttpReply | None:
        """The reply to ``body`` under the head ``shape`` was learnt on when it is the learnt body
        with another plain URI and another JSON integer id in their places (``shape.others``); None:
        take the usual path."""
        family = shape.others
        assert family is not None
        p, q, r = family.parts
        lp, lq, lr = family.lengths
        end = len(body) - lr
        if not body.startswith(p) or not body.endswith(r):
            return None
        if family.uri_first:  # p URI q ID r (a plain URI holds no quote, and q starts with one)
            stop = body.find(q, lp, end)
            uri, digits = body[lp:stop], body[stop + lq : end]
        else:  # p ID q URI r (the URI is what follows the last q before r)
            stop = body.rfind(q, lp, end)
            digits, uri = body[lp:stop], body[stop + lq : end]
        if stop < 0 or len(digits) > MAX_ID_DIGITS or not digits.isdigit() or (digits[0] == 48 and len(digits) > 1):
            return None  # a JSON integer: ASCII digits, no leading zero (empty: isdigit is False)
        # The URI's cached read, by its bytes: only plain URIs (no "=" first, within MAX_URI) are
        # kept there, so a hit is a plain URI whose JSON string is these very bytes.
        entry = family.reads.get(uri)
        if entry is None or (shape.still_open is not None and not shape.still_open()):
            return None
        tail = self.core.fresh_tail(entry)
        if tail is None:
            return None
        reply = shape.reply
        reply.body = b"".join((REPLY_START, digits, tail))  # (join: the cheapest of the three ways)
        return reply

    def body_family(self, shape: ReadShape) -> BodyFamily | None:
        """The bytes of the body ``shape`` was learnt on around its URI and its id, when its URI is
        plain, quoted exactly once, and a probe body (another URI, another id) parses to the same
        read with only those changed (``same_read``); None otherwise."""
        raw = shape.key[1].encode("ascii", "replace")
        if _RE.plain_uri.fullmatch(raw) is None or len(raw) > MAX_URI or raw == PROBE_URI:
            return None
        quoted = b'"' + raw + b'"'
        prefix, suffix = shape.prefix, shape.suffix
        if prefix.count(quoted) + suffix.count(quoted) != 1:
            return None
        if quoted in prefix:
            p, _, q = prefix.partition(quoted)
            parts, probe = (p + b'"', b'"' + q, suffix), p + b'"' + PROBE_URI + b'"' + q + b"7" + suffix
        else:
            q, _, r = suffix.partition(quoted)
            parts, probe = (prefix, q + b'"', b'"' + r), prefix + b"7" + q + b'"' + PROBE_URI + b'"' + r
        if not self.same_read(shape, probe, PROBE_URI):
            return None
        reads = self.core.plain_reads(shape.key[0])
        return BodyFamily(parts, (len(parts[0]), len(parts[1]), len(parts[2])), quoted in prefix, reads)

    def same_read(self, shape: ReadShape, body: bytes, uri: bytes) -> bool:
        """Whether ``body`` parses to the read ``shape`` was learnt on with id 7 and ``uri``, all
        else equal: the proof a carrier needs before answering bodies of that form with any id and
        any URI written the same way (see families.py, ``HeadFamily``)."""
        try:
            again = rpc.parse_body(body)
        except Exception:
            return False
        if type(again) is not dict or type(again.get("id")) is not int or again["id"] != 7:
            return False
        params = again.get("params")
        if type(params) is not dict or params.get("uri") != uri.decode("ascii"):
            return False
        msg = shape.msg
        return {**again, "id": msg.get("id"), "params": {**params, "uri": msg["params"]["uri"]}} == msg

    def member_shape(self, shape: ReadShape, uri: str, prefix: bytes, suffix: bytes) -> ReadShape:
        """The replay memo of the read ``shape`` was learnt on, for ``uri`` (its body ``prefix`` + id
        + ``suffix``, as a family ``same_read`` proved gives it); its ``others`` hold for it too (the
        parts around the URI and the id do not depend on them)."""
        msg = {**shape.msg, "params": {**shape.msg["params"], "uri": uri}}
        return shape.replace(prefix=prefix, suffix=suffix, key=(shape.key[0], uri), msg=msg)


def _parsed_object(req: HttpRequest) -> dict[str, Any] | None:
    """The body as a JSON object when it is small and parses (kept in ``req.parsed``), else None."""
    body = req.body
    if len(body) > INLINE_BODY_LIMIT or body[:1] != b"{":
        return None
    try:
        msg = rpc.parse_body(body)
    except Exception:
        return None
    if type(msg) is not dict:
        return None
    req.parsed = (msg,)
    return msg


def _params_ok(params: dict[str, Any]) -> bool:
    try:
        check_params("resources/read", params)
    except Exception:
        return False
    return True


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
    found = [m for m in _RE.id_field.finditer(body) if m.group(1) == digits]
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


def id_between(body: bytes, prefix: bytes, suffix: bytes) -> bytes | None:
    """The digits of ``body``'s integer id when it is ``prefix`` + a JSON integer + ``suffix``, else None."""
    if len(body) <= len(prefix) + len(suffix) or not body.startswith(prefix) or not body.endswith(suffix):
        return None
    middle = body[len(prefix) : len(body) - len(suffix)]
    if len(middle) > MAX_ID_DIGITS or not middle.isdigit() or (middle[0] == 48 and len(middle) > 1):
        return None  # (bytes.isdigit: ASCII digits only; no leading zero, as JSON requires)
    return middle
