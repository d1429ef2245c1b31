"""Reference MCP servers built with the official SDK (mcp 2.3.0), serving the benchmark content.

Usage: ``python bench/refservers.py lowlevel|mcpserver PORT``. Both serve ``data://small`` (a small
JSON text, like a hub variable read) and ``data://item/{0..999}`` (1,000 listed resources), over
streamable HTTP on 127.0.0.1 via uvicorn, with the SDK's default settings (both eras, sessions).
"""

from __future__ import annotations

import json
import sys

import mcp_types as types
import uvicorn

N_ITEMS = 1000
SMALL_URI = "data://small"
SMALL_TEXT = json.dumps(
    {"name": "x", "type": "int", "uri": "nb://vars/x", "repr": "1", "modified": "2026-01-01T00:00:00Z"}
)


def item_uri(i: int) -> str:
    return f"data://item/{i}"


def lowlevel_app():
    """The low-level ``Server`` with list/read handlers (list built once, like a static registry)."""
    from mcp.server import Server

    resources = [types.Resource(name="small", uri=SMALL_URI, mime_type="application/json")] + [
        types.Resource(
            name=f"v{i}",
            uri=item_uri(i),
            title=f"v{i} (int)",
            description=f"Variable v{i} of type int",
            mime_type="application/json",
            annotations=types.Annotations(priority=0.5),
        )
        for i in range(N_ITEMS)
    ]

    async def list_resources(ctx, params) -> types.ListResourcesResult:
        return types.ListResourcesResult(resources=resources)

    async def read_resource(ctx, params: types.ReadResourceRequestParams) -> types.ReadResourceResult:
        if str(params.uri) == SMALL_URI:
            text = SMALL_TEXT
        else:
            text = json.dumps({"uri": str(params.uri)})
        return types.ReadResourceResult(
            contents=[types.TextResourceContents(uri=params.uri, mime_type="application/json", text=text)]
        )

    server = Server("ll-ref", version="1.0", on_list_resources=list_resources, on_read_resource=read_resource)
    return server.streamable_http_app()


def mcpserver_app():
    """``MCPServer`` with one decorated function per resource."""
    from mcp.server.mcpserver import MCPServer

    app = MCPServer("ref-server", version="1.0")

    @app.resource(SMALL_URI, name="small", mime_type="application/json")
    def small() -> str:
        return SMALL_TEXT

    def reader(i: int):
        def read() -> str:
            return json.dumps({"uri": item_uri(i)})

        return read

    for i in range(N_ITEMS):
        app.resource(
            item_uri(i),
            name=f"v{i}",
            title=f"v{i} (int)",
            description=f"Variable v{i} of type int",
            mime_type="application/json",
            annotations=types.Annotations(priority=0.5),
        )(reader(i))
    return app.streamable_http_app()


def main() -> None:
    kind, port = sys.argv[1], int(sys.argv[2])
    app = lowlevel_app() if kind == "lowlevel" else mcpserver_app()
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning", access_log=False)


if __name__ == "__main__":
    main()
