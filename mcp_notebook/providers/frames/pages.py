"""A page of rows of any table (frames, database tables) as two contents items.

The rows come in the asked format (CSV, JSON records, markdown), cut to the read budget, then the
page info as JSON (offset, rows, total, columns, truncated, next page, cuts); see
providers/frames/provider.py for the resource these serve.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ...redact import mask_secrets
from ...types import Contents
from ..base import InvalidResourceParams, int_param
from . import order as frame_order
from . import query as frame_query
from .engines import EngineFrame
from .order import OrderCache
from .tables import CellRenderer, Table, cell_text

PAGE_TEMPLATE = "nb://frames/{name}{?offset,limit,columns,format,count,sort,where}"
OLD_PAGE_TEMPLATE = "nb://frames/{name}{?offset,limit,columns,format}"  # completions still answer clients that kept it
FORMATS = {"csv": "text/csv", "json": "application/json", "markdown": "text/markdown"}
JSON = "application/json"
META_KEY = "mcp-notebook/page"
_PAGE_PARAMS = {"name", "offset", "limit", "columns", "format", "count", "db", "table", "sort", "where"}


@dataclass
class PageAsk:
    """What a page read asks for, checked."""

    fmt: str
    offset: int
    limit: int
    count: bool
    positions: list[int]
    columns_cut: bool


@dataclass
class PageRows:
    """The rows fetched for a page: columns of values, rows start..stop, the total when known."""

    columns: list[list[Any]]
    start: int
    stop: int
    total: int | None
    more: bool = False  # an engine returned a row past the page


def page_ask(params: dict[str, str], table: Table, name: str, limits: Any) -> PageAsk:
    """Check a page read's parameters (a clear InvalidResourceParams for each mistake)."""
    unknown = set(params) - _PAGE_PARAMS
    if unknown:
        raise InvalidResourceParams(
            f"unknown parameter(s) {sorted(unknown)} for {PAGE_TEMPLATE}; use offset, limit, columns, format, count, sort, where"
        )
    fmt = (params.get("format") or "csv").lower()
    if fmt not in FORMATS:
        raise InvalidResourceParams(f"format must be one of {', '.join(FORMATS)}; got {fmt!r}")
    offset = int_param(params, "offset", 0)
    limit = int_param(params, "limit", limits.frame_page_rows)
    if limit > limits.frame_max_rows:
        raise InvalidResourceParams(f"limit must be at most {limits.frame_max_rows}, got {limit}")
    count = flag(params, "count")
    positions, cut = column_positions(table, params.get("columns"), name, limits.frame_max_columns)
    return PageAsk(fmt, offset, limit, count, positions, cut)


def fetch_rows(table: Table, ask: PageAsk, order: Any = None) -> PageRows:
    """The page's rows: sliced by the table (or taken at ``order``, the sorted and filtered row
    positions), or pushed down to the engine of a lazy frame."""
    if order is not None:
        start = min(ask.offset, len(order))
        stop = min(len(order), start + ask.limit)
        return PageRows(table.take(order[start:stop], ask.positions), start, stop, len(order))
    if not isinstance(table, EngineFrame):
        total = table.nrows or 0
        start = min(ask.offset, total)
        stop = min(total, start + ask.limit)
        return PageRows(table.page(start, stop, ask.positions), start, stop, total)
    # One row past the page tells whether more exist, without counting.
    labels = table.labels()
    names, fetched = table.fetch(ask.offset, ask.limit + 1, ask.positions)
    by_name = dict(zip(names, fetched, strict=True))
    columns = [by_name[labels[p]] for p in ask.positions]
    got = len(columns[0]) if columns else 0
    more = got > ask.limit
    columns = [c[: ask.limit] for c in columns]
    total: int | None = None if more or (got == 0 and ask.offset > 0) else ask.offset + got
    if ask.count:
        total = table.count()
    return PageRows(columns, ask.offset, ask.offset + min(got, ask.limit), total, more)


def page_contents(
    uri: str,
    params: dict[str, str],
    table: Table,
    name: str,
    limits: Any,
    page_uri: Callable[[dict[str, Any]], str],
    schema_link: str,
    orders: OrderCache | None = None,
) -> list[Contents]:
    """A page of ``table`` as two contents items (rows in the asked format, then page info);
    ``orders`` caches the row order of sorted or filtered eager tables."""
    ask = page_ask(params, table, name, limits)
    sortable, filterable, why = frame_order.capabilities(table)
    query = frame_query.parse(params, table.labels())
    order = None
    if query is not None:
        table, order = _queried(table, query, (sortable, filterable, why), orders)
    labels = table.labels()
    header = _unique([mask_secrets(h) for h in table.index_labels() + [labels[p] for p in ask.positions]])
    rows = fetch_rows(table, ask, order)
    info = _page_info(name, table, ask, rows, header, len(labels), schema_link)
    info.update(sortable=sortable, filterable=filterable)
    echo = _echo(query)
    info.update(echo)
    reserve = len(json.dumps(info, ensure_ascii=False)) * 2 + 300 + len(uri)
    budget = max(1000, limits.max_read_chars - reserve)
    cells = CellRenderer(max(20, min(1000, budget // (2 * max(1, len(header))))))
    text, shown = render_rows(ask.fmt, header, rows.columns, rows.stop - rows.start, cells, budget)
    end = rows.start + shown
    info["rows"] = shown
    total = rows.total
    if (total is not None and end < total) or (total is None and (shown < rows.stop - rows.start or rows.more)):
        info["truncated"] = True
        nxt: dict[str, Any] = {"offset": end, "limit": ask.limit, "columns": params.get("columns") or None}
        nxt.update(echo)
        if "format" in params:
            nxt["format"] = ask.fmt
        info["next"] = page_uri(nxt)
        if shown < rows.stop - rows.start:
            info["cut_by_size"] = True
    if cells.cut:
        info["values_truncated"] = cells.cut
    return [
        Contents(uri=uri, mime_type=FORMATS[ask.fmt], text=text, meta={META_KEY: info}),
        Contents(uri=uri, mime_type=JSON, text=json.dumps(info, ensure_ascii=False)),
    ]


def _queried(
    table: Table, query: frame_query.Query, can: tuple[bool, bool, str], orders: OrderCache | None
) -> tuple[Table, Any]:
    """A lazy engine frame whose plan sorts and filters (nothing computes yet), or the eager table
    with its sorted and filtered row positions."""
    sortable, filterable, why = can
    if (query.sort and not sortable) or (query.where and not filterable):
        what = "sorted" if query.sort and not sortable else "filtered"
        raise InvalidResourceParams(f"a {table.kind} cannot be {what} here ({why})")
    if isinstance(table, EngineFrame):
        native = table.run_plan(
            lambda: frame_query.lazy_plan(table.value, query, table.engine), "planning the sort and filter of"
        )
        return EngineFrame(native, table.engine, table.timeout, table.connections, ordered=bool(query.sort)), None
    return table, frame_order.eager_order(table, query, orders)


def _echo(query: frame_query.Query | None) -> dict[str, str]:
    """The sort and filter a page applied, normalized and masked (page info, and the next page)."""
    out: dict[str, str] = {}
    if query is not None and query.sort:
        out["sort"] = mask_secrets(query.sort_text())
    if query is not None and query.where:
        out["where"] = mask_secrets(query.where_text())
    return out


def _page_info(
    name: str, table: Table, ask: PageAsk, rows: PageRows, header: list[str], ncols: int, schema_link: str
) -> dict[str, Any]:
    """The page info before the rows are rendered (rows, truncation and the next page come after)."""
    info: dict[str, Any] = {
        "name": name,
        "type": table.kind,
        "format": ask.fmt,
        "offset": ask.offset,
        "limit": ask.limit,
        "rows": 0,
        "total_rows": rows.total,
        "total_columns": ncols,
        "columns": header,
        "truncated": False,
        "next": None,
        "schema": schema_link,
    }
    if isinstance(table, EngineFrame):
        info["engine"] = table.engine
        if rows.total is None:
            info["total_rows_note"] = "unknown: a lazy frame is not counted unless asked (?count=true)"
    if ask.columns_cut:
        info["columns_truncated"] = True
        info["columns_note"] = f"showing the first {len(ask.positions)} of {ncols} columns; pick with columns="
    return info


def column_positions(table: Table, raw: str | None, name: str, max_columns: int) -> tuple[list[int], bool]:
    """Column positions to show, and whether the default set was cut to ``max_columns``.

    Columns are picked by label; a label holding a credential is matched by its masked form too."""
    labels = table.labels()
    if raw is None or raw == "":
        return list(range(min(len(labels), max_columns))), len(labels) > max_columns
    wanted = [c for c in raw.split(",") if c != ""]
    where = frame_query.label_positions(labels)
    unknown = [c for c in wanted if c not in where]
    if unknown:
        shown = [mask_secrets(label) for label in labels[:100]]
        more = f" … and {len(labels) - 100} more" if len(labels) > 100 else ""
        raise InvalidResourceParams(
            f"unknown column(s) {[mask_secrets(c) for c in unknown]} in {name}; valid columns: {shown}{more}"
        )
    out: list[int] = []
    for c in dict.fromkeys(wanted):
        out.extend(p for p in where[c] if p not in out)
    return out, False


def flag(params: dict[str, str], key: str) -> bool:
    raw = (params.get(key) or "").lower()
    if raw in ("", "false", "0", "no"):
        return False
    if raw in ("true", "1", "yes"):
        return True
    raise InvalidResourceParams(f"{key} must be true or false, got {params.get(key)!r}")


def _unique(labels: list[str]) -> list[str]:
    """Make repeated labels distinct (a, a.1, a.2) so JSON records keep every column."""
    seen: dict[str, int] = {}
    out = []
    for label in labels:
        n = seen.get(label, 0)
        seen[label] = n + 1
        out.append(label if n == 0 else f"{label}.{n}")
    return out


def render_rows(
    fmt: str, header: list[str], columns: list[list[Any]], nrows: int, cells: CellRenderer, budget: int
) -> tuple[str, int]:
    """The page text and how many rows fit in ``budget`` characters (at least one)."""
    return _RENDERERS[fmt](header, columns, nrows, cells, budget)


def _csv(header: list[str], columns: list[list[Any]], nrows: int, cells: CellRenderer, budget: int) -> tuple[str, int]:
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(header)
    rows = 0
    for r in range(nrows):
        mark = buf.tell()
        writer.writerow([cell_text(cells.value(col[r])) for col in columns])
        if buf.tell() > budget and rows:
            buf.seek(mark)
            buf.truncate()
            break
        rows += 1
    return buf.getvalue(), rows


def _json(header: list[str], columns: list[list[Any]], nrows: int, cells: CellRenderer, budget: int) -> tuple[str, int]:
    parts: list[str] = []
    used = 2
    for r in range(nrows):
        record = {h: cells.value(col[r]) for h, col in zip(header, columns, strict=True)}
        line = json.dumps(record, ensure_ascii=False)
        used += len(line) + 2
        if used > budget and parts:
            break
        parts.append(line)
    return "[" + ",\n".join(parts) + "]", len(parts)


def _markdown(
    header: list[str], columns: list[list[Any]], nrows: int, cells: CellRenderer, budget: int
) -> tuple[str, int]:
    lines = ["| " + " | ".join(_md(h) for h in header) + " |", "|" + "---|" * len(header)]
    used = sum(len(x) + 1 for x in lines)
    rows = 0
    for r in range(nrows):
        line = "| " + " | ".join(_md(cell_text(cells.value(col[r]))) for col in columns) + " |"
        used += len(line) + 1
        if used > budget and rows:
            break
        lines.append(line)
        rows += 1
    return "\n".join(lines) + "\n", rows


_RENDERERS = {"csv": _csv, "json": _json, "markdown": _markdown}


def _md(text: str) -> str:
    return text.replace("\\", "\\\\").replace("|", "\\|").replace("\r", " ").replace("\n", " ")
