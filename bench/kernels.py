"""What one endpoint for every kernel costs: a read and a notification through the front
(mcp_notebook.kernels) against the same thing straight from the kernel's hub, with 1, 10 and 50
kernels running.

Reads: sequential stateless `resources/read` of `nb://vars/x` with one keep-alive httpx client,
straight to the hub vs the qualified URI through the front on loopback HTTP, as the bridge runs it.
Notifications: a cell assigns `x`; two listen streams are open at once, one straight on the hub
and one through the front: per cell, when the update arrives through the front minus when it
arrives straight.

    .venv/bin/python bench/kernels.py [--kernels 1,10,50] [--reads 500] [--cells 20]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from kernel_harness import Kernel

from mcp_notebook.kernels.directory import LocalDirectory
from mcp_notebook.kernels.front import KernelsFront

VERSION = "2026-07-28"
META = {"io.modelcontextprotocol/protocolVersion": VERSION, "io.modelcontextprotocol/clientCapabilities": {}}


def _headers(token: str, method: str, name: str | None = None, scheme: str = "Bearer") -> dict[str, str]:
    h = {
        "Authorization": f"{scheme} {token}",
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": VERSION,
        "Mcp-Method": method,
    }
    if name:
        h["Mcp-Name"] = name
    return h


def _pct(values: list[float]) -> dict[str, float]:
    values = sorted(values)
    return {
        "p50_ms": round(statistics.median(values) * 1e3, 3),
        "p99_ms": round(values[min(len(values) - 1, int(len(values) * 0.99))] * 1e3, 3),
    }


def read_latency(url: str, token: str, uri: str, n: int, scheme: str = "Bearer") -> dict[str, float]:
    times = []
    with httpx.Client(timeout=30) as http:
        for i in range(n + 20):
            body = {"jsonrpc": "2.0", "id": i, "method": "resources/read", "params": {"uri": uri, "_meta": META}}
            t0 = time.perf_counter()
            r = http.post(url, json=body, headers=_headers(token, "resources/read", uri, scheme))
            elapsed = time.perf_counter() - t0
            assert r.status_code == 200 and '"result"' in r.text, r.text[:300]
            if i >= 20:
                times.append(elapsed)
    return _pct(times)


def _listen(url: str, token: str, uri: str, scheme: str, arrived: list[float], ready: threading.Event) -> None:
    params = {"notifications": {"resourceSubscriptions": [uri]}, "_meta": META}
    body = {"jsonrpc": "2.0", "id": 1, "method": "subscriptions/listen", "params": params}
    with httpx.Client(timeout=None) as http:
        with http.stream("POST", url, json=body, headers=_headers(token, "subscriptions/listen", None, scheme)) as r:
            for line in r.iter_lines():
                if "subscriptions/acknowledged" in line:
                    ready.set()
                elif "resources/updated" in line:
                    arrived.append(time.perf_counter())


def notify_added(
    kernel: Kernel, direct: tuple[str, str, str], front: tuple[str, str, str], cells: int
) -> dict[str, Any]:
    """Per cell: when resources/updated arrives through the front minus when it arrives straight
    from the hub (two listen streams open at once; ``direct``/``front``: url, token, uri)."""
    streams = {"direct": ([], threading.Event()), "front": ([], threading.Event())}
    for name, (url, token, uri) in (("direct", direct), ("front", front)):
        arrived, ready = streams[name]
        threading.Thread(target=_listen, args=(url, token, uri, "Bearer", arrived, ready), daemon=True).start()
        ready.wait(30)
    time.sleep(1.0)  # the front opens its own listen on the hub
    added = []
    for i in range(cells):
        seen = {name: len(arrived) for name, (arrived, _) in streams.items()}
        kernel.run(f"x = {i}")
        deadline = time.perf_counter() + 10
        while time.perf_counter() < deadline and any(len(streams[n][0]) == seen[n] for n in streams):
            time.sleep(0.0005)
        if all(len(streams[n][0]) > seen[n] for n in streams):
            added.append(streams["front"][0][seen["front"]] - streams["direct"][0][seen["direct"]])
        time.sleep(0.05)
    return {**_pct(added), "received": len(added), "cells": cells}


def local(counts: list[int], reads: int, cells: int) -> list[dict[str, Any]]:
    out = []
    runtime = Path(tempfile.mkdtemp(prefix="mcp-nb-bench-kernels-"))
    kernels: list[Kernel] = []
    try:
        for count in counts:
            while len(kernels) < count:
                k = Kernel(env={"JUPYTER_RUNTIME_DIR": str(runtime)})
                k.run(f"%config MCPHub.notebook_path = 'nb{len(kernels)}.ipynb'")
                k.load_hub()
                k.run("x = 1")
                kernels.append(k)
            front = KernelsFront(LocalDirectory(runtime))
            url = front.serve_http()
            try:
                hub = kernels[0].info()
                row: dict[str, Any] = {"where": "local", "kernels": count}
                row["read_direct"] = read_latency(hub["url"], hub["token"], "nb://vars/x", reads)
                row["read_front"] = read_latency(url, front.settings.token, "nb://kernels/nb0/vars/x", reads)
                row["notify_added"] = notify_added(
                    kernels[0],
                    (hub["url"], hub["token"], "nb://vars/x"),
                    (url, front.settings.token, "nb://kernels/nb0/vars/x"),
                    cells,
                )
            finally:
                front.close()
            print(json.dumps(row), flush=True)
            out.append(row)
    finally:
        for k in kernels:
            k.shutdown()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kernels", default="1,10,50")
    ap.add_argument("--reads", type=int, default=500)
    ap.add_argument("--cells", type=int, default=20)
    ap.add_argument("--out", default=str(Path(__file__).resolve().parent / "results" / "kernels.json"))
    args = ap.parse_args()
    counts = [int(c) for c in args.kernels.split(",")]
    rows = local(counts, args.reads, args.cells)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(rows, indent=2))
    print(
        "| kernels | read straight p50/p99 ms | read via the front p50/p99 ms | notification, added by the front p50/p99 ms |"
    )
    print("|---|---|---|---|")
    for r in rows:
        cell = lambda d: f"{d['p50_ms']:.2f} / {d['p99_ms']:.2f}"  # noqa: E731
        print(f"| {r['kernels']} | {cell(r['read_direct'])} | {cell(r['read_front'])} | {cell(r['notify_added'])} |")


if __name__ == "__main__":
    main()
