"""Kernels behind a real Jupyter Kernel Gateway, reached over their control channel.

The gateway is a separate process with its own runtime, data and config dirs (a stand-in for
another host: the hub's runtime file and loopback port are out of the server's reach); a real
``jupyter server --gateway-url`` with a token sits in front of it. Clients know only the server's
URL and its token: the official SDK client in both eras lists, reads, subscribes and listens
through ``{base_url}mcp-notebook/kernels/{id}/mcp`` and through the all-kernels endpoint; code runs
through the server's kernel websocket, as in a browser.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
import warnings
from collections.abc import Iterator
from typing import Any

import anyio
import httpx
import pytest
from jserver import JupyterServer
from kernel_gateway import KernelGateway, KernelSocket
from test_serverext import sdk

TOKEN = "gw-jupyter-token"
AUTH = f"token {TOKEN}"
ACCEPT = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
pytestmark = pytest.mark.timeout(300)


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    base = tmp_path_factory.mktemp("gw")
    gateway = KernelGateway(base / "gateway")
    server = None
    try:
        server = JupyterServer(base / "server", token=TOKEN, base_url="/hub/", extra_args=gateway.server_args)
        kid = server.start_session("remote.ipynb")
        sock = KernelSocket(server.url, TOKEN, kid)
        sock.execute("%load_ext mcp_notebook\nx = [1, 2, 3]")
        bare = server.start_session("bare.ipynb")  # no hub loaded in this one: served from the server's side
        bare_sock = KernelSocket(server.url, TOKEN, bare)
        yield {
            "server": server,
            "gateway": gateway,
            "id": kid,
            "bare": bare,
            "sock": sock,
            "bare_sock": bare_sock,
            "url": server.mcp_url(kid),
        }
        sock.close()
        bare_sock.close()
    finally:
        if server is not None:
            server.stop()
        gateway.stop()


def _cell(setup: dict[str, Any], code: str) -> str:
    return setup["sock"].execute(code)


def test_the_gateway_shares_no_files_with_the_server(setup):
    """The hub wrote its runtime file where the kernel runs, never into the server's runtime dir."""
    server = setup["server"]
    assert not list(server.runtime.glob("mcp-notebook-*.json"))
    out = _cell(setup, "import mcp_notebook as _m; print(_m.connection_info()['runtime_file'])")
    assert out.strip().startswith(str(setup["gateway"].dirs["runtime"]))


def test_listing_names_the_kernel_and_its_carrier(setup):
    listed = _wait_served(setup, setup["bare"])
    ours = [k for k in listed if k["kernel_id"] == setup["id"]]
    assert ours and ours[0]["route"] == "control" and ours[0]["notebook_path"] == "remote.ipynb"
    bare = [k for k in listed if k["kernel_id"] == setup["bare"]]
    assert bare[0]["language"] == "python" and bare[0]["notebook_path"] == "bare.ipynb"
    assert "token" not in json.dumps(listed)


def _wait_served(setup: dict[str, Any], kernel_id: str, timeout: float = 30) -> list[dict[str, Any]]:
    """The listing once the gateway kernel is served from the server's side (its hub probed silent)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        rows = setup["server"].http.get("mcp-notebook/kernels").json()
        if any(r["kernel_id"] == kernel_id and r["route"] == "server" for r in rows):
            return rows
        time.sleep(0.2)
    raise AssertionError(f"gateway kernel {kernel_id} was never served from the server's side: {rows}")


@pytest.mark.parametrize("mode", ["auto", "legacy"])
def test_sdk_lists_and_reads_through_the_gateway(setup, mode):
    async def go() -> None:
        async with sdk(setup["url"], mode, AUTH) as (client, _):
            assert client.protocol_version == ("2026-07-28" if mode == "auto" else "2025-11-25")
            uris = {str(r.uri) for r in (await client.list_resources()).resources}
            assert {"nb://kernel", "nb://vars", "nb://vars/x"} <= uris
            read = await client.read_resource("nb://vars/x")
            assert json.loads(read.contents[0].text)["repr"] == "[1, 2, 3]"
            doc = json.loads((await client.read_resource("nb://kernel")).contents[0].text)
            assert doc["kernel_id"] == setup["id"]

    anyio.run(go)


def test_handshake_subscription_gets_updated_through_the_get_stream(setup):
    _cell(setup, "gw_watched = [1]")

    async def go() -> None:
        async with sdk(setup["url"], "legacy", AUTH) as (client, inbox):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                await client.subscribe_resource("nb://vars/gw_watched")
            await anyio.sleep(0.3)  # the SDK opens its GET stream in the background
            started = time.monotonic()
            await anyio.to_thread.run_sync(_cell, setup, "gw_watched.append(2)")
            await inbox.wait_for(lambda i: "nb://vars/gw_watched" in i.updated, timeout=15)
            assert time.monotonic() - started < 10
            read = await client.read_resource("nb://vars/gw_watched")
            assert json.loads(read.contents[0].text)["repr"] == "[1, 2]"

    anyio.run(go)


def test_stateless_listen_gets_updated_and_list_changed(setup):
    _cell(setup, "gw_listened = {'a': 1}")
    before = _open_streams(setup)  # other senders' streams (the all-kernels front keeps a listen)

    async def go() -> None:
        async with sdk(setup["url"], "auto", AUTH) as (client, _):
            async with client.listen(
                resource_subscriptions=["nb://vars/gw_listened"], resources_list_changed=True
            ) as sub:
                assert list(sub.honored.resource_subscriptions) == ["nb://vars/gw_listened"]
                await anyio.to_thread.run_sync(_cell, setup, "gw_listened['b'] = 2")
                with anyio.fail_after(15):
                    async for event in sub:
                        if getattr(event, "uri", None) == "nb://vars/gw_listened":
                            break
                await anyio.to_thread.run_sync(_cell, setup, "gw_brand_new = 5")
                with anyio.fail_after(15):
                    async for event in sub:
                        if type(event).__name__ == "ResourcesListChanged":
                            break

    anyio.run(go)
    assert _wait_streams(setup, before), "the hub still holds the stream of a client that left"


def _open_streams(setup: dict[str, Any]) -> int:
    out = _cell(setup, "import mcp_notebook as _m; print(_m.hub().control.open_streams)")
    return int(out.strip())


def _wait_streams(setup: dict[str, Any], n: int, timeout: float = 10) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if _open_streams(setup) == n:
            return True
        time.sleep(0.2)
    return False


def test_session_delete_and_refusals(setup):
    http = setup["server"].http
    url = setup["url"]
    init = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}
    r = http.post(url, headers=ACCEPT, json={"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": init})
    assert r.status_code == 200, r.text
    h = {**ACCEPT, "Mcp-Session-Id": r.headers["mcp-session-id"], "MCP-Protocol-Version": "2025-11-25"}
    assert http.post(url, headers=h, json={"jsonrpc": "2.0", "method": "notifications/initialized"}).status_code == 202
    assert http.post(url, headers=h, json={"jsonrpc": "2.0", "id": 1, "method": "ping"}).json()["result"] == {}
    assert http.delete(url, headers=h).status_code in (200, 202, 204)
    assert http.post(url, headers=h, json={"jsonrpc": "2.0", "id": 2, "method": "ping"}).status_code == 404
    # without the Jupyter token, or with a wrong one: nothing
    body = {"jsonrpc": "2.0", "id": 1, "method": "ping", "params": {}}
    assert httpx.post(url, json=body, headers=ACCEPT, timeout=10).status_code == 403
    assert httpx.post(url, json=body, headers={**ACCEPT, "Authorization": "token no"}, timeout=10).status_code == 403


def _control(setup: dict[str, Any]) -> Any:
    """A raw kernel websocket on the gateway itself (a peer that may execute code in the kernel)."""
    import websocket

    gw = setup["gateway"]
    url = f"ws://127.0.0.1:{gw.port}/api/kernels/{setup['id']}/channels"
    return websocket.create_connection(url, header=[f"Authorization: token {gw.token}"], timeout=30)


def _send(ws: Any, msg_type: str, content: dict[str, Any]) -> str:
    """One control message on a raw kernel websocket; its msg_id."""
    msg_id = uuid.uuid4().hex
    header = {"msg_id": msg_id, "msg_type": msg_type, "username": "t", "session": "s", "date": "", "version": "5.3"}
    msg = {"header": header, "parent_header": {}, "metadata": {}, "content": content, "channel": "control"}
    ws.send(json.dumps(msg))
    return msg_id


def _ask(
    ws: Any, msg_type: str, content: dict[str, Any], timeout: float = 10, final: bool = True
) -> list[dict[str, Any]]:
    """Send one control message; its answers up to the final one (``final=False``: the first)."""
    msg_id = _send(ws, msg_type, content)
    got: list[dict[str, Any]] = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        ws.settimeout(max(0.1, deadline - time.monotonic()))
        msg = json.loads(ws.recv())
        if msg["parent_header"].get("msg_id") != msg_id:
            continue
        if msg["channel"] == "iopub":
            got.append(msg)  # nothing of ours may make the kernel publish (busy/idle flicker)
            continue
        got.append(msg)
        if msg["msg_type"] == "mcp_info_reply" or msg["content"].get("final") or not final:
            return got
    raise TimeoutError(msg_type)


def test_a_control_request_without_the_hub_token_gets_nothing(setup):
    ws = _control(setup)
    try:
        body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "resources/read", "params": {"uri": "nb://vars/x"}})
        h = {"host": "127.0.0.1", "content-type": "application/json", "accept": "application/json, text/event-stream"}
        replies = _ask(ws, "mcp_request", {"method": "POST", "headers": h, "body": body})
        assert [m["channel"] for m in replies] == ["control"]
        assert replies[0]["content"]["status"] == 401 and "[1, 2, 3]" not in json.dumps(replies)
        bad = _ask(ws, "mcp_request", {"method": "PUT", "headers": {}, "body": 5})
        assert bad[0]["content"]["status"] == 405
        info = _ask(ws, "mcp_info_request", {})
        assert [m["channel"] for m in info] == ["control"]  # no busy/idle on IOPub for our messages
        assert info[0]["content"]["status"] == "ok" and info[0]["content"]["token"]
    finally:
        ws.close()


def test_a_kernel_without_a_hub_is_a_clear_error_not_a_hang(setup):
    """A bad request to a gateway kernel without a hub is answered by its server-side server at once."""
    _wait_served(setup, setup["bare"])
    started = time.monotonic()
    r = setup["server"].http.post(setup["server"].mcp_url(setup["bare"]), headers=ACCEPT, json={"jsonrpc": "2.0"})
    assert r.status_code == 400 and r.json()["error"]["code"] == -32600, r.text
    assert time.monotonic() - started < 15


def test_interrupt_lands_at_once_while_streams_are_open(setup):
    """A long cell, a GET stream and a listen stream open over control and a busy reader: the
    interrupt sent through the server still ends the cell at once."""
    server = setup["server"]
    _cell(setup, "gw_int = 0")
    stop = threading.Event()

    def reader() -> None:
        meta = {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {},
        }
        body = {"jsonrpc": "2.0", "id": 1, "method": "resources/read", "params": {"uri": "nb://vars/x", "_meta": meta}}
        h = {**ACCEPT, "MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "resources/read", "Mcp-Name": "nb://vars/x"}
        with httpx.Client(headers={"Authorization": AUTH}, timeout=30) as http:
            while not stop.is_set():
                http.post(setup["url"], headers=h, json=body)

    async def go() -> float:
        async with sdk(setup["url"], "legacy", AUTH) as (legacy, _), sdk(setup["url"], "auto", AUTH) as (modern, _):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                await legacy.subscribe_resource("nb://vars/gw_int")
            async with modern.listen(resource_subscriptions=["nb://vars/gw_int"]):
                await anyio.sleep(0.5)
                assert _open_streams(setup) >= 2
                msg_id = setup["sock"].execute("import time\nwhile True: time.sleep(0.01)", wait=False)
                await anyio.sleep(1.0)
                sent = time.monotonic()
                assert server.http.post(f"api/kernels/{setup['id']}/interrupt").status_code == 204
                with pytest.raises(AssertionError, match="KeyboardInterrupt"):
                    await anyio.to_thread.run_sync(setup["sock"].wait_reply, msg_id, 30)
                return time.monotonic() - sent

    threads = [threading.Thread(target=reader, daemon=True) for _ in range(2)]
    for t in threads:
        t.start()
    try:
        took = anyio.run(go)
    finally:
        stop.set()
        for t in threads:
            t.join(30)
    assert took < 5, f"the interrupt took {took:.2f} s"


@pytest.mark.parametrize("mode", ["auto", "legacy"])
def test_the_all_kernels_endpoint_serves_gateway_kernels(setup, mode):
    url = f"{setup['server'].url}mcp-notebook/mcp"

    async def go() -> None:
        async with sdk(url, mode, AUTH) as (client, inbox):
            listed = json.loads((await client.read_resource("nb://kernels")).contents[0].text)["kernels"]
            assert {k["label"]: k["served_by"] for k in listed}["remote"] == "hub"
            read = await client.read_resource("nb://kernels/remote/vars/x")
            assert json.loads(read.contents[0].text)["repr"].startswith("[1, 2, 3")
            uri = "nb://kernels/remote/vars/x"
            if mode == "legacy":
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    await client.subscribe_resource(uri)
                await anyio.sleep(0.5)
                await anyio.to_thread.run_sync(_cell, setup, "x.append(4)")
                await inbox.wait_for(lambda i: uri in i.updated, timeout=15)
            else:
                async with client.listen(resource_subscriptions=[uri]) as sub:
                    await anyio.sleep(0.5)
                    await anyio.to_thread.run_sync(_cell, setup, "x.append(5)")
                    with anyio.fail_after(15):
                        async for event in sub:
                            if getattr(event, "uri", None) == uri:
                                break

    anyio.run(go)


@pytest.fixture(scope="module")
def zmq_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """A plain server told to reach every hub over the control channel (kernels in containers):
    the ZeroMQ wire with the kernel manager's connection info, no websocket."""
    from jserver import load_hub, run

    server = JupyterServer(
        tmp_path_factory.mktemp("zmq"), token=TOKEN, extra_args=("--MCPNotebookExtension.route=control",)
    )
    try:
        kid = server.start_session("boxed.ipynb")
        kc = server.client(kid)
        load_hub(kc)
        run(kc, "boxed = 'in a box'")
        yield {"server": server, "id": kid, "kc": kc}
    finally:
        server.stop()


def test_replies_over_zeromq_are_never_lost_while_requests_are_sent(zmq_server):
    """Many requests in flight over one kernel's ZeroMQ control socket, so the server sends while
    replies arrive: every one is answered. The wire used to wait for replies in a poller of its own,
    whose wake-up a send on the same socket could consume: the reader then slept for good with the
    reply queued (every later request of that kernel timed out after 60 s)."""
    from mcp_notebook.protocol.wire_stateless import request_headers

    server = zmq_server["server"]
    url = server.mcp_url(zmq_server["id"])
    version = "2026-07-28"
    meta = {"io.modelcontextprotocol/protocolVersion": version, "io.modelcontextprotocol/clientCapabilities": {}}
    params = {"uri": "nb://vars/boxed", "_meta": meta}
    headers = {**ACCEPT, "Authorization": AUTH, **request_headers("resources/read", params, version)}

    async def go() -> None:
        async with httpx.AsyncClient(timeout=20) as http:

            async def read(rid: int) -> None:
                body = {"jsonrpc": "2.0", "id": rid, "method": "resources/read", "params": params}
                r = await http.post(url, json=body, headers=headers)
                assert r.status_code == 200 and "boxed" in r.text, (rid, r.status_code, r.text[:300])

            for round_ in range(40):  # bounded: 40 rounds of 8 at once
                async with anyio.create_task_group() as tg:
                    for i in range(8):
                        tg.start_soon(read, round_ * 8 + i)

    anyio.run(go)


@pytest.mark.parametrize("mode", ["auto", "legacy"])
def test_control_carrier_over_zeromq(zmq_server, mode):
    from jserver import run

    server = zmq_server["server"]
    listed = server.http.get("mcp-notebook/kernels").json()
    assert [(k["kernel_id"], k["route"]) for k in listed] == [(zmq_server["id"], "control")]
    url = server.mcp_url(zmq_server["id"])

    async def go() -> None:
        async with sdk(url, mode, AUTH) as (client, inbox):
            read = await client.read_resource("nb://vars/boxed")
            assert json.loads(read.contents[0].text)["type"] == "str"
            if mode == "legacy":
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    await client.subscribe_resource("nb://vars/boxed")
                await anyio.sleep(0.3)
                await anyio.to_thread.run_sync(run, zmq_server["kc"], "boxed = 'moved'")
                await inbox.wait_for(lambda i: "nb://vars/boxed" in i.updated, timeout=15)
            else:
                async with client.listen(resource_subscriptions=["nb://vars/boxed"]) as sub:
                    await anyio.to_thread.run_sync(run, zmq_server["kc"], "boxed = 'moved again'")
                    with anyio.fail_after(15):
                        async for event in sub:
                            if getattr(event, "uri", None) == "nb://vars/boxed":
                                break

    anyio.run(go)


def test_the_stdio_bridge_reaches_gateway_kernels(setup):
    """`mcp-notebook bridge --server URL`, knowing only the server and its token, both ways in."""
    import os
    import sys

    from mcp import Client
    from mcp.client.stdio import StdioServerParameters

    env = {**os.environ, "MCP_NOTEBOOK_SERVER_TOKEN": TOKEN}
    base = setup["server"].url

    async def bridged(args: list[str], uri: str, expected: str = '"name": "x"') -> None:
        params = StdioServerParameters(
            command=sys.executable, args=["-m", "mcp_notebook", "bridge", "--server", base, *args], env=env
        )
        async with Client(params, cache=None) as client:
            read = await client.call_tool("read_resource", {"uri": uri})
            assert not read.is_error and expected in read.content[0].text, read.content[0].text[:500]

    anyio.run(bridged, [], "nb://kernels/remote/vars/x")
    anyio.run(bridged, ["--kernel", setup["id"]], "nb://vars/x")
    _wait_served(setup, setup["bare"])  # and the kernel without a hub, served from the server's side
    anyio.run(bridged, [], "nb://kernels/bare/kernel", '"served_by": "jupyter-server"')


def test_bad_control_messages_get_clear_answers_and_streams_are_bounded(setup):
    """Malformed requests are answered with a status, the kernel keeps running; one sender holds at
    most 16 streams; cancelling ends them at the hub."""
    from mcp_notebook.transport.control import MAX_STREAMS

    ws = _control(setup)
    try:
        token = _ask(ws, "mcp_info_request", {})[0]["content"]["token"]
        before = _open_streams(setup)  # other senders' (the all-kernels front keeps a listen)
        auth = {"host": "127.0.0.1", "authorization": f"Bearer {token}", "content-type": "application/json"}
        cases = [
            ({"method": "POST", "headers": "nope", "body": ""}, 400),
            ({"method": "POST", "headers": {f"x-{i}": "v" for i in range(70)}, "body": ""}, 400),
            ({"method": "POST", "headers": auth, "body": "x" * 1_000_001}, 413),
            ({"method": "POST", "headers": auth, "body": "{not json"}, 400),
            ({}, 405),
        ]
        for content, status in cases:
            assert _ask(ws, "mcp_request", content)[0]["content"]["status"] == status, content
        _send(ws, "mcp_cancel", {"request": "nothing"})  # cancels nothing, answers nothing
        meta = {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {},
        }
        listen = json.dumps(
            {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "subscriptions/listen",
                "params": {"notifications": {"resourcesListChanged": True}, "_meta": meta},
            }
        )
        h = {**auth, "accept": "application/json, text/event-stream", "mcp-protocol-version": "2026-07-28"}
        h["mcp-method"] = "subscriptions/listen"
        first = _ask(ws, "mcp_request", {"method": "POST", "headers": h, "body": listen}, final=False)
        assert first[0]["content"]["status"] == 200, first
        opened = [first[0]["parent_header"]["msg_id"]]
        for _ in range(MAX_STREAMS - 1):
            opened.append(_send(ws, "mcp_request", {"method": "POST", "headers": h, "body": listen}))
        assert _wait_streams(setup, before + MAX_STREAMS), _open_streams(setup)
        refused = _ask(ws, "mcp_request", {"method": "POST", "headers": h, "body": listen})
        assert refused[0]["content"]["status"] == 429
        for msg_id in opened:
            _send(ws, "mcp_cancel", {"request": msg_id})
        assert _wait_streams(setup, before), _open_streams(setup)
    finally:
        ws.close()
    assert _cell(setup, "print(1 + 1)").strip() == "2"


# -- kernels behind the gateway without a hub: served from what the gateway relays (issue #43) --------
PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="


def _bare_cell(setup: dict[str, Any], code: str) -> str:
    """Run code in the hub-less kernel through the server's kernel websocket (a browser's path)."""
    sock = setup["bare_sock"]
    content = {"code": code, "silent": False, "store_history": True, "stop_on_error": False}  # the next runs
    try:
        return sock.wait_reply(sock.send("shell", "execute_request", content))
    except AssertionError as exc:  # a cell that raises: its traceback
        return str(exc)


def _running(cells: list[dict[str, Any]]) -> bool:
    return any(c.get("status") == "running" for c in cells)


async def _json(client: Any, uri: str) -> Any:
    return json.loads((await client.read_resource(uri)).contents[0].text)


@pytest.mark.parametrize("mode", ["auto", "legacy"])
def test_a_gateway_kernel_without_a_hub_serves_its_cells_and_outputs(setup, mode):
    """Cells run through the server's websocket (any client) are read from what the gateway relays,
    per kernel and through the all-kernels endpoint; a finished cell is notified in both eras."""
    import base64

    _wait_served(setup, setup["bare"])
    assert _bare_cell(setup, f"print('gw says {mode}')").strip() == f"gw says {mode}"
    assert "ZeroDivisionError" in _bare_cell(setup, "1 / 0")
    _bare_cell(setup, f"from IPython.display import display\ndisplay({{'image/png': '{PNG}'}}, raw=True)")
    url = setup["server"].mcp_url(setup["bare"])

    async def go() -> None:
        async with sdk(url, mode, AUTH) as (client, inbox):
            summary = await _json(client, "nb://kernel")
            assert summary["language"] == "python" and summary["served_by"] == "jupyter-server"
            assert summary["kernel_id"] == setup["bare"] and summary["last_execution"], summary
            with anyio.fail_after(15):  # the gateway relays to each websocket on its own: the last may lag
                while len(cells := (await _json(client, "nb://cells"))["cells"]) < 3 or _running(cells):
                    await anyio.sleep(0.1)
            printed, failed, shown = cells[-3:]
            assert failed["status"] == "error" and "ZeroDivisionError" in json.dumps(
                await _json(client, f"nb://cells/{failed['seq']}")
            )
            assert f"gw says {mode}" in json.dumps(await _json(client, f"nb://cells/{printed['seq']}"))
            blob = (await client.read_resource(f"nb://cells/{shown['seq']}/outputs/0")).contents[0]
            assert base64.b64decode(blob.blob) == base64.b64decode(PNG)  # the exact bytes
            # variables: the kernel's debugger (inspectVariables) asked through the gateway, idle only
            seen = "print(len(In), get_ipython().execution_count)"
            before = await anyio.to_thread.run_sync(_bare_cell, setup, f"gw_{mode} = 6 * 7\n{seen}")
            var = await _json(client, f"nb://vars/gw_{mode}")
            assert var["value"] == "42" and "debugger" in var["source"], var
            with pytest.raises(Exception, match="no variable"):
                await client.read_resource("nb://vars/not_there")
            after = await anyio.to_thread.run_sync(_bare_cell, setup, seen)
            assert [int(n) + 1 for n in before.split()] == [int(n) for n in after.split()]  # no cell of ours
            await _notified(client, inbox, mode, "nb://cells", lambda: _bare_cell(setup, "notified = 1"))

    anyio.run(go)


async def _notified(client: Any, inbox: Any, mode: str, uri: str, run: Any) -> None:
    """``run`` in a thread; ``uri`` is then notified as updated (a subscription, or a listen)."""
    if mode == "legacy":
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            await client.subscribe_resource(uri)
        await anyio.sleep(0.3)
        await anyio.to_thread.run_sync(run)
        await inbox.wait_for(lambda i: uri in i.updated, timeout=15)
        return
    async with client.listen(resource_subscriptions=[uri]) as sub:
        await anyio.sleep(0.3)
        await anyio.to_thread.run_sync(run)
        with anyio.fail_after(15):
            async for event in sub:
                if getattr(event, "uri", None) == uri:
                    break


@pytest.mark.parametrize("mode", ["auto", "legacy"])
def test_every_gateway_kernel_in_the_all_kernels_listing(setup, mode):
    _wait_served(setup, setup["bare"])
    url = f"{setup['server'].url}mcp-notebook/mcp"

    async def go() -> None:
        async with sdk(url, mode, AUTH) as (client, inbox):
            kernels = {k["label"]: k for k in (await _json(client, "nb://kernels"))["kernels"]}
            assert kernels["remote"]["served_by"] == "hub"
            bare = kernels["bare"]
            assert bare["served_by"] == "jupyter-server" and bare["language"] == "python"
            assert bare["display_name"] and bare["state"] in ("idle", "busy"), bare
            await _notified(client, inbox, mode, "nb://kernels/bare/cells", lambda: _bare_cell(setup, "print(2)"))
            cells = (await _json(client, "nb://kernels/bare/cells"))["cells"]
            assert cells[-1]["status"] == "ok"

    anyio.run(go)


def test_has_no_hub_is_asked_once_not_per_request(setup):
    """The gateway kernel's silence on its control channel (5 s) is learnt once: reads answer at once."""
    _wait_served(setup, setup["bare"])
    url = setup["server"].mcp_url(setup["bare"])

    async def go() -> float:
        async with sdk(url, "auto", AUTH) as (client, _):
            started = time.monotonic()
            for _ in range(4):
                await client.read_resource("nb://kernel")
            return time.monotonic() - started

    assert anyio.run(go) < 5  # four reads; each paying the silence would take 20 s


def test_loading_the_hub_later_moves_a_gateway_kernel_to_its_control_channel(setup):
    """%load_ext in a kernel served from the server's side: the hub's announcement makes the server ask
    again, and the kernel is then served by its hub over the control channel."""
    server = setup["server"]
    kid = server.start_kernel()
    _wait_served(setup, kid)
    sock = KernelSocket(server.url, TOKEN, kid)  # (opened once the kernel is up, as a browser tab)
    try:
        sock.execute("later = 'from the hub'")
        sock.execute("%load_ext mcp_notebook")
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            rows = {r["kernel_id"]: r for r in server.http.get("mcp-notebook/kernels").json()}
            if rows.get(kid, {}).get("route") == "control":
                break
            time.sleep(0.2)
        assert rows[kid]["route"] == "control", rows

        async def go() -> None:
            async with sdk(server.mcp_url(kid), "auto", AUTH) as (client, _):
                assert (await _json(client, "nb://vars/later"))["repr"] == "'from the hub'"

        anyio.run(go)
    finally:
        sock.close()
        server.http.delete(f"api/kernels/{kid}")


def test_an_r_kernel_behind_the_gateway(setup):
    """IRkernel behind the gateway, no hub possible: its cells, plot and error from what the gateway relays."""
    import shutil
    from pathlib import Path

    if shutil.which("R") is None or not Path("/usr/share/jupyter/kernels/ir/kernel.json").exists():
        pytest.skip("R and IRkernel are not installed (scripts/test.sh installs them where apt-get exists)")
    server = setup["server"]
    r = server.http.post("api/sessions", json={"path": "gwstats.ipynb", "type": "notebook", "kernel": {"name": "ir"}})
    assert r.status_code == 201, r.text
    rid = r.json()["kernel"]["id"]
    _wait_served(setup, rid)
    sock = KernelSocket(server.url, TOKEN, rid)  # (opened once the kernel is up, as a browser tab)
    try:
        assert "x" in sock.execute('df <- data.frame(a = 1:3, b = c("x", "y", "z")); print(df)')
        sock.execute("plot(1:10)")
        with pytest.raises(AssertionError, match="boom"):
            sock.execute('stop("boom")')

        async def go() -> None:
            async with sdk(f"{server.url}mcp-notebook/mcp", "auto", AUTH) as (client, _):
                kernels = {k["label"]: k for k in (await _json(client, "nb://kernels"))["kernels"]}
                assert kernels["gwstats"]["language"] == "R" and kernels["gwstats"]["served_by"] == "jupyter-server"
                with anyio.fail_after(15):
                    while (cells := (await _json(client, "nb://kernels/gwstats/cells"))["cells"])[-1][
                        "status"
                    ] == "running":
                        await anyio.sleep(0.1)
                assert cells[-1]["status"] == "error" and "data.frame" in json.dumps(cells)
                plot = await client.read_resource(f"nb://kernels/gwstats/cells/{cells[-2]['seq']}/outputs/0")
                assert plot.contents[0].mime_type == "image/png"
                var = await _json(client, "nb://kernels/gwstats/vars/df")  # IRkernel's inspect_request
                assert var["class"] == ["data.frame"] and "x" in var["printed"], var

        anyio.run(go)
    finally:
        sock.close()
        server.http.delete(f"api/sessions/{r.json()['id']}")


def test_a_gateway_kernel_restart_is_told_and_a_deleted_one_is_gone(setup):
    """A restart through the server: the history stays, ``restarts`` counts it, the kernel is served
    again; a deleted kernel leaves the listing and its route says so."""
    server = setup["server"]
    kid = server.start_kernel()
    _wait_served(setup, kid)
    sock = KernelSocket(server.url, TOKEN, kid)  # (opened once the kernel is up, as a browser tab)
    try:
        assert sock.execute("print('before the restart')").strip() == "before the restart"
    finally:
        sock.close()  # a browser reconnects after a restart: so does this client
    assert server.http.post(f"api/kernels/{kid}/restart").status_code == 200

    async def restarted() -> None:
        async with sdk(server.mcp_url(kid), "auto", AUTH) as (client, _):
            with anyio.fail_after(20):
                while (await _json(client, "nb://kernel"))["restarts"] < 1:
                    await anyio.sleep(0.2)

    anyio.run(restarted)
    time.sleep(1.5)  # the feed is opened anew a moment after a restart
    sock = KernelSocket(server.url, TOKEN, kid)
    try:
        assert sock.execute("print('after')", timeout=30).strip() == "after"
    finally:
        sock.close()

    async def go() -> None:
        async with sdk(server.mcp_url(kid), "auto", AUTH) as (client, _):
            with anyio.fail_after(15):
                while (cells := (await _json(client, "nb://cells"))["cells"])[-1]["first_line"] != "print('after')":
                    await anyio.sleep(0.2)
            assert cells[0]["first_line"] == "print('before the restart')"  # the history outlives it
            assert (await _json(client, "nb://kernel"))["restarts"] == 1

    anyio.run(go)
    assert server.http.delete(f"api/kernels/{kid}").status_code == 204
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline and kid in {
        r["kernel_id"] for r in server.http.get("mcp-notebook/kernels").json()
    }:
        time.sleep(0.2)
    assert kid not in {r["kernel_id"] for r in server.http.get("mcp-notebook/kernels").json()}
    r = server.http.post(server.mcp_url(kid), headers=ACCEPT, json={"jsonrpc": "2.0", "id": 1, "method": "ping"})
    assert r.status_code == 404, r.text
