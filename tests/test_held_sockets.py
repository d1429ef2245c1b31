"""Client sockets read and written with calls that keep the GIL (transport/held_stream.py), and the
loop's own transports beside them: which one serves where, and the same behaviour from both over
real sockets on 127.0.0.1 (a multi-MB reply sent in parts, a client leaving mid-reply, pipelined
requests, reading paused and resumed for a client racing ahead, a half-close)."""

from __future__ import annotations

import json
import socket
import struct
import sys
import threading
import time
from collections.abc import Iterator

import httpx
import pytest
from kernel_harness import Kernel
from test_http_transport import read_response

from mcp_notebook import portable
from mcp_notebook.protocol.server import McpServer, ServerSettings
from mcp_notebook.providers.custom import CustomProvider, make_registration
from mcp_notebook.resources import Resources
from mcp_notebook.transport import libc_socket
from mcp_notebook.transport.held_stream import HeldTransport
from mcp_notebook.transport.server import HttpTransport

TOKEN = "tok"
LIMIT = 100_000
BIG = 8_000_000  # characters of test://big: more than a loopback socket's buffers hold
HELD_HERE = sys.platform.startswith("linux") and not portable.ON
STATELESS = "2026-07-28"


class Gate:
    """test://gate answers once opened (a read that stays on the worker pool while a test needs)."""

    def __init__(self) -> None:
        self.opened = threading.Event()

    def read(self) -> str:
        self.opened.wait(20)
        return "through"


def _provider(gate: Gate) -> CustomProvider:
    custom = CustomProvider()
    for uri, fn in (("test://hello", lambda: "hello"), ("test://big", lambda: "x" * BIG), ("test://gate", gate.read)):
        reg = make_registration(uri, fn, name=uri[7:], title=None, description=None, mime_type=None, annotations=None)
        custom.register(reg)
    return custom


def _start(held: bool, gate: Gate) -> tuple[HttpTransport, Resources]:
    hub = Resources([_provider(gate)])
    settings = ServerSettings(token=TOKEN, max_result_chars=2 * BIG)
    transport = HttpTransport(McpServer(hub, settings), "127.0.0.1", 0, LIMIT, held_sockets=held)
    transport.start()
    return transport, hub


@pytest.fixture(params=["held, a cell running", "held, idle", "loop"])
def served(request: pytest.FixtureRequest) -> Iterator[tuple[HttpTransport, Gate]]:
    """The held transport with a cell running (libc calls that keep the GIL) and without one (the
    socket's own calls), and the loop's own transport."""
    held = request.param.startswith("held")
    if held and not HELD_HERE:
        pytest.skip("held sockets exist on Linux, off the portable path")
    gate = Gate()
    transport, hub = _start(held, gate)
    assert transport.held_sockets is held
    transport.switch.cell(request.param.endswith("running"))  # (interval 0: the interpreter is left alone)
    try:
        yield transport, gate
    finally:
        gate.opened.set()
        transport.stop()
        hub.close()


def read(uri: str, msg_id: int) -> bytes:
    body = json.dumps(
        {
            "jsonrpc": "2.0",
            "id": msg_id,
            "method": "resources/read",
            "params": {
                "uri": uri,
                "_meta": {
                    "io.modelcontextprotocol/protocolVersion": STATELESS,
                    "io.modelcontextprotocol/clientCapabilities": {},
                },
            },
        }
    ).encode()
    head = (
        f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {TOKEN}\r\n"
        f"Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n"
        f"MCP-Protocol-Version: {STATELESS}\r\nMcp-Method: resources/read\r\nMcp-Name: {uri}\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    )
    return head.encode() + body


def result(body: bytes) -> tuple[int, str]:
    msg = json.loads(body)
    return msg["id"], msg["result"]["contents"][0]["text"]


def wait_for(predicate, seconds: float = 10.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.01)
    return predicate()


def the_connection(server: HttpTransport):
    assert wait_for(lambda: len(server.connections) == 1)
    return next(iter(server.connections))


def buffered(conn) -> bool:
    """Part of a reply waits in the connection's transport for the socket."""
    return conn.io is not None and conn.io.get_write_buffer_size() > 0


def test_the_held_transport_serves_on_linux_and_the_loops_own_otherwise(served):
    server, _gate = served
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as s:
        s.sendall(read("test://hello", 1))
        status, _, body = read_response(s)
        assert status == 200 and result(body) == (1, "hello")
        io = the_connection(server).io
        assert isinstance(io, HeldTransport) is server.held_sockets
        assert io.get_extra_info("peername") == s.getsockname()


def test_the_portable_path_and_the_setting_use_the_loops_transports(monkeypatch):
    gate = Gate()
    transport, hub = _start(False, gate)  # held_sockets=False
    try:
        assert not transport.held_sockets
    finally:
        transport.stop()
        hub.close()
    monkeypatch.setattr(portable, "ON", True)
    assert libc_socket.load() is None
    transport, hub = _start(True, gate)
    try:
        assert not transport.held_sockets
        with socket.create_connection(("127.0.0.1", transport.port), timeout=10) as s:
            s.sendall(read("test://hello", 2))
            assert result(read_response(s)[2]) == (2, "hello")
            assert not isinstance(the_connection(transport).io, HeldTransport)
    finally:
        transport.stop()
        hub.close()


def test_a_multi_megabyte_reply_is_sent_in_parts_and_arrives_whole(served):
    server, _gate = served
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16 * 1024)  # a slow, small reader
        s.settimeout(20)
        s.connect(("127.0.0.1", server.port))
        s.sendall(read("test://big", 3) + read("test://hello", 4))
        conn = the_connection(server)
        # The reply did not fit: the rest waits in the transport's buffer for the socket.
        assert wait_for(lambda: buffered(conn))
        status, _, body = read_response(s)
        assert status == 200 and result(body) == (3, "x" * BIG)
        assert result(read_response(s)[2]) == (4, "hello")  # the pipelined request after it
        assert conn.io.get_write_buffer_size() == 0


def test_a_client_leaving_mid_reply_is_released_and_others_are_served(served):
    server, _gate = served
    for _ in range(3):
        s = socket.socket()
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16 * 1024)
        s.connect(("127.0.0.1", server.port))
        s.sendall(read("test://big", 5))
        assert s.recv(1000)
        assert wait_for(lambda: buffered(the_connection(server)))
        s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))  # a reset, mid-reply
        s.close()
        assert wait_for(lambda: not server.connections)
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as s:
        s.sendall(read("test://hello", 6))
        assert result(read_response(s)[2]) == (6, "hello")


def test_a_client_resetting_mid_request_is_released_at_once(served):
    """The reset arrives with the request's first part (one poll event): the connection still ends
    now, not at the body deadline (60 s)."""
    server, _gate = served
    part = read("test://hello", 9)
    for _ in range(20):
        s = socket.create_connection(("127.0.0.1", server.port), timeout=10)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        s.sendall(part[:-5])
        s.close()
    assert wait_for(lambda: not server.connections, 5)


def test_a_client_resetting_after_a_request_for_the_pool_is_released_once_answered(served):
    """A whole request handed to the worker pool is not followed by a second read (held path): the
    reset that came with it is found when its reply is written, and the connection ends then."""
    server, gate = served
    for i in range(10):
        s = socket.create_connection(("127.0.0.1", server.port), timeout=10)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        s.sendall(read("test://gate", i))
        s.close()
    gate.opened.set()
    assert wait_for(lambda: not server.connections and server.driver.in_pool == 0, 10)
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as s:
        s.sendall(read("test://hello", 99))
        assert result(read_response(s)[2]) == (99, "hello")


class CountingLibc(libc_socket.LibcSocket):
    """libc's calls that keep the GIL, each counted (the real calls: nothing is faked)."""

    def __init__(self, real: libc_socket.LibcSocket) -> None:
        self.calls = 0

        def counted(call):
            def call_counted(*args):
                self.calls += 1
                return call(*args)

            return call_counted

        super().__init__(counted(real.recv), counted(real.send), real.errno, real._prctl)


def test_the_held_transport_keeps_the_gil_while_the_pool_answers():
    """Between cells the socket's own calls serve (nobody waits for the GIL), but while the worker
    pool answers a request its thread waits for the GIL whenever ours lets go of it: the held path
    then reads and writes with the calls that keep it, as during a cell."""
    if not HELD_HERE:
        pytest.skip("held sockets exist on Linux, off the portable path")
    gate = Gate()
    hub = Resources([_provider(gate)])
    server = HttpTransport(McpServer(hub, ServerSettings(token=TOKEN)), "127.0.0.1", 0, LIMIT)
    libc = server._libc = CountingLibc(libc_socket.load())
    server.start()
    try:
        with socket.create_connection(("127.0.0.1", server.port), timeout=10) as s:
            s.sendall(read("test://hello", 1))
            assert result(read_response(s)[2]) == (1, "hello")
            assert libc.calls == 0  # idle: the socket's own calls
            with socket.create_connection(("127.0.0.1", server.port), timeout=10) as waiting:
                waiting.sendall(read("test://gate", 2))  # stays on the pool until the gate opens
                assert wait_for(lambda: server.driver.in_pool == 1)
                for i in range(3, 6):
                    s.sendall(read("test://hello", i))
                    assert result(read_response(s)[2]) == (i, "hello")
                assert libc.calls >= 3  # each read (and the writes of those answered inline) kept the GIL
                gate.opened.set()
                assert result(read_response(waiting)[2]) == (2, "through")
            # The pool's threads wait for the GIL on time too (timer slack 1 ns, as the hub thread's).
            workers = [t.native_id for t in threading.enumerate() if t.name.startswith("mcp-notebook-req")]
            assert workers
            for tid in workers:
                with open(f"/proc/{tid}/timerslack_ns") as f:
                    assert f.read().strip() == "1", tid
            assert wait_for(lambda: server.driver.in_pool == 0)
            before = libc.calls
            s.sendall(read("test://hello", 7))
            assert result(read_response(s)[2]) == (7, "hello")
            assert libc.calls == before  # nothing on the pool any more: the socket's own calls again
    finally:
        gate.opened.set()
        server.stop()
        hub.close()


def test_pipelined_requests_are_answered_in_order(served):
    server, _gate = served
    uris = ["test://hello", "test://gate", "test://hello"] * 10
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as s:
        _gate.opened.set()
        s.sendall(b"".join(read(uri, i) for i, uri in enumerate(uris)))
        got = [result(read_response(s)[2]) for _ in uris]
    assert got == [(i, "through" if uri == "test://gate" else "hello") for i, uri in enumerate(uris)]


def test_a_client_racing_ahead_is_paused_then_resumed(served):
    server, gate = served
    more = read("test://hello", 0)
    count = (2 * (65536 + LIMIT)) // len(more) + 1  # more than the connection buffers before pausing
    with socket.create_connection(("127.0.0.1", server.port), timeout=20) as s:
        s.sendall(read("test://gate", 1))  # answered on the worker pool once the gate opens
        conn = the_connection(server)
        sender = threading.Thread(target=s.sendall, args=(b"".join(read("test://hello", 2 + i) for i in range(count)),))
        sender.start()
        assert wait_for(lambda: conn.paused_reading)
        assert not conn.io.is_reading()
        gate.opened.set()
        assert result(read_response(s)[2]) == (1, "through")
        ids = [result(read_response(s)[2])[0] for _ in range(count)]
        sender.join(10)
        assert ids == list(range(2, 2 + count))
        assert not conn.paused_reading and conn.io.is_reading()


def test_a_half_closed_client_gets_its_replies_then_the_close(served):
    server, _gate = served
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as s:
        s.sendall(read("test://hello", 7) + read("test://big", 8))
        s.shutdown(socket.SHUT_WR)
        assert result(read_response(s)[2]) == (7, "hello")
        assert result(read_response(s)[2]) == (8, "x" * BIG)
        assert s.recv(10) == b""
    assert wait_for(lambda: not server.connections)


HUB_TIMER_SLACK = (
    "import mcp_notebook as _m, concurrent.futures as _cf, threading as _th\n_f = _cf.Future()\n"
    "_m.hub().transport.loop.call_soon_threadsafe(lambda: _f.set_result(_th.get_native_id()))\n"
    "print(open(f'/proc/{_f.result(5)}/timerslack_ns').read().strip(), open('/proc/self/timerslack_ns').read().strip())"
)


def test_a_kernel_serves_held_sockets_unless_told_not_to(tmp_path):
    """In a real kernel: reads during a busy pure-Python cell are answered on the held path (the
    libc calls, the cell running), and ``%config MCPHub.held_sockets = False`` serves the loop's."""
    if not HELD_HERE:
        pytest.skip("held sockets exist on Linux, off the portable path")
    for setting, held in (("", True), ("%config MCPHub.held_sockets = False", False)):
        k = Kernel(env={"JUPYTER_RUNTIME_DIR": str(tmp_path)})
        try:
            if setting:
                k.run(setting, check=True)
            info = k.load_hub()
            out = k.run("import mcp_notebook as _m; print(_m.hub().fast_paths()['held_sockets'])")
            assert out.stdout.strip() == str(held)
            # The hub thread's timer slack (its GIL waits end on time): 1 ns on the held path only,
            # the kernel's main thread keeps its own.
            hub_slack, main_slack = k.run(HUB_TIMER_SLACK).stdout.split()[-2:]
            assert hub_slack == ("1" if held else main_slack) and main_slack != "1", (hub_slack, main_slack)
            k.run("x = 41")
            spin = k.execute_nowait("import time as _t\n_d = _t.time() + 2\nwhile _t.time() < _d:\n    pass")
            with httpx.Client(timeout=30) as http:
                for i in range(20):
                    headers, body = _http_read("nb://vars/x", i, info["token"])
                    r = http.post(info["url"], content=body, headers=headers)
                    assert r.status_code == 200 and '"41"' in r.json()["result"]["contents"][0]["text"], r.text
            k.wait_idle(spin, timeout=30)
        finally:
            k.shutdown()


def _http_read(uri: str, msg_id: int, token: str) -> tuple[dict[str, str], bytes]:
    raw = read(uri, msg_id).replace(f"Bearer {TOKEN}".encode(), f"Bearer {token}".encode())
    head, _, body = raw.partition(b"\r\n\r\n")
    lines = head.decode().split("\r\n")[1:]
    headers = {k: v.strip() for k, _, v in (line.partition(":") for line in lines)}
    headers.pop("Content-Length"), headers.pop("Host")
    return headers, body
