"""The stdio bridge against an in-process hub (real McpServer and HttpTransport on 127.0.0.1), found through
a runtime file: failure paths that are slow or impossible to stage with a real kernel."""

from __future__ import annotations

import http.server
import io
import json
import os
import socket
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from mcp_notebook.bridge.hub_selection import Selector
from mcp_notebook.bridge.stdio import Bridge
from mcp_notebook.protocol.server import McpServer, ServerSettings
from mcp_notebook.providers.custom import CustomProvider, make_registration
from mcp_notebook.resources import Resources
from mcp_notebook.runtime import write_runtime_file
from mcp_notebook.transport.server import HttpTransport

TOKEN = "bridge-review-token"
KERNEL = "review-kernel"
STATELESS = "2026-07-28"
META = {"io.modelcontextprotocol/protocolVersion": STATELESS, "io.modelcontextprotocol/clientCapabilities": {}}


@pytest.fixture(autouse=True)
def runtime(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("JUPYTER_RUNTIME_DIR", str(tmp_path))
    return tmp_path


class Out(io.BytesIO):
    """stdout of the bridge: JSON lines, read back by the test."""

    def messages(self) -> list[Any]:
        return [json.loads(line) for line in self.getvalue().splitlines() if line.strip()]


def advertise(url: str) -> None:
    """A runtime file as a hub writes it; the pid is ours, so it counts as alive."""
    info = {"url": url, "token": TOKEN, "pid": os.getpid(), "kernel_id": KERNEL, "started_at": time.time()}
    write_runtime_file(info, KERNEL)


def wait_for(check: Callable[[], Any], seconds: float = 10.0) -> Any:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.02)
    return check()


def start_hub(fn: Callable[[], str]) -> tuple[HttpTransport, Resources]:
    custom = CustomProvider()
    reg = make_registration("test://r", fn, name="r", title=None, description=None, mime_type=None, annotations=None)
    custom.register(reg)
    hub = Resources([custom])
    transport = HttpTransport(McpServer(hub, ServerSettings(token=TOKEN)), "127.0.0.1", 0, 100_000)
    transport.start()
    advertise(transport.url)
    return transport, hub


def listen_msg(sub_id: str) -> dict[str, Any]:
    params = {"_meta": META, "notifications": {"resourceSubscriptions": ["test://r"]}}
    return {"jsonrpc": "2.0", "id": sub_id, "method": "subscriptions/listen", "params": params}


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def not_mcp() -> Iterator[str]:
    """Something else listening where a runtime file points (a recycled port): it answers HTML."""

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length", 0)))
            body = b"<html>hello</html>"
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}/mcp"
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(5)


def test_a_non_mcp_answer_is_a_json_rpc_error_not_a_crash(not_mcp):
    advertise(not_mcp)
    out = Out()
    bridge = Bridge(Selector(kernel=KERNEL), out=out, reconnect_timeout=0.5, log=io.StringIO())
    init = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}
    bridge.dispatch({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": init})
    bridge.dispatch({"jsonrpc": "2.0", "id": 2, "method": "resources/list", "params": {}})
    assert wait_for(lambda: len(out.messages()) >= 2)
    bridge.dispatch(listen_msg("L0"))  # stateless era: a listen gets the same treatment
    replies = wait_for(lambda: len(out.messages()) >= 3 and out.messages())
    assert [r["id"] for r in replies] == [1, 2, "L0"], replies
    assert all("error" in r for r in replies)
    bridge.close()


def test_a_broken_listen_stops_retrying_after_the_reconnect_timeout():
    transport, hub = start_hub(lambda: "x")
    out = Out()
    bridge = Bridge(Selector(kernel=KERNEL), out=out, reconnect_timeout=1.0, log=io.StringIO())
    try:
        bridge.dispatch(listen_msg("L1"))
        assert wait_for(lambda: out.messages()), "no acknowledgement"
        advertise(f"http://127.0.0.1:{closed_port()}/mcp")  # the live pid's file now names a dead port
        loop = transport._loop
        assert loop is not None
        for conn in list(transport.connections):  # the kernel's server dies without a goodbye
            loop.call_soon_threadsafe(conn.io.abort)
        assert wait_for(lambda: "L1" not in bridge._listens), "the bridge retries forever"
        last = out.messages()[-1]
        assert last["id"] == "L1" and "error" in last
    finally:
        bridge.close()
        transport.stop()
        hub.close()


def test_a_listen_cancelled_before_the_hub_answers_stays_cancelled():
    gate = threading.Event()
    armed = threading.Event()

    def slow() -> str:
        if armed.is_set():  # the baseline digest of the listen waits here
            gate.wait(10)
        return "x"

    transport, hub = start_hub(slow)
    out = Out()
    bridge = Bridge(Selector(kernel=KERNEL), out=out, reconnect_timeout=1.0, log=io.StringIO())
    try:
        armed.set()
        bridge.dispatch(listen_msg("L2"))
        assert wait_for(lambda: "L2" in bridge._listens)
        time.sleep(0.2)  # the POST is out; the hub is still setting the listen up
        bridge.dispatch({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": "L2"}})
        gate.set()
        assert wait_for(lambda: not transport.mcp.listens()), "the cancelled listen is still open on the hub"
        assert not any(m.get("method") == "notifications/subscriptions/acknowledged" for m in out.messages())
    finally:
        gate.set()
        bridge.close()
        transport.stop()
        hub.close()
