"""What a tool is to clients: its name, title, description, input schema and, for a view's tool,
the ``ui://`` view a host renders its result in (shared by tools.py and view_tools.py)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..revisions import knows


@dataclass(frozen=True)
class Tool:
    name: str
    title: str
    description: str
    schema: dict[str, Any]
    view: str | None = None  # the ui:// resource a host renders the result in

    def to_json(self, version: str) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name, "description": self.description, "inputSchema": self.schema}
        if knows(version, "title"):
            out["title"] = self.title
        if knows(version, "completions_capability"):  # ToolAnnotations arrived with 2025-03-26
            out["annotations"] = {"readOnlyHint": True, "destructiveHint": False, "openWorldHint": False}
        if self.view is not None:  # the stable key, and the flat one early hosts read
            out["_meta"] = {
                "ui": {"resourceUri": self.view, "visibility": ["model", "app"]},
                "ui/resourceUri": self.view,
            }
        return out


def schema_of(properties: dict[str, Any], required: tuple[str, ...] = ()) -> dict[str, Any]:
    out: dict[str, Any] = {"type": "object", "properties": properties, "additionalProperties": False}
    if required:
        out["required"] = list(required)
    return out
