"""MCP revisions this server speaks, and which fields and rules each one knows."""

from __future__ import annotations

HANDSHAKE_VERSIONS: tuple[str, ...] = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")
MODERN_VERSIONS: tuple[str, ...] = ("2026-07-28",)
ALL_VERSIONS: tuple[str, ...] = HANDSHAKE_VERSIONS + MODERN_VERSIONS
LATEST_HANDSHAKE = HANDSHAKE_VERSIONS[-1]
LATEST = ALL_VERSIONS[-1]
# What a handshake-era request means when it carries no MCP-Protocol-Version header.
DEFAULT_HEADER_VERSION = "2025-03-26"

# Revision in which each optional wire feature first appears (revisions sort as dates).
_SINCE = {
    "size": "2024-11-05",
    "completions_capability": "2025-03-26",
    "title": "2025-06-18",
    "meta": "2025-06-18",
    "last_modified": "2025-06-18",
    "icons": "2025-11-25",
    "modern": "2026-07-28",
}


def knows(version: str, feature: str) -> bool:
    """True when revision ``version`` defines ``feature``."""
    return version >= _SINCE[feature]


def allows_batch(version: str) -> bool:
    """JSON-RPC batches exist up to 2025-03-26; 2025-06-18 removed them."""
    return version <= "2025-03-26"


def is_modern(version: str) -> bool:
    return version in MODERN_VERSIONS


def negotiate(requested: object) -> str:
    """Handshake negotiation: echo a supported revision, else offer our newest handshake one."""
    if isinstance(requested, str) and requested in HANDSHAKE_VERSIONS:
        return requested
    return LATEST_HANDSHAKE
