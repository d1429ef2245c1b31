"""Sort and filter of a table page (``sort=``, ``where=``), pushed to the engine through narwhals.

``sort``: comma-separated columns, ``-`` before one for descending (nulls last, stable).
``where``: conditions joined by ``;``, all must hold; each ``column OP value`` with OP one of
``== != < <= > >= ~`` (``~``: the value's text contains it, case-insensitive); a number compares
with numeric columns, anything else is text (quotes optional); ``null`` with ``==``/``!=`` tests for
missing values. Values from a client become narwhals expressions, never query text.

pandas, polars and pyarrow frames are sorted and filtered in memory by their own library; the
lazy engines (DuckDB, polars lazy, Ibis, Spark) get the sort and filter as part of their plan, so
the page's limit and offset still bound what they compute. Dask filters but does not sort (a
global sort is a full shuffle); numpy arrays do neither.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from ..types import InvalidResourceParams

OPS = ("==", "!=", "<=", ">=", "~", "<", ">")
_CONDITION = re.compile(r"\s*(?P<col>.+?)\s*(?P<op>==|!=|<=|>=|~|<|>)\s*(?P<val>.*?)\s*")
_NUMBER = re.compile(r"[-+]?(\d+(\.\d*)?|\.\d+)([eE][-+]?\d+)?")
MAX_TERMS = 16
NOT_SORTABLE = frozenset({"dask"})  # engines a global sort would make compute everything


@dataclass(frozen=True)
class Query:
    sort: tuple[tuple[str, bool], ...]  # (column, descending)
    where: tuple[tuple[str, str, Any], ...]  # (column, op, value)


def capabilities(value: Any, engine: str | None) -> tuple[bool, bool]:
    """(sortable, filterable) for a table value of ``engine`` (None: an eager table)."""
    import narwhals.stable.v2 as nw

    try:
        nw.from_native(value)
    except TypeError:
        return False, False
    return engine not in NOT_SORTABLE, True


def parse(params: dict[str, str], labels: list[str]) -> Query | None:
    """The sort and filter a page read asks for, checked against the table's columns; None: neither."""
    sort_text, where_text = params.get("sort") or "", params.get("where") or ""
    if not sort_text.strip() and not where_text.strip():
        return None
    known = set(labels)
    sort = []
    for term in filter(None, (t.strip() for t in sort_text.split(","))):
        column = term[1:].strip() if term.startswith("-") else term
        _check_column(column, known, "sort")
        sort.append((column, term.startswith("-")))
    where = [_condition(text, known) for text in where_text.split(";") if text.strip()]
    if len(sort) > MAX_TERMS or len(where) > MAX_TERMS:
        raise InvalidResourceParams(f"at most {MAX_TERMS} sort columns and {MAX_TERMS} where conditions")
    return Query(tuple(sort), tuple(where))


def _check_column(column: str, known: set[str], what: str) -> None:
    if column not in known:
        shown = ", ".join(sorted(known)[:20])
        raise InvalidResourceParams(f"{what}: no column named {column!r} (columns: {shown})")


def _condition(text: str, known: set[str]) -> tuple[str, str, Any]:
    match = _CONDITION.fullmatch(text)
    if match is None:
        raise InvalidResourceParams(
            f"where: {text.strip()!r} is not 'column OP value' with OP one of {' '.join(OPS)} (conditions join with ';')"
        )
    column, op, raw = match.group("col"), match.group("op"), match.group("val")
    _check_column(column, known, "where")
    if raw == "null":
        if op not in ("==", "!="):
            raise InvalidResourceParams(f"where: null compares only with == or != ({text.strip()!r})")
        return column, op, None
    if len(raw) >= 2 and raw[0] == raw[-1] and raw[0] in "'\"":
        return column, op, raw[1:-1]
    if _NUMBER.fullmatch(raw) and op != "~":
        number = float(raw)
        return column, op, int(number) if number.is_integer() and "." not in raw and "e" not in raw.lower() else number
    return column, op, raw


def apply(value: Any, query: Query, engine: str | None) -> Any:
    """``value`` sorted and filtered by its own library (lazily for a lazy engine), as a native value."""
    import narwhals.stable.v2 as nw

    frame = nw.from_native(value)
    schema = frame.collect_schema() if hasattr(frame, "collect_schema") else frame.schema
    if query.where:
        frame = frame.filter(*(_expression(nw, schema, c, op, v) for c, op, v in query.where))
    if query.sort:
        if engine in NOT_SORTABLE:
            raise InvalidResourceParams(f"a {engine} frame cannot be sorted here (a global sort computes everything)")
        frame = frame.sort([c for c, _ in query.sort], descending=[d for _, d in query.sort], nulls_last=True)
    return frame.to_native()


def _expression(nw: Any, schema: Any, column: str, op: str, value: Any) -> Any:
    col = nw.col(column)
    if value is None:
        return col.is_null() if op == "==" else ~col.is_null()
    if op == "~":
        return col.cast(nw.String()).str.to_lowercase().str.contains(str(value).lower(), literal=True)
    dtype = schema[column]
    numeric = dtype.is_numeric()
    if isinstance(value, (int, float)) and not numeric:
        raise InvalidResourceParams(f"where: {column} holds {dtype}, not numbers: quote the value to compare text")
    if isinstance(value, str) and numeric:
        raise InvalidResourceParams(f"where: {column} holds numbers ({dtype}); {value!r} is not a number")
    return {
        "==": col == value,
        "!=": col != value,
        "<": col < value,
        "<=": col <= value,
        ">": col > value,
        ">=": col >= value,
    }[op]
