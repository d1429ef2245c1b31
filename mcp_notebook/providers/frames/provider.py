"""Tables and arrays as resources: pages of rows and a schema.

``nb://frames/{name}{?offset,limit,columns,format,count,sort,where}`` reads a page of rows of a
pandas DataFrame/Series, polars DataFrame/Series, pyarrow Table/RecordBatch, numpy array (1-D,
2-D; higher dimensions flatten their leading axes) or lazy engine frame. ``format`` is ``csv``
(default), ``json`` (records) or ``markdown``; ``columns=a,b`` picks columns (index columns
always come first); ``sort=-a,b`` and ``where=a>=3;b~text`` sort and filter the rows before the
page is cut (providers/frames/query.py, order.py).
``nb://frames/{name}/schema`` (also ``?columns=a,b``) describes shape, dtypes, null counts,
min/max/mean, categories, datetime ranges, examples and the pandas index. A polars LazyFrame
has a schema only: its rows are never computed by a read.

A page read answers two contents items, in every protocol revision:

1. the rows, in the requested MIME type (``text/csv``, ``application/json``, ``text/markdown``);
2. ``application/json`` page info: ``offset``, ``rows``, ``total_rows``, ``columns``,
   ``truncated`` (true when rows exist after this page), ``next`` (URI of the next page, or
   null), ``cut_by_size`` (fewer rows than ``limit`` because of ``MCPHub.max_read_chars``),
   ``columns_truncated`` and ``values_truncated`` (long cells shortened, ending in "…").

The same page info is also in the first item's ``_meta["mcp-notebook/page"]`` (2025-06-18+).
In CSV and markdown a null is an empty cell; lists and dicts are JSON. Every read slices first
and converts only the slice, so a page of a 10-million-row frame costs what a small one does.
Statistics in the schema cover at most ``MCPHub.frame_stats_rows`` leading rows (said so in
``stats_rows``/``stats_note``).

Change detection: after a cell, a watched frame's cheap fingerprint (id, shape, columns, block
manager or data pointer) is compared on the main thread; if it did not move, the hub's worker
hashes a sample of ~10,000 rows (head, tail and an even stride). An in-place edit of a middle row
of a huge frame that falls outside the sample is therefore not noticed.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ...guard import RenderTimeout, call_guarded, safe_str, type_name
from ...redact import mask_secrets
from ...types import Annotations, Contents, Resource, ResourceTemplate
from ...uri import compile_template
from ..base import (
    NO_CHANGE,
    ChangeSet,
    Facts,
    InvalidResourceParams,
    Provider,
    ResourceNotFound,
    ResourceReadError,
    rank_completions,
)
from ..optional import missing_package
from ..variables import Serves
from .engines import ENGINE_LIBRARIES, EngineFrame, engine_of_type, is_connection_type
from .order import OrderCache
from .pages import FORMATS, JSON, OLD_PAGE_TEMPLATE, PAGE_TEMPLATE, page_contents
from .schema import SCHEMA_TEMPLATE, schema_contents
from .tables import LIBRARIES, Table, adapter_for_type, quiet, table_for

PREFIX = "nb://frames/"
_PAGE = compile_template(PAGE_TEMPLATE)
_SCHEMA = compile_template(SCHEMA_TEMPLATE + "{?columns}")
_MISSING = object()


def frame_uri(name: str) -> str:
    return PREFIX + name


def schema_uri(name: str) -> str:
    return f"{PREFIX}{name}/schema"


class FramesProvider(Provider):
    """Pages and schemas of the tabular variables the VariablesProvider exposes."""

    uri_prefixes = (PREFIX,)

    # The values whose nb://vars rows (index_links) and reprs (engine_repr) it extends, told from
    # their types alone: any other value never enters this module.
    rows_serve = Serves(libraries=LIBRARIES | ENGINE_LIBRARIES)
    reprs_serve = Serves(libraries=ENGINE_LIBRARIES)

    def __init__(self, variables: Any, limits: Any):
        self._vars = variables
        self._limits = limits
        self._fingerprints: dict[str, tuple | None] = {}
        self.orders = OrderCache()  # row orders of sorted/filtered pages; emptied after every cell

    # -- lookup -------------------------------------------------------------------------
    def _table(self, name: str, uri: str) -> Table:
        try:
            value = self._vars.value(name)
        except ResourceNotFound:
            raise ResourceNotFound(uri) from None
        table = self.frame_for(value)
        if table is None:
            raise ResourceNotFound(uri, f"{name} is a {type_name(value)}, not a table or array; see nb://vars/{name}")
        return table

    def frame_for(self, value: Any) -> Table | None:
        """The table interface of ``value``: an engine frame (lazy), an eager table, or None."""
        engine = engine_of_type(type(value))
        if engine is not None:
            return EngineFrame(value, engine, self._limits.engine_timeout, self.duckdb_connections)
        return table_for(value)

    def engine_repr(self, value: Any) -> Callable[[], str] | None:
        """For a lazy frame, the text of nb://vars/{name} from its schema (its repr may run the query)."""
        engine = engine_of_type(type(value))
        if engine is None:
            return None

        def render() -> str:
            table = EngineFrame(value, engine)
            schema = table.schema()
            names, dtypes = schema.names(), schema.dtypes()
            cols = ", ".join(f"{mask_secrets(str(n))}: {t}" for n, t in zip(names, dtypes, strict=False))
            return f"<lazy {table.kind}; columns: {cols}; page its rows through nb://frames>"

        return render

    def duckdb_connections(self) -> list[Any]:
        """DuckDB connections in the namespace (interrupted when a relation's read overruns)."""
        out = []
        for name, cls in self._vars.exposed_items():
            if is_connection_type(cls):
                try:
                    out.append(self._vars.value(name))
                except ResourceNotFound:
                    pass
        return out

    def _tabular_names(self) -> list[tuple[str, type]]:
        return [
            (n, cls)
            for n, cls in self._vars.exposed_items()
            if adapter_for_type(cls) is not None or engine_of_type(cls) is not None
        ]

    def index_links(self, name: str, value: Any) -> dict[str, Any]:
        """Extra fields of an nb://vars index row: where to page through a tabular value."""
        engine = engine_of_type(type(value))
        if engine is not None:  # no call into the engine for an index row
            return {"frame": frame_uri(name), "schema": schema_uri(name), "engine": engine, "lazy": True}
        table = table_for(value)
        if table is None:
            return {}
        return {"frame": frame_uri(name), "schema": schema_uri(name)}

    # -- listing ------------------------------------------------------------------------
    def owns(self, uri: str) -> bool:
        return uri.startswith(PREFIX)

    def list_token(self) -> int:
        """Listing follows the variables (exposure, types); shapes only change in cells (hub generation)."""
        return self._vars.list_token()

    def variable_name(self, uri: str) -> str | None:
        return self.canonical(uri)[len(PREFIX) :].removesuffix("/schema") or None

    def facts(self, uri: str) -> Facts | None:
        name = self.variable_name(uri)
        return None if name is None else self._vars.facts_of(name)

    def list_resources(self) -> list[Resource]:
        out = []
        for name, _ in self._tabular_names():
            try:
                table = self._table(name, frame_uri(name))
                rows, cols = table.nrows, len(table.labels())
            except Exception:  # gone or changing under us: leave it out of this listing
                continue
            if table.lazy:
                title = f"{name} ({table.kind}, {cols} columns, lazy)"
                description = (
                    f"Rows of {name}, a lazy {table.kind} with {cols} columns: each page is pushed down to "
                    "the engine (projection, sort, filter, limit/offset); the row count is null unless asked "
                    f"for with ?count=true. Columns and dtypes: {schema_uri(name)}"
                )
            else:
                title = f"{name} ({table.kind}, {rows:,} x {cols})"
                description = (
                    f"Rows of {name}, a {table.kind} with {rows:,} rows x {cols} columns, as CSV pages "
                    f"(add ?offset=&limit=&columns=a,b&format=csv|json|markdown&sort=-a,b&where=a>=3). "
                    f"Columns, dtypes and statistics: {schema_uri(name)}"
                )
            out.append(
                Resource(
                    uri=frame_uri(name),
                    name=f"frames/{name}",
                    title=title,
                    description=description,
                    mime_type=FORMATS["csv"],
                    annotations=Annotations(audience=("assistant",), priority=0.7),
                )
            )
        return out

    def list_templates(self) -> list[ResourceTemplate]:
        return [
            ResourceTemplate(
                uri_template=PAGE_TEMPLATE,
                name="frame-page",
                title="Rows of a table or array",
                description=(
                    "Rows of any table (pandas, polars, Arrow, numpy, Spark, Dask, DuckDB, Ibis), after its "
                    f"schema: offset, limit (default {self._limits.frame_page_rows}, max {self._limits.frame_max_rows}), "
                    "columns=a,b, format=csv|json|markdown, sort=-a,b, where=a>=3;b~text (';' joins; == != < <= > "
                    ">= ~ contains), count=true. A second item gives total_rows and the next page."
                ),
                mime_type=FORMATS["csv"],
            ),
            ResourceTemplate(
                uri_template=SCHEMA_TEMPLATE,
                name="frame-schema",
                title="Schema of a table or array",
                description=(
                    "Read this first for any table (small): shape, columns, dtypes, null counts, min/max/mean, "
                    "categories, examples. Lazy frames: metadata only; ?stats=true, ?count=true compute (bounded)."
                ),
                mime_type=JSON,
            ),
        ]

    def complete(self, template: str, argument: str, value: str, context: dict[str, str]) -> list[str] | None:
        if template not in (PAGE_TEMPLATE, OLD_PAGE_TEMPLATE, SCHEMA_TEMPLATE):
            return None
        if argument == "name":
            return rank_completions([n for n, _ in self._tabular_names()], value)
        if argument == "format":
            return [f for f in FORMATS if f.startswith(value.lower())]
        if argument == "columns":
            name = context.get("name")
            if not isinstance(name, str):
                return []
            try:
                labels = self._table(name, frame_uri(name)).labels()
            except Exception:
                return []
            head, _, last = value.rpartition(",")
            chosen = set(head.split(",")) if head else set()
            prefix = head + "," if head else ""
            shown = list(dict.fromkeys(mask_secrets(label) for label in labels))
            return [prefix + c for c in rank_completions(shown, last) if c not in chosen]
        return []

    # -- reading ------------------------------------------------------------------------
    def read(self, uri: str) -> list[Contents]:
        params = _SCHEMA.match(uri)
        if params is not None:
            return [self._guarded(uri, lambda: self._read_schema(uri, params))]
        params = _PAGE.match(uri)
        if params is None:
            raise ResourceNotFound(uri)
        return self._guarded(uri, lambda: self._read_page(uri, params))

    def _guarded(self, uri: str, fn: Callable[[], Any]) -> Any:
        """Run a read on a guarded thread (user __repr__ may hang); retry once on a racing mutation."""
        timeout = max(10.0, 5 * self._limits.repr_timeout)
        if self._is_engine(uri):  # engine calls bound themselves by engine_timeout and cancel on expiry
            timeout = max(timeout, self._limits.engine_timeout + 5)

        def run() -> Any:
            with quiet():
                return fn()

        for attempt in (1, 2):
            try:
                return call_guarded(run, timeout)
            except (ResourceNotFound, InvalidResourceParams, ResourceReadError):
                raise
            except RenderTimeout as exc:
                raise ResourceReadError(f"reading {uri} did not finish: {exc}") from None
            except Exception as exc:  # e.g. the frame changed while a cell was running
                missing = missing_package(exc, f"reading {uri}")
                if missing is not None:
                    raise missing from None
                if attempt == 2:
                    message = safe_str(exc, self._limits.repr_timeout)
                    raise ResourceReadError(f"reading {uri} failed: {type(exc).__name__}: {message}") from None
        raise AssertionError("unreachable")

    def _is_engine(self, uri: str) -> bool:
        """Whether ``uri`` names a lazy engine frame (a type check only: no user code, no engine call)."""
        name = _name_of(uri)
        if name is None:
            return False
        try:
            return engine_of_type(type(self._vars.value(name))) is not None
        except Exception:
            return False

    def _read_page(self, uri: str, params: dict[str, str]) -> list[Contents]:
        name = params["name"]
        table = self._table(name, uri)
        return page_contents(
            uri,
            params,
            table,
            name,
            self._limits,
            lambda p: _PAGE.expand({"name": name, **p}),
            schema_uri(name),
            self.orders,
        )

    def _read_schema(self, uri: str, params: dict[str, str]) -> Contents:
        name = params["name"]
        table = self._table(name, uri)
        return schema_contents(uri, params, table, name, self._limits, frame_uri(name), schema_uri(name))

    # -- change detection ---------------------------------------------------------------
    def _fingerprint(self, uri: str) -> tuple[tuple | None, bool]:
        name = _name_of(uri)
        if name is None:
            return None, False
        try:
            table = self.frame_for(self._vars.value(name))
        except ResourceNotFound:
            return None, False
        if table is None:
            return None, False
        return table.fingerprint(), table.mutable

    def snapshot(self, watched: frozenset[str]) -> ChangeSet:
        orders = self.orders  # a cell ran: a frame may have changed in place
        if orders.items:
            orders.next_epoch()
        else:  # next_epoch's empty case inlined (most cells: no call)
            orders.epoch += 1
        mine = [uri for uri in watched if uri.startswith(PREFIX)]
        if not mine and not self._fingerprints:
            return NO_CHANGE
        changes = ChangeSet()
        for uri in mine:
            try:
                fp, mutable = self._fingerprint(uri)
            except Exception:  # a value racing with us: let the exact check decide
                changes.maybe.add(uri)
                continue
            before = self._fingerprints.get(uri, _MISSING)
            self._fingerprints[uri] = fp
            if before is not _MISSING and before != fp:
                changes.updated.add(uri)
            elif fp is not None and mutable:
                changes.maybe.add(uri)
        if len(self._fingerprints) > len(mine):
            keep = set(mine)
            for uri in [u for u in self._fingerprints if u not in keep]:
                del self._fingerprints[uri]
        return changes

    def digest(self, uri: str) -> bytes | None:
        name = _name_of(uri)
        if name is None:
            return b"missing"
        try:
            table = self._table(name, uri)
        except ResourceNotFound:
            return b"missing"
        try:

            def run() -> bytes:
                with quiet():
                    return table.digest()

            return call_guarded(run, max(10.0, 5 * self._limits.repr_timeout))
        except Exception as exc:
            return f"error {type(exc).__name__}".encode()


def _name_of(uri: str) -> str | None:
    params = _SCHEMA.match(uri) or _PAGE.match(uri)
    return params.get("name") if params else None
