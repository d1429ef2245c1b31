"""A hub bound to a non-loopback address on purpose: MCPHub.allowed_hosts names the hosts clients
may use (Host header and Origin); anything else is still refused. Traffic stays on loopback: the
hub binds 0.0.0.0 and the test connects through 127.0.0.1 with the Host header a remote client sends."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from kernel_harness import Kernel

from mcp_notebook.protocol.security import host_allowed, origin_allowed

PING = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
INIT = {
    "jsonrpc": "2.0",
    "id": 0,
    "method": "initialize",
    "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
}


@pytest.fixture(scope="module")
def wide(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Kernel, dict[str, Any], str]]:
    kernel = Kernel(env={"JUPYTER_RUNTIME_DIR": str(tmp_path_factory.mktemp("runtime"))})
    try:
        kernel.run("%config MCPHub.host = '0.0.0.0'")
        kernel.run("%config MCPHub.allowed_hosts = ['Notebook.LAN', '[fd00::5]']")
        loaded = kernel.run("%load_ext mcp_notebook")
        yield kernel, kernel.info(), loaded.stderr
    finally:
        kernel.shutdown()


def post(info: dict[str, Any], body: dict[str, Any], **headers: str) -> httpx.Response:
    port = info["url"].rsplit(":", 1)[1].split("/")[0]
    h = {
        "Authorization": f"Bearer {info['token']}",
        "Accept": "application/json, text/event-stream",
        "Host": headers.pop("Host", "127.0.0.1").replace("PORT", port),
        **headers,
    }
    return httpx.post(f"http://127.0.0.1:{port}/mcp", json=body, headers=h, timeout=30)


def test_allowed_names_pass_and_others_are_refused(wide):
    _, info, stderr = wide
    assert "not a loopback address" in stderr and "Notebook.LAN" in stderr  # warned opt-in
    assert info["url"].startswith("http://0.0.0.0:")
    ok = post(info, INIT, Host="notebook.lan:PORT")
    assert ok.status_code == 200 and "mcp-session-id" in ok.headers, ok.text
    assert post(info, INIT, Host="[fd00::5]:PORT").status_code == 200
    assert post(info, INIT, Host="127.0.0.1:PORT").status_code == 200  # loopback names still work
    refused = post(info, INIT, Host="evil.example:PORT")
    assert refused.status_code == 403 and "allowed_hosts" in refused.text
    assert post(info, INIT, Host="notebook.lan.evil.example:PORT").status_code == 403

    assert post(info, INIT, Host="notebook.lan:PORT", Origin="http://notebook.lan:8888").status_code == 200
    assert post(info, INIT, Host="notebook.lan:PORT", Origin="https://NOTEBOOK.lan").status_code == 200
    assert post(info, INIT, Host="notebook.lan:PORT", Origin="http://evil.example").status_code == 403
    assert post(info, INIT, Host="notebook.lan:PORT", Origin="null").status_code == 403
    # the token is still required
    no_token = httpx.post(
        info["url"].replace("0.0.0.0", "127.0.0.1"), json=INIT, headers={"Host": "notebook.lan"}, timeout=30
    )
    assert no_token.status_code == 401


def test_default_stays_loopback_only():
    assert not host_allowed({"host": "notebook.lan:8765"})
    assert host_allowed({"host": "localhost:8765"}) and host_allowed({"host": "[::1]:1"})
    assert not origin_allowed({"origin": "http://notebook.lan"})
    assert origin_allowed({"origin": "http://notebook.lan"}, (), ("notebook.lan",))
    assert not origin_allowed({"origin": "http://notebook.lan"}, ("http://other",), ())
