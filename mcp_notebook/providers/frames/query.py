"""Sort and filter of a table page (``sort=``, ``where=``): parsing, and the plan of a lazy engine.

``sort``: comma-separated columns, ``-`` before one for descending (nulls last, stable).
``where``: conditions joined by ``;``, all must hold; each ``column OP value`` with OP one of
``== != < <= > >= ~`` (``~``: the value's text contains it, case-insensitive); a number compares
with numeric columns, anything else is text (surrounding quotes optional); ``null`` with
``==``/``!=`` tests for missing values. A comparison never matches a missing value. Columns are
named as in ``columns=`` (a credential-shaped label also by its masked form; a repeated label
means each column of that label). Values from a client become expressions, never query text.

This module parses and checks the query, and grows a lazy engine's plan (DuckDB, polars lazy,
Ibis, Spark, Dask) through narwhals, so the page's offset and limit still bound what the engine
computes; eager tables are ordered in memory by providers/frames/order.py.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date, datetime
from typing import Any

from ...redact import mask_secrets
from ...types import InvalidResourceParams

OPS = ("==", "!=", "<=", ">=", "~", "<", ">")
_CONDITION = re.compile(r"\s*(?P<col>.+?)\s*(?P<op>==|!=|<=|>=|~|<|>)(?P<val>.*)", re.DOTALL)
_NUMBER = re.compile(r"[-+]?(\d+(\.\d*)?|\.\d+)([eE][-+]?\d+)?")
MAX_TERMS = 16
NOT_SORTABLE = frozenset({"dask"})  # engines a global sort would make compute everything
TIE = "__mcp_row"  # the source-order column a lazy sort breaks ties with (dropped again)


@dataclass(frozen=True)
class SortKey:
    label: str  # as the client named it
    positions: tuple[int, ...]
    descending: bool


@dataclass(frozen=True)
class Condition:
    label: str
    positions: tuple[int, ...]
    op: str
    value: Any  # None (null), int, float or str
    raw: str  # the value as written (quotes kept), for the echo


@dataclass(frozen=True)
class Query:
    sort: tuple[SortKey, ...]
    where: tuple[Condition, ...]

    def sort_text(self) -> str:
        return ",".join(("-" if k.descending else "") + k.label for k in self.sort)

    def where_text(self) -> str:
        return "; ".join(f"{c.label} {c.op} {c.raw}" for c in self.where)

    def key(self) -> tuple:
        return (
            tuple((k.positions, k.descending) for k in self.sort),
            tuple((c.positions, c.op, type(c.value).__name__, c.value) for c in self.where),
        )


def label_positions(labels: list[str]) -> dict[str, list[int]]:
    """Positions of each label, also under its masked form when it holds a credential."""
    where: dict[str, list[int]] = {}
    for i, label in enumerate(labels):
        where.setdefault(label, []).append(i)
        masked = mask_secrets(label)
        if masked != label:
            where.setdefault(masked, []).append(i)
    return where


def parse(params: dict[str, str], labels: list[str]) -> Query | None:
    """The sort and filter a page read asks for, checked against the table's columns; None: neither."""
    sort_text, where_text = params.get("sort") or "", params.get("where") or ""
    if not sort_text.strip() and not where_text.strip():
        return None
    lookup = label_positions(labels)
    sort = [_sort_key(term, lookup) for term in (t.strip() for t in sort_text.split(",")) if term]
    where = [_condition(text, lookup) for text in where_text.split(";") if text.strip()]
    if len(sort) > MAX_TERMS or len(where) > MAX_TERMS:
        raise InvalidResourceParams(f"at most {MAX_TERMS} sort columns and {MAX_TERMS} where conditions")
    return Query(tuple(sort), tuple(where))


def _sort_key(term: str, lookup: dict[str, list[int]]) -> SortKey:
    if term.startswith("-") and (term[1:].strip() in lookup or term not in lookup):
        column = term[1:].strip()
        return SortKey(column, tuple(_positions(column, lookup, "sort")), True)
    return SortKey(term, tuple(_positions(term, lookup, "sort")), False)


def _positions(column: str, lookup: dict[str, list[int]], what: str) -> list[int]:
    found = lookup.get(column)
    if found is None:
        names = list(dict.fromkeys(mask_secrets(k) for k in lookup))
        shown = ", ".join(names[:20]) + (f" … and {len(names) - 20} more" if len(names) > 20 else "")
        raise InvalidResourceParams(f"{what}: no column named {mask_secrets(column)!r} (columns: {shown})")
    return found


def _split(text: str, lookup: dict[str, list[int]]) -> tuple[str, str, str]:
    """(column, op, value text) of one condition; a label holding an operator is found by its name."""
    match = _CONDITION.fullmatch(text)
    if match is not None and match.group("col") in lookup:
        return match.group("col"), match.group("op"), match.group("val").strip()
    stripped = text.strip()
    for label in sorted((k for k in lookup if stripped.startswith(k)), key=len, reverse=True):
        rest = stripped[len(label) :].lstrip()
        run = rest[: len(rest) - len(rest.lstrip("=<>!~"))]
        if run in OPS:
            return label, run, rest[len(run) :].strip()
        if run:
            raise InvalidResourceParams(
                f"where: unknown operator {run!r} in {mask_secrets(stripped)!r}; use one of {' '.join(OPS)}"
            )
    if match is None:
        raise InvalidResourceParams(
            f"where: {mask_secrets(stripped)!r} is not 'column OP value' with OP one of {' '.join(OPS)} "
            "(conditions join with ';')"
        )
    return match.group("col"), match.group("op"), match.group("val").strip()


def _condition(text: str, lookup: dict[str, list[int]]) -> Condition:
    column, op, raw = _split(text, lookup)
    positions = tuple(_positions(column, lookup, "where"))
    if raw[:1] in ("=", "<", ">", "!", "~"):
        bad = op + raw[: len(raw) - len(raw.lstrip("=<>!~"))]
        raise InvalidResourceParams(
            f"where: unknown operator {bad!r} in {mask_secrets(text.strip())!r}; use one of {' '.join(OPS)} "
            "(quote a value that starts with one of = < > ! ~)"
        )
    if raw.lower() == "null":
        if op not in ("==", "!="):
            raise InvalidResourceParams(f"where: null compares only with == or != ({mask_secrets(text.strip())!r})")
        return Condition(column, positions, op, None, "null")
    if len(raw) >= 2 and raw[0] == raw[-1] and raw[0] in "'\"":
        return Condition(column, positions, op, raw[1:-1], raw)
    if _NUMBER.fullmatch(raw) and op != "~":
        try:
            number = float(raw)
            exact = number.is_integer() and "." not in raw and "e" not in raw.lower()
            return Condition(column, positions, op, int(raw) if exact else number, raw)
        except ValueError:  # more digits than Python turns into an int
            raise InvalidResourceParams(
                f"where: the number in {mask_secrets(text.strip())[:80]!r} is too long"
            ) from None
    return Condition(column, positions, op, raw, raw)


# -- what a value means for a column of a given kind ------------------------------------------------
def coerce(cond: Condition, family: str, dtype: str) -> Any:
    """The value to compare column ``cond.label`` with, given its family: number, bool, datetime,
    date, text or other (anything goes; the library decides). A clear error when they do not fit."""
    value, label = cond.value, mask_secrets(cond.label)
    if value is None or cond.op == "~":
        return value
    if family == "number" and not isinstance(value, (int, float)):
        raise InvalidResourceParams(f"where: {label} holds numbers ({dtype}); {value!r} is not a number")
    if family == "text" and not isinstance(value, str):
        raise InvalidResourceParams(
            f"where: {label} holds text ({dtype}), not numbers: quote the value to compare text"
        )
    if family == "bool":
        if str(value).lower() not in ("true", "false") or not isinstance(value, str):
            raise InvalidResourceParams(f"where: {label} holds true/false ({dtype}); compare it with true or false")
        return str(value).lower() == "true"
    if family in ("datetime", "date"):
        if not isinstance(value, str):
            raise InvalidResourceParams(
                f"where: {label} holds {family}s ({dtype}); quote an ISO date like '2024-01-31'"
            )
        try:
            return datetime.fromisoformat(value) if family == "datetime" else date.fromisoformat(value)
        except ValueError:
            raise InvalidResourceParams(
                f"where: {label} holds {family}s ({dtype}); {value!r} is not an ISO {family}"
            ) from None
    return value


def nw_family(nw: Any, dtype: Any) -> str:
    """The family (see :func:`coerce`) of a narwhals dtype."""
    if isinstance(dtype, nw.Boolean):
        return "bool"
    if dtype.is_numeric():
        return "number"
    if isinstance(dtype, nw.Datetime):
        return "datetime"
    if isinstance(dtype, nw.Date):
        return "date"
    if isinstance(dtype, (nw.String, nw.Categorical, nw.Enum)):
        return "text"
    return "other"


def nw_expression(nw: Any, schema: Any, name: Any, cond: Condition) -> Any:
    """``cond`` on column ``name`` as a narwhals expression (a comparison never matches a null)."""
    col = nw.col(name)
    if cond.value is None:
        return col.is_null() if cond.op == "==" else ~col.is_null()
    if cond.op == "~":
        text = col.cast(nw.String()).str.to_lowercase()
        return ~col.is_null() & text.str.contains(str(cond.value).lower(), literal=True)
    dtype = schema[name]
    value = coerce(cond, nw_family(nw, dtype), str(dtype))
    compare = {
        "==": col == value,
        "!=": col != value,
        "<": col < value,
        "<=": col <= value,
        ">": col > value,
        ">=": col >= value,
    }[cond.op]
    return ~col.is_null() & compare


# -- a lazy engine's plan ----------------------------------------------------------------------------
def lazy_plan(value: Any, query: Query, engine: str) -> Any:
    """``value`` (a lazy engine frame) filtered and sorted, as a native lazy plan: nothing computes.

    Sorts are stable: ties keep the source order through a row-number column (DuckDB's and Ibis's
    ``row_number() over ()``, Spark's ``monotonically_increasing_id()``, polars' row index)."""
    import narwhals.stable.v2 as nw

    if query.sort and engine in NOT_SORTABLE:
        raise InvalidResourceParams(
            f"a {engine} frame cannot be sorted here (a global sort is a full shuffle); filter it with where="
        )
    names = list(nw.from_native(value).collect_schema().names())
    tie = TIE
    while tie in names:
        tie += "_"
    tied = _with_tie(value, engine, tie) if query.sort else None
    frame = nw.from_native(tied if tied is not None else value)
    if query.where:
        schema = frame.collect_schema()
        frame = frame.filter(*(nw_expression(nw, schema, names[p], c) for c in query.where for p in c.positions))
    if query.sort:
        first: dict[str, bool] = {}
        for k in query.sort:
            for p in k.positions:
                first.setdefault(names[p], k.descending)  # a column named twice: its first mention
        keys = list(first.items())
        if tied is not None:
            keys.append((tie, False))
        frame = frame.sort([n for n, _ in keys], descending=[d for _, d in keys], nulls_last=True)
        if tied is not None:
            frame = frame.drop(tie)
    return frame.to_native()


def _with_tie(value: Any, engine: str, tie: str) -> Any:
    """``value`` with a column numbering its rows in source order, or None when the engine has none."""
    if engine == "duckdb":
        quoted = '"' + tie.replace('"', '""') + '"'
        return value.project(f"*, row_number() OVER () AS {quoted}")  # no client text in here
    if engine == "ibis":
        import ibis

        return value.mutate(**{tie: ibis.row_number()})
    if engine == "polars":
        return value.with_row_index(tie)
    if engine == "pyspark":
        from pyspark.sql import functions as F

        return value.withColumn(tie, F.monotonically_increasing_id())
    return None
