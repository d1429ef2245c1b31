"""Issue #10, request side, against the hub in a real kernel: abruptly dropped streams and requests
leave no threads, fds, memory, sessions or streams behind; nothing reaches the kernel's iopub."""

from __future__ import annotations

import json
import queue
import socket
import time
from typing import Any

import psutil
from conftest import Mcp

STATELESS_META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {},
}
RST = b"\x01\x00\x00\x00\x00\x00\x00\x00"  # SO_LINGER on, 0 s: close sends a reset


def _port(info: dict[str, Any]) -> int:
    return int(info["url"].rsplit(":", 1)[1].split("/")[0])


def _send(port: int, raw: bytes) -> socket.socket:
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    s.sendall(raw)
    return s


def _post(token: str, body: dict[str, Any], extra: str = "") -> bytes:
    raw = json.dumps(body).encode()
    return (
        f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {token}\r\nContent-Type: application/json\r\n"
        f"Accept: application/json, text/event-stream\r\nContent-Length: {len(raw)}\r\n{extra}\r\n"
    ).encode() + raw


def _drop(s: socket.socket, reset: bool) -> None:
    if reset:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, RST)
    s.close()


def _counts(proc: psutil.Process) -> tuple[int, int, int]:
    return proc.num_fds(), proc.num_threads(), proc.memory_info().rss


def test_two_hundred_dropped_streams_and_requests_leak_nothing(kernel, hub):
    proc = psutil.Process(kernel.pid())
    port, token = _port(hub), hub["token"]
    client = Mcp(hub)
    client.initialize()
    sid = client.session
    client.result("resources/subscribe", {"uri": "nb://kernel"})
    get = (
        f"GET /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {token}\r\nAccept: text/event-stream\r\n"
        f"Mcp-Session-Id: {sid}\r\nMCP-Protocol-Version: 2025-11-25\r\n\r\n"
    ).encode()
    listen = _post(
        token,
        {
            "jsonrpc": "2.0",
            "id": "L",
            "method": "subscriptions/listen",
            "params": {"notifications": {"resourceSubscriptions": ["nb://vars/x"]}, "_meta": STATELESS_META},
        },
        "MCP-Protocol-Version: 2026-07-28\r\nMcp-Method: subscriptions/listen\r\n",
    )
    read = _post(
        token,
        {"jsonrpc": "2.0", "id": 3, "method": "resources/read", "params": {"uri": "nb://kernel"}},
        f"Mcp-Session-Id: {sid}\r\n",
    )
    for warmup in range(20):  # let the request pool and caches reach their size first
        _drop(_send(port, read), reset=warmup % 2 == 0)
    time.sleep(1.0)
    before = _counts(proc)
    for i in range(200):
        kind = i % 5
        if kind in (0, 1):
            s = _send(port, get)
            assert s.recv(100).startswith(b"HTTP/1.1 200")
            _drop(s, reset=kind == 0)
        elif kind == 2:
            s = _send(port, listen)
            assert s.recv(100).startswith(b"HTTP/1.1 200")
            _drop(s, reset=True)
        elif kind == 3:
            _drop(_send(port, read), reset=True)  # gone before its answer
        else:
            _drop(_send(port, read[: len(read) - 20]), reset=i % 2 == 0)  # cut off mid-body
    deadline = time.monotonic() + 30
    while True:
        state = json.loads(
            kernel.run(
                "import json as _j, mcp_notebook as _m\n"
                "_t = _m.hub().transport\n"
                "_s = _m.hub().server\n"
                "print(_j.dumps({'connections': len(_t.connections), 'streams': len(_t.streams),"
                " 'tasks': len(_t.driver.tasks), 'listens': len(_s.listens()),"
                " 'session_streams': sum(len(x.streams) for x in _s.sessions())}))"
            ).stdout.strip()
        )
        # connections: at most the test client's own keep-alive one
        clean = state["connections"] <= 1 and not any(state[k] for k in ("streams", "tasks", "listens"))
        if (clean and not state["session_streams"]) or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert state["connections"] <= 1, state
    assert state["streams"] == state["tasks"] == state["listens"] == state["session_streams"] == 0, state
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        fds, threads, rss = _counts(proc)
        if fds <= before[0] + 3 and threads <= before[1] + 2:
            break
        time.sleep(0.2)
    fds, threads, rss = _counts(proc)
    assert fds <= before[0] + 3, (before, (fds, threads, rss))
    assert threads <= before[1] + 2, (before, (fds, threads, rss))
    assert rss <= before[2] + 30_000_000, (before, (fds, threads, rss))
    assert client.result("ping") == {}  # the session and its subscription survived
    client.close()
    time.sleep(0.3)
    stray = []
    while True:
        try:
            msg = kernel.kc.get_iopub_msg(timeout=0.2)
        except queue.Empty:
            break
        if msg["msg_type"] == "stream":
            stray.append(msg["content"]["text"][:300])
    assert not stray
