"""What serving an R kernel from the Jupyter server's side costs (issue #43): one real `jupyter server`
with an IRkernel, cells run by a client of their own.

- **Cells**: wall time of a trivial R cell (`1 + 1`) run `--cells` times through the client, with
  the server's side off (`serve_without_hub=False`), on with the snippets off (the default), and on
  with the snippets opted in (`variable_snippets=True`): nothing is sent to the kernel for a cell,
  so the three should agree within noise.
- **Reads** (snippets on): sequential stateless `resources/read` through the per-kernel route, one
  keep-alive httpx client: an R output (`nb://cells/{seq}/outputs/0`), a variable through
  IRkernel's inspect_request (`nb://vars/df`), the listing snippet (`nb://vars`), a frame page
  (`nb://frames/df`).

    .venv/bin/python bench/serverside.py [--cells 100] [--reads 100]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from jserver import JupyterServer

VERSION = "2026-07-28"
TOKEN = "test-jupyter-token"


def ms(values: list[float]) -> str:
    values = sorted(values)
    p99 = values[min(len(values) - 1, int(len(values) * 0.99))]
    return f"p50 {statistics.median(values) * 1e3:.2f} ms, p99 {p99 * 1e3:.2f} ms (n={len(values)})"


def r_server(base: Path, *args: str) -> tuple[JupyterServer, str, Any]:
    s = JupyterServer(base, extra_args=args)
    r = s.http.post("api/sessions", json={"path": "stats.ipynb", "type": "notebook", "kernel": {"name": "ir"}})
    rid = r.json()["kernel"]["id"]
    return s, rid, s.client(rid)


def cell_times(kc: Any, n: int) -> list[float]:
    kc.execute_interactive("df <- data.frame(a = 1:1000, b = rnorm(1000)); plot(1:10)", timeout=60)
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        kc.execute_interactive("1 + 1", timeout=60, output_hook=lambda m: None)
        out.append(time.perf_counter() - t0)
    return out


def read_times(s: JupyterServer, rid: str, uri: str, n: int) -> list[float]:
    url = s.mcp_url(rid)
    body = {"jsonrpc": "2.0", "id": 1, "method": "resources/read", "params": {"uri": uri}}
    body["params"]["_meta"] = {
        "io.modelcontextprotocol/protocolVersion": VERSION,
        "io.modelcontextprotocol/clientCapabilities": {},
    }
    headers = {
        "Authorization": f"token {TOKEN}",
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": VERSION,
        "Mcp-Method": "resources/read",
        "Mcp-Name": uri,
    }
    out = []
    with httpx.Client(timeout=30) as http:
        for _ in range(n + 3):
            t0 = time.perf_counter()
            reply = http.post(url, json=body, headers=headers)
            took = time.perf_counter() - t0
            assert reply.status_code == 200 and "error" not in reply.json(), reply.text[:300]
            out.append(took)
    return out[3:]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--cells", type=int, default=100)
    ap.add_argument("--reads", type=int, default=100)
    a = ap.parse_args()
    results: dict[str, str] = {}
    cases = {
        "cells, server side off": ("--MCPNotebookProxy.serve_without_hub=False",),
        "cells, served, snippets off": (),
        "cells, served, snippets on": ("--MCPNotebookProxy.variable_snippets=True",),
    }
    for name, args in cases.items():
        with tempfile.TemporaryDirectory() as tmp:
            s, rid, kc = r_server(Path(tmp), *args)
            try:
                time.sleep(1.0)  # the watch looks every 0.5 s
                results[name] = ms(cell_times(kc, a.cells))
                if "snippets on" in name:
                    cells = json.loads(read_reply(s, rid, "nb://cells")["result"]["contents"][0]["text"])["cells"]
                    plot = next(c["seq"] for c in cells if "plot" in (c.get("source") or c.get("first_line") or ""))
                    for label, uri in (
                        ("read an R output (png)", f"nb://cells/{plot}/outputs/0"),
                        ("read an R variable (inspect_request)", "nb://vars/df"),
                        ("list R variables (snippet)", "nb://vars"),
                        ("page an R frame (snippet)", "nb://frames/df?limit=100"),
                    ):
                        results[label] = ms(read_times(s, rid, uri, a.reads))
            finally:
                s.stop()
    for name, figure in results.items():
        print(f"{name:40s} {figure}")


def read_reply(s: JupyterServer, rid: str, uri: str) -> dict[str, Any]:
    meta = {"io.modelcontextprotocol/protocolVersion": VERSION, "io.modelcontextprotocol/clientCapabilities": {}}
    body = {"jsonrpc": "2.0", "id": 1, "method": "resources/read", "params": {"uri": uri, "_meta": meta}}
    headers = {
        "Authorization": f"token {TOKEN}",
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": VERSION,
        "Mcp-Method": "resources/read",
        "Mcp-Name": uri,
    }
    return httpx.post(s.mcp_url(rid), json=body, headers=headers, timeout=30).json()


if __name__ == "__main__":
    main()
