"""HTTP/1.1 without I/O (the h11 model), both roles: the one place the package parses or writes
HTTP/1.1 bytes (issue #45). The server role (the hub's loopback carrier, transport/): bytes in,
request heads and bodies out, replies to bytes. The client role (both faces of the hub client,
hubclient/): a request to bytes, a reply's head parsed, its chunk lines read.

Nothing here reads a socket, awaits or knows asyncio: :class:`RequestReader` is fed what arrived
and says what it can tell (a head, a body, or "need more"), :func:`parse_head` and
:class:`ChunkedBody` parse, and the ``*_bytes`` helpers encode status and header lines. The
connection's state (transport/http11_state.py) owns the reader and says which step may come next;
the connection (transport/connection.py) drives both and decides what to do with a head (admit
it, refuse it). The fast paths ask here where a head ends (:func:`head_end`) and where a field's
value sits in a head's bytes (:func:`value_spans`).

What one MCP endpoint needs of HTTP/1.1: requests with a Content-Length or chunked body,
keep-alive (answered in order), ``Expect: 100-continue``, stray blank lines between requests,
size limits, and chunked event streams. Anything else is a :class:`BadRequest` (a plain 4xx and a
closed connection).
"""

from __future__ import annotations

import time
from email.utils import formatdate
from http import HTTPStatus

from ..lazy_re import LazyPatterns

MAX_HEAD_BYTES = 65536
CRLF = b"\r\n"  # the end of a line of a head (where a field's value ends)
HEAD_END = b"\r\n\r\n"  # the blank line that ends a head
VERSIONS = ("HTTP/1.1", "HTTP/1.0")
CONTINUE = b"HTTP/1.1 100 Continue\r\n\r\n"
LAST_CHUNK = b"0\r\n\r\n"
_HEXDIGITS = frozenset(b"0123456789abcdefABCDEF")
# Fields that must not appear twice with different values (RFC 9112 3.2, 6.3).
_SINGLE = frozenset({"host", "content-length"})
_TOKEN_CHARS = frozenset("!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")


class BadRequest(Exception):
    """The bytes are not an HTTP/1.1 request we serve; answered with ``status`` and a close."""

    def __init__(self, message: str, status: int = 400):
        super().__init__(message)
        self.status = status


class RequestHead:
    """A parsed request line and header fields (names lower-cased), with the body's framing."""

    __slots__ = ("chunked", "headers", "keep_alive", "length", "method", "path", "version")

    def __init__(self, method: str, path: str, version: str, headers: dict[str, str]):
        self.method = method
        self.path = path
        self.version = version
        self.headers = headers
        conn = headers.get("connection", "").lower()
        if version == "HTTP/1.1":
            self.keep_alive = "close" not in conn
        else:
            self.keep_alive = "keep-alive" in conn
        te = headers.get("transfer-encoding")
        self.chunked = te is not None
        if te is not None and te.strip().lower() != "chunked":
            raise BadRequest(f"unsupported Transfer-Encoding {te!r}")  # 400: no 5xx for client input
        if te is not None and "content-length" in headers:
            raise BadRequest("both Content-Length and Transfer-Encoding")  # RFC 9112 6.3: a smuggling sign
        raw = headers.get("content-length")
        if raw is None or self.chunked:
            self.length = 0
        elif raw.isdigit() and raw.isascii():
            self.length = int(raw)
        else:
            raise BadRequest("invalid Content-Length")

    @classmethod
    def unread(cls) -> RequestHead:
        """The head a refusal answers when no request could be read (HTTP/1.1, then close)."""
        return cls("POST", "", "HTTP/1.1", {"connection": "close"})

    @property
    def is_http11(self) -> bool:
        """HTTP/1.1 (kept alive by default, chunked replies) rather than 1.0."""
        return self.version == "HTTP/1.1"

    def copy(self) -> RequestHead:
        """The same head as a fresh object (a remembered head must not share ``keep_alive`` edits)."""
        return RequestHead(self.method, self.path, self.version, self.headers)

    @property
    def expects_continue(self) -> bool:
        return self.version == "HTTP/1.1" and self.headers.get("expect", "").lower() == "100-continue"


_NAME = "[!#$%&'*+\\-.^_`|~0-9A-Za-z]+"
_VALUE = "[^\\r]*(?:\\r(?!\\n)[^\\r]*)*"  # anything but CRLF (the unrolled form: linear time)
# Header lines as the field-by-field checks below accept them: a token, a colon, a value.
_FIELDS = f"{_NAME}:{_VALUE}(?:\\r\\n{_NAME}:{_VALUE})*"


def parse_head(block: bytes) -> RequestHead:
    """Request line and header fields (without the blank line); raises BadRequest.

    The field lines are checked in one regular-expression match and split in C; a name that comes
    twice takes the field-by-field path (conflicting framing fields are refused)."""
    text = block.decode("latin-1")  # latin-1 decodes every byte
    first, sep, rest = text.partition("\r\n")
    parts = first.split(" ")
    if len(parts) != 3 or parts[2] not in VERSIONS or not parts[0] or not set(parts[0]) <= _TOKEN_CHARS:
        raise BadRequest("malformed request line")
    if not sep:
        return RequestHead(parts[0], parts[1].partition("?")[0], parts[2], {})
    if _RE.fields.fullmatch(rest) is None:
        raise BadRequest("malformed header field")
    pairs = [line.partition(":") for line in rest.split("\r\n")]
    headers = {name.lower(): value.strip(" \t") for name, _, value in pairs}
    if len(headers) != len(pairs):  # a repeated name
        headers = _fields_one_by_one(pairs)
    return RequestHead(parts[0], parts[1].partition("?")[0], parts[2], headers)


def _fields_one_by_one(pairs: list[tuple[str, str, str]]) -> dict[str, str]:
    headers: dict[str, str] = {}
    for name, _, raw in pairs:
        key, value = name.lower(), raw.strip(" \t")
        if key in _SINGLE and key in headers and headers[key] != value:
            raise BadRequest(f"conflicting {name} fields")  # framing or target would be ambiguous
        if key == "transfer-encoding" and key in headers:
            raise BadRequest("repeated Transfer-Encoding")
        headers[key] = value
    return headers


# A complete chunk-size line: hex size, optional extensions (ignored), CRLF. Anything else takes the
# slow path, which also tells incomplete from malformed.
_CHUNK_LINE = rb"[ \t]*([0-9A-Fa-f]{1,32})[ \t]*(?:;[^\r\n]{0,1000})?\r\n"
_RE = LazyPatterns(fields=_FIELDS, chunk_line=_CHUNK_LINE)  # at the first request, or after loading


class ChunkedBody:
    """Incremental decoder of a chunked body: every byte is looked at once, whatever the chunking.

    ``feed(buf, pos)`` decodes from ``pos`` as far as the bytes go and returns the offset up to which
    it consumed them (the caller drops those); ``done`` tells when the last chunk and the trailer
    are in, ``body`` holds the data. A line (chunk size, trailer field) is scanned only from where the
    previous feed stopped, so a size line or a body trickled one byte at a time costs linear time.
    """

    __slots__ = ("_chunks", "_need", "_scanned", "_state", "_trailer", "body", "done", "limit")
    _SIZE, _DATA, _DATA_END, _TRAILER = range(4)
    MAX_SIZE_LINE = 1024
    # Real clients send chunks of kilobytes; a body in tens of thousands of tiny chunks is an attack
    # on the decoder's per-chunk cost, refused once it gets there (a bound on the work per request).
    MAX_CHUNKS = 16384

    def __init__(self, limit: int):
        self.limit = limit
        self.body = bytearray()
        self.done = False
        self._state = self._SIZE
        self._need = 0
        self._scanned = 0  # bytes of the current line already searched for its CRLF
        self._trailer = 0
        self._chunks = 0

    def feed(self, buf: bytearray | bytes, pos: int = 0) -> int:
        end = len(buf)
        while not self.done:
            state = self._state
            if state == self._SIZE and self._scanned == 0:
                taken = self._whole_chunk(buf, pos, end)
                if taken is not None:
                    pos = taken
                    continue
            if state == self._DATA:
                take = min(self._need, end - pos)
                if take <= 0:
                    break
                self.body += buf[pos : pos + take]
                self._need -= take
                pos += take
                if self._need == 0:
                    self._state = self._DATA_END
            elif state == self._DATA_END:
                if end - pos < 2:
                    break
                if buf[pos : pos + 2] != b"\r\n":
                    raise BadRequest("malformed chunk")
                pos += 2
                self._state = self._SIZE
            else:
                eol = buf.find(b"\r\n", pos + max(0, self._scanned - 1))
                if eol < 0:
                    self._line_pending(end - pos)
                    break
                self._line(bytes(buf[pos:eol]))
                pos = eol + 2
        return pos

    def _whole_chunk(self, buf: bytearray | bytes, pos: int, end: int) -> int | None:
        """The fast path: a whole size line at ``pos`` (and its data, when all there). Returns the
        offset after what it consumed, or None: the slow path reads the line."""
        m = _RE.chunk_line.match(buf, pos)
        if m is None:
            return None
        pos = m.end()
        size = int(m.group(1), 16)
        if not size or end - pos < size + 2:
            self._start_chunk(m.group(1))  # the last chunk, or one still arriving
            return pos
        self._chunks += 1
        if self._chunks > self.MAX_CHUNKS or len(self.body) + size > self.limit:
            self._start_chunk(m.group(1))  # raises the right error
        if buf[pos + size : pos + size + 2] != b"\r\n":
            raise BadRequest("malformed chunk")
        self.body += buf[pos : pos + size]
        return pos + size + 2

    def _line_pending(self, scanned: int) -> None:
        """A size line or trailer field without its CRLF yet: remember how far it was searched."""
        self._scanned = scanned
        if self._state == self._SIZE:
            if scanned > self.MAX_SIZE_LINE:
                raise BadRequest("malformed chunk size")
        elif scanned > MAX_HEAD_BYTES - self._trailer:
            raise BadRequest("trailer too large")

    def _line(self, line: bytes) -> None:
        """A complete size line or trailer field (without its CRLF)."""
        self._scanned = 0
        if self._state == self._SIZE:
            if len(line) > self.MAX_SIZE_LINE:
                raise BadRequest("malformed chunk size")
            self._start_chunk(line.split(b";", 1)[0].strip())
        elif not line:  # the blank line after the trailer fields (ignored)
            self.done = True
        else:
            self._trailer += len(line) + 2
            if self._trailer > MAX_HEAD_BYTES:
                raise BadRequest("trailer too large")

    def _start_chunk(self, size_text: bytes) -> int:
        """Begin the chunk announced by ``size_text`` (hex digits); returns its size."""
        if not size_text or not set(size_text) <= _HEXDIGITS:
            raise BadRequest("malformed chunk size")
        size = int(size_text, 16)
        if size == 0:
            self._state = self._TRAILER
            return 0
        if len(self.body) + size > self.limit:
            raise BadRequest("body too large", 413)
        self._chunks += 1
        if self._chunks > self.MAX_CHUNKS:
            raise BadRequest(f"more than {self.MAX_CHUNKS} chunks in one body")
        self._need = size
        self._state = self._DATA
        return size


class RequestReader:
    """Bytes of one connection in, requests out, in order; never blocks, never writes.

    ``buf`` holds what arrived and was not consumed (the same bytearray for the reader's life, so
    a caller may keep a reference). A request is read in two steps because the caller decides
    between them: :meth:`next_head` gives a complete head's bytes, the caller parses it (or knows
    it), then either :meth:`expect_body` (admitted) or :meth:`skip_body` (refused); :meth:`next_body`
    gives the body once complete. Reading costs time linear in the bytes received: the head is
    searched only past what was searched before, a chunked body is decoded incrementally. Which
    step may come next is the connection's state (http11_state.py), which owns the reader.
    """

    __slots__ = ("_chunks", "_continued", "_scanned", "buf", "head", "max_body")

    def __init__(self, max_body: int):
        self.max_body = max_body
        self.buf = bytearray()
        self.head: RequestHead | None = None  # the head whose body is being read
        self._chunks: ChunkedBody | None = None
        self._scanned = 0
        self._continued = False

    def next_head(self) -> bytes | None:
        """The bytes of the next complete head (without its blank line), consumed; None: not yet."""
        buf = self.buf
        if buf and buf[0] in (13, 10):  # stray blank lines (CR, LF) between requests are allowed
            del buf[: len(buf) - len(buf.lstrip(b"\r\n"))]
            self._scanned = 0
        end = buf.find(b"\r\n\r\n", max(0, self._scanned - 3))
        if end < 0:
            self._scanned = len(buf)
            if len(buf) > MAX_HEAD_BYTES:
                raise BadRequest("request head too large", 431)
            return None
        if end > MAX_HEAD_BYTES:
            raise BadRequest("request head too large", 431)
        block = bytes(buf[:end])
        del buf[: end + 4]
        self._scanned = 0
        self._continued = False
        return block

    def expect_body(self, head: RequestHead) -> None:
        """``head`` was admitted: its body is read next (413 when it announces more than the limit)."""
        self.head = head
        if head.chunked:
            self._chunks = ChunkedBody(self.max_body)
        elif head.length > self.max_body:
            raise BadRequest("body too large", 413)

    def next_body(self) -> bytes | None:
        """The body of the admitted head, consumed (the head is done); None: not complete yet."""
        head, buf = self.head, self.buf
        assert head is not None
        if head.chunked:
            chunks = self._chunks
            assert chunks is not None
            del buf[: chunks.feed(buf)]
            if not chunks.done:
                return None
            body = bytes(chunks.body)
            self._chunks = None
        else:
            if len(buf) < head.length:
                return None
            body = bytes(buf[: head.length])
            del buf[: head.length]
        self.head = None
        return body

    def send_continue(self) -> bool:
        """True once per head whose body is awaited under ``Expect: 100-continue``."""
        head = self.head
        if self._continued or head is None or not head.expects_continue:
            return False
        self._continued = True
        return True

    def skip_body(self, head: RequestHead) -> int:
        """``head`` was refused: drop its body. Returns 0 when all of it was here (the connection
        may go on), else how many bytes are still to come (-1: unknown, chunked); the buffer is
        emptied then."""
        if not head.chunked and len(self.buf) >= head.length:
            del self.buf[: head.length]
            return 0
        left = -1 if head.chunked else head.length - len(self.buf)
        self.buf.clear()
        return left

    def reset(self) -> None:
        """Forget everything (after a BadRequest: the connection closes)."""
        self.head = None
        self._chunks = None
        self.buf.clear()


def reason(status: int) -> str:
    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return "Unknown"


class Date:
    """The Date header line, formatted once per second."""

    second = -1
    line = b""

    @classmethod
    def now(cls) -> bytes:
        second = int(time.time())
        if second != cls.second:
            cls.line = b"Date: " + formatdate(second, usegmt=True).encode() + b"\r\n"
            cls.second = second
        return cls.line


_STATUS_LINES: dict[int, bytes] = {}
_HEADER_BLOCKS: dict[tuple[tuple[str, str], ...], bytes] = {}


def status_line(status: int) -> bytes:
    line = _STATUS_LINES.get(status)
    if line is None:
        line = _STATUS_LINES[status] = b"HTTP/1.1 %d %s\r\n" % (status, reason(status).encode())
    return line


def header_lines(headers: dict[str, str]) -> bytes:
    """A reply's own header lines (plus Cache-Control), encoded once per distinct set; a value
    holding CR or LF is dropped (no header injection)."""
    key = tuple(headers.items())
    block = _HEADER_BLOCKS.get(key)
    if block is None:
        lines = [b"Cache-Control: no-store\r\n"]
        for name, value in key:
            if "\r" in value or "\n" in value:
                continue
            lines.append(f"{name}: {value}\r\n".encode("latin-1", "replace"))
        block = b"".join(lines)
        if len(_HEADER_BLOCKS) >= 256:
            _HEADER_BLOCKS.clear()
        _HEADER_BLOCKS[key] = block
    return block


def reply_head(status: int, headers: dict[str, str], *, keep: bool, version: str) -> list[bytes]:
    """Status line, Date and header lines of a reply to a request of ``version``, with the
    Connection field that says whether the connection stays open (no blank line yet)."""
    out = [status_line(status), Date.now(), header_lines(headers)]
    if not keep:
        out.append(b"Connection: close\r\n")
    elif version == "HTTP/1.0":
        out.append(b"Connection: keep-alive\r\n")
    return out


def reply_bytes(status: int, headers: dict[str, str], body: bytes, *, keep: bool, head: RequestHead) -> bytes:
    """A whole reply with a Content-Length body (none for 204, 304 or a HEAD request)."""
    out = reply_head(status, headers, keep=keep, version=head.version)
    if status in (204, 304):  # no body, no Content-Length
        body = b""
        out.append(b"\r\n")
    else:
        out.append(b"Content-Length: %d\r\n\r\n" % len(body))
    if head.method != "HEAD":
        out.append(body)
    return b"".join(out)


def stream_head_bytes(status: int, headers: dict[str, str], *, keep: bool, head: RequestHead) -> bytes:
    """The head of an event-stream reply: chunked on HTTP/1.1, delimited by the close on 1.0."""
    out = reply_head(status, headers, keep=keep, version=head.version)
    out.append(b"Content-Type: text/event-stream\r\nX-Accel-Buffering: no\r\n")
    out.append(b"Transfer-Encoding: chunked\r\n\r\n" if head.version == "HTTP/1.1" else b"\r\n")
    return b"".join(out)


def chunk_bytes(data: bytes, chunked: bool) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data) if chunked else data


def head_end(data: bytes | bytearray) -> int:
    """Where the head in ``data`` ends (the offset of its blank line), or -1: not all here yet."""
    return data.find(HEAD_END)


def value_spans(head: bytes, names: tuple[bytes, ...]) -> dict[bytes, tuple[int, int]] | None:
    """Where the values of the fields ``names`` (lower-case) sit in a head's bytes, each present
    once, after one space and with no space around it; None when one comes twice or is written
    otherwise (the fast paths then take the usual one)."""
    spans: dict[bytes, tuple[int, int]] = {}
    pos = head.find(b"\r\n") + 2
    while pos < len(head) - 2:  # bounded by the head's length
        end = head.find(b"\r\n", pos)
        if end < 0:
            end = len(head)
        name = head[pos:end].partition(b":")[0]
        key = name.lower()
        if key in names:
            start = pos + len(name) + 2
            if key in spans or head[start - 1 : start] != b" " or head[start:end] != head[start:end].strip():
                return None
            spans[key] = (start, end)
        pos = end + 2
    return spans


def whole_reply_bytes(status: int, header_block: bytes, body: bytes) -> bytes:
    """A kept-alive reply with a Content-Length body, its header lines encoded already (a replay)."""
    if status == 200:
        return REPLY_200 % (Date.now(), header_block, len(body), body)
    return REPLY_ANY % (status_line(status), Date.now(), header_block, len(body), body)


# The same as formats, for a hot path that fills them in itself (no call): Date, header lines,
# the body's length, the body (REPLY_ANY: the status line first).
REPLY_200 = b"HTTP/1.1 200 OK\r\n%s%sContent-Length: %d\r\n\r\n%s"
REPLY_ANY = b"%s%s%sContent-Length: %d\r\n\r\n%s"


# == the client role =============================================================================


class BadResponse(ValueError):
    """The bytes are not an HTTP/1.x reply."""


def request_bytes(method: str, path: str, headers: dict[str, str], body: bytes | None) -> bytes:
    """A request's head and body; a header value holding CR or LF is dropped (no injection)."""
    lines = [f"{method} {path} HTTP/1.1"]
    for name, value in headers.items():
        if "\r" in value or "\n" in value:
            continue
        lines.append(f"{name}: {value}")
    if body is not None:
        lines.append(f"Content-Length: {len(body)}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1", "replace") + (body or b"")


class ResponseHead:
    """A reply's status line and header fields (as sent, in order), with its body's framing."""

    __slots__ = ("headers", "reason", "status", "version")

    def __init__(self, status: int, reason: str, headers: list[tuple[str, str]], version: str = "HTTP/1.1"):
        self.status = status
        self.reason = reason
        self.headers = headers
        self.version = version

    def header(self, name: str) -> str | None:
        name = name.lower()
        for key, value in self.headers:
            if key.lower() == name:
                return value
        return None

    @property
    def chunked(self) -> bool:
        return "chunked" in (self.header("transfer-encoding") or "").lower()

    @property
    def length(self) -> int | None:
        """The Content-Length (None: chunked, or the body ends with the connection)."""
        raw = self.header("content-length")
        if raw is None or self.chunked:
            return None
        try:
            return max(0, int(raw))
        except ValueError:
            return None

    @property
    def bodiless(self) -> bool:
        return self.status in (204, 304) or self.status < 200

    @property
    def closes(self) -> bool:
        """The connection ends after this reply (it says so, or its body ends with the connection)."""
        conn = (self.header("connection") or "").lower()
        if "close" in conn or (self.version != "HTTP/1.1" and "keep-alive" not in conn):
            return True
        return not self.bodiless and not self.chunked and self.length is None


def parse_response_head(block: bytes) -> ResponseHead:
    """A reply's status line and fields (``block`` without its blank line); raises BadResponse."""
    lines = block.decode("latin-1").split("\r\n")
    version, _, rest = lines[0].partition(" ")
    if not version.startswith("HTTP/1."):
        raise BadResponse(f"not an HTTP/1.x status line: {lines[0][:80]!r}")
    code, _, phrase = rest.partition(" ")
    if not (code.isdigit() and len(code) == 3):
        raise BadResponse(f"not an HTTP/1.x status line: {lines[0][:80]!r}")
    headers = []
    for line in lines[1:]:
        if not line:
            continue
        name, sep, value = line.partition(":")
        if not sep:
            raise BadResponse(f"malformed header line {line[:80]!r}")
        headers.append((name.strip(), value.strip()))
    return ResponseHead(int(code), phrase.strip(), headers, version)


def chunk_size(line: bytes) -> int:
    """The size a reply's chunk-size line announces (extensions ignored); raises BadResponse."""
    text = line.split(b";", 1)[0].strip()
    if not text or not set(text) <= _HEXDIGITS or len(text) > 16:
        raise BadResponse("malformed chunk size")
    return int(text, 16)
