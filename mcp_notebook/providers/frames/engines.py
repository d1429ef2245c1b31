"""Lazy engine frames (Spark, Dask, DuckDB, Ibis, polars LazyFrame) behind the tabular interface.

The table interface is narwhals: schema (``collect_schema``), projection (``select``), the first
page (``head``), the row count (``select(nw.len())``) and the conversion of collected rows to
Python lists all go through it. Hand-written per engine, because narwhals has no lazy
``offset``: the slice for deep pages (``limit``/``offset`` pushed down); Dask's paging, which
walks partitions from the first one (narwhals' Dask ``head`` would touch every partition); Spark's
rows, collected through CollectLimit (narwhals' ``toArrow()`` runs every partition); and the
cancellation of a call that overran ``MCPHub.engine_timeout`` (Spark job groups, DuckDB
``interrupt()``, Dask futures), which narwhals does not model.

Rules: metadata is free (a schema never computes, a fingerprint never calls the engine), rows
cost only what a page asks for, counts are unknown unless asked for, and every engine call runs
on its own daemon thread, bounded by the timeout and cancelled when it expires.
"""

from __future__ import annotations

import itertools
import sys
import threading
import warnings
from collections.abc import Callable, Sequence
from typing import Any

from ...redact import mask_secrets
from ..base import ResourceReadError
from ..optional import MissingPackage, eager_backend, missing_package
from .tables import Table, table_for

# (top-level module, class qualname) -> engine name. Type names only: nothing is imported.
ENGINE_TYPES: dict[tuple[str, str], str] = {
    ("pyspark", "DataFrame"): "pyspark",
    ("dask", "DataFrame"): "dask",
    ("dask_expr", "DataFrame"): "dask",
    ("duckdb", "DuckDBPyRelation"): "duckdb",
    ("_duckdb", "DuckDBPyRelation"): "duckdb",
    ("ibis", "Table"): "ibis",
    ("polars", "LazyFrame"): "polars",
    ("sqlframe", "DataFrame"): "sqlframe",
}
CONNECTION_TYPES = {("duckdb", "DuckDBPyConnection"), ("_duckdb", "DuckDBPyConnection")}
ENGINE_LIBRARIES = frozenset(lib for lib, _ in ENGINE_TYPES)
CONNECTION_LIBRARIES = frozenset(lib for lib, _ in CONNECTION_TYPES)
_KIND = {
    "pyspark": "pyspark.DataFrame",
    "dask": "dask.DataFrame",
    "duckdb": "duckdb.DuckDBPyRelation",
    "ibis": "ibis.Table",
    "polars": "polars.LazyFrame",
    "sqlframe": "sqlframe.DataFrame",
}
_groups = itertools.count(1)

# narwhals announces that its Dask backend moves to a plugin; from a server thread the warning
# would be printed into the current cell's output.
warnings.filterwarnings("ignore", message=r".*Dask support is moving out of Narwhals.*", category=FutureWarning)
# A filtered Dask partition often holds fewer rows than a page asks of it: expected, not news.
warnings.filterwarnings("ignore", message=r"Insufficient elements for `head`", category=UserWarning)


class EngineError(ResourceReadError):
    """The engine failed or did not answer in time (a JSON-RPC error carrying its message)."""


def engine_of_type(cls: type) -> str | None:
    """The engine name for values of ``cls`` (subclasses included), from type names alone."""
    for base in getattr(cls, "__mro__", ()):
        lib = (getattr(base, "__module__", None) or "").partition(".")[0]
        engine = ENGINE_TYPES.get((lib, base.__qualname__))
        if engine is not None:
            return engine
    return None


def is_connection_type(cls: type) -> bool:
    return ((cls.__module__ or "").partition(".")[0], cls.__qualname__) in CONNECTION_TYPES


def _nw() -> Any:
    import narwhals as nw

    return nw


def _columns(engine: str, page: Any, names: list[str]) -> list[list[Any]]:
    """The columns of a narwhals lazy ``page`` as Python lists: collected into the first eager
    library installed, or (DuckDB without any) fetched as Python rows."""
    backend = eager_backend()
    if backend is None and engine == "duckdb":
        rows = page.to_native().fetchall()
        return [list(col) for col in zip(*rows, strict=True)] if rows else [[] for _ in names]
    df = page.collect(backend=backend)
    return [df.get_column(c).to_list() for c in names]


# -- bounded, cancellable engine calls ------------------------------------------------------------
def run_bounded(fn: Callable[[], Any], timeout: float, cancel: Callable[[], None], what: str) -> Any:
    """Run ``fn`` on a daemon thread; past ``timeout`` seconds call ``cancel`` and raise EngineError."""
    box: dict[str, Any] = {}
    done = threading.Event()

    def run() -> None:
        try:
            box["value"] = fn()
        except BaseException as exc:
            box["error"] = exc
        finally:
            done.set()

    threading.Thread(target=run, name="mcp-notebook-engine", daemon=True).start()
    if not done.wait(timeout):
        try:
            cancel()
        except Exception:
            pass
        done.wait(min(2.0, timeout))
        raise EngineError(
            f"{what} did not finish within engine_timeout={timeout:g}s and was cancelled "
            "(raise MCPHub.engine_timeout, or narrow the query)"
        )
    if "error" in box:
        exc = box["error"]
        if isinstance(exc, ResourceReadError):
            raise exc
        missing = missing_package(exc, what)
        if missing is not None:
            raise missing from None
        message = mask_secrets(_first_line(exc))[:500]
        raise EngineError(f"{what} failed: {type(exc).__name__}: {message}") from None
    return box["value"]


def _first_line(exc: BaseException) -> str:
    """The engine's own message: the first line, or for a Java error the first line naming the cause."""
    lines = [line.strip() for line in str(exc).strip().splitlines() if line.strip()]
    if not lines:
        return ""
    if lines[0].startswith("An error occurred while calling"):
        for line in lines[1:]:
            if "Exception" in line or "Error" in line:
                return line
    return lines[0]


class EngineFrame(Table):
    """A lazy frame of a query engine. Reads push projection and limit/offset down to the engine."""

    mutable = False  # engine handles are immutable plans: only rebinding changes them
    lazy = True

    def __init__(
        self,
        value: Any,
        engine: str,
        timeout: float = 30.0,
        connections: Callable[[], list[Any]] = list,
        ordered: bool = False,
    ):
        super().__init__(value)
        self.engine = engine
        self.ordered = ordered  # the plan ends in a sort (Spark pages it with its own offset)
        self.kind = _KIND.get(engine, engine)
        self.timeout = timeout
        self.connections = connections  # DuckDB connections that may own the relation (to interrupt)
        self._schema: Any = None

    # -- metadata (no compute) ----------------------------------------------------------
    def _frame(self) -> Any:
        return _nw().from_native(self.value)

    def schema(self) -> Any:
        if self._schema is None:
            self._schema = self._frame().collect_schema()
        return self._schema

    @property
    def nrows(self) -> None:
        return None

    def labels(self) -> list[str]:
        return [str(n) for n in self.schema().names()]

    def native_dtypes(self) -> list[str] | None:
        v = self.value
        try:
            if self.engine == "duckdb":
                return [str(t) for t in v.types]
            if self.engine == "pyspark":
                return [f.dataType.simpleString() for f in v.schema.fields]
            if self.engine == "dask":
                return [str(t) for t in v.dtypes]
        except Exception:
            return None
        return None

    def describe(self, positions: Sequence[int], stats_rows: int) -> dict[str, Any]:
        schema = self.schema()
        names, dtypes = list(schema.names()), list(schema.dtypes())
        native = self.native_dtypes()
        cols = []
        for p in positions:
            col: dict[str, Any] = {"name": str(names[p]), "dtype": str(dtypes[p])}
            if native is not None and p < len(native) and native[p] != col["dtype"]:
                col["engine_dtype"] = native[p]
            cols.append(col)
        return {"columns": cols, "engine": self.engine}

    def fingerprint(self) -> tuple:
        # Identity and plan, from attributes only: never a call into the engine on the main thread.
        token = getattr(self.value, "_name", None) if self.engine == "dask" else None
        return (id(self.value), type(self.value), token if isinstance(token, str) else None)

    def digest(self) -> bytes:
        return repr(self.fingerprint()).encode()

    # -- rows (bounded engine calls) ----------------------------------------------------------
    def _names(self, positions: Sequence[int]) -> list[str]:
        labels = self.labels()
        return list(dict.fromkeys(labels[p] for p in positions))

    def fetch(self, offset: int, n: int, positions: Sequence[int]) -> tuple[list[str], list[list[Any]]]:
        """Up to ``n`` rows from ``offset`` of the columns at ``positions``: (names, column lists)."""
        names = self._names(positions)
        if n <= 0 or not names:
            return names, [[] for _ in names]

        def work() -> list[list[Any]]:
            if self.engine == "dask":
                return _dask_rows(self.value, names, offset, n)
            if self.engine == "pyspark":
                return _spark_rows(self.value, names, offset, n, self.ordered)
            nw = _nw()
            projected = self._frame().select(names)
            if offset == 0:
                page = projected.head(n)
            else:
                page = nw.from_native(_native_slice(self.engine, projected.to_native(), offset, n))
            return _columns(self.engine, page, names)

        return names, self._bounded(work, f"reading rows of a {self.kind}")

    def count(self) -> int:
        """The exact row count (computes: only on request, bounded by the timeout)."""

        def work() -> int:
            if self.engine == "dask":
                return int(_dask_compute(self.value.shape[0]))
            if eager_backend() is None:  # nothing to collect into: the engine's own count
                if self.engine == "duckdb":
                    return int(self.value.aggregate("count(*)").fetchall()[0][0])
                if self.engine == "pyspark":
                    return int(self.value.count())
            nw = _nw()
            return int(self._frame().select(nw.len()).collect(backend=eager_backend()).item())

        return self._bounded(work, f"counting the rows of a {self.kind}")

    def sample(self, n: int, positions: Sequence[int]) -> Table | None:
        """The first ``n`` rows as an eager table (for statistics on request)."""
        names = self._names(positions)

        def work() -> Any:
            if self.engine == "dask":
                import pandas as pd

                cols = _dask_rows(self.value, names, 0, n)
                return pd.DataFrame(dict(zip(names, cols, strict=True)))
            backend = eager_backend()
            if backend is None:
                raise MissingPackage("pyarrow", f"statistics of a {self.kind}")
            if self.engine == "pyspark":  # CollectLimit, as for pages (narwhals' toArrow runs every partition)
                cols = _spark_rows(self.value, names, 0, n)
                return _nw().from_dict(dict(zip(names, cols, strict=True)), backend=backend).to_native()
            return self._frame().select(names).head(n).collect(backend=backend).to_native()

        return table_for(self._bounded(work, f"sampling rows of a {self.kind}"))

    def run_plan(self, work: Callable[[], Any], what: str) -> Any:
        """Build a new plan on this frame (sort, filter): bounded and taking turns like a read."""
        return self._bounded(work, f"{what} a {self.kind}")

    def _bounded(self, work: Callable[[], Any], what: str) -> Any:
        group = f"mcp-notebook-{next(_groups)}"
        state: dict[str, Any] = {}

        cancelled = threading.Event()

        def run() -> Any:
            _local.cancelled = cancelled
            if self.engine == "pyspark":
                sc = self.value.sparkSession.sparkContext
                state["sc"] = sc
                sc.setJobGroup(group, "mcp-notebook read", interruptOnCancel=True)
            try:
                serial = _ONE_CALL_AT_A_TIME.get(self.engine)
                if serial is None:
                    return work()
                with serial:
                    return work()
            finally:
                if "sc" in state:
                    try:
                        state["sc"].setLocalProperty("spark.jobGroup.id", None)
                    except Exception:
                        pass

        def cancel() -> None:
            if "sc" in state:
                state["sc"].cancelJobGroup(group)
            elif self.engine in ("duckdb", "ibis"):
                for con in self._duckdb_connections():
                    try:
                        con.interrupt()
                    except Exception:
                        pass
            elif self.engine == "dask":
                cancelled.set()
                _cancel_dask()

        return run_bounded(run, self.timeout, cancel, what)

    def _duckdb_connections(self) -> list[Any]:
        cons = list(self.connections())
        if self.engine == "ibis":
            try:
                con = getattr(self.value._find_backend(), "con", None)
                if con is not None:
                    cons.append(con)
            except Exception:
                pass
        duckdb = sys.modules.get("duckdb")
        if duckdb is not None:
            try:
                cons.append(duckdb.default_connection())
            except Exception:
                pass
        return cons


# A DuckDB connection refuses a second call while one runs ("connection is busy"): the hub's own
# reads of DuckDB (and Ibis-on-DuckDB) frames take turns, so two pages asked at once both arrive.
_ONE_CALL_AT_A_TIME: dict[str, threading.Lock] = {"duckdb": threading.Lock(), "ibis": threading.Lock()}


def _native_slice(engine: str, native: Any, offset: int, n: int) -> Any:
    """Rows offset..offset+n of an engine's lazy frame, still lazy (narwhals has no lazy offset)."""
    if engine == "duckdb":
        return native.limit(n, offset)
    if engine == "ibis":
        return native.limit(n, offset=offset)
    if engine == "polars":
        return native.slice(offset, n)
    if engine in ("pyspark", "sqlframe"):
        return native.offset(offset).limit(n)
    raise NotImplementedError(f"no offset for {engine}")


def _spark_rows(sdf: Any, names: list[str], offset: int, n: int, ordered: bool = False) -> list[list[Any]]:
    """Rows of a Spark frame through ``collect()`` of a limited plan, which Spark runs as CollectLimit:
    partitions are scanned a few at a time until enough rows came back. (narwhals collects through
    ``toArrow()``, which runs every partition of the plan: a slow UDF would make a 10-row page cost
    a pass over the whole frame.) Deep pages do not use Spark's ``offset()``, which brings all
    ``offset + n`` rows to the driver: rows are addressed by ``monotonically_increasing_id()``
    (partition id << 33 | row in partition) once the partition sizes are known (one JVM-side count).
    A sorted plan (``ordered``) does use ``offset().limit()``: Spark runs it as TakeOrderedAndProject
    (each partition keeps its first ``offset + n`` rows), and a sort's partition bounds are sampled
    anew by every job, so partition sizes counted by one job would not address rows of the next."""
    width = len(names)
    projected = sdf.select(*names)
    if offset == 0 or ordered:
        rows = (projected.offset(offset) if offset else projected).limit(n).collect()
        return [[row[j] for row in rows] for j in range(width)]
    from pyspark.sql import functions as F

    out: list[list[Any]] = [[] for _ in range(width)]
    start = 0
    for pid, size in _spark_partition_sizes(sdf):
        if start + size <= offset:
            start += size
            continue
        local = max(0, offset - start)
        take = min(size - local, n - len(out[0]))
        lo = (pid << 33) + local
        mid = F.monotonically_increasing_id()
        rows = projected.withColumn("__mcp_row", mid).where(
            (F.col("__mcp_row") >= lo) & (F.col("__mcp_row") < lo + take)
        )
        got = sorted(rows.collect(), key=lambda r: r["__mcp_row"])
        for j in range(width):
            out[j].extend(row[j] for row in got)
        start += size
        if len(out[0]) >= n:
            break
    return out


_spark_sizes: dict[int, tuple[Any, list[tuple[int, int]]]] = {}


def _spark_partition_sizes(sdf: Any) -> list[tuple[int, int]]:
    """(partition id, rows) of a Spark frame, in order (cached for the frame object)."""
    cached = _spark_sizes.get(id(sdf))
    if cached is not None and cached[0] is sdf:
        return cached[1]
    from pyspark.sql import functions as F

    counts = sdf.select(F.spark_partition_id().alias("p")).groupBy("p").count().collect()
    sizes = sorted((int(r["p"]), int(r["count"])) for r in counts)
    if len(_spark_sizes) >= 8:
        _spark_sizes.pop(next(iter(_spark_sizes)))
    _spark_sizes[id(sdf)] = (sdf, sizes)
    return sizes


def _dask_rows(ddf: Any, names: list[str], offset: int, n: int) -> list[list[Any]]:
    """Rows of a Dask frame from its first partitions on: each partition is computed only when the
    rows before it did not suffice (narwhals' Dask head computes every partition)."""
    projected = ddf[names]
    out: list[list[Any]] = [[] for _ in names]
    skip, need = offset, n
    for i in range(projected.npartitions):
        # head() of one partition: Dask pushes the limit into readers that support it (parquet).
        source = projected if i == 0 else projected.partitions[i]
        part = _dask_compute(source.head(skip + need, npartitions=1, compute=False))
        rows = len(part.index)
        if skip >= rows:
            skip -= rows
            continue
        piece = part.iloc[skip : skip + need]
        skip = 0
        for j in range(len(names)):
            out[j].extend(piece.iloc[:, j].tolist())
        need -= len(piece.index)
        if need <= 0:
            break
    return out


_dask_futures: set[Any] = set()
_local = threading.local()  # the running read's cancel flag (Dask's local scheduler checks it per task)


def _dask_compute(obj: Any) -> Any:
    """compute(), through a distributed Client's future when one is active (so it can be cancelled)."""
    client = None
    if "distributed" in sys.modules:
        try:
            from distributed import default_client

            client = default_client()
        except Exception:
            client = None
    if client is None:
        cancelled = getattr(_local, "cancelled", None)

        def pretask(key: Any, dsk: Any, state: Any) -> None:
            if cancelled is not None and cancelled.is_set():
                raise RuntimeError("cancelled: engine_timeout expired")

        # The local scheduler cannot be interrupted, but it asks this hook before every task.
        return obj.compute(scheduler="threads", callbacks=[(None, None, pretask, None, None)])
    future = client.compute(obj)
    _dask_futures.add(future)
    try:
        return future.result()
    finally:
        _dask_futures.discard(future)


def _cancel_dask() -> None:
    for future in list(_dask_futures):
        try:
            future.cancel()
        except Exception:
            pass


# -- DuckDB connections: tables and views ---------------------------------------------------------
def db_objects(con: Any, timeout: float) -> list[dict[str, Any]]:
    """Tables and views of a DuckDB connection, with their columns (catalog metadata only)."""
    sql = (
        "SELECT t.table_catalog, t.table_schema, t.table_name, t.table_type, c.column_name, c.data_type "
        "FROM information_schema.tables t LEFT JOIN information_schema.columns c "
        "ON c.table_catalog = t.table_catalog AND c.table_schema = t.table_schema AND c.table_name = t.table_name "
        "WHERE t.table_schema NOT IN ('information_schema', 'pg_catalog') "
        "ORDER BY t.table_catalog, t.table_schema, t.table_name, c.ordinal_position"
    )
    cursor = con.cursor()  # its own connection to the same database: safe beside the user's cells

    def work() -> list[tuple]:
        return cursor.execute(sql).fetchall()

    try:
        rows = run_bounded(work, timeout, cursor.interrupt, "listing the DuckDB catalog")
    finally:
        try:
            cursor.close()
        except Exception:
            pass
    out: dict[tuple[str, str, str], dict[str, Any]] = {}
    for catalog, schema, name, kind, column, dtype in rows:
        key = (catalog, schema, name)
        entry = out.setdefault(
            key,
            {
                "catalog": catalog,
                "schema": schema,
                "name": name,
                "kind": "view" if "VIEW" in kind else "table",
                "columns": [],
            },
        )
        if column is not None:
            entry["columns"].append({"name": mask_secrets(str(column)), "dtype": str(dtype)})
    return list(out.values())


def db_relation(con: Any, table: str) -> tuple[Any, Any]:
    """(relation, cursor) over one table or view (``name`` or ``schema.name``), on a fresh cursor."""
    cursor = con.cursor()
    quoted = ".".join('"' + p.replace('"', '""') + '"' for p in table.split("."))
    return cursor.sql(f"SELECT * FROM {quoted}"), cursor
