"""Head families: reads of one URI after another, recognised in a request's bytes.

A client reading one resource after another repeats its head but for ``Content-Length`` (and, in
the stateless era, ``Mcp-Name``), and its body but for the id and the URI. Once a read under an
admitted head was answered by the flat path and learnt as a replay memo (``fast_read.ReadShape``),
:meth:`Families.learn` finds the places of those values in the head's and the body's bytes; a
later request that is those same bytes with other values in those places is that same read with
another id and another URI, and :meth:`Families.answer` answers it as a replay of that URI.

This is the protocol's side of a carrier's replays: a carrier hands over bytes (a head, a whole
request) and keeps what it gets back as an opaque memo; it never looks inside. Both eras: the
handshake era's head carries the session id (part of the fixed bytes), and what a flat read of a
session checks again (the session is live) is the memo's ``still_open``.
"""

from __future__ import annotations

import re
from typing import Any

from .exchange import HttpReply
from .fast_read import FlatReads, ReadShape
from .params import MAX_URI

# A URI whose JSON string is the URI itself (no quote, backslash, control or non-ASCII character)
# and whose header value is too; not the "=?base64?...?=" form of Mcp-Name (it starts with "=").
_PLAIN_URI = re.compile(rb"[A-Za-z0-9:/._~!$&'()*+,;@%?#\[\]-][A-Za-z0-9:/._~!$&'()*+,;=@%?#\[\]-]*")
_PLAIN_BYTES = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789:/._~!$&'()*+,;=@%?#[]-"
_PROBE_URI = b"probe:family/0"
_NAME, _LENGTH = b"mcp-name", b"content-length"
MAX_URI_BYTES = MAX_URI


class HeadFamily:
    """Heads equal to one admitted head but for the values of ``Content-Length`` and, when the head
    has it, ``Mcp-Name`` (then equal to the URI), with the read body's shape around its id and URI.

    ``parts`` are the head's bytes around the values (each after the first starts with CRLF, the
    last ends the head with its blank line); ``holes`` says which value each gap holds (``True``:
    the URI, ``False``: the length); ``body`` the body's bytes around the id and the URI, in order."""

    __slots__ = ("body", "body_lengths", "holes", "last", "lengths", "parts", "shape", "uri_first_in_body")

    def __init__(
        self,
        parts: tuple[bytes, ...],
        holes: tuple[bool, ...],
        body: tuple[bytes, bytes, bytes],
        uri_first: bool,
        shape: ReadShape,
    ):
        self.parts = parts
        self.lengths = tuple(map(len, parts))
        self.holes = holes
        self.body = body
        self.body_lengths = tuple(map(len, body))
        self.uri_first_in_body = uri_first
        self.shape = shape  # the replay memo of the read it was learnt on
        self.last = ""  # the URI of the member last answered (for its memo)

    def match(self, data: bytes) -> tuple[str, bytes, int] | None:
        """(URI, id digits, head length) when ``data`` is exactly one request of this family."""
        parts, lengths = self.parts, self.lengths
        if not data.startswith(parts[0]):
            return None
        pos = lengths[0]
        uri = length = None
        for k, is_uri in enumerate(self.holes):
            j = data.find(b"\r\n", pos, pos + MAX_URI_BYTES + 2)
            if j < 0 or not data.startswith(parts[k + 1], j):
                return None
            if is_uri:
                uri = data[pos:j]
            else:
                length = data[pos:j]
            pos = j + lengths[k + 1]
        if length is None or not length.isdigit() or len(length) > 9 or int(length) != len(data) - pos:
            return None
        digits, uri = self._body(data, pos, uri)
        return None if digits is None else (uri, digits, pos)

    def _body(self, data: bytes, end: int, named: bytes | None) -> tuple[Any, str]:
        """The id digits and the URI of a body at ``end`` of this family's shape (None: not one);
        ``named``: the URI the head names (the body's must be the same bytes)."""
        p, q, r = self.body
        lp, lq, lr = self.body_lengths
        if self.uri_first_in_body:  # p URI q ID r
            if not data.startswith(p, end):
                return None, ""
            stop = data.find(q, end + lp) if named is None else end + lp + len(named)
            uri = data[end + lp : stop] if stop >= 0 else b""
            ok = stop >= 0 and data.startswith(q, stop)
            start, stop = stop + lq, len(data) - lr
        else:  # p ID q URI r
            tail = len(data) - lr
            stop = data.rfind(q, end + lp, tail) if named is None else tail - len(named) - lq
            uri = data[stop + lq : tail] if stop >= 0 else b""
            ok = stop >= 0 and data.startswith(p, end) and data.startswith(q, stop)
            start = end + lp
        if not ok or not data.endswith(r) or stop <= start or stop - start > 15:
            return None, ""
        if named is not None and uri != named:
            return None, ""
        if not uri or len(uri) > MAX_URI_BYTES or uri.translate(None, _PLAIN_BYTES) or uri[0] == 61:
            return None, ""  # plain characters, no "=" first
        digits = data[start:stop]
        if not digits.isdigit() or (digits[0] == 48 and stop - start > 1):
            return None, ""  # a JSON integer: ASCII digits, no leading zero
        return digits, uri.decode("ascii")


class Families:
    """What a carrier calls for head families (see the module docstring)."""

    def __init__(self, flat: FlatReads):
        self.flat = flat

    def learn(self, head: bytes, memo: Any) -> HeadFamily | None:
        """The family of ``head`` (an admitted keep-alive head's bytes, blank line included) whose
        read was learnt as the replay memo ``memo``; None when there is none to learn."""
        if not isinstance(memo, ReadShape):
            return None
        uri = memo.key[1]
        raw = uri.encode("ascii", "replace")
        if _PLAIN_URI.fullmatch(raw) is None or len(raw) > MAX_URI_BYTES or raw == _PROBE_URI:
            return None
        spans = _value_spans(head)
        if spans is None or _LENGTH not in spans or (_NAME in spans and head[slice(*spans[_NAME])] != raw):
            return None
        order = sorted(spans, key=lambda name: spans[name][0])
        cuts = [0] + [i for name in order for i in spans[name]] + [len(head)]
        parts = tuple(head[cuts[i] : cuts[i + 1]] for i in range(0, len(cuts), 2))
        shaped = _body_shape(memo.prefix, memo.suffix, raw)
        if shaped is None:
            return None
        body, uri_first, probe = shaped
        if not self.flat.same_read(memo, probe, _PROBE_URI):
            return None
        return HeadFamily(parts, tuple(name == _NAME for name in order), body, uri_first, memo)

    def answer(self, family: HeadFamily, data: bytes) -> tuple[HttpReply, int] | None:
        """The reply to ``data`` (one whole request) when it is a member of ``family`` whose read is
        cached, and the length of its head; None: take the usual path."""
        found = family.match(data)
        if found is None:
            return None
        uri, digits, head_length = found
        reply = self.flat.replay_uri(family.shape, uri, digits)
        if reply is None:
            return None
        family.last = uri
        return reply, head_length

    def member_memo(self, family: HeadFamily) -> ReadShape:
        """The replay memo of the member ``family`` answered last, for its own head's bytes: a later
        request with those very head bytes replays it."""
        uri = family.last
        p, q, r = family.body
        raw = uri.encode("ascii")
        prefix, suffix = (p + raw + q, r) if family.uri_first_in_body else (p, q + raw + r)
        return self.flat.member_shape(family.shape, uri, prefix, suffix)


def _value_spans(head: bytes) -> dict[bytes, tuple[int, int]] | None:
    """Where the values of Content-Length and Mcp-Name are in ``head`` (each once, after one
    space, with no space around it); None when a field comes twice or is written otherwise."""
    spans: dict[bytes, tuple[int, int]] = {}
    pos = head.find(b"\r\n") + 2
    while pos < len(head) - 2:  # bounded by the head's length
        end = head.find(b"\r\n", pos)
        name = head[pos:end].partition(b":")[0]
        key = name.lower()
        if key in (_NAME, _LENGTH):
            start = pos + len(name) + 2
            if key in spans or head[start - 1 : start] != b" " or head[start:end] != head[start:end].strip():
                return None
            spans[key] = (start, end)
        pos = end + 2
    return spans


def _body_shape(prefix: bytes, suffix: bytes, raw: bytes) -> tuple[tuple[bytes, bytes, bytes], bool, bytes] | None:
    """A read body's bytes around its id (``prefix``, ``suffix``) split again around its one quoted
    URI: the three parts, whether the URI comes first, and a probe body (id 7, the probe URI)."""
    quoted = b'"' + raw + b'"'
    if prefix.count(quoted) + suffix.count(quoted) != 1:
        return None
    if quoted in prefix:
        p, _, q = prefix.partition(quoted)
        return (p + b'"', b'"' + q, suffix), True, p + b'"' + _PROBE_URI + b'"' + q + b"7" + suffix
    q, _, r = suffix.partition(quoted)
    return (prefix, q + b'"', b'"' + r), False, prefix + b"7" + q + b'"' + _PROBE_URI + b'"' + r
