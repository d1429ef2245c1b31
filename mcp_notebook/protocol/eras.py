"""The two eras of MCP, and the one rule that tells which a message belongs to.

- The **handshake era** (2024-11-05 … 2025-11-25): ``initialize`` opens a session
  (``Mcp-Session-Id``); later requests carry the session; a GET stream brings notifications.
- The **stateless era** (2026-07-28): no initialize and no session; every request carries its
  revision and capabilities in ``params._meta`` (mirrored in headers); ``subscriptions/listen``
  streams bring notifications.

Everything that must decide the era (the server, its flat read path, the stdio bridge) asks
:func:`classify`. This module imports only the revision table, so fronts may use it cheaply.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..revisions import STATELESS_VERSIONS

HANDSHAKE = "handshake"
STATELESS = "stateless"

# The stateless era's _meta keys.
META_VERSION = "io.modelcontextprotocol/protocolVersion"
META_CAPS = "io.modelcontextprotocol/clientCapabilities"
META_LOG_LEVEL = "io.modelcontextprotocol/logLevel"
META_SERVER_INFO = "io.modelcontextprotocol/serverInfo"
META_SUB_ID = "io.modelcontextprotocol/subscriptionId"
META_CLIENT_INFO = "io.modelcontextprotocol/clientInfo"


def classify(headers: Mapping[str, str], message: Any) -> str:
    """The era of one JSON-RPC message (not a batch) and its lower-cased HTTP headers ({} on stdio).

    Stateless when the ``MCP-Protocol-Version`` header names a stateless revision, or when the
    message's ``params._meta`` carries a protocol version (``initialize`` excepted, which always
    opens a handshake-era session); handshake otherwise. A stateless message with a bad or
    unsupported revision is still stateless: its era's checks give the precise error.
    """
    if headers.get("mcp-protocol-version") in STATELESS_VERSIONS:
        return STATELESS
    if type(message) is dict:
        params = message.get("params")
        meta = params.get("_meta") if type(params) is dict else None
        if type(meta) is dict and META_VERSION in meta and message.get("method") != "initialize":
            return STATELESS
    return HANDSHAKE
