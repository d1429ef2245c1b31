"""sort= and where= on table pages against a real kernel, every family of tables: pandas (a
1,000,000-row frame paged deep after a sort, from a cached order, never through sort_values),
polars, pyarrow, numpy, DuckDB relations and tables, polars lazy, Ibis, Dask and Spark; the lazy
engines checked to sort and filter inside their own plan (the plan the page ran, and how many
rows came back); clear errors; a frame changed in place pages its new rows; Hypothesis
properties of the where parser."""

from __future__ import annotations

import json
import shutil
from typing import Any
from urllib.parse import quote

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mcp_notebook.providers.frames import query as frame_query
from mcp_notebook.redact import mask_secrets
from mcp_notebook.types import InvalidResourceParams

BIG = 1_000_000
KEY = "sk-proj-" + "Q" * 30  # a credential-shaped column label

SETUP = f"""
import numpy as np, pandas as pd, polars as pl, pyarrow as pa, duckdb, ibis, dask.dataframe as dd
_rng = np.random.default_rng(7)
sf_big = pd.DataFrame({{'n': np.arange({BIG}), 'price': _rng.integers(0, 1000, {BIG}),
                        'x': np.where(np.arange({BIG}) % 7 == 0, np.nan, _rng.random({BIG}))}})
sf = pd.DataFrame({{
    'n': np.arange(40),
    'p': np.where(np.arange(40) % 5 == 0, np.nan, (np.arange(40) * 7) % 11 + 0.5),
    's': [None if i % 6 == 0 else ('Apple', 'banana', 'Cherry', 'apple pie')[i % 4] for i in range(40)],
    'd': pd.date_range('2024-01-01', periods=40, freq='D'),
    'b': [i % 3 == 0 for i in range(40)],
}})
sf_pl = pl.from_pandas(sf)
sf_pa = pa.Table.from_pandas(sf, preserve_index=False)
sf_lazy = sf_pl.lazy()
sf_np2 = np.arange(60).reshape(20, 3) % 7
sf_rec = np.array([(i, 'k%d' % (i % 4)) for i in range(20)], dtype=[('a', 'i8'), ('k', 'U4')])
sf_np1 = np.array([3.0, np.nan, 1.0, 2.0, 1.0])
sf_lbl = pd.DataFrame({{'{KEY}': [3, 1, 2], 'a': [1, 2, 3]}})
sf_dup = pd.DataFrame([[3, 1, 'x'], [1, 2, 'y'], [2, 0, 'z']], columns=['a', 'a', 'b'])
sf_duck = duckdb.sql('SELECT range AS n, range % 97 AS m, range % 13 = 0 AS flag FROM range(2000000)')
sf_con = duckdb.connect()
sf_con.sql("CREATE TABLE t AS SELECT range AS k, 'v' || (range % 10) AS label FROM range(5000)")
sf_icon = ibis.duckdb.connect()
sf_icon.raw_sql("CREATE VIEW v AS SELECT range AS n, range % 97 AS m FROM range(300000)")
sf_ibis = sf_icon.table('v')
sf_dask = dd.from_pandas(sf, npartitions=4)

import mcp_notebook.providers.frames.engines as _eng
import mcp_notebook.providers.frames.order as _ord
_seen = []
_orig_columns, _orig_spark, _orig_dask, _orig_order = _eng._columns, _eng._spark_rows, _eng._dask_rows, _ord._pandas_order
def _spy_columns(engine, page, names):
    native = page.to_native()
    plan = (native.query('_p', 'EXPLAIN SELECT * FROM _p').fetchall()[0][1] if engine == 'duckdb'
            else native.explain() if engine == 'polars' else str(native.compile()) if engine == 'ibis' else '')
    out = _orig_columns(engine, page, names)
    _seen.append({{'engine': engine, 'plan': plan, 'rows': len(out[0]) if out else 0}})
    return out
def _spy_spark(sdf, names, offset, n, ordered=False):
    out = _orig_spark(sdf, names, offset, n, ordered)
    _seen.append({{'engine': 'pyspark', 'plan': 'ordered' if ordered else '', 'rows': len(out[0]) if out else 0}})
    return out
def _spy_dask(ddf, names, offset, n):
    out = _orig_dask(ddf, names, offset, n)
    _seen.append({{'engine': 'dask', 'plan': '', 'rows': len(out[0]) if out else 0}})
    return out
_orders = []
def _spy_order(column, n, query):
    _orders.append(n)
    return _orig_order(column, n, query)
_eng._columns, _eng._spark_rows, _eng._dask_rows, _ord._pandas_order = _spy_columns, _spy_spark, _spy_dask, _spy_order
"""


@pytest.fixture(scope="module")
def frames(kernel, hub) -> dict[str, Any]:
    kernel.run(SETUP, timeout=300)
    return hub


def read(mcp, uri: str) -> list[dict[str, Any]]:
    reply = mcp.call("resources/read", {"uri": uri})
    assert "result" in reply, reply
    return reply["result"]["contents"]


def page(mcp, uri: str) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    contents = read(mcp, uri)
    info = json.loads(contents[1]["text"])
    assert contents[0]["_meta"]["mcp-notebook/page"] == info
    return json.loads(contents[0]["text"]), info


def error_of(mcp, uri: str) -> dict[str, Any]:
    reply = mcp.call("resources/read", {"uri": uri})
    assert "error" in reply, reply
    return reply["error"]


def kernel_json(kernel, expr: str) -> Any:
    out = kernel.run(f"import json as _j; print(_j.dumps({expr}, default=str))", store_history=False)
    return json.loads(out.stdout)


def q(text: str) -> str:
    return quote(text, safe="")


def spied(kernel) -> list[dict[str, Any]]:
    """The engine fetches since the last call (each with the plan it ran and the rows it returned)."""
    return kernel_json(kernel, "[_seen.pop(0) for _ in range(len(_seen))]")


# -- pandas -------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "sort, by, ascending",
    [
        ("p", ["p"], [True]),
        ("-p", ["p"], [False]),
        ("-s,p", ["s", "p"], [False, True]),
        ("b,-d", ["b", "d"], [True, False]),
    ],
)
def test_pandas_sorts_stably_with_nulls_last(frames, mcp, kernel, sort, by, ascending):
    rows, info = page(mcp, f"nb://frames/sf?format=json&limit=40&sort={q(sort)}")
    want = kernel_json(
        kernel, f"sf.sort_values({by}, ascending={ascending}, kind='stable', na_position='last').n.tolist()"
    )
    assert [r["n"] for r in rows] == want
    assert info["sort"] == sort and info["sortable"] and info["filterable"] and info["total_rows"] == 40


def test_a_deep_page_of_a_million_rows_after_a_sort_comes_from_one_cached_order(frames, mcp, kernel):
    kernel.run(
        "_orders.clear(); _sv = pd.DataFrame.sort_values\ndef _no(*a, **k): raise AssertionError('sorted the frame')\npd.DataFrame.sort_values = _no"
    )
    try:
        rows, info = page(mcp, f"nb://frames/sf_big?format=json&limit=50&offset=654321&sort={q('-price,x')}")
        follow, _ = page(mcp, info["next"])
    finally:
        kernel.run("pd.DataFrame.sort_values = _sv")
    want = kernel_json(
        kernel,
        "sf_big.sort_values(['price', 'x'], ascending=[False, True], kind='stable', na_position='last')"
        ".n.iloc[654321:654421].tolist()",
    )
    assert [r["n"] for r in rows + follow] == want
    assert info["total_rows"] == BIG and info["next"].startswith("nb://frames/sf_big?offset=654371")
    assert "sort=-price%2Cx" in info["next"]
    assert kernel_json(kernel, "_orders") == [BIG]  # two pages, one sort


OPS = [
    ("p >= 5.5", "sf.p >= 5.5"),
    ("p > 5.5", "sf.p > 5.5"),
    ("p <= 3", "sf.p <= 3"),
    ("p < 3", "sf.p < 3"),
    ("p == 7.5", "sf.p == 7.5"),
    ("p != 7.5", "sf.p.notna() & (sf.p != 7.5)"),
    ("p == null", "sf.p.isna()"),
    ("p != null", "sf.p.notna()"),
    ("s ~ APPLE", "sf.s.notna() & sf.s.fillna('').str.lower().str.contains('apple')"),
    ("s == 'Cherry'", "sf.s == 'Cherry'"),
    ('s != "banana"', "sf.s.notna() & (sf.s != 'banana')"),
    ("s < b", "sf.s.notna() & (sf.s.fillna('') < 'b')"),
    ("d >= 2024-02-01", "sf.d >= '2024-02-01'"),
    ("b == true", "sf.b"),
    ("n ~ 3", "sf.n.astype(str).str.contains('3')"),
    (" n >= 10 ;  n < 20 ; p != null ", "(sf.n >= 10) & (sf.n < 20) & sf.p.notna()"),
]


@pytest.mark.parametrize("name", ["sf", "sf_pl", "sf_pa", "sf_lazy", "sf_dask"])
@pytest.mark.parametrize("where, mask", OPS)
def test_every_operator_filters_alike_in_every_library(frames, mcp, kernel, name, where, mask):
    rows, info = page(mcp, f"nb://frames/{name}?format=json&limit=40&columns=n&where={q(where)}")
    want = kernel_json(kernel, f"sf[{mask}].n.tolist()")
    assert [r["n"] for r in rows] == want, (name, where)
    assert info["where"] == frame_query.parse({"where": where}, ["n", "p", "s", "d", "b"]).where_text()
    if name in ("sf", "sf_pl", "sf_pa"):
        assert info["total_rows"] == len(want)


def test_filter_sort_and_paging_follow_next_to_the_end(frames, mcp, kernel):
    where, sort = "p != null; n >= 3", "-p,n"
    uri = f"nb://frames/sf?format=json&limit=4&offset=2&where={q(where)}&sort={q(sort)}"
    got, infos = [], []
    while uri:
        rows, info = page(mcp, uri)
        got += [r["n"] for r in rows]
        infos.append(info)
        uri = info["next"]
    want = kernel_json(
        kernel,
        "sf[sf.p.notna() & (sf.n >= 3)].sort_values(['p', 'n'], ascending=[False, True], kind='stable').n.tolist()",
    )
    assert got == want[2:] and len(infos) == -(-(len(want) - 2) // 4)
    assert all(i["total_rows"] == len(want) and i["where"] == "p != null; n >= 3" and i["sort"] == sort for i in infos)


@pytest.mark.parametrize(
    "query, words",
    [
        ("sort=nope", "sort: no column named 'nope'"),
        ("sort=-", "sort: no column named ''"),
        ("where=" + q("zz == 1"), "where: no column named 'zz'"),
        ("where=" + q("n = 3"), "unknown operator '='"),
        ("where=" + q("n <> 3"), "unknown operator '<>'"),
        ("where=" + q("n => 3"), "unknown operator '=>'"),
        ("where=" + q("n"), "is not 'column OP value'"),
        ("where=" + q("n == abc"), "n holds numbers (int64); 'abc' is not a number"),
        ("where=" + q("s > 3"), "s holds text"),
        ("where=" + q("p > null"), "null compares only with == or !="),
        ("where=" + q("d < soon"), "not an ISO datetime"),
        ("where=" + q("b == 1"), "compare it with true or false"),
        ("where=" + ";".join(["n > 1"] * 17), "at most 16"),
    ],
)
def test_bad_sort_and_where_are_invalid_params_with_the_reason(frames, mcp, kernel, query, words):
    err = error_of(mcp, f"nb://frames/sf?limit=3&{query}")
    assert err["code"] == -32602 and words in err["message"], err
    assert kernel.run("print(len(sf))", store_history=False).stdout.strip() == "40"  # the kernel is fine


def test_a_frame_changed_in_place_pages_its_new_rows(frames, mcp, kernel):
    kernel.run("sf_mut = sf.copy()")
    before, _ = page(mcp, "nb://frames/sf_mut?format=json&limit=2&sort=-n&columns=n")
    again, _ = page(mcp, "nb://frames/sf_mut?format=json&limit=2&sort=-n&columns=n")  # from the cache
    kernel.run("sf_mut.loc[0, 'n'] = 10**9\nsf_mut.loc[39, 'n'] = -1")  # same shape, same block manager
    after, _ = page(mcp, "nb://frames/sf_mut?format=json&limit=2&sort=-n&columns=n")
    assert before == again == [{"n": 39}, {"n": 38}] and after == [{"n": 10**9}, {"n": 38}]


def test_masked_and_repeated_labels_are_named_as_in_columns(frames, mcp):
    masked = mask_secrets(KEY)
    rows, info = page(mcp, f"nb://frames/sf_lbl?format=json&sort={q(masked)}&where={q(masked + ' >= 2')}")
    assert [r["a"] for r in rows] == [3, 1] and KEY not in json.dumps(info) and info["sort"] == masked
    err = error_of(mcp, "nb://frames/sf_lbl?sort=nope")
    assert KEY not in err["message"] and masked in err["message"]
    rows, _ = page(mcp, "nb://frames/sf_dup?format=json&sort=a")  # each column labelled a, in order
    assert [r["b"] for r in rows] == ["y", "z", "x"]
    rows, _ = page(mcp, f"nb://frames/sf_dup?format=json&where={q('a >= 1')}")  # every column labelled a
    assert [r["b"] for r in rows] == ["x", "y"]


def test_schemas_say_what_sorts_and_filters(frames, mcp):
    for name, flags in {
        "sf": (True, True),
        "sf_np2": (True, True),
        "sf_duck": (True, True),
        "sf_dask": (False, True),
    }.items():
        doc = json.loads(read(mcp, f"nb://frames/{name}/schema")[0]["text"])
        assert (doc["sortable"], doc["filterable"]) == flags, name
    _rows, info = page(mcp, "nb://frames/sf_dask?limit=1&format=json")
    assert (info["sortable"], info["filterable"]) == (False, True)


# -- numpy, polars, pyarrow -----------------------------------------------------------------------------
def test_numpy_arrays_sort_and_filter_by_their_column_labels(frames, mcp, kernel):
    rows, info = page(mcp, f"nb://frames/sf_np2?format=json&limit=5&sort={q('-1,0')}&where={q('2 != 0')}")
    kernel.run("_k = sf_np2[sf_np2[:, 2] != 0]\n_k = _k[np.lexsort((_k[:, 0], -_k[:, 1]))]", store_history=False)
    want = kernel_json(kernel, "_k[:5].tolist()")
    assert [[r["0"], r["1"], r["2"]] for r in rows] == want and info["total_rows"] == kernel_json(kernel, "len(_k)")
    rows, _ = page(mcp, f"nb://frames/sf_rec?format=json&sort={q('-k,a')}&where={q('k ~ K1; a > 4')}")
    assert [(r["a"], r["k"]) for r in rows] == [(5, "k1"), (9, "k1"), (13, "k1"), (17, "k1")]
    rows, _ = page(mcp, "nb://frames/sf_np1?format=json&sort=value")
    assert [r["value"] for r in rows] == [1.0, 1.0, 2.0, 3.0, None]


@pytest.mark.parametrize("name", ["sf_pl", "sf_pa"])
def test_polars_and_pyarrow_sort_stably_with_nulls_last(frames, mcp, kernel, name):
    rows, info = page(mcp, f"nb://frames/{name}?format=json&limit=40&sort={q('-s,p')}&columns=n")
    want = kernel_json(
        kernel, "sf.sort_values(['s', 'p'], ascending=[False, True], kind='stable', na_position='last').n.tolist()"
    )
    assert [r["n"] for r in rows] == want and info["sortable"]


# -- lazy engines: the sort and filter run in the engine's plan -------------------------------------------
def test_duckdb_sorts_filters_and_pages_in_its_plan(frames, mcp, kernel):
    spied(kernel)
    uri = (
        f"nb://frames/sf_duck?format=json&limit=3&offset=40000&sort={q('-m,n')}&where={q('flag == false; n < 1500000')}"
    )
    rows, info = page(mcp, uri)
    want = kernel_json(
        kernel,
        "sf_duck.filter('NOT flag AND n < 1500000').order('m DESC, n').limit(3, 40000).fetchnumpy()['n'].tolist()",
    )
    assert (
        [r["n"] for r in rows] == want and info["total_rows"] is None and info["where"] == "flag == false; n < 1500000"
    )
    (fetch,) = spied(kernel)
    plan = fetch["plan"].upper()
    assert fetch["rows"] == 4 and ("ORDER" in plan or "TOP_N" in plan) and "FILTER" in plan and "40000" in plan, plan
    _rows, counted = page(mcp, uri + "&count=true")
    assert counted["total_rows"] == sum(1 for n in range(1500000) if n % 13)


def test_polars_lazy_and_ibis_sort_in_their_plans(frames, mcp, kernel):
    spied(kernel)
    rows, _ = page(mcp, f"nb://frames/sf_lazy?format=json&limit=3&offset=5&sort={q('-p,n')}&where={q('n > 4')}")
    want = kernel_json(
        kernel,
        "sf[sf.n > 4].sort_values(['p', 'n'], ascending=[False, True], kind='stable', na_position='last').n.iloc[5:8].tolist()",
    )
    assert [r["n"] for r in rows] == want
    rows, _ = page(mcp, f"nb://frames/sf_ibis?format=json&limit=3&offset=1000&sort={q('m,-n')}&where={q('n >= 100')}")
    want = sorted(range(100, 300000), key=lambda n: (n % 97, -n))[1000:1003]
    assert [r["n"] for r in rows] == want
    polars, ibis = spied(kernel)
    assert "SORT" in polars["plan"] and "slice" in polars["plan"].lower() and polars["rows"] == 4
    sql = ibis["plan"].upper()
    assert "ORDER BY" in sql and "WHERE" in sql and "OFFSET" in sql and ibis["rows"] == 4, sql


def test_a_duckdb_table_sorts_and_filters_through_nb_db(frames, mcp):
    uri = f"nb://db/sf_con/tables/t?format=json&limit=3&sort={q('-label,k')}&where={q('k < 100; label ~ V3')}"
    rows, info = page(mcp, uri)
    assert rows == [{"k": 3, "label": "v3"}, {"k": 13, "label": "v3"}, {"k": 23, "label": "v3"}]
    assert info["next"].startswith("nb://db/sf_con/tables/t?offset=3") and "where=k%20%3C%20100" in info["next"]
    doc = json.loads(read(mcp, "nb://db/sf_con/tables/t/schema")[0]["text"])
    assert doc["sortable"] and doc["filterable"]


def test_dask_filters_per_partition_but_does_not_sort(frames, mcp, kernel):
    spied(kernel)
    rows, info = page(mcp, f"nb://frames/sf_dask?format=json&limit=3&offset=2&where={q('s ~ apple')}")
    want = kernel_json(kernel, "sf[sf.s.fillna('').str.lower().str.contains('apple')].n.iloc[2:5].tolist()")
    assert [r["n"] for r in rows] == want and info["total_rows"] is None
    assert sum(f["rows"] for f in spied(kernel)) == 4  # limit + 1: enough to know more exist
    err = error_of(mcp, "nb://frames/sf_dask?sort=n")
    assert err["code"] == -32602 and "full shuffle" in err["message"]


@pytest.fixture(scope="module")
def spark(frames, kernel):
    pytest.importorskip("pyspark", reason="the engines extra is not installed")
    if shutil.which("java") is None:
        pytest.skip("Spark needs a Java runtime (java on PATH)")
    kernel.run(
        "import os, sys\nos.environ['PYSPARK_PYTHON'] = sys.executable\n"
        "from pyspark.sql import SparkSession, functions as F\n"
        "spark = (SparkSession.builder.master('local[2]').config('spark.ui.enabled', 'false')"
        ".config('spark.sql.shuffle.partitions', '2').getOrCreate())\n"
        "spark.sparkContext.setLogLevel('ERROR')\n"
        "sf_spark = spark.range(0, 200000, numPartitions=8).withColumn('m', F.col('id') % 97)",
        timeout=300,
    )
    return frames


def test_spark_sorts_and_filters_in_its_plan(spark, mcp, kernel):
    spied(kernel)
    rows, info = page(
        mcp, f"nb://frames/sf_spark?format=json&limit=3&offset=5000&sort={q('-m,id')}&where={q('id >= 10')}"
    )
    want = sorted((n for n in range(10, 200000)), key=lambda n: (-(n % 97), n))[5000:5003]
    assert [r["id"] for r in rows] == want and info["engine"] == "pyspark" and info["sortable"]
    rows, _ = page(mcp, f"nb://frames/sf_spark?format=json&limit=2&offset=100&where={q('m == 5')}")
    assert [r["id"] for r in rows] == [5 + 97 * 100, 5 + 97 * 101]
    fetches = spied(kernel)
    assert [(f["plan"], f["rows"]) for f in fetches] == [("ordered", 4), ("", 3)]


# -- the where parser ------------------------------------------------------------------------------------------
LABELS = ["a", "b c", "n", "x<y", "-d"]
_values = st.one_of(
    st.integers(-(10**6), 10**6).map(str),
    st.sampled_from(["null", "'quoted text'", '"x"', "word", "1.5", "-2e3", "''"]),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(LABELS), st.sampled_from(frame_query.OPS), _values), min_size=1, max_size=5))
def test_where_round_trips_through_its_normal_form(conditions):
    conditions = [(c, op, v) for c, op, v in conditions if v != "null" or op in ("==", "!=")]
    if not conditions:
        return
    text = " ; ".join(f"{c} {op}{v}" for c, op, v in conditions)
    query = frame_query.parse({"where": text}, LABELS)
    assert query is not None and [(c.label, c.op) for c in query.where] == [(c, op) for c, op, _ in conditions]
    again = frame_query.parse({"where": query.where_text(), "sort": query.sort_text()}, LABELS)
    assert again == query


@settings(max_examples=500, deadline=None)
@given(st.text(max_size=80), st.text(max_size=40))
def test_junk_is_refused_only_as_invalid_params(where, sort):
    try:
        query = frame_query.parse({"sort": sort, "where": where}, LABELS)
    except InvalidResourceParams as exc:
        assert str(exc)
        return
    if query is not None:
        assert all(k.positions for k in query.sort) and all(c.op in frame_query.OPS for c in query.where)
