"""Sort and filter of table pages (sort=, where=) against a real kernel: pandas, polars, pyarrow,
DuckDB, polars lazy and Dask, with paging through the sorted and filtered rows, clear errors for
bad input, and a property test of the where parser."""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import quote

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mcp_notebook.providers.frames import query as frame_query
from mcp_notebook.types import InvalidResourceParams

N = 20_000


@pytest.fixture(scope="module")
def frames(kernel, hub) -> dict[str, Any]:
    kernel.run(
        "import numpy as np, pandas as pd\n"
        f"q_pd = pd.DataFrame({{'n': np.arange({N}), 'm': np.arange({N}) % 97,"
        f" 'x': np.where(np.arange({N}) % 5 == 0, np.nan, np.arange({N}) % 13.0), 'w': ['w%d' % (i % 10) for i in range({N})]}})"
    )
    kernel.run(
        "import polars as pl, pyarrow as pa\nq_pl = pl.from_pandas(q_pd)\nq_pa = pa.Table.from_pandas(q_pd)\nq_lazy = q_pl.lazy()"
    )
    kernel.run("import duckdb\nq_duck = duckdb.sql('select range as n, range % 97 as m from range(1000000)')")
    kernel.run("import dask.dataframe as dd\nq_dask = dd.from_pandas(q_pd, npartitions=4)")
    return hub


def page(mcp, uri: str) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    contents = mcp.result("resources/read", {"uri": uri})["contents"]
    return json.loads(contents[0]["text"]), contents[0]["_meta"]["mcp-notebook/page"]


def expected(kernel, code: str) -> list[int]:
    return json.loads(kernel.run(f"import json as _j; print(_j.dumps({code}))", store_history=False).stdout)


@pytest.mark.parametrize("name", ["q_pd", "q_pl", "q_pa", "q_lazy"])
def test_sort_and_filter_in_memory_and_polars_lazy(frames, mcp, kernel, name):
    rows, info = page(mcp, f"nb://frames/{name}?format=json&limit=5&sort={quote('-m,n')}")
    assert [(r["m"], r["n"]) for r in rows] == [(96, 96), (96, 193), (96, 290), (96, 387), (96, 484)]
    assert info["sortable"] and info["filterable"] and info["sort"] == "-m,n"
    rows, info = page(mcp, f"nb://frames/{name}?format=json&limit=4&offset=3&where={quote('x >= 12; w ~ W7')}&sort=-n")
    want = expected(kernel, "q_pd[(q_pd.x >= 12) & (q_pd.w == 'w7')].sort_values('n', ascending=False).n.tolist()")
    assert [r["n"] for r in rows] == want[3:7]
    if name != "q_lazy":
        assert info["total_rows"] == len(want)
    assert "where=" in info["next"] and "sort=-n" in info["next"]
    follow, _ = page(mcp, info["next"])
    assert [r["n"] for r in follow] == want[7:11]
    nulls, info = page(mcp, f"nb://frames/{name}?format=json&limit=3&where={quote('x == null')}&sort=x")
    assert [r["n"] for r in nulls] == [0, 5, 10]


def test_sorting_puts_nulls_last_both_ways(frames, mcp):
    for spec in ("x", "-x"):
        rows, _ = page(mcp, f"nb://frames/q_pd?format=json&limit=5&offset={N - 5}&sort={spec}")
        assert all(r["x"] is None for r in rows)


def test_a_lazy_duckdb_relation_sorts_and_filters_in_its_plan(frames, mcp):
    rows, info = page(mcp, f"nb://frames/q_duck?format=json&limit=3&offset=500000&sort={quote('-m,n')}")
    assert info["total_rows"] is None and info["sortable"]
    # 1,000,000 rows, m = n % 97: each m from 96 down holds 10,309 or 10,310 rows.
    counts = [len(range(m, 1_000_000, 97)) for m in range(96, -1, -1)]
    seen, m = 0, 96
    while seen + counts[96 - m] <= 500_000:
        seen, m = seen + counts[96 - m], m - 1
    first = m + 97 * (500_000 - seen)
    assert rows == [{"n": first, "m": m}, {"n": first + 97, "m": m}, {"n": first + 194, "m": m}]
    rows, info = page(mcp, f"nb://frames/q_duck?format=json&limit=3&offset=10&where={quote('m < 3')}")
    assert [r["n"] for r in rows] == [292, 293, 388]
    _counted, info = page(mcp, f"nb://frames/q_duck?format=json&limit=1&where={quote('m == 5')}&count=true")
    assert info["total_rows"] == len(range(5, 1_000_000, 97))


def test_dask_filters_but_does_not_sort(frames, mcp):
    rows, info = page(mcp, f"nb://frames/q_dask?format=json&limit=3&where={quote('m == 3')}")
    assert [r["n"] for r in rows] == [3, 100, 197] and info["sortable"] is False and info["filterable"] is True
    err = mcp.call("resources/read", {"uri": "nb://frames/q_dask?limit=3&sort=n"})["error"]
    assert err["code"] == -32602 and "cannot be sorted" in err["message"]


@pytest.mark.parametrize(
    "query, words",
    [
        ("sort=nope", "no column named 'nope'"),
        ("where=n%3D%3Dabc", "not a number"),
        ("where=w%3E3", "quote the value"),
        ("where=n", "is not 'column OP value'"),
        ("where=x%3Enull", "null compares only"),
    ],
)
def test_bad_sort_and_where_get_clear_errors(frames, mcp, kernel, query, words):
    err = mcp.call("resources/read", {"uri": f"nb://frames/q_pd?limit=3&{query}"})["error"]
    assert err["code"] == -32602 and words in err["message"]
    assert kernel.run("print(len(q_pd))", store_history=False).stdout.strip() == str(N)


def test_a_changed_frame_pages_its_new_rows(frames, mcp, kernel):
    kernel.run("q_mut = q_pd.copy()")
    before, _ = page(mcp, "nb://frames/q_mut?format=json&limit=1&sort=-n")
    kernel.run("q_mut.loc[0, 'n'] = 10**9")
    after, _ = page(mcp, "nb://frames/q_mut?format=json&limit=1&sort=-n")
    assert before[0]["n"] == N - 1 and after[0]["n"] == 10**9


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=60), st.text(max_size=60))
def test_the_parser_accepts_or_says_why(sort, where):
    try:
        query = frame_query.parse({"sort": sort, "where": where}, ["a", "b c", "n"])
    except InvalidResourceParams as exc:
        assert str(exc)
        return
    if query is not None:
        assert all(k.label in ("a", "b c", "n") for k in query.sort)
        assert all(c.label in ("a", "b c", "n") and c.op in frame_query.OPS for c in query.where)
