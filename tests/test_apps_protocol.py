"""MCP Apps on the wire (io.modelcontextprotocol/ui), both eras, against a real kernel's hub:
what a client that offers the extension gets (views listed and readable, view tools linked to
them, structured results), that a client that does not sees exactly what it saw before, and the
CORS a host in a browser page needs."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import anyio
import httpx
import mcp_types as types
import pytest
import sdk
from conftest import Mcp
from mcp.client.extension import advertise

EXT = "io.modelcontextprotocol/ui"
MIME = "text/html;profile=mcp-app"
APPS_CAPS = {"extensions": {EXT: {"mimeTypes": [MIME]}}}
VIEWS = {"ui://mcp-notebook/frame-explorer", "ui://mcp-notebook/output-viewer", "ui://mcp-notebook/changes"}
BASE_TOOLS = ["list_resources", "read_resource", "changes_since"]
STATELESS = "2026-07-28"


@pytest.fixture(scope="module")
def ready(kernel, hub) -> dict[str, Any]:
    kernel.run(
        "import pandas as pd, numpy as np\n"
        "apps_df = pd.DataFrame({'n': np.arange(5000), 'word': ['w%d' % i for i in range(5000)]})"
    )
    kernel.run("print('plain <b>text</b>'); apps_df.head(3)")
    return hub


class Wire(Mcp):
    """The raw client in either era, offering the Apps extension or not."""

    def __init__(self, info: dict[str, Any], era: str, apps: bool):
        super().__init__(info)
        self.era, self.apps = era, apps
        self.caps = APPS_CAPS if apps else {}
        if era == "handshake":
            self.init = self.initialize(capabilities=self.caps)

    def call(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        if self.era == "handshake":
            return super().call(method, params)
        self._id += 1
        params = dict(params or {})
        params["_meta"] = {
            "io.modelcontextprotocol/protocolVersion": STATELESS,
            "io.modelcontextprotocol/clientCapabilities": self.caps,
            "io.modelcontextprotocol/clientInfo": {"name": "w", "version": "1"},
        }
        headers = {"MCP-Protocol-Version": STATELESS, "Mcp-Method": method}
        if method == "tools/call":
            headers["Mcp-Name"] = params["name"]
        elif method == "resources/read":
            headers["Mcp-Name"] = params["uri"]
        r = self.post({"jsonrpc": "2.0", "id": self._id, "method": method, "params": params}, **headers)
        assert r.status_code == 200, r.text
        return r.json()

    def capabilities(self) -> dict[str, Any]:
        if self.era == "handshake":
            return self.init["capabilities"]
        return self.result("server/discover")["capabilities"]


@pytest.fixture(params=["handshake", "stateless"])
def era(request) -> str:
    return request.param


@pytest.fixture
def plain(ready, era) -> Iterator[Wire]:
    yield Wire(ready, era, apps=False)


@pytest.fixture
def host(ready, era) -> Iterator[Wire]:
    yield Wire(ready, era, apps=True)


def test_a_client_without_apps_sees_what_it_always_saw(plain):
    assert EXT not in plain.capabilities().get("extensions", {})
    assert [t["name"] for t in plain.result("tools/list")["tools"]] == BASE_TOOLS
    assert all(set(t.get("_meta", {})) <= {"anthropic/maxResultSizeChars"} for t in plain.result("tools/list")["tools"])
    uris = {r["uri"] for r in plain.result("resources/list")["resources"]}
    assert not uris & VIEWS and "nb://vars" in uris
    read = plain.result("tools/call", {"name": "read_resource", "arguments": {"uri": "nb://vars"}})
    assert "structuredContent" not in read and read["content"][0]["type"] == "text"
    changes = plain.result("tools/call", {"name": "changes_since", "arguments": {"wait_seconds": 0}})
    assert "structuredContent" not in changes
    unknown = plain.call("tools/call", {"name": "explore_frame", "arguments": {"name": "apps_df"}})
    assert unknown["error"]["code"] == -32602


def test_a_host_with_apps_gets_views_linked_to_tools(host):
    assert MIME in host.capabilities()["extensions"][EXT]["mimeTypes"]
    listed = {r["uri"]: r for r in host.result("resources/list")["resources"] if r["uri"].startswith("ui://")}
    assert set(listed) == VIEWS and all(r["mimeType"] == MIME for r in listed.values())
    tools = {t["name"]: t for t in host.result("tools/list")["tools"]}
    assert set(BASE_TOOLS) <= set(tools)
    linked = {name: t["_meta"]["ui"]["resourceUri"] for name, t in tools.items() if "ui" in t.get("_meta", {})}
    assert linked == {
        "explore_frame": "ui://mcp-notebook/frame-explorer",
        "show_outputs": "ui://mcp-notebook/output-viewer",
        "watch_changes": "ui://mcp-notebook/changes",
    }
    for uri in VIEWS:
        item = host.result("resources/read", {"uri": uri})["contents"][0]
        assert item["mimeType"] == MIME and item["uri"] == uri
        assert item["text"].lstrip().lower().startswith("<!doctype html")
        assert item["_meta"]["ui"]["csp"] == {"connectDomains": [], "resourceDomains": []}
        assert host.token not in item["text"] and host.url.split("/mcp")[0] not in item["text"]


def test_view_tools_answer_with_what_the_views_render(host, kernel, era):
    frame = host.result("tools/call", {"name": "explore_frame", "arguments": {"name": "apps_df"}})
    doc = frame["structuredContent"]
    assert doc["view"] == "frame" and doc["uri"] == "nb://frames/apps_df"
    assert doc["schema"]["shape"] == [5000, 2] and [c["name"] for c in doc["schema"]["columns"]] == ["n", "word"]
    assert doc["rows"][:2] == [{"n": 0, "word": "w0"}, {"n": 1, "word": "w1"}] and doc["page"]["total_rows"] == 5000
    assert "5,000 rows" in frame["content"][0]["text"]
    same = host.result("tools/call", {"name": "explore_frame", "arguments": {"name": "nb://vars/apps_df"}})
    assert same["structuredContent"]["uri"] == "nb://frames/apps_df"
    missing = host.result("tools/call", {"name": "explore_frame", "arguments": {"name": "no_such_frame"}})
    assert missing["isError"] is True and "no_such_frame" in missing["content"][0]["text"]
    bad = host.result("tools/call", {"name": "show_outputs", "arguments": {"cell": "three"}})
    assert bad["isError"] is True and "integer" in bad["content"][0]["text"]

    outputs = host.result("tools/call", {"name": "show_outputs", "arguments": {}})["structuredContent"]
    assert outputs["view"] == "outputs" and len(outputs["cell"]["outputs"]) >= 1

    read = host.result("tools/call", {"name": "read_resource", "arguments": {"uri": "nb://frames/apps_df?limit=2"}})
    assert read["structuredContent"]["contents"][0]["uri"] == "nb://frames/apps_df?limit=2"

    feed = host.result("tools/call", {"name": "watch_changes", "arguments": {}})["structuredContent"]
    assert feed["view"] == "changes" and feed["changes"] == []
    name = f"apps_new_{era}"
    kernel.run(f"{name} = 42")
    deadline = time.monotonic() + 20
    seen: list[str] = []
    while f"nb://vars/{name}" not in seen and time.monotonic() < deadline:
        step = host.result(
            "tools/call", {"name": "changes_since", "arguments": {"cursor": feed["cursor"], "wait_seconds": 5}}
        )
        seen = step["structuredContent"]["changed"]
    assert f"nb://vars/{name}" in seen


def test_cors_lets_a_loopback_page_talk_with_the_token(ready):
    url, token = ready["url"], ready["token"]
    page = "http://127.0.0.1:8123"
    pre = httpx.options(
        url,
        headers={
            "Origin": page,
            "Access-Control-Request-Method": "POST",
            "Access-Control-Request-Headers": "authorization, content-type, mcp-protocol-version",
        },
    )
    assert pre.status_code == 204 and pre.headers["access-control-allow-origin"] == page
    assert "authorization" in pre.headers["access-control-allow-headers"].lower()
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "ping"})
    no_token = httpx.post(url, content=body, headers={"Origin": page, "Content-Type": "application/json"})
    assert no_token.status_code == 401
    foreign = httpx.options(url, headers={"Origin": "https://example.com", "Access-Control-Request-Method": "POST"})
    assert foreign.status_code == 403 and "access-control-allow-origin" not in foreign.headers
    init = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "page", "version": "1"}}
    ok = httpx.post(
        url,
        content=json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": init}),
        headers={
            "Origin": page,
            "Authorization": f"Bearer {token}",
            "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream",
        },
    )
    assert ok.status_code == 200 and ok.headers["access-control-allow-origin"] == page
    assert "mcp-session-id" in ok.headers["access-control-expose-headers"].lower()


@pytest.mark.parametrize("mode", ["legacy", "auto"])
def test_the_official_sdk_client_with_and_without_apps(ready, mode):
    async def run() -> None:
        async with sdk.connect(ready, mode=mode) as (client, _):
            names = [t.name for t in (await client.list_tools()).tools]
            assert names == BASE_TOOLS
            read = await client.call_tool("read_resource", {"uri": "nb://vars"})
            assert read.structured_content is None
        async with sdk.connect(ready, mode=mode, extensions=[advertise(EXT, {"mimeTypes": [MIME]})]) as (client, _):
            tools = {t.name: t for t in (await client.list_tools()).tools}
            assert tools["explore_frame"].meta["ui"]["resourceUri"] == "ui://mcp-notebook/frame-explorer"
            result = await client.call_tool("explore_frame", {"name": "apps_df"})
            assert isinstance(result, types.CallToolResult) and result.structured_content["view"] == "frame"
            html = await client.read_resource("ui://mcp-notebook/frame-explorer")
            assert html.contents[0].mime_type == MIME

    anyio.run(run)
