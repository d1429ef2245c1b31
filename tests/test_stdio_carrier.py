"""The stdio carrier (issue #33): `mcp-notebook bridge` with no selector drives the all-kernels
front's server in its own process. The bridge listens on no socket (it used to serve the front on
a private loopback port and talk HTTP to itself), and reads, notifications and both eras work
through it with the official SDK's stdio client, against two real kernels."""

from __future__ import annotations

import io
import json
import os
import sys
import threading
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import psutil
import pytest
from kernel_harness import Kernel
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from sdk import Inbox

from mcp_notebook.allkernels.directory import LocalDirectory
from mcp_notebook.allkernels.front import MAX_BODY_BYTES, KernelsFront
from mcp_notebook.bridge.hub_selection import FrontRecord, FrontSelector
from mcp_notebook.bridge.stdio import Bridge
from mcp_notebook.bridge.stdio_carrier import StdioCarrier
from mcp_notebook.protocol.exchange import HttpRequest
from mcp_notebook.protocol.wire_stateless import request_headers

pytestmark = pytest.mark.timeout(240)
ROOT = Path(__file__).resolve().parents[1]
STATELESS = "2026-07-28"
META = {"io.modelcontextprotocol/protocolVersion": STATELESS, "io.modelcontextprotocol/clientCapabilities": {}}


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    tmp = tmp_path_factory.mktemp("stdio-carrier")
    runtime = tmp / "runtime"
    runtime.mkdir()
    kernels: dict[str, Kernel] = {}
    try:
        for name in ("alpha", "beta"):
            k = kernels[name] = Kernel(env={"JUPYTER_RUNTIME_DIR": str(runtime)}, cwd=str(tmp))
            k.run(f"%config MCPHub.notebook_path = {str(tmp / (name + '.ipynb'))!r}")
            k.load_hub()
            k.run(f"x = {name!r}")
        yield {"runtime": runtime, "kernels": kernels}
    finally:
        for k in kernels.values():
            k.shutdown()


def _bridge_process(runtime: Path) -> psutil.Process:
    """The bridge the SDK client started (a child of this process serving ``runtime``)."""
    found = []
    for child in psutil.Process().children(recursive=True):
        try:
            cmd, env = child.cmdline(), child.environ()
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
        if "bridge" in cmd and "mcp_notebook" in cmd and env.get("JUPYTER_RUNTIME_DIR") == str(runtime):
            found.append(child)
    assert len(found) == 1, found
    return found[0]


def _listening(proc: psutil.Process) -> list[Any]:
    connections = getattr(proc, "net_connections", None) or proc.connections  # (psutil < 6: connections)
    return [c for c in connections(kind="inet") if c.status == psutil.CONN_LISTEN]


@pytest.mark.parametrize("mode", ["legacy", "auto"])
def test_the_all_kernels_bridge_has_no_loopback_listener_and_serves_both_eras(world, mode):
    runtime, kernels = world["runtime"], world["kernels"]
    env = {**os.environ, "JUPYTER_RUNTIME_DIR": str(runtime), "PYTHONPATH": str(ROOT)}
    params = StdioServerParameters(command=sys.executable, args=["-m", "mcp_notebook", "bridge"], env=env)
    inbox = Inbox()
    uri = "nb://kernels/alpha/vars/x"
    value = f"'alpha {mode}'"

    async def go() -> psutil.Process:
        async with Client(params, mode=mode, message_handler=inbox.handle, cache=None) as client:
            assert client.protocol_version == ("2025-11-25" if mode == "legacy" else "2026-07-28")
            bridge = _bridge_process(runtime)
            assert _listening(bridge) == []  # the front is served in-process: no port, no token
            listed = json.loads((await client.read_resource("nb://kernels")).contents[0].text)["kernels"]
            assert sorted(k["label"] for k in listed) == ["alpha", "beta"]
            for name in ("alpha", "beta"):
                read = await client.read_resource(f"nb://kernels/{name}/vars/x")
                assert name in read.contents[0].text
            if mode == "legacy":  # a subscription: the update comes on the session's GET stream
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")  # (the SDK says it is gone in the stateless era)
                    await client.subscribe_resource(uri)
                await anyio.sleep(0.5)  # the front opens its listen on alpha's hub
                await anyio.to_thread.run_sync(kernels["alpha"].run, f"x = {value}")
                await inbox.wait_for(lambda i: uri in i.updated, timeout=20)
            else:  # a subscriptions/listen stream
                async with client.listen(resource_subscriptions=[uri]) as sub:
                    assert list(sub.honored.resource_subscriptions) == [uri]
                    await anyio.sleep(0.5)
                    await anyio.to_thread.run_sync(kernels["alpha"].run, f"x = {value}")
                    with anyio.fail_after(20):
                        async for event in sub:
                            if getattr(event, "uri", None) == uri:
                                break
            assert value in (await client.read_resource(uri)).contents[0].text
            assert _listening(bridge) == []
            return bridge

    bridge = anyio.run(go)
    bridge.wait(15)  # stdin closed: the bridge ended its session, closed the front and exited


# -- the carrier itself, in this process (no kernel: an empty runtime dir) -------------------------
@pytest.fixture
def carrier(tmp_path: Path) -> Iterator[StdioCarrier]:
    front = KernelsFront(LocalDirectory(tmp_path))
    c = StdioCarrier(front.server, FrontRecord(Path(), {}, True))
    try:
        yield c
    finally:
        c.close()
        front.close()


def _listen(sub_id: str) -> dict[str, Any]:
    params = {"notifications": {"resourcesListChanged": True}, "_meta": META}
    return {"jsonrpc": "2.0", "id": sub_id, "method": "subscriptions/listen", "params": params}


def _reader(feed: Any) -> tuple[threading.Thread, list[Any]]:
    """A thread reading ``feed`` to its end (what the bridge's relaying thread does)."""
    got: list[Any] = []
    thread = threading.Thread(target=lambda: got.extend(feed.messages()))
    thread.start()
    return thread, got


def test_a_cancelled_listen_wakes_its_reader_and_is_released_at_the_server(carrier):
    feed = carrier.listen(_listen("l1"))
    assert feed.streaming
    messages = feed.messages()
    assert next(messages)["method"] == "notifications/subscriptions/acknowledged"  # a message, not an SSE event
    assert len(carrier.server.listens()) == 1
    ended: list[Any] = []
    reader = threading.Thread(target=lambda: ended.append(next(messages, None)))
    reader.start()  # blocks: nothing more comes on the stream
    reader.join(0.3)
    assert reader.is_alive()
    feed.cancel()  # what the bridge does on notifications/cancelled
    reader.join(10)
    assert ended == [None] and carrier.server.listens() == []
    feed.close()  # and again when the bridge closes it: released once
    assert carrier.server.listens() == []


def test_a_listen_gets_its_final_result_when_the_server_closes(carrier):
    feed = carrier.listen(_listen("l2"))
    reader, got = _reader(feed)
    carrier.server.close()
    reader.join(10)
    assert not reader.is_alive()
    assert got[0]["method"] == "notifications/subscriptions/acknowledged"
    assert got[-1]["id"] == "l2" and got[-1]["result"]["resultType"] == "complete", got


def test_messages_are_bounded_as_bodies_and_a_stopped_carrier_says_so(carrier):
    """The carrier keeps its own bound: a message over the front's HTTP body limit (the bytes it took
    on stdin) is refused by its id, as the HTTP face refuses the body (413); under it, answered."""
    discover = {"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": {"_meta": META}}
    status, _, replies = carrier.call(discover, size=MAX_BODY_BYTES + 1)
    assert status == 413 and replies[0]["id"] == 1 and str(MAX_BODY_BYTES) in replies[0]["error"]["message"]
    status, _, replies = carrier.call({**discover, "id": 2}, size=MAX_BODY_BYTES)
    assert status == 200 and STATELESS in replies[0]["result"]["supportedVersions"], replies
    carrier.close()
    read = {"jsonrpc": "2.0", "id": 3, "method": "resources/read", "params": {"uri": "nb://vars/x", "_meta": META}}
    status, _, replies = carrier.call(read)
    assert status == 503 and replies[0]["id"] == 3 and "stopping" in replies[0]["error"]["message"]


def test_a_huge_stdin_line_is_refused_by_the_carriers_bound(tmp_path):
    """Through the bridge: a line under the stdin bound but over the carrier's gets -32600 by its id."""
    front = KernelsFront(LocalDirectory(tmp_path))
    record = FrontRecord(Path(), {}, True)
    carrier = StdioCarrier(front.server, record, max_message_bytes=2000)
    out = io.BytesIO()
    bridge = Bridge(FrontSelector(record), out=out, log=io.StringIO(), connect=lambda _: carrier)
    big = {"jsonrpc": "2.0", "id": 7, "method": "server/discover", "params": {"_meta": META, "x": "y" * 3000}}
    small = {"jsonrpc": "2.0", "id": 8, "method": "server/discover", "params": {"_meta": META}}
    try:
        bridge.run(io.BytesIO(json.dumps(big).encode() + b"\n" + json.dumps(small).encode() + b"\n"))
    finally:
        carrier.close()
        front.close()
    answers = {m["id"]: m for m in map(json.loads, out.getvalue().splitlines())}
    assert answers[7]["error"]["code"] == -32600 and "2000 bytes" in answers[7]["error"]["message"]
    assert "result" in answers[8]


def test_close_ends_the_streams_still_open_and_frees_them_at_the_server(carrier):
    feed = carrier.listen(_listen("l3"))
    reader, got = _reader(feed)  # blocked after the acknowledgement: the listen is quiet
    reader.join(0.3)
    assert reader.is_alive()
    carrier.close()  # the bridge is gone; nobody cancelled the listen
    reader.join(10)
    assert not reader.is_alive() and [m["method"] for m in got] == ["notifications/subscriptions/acknowledged"]
    assert carrier.server.listens() == []


def test_the_message_entry_and_the_http_face_answer_alike(carrier):
    """One path: the HTTP face is the message entry plus a head; the same rules answer both."""
    server = carrier.server
    cases = [
        {"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": {"_meta": META}},
        {"jsonrpc": "2.0", "id": 2, "method": "no/such", "params": {"_meta": META}},
        {"jsonrpc": "2.0", "id": 3, "method": "resources/read", "params": {"_meta": {}}},
        {"jsonrpc": "2.0", "id": 4, "method": "resources/read", "params": {"uri": "nb://nope", "_meta": META}},
        {"jsonrpc": "2.0", "id": 6, "method": "ping"},  # handshake era, no session
    ]
    for msg in cases:
        params = msg.get("params") or {}
        headers = {"content-type": "application/json", "accept": "application/json, text/event-stream"}
        if "_meta" in params and "protocolVersion" in str(params["_meta"]):
            headers.update({k.lower(): v for k, v in request_headers(msg["method"], params, STATELESS).items()})
        reply = server.handle(HttpRequest("POST", headers, json.dumps(msg).encode(), admitted=True))
        status, _, messages = carrier.call(msg)
        assert status == reply.status, msg
        assert messages == [json.loads(reply.body or b"null")], msg
