"""What a tool is to clients: its name, title, description, input schema and, for a view's tool,
the ``ui://`` view a host renders its result in; and what runs it (a :data:`Handler`). The
protocol's own tools are in tools.py; others (the Apps views' tools, nb_tools.py)
are registered with ``Tools.add`` where a server is composed."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..revisions import knows

MAX_RESULT_SIZE = "anthropic/maxResultSizeChars"  # Claude Code's per-tool result size (see budget.py)
# A tool's handler: (revision, arguments checked against its schema, the calling client's watches)
# -> its result; "structured"/"brief" callables in it become structuredContent for Apps clients.
Handler = Callable[[str, dict[str, Any], Any], dict[str, Any]]


class Tool:
    """One tool as the server lists it (built once per server; not changed afterwards)."""

    __slots__ = ("description", "name", "schema", "title", "view")

    def __init__(self, name: str, title: str, description: str, schema: dict[str, Any], view: str | None = None):
        self.name = name
        self.title = title
        self.description = description
        self.schema = schema
        self.view = view  # the ui:// resource a host renders the result in (listed to Apps clients only)

    def to_json(self, version: str, max_result_chars: int | None = None) -> dict[str, Any]:
        """The tool as listed; ``max_result_chars``: the size its results may reach, declared where
        a host reads it (Claude Code 2.1.91+: ``_meta["anthropic/maxResultSizeChars"]``)."""
        out: dict[str, Any] = {"name": self.name, "description": self.description, "inputSchema": self.schema}
        if knows(version, "title"):
            out["title"] = self.title
        if knows(version, "completions_capability"):  # ToolAnnotations arrived with 2025-03-26
            out["annotations"] = {"readOnlyHint": True, "destructiveHint": False, "openWorldHint": False}
        meta: dict[str, Any] = {}
        if self.view is not None:  # the stable key, and the flat one early hosts read
            meta["ui"] = {"resourceUri": self.view, "visibility": ["model", "app"]}
            meta["ui/resourceUri"] = self.view
        if max_result_chars is not None and knows(version, "title"):  # a tool's _meta: 2025-06-18 on
            meta[MAX_RESULT_SIZE] = max_result_chars
        if meta:
            out["_meta"] = meta
        return out


def schema_of(properties: dict[str, Any], required: tuple[str, ...] = ()) -> dict[str, Any]:
    out: dict[str, Any] = {"type": "object", "properties": properties, "additionalProperties": False}
    if required:
        out["required"] = list(required)
    return out
