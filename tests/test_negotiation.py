"""Every negotiation order a host uses, over every carrier (issue #35): raw JSON-RPC, so the order is
exactly as written.

Orders: the handshake only; server/discover then initialize on the same connection; initialize
after a discover that failed; the stateless era only; an unknown revision asked for (the handshake
era answers with its newest revision, the stateless era with -32022 naming what it supports).
Carriers: a kernel's hub over HTTP, the Jupyter server's all-kernels endpoint over HTTP, the
all-kernels front the bridge uses over HTTP, and the stdio bridge (all kernels, and one kernel).
"""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from jserver import JupyterServer, load_hub, run

from mcp_notebook.allkernels.directory import LocalDirectory
from mcp_notebook.allkernels.front import KernelsFront

pytestmark = pytest.mark.timeout(300)

TOKEN = "negotiation-jupyter-token"
NEWEST_HANDSHAKE = "2025-11-25"
STATELESS = "2026-07-28"
UNKNOWN = "2099-01-01"
META_VERSION = "io.modelcontextprotocol/protocolVersion"
META_CAPS = "io.modelcontextprotocol/clientCapabilities"
META_INFO = "io.modelcontextprotocol/clientInfo"
CLIENT = {"name": "negotiation-test", "version": "1"}


class Http:
    """One keep-alive HTTP connection: stateless headers for a request whose _meta names a revision,
    the session's headers otherwise (once initialize gave a session)."""

    def __init__(self, url: str, auth: str):
        self.url, self.auth = url, auth
        self.http = httpx.Client(timeout=60)
        self.session: str | None = None
        self.version: str | None = None

    def send(self, msg: dict[str, Any]) -> dict[str, Any] | None:
        headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
        headers["Authorization"] = self.auth
        params = msg.get("params") or {}
        stateless = META_VERSION in (params.get("_meta") or {}) and msg.get("method") != "initialize"
        if stateless:
            headers["MCP-Protocol-Version"] = params["_meta"][META_VERSION]
            headers["Mcp-Method"] = msg["method"]
            name = params.get("uri") or params.get("name")
            if isinstance(name, str):
                headers["Mcp-Name"] = name
        elif self.session is not None:
            headers["Mcp-Session-Id"] = self.session
            headers["MCP-Protocol-Version"] = self.version or NEWEST_HANDSHAKE
        r = self.http.post(self.url, json=msg, headers=headers)
        if "id" not in msg:
            assert r.status_code == 202, r.text
            return None
        reply = _parse(r)
        if msg["method"] == "initialize" and "result" in reply:
            self.session = r.headers.get("mcp-session-id")
            self.version = reply["result"]["protocolVersion"]
        return reply

    def close(self) -> None:
        if self.session is not None:
            self.http.delete(self.url, headers={"Authorization": self.auth, "Mcp-Session-Id": self.session})
        self.http.close()


def _parse(r: httpx.Response) -> dict[str, Any]:
    if r.headers.get("content-type", "").startswith("text/event-stream"):
        data = [line[5:].strip() for line in r.text.splitlines() if line.startswith("data:")]
        return [m for m in map(json.loads, data) if "id" in m][-1]
    return r.json()


class Stdio:
    """The stdio bridge as a host starts it: newline-delimited JSON-RPC on its stdin and stdout."""

    def __init__(self, args: list[str], env: dict[str, str]):
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "mcp_notebook", "bridge", *args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=env,
        )
        self.lines: queue.Queue[bytes] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line)

    def send(self, msg: dict[str, Any]) -> dict[str, Any] | None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(msg).encode() + b"\n")
        self.proc.stdin.flush()
        if "id" not in msg:
            return None
        for _ in range(1000):  # notifications may come first
            reply = json.loads(self.lines.get(timeout=60))
            if reply.get("id") == msg["id"]:
                return reply
        raise AssertionError("no reply")

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        try:
            self.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=15)


# -- messages and checks ------------------------------------------------------------------------
def init(version: str) -> dict[str, Any]:
    return {"method": "initialize", "params": {"protocolVersion": version, "capabilities": {}, "clientInfo": CLIENT}}


INITIALIZED = {"method": "notifications/initialized"}


def handshake(method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"method": method, "params": params or {}}


def stateless(method: str, params: dict[str, Any] | None = None, version: str = STATELESS) -> dict[str, Any]:
    meta = {META_VERSION: version, META_CAPS: {}, META_INFO: CLIENT}
    return {"method": method, "params": {**(params or {}), "_meta": meta}}


Check = Callable[[dict[str, Any]], None]


def initialized_with(version: str) -> Check:
    def check(reply: dict[str, Any]) -> None:
        assert reply["result"]["protocolVersion"] == version, reply
        assert reply["result"]["capabilities"]["resources"] and reply["result"]["serverInfo"]["name"]

    return check


def discovered(reply: dict[str, Any]) -> None:
    assert STATELESS in reply["result"]["supportedVersions"], reply
    assert NEWEST_HANDSHAKE in reply["result"]["supportedVersions"]
    assert "tools" in reply["result"]["capabilities"]


def unsupported(reply: dict[str, Any]) -> None:
    assert reply["error"]["code"] == -32022, reply
    assert STATELESS in reply["error"]["data"]["supported"] and reply["error"]["data"]["requested"] == UNKNOWN


def tools_listed(reply: dict[str, Any]) -> None:
    assert {"list_resources", "read_resource", "changes_since"} <= {t["name"] for t in reply["result"]["tools"]}


def read_vars(reply: dict[str, Any]) -> None:
    doc = json.loads(reply["result"]["contents"][0]["text"])
    assert "negotiated" in {v["name"] for v in doc["variables"]}, doc


def tool_read_vars(reply: dict[str, Any]) -> None:
    assert not reply["result"].get("isError") and "negotiated" in reply["result"]["content"][0]["text"], reply


READ = ("resources/read", {"uri": "nb://vars"})
TOOL = ("tools/call", {"name": "read_resource", "arguments": {"uri": "nb://vars"}})
ORDERS: dict[str, list[tuple[dict[str, Any], Check | None]]] = {
    "handshake only": [
        (init(NEWEST_HANDSHAKE), initialized_with(NEWEST_HANDSHAKE)),
        (INITIALIZED, None),
        (handshake("tools/list"), tools_listed),
        (handshake(*TOOL), tool_read_vars),
        (handshake(*READ), read_vars),
    ],
    "discover then initialize": [
        (stateless("server/discover"), discovered),
        (init(NEWEST_HANDSHAKE), initialized_with(NEWEST_HANDSHAKE)),
        (INITIALIZED, None),
        (handshake("tools/list"), tools_listed),
        (handshake(*READ), read_vars),
    ],
    "initialize after a failed discover": [
        (stateless("server/discover", version=UNKNOWN), unsupported),
        (init("2025-06-18"), initialized_with("2025-06-18")),
        (INITIALIZED, None),
        (handshake(*TOOL), tool_read_vars),
    ],
    "stateless only": [
        (stateless("server/discover"), discovered),
        (stateless("tools/list"), tools_listed),
        (stateless(*TOOL), tool_read_vars),
        (stateless(*READ), read_vars),
    ],
    "an unknown version asked for": [
        (init(UNKNOWN), initialized_with(NEWEST_HANDSHAKE)),  # the newest handshake revision we speak
        (INITIALIZED, None),
        (handshake("tools/list"), tools_listed),
        (stateless("tools/list", version=UNKNOWN), unsupported),  # the stateless era: -32022
    ],
}


# -- carriers -----------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def jupyter(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """A Jupyter server with the extension and one kernel running a hub."""
    s = JupyterServer(tmp_path_factory.mktemp("negotiation"), token=TOKEN)
    try:
        kid = s.start_session("orders.ipynb")
        kc = s.client(kid)
        hub = load_hub(kc)
        run(kc, "negotiated = 1")
        front = KernelsFront(LocalDirectory(Path(s.runtime)))
        front_url = front.serve_http()
        try:
            yield {"server": s, "kernel": kid, "hub": hub, "front": (front_url, front.settings.token)}
        finally:
            front.close()
    finally:
        s.stop()


CARRIERS = [
    "hub over HTTP",
    "server front over HTTP",
    "bridge front over HTTP",
    "bridge (all kernels)",
    "bridge (one kernel)",
]


def connect(jupyter: dict[str, Any], carrier: str) -> Http | Stdio:
    env = {**os.environ, "JUPYTER_RUNTIME_DIR": str(jupyter["server"].runtime)}
    if carrier == "hub over HTTP":
        return Http(jupyter["hub"]["url"], f"Bearer {jupyter['hub']['token']}")
    if carrier == "server front over HTTP":
        return Http(f"{jupyter['server'].url}mcp-notebook/mcp", f"token {TOKEN}")
    if carrier == "bridge front over HTTP":
        url, token = jupyter["front"]
        return Http(url, f"Bearer {token}")
    if carrier == "bridge (all kernels)":
        return Stdio([], env)
    return Stdio(["--kernel", jupyter["kernel"]], env)


@pytest.mark.parametrize("carrier", CARRIERS)
@pytest.mark.parametrize("order", list(ORDERS))
def test_every_order_over_every_carrier(jupyter, order, carrier):
    peer = connect(jupyter, carrier)
    try:
        for n, (msg, check) in enumerate(ORDERS[order], 1):
            msg = {"jsonrpc": "2.0", **msg} if check is None else {"jsonrpc": "2.0", "id": n, **msg}
            reply = peer.send(msg)
            if check is not None:
                assert reply is not None
                check(reply)
    finally:
        peer.close()
