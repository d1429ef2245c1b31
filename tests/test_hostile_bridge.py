"""`mcp-notebook bridge`'s stdin, attacked line by line (issue #32): a real bridge subprocess driven
over stdin/stdout, with no hub and with a real kernel's. No line may kill it or go unanswered when
it has a usable id; listens never starve other requests; cancels always go through."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kernel_harness import Kernel
from raw_bridge import RawBridge, stateless

from mcp_notebook.bridge.stdio import MAX_LISTENS
from mcp_notebook.bridge.stdio_input import MAX_LINE_BYTES

pytestmark = pytest.mark.timeout(240)
INIT = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "hostile", "version": "1"}}


@pytest.fixture(scope="module")
def runtime(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("hostile-bridge")


@pytest.fixture(scope="module")
def hub_kernel(runtime: Path) -> Iterator[Kernel]:
    k = Kernel(env={"JUPYTER_RUNTIME_DIR": str(runtime)})
    try:
        k.load_hub()
        k.run("hx = [1, 2, 3]")
        yield k
    finally:
        k.shutdown()


def _deep(n: int) -> str:
    return "[" * n + "]" * n


# (raw line, the id its error answers: None for a line whose id cannot be told, "-" for no answer)
BAD_LINES: list[tuple[str, Any]] = [
    (_deep(100_000), None),  # killed the bridge (RecursionError)
    ('{"jsonrpc":"2.0","id":"deep","method":"resources/read","params":{"uri":' + _deep(50_000) + "}}", None),
    (json.dumps({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": [1]}), None),  # killed it
    (json.dumps({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": "x"}), None),
    (json.dumps({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": [1]}}), "-"),
    (json.dumps({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": {"a": 1}}}), "-"),
    ('{"jsonrpc":"2.0","id":"\\ud800","method":"initialize","params":{}}', None),  # killed it
    (json.dumps({"jsonrpc": "2.0", "id": 7, "method": "resources/list", "params": [1]}), 7),  # never answered
    (json.dumps({"jsonrpc": "2.0", "id": 8, "method": "tools/call", "params": "x"}), 8),
    (json.dumps({"jsonrpc": "2.0", "id": [1], "method": "resources/list"}), None),
    (json.dumps({"jsonrpc": "2.0", "id": {"a": 1}, "method": "subscriptions/listen", "params": {}}), None),
    (json.dumps({"jsonrpc": "2.0", "id": 9, "method": ["x"]}), 9),
    (json.dumps({"jsonrpc": "1.0", "id": 10, "method": "ping"}), 10),
    ("[]", None),
    ("\x00\x01 not json", None),
    ("NaN", None),
    (json.dumps([1, "two", {"jsonrpc": "2.0"}]), "batch"),
]


def _answers(bridge: RawBridge, cases: list[tuple[str, Any]]) -> None:
    for line, answered_as in cases:
        bridge.send_raw(line.encode("utf-8", "surrogatepass"))
        if answered_as == "-":
            continue
        if answered_as == "batch":  # each invalid item answered, with id null; in a session of a
            first = bridge.reply(None)["error"]  # revision without batches, the batch refused once
            assert first["code"] == -32600
            if "not part of MCP" not in first["message"]:
                assert [bridge.reply(None)["error"]["code"] for _ in range(2)] == [-32600] * 2
            continue
        reply = bridge.reply(answered_as)
        assert reply["error"]["code"] in (-32700, -32600, -32602), (line[:80], reply)


@pytest.mark.parametrize("with_hub", [False, True, "front"], ids=["no-hub", "hub", "front"])
def test_no_stdin_line_kills_the_bridge_or_goes_unanswered(tmp_path, runtime, hub_kernel, with_hub):
    """(front: no selector, the all-kernels front in the bridge's process: the stdio carrier.)"""
    bridge = RawBridge(runtime if with_hub else tmp_path, *([] if with_hub == "front" else ["--latest"]))
    try:
        _answers(bridge, BAD_LINES)
        huge = '{"jsonrpc":"2.0","id":"big","method":"resources/read","params":{"uri":"' + "x" * (10 << 20) + '"}}'
        bridge.send_raw(huge.encode())  # was answered "no running hub"
        big = bridge.reply("big")
        assert big["error"]["code"] == -32600 and str(MAX_LINE_BYTES) in big["error"]["message"], big
        init = bridge.ask({"jsonrpc": "2.0", "id": "init", "method": "initialize", "params": INIT})
        if not with_hub:
            assert "No running mcp-notebook hub" in init["error"]["message"]
            return
        assert init["result"]["protocolVersion"] == "2025-11-25"
        bridge.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        _answers(bridge, BAD_LINES)  # and again inside a live session
        read = bridge.ask(
            {"jsonrpc": "2.0", "id": "read", "method": "resources/read", "params": {"uri": "nb://vars/hx"}}
        )
        assert "[1, 2, 3]" in read["result"]["contents"][0]["text"]
        # a line over the hub's own limit (1 MB) but under the bridge's: the hub's 413, answering its id
        body = {"jsonrpc": "2.0", "id": "2mb", "method": "resources/read", "params": {"uri": "x" * (2 << 20)}}
        over = bridge.ask(body)
        assert "error" in over and "No running" not in over["error"]["message"], over
    finally:
        assert bridge.close() == 0
    assert not bridge.unread(), bridge.unread()


@pytest.mark.parametrize("args", [["--latest"], []], ids=["hub", "front"])
def test_listens_never_starve_requests_and_cancels_always_go_through(runtime, hub_kernel, args):
    """More open subscriptions/listen than request slots: other requests and cancels still go
    through (the stdin thread waited for a slot listens hold for life); listens have their own bound."""
    bridge = RawBridge(runtime, *args)
    try:
        watch = {"notifications": {"resourceSubscriptions": ["nb://vars/hx"]}}
        for i in range(MAX_LISTENS):
            bridge.send(stateless(f"l{i}", "subscriptions/listen", watch))
        refused = bridge.ask(stateless("over", "subscriptions/listen", watch))
        assert refused["error"]["code"] == -32600 and str(MAX_LISTENS) in refused["error"]["message"]
        read = bridge.ask(stateless("r1", "resources/read", {"uri": "nb://vars/hx"}))
        assert "[1, 2, 3]" in read["result"]["contents"][0]["text"]
        acked = _acked(bridge, MAX_LISTENS)
        assert acked == MAX_LISTENS, acked
        for i in range(MAX_LISTENS):
            bridge.send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": f"l{i}"}})
        bridge.send(stateless("l-new", "subscriptions/listen", watch))  # the cancels freed the bound
        assert _acked(bridge, 1) == 1
        bridge.send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": "l-new"}})
    finally:
        assert bridge.close() == 0
    _no_listens_left(hub_kernel)


def _acked(bridge: RawBridge, want: int, timeout: float = 60) -> int:
    seen: set[Any] = set()
    deadline = time.monotonic() + timeout
    while len(seen) < want and time.monotonic() < deadline:
        for note in bridge.notifications(0.5):
            if note.get("method") == "notifications/subscriptions/acknowledged":
                seen.add(note["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"])
    return len(seen)


def _no_listens_left(kernel: Kernel, timeout: float = 20) -> None:
    deadline = time.monotonic() + timeout
    left = -1
    while time.monotonic() < deadline:
        left = int(kernel.run("import mcp_notebook as _m; print(len(_m.hub().server.listens()))").stdout.strip())
        if left == 0:
            return
        time.sleep(0.3)
    raise AssertionError(f"{left} listens left open at the hub")
