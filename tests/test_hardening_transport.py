"""Issue #10, request side, over real sockets on 127.0.0.1: admission before the body, linear chunked
parsing, head/body deadlines, the connection cap, half-closed clients and abruptly dropped streams."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator

import psutil
import pytest
from test_http_transport import INIT, TOKEN, closed_by_peer, connect, read_response, request

from mcp_notebook.protocol.server import McpServer, ServerSettings
from mcp_notebook.protocol.wire_http11 import ChunkedBody
from mcp_notebook.providers.custom import CustomProvider, make_registration
from mcp_notebook.resources import Resources
from mcp_notebook.transport.server import HttpTransport

STATELESS_META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {},
}


@pytest.fixture
def server() -> Iterator[HttpTransport]:
    custom = CustomProvider()
    reg = make_registration(
        "test://hello", lambda: "hello", name="hello", title=None, description=None, mime_type=None, annotations=None
    )
    custom.register(reg)
    hub = Resources([custom])
    transport = HttpTransport(McpServer(hub, ServerSettings(token=TOKEN)), "127.0.0.1", 0, 2_000_000)
    transport.start()
    try:
        yield transport
    finally:
        transport.stop()
        hub.close()


def wait_for(predicate, seconds: float = 10.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.02)
    return predicate()


def closed_within(s: socket.socket, seconds: float) -> bool:
    """True when the server closes (FIN or RST) within ``seconds``; a timeout is False."""
    s.settimeout(seconds)
    try:
        while s.recv(4096):
            pass
        return True
    except ConnectionResetError:
        return True
    except TimeoutError:
        return False


def head(extra: str = "", token: bool = True) -> bytes:
    auth = f"Authorization: Bearer {TOKEN}\r\n" if token else ""
    return f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n{auth}Content-Type: application/json\r\n{extra}\r\n".encode()


# -- class 1: refused before any body-dependent work ---------------------------------------------
@pytest.mark.parametrize("method", [{}, [], 1])
def test_object_method_without_a_token_gets_401_and_with_one_400(server, method):
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": method}).encode()
    with connect(server) as s:
        s.sendall(head(f"Content-Length: {len(body)}\r\n", token=False) + body)
        assert read_response(s)[0] == 401
        s.sendall(request(body))
        status, _, reply = read_response(s)
        assert status == 400 and json.loads(reply)["error"]["code"] == -32600


def test_a_refused_request_is_answered_before_its_body_arrives(server):
    with connect(server) as s:
        s.sendall(head("Content-Length: 900000\r\n", token=False) + b'{"jsonrpc":')  # 899,989 bytes never sent
        status, headers, _ = read_response(s)
        assert status == 401 and headers.get("connection") == "close"
        assert closed_by_peer(s)


def test_a_refused_chunked_upload_is_answered_and_closed(server):
    with connect(server) as s:
        s.sendall(head("Transfer-Encoding: chunked\r\n", token=False))
        for _ in range(200):
            s.sendall(b"1\r\nx\r\n")
        status, _, _ = read_response(s)
        assert status == 401
        assert closed_within(s, 10)  # after a short linger, however long the client goes on


# -- class 5: incremental chunked bodies -----------------------------------------------------------
def test_chunked_decoder_consumes_every_byte_it_is_given():
    payload = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "ping", "pad": "y" * 3000}).encode()
    wire = b"".join(b"1\r\n%s\r\n" % payload[i : i + 1] for i in range(len(payload))) + b"0\r\nX-T: 1\r\n\r\n"
    decoder = ChunkedBody(10_000)
    buf = bytearray()
    for i in range(len(wire)):
        buf += wire[i : i + 1]
        del buf[: decoder.feed(buf)]
        assert len(buf) <= 8  # only an unfinished line stays: nothing is decoded twice
    assert decoder.done and bytes(decoder.body) == payload and not buf


def test_authenticated_upload_in_one_byte_chunks(server):
    init = json.dumps({**INIT, "params": {**INIT["params"], "clientInfo": {"name": "x" * 10_000, "version": "1"}}})
    raw = init.encode()
    with connect(server) as s:
        s.sendall(head("Transfer-Encoding: chunked\r\n"))
        for i in range(0, len(raw), 512):  # many small writes; each carries many 1-byte chunks
            s.sendall(b"".join(b"1\r\n%s\r\n" % raw[j : j + 1] for j in range(i, min(i + 512, len(raw)))))
        s.sendall(b"0\r\n\r\n")
        status, _, body = read_response(s)
        assert status == 200 and "result" in json.loads(body)


def test_a_body_in_too_many_tiny_chunks_is_refused(server):
    with connect(server) as s:
        s.sendall(head("Transfer-Encoding: chunked\r\n") + b"1\r\n \r\n" * (ChunkedBody.MAX_CHUNKS + 10))
        status, _, body = read_response(s)
        assert status == 400 and b"chunks" in body
        assert closed_by_peer(s)


def test_a_flood_of_blank_lines_before_a_request(server):
    with connect(server) as s:
        s.sendall(b"\r\n" * 30_000 + request(INIT))
        assert read_response(s)[0] == 200


# -- class 5: deadlines ----------------------------------------------------------------------------
def test_a_trickled_head_times_out_with_408(server):
    server.head_timeout = 0.5
    with connect(server) as s:
        s.sendall(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        s.settimeout(10)
        assert read_response(s)[0] == 408
        assert closed_within(s, 10)


def test_a_silent_connection_is_closed_after_the_head_deadline(server):
    server.head_timeout = 0.5
    with connect(server) as s:
        assert closed_within(s, 10)


def test_a_trickled_body_times_out_with_408(server):
    server.body_timeout = 0.5
    with connect(server) as s:
        s.sendall(head("Content-Length: 100\r\n") + b"{")
        s.settimeout(10)
        assert read_response(s)[0] == 408


def test_an_admitted_keep_alive_connection_keeps_its_long_idle_time(server):
    server.head_timeout = 0.3
    with connect(server) as s:
        s.sendall(request(INIT))
        assert read_response(s)[0] == 200
        time.sleep(1.0)  # longer than the head deadline: an admitted connection is not a slowloris
        s.sendall(request(INIT))
        assert read_response(s)[0] == 200


# -- class 5: the connection cap -------------------------------------------------------------------
def test_trickling_connections_at_the_cap_do_not_lock_out_a_real_client(server):
    server.max_connections = 20
    with connect(server) as streamer:  # an admitted client holding a stream must survive the flood
        streamer.sendall(request(INIT))
        sid = read_response(streamer)[1]["mcp-session-id"]
        streamer.sendall(
            f"GET /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {TOKEN}\r\n"
            f"Accept: text/event-stream\r\nMcp-Session-Id: {sid}\r\n\r\n".encode()
        )
        assert b"200" in streamer.recv(200)
        tricklers = []
        for _ in range(60):
            t = socket.create_connection(("127.0.0.1", server.port), timeout=5)
            t.sendall(b"POST /mcp HTTP/1.1\r\nHost: 12")
            tricklers.append(t)
        assert wait_for(lambda: len(server.connections) <= 20)
        assert sum(closed_within(t, 0.05) for t in tricklers) >= 40  # the oldest unadmitted ones made room
        for _ in range(3):
            with connect(server) as s:
                s.sendall(request(INIT))
                assert read_response(s)[0] == 200
        assert server.streams  # the stream was not dropped to make room
        server.mcp.resources.changed(["test://hello"])
        for t in tricklers:
            t.close()


# -- every complete request gets its answer ----------------------------------------------------
def test_a_client_that_half_closes_after_its_request_still_gets_the_reply(server):
    with connect(server) as s:
        s.sendall(request(INIT))
        sid = read_response(s)[1]["mcp-session-id"]
    read = {"jsonrpc": "2.0", "id": 2, "method": "resources/read", "params": {"uri": "test://hello"}}
    with connect(server) as s:  # resources/read is answered on the worker pool, after the EOF is seen
        s.sendall(request(read, extra=f"Mcp-Session-Id: {sid}\r\n"))
        s.shutdown(socket.SHUT_WR)
        status, _, body = read_response(s)
        assert status == 200 and json.loads(body)["result"]["contents"][0]["text"] == "hello"


# -- abrupt disconnects leak nothing -----------------------------------------------------------
def _open_get_stream(server: HttpTransport, sid: str) -> socket.socket:
    s = connect(server)
    s.sendall(
        f"GET /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {TOKEN}\r\n"
        f"Accept: text/event-stream\r\nMcp-Session-Id: {sid}\r\n\r\n".encode()
    )
    assert b"200" in s.recv(200)
    return s


def _open_listen(server: HttpTransport, i: int) -> socket.socket:
    params = {"notifications": {"resourceSubscriptions": ["test://hello"]}, "_meta": STATELESS_META}
    body = json.dumps({"jsonrpc": "2.0", "id": f"L{i}", "method": "subscriptions/listen", "params": params})
    s = connect(server)
    s.sendall(request(body.encode(), extra="MCP-Protocol-Version: 2026-07-28\r\nMcp-Method: subscriptions/listen\r\n"))
    assert b"200" in s.recv(200)
    return s


def _abort(s: socket.socket) -> None:
    s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")  # RST on close
    s.close()


def test_two_hundred_dropped_streams_leak_nothing(server):
    me = psutil.Process()
    with connect(server) as s:
        s.sendall(request(INIT))
        sid = read_response(s)[1]["mcp-session-id"]
    fds0, threads0 = me.num_fds(), threading.active_count()
    for i in range(200):
        kind = i % 4
        if kind == 0:
            _abort(_open_get_stream(server, sid))
        elif kind == 1:
            _open_get_stream(server, sid).close()
        elif kind == 2:
            _abort(_open_listen(server, i))
        else:
            s = connect(server)  # a request cut off mid-body
            s.sendall(head("Content-Length: 500\r\n") + b'{"jsonrpc"')
            _abort(s)
    assert wait_for(lambda: not server.connections and not server.streams and not server.driver.tasks)
    session = server.mcp.sessions()[0]
    assert wait_for(lambda: not session.streams and not server.mcp.listens())
    assert "test://hello" not in server.mcp.resources.watched()
    assert wait_for(lambda: me.num_fds() <= fds0 + 5)
    assert threading.active_count() <= threads0 + 4  # at most the request pool grew to its size


def test_a_stream_whose_client_half_closes_at_once_is_released_at_once(server):
    with connect(server) as s:
        s.sendall(request(INIT))
        sid = read_response(s)[1]["mcp-session-id"]
    for _ in range(5):
        s = connect(server)
        s.sendall(
            f"GET /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {TOKEN}\r\n"
            f"Accept: text/event-stream\r\nMcp-Session-Id: {sid}\r\n\r\n".encode()
        )
        s.shutdown(socket.SHUT_WR)  # the FIN may arrive before the stream's first byte is written
        assert closed_within(s, 5)  # not after two failed keepalive writes (30 s)
        s.close()
    assert wait_for(lambda: not server.streams and not server.connections, 5)
    assert not server.mcp.sessions()[0].streams


def test_a_listen_answered_after_the_client_half_closed_ends_with_what_it_has(server):
    """subscriptions/listen runs on the worker pool; the client's FIN can arrive before the stream exists."""
    params = {"notifications": {"resourceSubscriptions": ["test://hello"]}, "_meta": STATELESS_META}
    body = json.dumps({"jsonrpc": "2.0", "id": "L", "method": "subscriptions/listen", "params": params}).encode()
    for _ in range(5):
        s = connect(server)
        s.sendall(request(body, extra="MCP-Protocol-Version: 2026-07-28\r\nMcp-Method: subscriptions/listen\r\n"))
        s.shutdown(socket.SHUT_WR)
        s.settimeout(5)
        out = b""
        try:
            while chunk := s.recv(65536):
                out += chunk
        except TimeoutError:
            pytest.fail(f"the stream was kept open for a client that half-closed: {out[:300]!r}")
        s.close()
        assert out.startswith(b"HTTP/1.1 200") and b"subscriptions/acknowledged" in out
    assert wait_for(lambda: not server.streams and not server.mcp.listens(), 5)
