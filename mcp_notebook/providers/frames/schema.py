"""The schema of any table (frames, database tables): columns, dtypes and statistics as JSON.

Statistics cover at most ``MCPHub.frame_stats_rows`` leading rows (fewer for very wide tables);
a lazy engine frame answers from its metadata unless ``?stats=true`` or ``?count=true`` ask for
bounded engine work. Columns are described in chunks so a 100k-column frame stops at the read
budget instead of scanning every column.
"""

from __future__ import annotations

import json
from typing import Any

from ...redact import mask_secrets
from ...types import Contents
from ..base import InvalidResourceParams
from .engines import EngineFrame
from .order import capabilities
from .pages import JSON, column_positions, flag
from .tables import Table

SCHEMA_TEMPLATE = "nb://frames/{name}/schema"
STATS_CELLS = 50_000_000  # schema statistics scan at most this many cells
_SCHEMA_PARAMS = {"name", "columns", "count", "stats", "db", "table"}
_CHUNK = 50


def schema_contents(
    uri: str, params: dict[str, str], table: Table, name: str, limits: Any, page_link: str, schema_link: str
) -> Contents:
    """Columns, dtypes and statistics of ``table`` as JSON (a lazy frame: metadata unless asked)."""
    unknown = set(params) - _SCHEMA_PARAMS
    if unknown:
        raise InvalidResourceParams(
            f"unknown parameter(s) {sorted(unknown)} for {SCHEMA_TEMPLATE}; use columns, count, stats"
        )
    positions, _ = column_positions(table, params.get("columns"), name, limits.frame_max_columns)
    if not params.get("columns"):
        positions = list(range(len(table.labels())))
    want_count, want_stats = flag(params, "count"), flag(params, "stats")
    lazy = isinstance(table, EngineFrame)
    total = table.count() if lazy and want_count else table.nrows
    stats_rows = min(limits.frame_stats_rows, max(10_000, STATS_CELLS // max(1, len(positions))))
    doc: dict[str, Any] = {"name": name, "type": table.kind, "shape": [total, len(table.labels())], "page": page_link}
    doc["sortable"], doc["filterable"], why = capabilities(table)
    if why:
        doc["sort_note"] = why
    sample: Table | None = None
    if lazy:
        if want_stats:
            stats_rows = min(stats_rows, limits.engine_stats_rows)
        sample = _engine_facts(
            doc, table, total, positions, (want_count, want_stats), stats_rows, limits.engine_timeout
        )
    elif total is not None:
        doc["stats_rows"] = min(total, stats_rows)
        if total > stats_rows:
            doc["stats_note"] = f"statistics over the first {stats_rows:,} of {total:,} rows"
    described = _describe_columns(doc, table, sample, positions, stats_rows, limits.max_read_chars - 600)
    doc["columns"] = described
    if len(described) < len(positions):
        doc["truncated"] = True
        doc["columns_note"] = (
            f"described {len(described)} of {len(positions)} columns; ask for others with {schema_link}?columns=a,b"
        )
    return Contents(uri=uri, mime_type=JSON, text=json.dumps(doc, ensure_ascii=False, default=str))


def _engine_facts(
    doc: dict[str, Any],
    table: EngineFrame,
    total: int | None,
    positions: list[int],
    asked: tuple[bool, bool],
    stats_rows: int,
    engine_timeout: float,
) -> Table | None:
    """What a lazy frame's schema says beyond its metadata; with ``?stats=true`` (``asked`` is
    (count, stats)), the sample of its first rows the statistics come from."""
    want_count, want_stats = asked
    doc["engine"] = table.engine
    doc["row_count"] = total
    if want_stats:
        sample = table.sample(stats_rows, positions)
        n = sample.nrows if sample is not None else 0
        doc["stats_rows"] = n
        doc["stats_note"] = f"statistics over the first {n:,} rows the engine returned (limit {stats_rows:,})"
        return sample
    if not want_count:
        doc["note"] = (
            "columns and dtypes from the engine's metadata; nothing was computed. "
            f"Add ?stats=true for statistics over the first rows, ?count=true for the row count (both bounded by "
            f"engine_timeout={engine_timeout:g}s)"
        )
    return None


def _describe_columns(
    doc: dict[str, Any], table: Table, sample: Table | None, positions: list[int], stats_rows: int, budget: int
) -> list[dict[str, Any]]:
    """Column facts up to ``budget`` characters of JSON (at least one column); the table's other
    facts (the index) go into ``doc``. Described in chunks, so a very wide table stops early."""
    described: list[dict[str, Any]] = []
    used = len(json.dumps(doc))
    for i in range(0, len(positions), _CHUNK):
        chunk = positions[i : i + _CHUNK]
        facts = table.describe(chunk, stats_rows)
        if sample is not None:
            stats = sample.describe(list(range(i, i + len(chunk))), stats_rows)["columns"]
            for col, extra in zip(facts["columns"], stats, strict=False):
                col.update({k: v for k, v in extra.items() if k not in ("name", "dtype")})
        for key, value in facts.items():
            if key != "columns" and key not in doc:
                doc[key] = _mask_labels(value)
                used += len(json.dumps(value, default=str)) + len(key) + 4
        for col in facts["columns"]:
            col["name"] = mask_secrets(str(col.get("name", "")))
            size = len(json.dumps(col, ensure_ascii=False, default=str)) + 2
            if used + size > budget and described:
                return described
            described.append(col)
            used += size
    return described


def _mask_labels(value: Any) -> Any:
    """Index facts with any credential-shaped names masked."""
    if isinstance(value, dict):
        return {
            k: (mask_secrets(v) if k in ("name",) and isinstance(v, str) else _mask_labels(v)) for k, v in value.items()
        }
    if isinstance(value, list):
        return [mask_secrets(v) if isinstance(v, str) else _mask_labels(v) for v in value]
    return value
