"""The MCP revisions this server speaks, grouped by era, which fields and rules each one knows,
and the one rule that tells which era a message belongs to.

- The **handshake era** (2024-11-05 … 2025-11-25): ``initialize`` opens a session
  (``Mcp-Session-Id``); later requests carry the session; a GET stream brings notifications.
- The **stateless era** (2026-07-28): no initialize and no session; every request carries its
  revision and capabilities in ``params._meta`` (mirrored in headers); ``subscriptions/listen``
  streams bring notifications.

Everything that must decide the era (the server, its flat read path, the stdio bridge) asks
:func:`classify`. This module imports nothing of the package, so fronts may use it cheaply.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

HANDSHAKE_VERSIONS: tuple[str, ...] = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")
STATELESS_VERSIONS: tuple[str, ...] = ("2026-07-28",)
ALL_VERSIONS: tuple[str, ...] = HANDSHAKE_VERSIONS + STATELESS_VERSIONS
LATEST_HANDSHAKE = HANDSHAKE_VERSIONS[-1]

# Revision in which each optional wire feature first appears (revisions sort as dates).
_SINCE = {
    "size": "2024-11-05",
    "completions_capability": "2025-03-26",
    "title": "2025-06-18",
    "meta": "2025-06-18",
    "last_modified": "2025-06-18",
    "icons": "2025-11-25",
    "stateless": "2026-07-28",
}


def knows(version: str, feature: str) -> bool:
    """True when revision ``version`` defines ``feature``."""
    return version >= _SINCE[feature]


def allows_batch(version: str) -> bool:
    """JSON-RPC batches exist up to 2025-03-26; 2025-06-18 removed them."""
    return version <= "2025-03-26"


def negotiate(requested: object) -> str:
    """Handshake negotiation: echo a supported revision, else offer our newest handshake one."""
    if isinstance(requested, str) and requested in HANDSHAKE_VERSIONS:
        return requested
    return LATEST_HANDSHAKE


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
