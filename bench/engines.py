"""Lazy engine frames: first page, deep page and schema of a 50M-row DuckDB relation, Dask frame and
Spark frame over one parquet file, read over HTTP from the hub, against the engine's own head() in
the kernel; and the post-cell hook with those handles (watched) in the namespace.

    .venv/bin/python bench/engines.py [--rows 50000000] [--n 5] [--out bench/engines.json]

Needs the engines extra (pip install -e '.[engines]') and Java 17 for Spark.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))

import sections as S

SETUP = """
import os, sys, time, duckdb, dask.dataframe as dd
os.environ["PYSPARK_PYTHON"] = sys.executable
duckdb.sql("COPY (SELECT range AS id, range % 1000 AS g, 'n' || range AS s, range / 2.0 AS x "
           "FROM range({rows})) TO '{path}' (FORMAT parquet)")
rel = duckdb.sql("SELECT * FROM '{path}'")
ddf = dd.read_parquet('{path}')
from pyspark.sql import SparkSession
spark = (SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
         .config("spark.sql.shuffle.partitions", "2").getOrCreate())
spark.sparkContext.setLogLevel("ERROR")
sdf = spark.read.parquet('{path}')
import mcp_notebook as _m
_m.hub().config.engine_timeout = 300
"""

HEADS = {
    "rel": "rel.limit(100).to_arrow_table()",
    "ddf": "ddf.head(100)",
    "sdf": "sdf.head(100)",
}


def engine_head(k: S.BenchKernel, expr: str, n: int) -> dict[str, Any]:
    """The engine's own head() of 100 rows, timed inside the kernel (median of n)."""
    code = (
        "import time as _t\n_lat = []\n"
        f"for _ in range({n}):\n    _t0 = _t.perf_counter(); {expr}; _lat.append((_t.perf_counter() - _t0) * 1e3)\n"
        "_lat.sort(); kside.emit({'median_ms': _lat[len(_lat) // 2], 'n': len(_lat)})"
    )
    return k.json(code)


def run(rows: int, n: int) -> dict[str, Any]:
    res: dict[str, Any] = {"rows": rows, "n": n, "machine": S.machine_facts()}
    with tempfile.TemporaryDirectory(prefix="mcpnb-engines-") as runtime:
        k = S.BenchKernel(runtime)
        try:
            k.run("%load_ext mcp_notebook")
            info = k.info()
            t0 = time.perf_counter()
            k.run(SETUP.format(rows=rows, path=f"{runtime}/big.parquet"), timeout=900)
            res["setup_s"] = time.perf_counter() - t0
            auth = {"Authorization": f"Bearer {info['token']}"}
            with httpx.Client(timeout=600) as http:
                for name in HEADS:
                    # The engine's own head() first (cold), so the hub's reads do not warm its caches for it.
                    out: dict[str, Any] = {"engine_head_100": S.guarded(engine_head, k, HEADS[name], n)}
                    uris = {
                        "schema": f"nb://frames/{name}/schema",
                        "first_page": f"nb://frames/{name}?limit=100",
                        "deep_page": f"nb://frames/{name}?offset={rows - 100}&limit=100",
                    }
                    for label, uri in uris.items():
                        out[label] = S.guarded(S._read_series, http, info["url"], auth, uri, n)
                    out["engine_head_100_after"] = S.guarded(engine_head, k, HEADS[name], n)
                    res[name] = out
                    print(name, json.dumps(out), file=sys.stderr, flush=True)
                # The post-cell hook with the three handles watched by a session.
                client = _Session(http, info)
                for name in HEADS:
                    client.call("resources/subscribe", {"uri": f"nb://frames/{name}"})
                res["hook_steady"] = k.json("kside.time_after_cell('steady', 300, 3)")
                res["hook_rebind"] = k.json("kside.time_after_cell('rebind', 300, 3)")
        finally:
            k.shutdown()
    return res


class _Session:
    """A handshake-era session (subscriptions need one)."""

    def __init__(self, http: httpx.Client, info: dict[str, Any]):
        self.http, self.url = http, info["url"]
        self.headers = {
            "Authorization": f"Bearer {info['token']}",
            "Accept": "application/json, text/event-stream",
            "Content-Type": "application/json",
        }
        init = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}}
        r = http.post(
            self.url, json={"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": init}, headers=self.headers
        )
        self.headers["Mcp-Session-Id"] = r.headers["mcp-session-id"]
        self.headers["MCP-Protocol-Version"] = "2025-11-25"
        http.post(self.url, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=self.headers)

    def call(self, method: str, params: dict[str, Any]) -> Any:
        body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
        return self.http.post(self.url, json=body, headers=self.headers).json()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=50_000_000)
    parser.add_argument("--n", type=int, default=5, help="repetitions per measurement (median)")
    parser.add_argument("--out", default="")
    args = parser.parse_args()
    res = run(args.rows, args.n)
    text = json.dumps(res, indent=2)
    if args.out:
        Path(args.out).write_text(text + "\n")
    print(text)


if __name__ == "__main__":
    main()
