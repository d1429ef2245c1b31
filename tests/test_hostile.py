"""Defects a hostile client found (issue #32), each pinned: tool arguments outside their schema, the
control channel's malformed requests, slots and reused ids, and the server extension's routes
(focus, kernels listing) under a foreign Origin or a deeply nested body. The bridge's stdin is in
tests/test_hostile_bridge.py; the property-based run over every surface in tests/test_hostile_fuzz.py."""

from __future__ import annotations

import json
from typing import Any

import pytest

from mcp_notebook.protocol.server import HttpRequest, McpServer, ServerSettings
from mcp_notebook.protocol.tools import TOOLS
from mcp_notebook.protocol.view_tools import VIEW_TOOLS
from mcp_notebook.resources import Resources

TOKEN = "hostile-token"
META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {
        "extensions": {"io.modelcontextprotocol/ui": {"mimeTypes": ["text/html;profile=mcp-app"]}}
    },
}


# == tool arguments ===================================================================================
@pytest.fixture(scope="module")
def server() -> Any:
    s = McpServer(Resources([]), ServerSettings(token=TOKEN))
    yield s
    s.close()


def _call_tool(server: McpServer, name: str, arguments: Any) -> dict[str, Any]:
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": name, "arguments": arguments}}
    body["params"]["_meta"] = META
    headers = {
        "host": "127.0.0.1",
        "authorization": f"Bearer {TOKEN}",
        "content-type": "application/json",
        "accept": "application/json, text/event-stream",
        "mcp-protocol-version": "2026-07-28",
        "mcp-method": "tools/call",
        "mcp-name": name,
    }
    reply = server.handle(HttpRequest("POST", headers, json.dumps(body).encode()))
    assert reply.status < 500, reply.body
    return json.loads(reply.body)


def _outside(spec: dict[str, Any]) -> list[Any]:
    """Values outside one property's schema: other types, and past each declared bound."""
    kind = spec.get("type")
    out: list[Any] = [None, True, [], {}, "text", 1.5, -(2**70)]
    out = [v for v in out if not _fits(kind, v)]
    if "minimum" in spec:
        out.append(spec["minimum"] - 1)
    if "maximum" in spec:
        out.append(spec["maximum"] + 1)
    return out


def _fits(kind: str | None, value: Any) -> bool:
    if kind == "string":
        return isinstance(value, str)
    if kind == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == "number":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    return False


def test_show_outputs_below_its_minimum_is_a_tool_error_naming_the_argument(server):
    """Was -32603 "[REDACTED]": a KeyError formatting a maximum the schema does not declare."""
    doc = _call_tool(server, "show_outputs", {"cell": 0})
    assert doc["result"]["isError"] is True, doc
    assert (
        "arguments.cell" in doc["result"]["content"][0]["text"] and "at least 1" in doc["result"]["content"][0]["text"]
    )


@pytest.mark.parametrize("tool", [*TOOLS, *VIEW_TOOLS], ids=lambda t: t.name)
def test_every_argument_outside_every_schema_is_a_tool_error(server, tool):
    for name, spec in tool.schema["properties"].items():
        for value in _outside(spec):
            args = {"name": "df", "uri": "nb://vars"} if tool.schema.get("required") else {}
            args = {k: v for k, v in args.items() if k in tool.schema["properties"]}
            args[name] = value
            doc = _call_tool(server, tool.name, args)
            assert "result" in doc and doc["result"]["isError"] is True, (tool.name, name, value, doc)
            assert f"arguments.{name}" in doc["result"]["content"][0]["text"], doc
    doc = _call_tool(server, tool.name, {"no_such_argument": 1})
    assert doc["result"]["isError"] is True and "arguments.no_such_argument" in doc["result"]["content"][0]["text"]
