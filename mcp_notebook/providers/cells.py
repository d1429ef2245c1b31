"""Executed cells as resources: ``nb://cells`` (index), ``nb://cells/{seq}`` (one cell) and
``nb://cells/{seq}/outputs/{index}`` (one output in its own MIME type).

Cells are numbered by the hub's own sequence (1..n per hub), not by execution_count, which
stays put under ``store_history=False`` (nbval). Text is masked for secrets on read.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Callable
from datetime import datetime, timezone
from typing import Any

from ..capture import BINARY_MIME, CellCapture, CellRecord, Output
from ..redact import mask_secrets
from ..types import Annotations, Contents, Resource, ResourceTemplate
from ..uri import compile_template
from .base import (
    LIST_CHANGED_ONLY,
    NO_CHANGE,
    ChangeSet,
    InvalidResourceParams,
    Provider,
    ResourceNotFound,
    index_page,
    int_param,
    rank_completions,
)

PREFIX = "nb://cells"
INDEX_URI = "nb://cells"
CELL_TEMPLATE = "nb://cells/{seq}"
OUTPUT_TEMPLATE = "nb://cells/{seq}/outputs/{index}{?mime,offset}"
DESCRIPTION_TEMPLATE = "nb://cells/{seq}/outputs/{index}/description"
_INDEX = compile_template("nb://cells{?offset,limit}")
_CELL = compile_template(CELL_TEMPLATE)
_OUTPUT = compile_template(OUTPUT_TEMPLATE)
_DESCRIPTION = compile_template(DESCRIPTION_TEMPLATE)
_JSON = "application/json"
# Default MIME type of a bundle: the richest one a model can use.
RICHNESS = (
    "image/png",
    "image/jpeg",
    "image/svg+xml",
    "text/html",
    "text/markdown",
    "application/json",
    "text/latex",
    "text/plain",
)
LISTED_CELLS = 10
LISTED_OUTPUTS = 30
_PREVIEW = 300
_MASK_MARGIN = 512


def cell_uri(seq: int) -> str:
    return f"{PREFIX}/{seq}"


def output_uri(seq: int, index: int) -> str:
    return f"{PREFIX}/{seq}/outputs/{index}"


def iso(ts: float | None) -> str | None:
    if ts is None:
        return None
    return datetime.fromtimestamp(ts, timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def first_line(source: str, limit: int = 120) -> str:
    for line in source.splitlines():
        if line.strip():
            return _masked_head(line, limit) + ("…" if len(line) > limit else "")
    return ""


def _masked_head(text: str, limit: int) -> str:
    """The first ``limit`` characters, masked before the cut (a token at the cut must not leak its start)."""
    return mask_secrets(text[: limit + _MASK_MARGIN])[:limit]


def default_mime(out: Output) -> str:
    types = out.mime_types()
    for mime in RICHNESS:
        if mime in types:
            return mime
    return types[0] if types else "text/plain"


def description_uri(seq: int, index: int) -> str:
    return f"{PREFIX}/{seq}/outputs/{index}/description"


def describe_output(out: Output, limit: int) -> str | None:
    """What an output shows, for a model: the description captured from its live object (a widget's
    read now), else one from its bundle alone; None for text and errors (already text)."""
    if out.output_type not in ("display_data", "execute_result"):
        return None
    desc = out.description
    if callable(desc):
        try:
            return desc()
        except Exception as exc:
            return f"This output's live object could not be read ({type(exc).__name__})."
    if desc is None:
        from ..figures.bundle import describe_bundle  # with the first output read: not paid by %load_ext

        desc = describe_bundle(out.data, limit)
        if desc is None:
            return None
        out.description = desc  # a bundle does not change: described once (a benign race)
    if out.truncated and any(m != "text/plain" for m in out.data):
        desc += "\n[the output was cut at capture: " + "; ".join(out.notes) + "]"
    return desc


def _shown_name(source: str) -> str | None:
    """The variable a cell shows as its result (its last line is a bare name), if it does."""
    lines = [line.strip() for line in source.splitlines() if line.strip() and not line.strip().startswith("#")]
    last = lines[-1] if lines else ""
    return last if last.isidentifier() and len(last) <= 100 else None


def alt_text(description: str, limit: int = 150) -> str:
    """A short alt text: the description's first line, bounded."""
    line = description.split("\n", 1)[0].strip()
    return line if len(line) <= limit else line[: limit - 1] + "…"


def output_text(out: Output, mime: str) -> str:
    """The (masked) text of one output in a text MIME type."""
    if out.output_type in ("stream", "error"):
        return mask_secrets(out.text())
    value = out.data.get(mime, "")
    if isinstance(value, bytes):
        value = value.decode("utf-8", "replace")
    return mask_secrets(value)


def output_bytes(out: Output, mime: str) -> bytes:
    value = out.data.get(mime, b"")
    if isinstance(value, bytes):
        return value
    try:
        return base64.b64decode(value)
    except (binascii.Error, ValueError):
        return value.encode("utf-8", "replace")


class CellsProvider(Provider):
    """Serves the history recorded by a :class:`~mcp_notebook.capture.CellCapture`."""

    uri_prefixes = (PREFIX,)

    def __init__(self, capture: CellCapture, limits: Any):
        self.capture = capture
        self._limits = limits
        self._sizes: dict[tuple[int, int, int], int] = {}  # (seq, index or -1, version) -> bytes
        # Callables adding fields to one cell's read (lineage: the names it changed, diff links).
        self.cell_extras: list[Callable[[CellRecord], dict[str, Any]]] = []

    # -- routing ------------------------------------------------------------------------
    def owns(self, uri: str) -> bool:
        return uri == INDEX_URI or uri.startswith(PREFIX + "/") or uri.startswith(PREFIX + "?")

    def read(self, uri: str) -> list[Contents]:
        params = _INDEX.match(uri)
        if params is not None:
            return [self._read_index(uri, params)]
        params = _CELL.match(uri)
        if params is not None:
            return [self._read_cell(uri, self._cell(uri, params["seq"]))]
        params = _DESCRIPTION.match(uri)
        if params is not None:
            cell = self._cell(uri, params["seq"])
            out, index = self._output(uri, cell, params["index"])
            return [self._description(uri, cell, index, out, required=True)]
        params = _OUTPUT.match(uri)
        if params is not None:
            cell = self._cell(uri, params["seq"])
            return self._read_output(uri, cell, params)
        raise ResourceNotFound(uri)

    def may_run_user_code(self, uri: str) -> bool:
        return False  # captured sources and outputs, already rendered

    def _cell(self, uri: str, raw: str) -> CellRecord:
        try:
            seq = int(raw)
        except ValueError:
            raise ResourceNotFound(uri, f"Resource not found: {uri} (cell numbers are whole numbers)") from None
        cell = self.capture.get(seq)
        if cell is None:
            raise ResourceNotFound(uri, f"Resource not found: {uri} (no cell {seq} in the history; see nb://cells)")
        return cell

    # -- index --------------------------------------------------------------------------
    def _read_index(self, uri: str, params: dict[str, str]) -> Contents:
        cells = self.capture.snapshot()
        page = index_page(cells, params, _INDEX, self._index_row, self._limits.max_read_chars - 400)
        doc: dict[str, Any] = {
            "count": len(cells),
            "first_seq": cells[0].seq if cells else None,
            "last_seq": cells[-1].seq if cells else None,
            "max_cells": self._limits.max_cells,
            "offset": page.offset,
            "cells": page.rows,
        }
        if page.cut_by_size:
            doc["truncated"] = True
        if page.next:
            doc["next"] = page.next
        return Contents(uri=uri, mime_type=_JSON, text=json.dumps(doc, ensure_ascii=False))

    def _index_row(self, cell: CellRecord) -> dict[str, Any]:
        return {
            "seq": cell.seq,
            "execution_count": cell.execution_count,
            "cell_id": cell.cell_id,
            "status": cell.status,
            "duration": None if cell.duration is None else round(cell.duration, 6),
            "first_line": first_line(cell.source),
            "outputs": len(cell.outputs),
            "uri": cell_uri(cell.seq),
        }

    # -- one cell -----------------------------------------------------------------------
    def _cell_doc(self, cell: CellRecord) -> dict[str, Any]:
        limits = self._limits
        cap = max(1000, limits.max_read_chars // 2)
        source = mask_secrets(cell.source)
        with self.capture.lock:
            outputs = list(cell.outputs)
        doc: dict[str, Any] = {
            "seq": cell.seq,
            "execution_count": cell.execution_count,
            "cell_id": cell.cell_id,
            "status": cell.status,
            "store_history": cell.store_history,
            "started": iso(cell.started),
            "finished": iso(cell.finished),
            "duration": None if cell.duration is None else round(cell.duration, 6),
            "source": source[:cap],
        }
        if len(source) > cap:
            doc["source_truncated"] = True
            doc["source_chars"] = len(source)
        rows = []
        per_preview = max(80, min(_PREVIEW, (limits.max_read_chars // 2) // max(1, len(outputs))))
        for i, out in enumerate(outputs):
            rows.append(self._output_row(cell.seq, i, out, per_preview))
        doc["outputs"] = rows
        if cell.dropped:
            doc["outputs_dropped"] = cell.dropped
        if cell.origin is not None:
            doc["origin"] = self.capture.origins.origin_of(cell)
        for extra in self.cell_extras:
            try:
                doc.update(extra(cell))
            except Exception:
                pass
        return doc

    def _output_row(self, seq: int, index: int, out: Output, preview: int) -> dict[str, Any]:
        row: dict[str, Any] = {"index": index, "output_type": out.output_type}
        if out.name:
            row["name"] = out.name
        row["mime_types"] = out.mime_types()
        row["default_mime"] = default_mime(out)
        if out.output_type == "error":
            row["ename"] = out.ename
            row["evalue"] = _masked_head(out.evalue or "", preview)
        elif out.output_type == "stream":
            text = _masked_head(out.text(), preview)
            row["chars"] = out.chars
            row["preview"] = text
        elif "text/plain" in out.data:
            row["preview"] = output_text(out, "text/plain")[:preview]
        described = getattr(self._limits, "figure_descriptions", True)
        if described and out.output_type in ("display_data", "execute_result") and set(out.data) - {"text/plain"}:
            row["description_uri"] = description_uri(seq, index)
            if isinstance(out.description, str):
                row["alt"] = alt_text(out.description)
        if out.display_id:
            row["display_id"] = out.display_id
        if out.truncated:
            row["truncated_at_capture"] = True
        if out.notes:
            row["notes"] = list(out.notes)
        row["uri"] = output_uri(seq, index)
        return row

    def _read_cell(self, uri: str, cell: CellRecord) -> Contents:
        text = json.dumps(self._cell_doc(cell), ensure_ascii=False)
        return Contents(uri=uri, mime_type=_JSON, text=text)

    # -- one output ---------------------------------------------------------------------
    def _output(self, uri: str, cell: CellRecord, raw: str) -> tuple[Output, int]:
        try:
            index = int(raw)
        except ValueError:
            raise ResourceNotFound(uri) from None
        with self.capture.lock:
            outputs = list(cell.outputs)
        if not 0 <= index < len(outputs):
            raise ResourceNotFound(uri, f"Resource not found: {uri} (cell {cell.seq} has {len(outputs)} outputs)")
        return outputs[index], index

    def _read_output(self, uri: str, cell: CellRecord, params: dict[str, str]) -> list[Contents]:
        """The output in its MIME type; without ?mime=, its description after it as a text item (a
        host that drops images still gets the text)."""
        unknown = set(params) - {"seq", "index", "mime", "offset"}
        if unknown:
            raise InvalidResourceParams(f"unknown parameter(s) {sorted(unknown)}; use mime, offset")
        out, index = self._output(uri, cell, params["index"])
        mime = params.get("mime") or default_mime(out)
        if mime not in out.mime_types():
            raise InvalidResourceParams(f"output {index} of cell {cell.seq} has no {mime}; it has {out.mime_types()}")
        if mime in BINARY_MIME:
            if params.get("offset"):
                raise InvalidResourceParams(f"offset applies to text outputs, not {mime}")
            first = Contents(uri=uri, mime_type=mime, blob=output_bytes(out, mime))
        else:
            first = self._text_page(uri, cell.seq, index, out, mime, int_param(params, "offset", 0))
        if params.get("mime") or params.get("offset") or not getattr(self._limits, "figure_descriptions", True):
            return [first]
        described = self._description(description_uri(cell.seq, index), cell, index, out, required=False)
        return [first] if described is None else [first, described]

    def _description(self, uri: str, cell: CellRecord, index: int, out: Output, required: bool) -> Contents | None:
        if not getattr(self._limits, "figure_descriptions", True):
            return Contents(uri=uri, mime_type="text/plain", text="Descriptions are off (MCPHub.figure_descriptions).")
        text = describe_output(out, getattr(self._limits, "figure_description_chars", 2000))
        if text is None:
            if not required:
                return None
            text = f"Output {index} of cell {cell.seq} is {out.output_type} text: read {output_uri(cell.seq, index)} itself."
        elif out.output_type == "execute_result" and text.startswith("HTML table"):
            name = _shown_name(cell.source)
            if name is not None:
                text += f"\nThe whole frame, while {name} holds it: nb://frames/{name} (pages, schema, sort, filter)."
        return Contents(uri=uri, mime_type="text/plain", text=text)

    def _text_page(self, uri: str, seq: int, index: int, out: Output, mime: str, offset: int) -> Contents:
        text = output_text(out, mime)
        total = len(text)
        if offset > total:
            raise InvalidResourceParams(f"offset {offset} is past the end ({total} chars)")
        cap = self._limits.max_read_chars
        end = min(total, offset + cap)
        page = text[offset:end]
        meta: dict[str, Any] = {}
        notes = []
        if offset or end < total:
            meta.update(offset=offset, totalChars=total)
        if end < total:
            nxt = _OUTPUT.expand(
                {"seq": seq, "index": index, "mime": None if mime == default_mime(out) else mime, "offset": end}
            )
            meta.update(truncated=True, next=nxt)
            notes.append(f"[truncated: chars {offset}-{end} of {total} shown; next page: {nxt}]")
        if out.truncated and end >= total:
            notes.append(
                "[output was cut at capture: " + "; ".join(out.notes or ["over MCPHub.max_output_chars"]) + "]"
            )
            meta["truncatedAtCapture"] = True
        if notes:
            page = page + ("\n" if page and not page.endswith("\n") else "") + "\n".join(notes)
        return Contents(uri=uri, mime_type=mime, text=page, meta=meta or None)

    # -- listing ------------------------------------------------------------------------
    def list_resources(self) -> list[Resource]:
        cells = self.capture.snapshot()
        out = [
            Resource(
                uri=INDEX_URI,
                name="cells",
                title="Executed cells",
                description="Cells executed in this kernel, in order: seq, status, duration, first line, outputs.",
                mime_type=_JSON,
                annotations=Annotations(
                    audience=("assistant",),
                    priority=0.8,
                    last_modified=iso(cells[-1].finished or cells[-1].started) if cells else None,
                ),
            )
        ]
        outputs_left = LISTED_OUTPUTS
        recent = cells[-LISTED_CELLS:]
        for cell in reversed(recent):
            line = first_line(cell.source, 60)
            count = f"[{cell.execution_count}]" if cell.execution_count is not None else ""
            stamp = iso(cell.finished or cell.started)
            out.append(
                Resource(
                    uri=cell_uri(cell.seq),
                    name=f"cell-{cell.seq}",
                    title=f"Cell {cell.seq}{count}: {line}" if line else f"Cell {cell.seq}{count}",
                    description=f"Executed cell {cell.seq} ({cell.status}): source, timing, outputs.",
                    mime_type=_JSON,
                    size=self._cell_size(cell),
                    annotations=Annotations(priority=0.5, last_modified=stamp),
                )
            )
            with self.capture.lock:
                outputs = list(cell.outputs)
            for i, o in enumerate(outputs[:outputs_left]):
                mime = default_mime(o)
                out.append(
                    Resource(
                        uri=output_uri(cell.seq, i),
                        name=f"cell-{cell.seq}-output-{i}",
                        title=f"Cell {cell.seq} output {i} ({o.output_type}, {mime})",
                        mime_type=mime,
                        size=self._output_size(cell, i, o, mime),
                        annotations=Annotations(priority=0.4, last_modified=stamp),
                    )
                )
            outputs_left -= min(len(outputs), outputs_left)
        return out

    def _cell_size(self, cell: CellRecord) -> int | None:
        if cell.finished is None:
            return None  # still running: it will grow
        key = (cell.seq, -1, cell.version)
        if key not in self._sizes:
            self._remember(key, len(json.dumps(self._cell_doc(cell), ensure_ascii=False).encode("utf-8")))
        return self._sizes[key]

    def _output_size(self, cell: CellRecord, index: int, out: Output, mime: str) -> int | None:
        if cell.finished is None:
            return None
        key = (cell.seq, index, cell.version)
        if key not in self._sizes:
            if mime in BINARY_MIME:
                size = out.sizes.get(mime) or len(output_bytes(out, mime))
            else:
                size = len(output_text(out, mime).encode("utf-8"))
            self._remember(key, size)
        return self._sizes[key]

    def _remember(self, key: tuple[int, int, int], size: int) -> None:
        if len(self._sizes) > 4 * (self._limits.max_cells + LISTED_OUTPUTS):
            self._sizes.clear()
        self._sizes[key] = size

    def list_templates(self) -> list[ResourceTemplate]:
        return [
            ResourceTemplate(
                uri_template=CELL_TEMPLATE,
                name="cell",
                title="Executed cell by number",
                description="One executed cell by number (nb://cells lists them): source, status, duration, what it "
                "changed, its outputs and their URIs. Read it instead of re-running the cell.",
                mime_type=_JSON,
            ),
            ResourceTemplate(
                uri_template=OUTPUT_TEMPLATE,
                name="cell-output",
                title="One output of an executed cell",
                description=(
                    "An output in its own MIME type: text, HTML, markdown, JSON, SVG as text; PNG/JPEG as a "
                    "base64 blob. ?mime= picks another representation, ?offset= pages long text."
                ),
            ),
            ResourceTemplate(
                uri_template=DESCRIPTION_TEMPLATE,
                name="output-description",
                title="Described output",
                description="A figure's numbers: per axes, per series.",
                mime_type="text/plain",
            ),
        ]

    def complete(self, template: str, argument: str, value: str, context: dict[str, str]) -> list[str] | None:
        if template not in (CELL_TEMPLATE, OUTPUT_TEMPLATE, DESCRIPTION_TEMPLATE):
            return None
        cells = self.capture.snapshot()
        if argument == "seq":
            recent = [str(c.seq) for c in reversed(cells)]
            return [s for s in recent if s.startswith(value)][:100]
        if template == CELL_TEMPLATE:
            return []
        cell = self.capture.get(int(context["seq"])) if context.get("seq", "").isdigit() else None
        if cell is None:
            return []
        with self.capture.lock:
            outputs = list(cell.outputs)
        if argument == "index":
            return [str(i) for i in range(len(outputs)) if str(i).startswith(value)][:100]
        if argument == "mime":
            index = context.get("index", "")
            types: list[str] = []
            if index.isdigit() and int(index) < len(outputs):
                types = outputs[int(index)].mime_types()
            else:
                for o in outputs:
                    types.extend(t for t in o.mime_types() if t not in types)
            return rank_completions(types, value)[:100]
        return []

    # -- change detection ---------------------------------------------------------------
    def snapshot(self, watched: frozenset[str]) -> ChangeSet:
        """Main thread, after each cell: O(watched URIs)."""
        new, changed = self.capture.take_changes()
        if not watched:  # most cells: no ChangeSet made (a new cell only moves the listing)
            return LIST_CHANGED_ONLY if new else NO_CHANGE
        if not (new or changed):
            return NO_CHANGE
        changes = ChangeSet(list_changed=new)
        prefixes = tuple(cell_uri(seq) for seq in changed)
        for uri in watched:
            if not self.owns(uri):
                continue
            if uri == INDEX_URI or uri.startswith(INDEX_URI + "?"):
                changes.updated.add(uri)
            elif prefixes and (uri in prefixes or uri.startswith(tuple(p + "/" for p in prefixes))):
                changes.updated.add(uri)
        return changes
