"""The tools over the ``nb://`` resources: the protocol's three generic tools in the notebook's
words, and the tools of the MCP Apps views (listed only to clients that offer the extension).

They live beside the providers whose URIs they name and read: the protocol knows tools only as a
table of specs and handlers. :func:`add_nb_tools` registers them where a server is composed (the
kernel's hub, the all-kernels front, which the JupyterHub service and the server extension use).

Each view tool names its view in ``_meta.ui.resourceUri`` and answers with ``structuredContent`` the view
renders first (no round trip before the first paint) and a ``content`` text the model reads.
Everything else a view shows it fetches itself through the host's bridge (read_resource and
changes_since, or resources/read): the views never see the hub's address or token.
"""

from __future__ import annotations

import json
import re
from typing import Any
from urllib.parse import quote

from . import budget
from .protocol.tool_spec import Handler, Tool, schema_of
from .protocol.tools import DEFAULT_WAIT_SECONDS, MAX_WAIT_SECONDS, Tools
from .providers.cells import cell_uri
from .providers.views import CHANGES, FRAME_EXPLORER, OUTPUT_VIEWER
from .redact import REDACTOR
from .resources import Resources
from .types import Contents, ResourceNotFound

FIRST_PAGE_ROWS = 100
LAST_CELLS = 50
DESCRIBED_CHARS = 6000  # show_outputs: the outputs' descriptions, all together  # show_outputs without a cell: the newest cell with outputs among the last ones


# The protocol's tools (protocol/tools.py) as the notebook describes them: its URIs as examples.
NB_WORDS = (
    Tool(
        "list_resources",
        "List notebook resources",
        "List the live kernel's resources (variables, tables, cells, kernel facts) and, on the first page, the "
        "URI templates; 100 per page. To see what is defined, read_resource nb://vars is smaller.",
        schema_of({"cursor": {"type": "string", "description": "nextCursor of the previous page"}}),
    ),
    Tool(
        "read_resource",
        "Read a notebook resource",
        "Read the live kernel by URI instead of asking the user to print a value or re-running a cell: "
        "nb://vars (what is defined), nb://frames/df/schema then nb://frames/df?limit=20 (never a whole "
        "table), nb://cells/3 (source, outputs, what it changed), nb://lineage/vars/df (where a value came "
        "from). At most about 50,000 characters; long values come in pages naming the next.",
        schema_of({"uri": {"type": "string", "description": "resource URI, e.g. nb://vars/df"}}, ("uri",)),
    ),
    Tool(
        "changes_since",
        "What changed in the notebook",
        "What the user's cells changed since a cursor (from the previous call): one 'summary' line per "
        "changed resource and the cell behind it (e.g. 'nb://vars/df: changed in place, DataFrame shape "
        "(200, 3) (by cell 7: nb://cells/7)'): re-read only those; 200 changes a page at most. Without a "
        f"cursor: since your previous call. Waits up to wait_seconds (default {int(DEFAULT_WAIT_SECONDS)}, "
        f"0-{int(MAX_WAIT_SECONDS)}). In-place edits (df['x'] *= 2) are seen for what you read.",
        schema_of(
            {
                "cursor": {"type": "string", "description": "cursor returned by the previous call"},
                "wait_seconds": {"type": "number", "minimum": 0, "maximum": MAX_WAIT_SECONDS},
            }
        ),
    ),
)


VIEW_TOOLS = (
    Tool(
        "explore_frame",
        "Explore a data frame",
        "Open an explorer of a table of the live kernel for the user to scroll, sort and filter; returns its "
        "schema and first rows. name: a variable, nb://frames/{name} or nb://db/{name}/tables/{table}.",
        schema_of({"name": {"type": "string", "description": "variable name or table URI"}}, ("name",)),
        FRAME_EXPLORER,
    ),
    Tool(
        "show_outputs",
        "Show a cell's outputs",
        "Show a cell's source and outputs (text, errors, images) to the user. cell: its seq number as in "
        "nb://cells; without it, the newest cell that has outputs.",
        schema_of({"cell": {"type": "integer", "minimum": 1, "description": "seq of the cell (nb://cells)"}}),
        OUTPUT_VIEWER,
    ),
    Tool(
        "watch_changes",
        "Watch notebook changes",
        "Open a live feed of what the user's cells change from now on (variables, frames, cells), each entry "
        "opening its view. Returns the starting cursor for changes_since.",
        schema_of({}),
        CHANGES,
    ),
)

# A table's URI, also kernel-qualified (the all-kernels front): nb://[kernels/K/]frames|vars/NAME[/schema]
# or nb://[kernels/K/]db/NAME/tables/TABLE[/schema]. A pattern string: compiled (and cached by re) at
# its first use, not when the hub loads.
_TABLE_URI = r"nb://(?P<kernel>kernels/[^/]+/)?(?P<path>(?:frames|vars)/[^/]+|db/[^/]+/tables/[^/]+)(?:/schema)?"


def _text(text: str) -> dict[str, Any]:
    return {"type": "text", "text": REDACTOR.mask(text)}


def _json_of(contents: list[Contents]) -> Any:
    return json.loads(contents[0].masked_text())


def page_base(name: str) -> str:
    """The page base URI of a table named by a variable name or a URI (nb://vars/X, nb://frames/X[/schema])."""
    name = name.strip()
    if not name:
        raise ValueError("name must name a variable or a table URI")
    if not name.startswith("nb://"):
        return "nb://frames/" + quote(name, safe="")
    match = re.fullmatch(_TABLE_URI, name.split("?", 1)[0].split("#", 1)[0].rstrip("/"))
    if match is None:
        raise ValueError(f"{name} is not a table URI (nb://frames/NAME or nb://db/NAME/tables/TABLE)")
    path = match.group("path")
    if path.startswith("vars/"):
        path = "frames/" + path[len("vars/") :]
    return f"nb://{match.group('kernel') or ''}{path}"


class ViewTools:
    """explore_frame, show_outputs and watch_changes, over the hub's resources."""

    def __init__(self, resources: Resources, changes_since: Handler):
        self.resources = resources
        self._changes_since = changes_since

    def explore_frame(self, version: str, args: dict[str, Any], client: Any) -> dict[str, Any]:
        try:
            base = page_base(args["name"])
        except ValueError as exc:
            return {"content": [_text(str(exc))], "isError": True}
        try:
            schema = _json_of(self.resources.read(base + "/schema"))
        except ResourceNotFound:
            return {
                "content": [
                    _text(f"No table named {args['name']}: nb://vars lists the variables, list_resources the rest")
                ],
                "isError": True,
            }
        limit = budget.scaled(FIRST_PAGE_ROWS)  # fewer first rows (and a shorter schema) when over budget
        page = self.resources.read(f"{base}?format=json&limit={limit}")
        rows = _json_of(page)
        from .providers.frames.pages import META_KEY  # the tables room, imported with its first use

        info = REDACTOR.mask_obj((page[0].meta or {}).get(META_KEY, {}))
        shape = schema.get("shape") or [None, len(schema.get("columns", []))]
        columns = ", ".join(f"{c.get('name')} ({c.get('dtype')})" for c in schema.get("columns", [])[:20])
        total = "an unknown number of" if shape[0] is None else f"{shape[0]:,}"
        text = (
            f"{schema.get('name', args['name'])}: {schema.get('type', 'table')}, {total} rows x {shape[1]} columns "
            f"({columns}). The user sees it in the frame explorer; pages: read_resource "
            f"{base}?offset=0&limit={FIRST_PAGE_ROWS}&format=json"
        )
        if schema.get("columns_note"):  # a wide table: the schema describes the first columns only
            text += f". Schema: {schema['columns_note']}"
        doc = {
            "view": "frame",
            "name": schema.get("name", args["name"]),
            "uri": base,
            "schemaUri": base + "/schema",
            "schema": schema,
            "page": info,
            "rows": rows,
        }
        return {"content": [_text(text)], "structuredContent": doc}

    def show_outputs(self, version: str, args: dict[str, Any], client: Any) -> dict[str, Any]:
        seq = args.get("cell")
        if seq is None:
            seq = self._newest_with_outputs()
            if seq is None:
                return {"content": [_text("No cell with outputs yet.")], "isError": True}
        try:
            cell = _json_of(self.resources.read(cell_uri(int(seq))))
        except ResourceNotFound as exc:
            return {"content": [_text(f"{exc} (nb://cells lists the cells kept)")], "isError": True}
        outputs = cell.get("outputs") or []
        kinds = ", ".join(str(o.get("output_type") or o.get("type") or "output") for o in outputs) or "none"
        uris = " ".join(f"{cell_uri(seq)}/outputs/{i}" for i in range(len(outputs)))
        text = f"Cell {seq} (In [{cell.get('execution_count')}]): {len(outputs)} outputs ({kinds}). {uris}".strip()
        text += self._descriptions(outputs)
        return {"content": [_text(text)], "structuredContent": {"view": "outputs", "cell": cell}}

    def _descriptions(self, outputs: list[dict[str, Any]]) -> str:
        """What the figures and rich outputs show (issue #44), for the model, bounded."""
        parts, room = [], budget.scaled(DESCRIBED_CHARS)
        for row in outputs:
            uri = row.get("description_uri")
            if not uri or room <= 0:
                continue
            try:
                described = self.resources.read(uri)[0].masked_text()
            except ResourceNotFound:
                continue
            parts.append(f"\nOutput {row.get('index')}: {described[:room]}")
            room -= len(parts[-1])
        return "".join(parts)

    def _newest_with_outputs(self) -> int | None:
        index = _json_of(self.resources.read("nb://cells?limit=1"))
        count = int(index.get("count") or 0)
        if not count:
            return None
        start = max(0, count - LAST_CELLS)
        recent = _json_of(self.resources.read(f"nb://cells?offset={start}&limit={LAST_CELLS}"))
        with_outputs = [row["seq"] for row in recent.get("cells", []) if row.get("outputs")]
        return with_outputs[-1] if with_outputs else None

    def watch_changes(self, version: str, args: dict[str, Any], client: Any) -> dict[str, Any]:
        journal = self.resources.journal
        result = self._changes_since(version, {"cursor": f"{journal.epoch}.{journal.seq}", "wait_seconds": 0}, client)
        doc = result["structured"]()
        text = (
            "The user now sees a live feed of the notebook's changes. To follow them yourself: changes_since "
            f"with cursor {doc['cursor']}."
        )
        return {"content": [_text(text)], "structuredContent": {"view": "changes", **doc}}


def add_nb_tools(tools: Tools) -> ViewTools:
    """Give a server's ``tools`` the notebook's words and the views' tools (where the server is
    composed); watch_changes starts from the cursor changes_since would give."""
    for tool in NB_WORDS:
        tools.describe(tool)
    views = ViewTools(tools.resources, tools.handler("changes_since"))
    handlers: dict[str, Handler] = {
        "explore_frame": views.explore_frame,
        "show_outputs": views.show_outputs,
        "watch_changes": views.watch_changes,
    }
    for tool in VIEW_TOOLS:
        tools.add(tool, handlers[tool.name])
    return views
