"""The HTTP/1.1 layer over real sockets on 127.0.0.1: framing, limits, streams, garbage, shutdown."""

from __future__ import annotations

import json
import random
import socket
import time
from collections.abc import Iterator

import pytest

from mcp_notebook.protocol.server import McpServer, ServerSettings
from mcp_notebook.protocol.wire_http11 import BadRequest, ChunkedBody, RequestReader, parse_head
from mcp_notebook.providers.custom import CustomProvider, make_registration
from mcp_notebook.resources import Resources
from mcp_notebook.transport.server import HttpTransport

TOKEN = "tok"
LIMIT = 10_000


def hello_provider(cls: type[CustomProvider] = CustomProvider) -> CustomProvider:
    """A custom provider serving one resource, test://hello (the transport tests' server)."""
    custom = cls()
    custom.register(
        make_registration(
            "test://hello",
            lambda: "hello",
            name="hello",
            title=None,
            description=None,
            mime_type=None,
            annotations=None,
        )
    )
    return custom


@pytest.fixture
def server() -> Iterator[HttpTransport]:
    hub = Resources([hello_provider()])
    transport = HttpTransport(McpServer(hub, ServerSettings(token=TOKEN)), "127.0.0.1", 0, LIMIT)
    transport.start()
    try:
        yield transport
    finally:
        transport.stop()
        hub.close()


def connect(server: HttpTransport) -> socket.socket:
    s = socket.create_connection(("127.0.0.1", server.port), timeout=5)
    _leftover.pop(s.fileno(), None)
    return s


def request(body: dict | bytes, *, extra: str = "", version: str = "HTTP/1.1", path: str = "/mcp") -> bytes:
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    head = (
        f"POST {path} {version}\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {TOKEN}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(raw)}\r\n{extra}\r\n"
    )
    return head.encode() + raw


INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-11-25", "capabilities": {}},
}


_leftover: dict[int, bytes] = {}


def read_response(s: socket.socket) -> tuple[int, dict[str, str], bytes]:
    """One response with a Content-Length body; bytes of later responses are kept for the next call."""
    data = _leftover.pop(s.fileno(), b"")
    while b"\r\n\r\n" not in data:
        chunk = s.recv(65536)
        if not chunk:
            raise ConnectionError(f"closed before a full head: {data!r}")
        data += chunk
    head, _, rest = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split(" ")[1])
    headers = {k.lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:])}
    length = int(headers.get("content-length", "0"))
    while len(rest) < length:
        chunk = s.recv(65536)
        if not chunk:
            break
        rest += chunk
    _leftover[s.fileno()] = rest[length:]
    return status, headers, rest[:length]


def closed_by_peer(s: socket.socket) -> bool:
    try:
        return s.recv(1) == b""
    except (ConnectionResetError, TimeoutError):
        return True


def test_keep_alive_and_pipelining(server):
    with connect(server) as s:
        s.sendall(request(INIT))
        status, headers, body = read_response(s)
        assert status == 200 and json.loads(body)["result"]["protocolVersion"] == "2025-11-25"
        sid = headers["mcp-session-id"]
        ping = {"jsonrpc": "2.0", "id": 2, "method": "ping"}
        s.sendall(request(ping, extra=f"Mcp-Session-Id: {sid}\r\n") * 3)  # three pipelined requests
        for _ in range(3):
            status, _, body = read_response(s)
            assert status == 200 and json.loads(body) == {"jsonrpc": "2.0", "id": 2, "result": {}}


def test_chunked_body_and_100_continue(server):
    raw = json.dumps(INIT).encode()
    head = (
        "POST /mcp HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer tok\r\nContent-Type: application/json\r\n"
        "Transfer-Encoding: chunked\r\nExpect: 100-continue\r\n\r\n"
    )
    with connect(server) as s:
        s.sendall(head.encode())
        assert s.recv(100).startswith(b"HTTP/1.1 100 Continue")
        half = len(raw) // 2
        s.sendall(b"%x\r\n%s\r\n%x;ext=1\r\n%s\r\n0\r\n\r\n" % (half, raw[:half], len(raw) - half, raw[half:]))
        status, _, body = read_response(s)
        assert status == 200 and "result" in json.loads(body)


def test_http10_closes_after_the_reply(server):
    with connect(server) as s:
        s.sendall(request(INIT, version="HTTP/1.0"))
        status, headers, _ = read_response(s)
        assert status == 200 and headers.get("connection") == "close"
        assert closed_by_peer(s)


@pytest.mark.parametrize(
    ("raw", "status"),
    [
        (b"GARBAGE\r\n\r\n", 400),
        (b"POST /mcp HTTP/9.9\r\nHost: x\r\n\r\n", 400),
        (b"POST /mcp HTTP/1.1\r\n folded: header\r\n\r\n", 400),
        (b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: -5\r\n\r\n", 400),
        (b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 1e3\r\n\r\n", 400),
        (b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: gzip\r\n\r\n", 400),
        (
            b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer tok\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
            400,
        ),
        (b"POST /mcp HTTP/1.1\r\nX-Big: " + b"a" * 70_000 + b"\r\n\r\n", 431),
        (b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer tok\r\nContent-Length: 10001\r\n\r\n", 413),
        (
            b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer tok\r\nTransfer-Encoding: chunked\r\n\r\n3000\r\n"
            + b"x" * 12288
            + b"\r\n",
            413,
        ),
    ],
)
def test_malformed_requests_get_a_status_and_a_close(server, raw, status):
    with connect(server) as s:
        s.sendall(raw)
        got, _, body = read_response(s)
        assert got == status
        if status == 413:
            assert json.loads(body)["error"]["code"] == -32600
        assert closed_by_peer(s)
    with connect(server) as s:  # and the server goes on serving
        s.sendall(request(INIT))
        assert read_response(s)[0] == 200


def test_unknown_path_is_404(server):
    with connect(server) as s:
        s.sendall(request(INIT, path="/other"))
        assert read_response(s)[0] == 404


def test_half_sent_requests_do_not_hurt(server):
    sockets = []
    for _ in range(20):
        s = connect(server)
        s.sendall(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 100\r\n\r\n{")  # never finished
        sockets.append(s)
    with connect(server) as s:
        s.sendall(request(INIT))
        assert read_response(s)[0] == 200
    for s in sockets:
        s.close()


def test_get_stream_delivers_and_releases(server):
    with connect(server) as s:
        s.sendall(request(INIT))
        sid = read_response(s)[1]["mcp-session-id"]
        sub = {"jsonrpc": "2.0", "id": 2, "method": "resources/subscribe", "params": {"uri": "test://hello"}}
        s.sendall(request(sub, extra=f"Mcp-Session-Id: {sid}\r\n"))
        assert read_response(s)[0] == 200
    stream = connect(server)
    stream.sendall(
        f"GET /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {TOKEN}\r\nAccept: text/event-stream\r\n"
        f"Mcp-Session-Id: {sid}\r\n\r\n".encode()
    )
    data = b""
    deadline = time.monotonic() + 5
    while b"\r\n\r\n" not in data and time.monotonic() < deadline:
        data += stream.recv(4096)
    assert b"text/event-stream" in data and b"chunked" in data.lower()
    server.mcp.resources.changed(["test://hello"])
    while b"resources/updated" not in data and time.monotonic() < deadline:
        data += stream.recv(4096)
    assert b'"uri":"test://hello"' in data
    stream.close()
    deadline = time.monotonic() + 5
    while server.streams and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not server.streams


def test_seeded_garbage_never_stops_the_server(server):
    rng = random.Random(20261122)
    valid = request(INIT)
    for _ in range(150):
        raw = bytearray(valid)
        for _ in range(rng.randint(1, 8)):
            op = rng.random()
            pos = rng.randrange(len(raw))
            if op < 0.4:
                raw[pos] = rng.randrange(256)
            elif op < 0.7:
                del raw[pos : pos + rng.randint(1, 20)]
            else:
                raw[pos:pos] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 20)))
        with connect(server) as s:
            s.settimeout(1)
            s.sendall(bytes(raw))
            s.shutdown(socket.SHUT_WR)
            try:
                first = s.recv(16)
            except (TimeoutError, ConnectionResetError):
                first = b""
            assert first == b"" or first.startswith(b"HTTP/1.1 "), first
    with connect(server) as s:
        s.sendall(valid)
        assert read_response(s)[0] == 200


def test_parsers_raise_only_bad_request():
    rng = random.Random(7)
    for _ in range(2000):
        blob = bytes(rng.randrange(256) for _ in range(rng.randint(0, 200)))
        for parse in (lambda b: parse_head(b), lambda b: ChunkedBody(1000).feed(b)):
            try:
                parse(blob)
            except BadRequest:
                pass


def test_stop_with_open_connections_and_streams_is_prompt():
    hub = Resources([CustomProvider()])
    transport = HttpTransport(McpServer(hub, ServerSettings(token=TOKEN)), "127.0.0.1", 0, LIMIT)
    transport.start()
    s = connect(transport)
    s.sendall(request(INIT))
    sid = read_response(s)[1]["mcp-session-id"]
    s.sendall(
        f"GET /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {TOKEN}\r\nAccept: text/event-stream\r\n"
        f"Mcp-Session-Id: {sid}\r\n\r\n".encode()
    )
    idle = connect(transport)
    time.sleep(0.2)
    started = time.monotonic()
    transport.stop()
    assert not transport.alive and time.monotonic() - started < 5
    assert closed_by_peer(idle)
    s.close()
    idle.close()
    hub.close()


def _framed(extra: str, body: bytes) -> bytes:
    return (
        f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {TOKEN}\r\n"
        f"Content-Type: application/json\r\n{extra}\r\n"
    ).encode() + body


_INIT_RAW = json.dumps(INIT).encode()


@pytest.mark.parametrize(
    "raw",
    [
        # two different lengths: which one frames the body is ambiguous (request smuggling)
        _framed(f"Content-Length: 5\r\nContent-Length: {len(_INIT_RAW)}\r\n", _INIT_RAW),
        # both a length and chunked framing
        _framed(
            f"Content-Length: {len(_INIT_RAW) + 10}\r\nTransfer-Encoding: chunked\r\n",
            b"%x\r\n%s\r\n0\r\n\r\n" % (len(_INIT_RAW), _INIT_RAW),
        ),
        # chunked named twice (folded by an intermediary, it would read "chunked, chunked")
        _framed(
            "Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n",
            b"%x\r\n%s\r\n0\r\n\r\n" % (len(_INIT_RAW), _INIT_RAW),
        ),
        # a chunk size is HEXDIG only; int(..., 16) would also take a 0x prefix
        _framed("Transfer-Encoding: chunked\r\n", b"0x%x\r\n%s\r\n0\r\n\r\n" % (len(_INIT_RAW), _INIT_RAW)),
        # more than one Host field (RFC 9112 3.2: 400)
        _framed(f"Host: evil.example\r\nContent-Length: {len(_INIT_RAW)}\r\n", _INIT_RAW),
    ],
    ids=["two-lengths", "length-and-chunked", "chunked-twice", "hex-prefix", "two-hosts"],
)
def test_ambiguous_framing_is_rejected_and_closed(server, raw):
    with connect(server) as s:
        s.sendall(raw)
        status, _, _ = read_response(s)
        assert status == 400
        assert closed_by_peer(s)
    assert not server.mcp.sessions()


def test_repeated_identical_content_length_is_accepted(server):
    with connect(server) as s:
        s.sendall(_framed(f"Content-Length: {len(_INIT_RAW)}\r\n" * 2, _INIT_RAW))
        assert read_response(s)[0] == 200


def test_the_reader_skips_a_refused_body():
    """Sans-IO: a refused head's body is skipped when all here, else counted as still to come
    (the connection's state drops it as it arrives: tests/test_http11_state.py)."""
    reader = RequestReader(1000)
    reader.buf += b"POST /mcp HTTP/1.1\r\nContent-Length: 10\r\n\r\n0123"
    head = parse_head(bytes(reader.next_head() or b""))
    assert reader.skip_body(head) == 6 and not reader.buf
    chunked = RequestReader(1000)
    chunked.buf += b"POST /mcp HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nab"
    head = parse_head(bytes(chunked.next_head() or b""))
    assert chunked.skip_body(head) == -1 and not chunked.buf  # unknown length: the linger deadline decides
    whole = RequestReader(1000)
    whole.buf += b"POST /mcp HTTP/1.1\r\nContent-Length: 2\r\n\r\nabGET"
    head = parse_head(bytes(whole.next_head() or b""))
    assert whole.skip_body(head) == 0 and bytes(whole.buf) == b"GET"
