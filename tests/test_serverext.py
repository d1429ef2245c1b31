"""The Jupyter server extension against a real ``jupyter server``: kernels started through its REST
API, hubs loaded in them, the official SDK client in both eras speaking to the server URL with the
Jupyter token, raw HTTP for the pipe's edges, and refusal of everyone without the token."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import threading
import time
import warnings
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import httpx2
import pytest
from jserver import JupyterServer, load_hub, run
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from sdk import Inbox

TOKEN = "serverext-test-token"
NOTEBOOK = "work/analysis.ipynb"
INIT = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "pytest", "version": "1"}}
ACCEPT = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[JupyterServer]:
    s = JupyterServer(tmp_path_factory.mktemp("jserver"), token=TOKEN)
    try:
        yield s
    finally:
        s.stop()


@pytest.fixture(scope="module")
def kernel(server: JupyterServer) -> dict[str, Any]:
    """A notebook session's kernel with the hub loaded: its id, a client, the hub's info."""
    kid = server.start_session(NOTEBOOK)
    kc = server.client(kid)
    info = load_hub(kc)
    return {"id": kid, "kc": kc, "hub": info, "url": server.mcp_url(kid)}


@contextlib.asynccontextmanager
async def sdk(url: str, mode: str, auth: str) -> AsyncIterator[tuple[Client, Inbox]]:
    inbox = Inbox()
    async with httpx2.AsyncClient(headers={"Authorization": auth}, timeout=httpx2.Timeout(30, read=300)) as http:
        transport = streamable_http_client(url, http_client=http)
        async with Client(transport, message_handler=inbox.handle, mode=mode, cache=None) as client:
            yield client, inbox


async def cell(kernel: dict[str, Any], code: str) -> str:
    return await anyio.to_thread.run_sync(run, kernel["kc"], code)


def test_config_file_enables_the_extension(tmp_path):
    doc = json.loads((ROOT / "jupyter-config" / "server-config" / "mcp_notebook.json").read_text())
    assert doc == {"ServerApp": {"jpserver_extensions": {"mcp_notebook": True}}}
    import mcp_notebook
    from mcp_notebook.serverext.extension import MCPNotebookExtension

    points = [{"module": "mcp_notebook.serverext", "app": MCPNotebookExtension}]
    assert mcp_notebook._jupyter_server_extension_points() == points
    # a server that has only the config file in its jupyter_server_config.d serves the routes,
    # under its base URL (JupyterHub's /user/<name>/)
    s = JupyterServer(tmp_path, token=TOKEN, base_url="/user/alice/", by_config_file=True)
    try:
        assert s.http.get("mcp-notebook/kernels").json() == []
        assert httpx.get(s.url + "mcp-notebook/kernels", timeout=30).status_code == 403
        kid = s.start_kernel()
        load_hub(s.client(kid))
        (entry,) = s.http.get("mcp-notebook/kernels").json()
        assert entry["mcp_path"] == f"/user/alice/mcp-notebook/kernels/{kid}/mcp"

        async def go():
            async with sdk(s.mcp_url(kid), "auto", f"token {TOKEN}") as (client, _):
                assert "nb://kernel" in {str(r.uri) for r in (await client.list_resources()).resources}

        anyio.run(go)
    finally:
        s.stop()


def test_kernels_lists_hubs_without_secrets(server, kernel):
    other = server.start_kernel()  # a kernel without a hub is listed as served by the server (issue #43)
    deadline = time.monotonic() + 30
    while True:
        r = server.http.get("mcp-notebook/kernels")
        assert r.status_code == 200, r.text
        served = [e for e in r.json() if e["carrier"] == "server"]
        if served or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert [(e["kernel_id"], e["language"]) for e in served] == [(other, "python")]
    entries = [e for e in r.json() if e["carrier"] != "server"]
    assert [e["kernel_id"] for e in entries] == [kernel["id"]]
    entry = entries[0]
    assert entry["notebook_path"] == NOTEBOOK
    assert "2026-07-28" in entry["protocol_versions"] and "2025-11-25" in entry["protocol_versions"]
    assert entry["mcp_path"] == f"/mcp-notebook/kernels/{kernel['id']}/mcp"
    assert kernel["hub"]["token"] not in r.text and str(kernel["hub"]["url"]) not in r.text
    server.http.delete(f"api/kernels/{other}")


def test_unknown_kernel_is_404(server, kernel):
    r = server.http.post(
        "mcp-notebook/kernels/00000000-0000-0000-0000-000000000000/mcp", headers=ACCEPT, json={"jsonrpc": "2.0"}
    )
    assert r.status_code == 404 and r.json()["reason"] == "unknown_kernel"
    assert r.headers["x-mcp-notebook-reason"] == "unknown_kernel"


@pytest.mark.parametrize("auth", [None, "token wrong-token", "Bearer wrong-token", f"Bearer {TOKEN}x"])
def test_every_route_refuses_without_the_jupyter_token(server, kernel, auth):
    routes = ["mcp-notebook/kernels", f"mcp-notebook/kernels/{kernel['id']}/mcp"]
    headers = {**ACCEPT, **({"Authorization": auth} if auth else {})}
    hub_token = kernel["hub"]["token"]
    with httpx.Client(base_url=server.url, timeout=30) as raw:
        for route in routes:
            for method in ("GET", "POST", "DELETE", "OPTIONS", "PUT", "PATCH", "HEAD"):
                body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": INIT})
                r = raw.request(method, route, headers=headers, content=body if method == "POST" else None)
                assert r.status_code in (401, 403), (method, route, r.status_code, r.text)
                assert "jsonrpc" not in r.text and "mcp-session-id" not in r.headers
        # the hub's own token is no key to the server either
        r = raw.post(routes[1], headers={**ACCEPT, "Authorization": f"Bearer {hub_token}"}, json={"jsonrpc": "2.0"})
        assert r.status_code == 403


@pytest.mark.parametrize("mode", ["auto", "legacy"])
def test_sdk_list_and_read_through_the_server(server, kernel, mode):
    run(kernel["kc"], "remote_x = [1, 2, 3]")
    auth = f"token {TOKEN}" if mode == "auto" else f"Bearer {TOKEN}"

    async def go():
        async with sdk(kernel["url"], mode, auth) as (client, _):
            assert client.protocol_version == ("2026-07-28" if mode == "auto" else "2025-11-25")
            uris = {str(r.uri) for r in (await client.list_resources()).resources}
            assert {"nb://kernel", "nb://vars", "nb://vars/remote_x"} <= uris
            read = await client.read_resource("nb://vars/remote_x")
            assert json.loads(read.contents[0].text)["repr"] == "[1, 2, 3]"
            doc = json.loads((await client.read_resource("nb://kernel")).contents[0].text)
            assert doc["kernel_id"] == kernel["id"] and doc["notebook_path"] == NOTEBOOK

    anyio.run(go)


def test_handshake_subscription_gets_updated_through_the_get_stream(server, kernel):
    run(kernel["kc"], "remote_watched = [1]")

    async def go():
        async with sdk(kernel["url"], "legacy", f"token {TOKEN}") as (client, inbox):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                await client.subscribe_resource("nb://vars/remote_watched")
            await anyio.sleep(0.3)  # the SDK opens its GET stream in the background
            await cell(kernel, "remote_watched.append(2)")
            await inbox.wait_for(lambda i: "nb://vars/remote_watched" in i.updated, timeout=15)
            read = await client.read_resource("nb://vars/remote_watched")
            assert json.loads(read.contents[0].text)["repr"] == "[1, 2]"

    anyio.run(go)


def test_stateless_listen_streams_through_the_server(server, kernel):
    run(kernel["kc"], "remote_listened = {'a': 1}")

    async def go():
        async with sdk(kernel["url"], "auto", f"token {TOKEN}") as (client, _):
            async with client.listen(
                resource_subscriptions=["nb://vars/remote_listened"], resources_list_changed=True
            ) as sub:
                assert list(sub.honored.resource_subscriptions) == ["nb://vars/remote_listened"]
                await cell(kernel, "remote_listened['b'] = 2")
                with anyio.fail_after(15):
                    async for event in sub:
                        if getattr(event, "uri", None) == "nb://vars/remote_listened":
                            break
                await cell(kernel, "remote_brand_new = 5")
                with anyio.fail_after(15):
                    async for event in sub:
                        if type(event).__name__ == "ResourcesListChanged":
                            break

    anyio.run(go)
    # the client closed its listen stream: the proxy ended the hub's side too
    assert wait_streams(kernel, 0), "the hub still holds the listen stream of a client that left"


def _initialize(http: httpx.Client, url: str) -> str:
    r = http.post(url, headers=ACCEPT, json={"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": INIT})
    assert r.status_code == 200, r.text
    sid = r.headers["mcp-session-id"]
    h = {**ACCEPT, "Mcp-Session-Id": sid, "MCP-Protocol-Version": "2025-11-25"}
    assert http.post(url, headers=h, json={"jsonrpc": "2.0", "method": "notifications/initialized"}).status_code == 202
    return sid


def test_session_delete_and_headers_pass_through(server, kernel):
    http = server.http
    sid = _initialize(http, kernel["url"])
    h = {**ACCEPT, "Mcp-Session-Id": sid, "MCP-Protocol-Version": "2025-11-25"}
    r = http.post(kernel["url"], headers=h, json={"jsonrpc": "2.0", "id": 1, "method": "ping"})
    assert r.status_code == 200 and r.json()["result"] == {}
    assert r.headers["content-type"].startswith("application/json")
    assert http.delete(kernel["url"], headers=h).status_code in (200, 202, 204)
    r = http.post(kernel["url"], headers=h, json={"jsonrpc": "2.0", "id": 2, "method": "ping"})
    assert r.status_code == 404  # the hub's answer for an ended session, passed through
    r = http.post(kernel["url"], headers={**ACCEPT, "MCP-Protocol-Version": "1999-01-01"}, json={"jsonrpc": "2.0"})
    assert r.status_code == 400  # the hub's status codes pass through
    # stateless era: GET is not part of it; the hub's 405 and its Allow header come back
    r = http.get(kernel["url"], headers={"Accept": "text/event-stream", "MCP-Protocol-Version": "2026-07-28"})
    assert r.status_code in (400, 405)


def test_get_stream_is_not_buffered_and_client_disconnect_ends_it(server, kernel):
    """An event reaches the client while the stream stays open; closing the client frees the hub stream."""
    run(kernel["kc"], "remote_stream = 1")
    http = server.http
    sid = _initialize(http, kernel["url"])
    h = {**ACCEPT, "Mcp-Session-Id": sid, "MCP-Protocol-Version": "2025-11-25"}
    sub = {"jsonrpc": "2.0", "id": 1, "method": "resources/subscribe", "params": {"uri": "nb://vars/remote_stream"}}
    assert http.post(kernel["url"], headers=h, json=sub).status_code == 200
    got: list[str] = []
    opened = threading.Event()

    def trigger() -> None:
        opened.wait(15)
        run(kernel["kc"], "remote_stream = 2")

    t = threading.Thread(target=trigger, daemon=True)
    t.start()
    with http.stream("GET", kernel["url"], headers={**h, "Accept": "text/event-stream"}) as r:
        assert r.status_code == 200
        assert r.headers["content-type"].startswith("text/event-stream")
        assert "content-length" not in r.headers
        opened.set()
        deadline = time.monotonic() + 40  # the hub's keepalives (every 15 s) let this check run
        for line in r.iter_lines():
            if time.monotonic() > deadline:
                break
            if line.startswith("data:"):
                got.append(line)
                if "nb://vars/remote_stream" in line:
                    break
    t.join(30)
    assert any("notifications/resources/updated" in g for g in got)
    # the client went away: the proxy closed its hub connection and the hub ended that stream
    assert wait_streams(kernel, 0), "the hub still holds the stream of a client that left"
    http.delete(kernel["url"], headers=h)


def hub_streams(kernel: dict[str, Any]) -> int:
    return int(run(kernel["kc"], "import mcp_notebook as _m; print(len(_m.hub().transport.streams))").strip())


def wait_streams(kernel: dict[str, Any], count: int, timeout: float = 15) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if hub_streams(kernel) == count:
            return True
        time.sleep(0.2)
    return False


def test_body_limit_and_foreign_origin(server, kernel):
    big = b'{"jsonrpc":"2.0","id":1,"method":"ping","params":{"pad":"' + b"x" * 1_100_000 + b'"}}'
    r = server.http.post(kernel["url"], headers=ACCEPT, content=big)
    assert r.status_code == 413
    # the browser's own origin (same host as the server) is fine: the hub never sees an Origin
    same = {**ACCEPT, "Origin": server.url.rstrip("/")}
    r = server.http.post(
        kernel["url"], headers=same, json={"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": INIT}
    )
    assert r.status_code == 200, r.text
    server.http.delete(kernel["url"], headers={**ACCEPT, "Mcp-Session-Id": r.headers["mcp-session-id"]})
    # a foreign Origin is refused even with the token (MCP: present and invalid -> 403), before the hub
    foreign = {**ACCEPT, "Origin": "http://evil.example.com"}
    body = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": INIT}
    r = server.http.post(kernel["url"], headers=foreign, json=body)
    assert r.status_code == 403 and "jsonrpc" not in r.text
    # and a foreign Host (DNS rebinding) by Jupyter's own check
    r = server.http.post(kernel["url"], headers={**ACCEPT, "Host": "evil.example.com"}, json=body)
    assert r.status_code == 403 and "jsonrpc" not in r.text


def test_browser_cookie_needs_xsrf_and_its_own_origin(server, kernel):
    """A browser logged in with a cookie: XSRF token and same Origin required, as for Jupyter's own API."""
    with httpx.Client(base_url=server.url, timeout=30) as browser:
        browser.get("login")
        xsrf = browser.cookies.get("_xsrf")
        assert xsrf
        r = browser.post("login", data={"password": TOKEN, "_xsrf": xsrf})
        assert r.status_code in (200, 302), r.text
        assert browser.get("mcp-notebook/kernels").status_code == 200  # the cookie authenticates
        body = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": INIT}
        origin = server.url.rstrip("/")
        r = browser.post(kernel["url"], headers={**ACCEPT, "Origin": origin}, json=body)
        assert r.status_code == 403  # no XSRF token
        h = {**ACCEPT, "Origin": origin, "X-XSRFToken": xsrf}
        r = browser.post(kernel["url"], headers=h, json=body)
        assert r.status_code == 200, r.text
        browser.delete(kernel["url"], headers={**h, "Mcp-Session-Id": r.headers["mcp-session-id"]})
        r = browser.post(kernel["url"], headers={**h, "Origin": "http://evil.example.com"}, json=body)
        assert r.status_code in (403, 404) and "jsonrpc" not in r.text


def test_hub_going_away_ends_the_stream_and_a_new_hub_is_found(server, kernel):
    """Upstream end reaches the client; after %mcp start (new port, new token) the same URL works."""
    http = server.http
    sid = _initialize(http, kernel["url"])
    h = {**ACCEPT, "Mcp-Session-Id": sid, "MCP-Protocol-Version": "2025-11-25", "Accept": "text/event-stream"}
    stopper = threading.Timer(0.5, run, args=(kernel["kc"], "%mcp stop"))
    with http.stream("GET", kernel["url"], headers=h) as r:
        assert r.status_code == 200
        stopper.start()
        lines = list(r.iter_lines())  # ends when the hub stops (bounded by the client's read timeout)
    stopper.join(30)
    assert all(not line.startswith("data:") or "jsonrpc" in line for line in lines)
    r = http.post(
        kernel["url"], headers=ACCEPT, json={"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": INIT}
    )
    # without its hub the kernel is served from the server's side (issue #43), not refused
    assert r.status_code == 200 and "served by the Jupyter server" in r.text, r.text
    http.delete(kernel["url"], headers={**ACCEPT, "Mcp-Session-Id": r.headers["mcp-session-id"]})
    run(kernel["kc"], "%mcp start")
    r = http.post(
        kernel["url"], headers=ACCEPT, json={"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": INIT}
    )
    assert r.status_code == 200 and "served by the Jupyter server" not in r.text, r.text  # its hub again
    http.delete(kernel["url"], headers={**ACCEPT, "Mcp-Session-Id": r.headers["mcp-session-id"]})


# -- the stdio bridge and the config command against the remote server ------------------------------
def bridge_params(server: JupyterServer, *args: str, token: str = TOKEN) -> StdioServerParameters:
    return StdioServerParameters(
        command=sys.executable,
        args=["-m", "mcp_notebook.commands.cli", "bridge", "--server", server.url, *args],
        env={"MCP_NOTEBOOK_SERVER_TOKEN": token, "JUPYTER_RUNTIME_DIR": "/nonexistent-runtime-dir"},
    )


@pytest.mark.parametrize("mode", ["legacy", "auto"])
def test_bridge_server_end_to_end(server, kernel, mode):
    run(kernel["kc"], "bridged_remote = [1]")

    async def go():
        inbox = Inbox()
        params = bridge_params(server, "--kernel", kernel["id"][:8])
        async with Client(params, mode=mode, message_handler=inbox.handle, cache=None) as client:
            uris = {str(r.uri) for r in (await client.list_resources()).resources}
            assert "nb://vars/bridged_remote" in uris
            read = await client.read_resource("nb://vars/bridged_remote")
            assert json.loads(read.contents[0].text)["repr"] == "[1]"
            if mode == "legacy":
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    await client.subscribe_resource("nb://vars/bridged_remote")
                await anyio.sleep(0.3)
                await cell(kernel, "bridged_remote.append(2)")
                await inbox.wait_for(lambda i: "nb://vars/bridged_remote" in i.updated, timeout=15)
            else:
                async with client.listen(resource_subscriptions=["nb://vars/bridged_remote"]) as sub:
                    await cell(kernel, "bridged_remote.append(3)")
                    with anyio.fail_after(15):
                        async for event in sub:
                            if getattr(event, "uri", None) == "nb://vars/bridged_remote":
                                break

    anyio.run(go)


def test_bridge_server_with_a_wrong_token_says_so(server, kernel):
    async def go():
        params = bridge_params(server, "--notebook", NOTEBOOK, token="wrong")
        async with Client(params, mode="legacy", cache=None) as client:
            await client.list_resources()

    with pytest.raises(BaseException) as caught:
        anyio.run(go)
    assert "refused the token" in " ".join(leaves(caught.value))


def leaves(exc: BaseException) -> list[str]:
    """Messages of an exception and of everything inside an exception group."""
    inner = getattr(exc, "exceptions", None)  # an exception group (Python 3.11+, or the backport)
    if isinstance(inner, (list, tuple)):
        return [m for e in inner for m in leaves(e)]
    return [str(exc)]


def test_bridge_server_without_a_token_exits(server):
    env = {k: v for k, v in os.environ.items() if k not in ("MCP_NOTEBOOK_SERVER_TOKEN", "JUPYTER_TOKEN")}
    proc = subprocess.run(
        [sys.executable, "-m", "mcp_notebook.commands.cli", "bridge", "--server", server.url],
        env=env,
        input=b"",
        capture_output=True,
        timeout=60,
    )
    assert proc.returncode == 2 and b"MCP_NOTEBOOK_SERVER_TOKEN" in proc.stderr


def test_list_server(server, kernel, monkeypatch, capsys):
    from mcp_notebook.commands.cli import main

    monkeypatch.setenv("MCP_NOTEBOOK_SERVER_TOKEN", TOKEN)
    assert main(["list", "--server", server.url]) == 0
    out = capsys.readouterr().out
    assert kernel["id"] in out and NOTEBOOK in out and TOKEN not in out
    assert main(["list", "--server", server.url, "--json"]) == 0
    assert [e["kernel_id"] for e in json.loads(capsys.readouterr().out)] == [kernel["id"]]
    monkeypatch.setenv("MCP_NOTEBOOK_SERVER_TOKEN", "wrong")
    assert main(["list", "--server", server.url]) == 1
    assert "refused the token" in capsys.readouterr().err


def test_config_server_writes_http_and_bridge_entries(server, kernel, tmp_path, monkeypatch, capsys):
    from mcp_notebook.commands.cli import main

    monkeypatch.setenv("MCP_NOTEBOOK_SERVER_TOKEN", TOKEN)
    # printed: the token is masked
    assert main(["config", "claude-code", "--server", server.url, "--http", "--kernel", kernel["id"]]) == 0
    printed = capsys.readouterr().out
    assert TOKEN not in printed and server.mcp_url(kernel["id"]) in printed
    # written: the HTTP entry with Jupyter's token header, owner-only
    path = tmp_path / ".mcp.json"
    assert main(["config", "claude-code", "--server", server.url, "--http", "--path", str(path)]) == 0
    assert path.stat().st_mode & 0o777 == 0o600
    entry = json.loads(path.read_text())["mcpServers"]["notebook"]
    assert entry == {
        "type": "http",
        "url": f"{server.url}mcp-notebook/mcp",  # no selector: every kernel of the server
        "headers": {"Authorization": f"token {TOKEN}"},
    }
    # the bridge form carries the token in its env (file owner-only), or names a token file
    vs = tmp_path / "mcp.json"
    assert main(["config", "vscode", "--server", server.url, "--notebook", NOTEBOOK, "--path", str(vs)]) == 0
    entry = json.loads(vs.read_text())["servers"]["notebook"]
    assert entry["args"][-5:] == ["bridge", "--server", server.url, "--notebook", NOTEBOOK]
    assert entry["env"]["MCP_NOTEBOOK_SERVER_TOKEN"] == TOKEN and vs.stat().st_mode & 0o777 == 0o600
    token_file = tmp_path / "jupyter-token"
    token_file.write_text(TOKEN + "\n")
    monkeypatch.delenv("MCP_NOTEBOOK_SERVER_TOKEN")
    cur = tmp_path / "cursor.json"
    assert main(["config", "cursor", "--server", server.url, "--token-file", str(token_file), "--path", str(cur)]) == 0
    entry = json.loads(cur.read_text())["mcpServers"]["notebook"]
    assert entry["args"][-4:] == ["--server", server.url, "--token-file", str(token_file)]
    assert TOKEN not in cur.read_text()

    # the bridge with a token file reaches the kernel
    async def go():
        params = StdioServerParameters(command=entry["command"], args=entry["args"], env=entry.get("env"))
        async with Client(params, mode="auto", cache=None) as client:
            listed = {str(r.uri) for r in (await client.list_resources()).resources}
            assert "nb://kernels" in listed and any(u.endswith("/vars") for u in listed), listed
            assert "variables" in (await client.read_resource("nb://vars")).contents[0].text  # the current kernel

    anyio.run(go)


def test_hub_restarted_on_the_same_port_with_a_new_token(server, kernel):
    """The proxy's idle keep-alive connection to the old hub is dead and its token stale: both recover."""
    info = json.loads(run(kernel["kc"], "import json, mcp_notebook as m; print(json.dumps(dict(m.connection_info())))"))
    port = int(info["url"].rsplit(":", 1)[1].split("/")[0])
    http = server.http
    body = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": INIT}
    assert http.post(kernel["url"], headers=ACCEPT, json=body).status_code == 200  # pools a connection
    run(kernel["kc"], f"%mcp stop\n%config MCPHub.port = {port}\n%mcp start\n%config MCPHub.port = 0")
    fresh = json.loads(run(kernel["kc"], "print(json.dumps(dict(m.connection_info())))"))
    assert fresh["url"] == info["url"] and fresh["token"] != info["token"]
    r = http.post(kernel["url"], headers=ACCEPT, json=body)
    assert r.status_code == 200, r.text


def test_bridge_server_reconnects_when_the_hub_comes_back(server, kernel):
    """%mcp stop / %mcp start in the kernel: the remote bridge finds the new hub and re-subscribes."""
    run(kernel["kc"], "bridged_again = [1]")

    async def go():
        inbox = Inbox()
        params = bridge_params(server, "--notebook", NOTEBOOK)
        async with Client(params, mode="legacy", message_handler=inbox.handle, cache=None) as client:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                await client.subscribe_resource("nb://vars/bridged_again")
            await cell(kernel, "%mcp stop")
            await anyio.sleep(0.5)
            await cell(kernel, "%mcp start")
            read = await client.read_resource("nb://vars/bridged_again")  # through the new hub
            assert json.loads(read.contents[0].text)["repr"] == "[1]"
            await inbox.wait_for(lambda i: "nb://vars/bridged_again" in i.updated, timeout=30)  # replayed
            before = inbox.updated.count("nb://vars/bridged_again")
            await cell(kernel, "bridged_again.append(2)")  # and the new subscription is live
            await inbox.wait_for(lambda i: i.updated.count("nb://vars/bridged_again") > before, timeout=15)

    anyio.run(go)


def test_large_reply_arrives_byte_for_byte(server, kernel):
    """A list page at the wire budget (~49 KB, several socket reads): the same bytes through the
    server as from the hub itself."""
    run(kernel["kc"], "for _i in range(600): globals()[f'bulk_{_i:04d}'] = _i")
    info = json.loads(run(kernel["kc"], "import json, mcp_notebook as m; print(json.dumps(dict(m.connection_info())))"))
    meta = {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}}
    body = json.dumps({"jsonrpc": "2.0", "id": 7, "method": "resources/list", "params": {"_meta": meta}})
    h = {**ACCEPT, "MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "resources/list"}
    proxied = server.http.post(kernel["url"], headers=h, content=body)
    direct = httpx.post(
        info["url"], headers={**h, "Authorization": f"Bearer {info['token']}"}, content=body, timeout=30
    )
    assert proxied.status_code == direct.status_code == 200
    assert len(proxied.content) > 40 * 1024
    assert proxied.content == direct.content
    assert proxied.headers["content-type"] == direct.headers["content-type"]


def test_a_gateway_kernel_goes_over_the_control_channel(tmp_path):
    """A kernel of a server whose kernels run on a gateway is reached over its control channel,
    never looked up in runtime files (tests/test_gateway.py runs a real gateway)."""
    from jupyter_client.multikernelmanager import MultiKernelManager

    from mcp_notebook.serverext.hubs import HubFinder, HubUnavailable

    km = MultiKernelManager()
    kid = km.start_kernel(kernel_name="python3")
    try:
        assert HubFinder(km, [tmp_path], gateway=True).by_channel(kid)
        assert not HubFinder(km, [tmp_path]).by_channel(kid)
        assert HubFinder(km, [tmp_path], carrier="control").by_channel(kid)
        with pytest.raises(HubUnavailable) as caught:  # the same kernel on a plain server: no hub yet
            HubFinder(km, [tmp_path]).locate(kid)
        assert caught.value.reason == "no_hub"  # (what kernels/{id}/mcp answers with serve_without_hub off)
        assert "%load_ext mcp_notebook" in caught.value.message and "another host" in caught.value.message
    finally:
        km.shutdown_all(now=True)
