"""The MCP revisions this server speaks, grouped by era, and which fields and rules each one knows.

Two eras (named in :mod:`mcp_notebook.protocol.eras`): the handshake era (initialize, sessions)
and the stateless era (2026-07-28: every request carries its revision and capabilities).
"""

from __future__ import annotations

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
