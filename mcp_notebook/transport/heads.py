"""Request heads admitted before, remembered by their bytes.

A client repeats its head byte for byte (only the body's id changes), and parsing and admission
(Host, Origin, token) are pure functions of those bytes and the server's settings: a head seen
before under the same settings object skips both. The memory is bounded (cleared when full) and
keeps only heads with a body of known length.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from .http11 import RequestHead

HEADS_KEPT = 256  # admitted heads remembered per transport (cleared when full)
HEAD_KEPT_BYTES = 4096  # longer heads are not remembered


class AdmittedHead:
    """A head admitted under ``settings`` (``block``: its bytes with the blank line), the protocol's
    replay memo for requests sent with it, if any, and the encoded header lines of its replies."""

    __slots__ = ("block", "keep_alive", "proto", "replay", "reply_block", "reply_headers", "seen", "settings")

    def __init__(self, block: bytes, proto: RequestHead, settings: object):
        self.block = block
        self.proto = proto
        self.settings = settings
        self.keep_alive = proto.keep_alive and proto.version == "HTTP/1.1"
        self.replay: object | None = None
        self.seen = False  # a request was answered under this head (a replay is learnt on the second)
        self.reply_headers: dict[str, str] | None = None
        self.reply_block = b""


class AdmittedHeads:
    """The bounded memory of admitted heads of one transport."""

    __slots__ = ("_heads",)

    def __init__(self) -> None:
        self._heads: dict[bytes, AdmittedHead] = {}

    def get(self, block: bytes, settings: object) -> AdmittedHead | None:
        """The remembered head with these bytes (no blank line), if admitted under ``settings``."""
        known = self._heads.get(block)
        return known if known is not None and known.settings is settings else None

    def remember(self, block: bytes, head: RequestHead, settings: object) -> AdmittedHead | None:
        """Remember a head that passed admission under ``settings`` (None: not kept)."""
        if len(block) > HEAD_KEPT_BYTES or head.chunked:
            return None
        if len(self._heads) >= HEADS_KEPT:
            self._heads.clear()
        known = self._heads[block] = AdmittedHead(block + b"\r\n\r\n", head.copy(), settings)
        return known

    def room(self) -> bool:
        """Whether a head may be adopted (the memory is not full)."""
        return len(self._heads) < HEADS_KEPT - 1

    def adopt(self, head: AdmittedHead) -> None:
        """Remember a head made from a family (below); never clears the memory."""
        self._heads.setdefault(head.block[:-4], head)

    def __len__(self) -> int:
        return len(self._heads)


# A URI whose JSON string is the URI itself (no quote, backslash, control or non-ASCII character)
# and whose header value is too; not the "=?base64?...?=" form of Mcp-Name (it starts with "=").
_PLAIN_URI = re.compile(rb"[A-Za-z0-9:/._~!$&'()*+,;@%?#\[\]-][A-Za-z0-9:/._~!$&'()*+,;=@%?#\[\]-]*")
_PLAIN_BYTES = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789:/._~!$&'()*+,;=@%?#[]-"
_PROBE_URI = b"probe:family/0"
MAX_URI_BYTES = 8192  # protocol/params.py MAX_URI


class HeadFamily:
    """Heads equal to one admitted head but for the values of ``Mcp-Name`` and ``Content-Length``
    (a stateless-era client reading one URI after another), with the read body's shape around
    both its id and its URI: such a request is the learnt read with another id and another URI.

    ``parts`` are the head's bytes around the two values (the second and third start with CRLF,
    the third ends the head); ``body`` the body's bytes around the id and the URI, in order."""

    __slots__ = (
        "body",
        "body_lengths",
        "lengths",
        "parts",
        "reply_block",
        "reply_headers",
        "settings",
        "shape",
        "template",
        "uri_first_in_body",
        "uri_first_in_head",
    )

    def __init__(
        self,
        parts: tuple[bytes, bytes, bytes],
        uri_first_in_head: bool,
        body: tuple[bytes, bytes, bytes],
        uri_first_in_body: bool,
        head: AdmittedHead,
    ):
        self.parts = parts
        self.lengths = tuple(map(len, parts))
        self.uri_first_in_head = uri_first_in_head
        self.body = body
        self.body_lengths = tuple(map(len, body))
        self.uri_first_in_body = uri_first_in_body
        self.shape = head.replay  # the protocol's replay memo (fast_read.ReadShape) of the learnt read
        self.settings = head.settings
        self.template = head.proto
        self.reply_headers: dict[str, str] | None = None
        self.reply_block = b""

    def member(self, block: bytes, uri: str, length: int, memo: object) -> AdmittedHead:
        """The admitted head of a member (``block``: its head with the blank line) reading ``uri``
        with a body of ``length`` bytes, and ``memo``, its replay memo: later requests with these
        very head bytes are replays."""
        t = self.template
        fields = {**t.headers, "mcp-name": uri, "content-length": str(length)}
        head = AdmittedHead(block, RequestHead(t.method, t.path, t.version, fields), self.settings)
        head.replay, head.seen = memo, True
        return head

    def member_body(self, uri: str) -> tuple[bytes, bytes]:
        """A member's body around its id, for ``uri``."""
        p, q, r = self.body
        raw = uri.encode("ascii")
        return (p + raw + q, r) if self.uri_first_in_body else (p, q + raw + r)

    def match(self, data: bytes) -> tuple[str, bytes] | None:
        """(URI, id digits) when ``data`` is exactly one request of this family, else None."""
        a, b, c = self.parts
        la, lb, lc = self.lengths
        if not data.startswith(a):
            return None
        i = data.find(b"\r\n", la, la + MAX_URI_BYTES + 2)
        if i < 0 or not data.startswith(b, i):
            return None
        j = data.find(b"\r\n", i + lb, i + lb + MAX_URI_BYTES + 2)
        if j < 0 or not data.startswith(c, j):
            return None
        first, second = data[la:i], data[i + lb : j]
        uri, length = (first, second) if self.uri_first_in_head else (second, first)
        end = j + lc
        if not length.isdigit() or len(length) > 9 or int(length) != len(data) - end:
            return None
        if not uri or uri.translate(None, _PLAIN_BYTES) or uri[0] == 61:  # plain characters, no "=" first
            return None
        p, q, r = self.body
        lp, lq, lr = self.body_lengths
        lu = len(uri)
        if self.uri_first_in_body:  # p URI q ID r
            ok = data.startswith(p, end) and data.startswith(uri, end + lp) and data.startswith(q, end + lp + lu)
            start, stop = end + lp + lu + lq, len(data) - lr
        else:  # p ID q URI r
            stop = len(data) - lr - lu - lq
            ok = data.startswith(p, end) and data.startswith(q, stop) and data.startswith(uri, stop + lq)
            start = end + lp
        if not ok or not data.endswith(r) or stop <= start or stop - start > 15:
            return None
        digits = data[start:stop]
        if not digits.isdigit() or (digits[0] == 48 and stop - start > 1):
            return None  # a JSON integer: ASCII digits, no leading zero
        return uri.decode("ascii"), digits


def learn_family(
    head: AdmittedHead, uri: str, prefix: bytes, suffix: bytes, check: Callable[[bytes, bytes], bool]
) -> HeadFamily | None:
    """The family of an admitted keep-alive head whose read of ``uri`` was answered and learnt as
    ``head.replay`` (body ``prefix`` + id + ``suffix``); None when the head or body does not have
    exactly one plain place for each value. ``check(body, uri)`` must prove that ``body`` (another
    id and another URI in those places) is that read with only its id and URI changed."""
    block = head.block
    raw = uri.encode("ascii", "replace")
    if not head.keep_alive or head.replay is None:
        return None
    if _PLAIN_URI.fullmatch(raw) is None or len(raw) > MAX_URI_BYTES:
        return None
    spans = {}
    pos = block.find(b"\r\n") + 2
    while pos < len(block) - 2:  # bounded by the head's length
        end = block.find(b"\r\n", pos)
        name = block[pos:end].partition(b":")[0]
        key = name.lower()
        if key in (b"mcp-name", b"content-length"):
            start = pos + len(name) + 2
            if key in spans or block[start - 1 : start] != b" " or block[start:end] != block[start:end].strip():
                return None
            spans[key] = (start, end)
        pos = end + 2
    if len(spans) != 2 or block[slice(*spans[b"mcp-name"])] != raw:
        return None
    (s1, e1), (s2, e2) = sorted(spans.values())
    parts = (block[:s1], block[e1:s2], block[e2:])
    quoted = b'"' + raw + b'"'
    if prefix.count(quoted) + suffix.count(quoted) != 1:
        return None
    if quoted in prefix:
        p, _, q = prefix.partition(quoted)
        body, uri_first, probe = (p + b'"', b'"' + q, suffix), True, p + b'"' + _PROBE_URI + b'"' + q + b"7" + suffix
    else:
        q, _, r = suffix.partition(quoted)
        body, uri_first, probe = (prefix, q + b'"', b'"' + r), False, prefix + b"7" + q + b'"' + _PROBE_URI + b'"' + r
    if raw == _PROBE_URI or not check(probe, _PROBE_URI):
        return None
    return HeadFamily(parts, spans[b"mcp-name"][0] == s1, body, uri_first, head)
