"""Head families: reads of one URI after another, recognised in a request's bytes.

A client reading one resource after another repeats its head but for ``Content-Length`` (and, in
the stateless era, ``Mcp-Name``), and its body but for the id and the URI. Once a read under an
admitted head was answered by the flat path and learnt as a replay memo (``fast_read.ReadShape``),
:meth:`Families.learn` finds the places of those values in the head's and the body's bytes; a
later request that is those same bytes with other values in those places is that same read with
another id and another URI, and :meth:`Families.answer` answers it as a replay of that URI (its
cached read found by the URI's bytes: ``Core.plain_reads``, one lookup, nothing decoded).

This is the protocol's side of a carrier's replays: a carrier hands over bytes (a head, a whole
request) and keeps what it gets back as an opaque memo; it never looks inside. Both eras: the
handshake era's head carries the session id (part of the fixed bytes), and what a flat read of a
session checks again (the session is live) is the memo's ``still_open``.
"""

from __future__ import annotations

from typing import Any

from ..redact import REDACTOR
from .core import REPLY_START
from .exchange import HttpReply
from .fast_read import FlatReads, ReadShape
from .jsonrpc import MAX_URI
from .wire_http11 import CRLF, value_spans

_NAME, _LENGTH = b"mcp-name", b"content-length"
MAX_URI_BYTES = MAX_URI


class HeadFamily:
    """Heads equal to one admitted head but for the values of ``Content-Length`` and, when the head
    has it, ``Mcp-Name`` (then equal to the URI), with the read body's shape around its id and URI.

    ``parts`` are the head's bytes around the values (each after the first starts with CRLF, the
    last ends the head with its blank line); ``holes`` says which value each gap holds (``True``:
    the URI, ``False``: the length), one or two; ``body`` the body's bytes around the id and the
    URI, in order. :meth:`Families.answer` matches a request against it."""

    __slots__ = (
        "body",
        "body_lengths",
        "last",
        "lengths",
        "named",
        "parts",
        "reads",
        "shape",
        "uri_first_in_body",
        "uri_first_in_head",
    )

    def __init__(
        self,
        parts: tuple[bytes, ...],
        holes: tuple[bool, ...],
        body: tuple[bytes, bytes, bytes],
        uri_first: bool,
        shape: ReadShape,
        reads: dict[bytes, Any],
    ):
        self.parts = parts
        self.lengths = tuple(map(len, parts))
        self.named = len(holes) == 2  # the head has Mcp-Name (the stateless era)
        self.uri_first_in_head = holes[0]
        self.body = body
        self.body_lengths = tuple(map(len, body))
        self.uri_first_in_body = uri_first
        self.shape = shape  # the replay memo of the read it was learnt on
        self.reads = reads  # the core's cached reads of plain URIs of its revision, by their bytes
        self.last = ""  # the URI of the member last answered (for its memo)


class Families:
    """What a carrier calls for head families (see the module docstring)."""

    def __init__(self, flat: FlatReads):
        self.flat = flat
        self.resources = flat.core.resources

    def learn(self, head: bytes, memo: Any) -> HeadFamily | None:
        """The family of ``head`` (an admitted keep-alive head's bytes, blank line included) whose
        read was learnt as the replay memo ``memo``; None when there is none to learn."""
        if not isinstance(memo, ReadShape):
            return None
        raw = memo.key[1].encode("ascii", "replace")
        spans = value_spans(head, (_NAME, _LENGTH))
        if spans is None or _LENGTH not in spans or (_NAME in spans and head[slice(*spans[_NAME])] != raw):
            return None
        order = sorted(spans, key=lambda name: spans[name][0])
        cuts = [0] + [i for name in order for i in spans[name]] + [len(head)]
        parts = tuple(head[cuts[i] : cuts[i + 1]] for i in range(0, len(cuts), 2))
        body = memo.others or self.flat.body_family(memo)  # (a plain URI, proved by a probe body)
        if body is None:
            return None
        holes = tuple(name == _NAME for name in order)
        return HeadFamily(parts, holes, body.parts, body.uri_first, memo, body.reads)

    def answer(self, family: HeadFamily, data: bytes) -> tuple[HttpReply, int] | None:
        """The reply to ``data`` (one whole request) when it is a member of ``family`` whose read is
        cached, and the length of its head; None: take the usual path. One function: it runs for
        every read of a client reading one URI after another (each C call here is ~0.1 µs under load)."""
        a, b = family.parts[0], family.parts[1]
        la, lb = family.lengths[0], family.lengths[1]
        if not data.startswith(a):
            return None
        i = data.find(CRLF, la, la + MAX_URI_BYTES + 2)
        if i < 0 or not data.startswith(b, i):
            return None
        end = i + lb
        named = None
        length = data[la:i]
        if family.named:  # a second value: the URI (in either order)
            c, lc = family.parts[2], family.lengths[2]
            j = data.find(CRLF, end, end + MAX_URI_BYTES + 2)
            if j < 0 or not data.startswith(c, j):
                return None
            named, length = (length, data[end:j]) if family.uri_first_in_head else (data[end:j], length)
            end = j + lc
        size = len(data)
        if length != b"%d" % (size - end):  # Content-Length, as digits (another spelling: the usual path)
            return None
        p, q, r = family.body
        lp, lq, lr = family.body_lengths
        if family.uri_first_in_body:  # p URI q ID r
            stop = data.find(q, end + lp) if named is None else end + lp + len(named)
            uri = data[end + lp : stop]
            ok = stop >= 0 and data.startswith(p, end) and data.startswith(q, stop)
            start, stop = stop + lq, size - lr
        else:  # p ID q URI r
            tail = size - lr
            stop = data.rfind(q, end + lp, tail) if named is None else tail - len(named) - lq
            uri = data[stop + lq : tail]
            ok = stop >= 0 and data.startswith(p, end) and data.startswith(q, stop)
            start = end + lp
        if not ok or not data.endswith(r) or stop <= start or stop - start > 15 or (named is not None and uri != named):
            return None
        digits = data[start:stop]
        if not digits.isdigit() or (digits[0] == 48 and stop - start > 1):
            return None  # a JSON integer: ASCII digits, no leading zero
        # The URI's cached read by its bytes (the per-URI record): only plain URIs (no "=" first,
        # within MAX_URI) are kept there, so a hit is a plain URI whose JSON string is these bytes.
        entry = family.reads.get(uri)
        shape = family.shape
        if entry is None or (shape.still_open is not None and not shape.still_open()):
            return None
        try:  # Core.fresh_tail, inlined (keep in step): the entry's stamp holds
            token = entry[2].read_token(entry[3])
        except Exception:
            return None
        if token is None or entry[0] != (token, self.resources.generation, REDACTOR.version):
            return None
        reply = shape.reply
        reply.body = b"".join((REPLY_START, digits, entry[1]))
        family.last = entry[3]
        return reply, end

    def member_memo(self, family: HeadFamily) -> ReadShape:
        """The replay memo of the member ``family`` answered last, for its own head's bytes: a later
        request with those very head bytes replays it."""
        uri = family.last
        p, q, r = family.body
        raw = uri.encode("ascii")
        prefix, suffix = (p + raw + q, r) if family.uri_first_in_body else (p, q + raw + r)
        return self.flat.member_shape(family.shape, uri, prefix, suffix)
