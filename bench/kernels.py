"""What one endpoint for every kernel costs: a read and a notification through the front
(mcp_notebook.allkernels) against the same thing straight from the kernel's hub, with 1, 10 and 50
kernels running.

Reads: sequential stateless `resources/read` of `nb://vars/x` with one keep-alive httpx client,
straight to the hub vs the qualified URI through the front on loopback HTTP (the bridge now drives
it in-process: bench/bridge_latency.py);
and through a real `jupyter server`: its per-kernel proxy vs its `mcp-notebook/mcp` (`--where`).
Notifications: a cell assigns `x`; two listen streams are open at once, one straight on the hub
and one through the front: per cell, when the update arrives through the front minus when it
arrives straight.

    .venv/bin/python bench/kernels.py [--kernels 1,10,50] [--reads 500] [--cells 20] [--where local|server|both]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
sys.path.insert(0, str(Path(__file__).resolve().parent))
import sections as S
from kernel_harness import Kernel

from mcp_notebook.allkernels.directory import LocalDirectory
from mcp_notebook.allkernels.front import KernelsFront

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
    run: Callable[[str], Any],
    direct: tuple[str, str, str],
    front: tuple[str, str, str],
    cells: int,
    scheme: str = "Bearer",
) -> dict[str, Any]:
    """Per cell: when resources/updated arrives through the front minus when it arrives straight
    from the hub (two listen streams open at once; ``direct``/``front``: url, token, uri)."""
    streams = {"direct": ([], threading.Event()), "front": ([], threading.Event())}
    for name, (url, token, uri) in (("direct", direct), ("front", front)):
        arrived, ready = streams[name]
        threading.Thread(target=_listen, args=(url, token, uri, scheme, arrived, ready), daemon=True).start()
        ready.wait(30)
    time.sleep(1.0)  # the front opens its own listen on the hub
    added = []
    for i in range(cells):
        seen = {name: len(arrived) for name, (arrived, _) in streams.items()}
        run(f"x = {i}")
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
                    kernels[0].run,
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


def server(counts: list[int], reads: int, cells: int) -> list[dict[str, Any]]:
    """The same through a real `jupyter server`: its per-kernel proxy vs its `mcp-notebook/mcp`."""
    from jserver import JupyterServer, load_hub, run

    out = []
    s = JupyterServer(Path(tempfile.mkdtemp(prefix="mcp-nb-bench-jserver-")), token="bench-token")
    try:
        ids: list[str] = []
        for count in counts:
            while len(ids) < count:
                kid = s.start_session(f"nb{len(ids)}.ipynb")
                kc = s.client(kid)
                load_hub(kc)
                run(kc, "x = 1")
                ids.append(kid)
            kc0 = s.clients[0]
            front = f"{s.url}mcp-notebook/mcp"
            row: dict[str, Any] = {"where": "server", "kernels": count}
            row["read_direct"] = read_latency(s.mcp_url(ids[0]), s.token, "nb://vars/x", reads, "token")
            row["read_front"] = read_latency(front, s.token, "nb://kernels/nb0/vars/x", reads, "token")
            row["notify_added"] = notify_added(
                lambda code, kc=kc0: run(kc, code),
                (s.mcp_url(ids[0]), s.token, "nb://vars/x"),
                (front, s.token, "nb://kernels/nb0/vars/x"),
                cells,
                "token",
            )
            print(json.dumps(row), flush=True)
            out.append(row)
    finally:
        s.stop()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kernels", default="1,10,50")
    ap.add_argument("--reads", type=int, default=500)
    ap.add_argument("--cells", type=int, default=20)
    ap.add_argument("--where", choices=("local", "server", "both"), default="both")
    ap.add_argument("--out", default=str(Path(__file__).resolve().parent / "results" / "kernels.json"))
    args = ap.parse_args()
    counts = [int(c) for c in args.kernels.split(",")]
    start = os.getloadavg()
    rows = local(counts, args.reads, args.cells) if args.where != "server" else []
    rows += server(counts, args.reads, args.cells) if args.where != "local" else []
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(rows, indent=2))
    print(
        "| where | kernels | read straight p50/p99 ms | read via the front p50/p99 ms | notification, added by the front p50/p99 ms |"
    )
    print("|---|---|---|---|---|")
    for r in rows:
        cell = lambda d: f"{d['p50_ms']:.2f} / {d['p99_ms']:.2f}"  # noqa: E731
        print(
            f"| {r['where']} | {r['kernels']} | {cell(r['read_direct'])} | {cell(r['read_front'])} | {cell(r['notify_added'])} |"
        )
    m = S.machine_facts()
    print(f"\n{m['cpu']}, {m['cores']} cores, Python {m['python']}, git {m['git'].get('commit')}; load average "
          f"{start[0]:.1f} at start, {os.getloadavg()[0]:.1f} at end")  # fmt: skip


if __name__ == "__main__":
    main()
