"""Lazy engine frames in a real kernel: Spark, Dask, DuckDB (a 20M-row parquet file), Ibis on DuckDB and
polars LazyFrames, read through nb://frames and nb://db without computing what a page does not need."""

from __future__ import annotations

import csv
import io
import json
import shutil
import warnings

import anyio
import pytest
from sdk import connect

pytest.importorskip("narwhals", reason="the engines extra is not installed (pip install -e '.[engines]')")
pytest.importorskip("duckdb", reason="the engines extra is not installed")
pytest.importorskip("dask.dataframe", reason="the engines extra is not installed")
pytest.importorskip("ibis", reason="the engines extra is not installed")

ROWS = 20_000_000
ENGINES = {"sdf": "pyspark", "ddf": "dask", "rel": "duckdb", "it": "ibis", "plf": "polars"}

SETUP = f"""
import time, duckdb, ibis, polars as pl, pandas as pd, dask, dask.dataframe as dd
duckdb.sql("COPY (SELECT range AS id, range % 1000 AS g, 'n' || range AS s, range / 2.0 AS x "
           "FROM range({ROWS})) TO '{{path}}' (FORMAT parquet)")
rel = duckdb.sql("SELECT * FROM '{{path}}'")
con = duckdb.connect()
con.sql("CREATE VIEW big AS SELECT * FROM '{{path}}'")
con.sql("CREATE TABLE small AS SELECT range AS k, 'v' || range AS label FROM range(1000)")
heavy = con.sql("SELECT sum(a.range * b.range) AS s FROM range(200000) a, range(200000) b")
icon = ibis.duckdb.connect()
icon.raw_sql("CREATE VIEW big AS SELECT * FROM '{{path}}'")
it = icon.table("big")
plf = pl.scan_parquet('{{path}}').filter(pl.col('g') == 3)

computed = []
def boom(df):
    computed.append(len(df))
    if len(df) and df['a'].iloc[0] >= 700_000:  # the last partition raises when computed
        raise ValueError("last partition exploded")
    return df
ddf = dd.from_pandas(pd.DataFrame({{'a': range(800_000), 'b': 1.5}}), npartitions=8).map_partitions(
    boom, meta={{'a': 'int64', 'b': 'float64'}})

import os, sys
os.environ["PYSPARK_PYTHON"] = sys.executable  # Python workers run this kernel's interpreter (its packages)
def slow_part(df):
    time.sleep(0.5)
    return df
slowd = dd.from_pandas(pd.DataFrame({{'a': range(4000)}}), npartitions=80).map_partitions(slow_part, meta={{'a': 'int64'}})

from pyspark.sql import SparkSession, functions as F, types as T
spark = (SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
         .config("spark.sql.shuffle.partitions", "2")
         .config("spark.sql.execution.pythonUDF.arrow.enabled", "false")  # row-at-a-time UDF, batches of 100
         .config("spark.sql.execution.arrow.maxRecordsPerBatch", "100").getOrCreate())
spark.sparkContext.setLogLevel("ERROR")
@F.udf(T.BooleanType())
def slow_keep(x):
    time.sleep(0.001)
    return True
sdf_parquet = spark.read.parquet('{{path}}')
sdf = spark.range(0, 1_000_000, numPartitions=500).withColumn("twice", F.col("id") * 2).where(slow_keep("id"))
"""


@pytest.fixture(scope="module")
def engines(kernel, hub, tmp_path_factory):
    pytest.importorskip("pyspark", reason="the engines extra is not installed")
    if shutil.which("java") is None:
        pytest.skip("Spark needs a Java runtime (java on PATH)")
    path = tmp_path_factory.mktemp("engines") / "big.parquet"
    kernel.run(SETUP.replace("{path}", str(path)), timeout=300)
    kernel.run("import mcp_notebook as _m\n_m.hub().config.engine_timeout = 25")
    return hub


def read(mcp, uri):
    reply = mcp.call("resources/read", {"uri": uri})
    assert "result" in reply, reply
    return reply["result"]["contents"]


def page(mcp, uri):
    contents = read(mcp, uri)
    info = json.loads(contents[1]["text"])
    return list(csv.reader(io.StringIO(contents[0]["text"]))), info


def error_of(mcp, uri):
    reply = mcp.call("resources/read", {"uri": uri})
    assert "error" in reply, reply
    return reply["error"]


def set_timeout(kernel, seconds):
    kernel.run(f"_m.hub().config.engine_timeout = {seconds}")


def test_vars_listing_and_completion(engines, mcp):
    rows = {r["name"]: r for r in json.loads(read(mcp, "nb://vars")[0]["text"])["variables"]}
    for name, engine in ENGINES.items():
        assert rows[name]["engine"] == engine and rows[name]["frame"] == f"nb://frames/{name}", rows[name]
    assert rows["con"]["db"] == "nb://db/con"
    var = json.loads(read(mcp, "nb://vars/heavy")[0]["text"])  # a relation's repr would run the query
    assert var["repr"].startswith("<lazy duckdb.DuckDBPyRelation; columns: s: ") and var["engine"] == "duckdb"
    listed = {r["uri"]: r for r in mcp.result("resources/list")["resources"]}
    for name in ENGINES:
        assert "lazy" in listed[f"nb://frames/{name}"]["title"]

    def complete(name, value):
        params = {
            "ref": {"type": "ref/resource", "uri": "nb://frames/{name}{?offset,limit,columns,format,count,sort,where}"},
            "argument": {"name": "columns", "value": value},
            "context": {"arguments": {"name": name}},
        }
        return mcp.result("completion/complete", params)["completion"]["values"]

    assert complete("sdf", "") == ["id", "twice"]
    assert complete("ddf", "") == ["a", "b"]
    assert complete("rel", "g,") == ["g,id", "g,s", "g,x"]
    assert complete("it", "x") == ["x"] and complete("plf", "") == ["id", "g", "s", "x"]


def test_schemas_come_from_metadata(engines, kernel, mcp):
    for name, engine in ENGINES.items():
        doc = json.loads(read(mcp, f"nb://frames/{name}/schema")[0]["text"])
        assert doc["engine"] == engine and doc["row_count"] is None and doc["shape"][0] is None, doc
        assert all(c["dtype"] for c in doc["columns"])
    doc = json.loads(read(mcp, "nb://frames/rel/schema")[0]["text"])
    assert [(c["name"], c["dtype"]) for c in doc["columns"]] == [
        ("id", "Int64"),
        ("g", "Int64"),
        ("s", "String"),
        ("x", "Decimal"),
    ] or [c["name"] for c in doc["columns"]] == ["id", "g", "s", "x"]
    # nothing of the Dask frame was computed by its schema (or by the listing, or the hook)
    assert kernel.run("print(len(computed))").stdout.strip() == "0"


def test_first_and_deep_pages_are_pushed_down(engines, mcp):
    rows, info = page(mcp, "nb://frames/rel?limit=10&columns=id%2Cs")
    assert rows[0] == ["id", "s"] and rows[1:3] == [["0", "n0"], ["1", "n1"]] and len(rows) == 11
    assert (
        info["total_rows"] is None
        and info["truncated"]
        and info["next"] == "nb://frames/rel?offset=10&limit=10&columns=id%2Cs"
    )
    rows, info = page(mcp, f"nb://frames/rel?offset={ROWS - 3}&limit=10&columns=id")
    assert rows[1:] == [[str(ROWS - 3)], [str(ROWS - 2)], [str(ROWS - 1)]]
    assert info["total_rows"] == ROWS and not info["truncated"]  # the end was reached: known for free

    rows, info = page(mcp, f"nb://frames/it?offset={ROWS - 2}&limit=5&columns=id,g&format=csv")
    assert rows[1:] == [[str(ROWS - 2), str((ROWS - 2) % 1000)], [str(ROWS - 1), str((ROWS - 1) % 1000)]]
    assert info["engine"] == "ibis"

    rows, info = page(mcp, "nb://frames/plf?limit=3&offset=2")
    assert rows[0] == ["id", "g", "s", "x"] and [r[0] for r in rows[1:]] == ["2003", "3003", "4003"]

    contents = read(mcp, "nb://frames/sdf?limit=10&format=json")
    assert [r["id"] for r in json.loads(contents[0]["text"])] == list(range(10))
    rows, info = page(mcp, "nb://frames/sdf_parquet?offset=19999998&limit=5&columns=s,id")  # a deep Spark page
    assert rows == [["s", "id"], ["n19999998", "19999998"], ["n19999999", "19999999"]] and info["engine"] == "pyspark"
    rows, info = page(mcp, "nb://frames/sdf_parquet?offset=7000001&limit=2&columns=g")
    assert rows == [["g"], ["1"], ["2"]] and info["total_rows"] is None


def test_dask_pages_without_touching_the_failing_last_partition(engines, kernel, mcp):
    rows, info = page(mcp, "nb://frames/ddf?limit=5")
    assert rows[1] == ["0", "1.5"] and info["total_rows"] is None and info["truncated"]
    rows, _ = page(mcp, "nb://frames/ddf?offset=150000&limit=2")  # the second partition
    assert rows[1:] == [["150000", "1.5"], ["150001", "1.5"]]
    assert int(kernel.run("print(len(computed))").stdout) <= 3  # partitions 0 and 1, never all 8
    err = error_of(mcp, "nb://frames/ddf?limit=1&count=true")
    assert "last partition exploded" in err["message"] and "dask" in err["message"], err
    rows, _ = page(mcp, "nb://frames/slowd?limit=2")  # one slow partition
    assert rows == [["a"], ["0"], ["1"]]
    set_timeout(kernel, 3)
    try:  # 80 partitions x 0.5 s: the count is cancelled between partitions
        err = error_of(mcp, "nb://frames/slowd/schema?count=true")
        assert "did not finish within engine_timeout=3s and was cancelled" in err["message"], err
        assert kernel.run("print(6 * 7)", timeout=30).stdout.strip() == "42"
    finally:
        set_timeout(kernel, 25)


def test_spark_slow_udf_pages_quickly_and_count_times_out(engines, kernel, mcp):
    rows, _ = page(mcp, "nb://frames/sdf?limit=10")
    assert [r[0] for r in rows[1:]] == [str(i) for i in range(10)]
    set_timeout(kernel, 4)
    try:
        err = error_of(mcp, "nb://frames/sdf?limit=1&count=true")
        assert "did not finish within engine_timeout=4s" in err["message"] and "cancelled" in err["message"], err
        assert kernel.run("print(6 * 7)", timeout=30).stdout.strip() == "42"  # the kernel stays responsive
        active = kernel.run("print(len(spark.sparkContext.statusTracker().getActiveJobsIds()))", timeout=30)
        assert active.stdout.strip() in ("0", "1")  # the cancelled job group is going away
    finally:
        set_timeout(kernel, 25)
    rows, _ = page(mcp, "nb://frames/sdf?limit=2&columns=twice")
    assert rows == [["twice"], ["0"], ["2"]]


def test_duckdb_query_is_interrupted_on_timeout(engines, kernel, mcp):
    set_timeout(kernel, 3)
    try:
        err = error_of(mcp, "nb://frames/heavy?limit=1")
        assert "did not finish within engine_timeout=3s" in err["message"], err
        assert kernel.run("print(con.execute('SELECT 41 + 1').fetchall()[0][0])", timeout=30).stdout.strip() == "42"
    finally:
        set_timeout(kernel, 25)
    rows, _ = page(mcp, "nb://frames/rel?limit=1&columns=g")
    assert rows == [["g"], ["0"]]


def test_count_on_request(engines, mcp):
    _, info = page(mcp, "nb://frames/rel?limit=1&count=true")
    assert info["total_rows"] == ROWS
    doc = json.loads(read(mcp, "nb://frames/plf/schema?count=true&stats=true&columns=g,x")[0]["text"])
    assert doc["row_count"] == ROWS // 1000 and doc["shape"] == [ROWS // 1000, 4]
    cols = {c["name"]: c for c in doc["columns"]}
    assert cols["g"]["min"] == 3 and cols["g"]["max"] == 3 and "stats_note" in doc
    doc = json.loads(read(mcp, "nb://frames/sdf_parquet/schema?stats=true&columns=g")[0]["text"])
    assert doc["stats_rows"] == 100_000 and doc["columns"][0]["max"] == 999 and doc["row_count"] is None


def test_duckdb_connection_tables_and_views(engines, mcp):
    doc = json.loads(read(mcp, "nb://db/con")[0]["text"])
    tables = {t["name"]: t for t in doc["tables"]}
    assert tables["big"]["kind"] == "view" and tables["small"]["kind"] == "table"
    assert [c["name"] for c in tables["small"]["columns"]] == ["k", "label"]
    rows, info = page(mcp, "nb://db/con/tables/small?offset=998&limit=5")
    assert rows == [["k", "label"], ["998", "v998"], ["999", "v999"]] and info["total_rows"] == 1000
    rows, info = page(mcp, "nb://db/con/tables/big?limit=2&columns=s")
    assert rows == [["s"], ["n0"], ["n1"]] and info["next"] == "nb://db/con/tables/big?offset=2&limit=2&columns=s"
    schema = json.loads(read(mcp, "nb://db/con/tables/small/schema?count=true")[0]["text"])
    assert schema["row_count"] == 1000 and [c["name"] for c in schema["columns"]] == ["k", "label"]
    assert error_of(mcp, "nb://db/con/tables/nope")["code"] == -32002


def test_change_detection_by_identity_without_running_queries(engines, kernel, hub):
    uris = ["nb://frames/ddf", "nb://frames/sdf", "nb://frames/rel", "nb://frames/it", "nb://frames/plf"]

    async def go():
        async with connect(hub, "legacy") as (client, inbox):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                for uri in uris:
                    await client.subscribe_resource(uri)
            before = kernel.run("print(len(computed))").stdout.strip()
            for n in range(3):
                await anyio.to_thread.run_sync(kernel.run, f"unrelated = {n}")
            await anyio.to_thread.run_sync(kernel.run, "ddf = ddf[['a', 'b']]\nplf = plf.select('id', 'g', 's', 'x')")
            await inbox.wait_for(lambda i: "nb://frames/ddf" in i.updated and "nb://frames/plf" in i.updated)
            await anyio.to_thread.run_sync(kernel.run, "unrelated = 9")
            await anyio.to_thread.run_sync(kernel.run, "_m.hub().resources.drain(10)")
            assert sorted(inbox.updated) == ["nb://frames/ddf", "nb://frames/plf"], inbox.updated
            assert kernel.run("print(len(computed))").stdout.strip() == before  # the hook computed nothing

    anyio.run(go)
