"""The tables room of the providers: pages and schemas of any table (provider.py, pages.py,
schema.py, query.py, order.py), one adapter per family of libraries (tables/), the lazy engines
(engines.py) and DuckDB connections (databases.py). Entered only for values of the types it serves
(``FramesProvider.rows_serve``): an int's read never imports or calls it."""

# The libraries whose types the room serves, by the root module of a type or a base: what the hub
# registers before the room is imported (equal to tables.LIBRARIES, engines.ENGINE_LIBRARIES and
# engines.CONNECTION_LIBRARIES; tests/test_load_lazy.py holds them equal).
TABLE_LIBRARIES = frozenset({"pandas", "polars", "pyarrow", "modin", "cudf", "numpy"})
ENGINE_LIBRARIES = frozenset({"pyspark", "dask", "dask_expr", "duckdb", "_duckdb", "ibis", "polars", "sqlframe"})
CONNECTION_LIBRARIES = frozenset({"duckdb", "_duckdb"})
FRAMES_PREFIX, DATABASES_PREFIX = "nb://frames/", "nb://db/"
