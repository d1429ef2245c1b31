"""A few tools for hosts that only call tools: list_resources, read_resource, changes_since.

They serve the same resources as the resource methods, with the same bounds and paging. Results link
the resources they mention: ``resource_link`` content items for revisions that know them
(2025-06-18+), a text line otherwise. Bad arguments give ``isError`` results, an unknown tool a
JSON-RPC error (-32602), as the spec asks.
"""

from __future__ import annotations

import base64
import json
import threading
from datetime import datetime, timezone
from typing import Any

from ..redact import REDACTOR
from ..resources import LIST_CHANGED, Resources
from ..revisions import knows
from ..types import InvalidResourceParams, ResourceNotFound, ResourceReadError, masked_blob
from . import jsonrpc as rpc
from .cursors import decode_cursor, encode_cursor
from .exchange import Ctx
from .jsonrpc import RpcError
from .params import MAX_URI
from .tool_spec import Tool, schema_of
from .tool_watch import ClientWatches, ToolWatches
from .view_tools import VIEW_TOOLS, ViewTools

MAX_WAIT_SECONDS = 30.0
DEFAULT_WAIT_SECONDS = 20.0
SETTLE_SECONDS = 5.0  # changes_since waits at most this long for the exact checks of a cell that just ended
MAX_WAITERS = 2  # each waiting call holds a request worker; the rest answer at once
MAX_CHANGES = 200  # journal entries per changes_since answer
MAX_LINKS = 50
TOOL_PAGE = 100  # list_resources: resources per page (tool outputs must stay small)
TOOLS_TTL_MS = 3_600_000  # the tool set never changes while a hub runs


TOOLS = (
    Tool(
        "list_resources",
        "List notebook resources",
        "List the resources of the live Jupyter kernel (variables, data frames, kernel facts) and, on the first "
        "page, the URI templates. Read one with read_resource. Start with nb://vars.",
        schema_of({"cursor": {"type": "string", "description": "nextCursor of the previous page"}}),
    ),
    Tool(
        "read_resource",
        "Read a notebook resource",
        "Read one resource of the live kernel by URI, e.g. nb://vars, nb://vars/df or a filled-in template. "
        "Large values come in bounded pages that name the URI of the next page.",
        schema_of({"uri": {"type": "string", "description": "resource URI, e.g. nb://vars/df"}}, ("uri",)),
    ),
    Tool(
        "changes_since",
        "What changed in the notebook",
        "What changed in the kernel since a cursor (returned by the previous call), one line each in 'summary' "
        "(e.g. 'nb://frames/df: changed in place, DataFrame shape (200, 3)', 'rebound, list len 3 → dict len 2'), so you "
        "can decide what to re-read. Without a cursor: changes since your previous call or first read, else a "
        f"starting cursor. Waits up to wait_seconds (default {int(DEFAULT_WAIT_SECONDS)}, 0-{int(MAX_WAIT_SECONDS)}; "
        "0 answers at once) when nothing changed yet. Rebinding a name is always seen; in-place edits "
        "(df['x'] *= 2) are seen for resources you read with read_resource (watched for you until you stop "
        "calling tools for 30 minutes) and for subscribed ones.",
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

    def __init__(self, resources: Resources, page_size: int = TOOL_PAGE):
        self.resources = resources
        self.page_size = max(1, min(page_size, TOOL_PAGE))
        self._by_name = {t.name: t for t in TOOLS}
        self._views = {t.name: t for t in VIEW_TOOLS}
        self._waiters = threading.BoundedSemaphore(MAX_WAITERS)
        self.watches = ToolWatches(resources)
        self.view_tools = ViewTools(resources, self._changes_since)

    # -- methods ------------------------------------------------------------------------
    def list_tools(self, ctx: Ctx, params: dict[str, Any]) -> dict[str, Any]:
        """The tools; with the Apps extension offered, also the view tools (and structured results)."""
        if params.get("cursor") is not None:
            raise RpcError(rpc.INVALID_PARAMS, "Invalid params: invalid cursor")
        apps = ctx.apps
        tools = (*TOOLS, *VIEW_TOOLS) if apps else TOOLS
        out: dict[str, Any] = {"tools": [t.to_json(ctx.version) for t in tools]}
        if knows(ctx.version, "stateless"):
            out["ttlMs"] = TOOLS_TTL_MS
            out["cacheScope"] = "private" if apps else "public"  # the list depends on what the client offers
        return out

    def call_tool(self, ctx: Ctx, params: dict[str, Any]) -> dict[str, Any]:
        name = params.get("name")
        if not isinstance(name, str):
            raise RpcError(rpc.INVALID_PARAMS, "Invalid params: name (string) is required")
        apps = ctx.apps
        tool = self._by_name.get(name) or (self._views.get(name) if apps else None)
        if tool is None:
            raise RpcError(rpc.INVALID_PARAMS, f"Unknown tool: {name}", {"name": name})
        try:
            args = check_arguments(tool.schema, params.get("arguments"))
            client = self.watches.client(ctx.client_key)
            if name in self._views:
                return getattr(self.view_tools, name)(ctx.version, args, client)
            result = getattr(self, f"_{name}")(ctx.version, args, client)
            if apps:  # structured results only for a client with Apps: the others see what they always saw
                structured = result.pop("structured", None)
                if structured is not None:
                    result["structuredContent"] = structured()
            else:
                result.pop("structured", None)
            return result
        except ArgumentError as exc:
            return _error(f"Invalid arguments for {name}: {exc}")
        except ResourceNotFound as exc:
            return _error(f"Resource not found: {exc.uri}. list_resources shows what exists.")
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
        page = resources[offset : offset + self.page_size]
        doc: dict[str, Any] = {
            "resources": [_brief(r.to_json(version)) for r in page],
            "total": len(resources),
        }
        if offset == 0:
            doc["templates"] = [_brief(t.to_json(version)) for t in self.resources.list_templates()]
        if offset + self.page_size < len(resources):
            doc["nextCursor"] = encode_cursor(offset + self.page_size)
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
        return {"content": items, "structured": lambda: {"contents": [c.to_json(version) for c in contents]}}

    def _changes_since(self, version: str, args: dict[str, Any], client: ClientWatches) -> dict[str, Any]:
        journal = self.resources.journal
        wait = float(args.get("wait_seconds", DEFAULT_WAIT_SECONDS))
        seq, reset = self._parse_cursor(args.get("cursor"))
        if seq is None:  # no cursor: since this client's previous look, else from now on
            seq = client.seen_seq if client.seen_seq is not None else journal.seq
        # A cell that just ended may still have exact checks queued (in-place edits): let them land first.
        self.resources.settle(SETTLE_SECONDS)
        entries, gap = journal.since(seq)
        waited = False
        if not entries and wait > 0 and not reset:
            if self._waiters.acquire(blocking=False):
                try:
                    journal.wait(seq, min(wait, MAX_WAIT_SECONDS))
                    waited = True
                finally:
                    self._waiters.release()
                self.resources.settle(SETTLE_SECONDS)
                entries, gap = journal.since(seq)
        more = len(entries) > MAX_CHANGES
        entries = entries[:MAX_CHANGES]
        last = entries[-1][0] if entries else max(seq, 0)
        uris = sorted({u for e in entries for u in e[3]})
        client.seen_seq = last
        doc: dict[str, Any] = {
            "cursor": f"{journal.epoch}.{last}",
            "summary": self.watches.describe(client, uris[:MAX_LINKS]) + _more_line(uris) + _list_line(entries),
            "changed": uris,
            "list_changed": any(e[2] == LIST_CHANGED for e in entries),
            "changes": [
                {"seq": s, "time": datetime.fromtimestamp(t, timezone.utc).isoformat(), "kind": k, "uris": list(u)}
                for s, t, k, u in entries
            ],
        }
        if reset:
            doc["reset"] = True
            doc["note"] = "The cursor is from an earlier hub (the kernel restarted): re-read what you need."
        if gap:
            doc["truncated"] = True
        if more:
            doc["more"] = True
        if not entries and wait > 0:
            doc["timed_out" if waited else "busy"] = True
        text = REDACTOR.mask(json.dumps(doc))  # URIs a client read (typed arguments) and change lines
        return {
            "content": [_text(text), *_links(version, [(u, _name_of(u), None) for u in uris])],
            "structured": lambda: REDACTOR.mask_obj(doc),
        }

    def _parse_cursor(self, cursor: str | None) -> tuple[int | None, bool]:
        """(seq, reset): reset when the cursor belongs to an earlier hub."""
        if cursor is None:
            return None, False
        epoch, _, seq = cursor.partition(".")
        if not (seq.isascii() and seq.isdigit()):
            raise ArgumentError("invalid cursor")
        if epoch != self.resources.journal.epoch:
            return 0, True
        return int(seq), False


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
