"""The request path's second cut: busy polling after replies, one deadline sweep, cached heads and headers.

Over real sockets on 127.0.0.1 against a transport in this process, and in a real kernel for the
switch that turns polling off while a cell runs.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator

import httpx
import pytest
from kernel_harness import Kernel
from test_http_transport import hello_provider

from mcp_notebook.protocol import jsonrpc as rpc
from mcp_notebook.protocol.server import McpServer, ServerSettings
from mcp_notebook.resources import Resources
from mcp_notebook.transport.server import HttpTransport

TOKEN = "tok"


@pytest.fixture(params=["uvloop", "asyncio"])
def server(request: pytest.FixtureRequest) -> Iterator[HttpTransport]:
    hub = Resources([hello_provider()])
    transport = HttpTransport(
        McpServer(hub, ServerSettings(token=TOKEN)), "127.0.0.1", 0, 100_000, loop_kind=request.param
    )
    transport.start()
    assert type(transport._loop).__module__.startswith(request.param)  # the loop asked for
    try:
        yield transport
    finally:
        transport.stop()
        hub.close()


def ping(msg_id: int, token: str = TOKEN) -> bytes:
    body = json.dumps(
        {
            "jsonrpc": "2.0",
            "id": msg_id,
            "method": "server/discover",
            "params": {
                "_meta": {
                    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                    "io.modelcontextprotocol/clientCapabilities": {},
                }
            },
        }
    ).encode()
    head = (
        f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {token}\r\nContent-Type: application/json\r\n"
        f"MCP-Protocol-Version: 2026-07-28\r\nMcp-Method: server/discover\r\nContent-Length: {len(body)}\r\n\r\n"
    )
    return head.encode() + body


_LEFT: dict[int, bytes] = {}


def reply(s: socket.socket) -> tuple[int, bytes]:
    """One response (status, body); bytes of a following response are kept for the next call."""
    data = _LEFT.pop(s.fileno(), b"")
    while b"\r\n\r\n" not in data:
        chunk = s.recv(65536)
        assert chunk, data
        data += chunk
    head, _, rest = data.partition(b"\r\n\r\n")
    fields = (line.partition(b":") for line in head.split(b"\r\n"))
    length = int(next(v for k, _, v in fields if k.lower() == b"content-length"))
    while len(rest) < length:
        rest += s.recv(65536)
    _LEFT[s.fileno()] = rest[length:]
    return int(head.split(b" ")[1]), rest[:length]


def spins_after(server: HttpTransport, seconds: float) -> int:
    before = server.busy_poll.spins
    time.sleep(seconds)
    return server.busy_poll.spins - before


def test_the_loop_polls_briefly_after_a_reply_and_never_when_idle(server):
    server.busy_poll.window = 0.05  # long enough to observe from another thread
    assert spins_after(server, 0.2) == 0  # nothing asked: the loop sleeps
    with socket.create_connection(("127.0.0.1", server.port), timeout=5) as s:
        s.sendall(ping(1))
        assert reply(s)[0] == 200
        time.sleep(0.2)
        assert server.busy_poll.spins > 0  # it polled after the reply ...
        assert spins_after(server, 0.2) == 0  # ... and went back to sleep once the window passed


def test_no_polling_while_several_clients_are_served(server):
    """Replies to two connections within one window: no polling after them (their requests keep the
    loop awake; a poll after every reply would make each wait return one request, not all ready)."""
    server.busy_poll.window = 0.2  # long enough that the alternating replies below fall in one window
    with (
        socket.create_connection(("127.0.0.1", server.port), timeout=5) as a,
        socket.create_connection(("127.0.0.1", server.port), timeout=5) as b,
    ):
        for s in (a, b):
            s.sendall(ping(1))
            assert reply(s)[0] == 200
        time.sleep(0.3)  # the first reply's window has passed
        before = server.busy_poll.spins
        for i in range(20):
            s = (a, b)[i % 2]
            s.sendall(ping(i))
            status, body = reply(s)
            assert status == 200 and json.loads(body)["id"] == i
        assert server.busy_poll.spins == before  # (one client again polls again: the test below)


def test_the_crowd_rule_on_a_clock():
    """touch() keeps polling for one client; a reply to another within the window stops it for
    CROWD_WINDOWS windows; one client again after that polls again."""
    from mcp_notebook.transport import latency

    clock = [100.0]
    poll = latency.BusyPoll(0.001)
    poll.in_selector = True  # (no loop: the selector would poll by itself)
    real, latency._now = latency._now, lambda: clock[0]
    try:
        a, b = object(), object()
        poll.touch(a)
        assert poll._until == pytest.approx(100.001)
        clock[0] += 0.0005
        poll.touch(a)  # the same client: the window moves on
        assert poll._until == pytest.approx(100.0015)
        clock[0] += 0.0005
        poll.touch(b)  # another client within the window: crowded
        clock[0] += 0.0005
        poll.touch(a)
        assert poll._until == pytest.approx(100.0015)  # not extended
        clock[0] += latency.CROWD_WINDOWS * 0.001 + 0.01
        poll.touch(a)  # the crowd has passed
        assert poll._until == pytest.approx(clock[0] + 0.001)
    finally:
        latency._now = real


def test_no_polling_while_turned_off_and_answers_stay_right(server):
    server.busy_poll.window = 0.05
    server.busy_poll.enabled = False
    with socket.create_connection(("127.0.0.1", server.port), timeout=5) as s:
        for i in range(20):
            s.sendall(ping(i))
            status, body = reply(s)
            assert status == 200 and json.loads(body)["id"] == i
    assert server.busy_poll.spins == 0


def test_a_cached_head_is_still_admitted_on_its_own(server):
    """Heads are parsed once per distinct bytes; admission (token) still runs for every request."""
    with socket.create_connection(("127.0.0.1", server.port), timeout=5) as s:
        for i in range(3):
            s.sendall(ping(i))
            assert reply(s)[0] == 200
    with socket.create_connection(("127.0.0.1", server.port), timeout=5) as s:
        s.sendall(ping(1, token="tok2"))  # same length, one byte different
        assert reply(s)[0] == 401


def test_ids_keep_their_exact_encoding():
    for value in (0, 7, -3, 10**30, 'a"b', "ü", True):
        assert rpc.dumps(value) == json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()


def test_one_sweep_serves_every_deadline_and_stops_with_the_last_connection(server):
    server.head_timeout = 0.3
    socks = [socket.create_connection(("127.0.0.1", server.port), timeout=5) for _ in range(20)]
    try:
        deadline = time.monotonic() + 10
        for s in socks:  # silent connections: each closed after the head deadline
            s.settimeout(max(0.1, deadline - time.monotonic()))
            assert s.recv(1) == b""
    finally:
        for s in socks:
            s.close()
    for _ in range(100):
        if not server.connections and server._sweep is None:
            break
        time.sleep(0.05)
    assert not server.connections and server._sweep is None


def test_busy_polling_is_off_while_a_cell_runs(tmp_path):
    k = Kernel(env={"JUPYTER_RUNTIME_DIR": str(tmp_path)})
    try:
        k.load_hub()
        k.run("import mcp_notebook as _m; _bp = _m.hub().transport.busy_poll")
        assert k.run("print(_bp.enabled)").stdout.strip() == "False"  # the running cell itself
        assert k.run("_seen = _bp.enabled", check=True).status == "ok"
        assert k.run("print(_seen, round(_bp.window * 1e6))").stdout.split() == ["False", "50"]
        k.run("%config MCPHub.busy_poll_us = 0")
        out = k.run("pass")
        assert out.status == "ok"
        assert k.run("print(_bp.window)").stdout.strip() == "0.0"
    finally:
        k.shutdown()


def test_the_hub_runs_on_uvloop_by_default_and_on_asyncio_when_asked(tmp_path):
    for env, expected in (({}, "uvloop"), ({"MCP_NOTEBOOK_LOOP": "asyncio"}, "asyncio")):
        k = Kernel(env={"JUPYTER_RUNTIME_DIR": str(tmp_path), **env})
        try:
            info = k.load_hub()
            out = k.run(
                "import mcp_notebook as _m; _m.hub().transport.wait_ready(); print(type(_m.hub().transport._loop).__module__)"
            )
            assert out.stdout.strip().startswith(expected)
            init = {
                "jsonrpc": "2.0",
                "id": 0,
                "method": "initialize",
                "params": {"protocolVersion": "2025-11-25", "capabilities": {}},
            }
            r = httpx.post(info["url"], json=init, headers={"Authorization": f"Bearer {info['token']}"}, timeout=10)
            assert r.status_code == 200 and "result" in r.json()
        finally:
            k.shutdown()


def test_between_cells_polling_is_on(tmp_path):
    k = Kernel(env={"JUPYTER_RUNTIME_DIR": str(tmp_path)})
    try:
        k.load_hub()
        k.run("import mcp_notebook as _m, threading; _bp = _m.hub().transport.busy_poll")
        # A thread samples the flag after this cell has finished.
        k.run("_flags = []\nthreading.Timer(0.3, lambda: _flags.append(_bp.enabled)).start()")
        time.sleep(1.0)
        assert k.run("print(_flags)").stdout.strip() == "[True]"
    finally:
        k.shutdown()


def test_concurrent_connections_all_answered_in_order(server):
    errors: list[str] = []

    def client(n: int) -> None:
        try:
            with socket.create_connection(("127.0.0.1", server.port), timeout=10) as s:
                for i in range(50):
                    s.sendall(ping(n * 1000 + i))
                    status, body = reply(s)
                    if status != 200 or json.loads(body)["id"] != n * 1000 + i:
                        errors.append(f"{n}/{i}: {status}")
        except Exception as exc:  # reported below
            errors.append(repr(exc))

    threads = [threading.Thread(target=client, args=(n,)) for n in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert errors == []


def test_a_repeated_head_skips_parsing_but_never_admission_under_new_settings(server):
    """Heads admitted before are recognised by their bytes; new settings (another token) void them."""
    with socket.create_connection(("127.0.0.1", server.port), timeout=5) as s:
        s.sendall(ping(1))
        assert reply(s)[0] == 200
    assert len(server.heads)  # remembered
    with socket.create_connection(("127.0.0.1", server.port), timeout=5) as s:
        s.sendall(ping(2))  # same head bytes, a fresh connection
        status, body = reply(s)
        assert status == 200 and json.loads(body)["id"] == 2
        s.sendall(ping(3) + ping(4))  # two in one segment: the general reader, both answered in order
        assert [json.loads(reply(s)[1])["id"] for _ in range(2)] == [3, 4]
    mcp = server.mcp
    old = mcp.settings
    mcp.settings = old.replace(token="another")
    try:
        with socket.create_connection(("127.0.0.1", server.port), timeout=5) as s:
            s.sendall(ping(5))  # byte-for-byte an admitted head, but the token changed
            assert reply(s)[0] == 401
    finally:
        mcp.settings = old


def test_a_refused_head_is_never_remembered(server):
    for _ in range(3):
        with socket.create_connection(("127.0.0.1", server.port), timeout=5) as s:
            s.sendall(ping(1, token="nope"))
            assert reply(s)[0] == 401
    assert not len(server.heads)
