"""Codex's config.toml: our ``[mcp_servers.NAME]`` table, written without touching anything else.

The file is edited as text: the lines of an existing ``[mcp_servers.NAME]`` table (and its
sub-tables) are replaced in place, or the table is appended; every other byte stays, comments
included. The result is parsed again and must hold exactly our entry and, apart from it, the
same document as before: anything else (an entry spelled inline, a table split across the file)
is refused with a clear error instead of written.
"""

from __future__ import annotations

import json
import re
import sys
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

_BARE = re.compile(r"[A-Za-z0-9_-]+")
_HEADER = re.compile(r"^\s*\[")


class TomlError(ValueError):
    """A config.toml that cannot be read, or that we cannot edit safely."""


def _key(name: str) -> str:
    return name if _BARE.fullmatch(name) else _string(name)


def _string(value: str) -> str:
    """A TOML basic string (JSON's escapes are TOML's, given non-ASCII stays as is)."""
    return json.dumps(value, ensure_ascii=False).replace("\x7f", "\\u007f")


def _value(value: Any) -> str:
    if isinstance(value, str):
        return _string(value)
    if isinstance(value, list):
        return "[" + ", ".join(_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{_key(k)} = {_value(v)}" for k, v in value.items()) + " }"
    raise TypeError(f"no TOML form for {type(value).__name__}")


def table(name: str, server: dict[str, Any]) -> str:
    """The ``[mcp_servers.NAME]`` table for ``server`` (its ``env`` as a sub-table)."""
    lines = [f"[mcp_servers.{_key(name)}]"]
    lines += [f"{_key(k)} = {_value(v)}" for k, v in server.items() if k != "env"]
    if server.get("env"):
        lines += ["", f"[mcp_servers.{_key(name)}.env]"]
        lines += [f"{_key(k)} = {_string(v)}" for k, v in server["env"].items()]
    return "\n".join(lines) + "\n"


def parse(text: str, where: str) -> dict[str, Any]:
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise TomlError(f"{where} is not valid TOML ({exc}); fix it or add the entry by hand") from None


def _ours(line: str, name: str) -> bool:
    """Is ``line`` the header of our table or of one of its sub-tables?"""
    names = "|".join(re.escape(n) for n in {_key(name), _string(name), f"'{name}'"})
    return re.match(rf"^\s*\[\s*mcp_servers\s*\.\s*(?:{names})\s*[.\]]", line) is not None


def _replace(text: str, name: str, new: str) -> str:
    """``text`` with the lines of our table replaced by ``new`` (appended when there is none)."""
    lines = text.splitlines(keepends=True)
    out: list[str] = []
    inside = placed = False
    for line in lines:
        if _HEADER.match(line) and not line.lstrip().startswith("[["):
            inside = _ours(line, name)
            if inside and not placed:
                out.append(new + "\n")
                placed = True
        elif _HEADER.match(line):
            inside = False
        if not inside:
            out.append(line)
    if placed:
        return "".join(out)
    body = "".join(out)
    if body and not body.endswith("\n"):
        body += "\n"
    return body + ("\n" if body.strip() else "") + new


def _without(doc: dict[str, Any], name: str) -> dict[str, Any]:
    servers = dict(doc.get("mcp_servers") or {})
    servers.pop(name, None)
    rest = {k: v for k, v in doc.items() if k != "mcp_servers"}
    return {**rest, "mcp_servers": servers} if servers else rest


def merged_toml(text: str, name: str, server: dict[str, Any], where: str) -> str:
    """``text`` (a config.toml) with our entry as ``[mcp_servers.NAME]``; the rest kept as it was."""
    before = parse(text, where)
    if not isinstance(before.get("mcp_servers", {}), dict):
        raise TomlError(f"{where}: 'mcp_servers' is not a table; add the entry by hand")
    new = _replace(text, name, table(name, server))
    try:
        after = tomllib.loads(new)
    except tomllib.TOMLDecodeError:
        after = None
    if after is None or after["mcp_servers"].get(name) != server or _without(after, name) != _without(before, name):
        raise TomlError(
            f"{where} defines the {name!r} server in a form this command does not edit "
            f"(inline or split): remove it and run again, or add this table by hand:\n{table(name, server)}"
        )
    return new
