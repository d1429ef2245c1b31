"""nb://frames: pages and schemas of pandas, polars, pyarrow and numpy values in a real kernel."""

from __future__ import annotations

import csv
import io
import json
import time
import warnings

import anyio
import pytest
from sdk import connect

PAGE = "nb://frames/{name}{?offset,limit,columns,format,count,sort,where}"
SCHEMA = "nb://frames/{name}/schema"

SETUP = """
import numpy as np, pandas as pd, polars as pl, pyarrow as pa
fr = pd.DataFrame({
    "a": [1, 2, 3, 4, 5],
    "b": ["x", "y|z", "line\\nbreak", None, "e"],
    "f": [0.5, None, 2.5, 3.5, 4.5],
})
fr_series = pd.Series([1.5, 2.5, None], name="price", index=pd.Index(["p", "q", "r"], name="key"))
fr_multi = pd.DataFrame(
    {"v": range(6)}, index=pd.MultiIndex.from_product([["east", "west"], [1, 2, 3]], names=["region", "n"])
)
fr_cat = pd.DataFrame({
    "c": pd.Categorical(["lo", "hi", "lo", None], categories=["lo", "hi"], ordered=True),
    "t": pd.to_datetime(["2021-01-01", "2021-06-30", None, "2020-12-31"]),
})
fr_pl = pl.DataFrame({"k": [1, 2, 3], "s": ["u", "v", None], "e": pl.Series(["x", "y", "x"], dtype=pl.Enum(["x", "y"]))})
fr_pls = pl.Series("w", [10, 20, 30])
fr_lazy = pl.LazyFrame({"a": [1, 2]}).with_columns(b=pl.col("a") * 2)
fr_pa = pa.table({"n": [1, 2, None], "d": pa.array(["p", "q", "p"]).dictionary_encode()})
fr_rb = pa.record_batch({"n": [7, 8]})
fr_np2 = np.arange(12.0).reshape(4, 3)
fr_np1 = np.array([3, 1, 2])
fr_np3 = np.arange(24).reshape(2, 3, 4)
fr_scalar = np.float64(1.0)
fr_list = [1, 2]
"""


def read(mcp, uri):
    reply = mcp.call("resources/read", {"uri": uri})
    assert "result" in reply, reply
    return reply["result"]["contents"]


def page(mcp, uri):
    """(data item, page info) of a page read."""
    contents = read(mcp, uri)
    assert len(contents) == 2
    info = json.loads(contents[1]["text"])
    assert contents[1]["mimeType"] == "application/json"
    assert contents[0]["_meta"]["mcp-notebook/page"] == info
    return contents[0], info


def rows_of(item):
    return list(csv.reader(io.StringIO(item["text"])))


def error_of(mcp, uri):
    reply = mcp.call("resources/read", {"uri": uri})
    assert "error" in reply, reply
    return reply["error"]


@pytest.fixture(scope="module")
def frames(kernel, hub):
    kernel.run(SETUP)
    return hub


def test_csv_page_with_paging(frames, mcp):
    item, info = page(mcp, "nb://frames/fr")
    assert item["mimeType"] == "text/csv"
    rows = rows_of(item)
    assert rows[0] == ["a", "b", "f"]
    assert rows[1] == ["1", "x", "0.5"]
    assert rows[2] == ["2", "y|z", ""]  # null is an empty cell
    assert rows[3][1] == "line\nbreak"
    assert info["total_rows"] == 5 and info["rows"] == 5 and info["truncated"] is False and info["next"] is None

    item, info = page(mcp, "nb://frames/fr?offset=1&limit=2&columns=f,a")
    assert rows_of(item) == [["f", "a"], ["", "2"], ["2.5", "3"]]
    assert info["truncated"] is True and info["rows"] == 2
    nxt = info["next"]
    assert nxt.startswith("nb://frames/fr?") and "offset=3" in nxt and "limit=2" in nxt and "columns=f%2Ca" in nxt
    item, info = page(mcp, nxt)
    assert rows_of(item) == [["f", "a"], ["3.5", "4"], ["4.5", "5"]]
    assert info["truncated"] is False and info["next"] is None


def test_json_and_markdown_pages(frames, mcp):
    item, info = page(mcp, "nb://frames/fr?format=json&limit=3")
    assert item["mimeType"] == "application/json"
    records = json.loads(item["text"])
    assert records[0] == {"a": 1, "b": "x", "f": 0.5}
    assert records[1] == {"a": 2, "b": "y|z", "f": None}
    assert info["format"] == "json" and "format=json" in info["next"]

    item, _ = page(mcp, "nb://frames/fr?format=markdown&columns=b&limit=3")
    assert item["mimeType"] == "text/markdown"
    lines = item["text"].splitlines()
    assert lines[0] == "| b |" and lines[1] == "|---|"
    assert lines[3] == "| y\\|z |" and lines[4] == "| line break |"


def test_page_cut_by_size_has_marker_and_next(frames, kernel, mcp):
    kernel.run("fr_wide = pd.DataFrame({'s': ['w' * 300] * 2000})")
    item, info = page(mcp, "nb://frames/fr_wide?limit=1000")
    assert len(item["text"]) <= 60_000
    assert info["cut_by_size"] is True and info["truncated"] is True
    assert 0 < info["rows"] < 1000 and f"offset={info['rows']}" in info["next"]
    _, info2 = page(mcp, info["next"])
    assert info2["offset"] == info["rows"]


@pytest.mark.parametrize(
    ("uri", "fragment"),
    [
        ("nb://frames/fr?columns=a,nope", "valid columns: ['a', 'b', 'f']"),
        ("nb://frames/fr?format=xml", "csv, json, markdown"),
        ("nb://frames/fr?limit=10001", "at most 10000"),
        ("nb://frames/fr?offset=-1", "must not be negative"),
        ("nb://frames/fr?limit=ten", "whole number"),
        ("nb://frames/fr?shuffle=a", "unknown parameter"),
        ("nb://frames/fr?sort=zz", "no column named"),
        ("nb://frames/fr/schema?columns=zz", "unknown column"),
        ("nb://frames/fr_lazy?count=maybe", "count must be true or false"),
    ],
)
def test_bad_params_are_invalid_params(frames, mcp, uri, fragment):
    err = error_of(mcp, uri)
    assert err["code"] == -32602
    assert fragment in err["message"]


def test_not_found(frames, mcp):
    for uri in ("nb://frames/no_such_frame", "nb://frames/fr_list", "nb://frames/fr_scalar", "nb://frames/fr/extra"):
        err = error_of(mcp, uri)
        assert err["code"] == -32002, (uri, err)


def test_pandas_schema(frames, mcp):
    doc = json.loads(read(mcp, "nb://frames/fr/schema")[0]["text"])
    assert doc["shape"] == [5, 3] and doc["type"] == "pandas.DataFrame" and doc["page"] == "nb://frames/fr"
    cols = {c["name"]: c for c in doc["columns"]}
    assert cols["a"]["dtype"] == "int64" and cols["a"]["min"] == 1 and cols["a"]["max"] == 5 and cols["a"]["mean"] == 3
    assert cols["f"]["nulls"] == 1 and cols["b"]["nulls"] == 1
    assert cols["b"]["examples"][:2] == ["x", "y|z"]
    assert doc["index"]["type"] == "RangeIndex" and doc["index"]["stop"] == 5
    assert "stats_note" not in doc

    doc = json.loads(read(mcp, "nb://frames/fr_cat/schema")[0]["text"])
    c, t = doc["columns"]
    assert c["categories"] == ["lo", "hi"] and c["ordered"] is True and c["n_categories"] == 2 and c["nulls"] == 1
    assert t["min"].startswith("2020-12-31") and t["max"].startswith("2021-06-30") and t["nulls"] == 1


def test_series_and_multiindex(frames, mcp):
    item, info = page(mcp, "nb://frames/fr_series")
    assert rows_of(item) == [["key", "price"], ["p", "1.5"], ["q", "2.5"], ["r", ""]]
    assert info["type"] == "pandas.Series"
    doc = json.loads(read(mcp, "nb://frames/fr_series/schema")[0]["text"])
    assert doc["index"]["name"] == "key" and doc["columns"][0]["name"] == "price" and doc["columns"][0]["nulls"] == 1

    item, _ = page(mcp, "nb://frames/fr_multi?format=json&offset=3&limit=1")
    assert json.loads(item["text"]) == [{"region": "west", "n": 1, "v": 3}]
    doc = json.loads(read(mcp, "nb://frames/fr_multi/schema")[0]["text"])
    assert doc["index"]["type"] == "MultiIndex" and doc["index"]["names"] == ["region", "n"]
    assert doc["index"]["levels"][0]["values"] == ["east", "west"] and doc["index"]["levels"][1]["size"] == 3


def test_polars_pyarrow(frames, mcp):
    item, info = page(mcp, "nb://frames/fr_pl?format=json")
    assert json.loads(item["text"])[2] == {"k": 3, "s": None, "e": "x"}
    assert info["type"] == "polars.DataFrame"
    doc = json.loads(read(mcp, "nb://frames/fr_pl/schema")[0]["text"])
    cols = {c["name"]: c for c in doc["columns"]}
    assert cols["k"]["mean"] == 2 and cols["s"]["nulls"] == 1 and cols["e"]["categories"] == ["x", "y"]

    item, _ = page(mcp, "nb://frames/fr_pls?offset=1")
    assert rows_of(item) == [["w"], ["20"], ["30"]]

    doc = json.loads(read(mcp, "nb://frames/fr_lazy/schema")[0]["text"])
    assert doc["type"] == "polars.LazyFrame" and doc["shape"] == [None, 2]
    assert [c["name"] for c in doc["columns"]] == ["a", "b"]
    item, info = page(mcp, "nb://frames/fr_lazy?offset=1")  # a LazyFrame pages lazily (slice pushed down)
    assert rows_of(item) == [["a", "b"], ["2", "4"]] and info["engine"] == "polars" and info["total_rows"] == 2

    item, info = page(mcp, "nb://frames/fr_pa")
    assert rows_of(item) == [["n", "d"], ["1", "p"], ["2", "q"], ["", "p"]]
    doc = json.loads(read(mcp, "nb://frames/fr_pa/schema")[0]["text"])
    cols = {c["name"]: c for c in doc["columns"]}
    assert cols["n"]["nulls"] == 1 and cols["n"]["max"] == 2 and cols["d"]["categories"] == ["p", "q"]

    item, info = page(mcp, "nb://frames/fr_rb")
    assert rows_of(item) == [["n"], ["7"], ["8"]] and info["type"] == "pyarrow.RecordBatch"


def test_numpy(frames, mcp):
    item, info = page(mcp, "nb://frames/fr_np2?columns=0,2&offset=2")
    assert rows_of(item) == [["0", "2"], ["6.0", "8.0"], ["9.0", "11.0"]]
    assert info["total_columns"] == 3
    item, _ = page(mcp, "nb://frames/fr_np1")
    assert rows_of(item) == [["value"], ["3"], ["1"], ["2"]]
    item, info = page(mcp, "nb://frames/fr_np3?offset=4&limit=1")
    assert rows_of(item) == [["i0", "i1", "0", "1", "2", "3"], ["1", "1", "16", "17", "18", "19"]]
    assert info["total_rows"] == 6
    doc = json.loads(read(mcp, "nb://frames/fr_np3/schema")[0]["text"])
    assert doc["array_shape"] == [2, 3, 4] and doc["shape"] == [6, 4] and doc["columns"][3]["max"] == 23


def test_odd_values_render_bounded(frames, kernel, mcp):
    kernel.run(
        "class Boom:\n"
        "    def __repr__(self): raise RuntimeError('no repr')\n"
        "class Chatty:\n"
        "    def __repr__(self): return 'C' * 100_000\n"
        "fr_odd = pd.DataFrame({'o': [Boom(), Chatty(), {'k': list(range(1000))}, b'\\x00\\x01' * 5000, 3, 'x' * 50_000]})"
    )
    item, info = page(mcp, "nb://frames/fr_odd?format=json")
    records = json.loads(item["text"])
    assert "repr failed: RuntimeError" in records[0]["o"]
    assert records[1]["o"].startswith("CCC") and records[1]["o"].endswith("…") and len(records[1]["o"]) <= 1000
    assert records[2]["o"]["k"][-1].endswith("more")  # nested JSON kept, list cut
    assert records[3]["o"].startswith("b'\\x00\\x01") and len(records[3]["o"]) <= 1000
    assert records[4]["o"] == 3 and len(records[5]["o"]) <= 1000
    assert info["values_truncated"] >= 3
    doc = json.loads(read(mcp, "nb://frames/fr_odd/schema")[0]["text"])
    assert doc["columns"][0]["dtype"] == "object" and len(doc["columns"][0]["examples"]) == 5


def test_list_templates_completion_and_vars_links(frames, mcp):
    listed = {r["uri"]: r for r in mcp.result("resources/list")["resources"]}
    assert listed["nb://frames/fr"]["mimeType"] == "text/csv"
    assert "5 rows" in listed["nb://frames/fr"]["description"]
    assert "lazy" in listed["nb://frames/fr_lazy"]["title"]
    assert "nb://frames/fr_list" not in listed and "nb://frames/fr_scalar" not in listed
    templates = {t["uriTemplate"] for t in mcp.result("resources/templates/list")["resourceTemplates"]}
    assert {PAGE, SCHEMA} <= templates

    def complete(template, name, value, context=None):
        params = {"ref": {"type": "ref/resource", "uri": template}, "argument": {"name": name, "value": value}}
        if context:
            params["context"] = {"arguments": context}
        return mcp.result("completion/complete", params)["completion"]["values"]

    assert "fr_pl" in complete(PAGE, "name", "fr_p") and "fr_list" not in complete(PAGE, "name", "fr")
    assert complete(SCHEMA, "name", "fr_mu") == ["fr_multi"]
    assert complete(PAGE, "columns", "", {"name": "fr"}) == ["a", "b", "f"]
    assert complete(PAGE, "columns", "a,", {"name": "fr"}) == ["a,b", "a,f"]
    assert complete(PAGE, "format", "m") == ["markdown"]

    index = json.loads(read(mcp, "nb://vars")[0]["text"])
    rows = {r["name"]: r for r in index["variables"]}
    assert rows["fr"]["frame"] == "nb://frames/fr" and rows["fr"]["schema"] == "nb://frames/fr/schema"
    assert "frame" not in rows["fr_list"]
    assert rows["fr_lazy"]["frame"] == "nb://frames/fr_lazy" and rows["fr_lazy"]["engine"] == "polars"


def test_hidden_and_secret_frames_not_readable(frames, kernel, mcp):
    kernel.run(
        "api_token_frame = pd.DataFrame({'x': [1]})\n"
        "_private_frame = pd.DataFrame({'x': [1]})\n"
        "user_hidden_frame = pd.DataFrame({'x': [1]})\n"
        "import mcp_notebook; mcp_notebook.hub().variables.set_hidden('user_hidden_frame', True)"
    )
    listed = {r["uri"] for r in mcp.result("resources/list")["resources"]}
    for name in ("api_token_frame", "_private_frame", "user_hidden_frame"):
        assert f"nb://frames/{name}" not in listed
        for uri in (f"nb://frames/{name}", f"nb://frames/{name}/schema", f"nb://frames/{name}?format=json"):
            assert error_of(mcp, uri)["code"] == -32002
    values = mcp.result(
        "completion/complete",
        {"ref": {"type": "ref/resource", "uri": PAGE}, "argument": {"name": "name", "value": ""}},
    )["completion"]["values"]
    assert not {"api_token_frame", "_private_frame", "user_hidden_frame"} & set(values)
    cols = mcp.result(
        "completion/complete",
        {
            "ref": {"type": "ref/resource", "uri": PAGE},
            "argument": {"name": "columns", "value": ""},
            "context": {"arguments": {"name": "api_token_frame"}},
        },
    )["completion"]["values"]
    assert cols == []


def test_ten_million_rows(frames, kernel, mcp):
    kernel.run(
        "_rng = np.random.default_rng(0)\n"
        "fr_big = pd.DataFrame({'i': np.arange(10_000_000), 'x': _rng.random(10_000_000),\n"
        "    'g': pd.Categorical(_rng.choice(['a', 'b', 'c'], 10_000_000)),\n"
        "    't': pd.date_range('2000-01-01', periods=10_000_000, freq='s')})",
        timeout=120,
    )
    timings = {}
    for label, uri in (
        ("page 1000 rows csv", "nb://frames/fr_big?offset=9000000&limit=1000"),
        ("page 1000 rows json", "nb://frames/fr_big?offset=9000000&limit=1000&format=json"),
        ("schema", "nb://frames/fr_big/schema"),
    ):
        start = time.perf_counter()
        contents = read(mcp, uri)
        timings[label] = time.perf_counter() - start
        if label.startswith("page"):
            info = json.loads(contents[1]["text"])
            assert info["total_rows"] == 10_000_000 and info["rows"] > 0 and info["truncated"] is True
            first = json.loads(contents[0]["text"])[0] if "json" in label else rows_of(contents[0])[1]
            assert (first["i"] if isinstance(first, dict) else int(first[0])) == 9_000_000
        else:
            doc = json.loads(contents[0]["text"])
            assert doc["shape"] == [10_000_000, 4] and doc["stats_rows"] == 1_000_000
            assert "first 1,000,000 of 10,000,000 rows" in doc["stats_note"]
            assert {c["name"]: c for c in doc["columns"]}["g"]["categories"] == ["a", "b", "c"]
    print("\n10M-row frame, read times over HTTP:", {k: f"{v * 1000:.1f} ms" for k, v in timings.items()})
    kernel.run("del fr_big")


def test_subscription_notifies_after_in_place_change_only(frames, kernel, hub):
    kernel.run("sub_df = pd.DataFrame({'a': range(50_000), 'b': 1.0})\nsub_arr = np.zeros((1000, 4))\nunrelated = 0")

    async def go():
        async with connect(hub, "legacy") as (client, inbox):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                await client.subscribe_resource("nb://frames/sub_df")
                await client.subscribe_resource("nb://frames/sub_arr/schema")

            def count(uri):
                return inbox.updated.count(uri)

            await anyio.to_thread.run_sync(kernel.run, "unrelated = 1")
            await anyio.to_thread.run_sync(kernel.run, "sub_df.loc[0, 'a'] = 99")  # same shape, same columns
            await inbox.wait_for(lambda i: count("nb://frames/sub_df") >= 1)
            assert count("nb://frames/sub_df") == 1 and count("nb://frames/sub_arr/schema") == 0

            await anyio.to_thread.run_sync(kernel.run, "sub_df['new'] = 5")
            await inbox.wait_for(lambda i: count("nb://frames/sub_df") >= 2)

            await anyio.to_thread.run_sync(kernel.run, "unrelated = 2")
            await anyio.to_thread.run_sync(kernel.run, "sub_arr[-1, 3] = 7.0")  # in place, last row (sampled)
            await inbox.wait_for(lambda i: count("nb://frames/sub_arr/schema") >= 1)
            assert count("nb://frames/sub_df") == 2 and count("nb://frames/sub_arr/schema") == 1

            read = await client.read_resource("nb://frames/sub_df?limit=1&format=json")
            assert json.loads(read.contents[0].text) == [{"a": 99, "b": 1.0, "new": 5}]

    anyio.run(go)


@pytest.mark.parametrize("mode", ["auto", "legacy"])
def test_sdk_client_reads_a_page(frames, mode):
    async def go():
        async with connect(frames, mode) as (client, _):
            read = await client.read_resource("nb://frames/fr?limit=2&columns=a")
            assert [c.mime_type for c in read.contents] == ["text/csv", "application/json"]
            assert read.contents[0].text.splitlines() == ["a", "1", "2"]
            info = json.loads(read.contents[1].text)
            assert info["next"] == "nb://frames/fr?offset=2&limit=2&columns=a"
            assert read.contents[0].meta["mcp-notebook/page"] == info
            schema = await client.read_resource("nb://frames/fr_pl/schema")
            assert json.loads(schema.contents[0].text)["shape"] == [3, 3]

    anyio.run(go)


def test_rebinding_to_a_view_notifies_once(frames, kernel, hub):
    """`A2 = A2[:50]` (a numpy view) or `df2 = df2.head(50)` notifies once, not again after the next unrelated cell."""
    kernel.run("A2 = np.arange(200.0)\ndf2 = pd.DataFrame({'a': range(200)})\nnoise = 0")
    uris = ["nb://frames/A2", "nb://frames/df2", "nb://vars/A2", "nb://vars/df2"]

    async def go():
        async with connect(hub, "legacy") as (client, inbox):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                for uri in uris:
                    await client.subscribe_resource(uri)
            await anyio.to_thread.run_sync(kernel.run, "noise = -1")  # every watcher has seen the first state
            await anyio.to_thread.run_sync(kernel.run, "A2 = A2[:50]\ndf2 = df2.head(50)")
            await inbox.wait_for(lambda i: all(u in i.updated for u in uris))
            for n in range(3):  # unrelated cells, then a marker change everyone waits for
                await anyio.to_thread.run_sync(kernel.run, f"noise = {n + 1}")
            await anyio.to_thread.run_sync(kernel.run, "A2[0] = -1.0")  # a real change, in place
            await inbox.wait_for(lambda i: i.updated.count("nb://frames/A2") >= 2)
            await anyio.to_thread.run_sync(kernel.run, "noise = 9")
            await anyio.to_thread.run_sync(hub_drain, kernel)
            counts = {u: inbox.updated.count(u) for u in uris}
            counts_log = [u for u in inbox.updated]
            assert counts_log and counts == {
                "nb://frames/A2": 2,
                "nb://frames/df2": 1,
                "nb://vars/A2": 2,
                "nb://vars/df2": 1,
            }, (counts, counts_log)

    anyio.run(go)


def hub_drain(kernel):
    kernel.run("import mcp_notebook as _m\n_m.hub().resources.drain(10)")


def test_credential_column_labels_are_masked(frames, kernel, mcp):
    key = "sk-proj-" + "Q" * 30
    kernel.run(f"fr_lbl = pd.DataFrame({{'ok': [1], '{key}': [2]}})\nfr_lbl_pl = pl.DataFrame({{'{key}': [1]}})")
    for uri in [
        "nb://frames/fr_lbl",
        "nb://frames/fr_lbl?format=json",
        "nb://frames/fr_lbl?format=markdown",
        "nb://frames/fr_lbl/schema",
        "nb://frames/fr_lbl_pl",
        "nb://frames/fr_lbl_pl/schema",
    ]:
        for item in read(mcp, uri):
            assert key not in item["text"] and "[REDACTED]" in item["text"], (uri, item["text"])
    reply = mcp.call(
        "completion/complete",
        {
            "ref": {"type": "ref/resource", "uri": PAGE},
            "argument": {"name": "columns", "value": ""},
            "context": {"arguments": {"name": "fr_lbl"}},
        },
    )
    assert key not in json.dumps(reply) and "ok" in reply["result"]["completion"]["values"], reply
    assert key not in json.dumps(error_of(mcp, "nb://frames/fr_lbl?columns=nope"))
