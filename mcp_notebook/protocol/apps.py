"""MCP Apps (SEP-1865, extension ``io.modelcontextprotocol/ui``): what a client offers, what we answer.

A client (a host that renders views) offers the extension in its capabilities, per session in the
handshake era and per request (``_meta``) in the stateless era. Only then does the hub list its
``ui://`` views and view tools and add ``structuredContent`` to tool results: a client that does not
offer it sees exactly what it saw before the extension existed.
"""

from __future__ import annotations

from typing import Any

EXTENSION = "io.modelcontextprotocol/ui"
MIME = "text/html;profile=mcp-app"


def offered(capabilities: Any) -> bool:
    """Whether client ``capabilities`` offer the Apps extension with our view MIME type."""
    if type(capabilities) is not dict:
        return False
    extensions = capabilities.get("extensions")
    if type(extensions) is not dict:
        return False
    ui = extensions.get(EXTENSION)
    if type(ui) is not dict:
        return ui is True  # a bare flag: the extension, with its one MIME type
    mimes = ui.get("mimeTypes")
    return mimes is None or (type(mimes) is list and MIME in mimes)


def server_capability() -> dict[str, Any]:
    """What the hub says of the extension in its own capabilities (when the client offered it)."""
    return {EXTENSION: {"mimeTypes": [MIME]}}
