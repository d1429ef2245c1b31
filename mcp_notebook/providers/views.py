"""The hub's MCP Apps views: ``ui://mcp-notebook/...`` HTML resources built from views/ at package time.

The three views share one self-contained HTML file (script and style inline, a strict CSP, no
network), ``views/views.html``; each ``ui://`` resource is that file with its view's name and title
filled in. A view gets its data only through the host's bridge (tool calls and resource reads).
The file is ours, not kernel data: it is served verbatim (no secret masking, which could alter the
script). Listed only to clients that offer the Apps extension (see protocol/apps.py); readable by any.
"""

from __future__ import annotations

from collections.abc import Hashable
from importlib import resources as package_files
from typing import Any

from ..types import Contents, Resource, ResourceNotFound, ResourceReadError
from .base import Provider

MIME = "text/html;profile=mcp-app"
PREFIX = "ui://mcp-notebook/"
FRAME_EXPLORER = PREFIX + "frame-explorer"
OUTPUT_VIEWER = PREFIX + "output-viewer"
CHANGES = PREFIX + "changes"

BUILT = "views.html"  # under mcp_notebook/views/
# uri -> (the view's key in the page, name, title, description)
VIEWS: dict[str, tuple[str, str, str, str]] = {
    FRAME_EXPLORER: (
        "frame",
        "frame-explorer",
        "Frame explorer",
        "Explore a data frame of the live kernel: schema, virtual scrolling over pages, sort and filter.",
    ),
    OUTPUT_VIEWER: (
        "outputs",
        "output-viewer",
        "Cell outputs",
        "A cell's source and outputs, images included (text shown as text, never as HTML).",
    ),
    CHANGES: (
        "changes",
        "changes",
        "Notebook changes",
        "A live feed of what cells changed since the view opened; each entry opens its view.",
    ),
}
# What hosts are told of a view's needs: no external domain of any kind, a border is welcome.
UI_META: dict[str, Any] = {"ui": {"csp": {"connectDomains": [], "resourceDomains": []}, "prefersBorder": True}}


class ViewsProvider(Provider):
    """The ``ui://`` views, read from the package's files (cached once read)."""

    uri_prefixes = (PREFIX,)

    list_is_pure = True
    apps_only = True  # listed to clients that offer the Apps extension only

    def __init__(self) -> None:
        self._html: dict[str, str] = {}

    def owns(self, uri: str) -> bool:
        return uri.startswith(PREFIX)

    def list_token(self) -> Hashable | None:
        return 0  # the views never change while a hub runs

    def list_resources(self) -> list[Resource]:
        return [
            Resource(uri=uri, name=name, title=title, description=desc, mime_type=MIME, meta=UI_META)
            for uri, (_, name, title, desc) in VIEWS.items()
        ]

    def read(self, uri: str) -> list[Contents]:
        return [Contents(uri=uri, mime_type=MIME, text=self.html(uri), meta=UI_META, verbatim=True)]

    def read_token(self, uri: str) -> Hashable | None:
        return 0 if uri in VIEWS else None

    def may_run_user_code(self, uri: str) -> bool:
        return False

    def html(self, uri: str) -> str:
        """The view's HTML; ResourceNotFound for a URI that names no view."""
        key = uri.split("?", 1)[0]
        entry = VIEWS.get(key)
        if entry is None:
            raise ResourceNotFound(uri, f"Resource not found: {uri} (views: {', '.join(VIEWS)})")
        cached = self._html.get(key)
        if cached is None:
            try:
                page = (package_files.files("mcp_notebook") / "views" / BUILT).read_text("utf-8")
            except OSError as exc:
                raise ResourceReadError(
                    f"the views are missing from this installation ({exc}); reinstall mcp-notebook"
                ) from None
            view, _, title, _ = entry
            cached = page.replace('data-view="__VIEW__"', f'data-view="{view}"', 1).replace("__TITLE__", title, 1)
            self._html[key] = cached
        return cached
