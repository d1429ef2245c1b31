"""Tools for tool-only hosts, over HTTP: the SDK client in both eras, and raw protocol rules."""

from __future__ import annotations

import json

import anyio
import mcp_types as types
import pytest
from sdk import connect

META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {},
}


def text_doc(result: types.CallToolResult) -> dict:
    return json.loads(result.content[0].text)


@pytest.mark.parametrize("mode", ["auto", "legacy"])
def test_sdk_lists_and_calls_tools(kernel, hub, mode):
    kernel.run("tool_df = {'a': [1, 2, 3]}")

    async def go():
        async with connect(hub, mode) as (client, _):
            assert client.server_capabilities.tools is not None
            tools = {t.name: t for t in (await client.list_tools()).tools}
            assert set(tools) == {"list_resources", "read_resource", "changes_since"}
            assert tools["read_resource"].input_schema["required"] == ["uri"]
            listed = await client.call_tool("list_resources", {})
            assert not listed.is_error
            doc = text_doc(listed)
            assert "nb://vars/tool_df" in {r["uri"] for r in doc["resources"]}
            assert "nb://vars/{name}" in {t["uriTemplate"] for t in doc["templates"]}
            read = await client.call_tool("read_resource", {"uri": "nb://vars/tool_df"})
            assert text_doc(read)["type"] == "dict"
            links = [c for c in read.content if isinstance(c, types.ResourceLink)]
            assert [str(link.uri) for link in links] == ["nb://vars/tool_df"]

    anyio.run(go)


def test_bad_arguments_are_tool_errors(kernel, hub):
    async def go():
        async with connect(hub, "legacy") as (client, _):
            missing = await client.call_tool("read_resource", {})
            assert missing.is_error and "uri" in missing.content[0].text
            unknown = await client.call_tool("read_resource", {"uri": "nb://vars/never_defined_here"})
            assert unknown.is_error and "not found" in unknown.content[0].text.lower()
            extra = await client.call_tool("changes_since", {"wait_seconds": 99})
            assert extra.is_error and "between" in extra.content[0].text
            cursor = await client.call_tool("changes_since", {"cursor": "nonsense"})
            assert cursor.is_error

    anyio.run(go)


def test_changes_since_waits_for_the_next_cell(kernel, hub):
    async def go():
        async with connect(hub, "auto") as (client, _):
            cursor = text_doc(await client.call_tool("changes_since", {"wait_seconds": 0}))["cursor"]

            async def later():
                await anyio.sleep(0.5)
                await anyio.to_thread.run_sync(kernel.run, "waited_for = 1")

            async with anyio.create_task_group() as tg:
                tg.start_soon(later)
                result = await client.call_tool("changes_since", {"cursor": cursor, "wait_seconds": 20})
            doc = text_doc(result)
            assert "nb://vars/waited_for" in doc["changed"]
            assert doc["list_changed"] is True
            again = text_doc(await client.call_tool("changes_since", {"cursor": doc["cursor"], "wait_seconds": 0}))
            assert "nb://vars/waited_for" not in again["changed"]
            stale = text_doc(await client.call_tool("changes_since", {"cursor": "00000000.3", "wait_seconds": 0}))
            assert stale["reset"] is True

    anyio.run(go)


def test_old_revision_gets_text_instead_of_links(mcp):
    mcp.session = None
    mcp.initialize("2025-03-26")
    reply = mcp.result("tools/call", {"name": "read_resource", "arguments": {"uri": "nb://kernel"}})
    kinds = [c["type"] for c in reply["content"]]
    assert "resource_link" not in kinds and kinds[-1] == "text" and "nb://kernel" in reply["content"][-1]["text"]
    tools = mcp.result("tools/list")["tools"]
    assert all("title" not in t for t in tools)
    unknown = mcp.call("tools/call", {"name": "no_such_tool", "arguments": {}})
    assert unknown["error"]["code"] == -32602


def stateless_post(mcp, method, params, **headers):
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": {**params, "_meta": META}}
    h = {"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": method, **headers}
    return mcp.http.post(mcp.url, json=body, headers={**mcp.headers(), **h})


def test_stateless_tools_headers_and_cache_hints(hub):
    from conftest import Mcp

    mcp = Mcp(hub)
    try:
        listed = stateless_post(mcp, "tools/list", {})
        assert listed.status_code == 200
        result = listed.json()["result"]
        assert result["resultType"] == "complete" and result["cacheScope"] == "public" and result["ttlMs"] > 0
        args = {"name": "list_resources", "arguments": {}}
        ok = stateless_post(mcp, "tools/call", args, **{"Mcp-Name": "list_resources"})
        assert ok.status_code == 200 and ok.json()["result"]["resultType"] == "complete"
        assert "ttlMs" not in ok.json()["result"]
        missing = stateless_post(mcp, "tools/call", args)
        assert missing.status_code == 400 and missing.json()["error"]["code"] == -32020
        wrong = stateless_post(mcp, "tools/call", args, **{"Mcp-Name": "read_resource"})
        assert wrong.status_code == 400 and wrong.json()["error"]["code"] == -32020
    finally:
        mcp.close()


APPS = {"extensions": {"io.modelcontextprotocol/ui": {"mimeTypes": ["text/html;profile=mcp-app"]}}}


def test_tools_are_one_table_that_composition_sites_fill():
    """The protocol's tools know no notebook: a bare server lists the three generic tools in generic
    words and no view tool, even to an Apps client; add_nb_tools (what the hub and the front call)
    gives the notebook's words and the views' tools; a taken name, or words that change a tool's
    arguments, are refused."""
    from mcp_notebook.nb_tools import NB_WORDS, VIEW_TOOLS, add_nb_tools
    from mcp_notebook.protocol.exchange import Ctx
    from mcp_notebook.protocol.server import McpServer, ServerSettings
    from mcp_notebook.protocol.tool_spec import Tool, schema_of
    from mcp_notebook.resources import Resources

    server = McpServer(Resources([]), ServerSettings(token="t"))
    try:
        apps = Ctx("2026-07-28", meta={"io.modelcontextprotocol/clientCapabilities": APPS})
        listed = server.tools.list_tools(apps, {})["tools"]
        assert [t["name"] for t in listed] == ["list_resources", "read_resource", "changes_since"]
        assert "nb://" not in json.dumps(listed)
        add_nb_tools(server.tools)
        listed = server.tools.list_tools(apps, {})["tools"]
        assert [t["name"] for t in listed] == [t.name for t in (*NB_WORDS, *VIEW_TOOLS)]
        assert [t["description"] for t in listed[:3]] == [t.description for t in NB_WORDS]
        plain = server.tools.list_tools(Ctx("2026-07-28"), {})["tools"]
        assert [t["name"] for t in plain] == [t.name for t in NB_WORDS]  # view tools: Apps clients only
        with pytest.raises(ValueError, match="already registered"):
            server.tools.add(VIEW_TOOLS[0], lambda version, args, client: {"content": []})
        with pytest.raises(ValueError, match="not arguments"):
            server.tools.describe(Tool("read_resource", "Read", "Read one.", schema_of({"path": {"type": "string"}})))
    finally:
        server.close()
