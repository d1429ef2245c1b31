"""The stateless era's request rules on the wire, for both ends: the hub's protocol checks them
(protocol/stateless.py), every client of a hub writes them (the bridge, the front's upstream).

A stateless (2026-07-28) POST names its method in ``Mcp-Method`` and, for the methods below, its
target in ``Mcp-Name`` (equal to the param named here). A header value that is not plain
printable ASCII travels as ``=?base64?<UTF-8, base64>?=``.
"""

from __future__ import annotations

import base64
import binascii

# Methods whose request names its target in an Mcp-Name header, and the param it must equal.
NAMED_PARAM = {"resources/read": "uri", "tools/call": "name"}
_B64_START, _B64_END = "=?base64?", "?="


def encode_header_value(value: str) -> str:
    """A header-safe form of ``value``: itself when plain printable ASCII with no space around it
    and not starting like the encoded form, else the ``=?base64?…?=`` form."""
    safe = value.isascii() and value.isprintable() and value == value.strip() and not value.startswith("=?")
    return value if safe else _B64_START + base64.b64encode(value.encode()).decode() + _B64_END


def decode_header_value(value: str) -> str:
    """Undo :func:`encode_header_value` (a value not in the encoded form is returned as it is)."""
    if value.startswith(_B64_START) and value.endswith(_B64_END):
        try:
            return base64.b64decode(value[9:-2], validate=True).decode("utf-8")
        except (binascii.Error, UnicodeDecodeError):
            return value
    return value


def named_header(method: str, params: dict[str, object]) -> str | None:
    """The ``Mcp-Name`` value a request of ``method`` with ``params`` carries, encoded; None: none."""
    named = NAMED_PARAM.get(method)
    value = params.get(named) if named is not None else None
    return encode_header_value(value) if isinstance(value, str) else None


def request_headers(method: str, params: dict[str, object], version: str) -> dict[str, str]:
    """The stateless era's headers of a request: ``MCP-Protocol-Version``, ``Mcp-Method`` and, for
    the methods that name a target, ``Mcp-Name`` (each encoded as header-safe)."""
    out = {"MCP-Protocol-Version": encode_header_value(version), "Mcp-Method": encode_header_value(method)}
    name = named_header(method, params)
    if name is not None:
        out["Mcp-Name"] = name
    return out
