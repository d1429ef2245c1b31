"""Server-sent events as they come off the wire, for every client of a hub (the bridge, the front's
upstream; protocol/streams.py writes them). One parser: events end with a blank line, lines end
with CRLF, LF or CR, a ``data:`` field loses one leading space, other fields and comments are
skipped, and an event's data lines are joined with LF.
"""

from __future__ import annotations


class SseParser:
    """Bytes of an event stream in (any chunking), the data of each complete event out."""

    __slots__ = ("_after_cr", "_data", "_pending")

    def __init__(self) -> None:
        self._pending = b""
        self._after_cr = False
        self._data: list[bytes] = []

    def feed(self, chunk: bytes) -> list[bytes]:
        """The data of the events ``chunk`` completes (events without a data line give none)."""
        if not chunk:
            return []
        if self._after_cr and chunk[:1] == b"\n":
            chunk = chunk[1:]  # the second half of a CRLF split between two chunks
        text = self._pending + chunk
        self._after_cr = text[-1:] == b"\r"
        lines = text.replace(b"\r\n", b"\n").replace(b"\r", b"\n").split(b"\n")
        self._pending = lines.pop()
        out = []
        for line in lines:
            if not line:
                if self._data:
                    out.append(b"\n".join(self._data))
                    self._data = []
            elif line.startswith(b"data:"):
                value = line[5:]
                self._data.append(value[1:] if value[:1] == b" " else value)
        return out


def sse_data(raw: bytes) -> list[bytes]:
    """The data of each complete event in a whole body ``raw``."""
    return SseParser().feed(raw)
