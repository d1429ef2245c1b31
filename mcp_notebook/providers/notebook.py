"""The notebook document: ``nb://notebook`` (cells in order, outputs summarized) and
``nb://notebook/cells/{cell_id}`` (one cell) and ``nb://notebook/active`` (the cell the user is on and
the selected cells, as a frontend reports them).

The document comes from the .ipynb on disk (``MCPHub.notebook_path``, ``JPY_SESSION_NAME``,
VS Code's ``__vsc_ipynb_file__``), or from a frontend that pushes a newer one through
:meth:`NotebookProvider.set_document` (the seam for the JupyterLab extension). Reads are bounded.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from ..capture import strip_ansi
from ..redact import mask_secrets
from ..types import Annotations, Contents, Resource, ResourceTemplate
from ..uri import compile_template
from .base import (
    NO_CHANGE,
    ChangeSet,
    InvalidResourceParams,
    Provider,
    ResourceNotFound,
    ResourceReadError,
    int_param,
    rank_completions,
)
from .cells import cell_uri, iso
from .optional import missing_package

PREFIX = "nb://notebook"
DOC_URI = "nb://notebook"
ACTIVE_URI = "nb://notebook/active"
CELL_TEMPLATE = "nb://notebook/cells/{cell_id}"
_DOC = compile_template("nb://notebook{?offset,limit}")
_CELL = compile_template(CELL_TEMPLATE)
_JSON = "application/json"
MAX_FILE_BYTES = 64 * 1024 * 1024
_PREVIEW = 200
_CELL_SOURCE_IN_INDEX = 2000
MAX_SELECTED = 50
_UNSEEN: Any = object()


def nb_cell_uri(cell_id: str) -> str:
    return f"{PREFIX}/cells/{cell_id}"


def _text(value: Any) -> str:
    if isinstance(value, list):
        return "".join(str(v) for v in value)
    return value if isinstance(value, str) else ("" if value is None else str(value))


def normalize(nb: Any) -> dict[str, Any]:
    """A v4-shaped dict from a parsed .ipynb (older versions converted with nbformat when present)."""
    if not isinstance(nb, dict):
        raise ResourceReadError("the notebook document is not a JSON object")
    if nb.get("nbformat", 4) < 4 or "worksheets" in nb:
        try:
            import nbformat

            nb = json.loads(nbformat.writes(nbformat.convert(nbformat.from_dict(nb), 4)))
        except Exception as exc:
            what = f"converting a notebook in nbformat {nb.get('nbformat')} to version 4"
            raise missing_package(exc, what) or ResourceReadError(f"cannot {what}: {exc}") from None
    cells = nb.get("cells")
    if not isinstance(cells, list):
        raise ResourceReadError("the notebook document has no cell list")
    return nb


class NotebookProvider(Provider):
    """Serves the notebook document, from disk or as pushed by a frontend."""

    uri_prefixes = (PREFIX,)
    snapshot_unwatched = False  # reports only watched URIs of its own

    def __init__(
        self,
        locate: Callable[[], str | None],
        limits: Any,
        executed: Callable[[str], int | None] | None = None,
    ):
        self._locate = locate
        self._limits = limits
        self._executed = executed or (lambda cell_id: None)
        self._lock = threading.Lock()
        self._file: tuple[str, int, int, dict[str, Any]] | None = None  # path, mtime_ns, size, doc
        self._pushed: tuple[dict[str, Any], float, str] | None = None  # doc, time, source
        self._active: tuple[str | None, tuple[str, ...], float, str] | None = None  # active, selected, time, source
        self._seen_mtime: tuple[str, int] | None = _UNSEEN
        self.watched: Callable[[], frozenset[str]] = frozenset
        self.changed: Callable[[Iterable[str]], None] | None = None

    # -- where the document comes from --------------------------------------------------
    def path(self) -> Path | None:
        raw = self._locate()
        if not raw:
            return None
        p = Path(os.path.expanduser(raw))
        if p.is_file():
            return p
        if not p.is_absolute():  # Jupyter Server's session name is relative to its root
            alt = Path.cwd() / p.name
            if alt.is_file():
                return alt
        return p

    def set_document(self, nb: dict[str, Any] | str, source: str = "frontend", modified: float | None = None) -> None:
        """Push a newer document (e.g. from the JupyterLab extension); preferred while newer than the file."""
        doc = normalize(json.loads(nb) if isinstance(nb, str) else nb)
        with self._lock:
            self._pushed = (doc, modified if modified is not None else time.time(), source)
        if self.changed is not None:
            self.changed([u for u in self.watched() if self.owns(u)])

    def clear_document(self) -> None:
        """Forget a pushed document and the active cell (the file is used again)."""
        with self._lock:
            had = self._pushed is not None or self._active is not None
            self._pushed = self._active = None
        if had and self.changed is not None:
            self.changed([u for u in self.watched() if self.owns(u)])

    def set_active(self, active: str | None, selected: Iterable[str] = (), source: str = "frontend") -> None:
        """The cell the user is on and the selected cells (ids), as a frontend reports them (any thread)."""
        if active is not None and not isinstance(active, str):
            raise ValueError("the active cell id must be a string or None")
        picked = tuple(dict.fromkeys(c for c in selected if isinstance(c, str)))[:MAX_SELECTED]
        with self._lock:
            before = self._active
            self._active = (active, picked, time.time(), source)
        if before is not None and before[:2] == (active, picked):
            return
        if self.changed is not None and ACTIVE_URI in self.watched():
            self.changed([ACTIVE_URI])

    def document(self) -> tuple[dict[str, Any], dict[str, Any]] | None:
        """(document, facts about where it came from), or None when there is none."""
        path = self.path()
        file_doc = None
        if path is not None and path.is_file():
            file_doc = self._load(path)
        with self._lock:
            pushed = self._pushed
        if pushed is not None and (file_doc is None or pushed[1] >= file_doc[1]["mtime"]):
            return pushed[0], {"source": pushed[2], "path": str(path) if path else None, "modified": iso(pushed[1])}
        if file_doc is not None:
            doc, facts = file_doc
            return doc, {"source": "file", "path": str(path), "modified": iso(facts["mtime"])}
        return None

    def _load(self, path: Path) -> tuple[dict[str, Any], dict[str, Any]]:
        try:
            st = path.stat()
        except OSError as exc:
            raise ResourceReadError(f"cannot stat {path}: {exc.strerror}") from None
        key = (str(path), st.st_mtime_ns, st.st_size)
        with self._lock:
            cached = self._file
        if cached is not None and cached[:3] == key:
            return cached[3], {"mtime": st.st_mtime}
        if st.st_size > MAX_FILE_BYTES:
            raise ResourceReadError(f"{path} is {st.st_size} bytes, over the {MAX_FILE_BYTES} byte limit")
        try:
            raw = path.read_text(encoding="utf-8")
            doc = normalize(json.loads(raw))
        except (OSError, ValueError) as exc:
            raise ResourceReadError(f"cannot read {path}: {exc}") from None
        with self._lock:
            self._file = (*key, doc)
        return doc, {"mtime": st.st_mtime}

    # -- routing ------------------------------------------------------------------------
    def owns(self, uri: str) -> bool:
        return uri == DOC_URI or uri.startswith(PREFIX + "/") or uri.startswith(PREFIX + "?")

    def read(self, uri: str) -> list[Contents]:
        if uri == ACTIVE_URI:
            return [self._read_active(uri)]
        params = _DOC.match(uri)
        if params is not None:
            return [self._read_doc(uri, params)]
        params = _CELL.match(uri)
        if params is not None:
            return [self._read_cell(uri, params["cell_id"])]
        raise ResourceNotFound(uri)

    def may_run_user_code(self, uri: str) -> bool:
        return False  # the notebook file and what the frontend reported

    # -- the document -------------------------------------------------------------------
    def _read_doc(self, uri: str, params: dict[str, str]) -> Contents:
        unknown = set(params) - {"offset", "limit"}
        if unknown:
            raise InvalidResourceParams(f"unknown parameter(s) {sorted(unknown)} for {DOC_URI}; use offset, limit")
        offset = int_param(params, "offset", 0)
        limit = int_param(params, "limit", 1000)
        found = self.document()
        if found is None:
            where = self.path()
            doc_out: dict[str, Any] = {
                "available": False,
                "path": str(where) if where else None,
                "hint": "No notebook file found: set %config MCPHub.notebook_path = 'path.ipynb' before "
                "%load_ext, or open the kernel from Jupyter/VS Code.",
            }
            return Contents(uri=uri, mime_type=_JSON, text=json.dumps(doc_out))
        nb, facts = found
        meta = nb.get("metadata") or {}
        cells = nb["cells"]
        out: dict[str, Any] = {
            "available": True,
            **facts,
            "nbformat": f"{nb.get('nbformat', 4)}.{nb.get('nbformat_minor', 0)}",
            "kernelspec": (meta.get("kernelspec") or {}).get("name"),
            "language": (meta.get("language_info") or {}).get("name"),
            "cell_count": len(cells),
            "offset": offset,
        }
        budget = self._limits.max_read_chars - 600
        rows = []
        used = 0
        end = offset
        for i in range(offset, min(len(cells), offset + limit)):
            row = self._summary(i, cells[i])
            used += len(json.dumps(row, ensure_ascii=False)) + 1
            if used > budget and rows:
                break
            rows.append(row)
            end += 1
        out["cells"] = rows
        if end < len(cells):
            out["next"] = _DOC.expand({"offset": end, "limit": limit})
            if end < offset + limit:
                out["truncated"] = True
        return Contents(uri=uri, mime_type=_JSON, text=json.dumps(out, ensure_ascii=False, default=str))

    def _summary(self, index: int, cell: Any) -> dict[str, Any]:
        cell = cell if isinstance(cell, dict) else {}
        cid = _cell_id(index, cell)
        source = mask_secrets(_text(cell.get("source")))
        row: dict[str, Any] = {"index": index, "id": cid, "cell_type": cell.get("cell_type")}
        if cell.get("cell_type") == "code":
            row["execution_count"] = cell.get("execution_count")
        row["source"] = source[:_CELL_SOURCE_IN_INDEX]
        if len(source) > _CELL_SOURCE_IN_INDEX:
            row["source_truncated"] = True
        outputs = cell.get("outputs")
        if isinstance(outputs, list) and outputs:
            row["outputs"] = [_output_summary(o, _PREVIEW) for o in outputs[:20]]
            if len(outputs) > 20:
                row["outputs_more"] = len(outputs) - 20
        row["uri"] = nb_cell_uri(cid)
        return row

    def _read_cell(self, uri: str, cell_id: str) -> Contents:
        found = self.document()
        if found is None:
            raise ResourceNotFound(uri, f"Resource not found: {uri} (no notebook document; see nb://notebook)")
        nb, facts = found
        for index, cell in enumerate(nb["cells"]):
            if isinstance(cell, dict) and _cell_id(index, cell) == cell_id:
                break
        else:
            raise ResourceNotFound(uri, f"Resource not found: {uri} (no cell with that id in the notebook)")
        limits = self._limits
        source = mask_secrets(_text(cell.get("source")))
        cap = max(1000, limits.max_read_chars // 2)
        doc: dict[str, Any] = {
            "id": cell_id,
            "index": index,
            "cell_type": cell.get("cell_type"),
            "source": source[:cap],
            "document": facts,
        }
        if len(source) > cap:
            doc["source_truncated"] = True
        if cell.get("cell_type") == "code":
            doc["execution_count"] = cell.get("execution_count")
        tags = (cell.get("metadata") or {}).get("tags")
        if tags:
            doc["tags"] = tags
        outputs = cell.get("outputs") if isinstance(cell.get("outputs"), list) else []
        if outputs:
            each = max(200, (limits.max_read_chars // 3) // len(outputs[:50]))
            doc["outputs"] = [_output_summary(o, each) for o in outputs[:50]]
        seq = self._executed(cell_id)
        if seq is not None:
            doc["executed"] = cell_uri(seq)  # full outputs of its latest run in this kernel
        return Contents(uri=uri, mime_type=_JSON, text=json.dumps(doc, ensure_ascii=False, default=str))

    # -- what the user is looking at ----------------------------------------------------
    def _read_active(self, uri: str) -> Contents:
        with self._lock:
            active = self._active
        if active is None:
            out: dict[str, Any] = {
                "available": False,
                "hint": "No frontend has reported the active cell: the mcp-notebook JupyterLab extension "
                "sends it while the notebook is open in JupyterLab.",
            }
            return Contents(uri=uri, mime_type=_JSON, text=json.dumps(out))
        active_id, selected, at, source = active
        found = self.document()
        cells = found[0]["cells"] if found is not None else []
        by_id = {_cell_id(i, c): (i, c) for i, c in enumerate(cells) if isinstance(c, dict)}
        budget = self._limits.max_read_chars - 800
        share = max(500, budget // (len(selected) + 1)) if selected else budget
        out = {
            "available": True,
            "source": source,
            "updated": iso(at),
            "document": found[1] if found is not None else None,
            "active": self._focus(active_id, by_id, share) if active_id is not None else None,
            "selected": [self._focus(cid, by_id, share) for cid in selected],
        }
        return Contents(uri=uri, mime_type=_JSON, text=json.dumps(out, ensure_ascii=False, default=str))

    def _focus(self, cell_id: str, by_id: dict[str, tuple[int, dict[str, Any]]], share: int) -> dict[str, Any]:
        """One cell as the active resource shows it: source, outputs summarized, its latest run."""
        row: dict[str, Any] = {"id": cell_id, "uri": nb_cell_uri(cell_id)}
        hit = by_id.get(cell_id)
        if hit is None:
            row["missing"] = "not in the notebook document (yet)"
        else:
            index, cell = hit
            source = mask_secrets(_text(cell.get("source")))
            cap = max(200, share // 2)
            row.update(index=index, cell_type=cell.get("cell_type"), source=source[:cap])
            if len(source) > cap:
                row["source_truncated"] = True
            if cell.get("cell_type") == "code":
                row["execution_count"] = cell.get("execution_count")
            outputs = cell.get("outputs") if isinstance(cell.get("outputs"), list) else []
            if outputs:
                each = max(100, (share // 2) // len(outputs[:20]))
                row["outputs"] = [_output_summary(o, each) for o in outputs[:20]]
                if len(outputs) > 20:
                    row["outputs_more"] = len(outputs) - 20
        seq = self._executed(cell_id)
        if seq is not None:
            row["executed"] = cell_uri(seq)  # full outputs of its latest run in this kernel
        return row

    # -- listing ------------------------------------------------------------------------
    def list_resources(self) -> list[Resource]:
        return [
            Resource(
                uri=DOC_URI,
                name="notebook",
                title="Notebook document",
                description="The notebook's cells in order (markdown and code), outputs summarized.",
                mime_type=_JSON,
                annotations=Annotations(audience=("assistant",), priority=0.7),
            ),
            Resource(
                uri=ACTIVE_URI,
                name="notebook-active",
                title="Active cell and selection",
                description="The cell the user is on and the selected cells (source, outputs, latest run), "
                "as JupyterLab reports them; subscribe to follow the user.",
                mime_type=_JSON,
                annotations=Annotations(audience=("assistant",), priority=0.8),
            ),
        ]

    def list_templates(self) -> list[ResourceTemplate]:
        return [
            ResourceTemplate(
                uri_template=CELL_TEMPLATE,
                name="notebook-cell",
                title="Notebook cell by id",
                description="One cell of the notebook document: source, type, outputs summarized, latest run.",
                mime_type=_JSON,
            )
        ]

    def complete(self, template: str, argument: str, value: str, context: dict[str, str]) -> list[str] | None:
        if template != CELL_TEMPLATE:
            return None
        if argument != "cell_id":
            return []
        try:
            found = self.document()
        except ResourceReadError:
            return []
        if found is None:
            return []
        ids = [_cell_id(i, c) for i, c in enumerate(found[0]["cells"]) if isinstance(c, dict)]
        return rank_completions(ids, value)[:100]

    # -- change detection ---------------------------------------------------------------
    def snapshot(self, watched: frozenset[str]) -> ChangeSet:
        """Only when a notebook URI is watched: one stat() of the file."""
        mine = [u for u in watched if self.owns(u)]
        if not mine:
            return NO_CHANGE
        path = self.path()
        try:
            stamp = (str(path), path.stat().st_mtime_ns) if path is not None else None
        except OSError:
            stamp = None
        before, self._seen_mtime = self._seen_mtime, stamp
        if before is _UNSEEN or stamp == before:
            return NO_CHANGE
        return ChangeSet(updated=set(mine))


def _cell_id(index: int, cell: dict[str, Any]) -> str:
    cid = cell.get("id")
    return cid if isinstance(cid, str) and cid else str(index)


def _output_summary(out: Any, preview: int) -> dict[str, Any]:
    if not isinstance(out, dict):
        return {"output_type": None}
    kind = out.get("output_type")
    row: dict[str, Any] = {"output_type": kind}
    if kind == "stream":
        text = _text(out.get("text"))
        row["name"] = out.get("name")
        row["chars"] = len(text)
        row["text"] = mask_secrets(strip_ansi(text[: preview * 2]))[:preview]
    elif kind == "error":
        row["ename"] = out.get("ename")
        row["evalue"] = mask_secrets(_text(out.get("evalue"))[: preview * 2])[:preview]
    else:
        data = out.get("data") if isinstance(out.get("data"), dict) else {}
        row["mime_types"] = list(data)
        if "text/plain" in data:
            row["text"] = mask_secrets(strip_ansi(_text(data["text/plain"])[: preview * 2]))[:preview]
        if kind == "execute_result":
            row["execution_count"] = out.get("execution_count")
    return row
