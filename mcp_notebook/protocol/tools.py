"""A few tools for hosts that only call tools: list_resources, read_resource, changes_since.

They serve the same resources as the resource methods, with the same bounds and paging. Results link
the resources they mention: ``resource_link`` content items for revisions that know them
(2025-06-18+), a text line otherwise. Bad arguments give ``isError`` results, an unknown tool a
JSON-RPC error (-32602), as the spec asks.

Tools are a table of specs and handlers: the three above, and those a composition site adds with
:meth:`Tools.add` (the Apps views' tools, nb_tools.py). A tool that names a ``ui://``
view is listed and callable only for clients that offer the Apps extension.
"""

from __future__ import annotations

import base64
import json
import logging
import threading
from collections.abc import Callable
from datetime import datetime, timezone
from typing import Any

from .. import budget
from ..redact import REDACTOR
from ..resources import LIST_CHANGED, Resources
from ..revisions import knows
from ..types import InvalidResourceParams, ResourceNotFound, ResourceReadError, masked_blob
from . import jsonrpc as rpc
from .cursors import decode_cursor, encode_cursor
from .exchange import Ctx
from .jsonrpc import MAX_URI, RpcError
from .tool_spec import Handler, Tool, schema_of
from .tool_watch import ClientWatches, ToolWatches

MAX_WAIT_SECONDS = 30.0
DEFAULT_WAIT_SECONDS = 20.0
SETTLE_SECONDS = 5.0  # changes_since waits at most this long for the exact checks of a cell that just ended
MAX_WAITERS = 2  # each waiting call holds a request worker; the rest answer at once
MAX_CHANGES = 200  # journal entries per changes_since page (fewer when the page would not fit the budget)
MAX_PAGE_URIS = 2_000  # changed URIs per changes_since page, likewise
MAX_LINKS = 50
TOOL_PAGE = 100  # list_resources: resources per page (tool outputs must stay small)
TOOLS_TTL_MS = 3_600_000  # the tool set never changes while a hub runs
log = logging.getLogger("mcp_notebook.protocol")


# The protocol's own tools, in words that fit any server; a composition site may give them its own
# (Tools.describe; the notebook's words, naming its URIs, are in nb_tools.py).
TOOLS = (
    Tool(
        "list_resources",
        "List resources",
        "List the server's resources and, on the first page, the URI templates. Read one with read_resource.",
        schema_of({"cursor": {"type": "string", "description": "nextCursor of the previous page"}}),
    ),
    Tool(
        "read_resource",
        "Read a resource",
        "Read one resource by URI: a listed one or a filled-in template. Large values come in bounded pages "
        "that name the URI of the next page.",
        schema_of({"uri": {"type": "string", "description": "resource URI"}}, ("uri",)),
    ),
    Tool(
        "changes_since",
        "What changed",
        "What changed since a cursor (returned by the previous call), one line per resource in 'summary', so you "
        "can decide what to re-read. Without a cursor: changes since your previous call or first read, else a "
        f"starting cursor. Waits up to wait_seconds (default {int(DEFAULT_WAIT_SECONDS)}, 0-{int(MAX_WAIT_SECONDS)}; "
        "0 answers at once) when nothing changed yet. Resources you read with read_resource are watched for you "
        "until you stop calling tools for 30 minutes.",
        schema_of(
            {
                "cursor": {"type": "string", "description": "cursor returned by the previous call"},
                "wait_seconds": {"type": "number", "minimum": 0, "maximum": MAX_WAIT_SECONDS},
            }
        ),
    ),
)


class ArgumentError(ValueError):
    """Arguments that do not fit the tool's input schema."""


def check_arguments(schema: dict[str, Any], args: Any) -> dict[str, Any]:
    """Validate ``args`` against the small schemas above (object, string/number/integer props, required)."""
    if args is None:
        args = {}
    if not isinstance(args, dict):
        raise ArgumentError("arguments must be an object")
    props = schema["properties"]
    unknown = sorted(set(args) - set(props))
    if unknown:
        raise ArgumentError(f"unknown argument(s): {', '.join('arguments.' + u for u in unknown)[:500]}")
    for name in schema.get("required", ()):
        if name not in args:
            raise ArgumentError(f"arguments.{name} is required")
    for name, value in args.items():
        _check_value(f"arguments.{name}", props[name], value)
    return args


_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
    "object": (dict,),
    "array": (list,),
}


def _check_value(where: str, spec: dict[str, Any], value: Any) -> None:
    """One argument against its property schema: type, then bounds (only those the schema declares)."""
    kind = spec.get("type", "")
    if kind in _TYPES and (
        not isinstance(value, _TYPES[kind]) or (isinstance(value, bool) and kind in ("integer", "number"))
    ):
        raise ArgumentError(f"{where} must be {'an' if kind[0] in 'aeiou' else 'a'} {kind}")
    if kind in ("number", "integer"):
        low, high = spec.get("minimum"), spec.get("maximum")
        if (low is not None and value < low) or (high is not None and value > high):
            if low is not None and high is not None:
                raise ArgumentError(f"{where} must be between {low} and {high}")
            raise ArgumentError(
                f"{where} must be at least {low}" if low is not None else f"{where} must be at most {high}"
            )


def _text(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text}


def _error(text: str) -> dict[str, Any]:
    """A tool execution error; masked, as its text echoes the arguments (a URI, a typed argument)."""
    return {"content": [_text(REDACTOR.mask(text))], "isError": True}


def _name_of(uri: str) -> str:
    return uri.rstrip("/").rsplit("/", 1)[-1] or uri


class Tools:
    """tools/list and tools/call for both eras; handlers take (ctx, params) like the server's."""

    def __init__(self, resources: Resources, page_size: int = TOOL_PAGE, max_chars: int = budget.RESULT_CHARS):
        self.resources = resources
        self.page_size = max(1, min(page_size, TOOL_PAGE))
        self.budget = max_chars  # a tool's result, as sent (budget.py)
        self._waiters = threading.BoundedSemaphore(MAX_WAITERS)
        self.watches = ToolWatches(resources)
        # Each tool with its handler, by name; composition sites add theirs (add).
        self._tools: dict[str, tuple[Tool, Handler]] = {}
        own: dict[str, Handler] = {
            "list_resources": self._list_resources,
            "read_resource": self._read_resource,
            "changes_since": self._changes_since,
        }
        for tool in TOOLS:
            self.add(tool, own[tool.name])

    def add(self, tool: Tool, handler: Handler) -> None:
        """Offer ``tool``, run by ``handler`` (before the server serves; a name is taken once)."""
        if tool.name in self._tools:
            raise ValueError(f"a tool named {tool.name} is already registered")
        self._tools[tool.name] = (tool, handler)

    def describe(self, tool: Tool) -> None:
        """Give a registered tool a composition site's own words (title, descriptions); its arguments
        and handler stay."""
        old, handler = self._tools[tool.name]
        props = tool.schema.get("properties", {})
        if props.keys() != old.schema["properties"].keys() or tool.schema.get("required") != old.schema.get("required"):
            raise ValueError(f"{tool.name}: describe changes words, not arguments")
        self._tools[tool.name] = (tool, handler)

    def handler(self, name: str) -> Handler:
        """The handler of a registered tool (e.g. changes_since, for a tool that starts a feed)."""
        return self._tools[name][1]

    # -- methods ------------------------------------------------------------------------
    def list_tools(self, ctx: Ctx, params: dict[str, Any]) -> dict[str, Any]:
        """The tools; with the Apps extension offered, also the view tools (and structured results)."""
        if params.get("cursor") is not None:
            raise RpcError(rpc.INVALID_PARAMS, "Invalid params: invalid cursor")
        apps = ctx.apps
        tools = [tool for tool, _ in self._tools.values() if apps or tool.view is None]
        declared = budget.declared(self.budget + budget.RESERVE)
        out: dict[str, Any] = {"tools": [t.to_json(ctx.version, declared) for t in tools]}
        if knows(ctx.version, "stateless"):
            out["ttlMs"] = TOOLS_TTL_MS
            out["cacheScope"] = "private" if apps else "public"  # the list depends on what the client offers
        return out

    def call_tool(self, ctx: Ctx, params: dict[str, Any]) -> dict[str, Any]:
        """tools/call within the budget: the tool runs again at a lower scale (smaller pages, fewer
        rows, a shorter read, each naming what follows) while its result as sent is over; an error
        fits ERROR_CHARS. A tool that cannot shrink is cut, saying so (none of ours: the tests check)."""
        result, size = budget.fit(lambda: self._call(ctx, params), self.budget, _measure)
        if result.get("isError"):  # (the era's fields come on top: leave them room)
            return budget.bounded_tool_error(result, budget.ERROR_CHARS - budget.RESERVE)
        return result if size <= self.budget else _cut_result(result, self.budget)

    def _call(self, ctx: Ctx, params: dict[str, Any]) -> dict[str, Any]:
        name = params.get("name")
        if not isinstance(name, str):
            raise RpcError(rpc.INVALID_PARAMS, "Invalid params: name (string) is required")
        apps = ctx.apps
        entry = self._tools.get(name)
        if entry is None or (entry[0].view is not None and not apps):  # a view's tool: Apps clients only
            raise RpcError(rpc.INVALID_PARAMS, f"Unknown tool: {name}", {"name": name})
        tool, handler = entry
        try:
            args = check_arguments(tool.schema, params.get("arguments"))
            client = self.watches.client(ctx.client_key)
            result = handler(ctx.version, args, client)
            if apps:  # structured results only for a client with Apps: the others see what they always saw
                structured = result.pop("structured", None)
                if structured is not None:
                    result["structuredContent"] = structured()
                brief = result.pop("brief", None)  # the model's text when the document goes structured
                if brief is not None:
                    result["content"][0] = _text(brief())
            else:
                result.pop("structured", None)
                result.pop("brief", None)
            return result
        except ArgumentError as exc:
            return _error(f"Invalid arguments for {name}: {exc}")
        except ResourceNotFound as exc:
            return _error(f"{exc}. list_resources shows what exists.")  # "Resource not found: URI", or why
        except InvalidResourceParams as exc:
            return _error(f"Invalid resource parameters: {exc}")
        except ResourceReadError as exc:
            return _error(f"Could not read the resource: {exc}")

    # -- tools --------------------------------------------------------------------------
    def _list_resources(self, version: str, args: dict[str, Any], client: ClientWatches) -> dict[str, Any]:
        try:
            offset = decode_cursor(args.get("cursor"))
        except RpcError:
            raise ArgumentError("invalid cursor") from None
        resources = self.resources.list_resources()
        size = budget.scaled(self.page_size)  # fewer per page when a page would not fit
        page = resources[offset : offset + size]
        doc: dict[str, Any] = {
            "resources": [_brief(r.to_json(version)) for r in page],
            "total": len(resources),
        }
        if offset == 0:
            doc["templates"] = [_brief(t.to_json(version)) for t in self.resources.list_templates()]
        if offset + size < len(resources):
            doc["nextCursor"] = encode_cursor(offset + size)
        links = [(r.uri, r.name, r.mime_type) for r in page]
        return {"content": [_text(json.dumps(doc, ensure_ascii=False)), *_links(version, links)]}

    def _read_resource(self, version: str, args: dict[str, Any], client: ClientWatches) -> dict[str, Any]:
        uri = args["uri"]
        if not uri or len(uri) > MAX_URI:
            raise ArgumentError(f"uri must be a non-empty string of at most {MAX_URI} characters")
        if client.seen_seq is None:  # cursor-less changes_since starts from the client's first read
            client.seen_seq = self.resources.journal.seq
        contents = self.resources.read(uri)
        if not contents:
            raise ResourceNotFound(uri)
        self.watches.note_read(client, uri)
        items: list[dict[str, Any]] = []
        for c in contents:
            if c.blob is None:
                items.append(_text(c.masked_text()))
            elif (c.mime_type or "").startswith("image/"):
                items.append(
                    {
                        "type": "image",
                        "data": base64.b64encode(masked_blob(c.blob)).decode("ascii"),
                        "mimeType": c.mime_type,
                    }
                )
            else:
                items.append({"type": "resource", "resource": c.to_json(version)})
        items.extend(_links(version, [(c.uri, _name_of(c.uri), c.mime_type) for c in contents]))
        # With Apps, the text goes once: in content (for the model); each structured item names its
        # content item ("content": index), where a view finds its text, image or blob.
        return {
            "content": items,
            "structured": lambda: {"contents": [_located(c, i, version) for i, c in enumerate(contents)]},
        }

    def _changes_since(self, version: str, args: dict[str, Any], client: ClientWatches) -> dict[str, Any]:
        journal, link = self.resources.journal, self.resources.cell_uri
        wait = float(args.get("wait_seconds", DEFAULT_WAIT_SECONDS))
        seq, skip, reset = self._parse_cursor(args.get("cursor"))
        if seq is None:  # no cursor: since this client's previous look, else from now on
            seq, skip = (client.seen_seq, client.seen_skip) if client.seen_seq is not None else (journal.seq, 0)
        entries, gap, waited = self._wait_for_changes(seq, wait if not reset else 0)
        first, _, _ = _page_of(entries, seq, skip, MAX_PAGE_URIS, MAX_CHANGES)
        described = _first_unique(first, MAX_LINKS)  # described once: a smaller page's URIs are a prefix
        lines = dict(zip(described, self.watches.describe(client, described), strict=True))

        def build() -> tuple[dict[str, Any], str, list[str]]:
            page, more, (last, last_skip) = _page_of(
                entries, seq, skip, budget.scaled(MAX_PAGE_URIS), budget.scaled(MAX_CHANGES)
            )
            uris = sorted({u for e in page for u in e[3]})
            shown = [u for u in _first_unique(page, MAX_LINKS) if u in lines]
            causes = {u: e[4] for e in page if e[4] is not None for u in e[3]}  # the latest cell behind each URI
            doc: dict[str, Any] = {
                "cursor": f"{journal.epoch}.{last}" + (f".{last_skip}" if last_skip else ""),
                "summary": [_by_cell(lines[u], causes.get(u), link) for u in shown]
                + _more_line(uris)
                + _list_line(page),
                "changed": uris,
                "list_changed": any(e[2] == LIST_CHANGED for e in page),
                "changes": [_change_row(e, link) for e in page],
            }
            if reset:
                doc["reset"] = True
                doc["note"] = "The cursor is from an earlier hub (the kernel restarted): re-read what you need."
            if gap:
                doc["truncated"] = True
            if more:
                doc["more"] = True
                doc["next"] = f"more changes: changes_since with cursor {doc['cursor']}"
            if not entries and wait > 0:
                doc["timed_out" if waited else "busy"] = True
            return doc, REDACTOR.mask(json.dumps(doc)), shown  # URIs a client read (typed arguments), change lines

        def measure(built: tuple[dict[str, Any], str, list[str]]) -> int:  # either form a client gets
            doc, text, shown = built
            links = _links(version, [(u, _name_of(u), None) for u in shown])
            return budget.wire_chars(text) + budget.wire_chars(links) + budget.wire_chars(_changes_text(doc)) + 200

        (doc, text, shown), _ = budget.fit(build, self.budget, measure)
        last, _, last_skip = doc["cursor"].partition(".")[2].partition(".")
        client.seen_seq, client.seen_skip = int(last), int(last_skip or 0)
        return {
            "content": [_text(text), *_links(version, [(u, _name_of(u), None) for u in shown])],
            "structured": lambda: REDACTOR.mask_obj(doc),
            "brief": lambda: REDACTOR.mask(_changes_text(doc)),
        }

    def _wait_for_changes(self, seq: int, wait: float) -> tuple[list[JournalEntry], bool, bool]:
        """(entries after ``seq``, whether older ones were dropped, whether we waited): waits up to
        ``wait`` seconds when there are none yet, if a waiter's slot is free."""
        journal = self.resources.journal
        # A cell that just ended may still have exact checks queued (in-place edits): let them land first.
        self.resources.settle(SETTLE_SECONDS)
        entries, gap = journal.since(seq)
        waited = False
        if not entries and wait > 0 and self._waiters.acquire(blocking=False):
            try:
                journal.wait(seq, min(wait, MAX_WAIT_SECONDS))
                waited = True
            finally:
                self._waiters.release()
            self.resources.settle(SETTLE_SECONDS)
            entries, gap = journal.since(seq)
        return entries, gap, waited

    def _parse_cursor(self, cursor: str | None) -> tuple[int | None, int, bool]:
        """(seq, skip, reset): after entry ``seq`` and ``skip`` URIs of the next (a page cut inside an
        entry); reset when the cursor belongs to an earlier hub."""
        if cursor is None:
            return None, 0, False
        epoch, _, rest = cursor.partition(".")
        seq, _, skip = rest.partition(".")
        if not (seq.isascii() and seq.isdigit()) or (skip and not (skip.isascii() and skip.isdigit())):
            raise ArgumentError("invalid cursor")
        if epoch != self.resources.journal.epoch:
            return 0, 0, True
        return int(seq), int(skip or 0), False


JournalEntry = tuple[int, float, str, tuple[str, ...], "int | None"]  # seq, time, kind, URIs, the cell behind it


def _page_of(
    entries: list[JournalEntry], seq: int, skip: int, max_uris: int, max_entries: int
) -> tuple[list[JournalEntry], bool, tuple[int, int]]:
    """The entries of one changes_since page, whether more follow, and the position after it
    ((seq, skip): entries up to seq, and skip URIs of the next). An entry with more URIs than the
    page holds is split across pages; a page holds at least one URI or entry."""
    page: list[JournalEntry] = []
    used, pos = 0, (seq, skip)
    for s, t, k, uris, cell in entries:
        start = skip if s == seq + 1 else 0
        rest = uris[start:]
        room = max_uris - used
        if page and (len(page) >= max_entries or room <= 0):
            return page, True, pos
        if len(rest) > room:
            page.append((s, t, k, rest[: max(1, room)], cell))
            return page, True, (s - 1, start + max(1, room))
        page.append((s, t, k, rest, cell))
        used, pos = used + len(rest), (s, 0)
    return page, False, pos


def _first_unique(entries: list[JournalEntry], n: int) -> list[str]:
    """The first ``n`` distinct URIs of ``entries``, in order (a smaller page's are a prefix)."""
    out: dict[str, None] = {}
    for e in entries:
        for u in e[3]:
            out.setdefault(u, None)
            if len(out) >= n:
                return list(out)
    return list(out)


def _changes_text(doc: dict[str, Any]) -> str:
    """changes_since for the model when the document itself goes to a view (structuredContent)."""
    flags = [k for k in ("more", "truncated", "reset", "timed_out", "busy") if doc.get(k)]
    lines = [*doc["summary"], f"cursor: {doc['cursor']}" + (f" ({', '.join(flags)})" if flags else "")]
    if doc.get("more"):
        lines.append(doc["next"])
    return "\n".join(lines)


def _located(c: Any, index: int, version: str) -> dict[str, Any]:
    """A read's contents item for structuredContent: everything but its text or blob, which content[index] holds."""
    item = c.to_json(version)
    item.pop("text", None)
    item.pop("blob", None)
    item["content"] = index
    return item


def _measure(result: dict[str, Any]) -> int:
    """A tool result's size as sent, images aside (hosts count them in tokens; a smaller scale does
    not shrink them); an error is bounded apart, never run again for its size."""
    if result.get("isError"):
        return 0
    content = result.get("content") or []
    if any(c.get("type") == "image" for c in content):
        result = {**result, "content": [{**c, "data": ""} if c.get("type") == "image" else c for c in content]}
    return budget.wire_chars(result)


def _cut_result(result: dict[str, Any], limit: int) -> dict[str, Any]:
    """The last resort for a tool result over budget (a user's resource that does not page): its
    texts share the room left, saying they were cut; structuredContent stays if it still fits."""
    log.warning("a tool result of %d characters was cut to the budget", budget.wire_chars(result))
    content = result.get("content") or []
    others = [c for c in content if c.get("type") != "text"]
    texts = [c for c in content if c.get("type") == "text"]
    rest = {k: v for k, v in result.items() if k != "content"}
    if budget.wire_chars(rest) > limit // 4:
        rest.pop("structuredContent", None)
    room = (limit - budget.wire_chars({**rest, "content": others}) - 100 * len(texts)) // max(1, len(texts))
    note = "\n… [cut at the hub's result budget: this resource does not page]"
    return {
        **rest,
        "content": [{**c, "text": budget.cut_text(c["text"], max(200, room), note)} for c in texts] + others,
    }


def _change_row(entry: Any, link: Callable[[int], str]) -> dict[str, Any]:
    seq, at, kind, uris, cell = entry
    row = {"seq": seq, "time": datetime.fromtimestamp(at, timezone.utc).isoformat(), "kind": kind, "uris": list(uris)}
    if cell is not None:
        row["cell"] = link(cell)
    return row


def _by_cell(line: str, cell: int | None, link: Callable[[int], str]) -> str:
    """A change line with the executed cell that caused it (its URI: ``link``), when a cell did."""
    return line if cell is None else f"{line} (by cell {cell}: {link(cell)})"


def _more_line(uris: list[str]) -> list[str]:
    if len(uris) > MAX_LINKS:
        return [f"… showing {MAX_LINKS} of {len(uris)} changed resources; 'changed' lists them all"]
    return []


def _list_line(entries: list[Any]) -> list[str]:
    if any(e[2] == LIST_CHANGED for e in entries):
        return ["the resource list changed (names added, removed or retyped): list_resources shows it"]
    return []


def _brief(item: dict[str, Any]) -> dict[str, Any]:
    keep = ("uri", "uriTemplate", "name", "title", "description", "mimeType", "size")
    return {k: item[k] for k in keep if k in item}


def _links(version: str, items: list[tuple[str, str, str | None]]) -> list[dict[str, Any]]:
    """resource_link items (2025-06-18+), or one text line listing the URIs for older revisions."""
    mask = REDACTOR.mask
    items = [(mask(uri), mask(name), mime) for uri, name, mime in items[:MAX_LINKS]]
    if not items:
        return []
    if knows(version, "title"):
        out = []
        for uri, name, mime in items:
            link = {"type": "resource_link", "uri": uri, "name": name}
            if mime:
                link["mimeType"] = mime
            out.append(link)
        return out
    return [_text("Resources: " + ", ".join(uri for uri, _, _ in items))]
