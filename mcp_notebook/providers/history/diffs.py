"""Diffs between points of the session: ``nb://diff/cells/{a}/{b}`` (the sources of any two executed
cells), ``nb://diff/runs/{cell_id}{?a,b}`` (two runs of one frontend cell, the last two by default)
and ``nb://diff/namespace/{a}/{b}`` (the namespace after cell ``a`` against after cell ``b``, from
the recorded lineage: as far as it reaches, in-place edits as far as they were seen).

Sources are masked before they are compared (a secret never shows in a diff line) and cut to
``MAX_LINES``; the unified-diff text is cut to the read budget and says so.
"""

from __future__ import annotations

import json
from typing import Any

from ...capture import CellCapture, CellRecord
from ...redact import mask_secrets
from ...types import Contents, ResourceTemplate
from ...uri import compile_template
from ..base import InvalidResourceParams, Provider, ResourceNotFound, rank_completions, shape_text
from ..cells import cell_uri, iso
from ..variables import var_uri
from .lineage import ADDED, IN_PLACE, NOTE, REBOUND, REMOVED, Change, Lineage, facts_json

PREFIX = "nb://diff/"
CELLS_TEMPLATE = "nb://diff/cells/{a}/{b}"
RUNS_TEMPLATE = "nb://diff/runs/{cell_id}{?a,b}"
NAMESPACE_TEMPLATE = "nb://diff/namespace/{a}/{b}"
_CELLS = compile_template(CELLS_TEMPLATE)
_RUNS = compile_template(RUNS_TEMPLATE)
_NAMESPACE = compile_template(NAMESPACE_TEMPLATE)
_JSON = "application/json"
MAX_LINES = 5_000  # of each source compared
MAX_NAMES = 500  # rows of a namespace diff
_SIGN = {ADDED: "+", REMOVED: "-", REBOUND: "!", IN_PLACE: "~", "added and removed": "±"}


def runs_uri(cell_id: str) -> str:
    return _RUNS.expand({"cell_id": cell_id})


class DiffsProvider(Provider):
    """Source and namespace diffs (see the module docstring)."""

    uri_prefixes = (PREFIX,)

    list_is_pure = True

    def __init__(self, capture: CellCapture, lineage: Lineage, limits: Any):
        self.capture = capture
        self.lineage = lineage
        self._limits = limits

    def owns(self, uri: str) -> bool:
        return uri.startswith(PREFIX)

    def may_run_user_code(self, uri: str) -> bool:
        return True  # no user code, but a diff of long sources is CPU: keep it off the hub's loop

    def list_templates(self) -> list[ResourceTemplate]:
        return [
            ResourceTemplate(
                uri_template=CELLS_TEMPLATE,
                name="diff of two cells",
                title="Source diff of two executed cells",
                description="Unified diff of the sources of executed cells a and b (nb://cells numbers), masked.",
                mime_type=_JSON,
            ),
            ResourceTemplate(
                uri_template=RUNS_TEMPLATE,
                name="diff of two runs",
                title="Source diff of two runs of one cell",
                description="The runs of one notebook cell (by cell_id) and the diff of two: the previous and the "
                "latest by default, ?a=&b= by nb://cells number.",
                mime_type=_JSON,
            ),
            ResourceTemplate(
                uri_template=NAMESPACE_TEMPLATE,
                name="namespace diff",
                title="What changed in the namespace between two cells",
                description="Names added, removed, rebound or changed in place from after cell a to after cell b, "
                "with type and len/shape before and after.",
                mime_type=_JSON,
            ),
        ]

    def complete(self, template: str, argument: str, value: str, context: dict[str, str]) -> list[str] | None:
        if template not in (CELLS_TEMPLATE, RUNS_TEMPLATE, NAMESPACE_TEMPLATE):
            return None
        cells = self.capture.snapshot()
        if argument == "cell_id" and template == RUNS_TEMPLATE:
            ids = list(dict.fromkeys(c.cell_id for c in reversed(cells) if c.cell_id))
            return rank_completions(ids, value)[:100]
        if argument in ("a", "b"):
            if template == RUNS_TEMPLATE and context.get("cell_id"):
                cells = [c for c in cells if c.cell_id == context["cell_id"]]
            return [s for s in (str(c.seq) for c in reversed(cells)) if s.startswith(value)][:100]
        return []

    def cell_fields(self, cell: CellRecord) -> dict[str, Any]:
        """For nb://cells/{seq}: the previous run of the same notebook cell and the diff against it."""
        if not cell.cell_id:
            return {}
        earlier = [c.seq for c in self.capture.snapshot() if c.cell_id == cell.cell_id and c.seq < cell.seq]
        if not earlier:
            return {}
        return {
            "previous_run": {
                "uri": cell_uri(earlier[-1]),
                "diff": _RUNS.expand({"cell_id": cell.cell_id, "a": earlier[-1], "b": cell.seq}),
                "runs": runs_uri(cell.cell_id),
            }
        }

    # -- reading --------------------------------------------------------------------------------
    def read(self, uri: str) -> list[Contents]:
        params = _CELLS.match(uri)
        if params is not None:
            doc = self._cells(uri, self._seq(uri, params["a"]), self._seq(uri, params["b"]))
        elif (params := _RUNS.match(uri)) is not None:
            doc = self._runs(uri, params)
        elif (params := _NAMESPACE.match(uri)) is not None:
            doc = self._namespace(uri, self._seq(uri, params["a"]), self._seq(uri, params["b"]))
        else:
            raise ResourceNotFound(uri)
        return [Contents(uri=uri, mime_type=_JSON, text=json.dumps(doc, ensure_ascii=False))]

    def _seq(self, uri: str, raw: str) -> int:
        if not (raw.isascii() and raw.isdigit()):
            raise InvalidResourceParams(f"cell numbers are whole numbers (nb://cells/{{seq}}), got {raw!r}")
        return int(raw)

    def _record(self, uri: str, seq: int) -> CellRecord:
        cell = self.capture.get(seq)
        if cell is None:
            raise ResourceNotFound(uri, f"Resource not found: {uri} (no cell {seq} in the history; see nb://cells)")
        return cell

    def _cells(self, uri: str, a: int, b: int) -> dict[str, Any]:
        first, second = self._record(uri, a), self._record(uri, b)
        doc: dict[str, Any] = {"a": _side(first), "b": _side(second)}
        doc.update(self._diff(first, second))
        return doc

    def _runs(self, uri: str, params: dict[str, str]) -> dict[str, Any]:
        unknown = set(params) - {"cell_id", "a", "b"}
        if unknown:
            raise InvalidResourceParams(f"unknown parameter(s) {sorted(unknown)}; use a, b")
        cell_id = params["cell_id"]
        runs = [c for c in self.capture.snapshot() if c.cell_id == cell_id]
        if not runs:
            raise ResourceNotFound(
                uri, f"Resource not found: {uri} (no recorded run of cell {cell_id}; see nb://cells)"
            )
        by_seq = {c.seq: c for c in runs}
        picked = []
        for key, default in (("a", runs[-2] if len(runs) > 1 else runs[-1]), ("b", runs[-1])):
            raw = params.get(key)
            if raw:
                seq = self._seq(uri, raw)
                if seq not in by_seq:
                    raise InvalidResourceParams(f"cell {seq} is not a run of {cell_id}; its runs: {sorted(by_seq)}")
                picked.append(by_seq[seq])
            else:
                picked.append(default)
        doc: dict[str, Any] = {
            "cell_id": cell_id,
            "runs": [_side(c) for c in runs[-50:]],
            "a": _side(picked[0]),
            "b": _side(picked[1]),
        }
        if len(runs) < 2:
            doc["note"] = "one recorded run of this cell: nothing to compare yet"
        doc.update(self._diff(picked[0], picked[1]))
        return doc

    def _diff(self, first: CellRecord, second: CellRecord) -> dict[str, Any]:
        """The unified diff of two masked sources, cut to the read budget."""
        old, new = mask_secrets(first.source).splitlines(), mask_secrets(second.source).splitlines()
        cut = len(old) > MAX_LINES or len(new) > MAX_LINES
        import difflib  # with the first diff read: not paid by %load_ext

        lines = difflib.unified_diff(
            old[:MAX_LINES], new[:MAX_LINES], cell_uri(first.seq), cell_uri(second.seq), lineterm=""
        )
        budget = max(1000, self._limits.max_read_chars - 10_000)  # the runs list and fields around it
        text, used, shown, total = [], 0, 0, 0
        for line in lines:
            total += 1
            if used + len(line) + 1 <= budget:
                text.append(line)
                used += len(line) + 1
                shown += 1
        out: dict[str, Any] = {"same_source": first.source == second.source, "diff": "\n".join(text)}
        if shown < total or cut:
            out["truncated"] = True
            out["note"] = f"diff cut: {shown} of {total} lines shown" + (
                f"; sources compared up to {MAX_LINES} lines" if cut else ""
            )
        return out

    def _namespace(self, uri: str, a: int, b: int) -> dict[str, Any]:
        if b < a:
            raise InvalidResourceParams(f"a ({a}) must not be after b ({b})")
        recorded = self.lineage.recorded()
        oldest = recorded[0][0] if recorded else None
        span = [r for r in recorded if a < r[0] <= b]
        per_name: dict[str, list[Change]] = {}
        partial = False
        for _, changes, count in span:
            partial |= count > len(changes)
            for change in changes:
                per_name.setdefault(change.name, []).append(change)
        visible = self.lineage.variables.name_visible
        rows = [_net(name, changes) for name, changes in sorted(per_name.items()) if visible(name)]
        total, rows = len(rows), _within(rows, max(500, (self._limits.max_read_chars - 1500) // 2))  # rows, text
        doc: dict[str, Any] = {
            "a": cell_uri(a),
            "b": cell_uri(b),
            "from": f"after cell {a}",
            "to": f"after cell {b}",
            "cells": [cell_uri(s) for s, _, _ in span][:200],
            "changes": rows,
            "text": _ns_text(a, b, rows),
        }
        if oldest is None or oldest > a + 1:
            doc["reach"] = f"lineage is recorded from cell {oldest} on: changes before it are not included"
        if partial or len(rows) < total:
            doc["truncated"] = True
            doc["shown"] = f"{len(rows)} of {total} names" + (
                " (some cells changed more than is kept)" if partial else ""
            )
        doc["note"] = NOTE
        return doc


def _within(rows: list[dict[str, Any]], budget: int) -> list[dict[str, Any]]:
    """The first rows (at most MAX_NAMES) whose JSON fits in ``budget`` characters."""
    used = 0
    for i, row in enumerate(rows[:MAX_NAMES]):
        used += len(json.dumps(row, ensure_ascii=False)) + 2
        if used > budget:
            return rows[:i]
    return rows[:MAX_NAMES]


def _side(cell: CellRecord) -> dict[str, Any]:
    return {"seq": cell.seq, "uri": cell_uri(cell.seq), "cell_id": cell.cell_id, "started": iso(cell.started)}


def _net(name: str, changes: list[Change]) -> dict[str, Any]:
    """One name over a span of cells: what it was before the first change and after the last."""
    first, last = changes[0], changes[-1]
    existed, exists = first.kind != ADDED, last.kind != REMOVED
    kinds = {c.kind for c in changes}
    if existed and exists:
        net = IN_PLACE if kinds == {IN_PLACE} else REBOUND
    else:
        net = REMOVED if existed else ADDED if exists else "added and removed"
    row: dict[str, Any] = {"name": name, "change": net, "cells": [cell_uri(c.cell) for c in changes if c.cell]}
    if exists:
        row["uri"] = var_uri(name)
    if existed:
        row["before"] = facts_json(first.before)
    if exists:
        row["after"] = facts_json(last.after)
    return row


def _facts_text(facts: dict[str, Any] | None) -> str:
    if facts is None:
        return "?"
    shape = tuple(facts["shape"]) if "shape" in facts else facts.get("len")
    return f"{facts['type']} {shape_text(shape)}".strip()


def _ns_text(a: int, b: int, rows: list[dict[str, Any]]) -> str:
    out = [f"--- namespace after cell {a}", f"+++ namespace after cell {b}"]
    for row in rows:
        before, after = row.get("before"), row.get("after")
        if "before" in row and "after" in row:
            what = f"{_facts_text(before)} → {_facts_text(after)}"
        else:
            what = _facts_text(after if "after" in row else before) if ("after" in row or "before" in row) else ""
        where = ", ".join(u.rsplit("/", 1)[-1] for u in row["cells"][-5:])
        head = f"{_SIGN.get(row['change'], '?')} {row['name']}" + (f": {what}" if what else "")
        out.append(f"{head} ({row['change']}; cells {where})")
    return "\n".join(out)
