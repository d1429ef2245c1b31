"""Opaque pagination cursors (resources/list, templates/list, tool listings)."""

from __future__ import annotations

import base64
import binascii
import json
from typing import Any

from . import jsonrpc as rpc
from .jsonrpc import RpcError


def encode_cursor(offset: int) -> str:
    return base64.urlsafe_b64encode(json.dumps({"o": offset}).encode()).decode().rstrip("=")


def decode_cursor(cursor: Any) -> int:
    """Offset of an opaque cursor; -32602 for anything we did not issue."""
    if cursor is None:
        return 0
    invalid = RpcError(rpc.INVALID_PARAMS, "Invalid params: invalid cursor")
    if not isinstance(cursor, str) or len(cursor) > 200:
        raise invalid
    try:
        data = json.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
        offset = data["o"]
    except (ValueError, KeyError, TypeError, binascii.Error):
        raise invalid from None
    if not isinstance(offset, int) or isinstance(offset, bool) or offset < 0:
        raise invalid
    return offset
