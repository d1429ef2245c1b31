"""Request heads admitted before, remembered by their bytes.

A client repeats its head byte for byte (only the body's id changes), and parsing and admission
(Host, Origin, token) are pure functions of those bytes and the server's settings: a head seen
before under the same settings object skips both. The memory is bounded (cleared when full) and
keeps only heads with a body of known length. Each head keeps the server's replay memo, opaque
here: the server alone knows what it means (protocol/fast_read.py, protocol/families.py).
"""

from __future__ import annotations

from ..protocol.wire_http11 import HEAD_END, BadRequest, RequestHead, parse_head

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
        self.keep_alive = proto.keep_alive and proto.is_http11
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
        known = self._heads[block] = AdmittedHead(block + HEAD_END, head.copy(), settings)
        return known

    def room(self) -> bool:
        """Whether a head may be adopted (the memory is not full)."""
        return len(self._heads) < HEADS_KEPT - 1

    def adopt(self, block: bytes, like: AdmittedHead, memo: object) -> None:
        """Remember ``block`` (a head with its blank line) as admitted like ``like``, with the replay
        memo ``memo``: the server answered a request with these bytes from ``like``'s memo (they
        differ only in values admission does not read). Never clears the memory."""
        if len(block) > HEAD_KEPT_BYTES or block[:-4] in self._heads:
            return
        try:
            parsed = parse_head(block[:-4])
        except BadRequest:
            return
        head = self._heads[block[:-4]] = AdmittedHead(block, parsed, like.settings)
        head.replay, head.seen = memo, True

    def __len__(self) -> int:
        return len(self._heads)


class ConnectionMemos:
    """One connection's memos of what it was sent (performance, not HTTP state: forgetting them
    changes no reply): the remembered head being read and the one sent last (the fast path's
    replay), and the server's head family learnt on this connection (protocol/families.py)."""

    __slots__ = ("admitted", "family", "family_head", "family_tries", "last_head")

    def __init__(self) -> None:
        self.admitted: AdmittedHead | None = None  # the remembered form of the head being read
        self.last_head: AdmittedHead | None = None  # the remembered head this connection sent last
        self.family: object | None = None  # the server's memo of requests like one head's (families.py)
        self.family_head: AdmittedHead | None = None  # ... the head it was learnt on
        self.family_tries = 0  # attempts at learning one (bounded per connection)
