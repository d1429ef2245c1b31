"""Scaling figures: reads as the namespace grows, notifications as subscribers grow, 50 clients.

    .venv/bin/python bench/scaling.py [--quick] [--out PATH]

1. Namespace: 10, 10k, 100k names; sequential read latency of ``nb://vars/x`` (httpx, one
   connection) and throughput under load (wrk or the Python load generator, 16 connections).
2. Subscribers: 1, 100, 1,000 subscriptions spread over up to 100 ``subscriptions/listen``
   streams (2026-07-28 era); a cell rebinds every subscribed variable; time from the cell's end
   (stamped in the kernel) to the last notification at the clients. Two clients: a raw SSE
   reader (asyncio streams, counts events per read: what the hub takes) and httpx parsing lines
   (a typical Python client: its own parsing of 1,000 events is part of the figure).
3. 50 concurrent clients, each one keep-alive connection reading in a loop: throughput, p50/p99.
Every loop is bounded by a count or a deadline.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

import loadgen
import sections as S

MARKER = "bench-scale"


def _pcts(values: list[float]) -> dict[str, Any]:
    values = sorted(values)
    if not values:
        return {"n": 0}
    return {
        "n": len(values),
        "p50_ms": round(values[len(values) // 2], 3),
        "p99_ms": round(values[min(len(values) - 1, int(len(values) * 0.99))], 3),
        "max_ms": round(values[-1], 3),
    }


def _read_headers(info: dict[str, Any], uri: str) -> tuple[dict[str, str], bytes]:
    headers, body = loadgen.stateless_request("resources/read", {"uri": uri})
    headers["Authorization"] = f"Bearer {info['token']}"
    return headers, body


def namespace_growth(k: S.BenchKernel, info: dict[str, Any], sizes: list[int], seconds: float) -> dict[str, Any]:
    out: dict[str, Any] = {}
    headers, body = _read_headers(info, "nb://vars/x")
    index_headers, index_body = _read_headers(info, "nb://vars?limit=50")
    defined = 0
    with httpx.Client(timeout=30) as http:
        for size in sizes:
            if size > defined:
                k.run(f"kside.define_vars({size - defined}, prefix='n{defined}_')")
                defined = size
            k.run("x = 1")
            row: dict[str, Any] = {}
            for name, (h, b) in (("read", (headers, body)), ("index", (index_headers, index_body))):
                lat = []
                deadline = time.perf_counter() + seconds
                while time.perf_counter() < deadline and len(lat) < 20_000:
                    t0 = time.perf_counter()
                    r = http.post(info["url"], content=b, headers=h)
                    lat.append((time.perf_counter() - t0) * 1e3)
                    assert r.status_code == 200 and b'"result"' in r.content, r.content[:200]
                row[f"{name}_seq"] = _pcts(lat)
            load = loadgen.run_load(info["url"], headers, body, 16, seconds)
            row["read_c16_rps"] = round(load.get("rps", 0))
            t0 = time.perf_counter()
            k.run("pass")
            row["cell_roundtrip_ms"] = round((time.perf_counter() - t0) * 1e3, 2)
            out[f"{size} names"] = row
    return out


async def _listen(
    url: str, token: str, uris: list[str], sub_id: int, got: dict[str, list[float]], ready: asyncio.Event
):
    params = {
        "notifications": {"resourceSubscriptions": uris},
        "_meta": loadgen.META,
    }
    body = {"jsonrpc": "2.0", "id": sub_id, "method": "subscriptions/listen", "params": params}
    headers = {
        **loadgen.BASE_HEADERS,
        "MCP-Protocol-Version": loadgen.STATELESS,
        "Mcp-Method": "subscriptions/listen",
        "Authorization": f"Bearer {token}",
    }
    async with httpx.AsyncClient(timeout=None) as http:
        async with http.stream("POST", url, json=body, headers=headers) as resp:
            async for line in resp.aiter_lines():
                if not line.startswith("data:"):
                    continue
                msg = json.loads(line[5:])
                if msg.get("method") == "notifications/subscriptions/acknowledged":
                    ready.set()
                elif msg.get("method") == "notifications/resources/updated":
                    got.setdefault(msg["params"]["uri"], []).append(time.time())


_UPDATED = b'"notifications/resources/updated"'


async def _listen_raw(
    url: str, token: str, uris: list[str], sub_id: int, got: dict[str, list[float]], ready: asyncio.Event
):
    """A lean listen client: one POST on a raw connection; counts updated events per read."""
    host, port = url.split("//", 1)[1].split("/", 1)[0].rsplit(":", 1)
    params = {"notifications": {"resourceSubscriptions": uris}, "_meta": loadgen.META}
    body = json.dumps({"jsonrpc": "2.0", "id": sub_id, "method": "subscriptions/listen", "params": params}).encode()
    head = (
        f"POST /mcp HTTP/1.1\r\nHost: {host}:{port}\r\nContent-Type: application/json\r\n"
        f"Accept: application/json, text/event-stream\r\nMCP-Protocol-Version: {loadgen.STATELESS}\r\n"
        f"Mcp-Method: subscriptions/listen\r\nAuthorization: Bearer {token}\r\nContent-Length: {len(body)}\r\n\r\n"
    )
    reader, writer = await asyncio.open_connection(host, int(port))
    writer.write(head.encode() + body)
    seen = b""
    try:
        while True:
            data = await reader.read(65536)
            if not data:
                return
            now = time.time()
            if not ready.is_set():
                seen += data
                if b"notifications/subscriptions/acknowledged" in seen:
                    ready.set()
                continue
            got.setdefault("", []).extend([now] * data.count(_UPDATED))
    finally:
        writer.close()


async def _fanout(
    k: S.BenchKernel, info: dict[str, Any], subs: int, streams: int, cells: int, raw: bool = True
) -> dict[str, Any]:
    per = max(1, subs // streams)
    names = [f"s{i}" for i in range(subs)]
    k.run("\n".join(f"{n} = 0" for n in names))
    got: dict[str, list[float]] = {}
    readies = []
    tasks = []
    for s in range(streams):
        uris = [f"nb://vars/{n}" for n in names[s * per : (s + 1) * per]]
        ready = asyncio.Event()
        readies.append(ready)
        listen = _listen_raw if raw else _listen
        tasks.append(asyncio.create_task(listen(info["url"], info["token"], uris, 1000 + s, got, ready)))
    await asyncio.wait_for(asyncio.gather(*(r.wait() for r in readies)), 60)
    delays = []
    for c in range(cells):
        got.clear()
        code = f"# {MARKER} {c}\n" + "\n".join(f"{n} = {c + 1}" for n in names)
        await asyncio.to_thread(k.run, code)
        deadline = time.time() + 10
        while time.time() < deadline and sum(len(v) for v in got.values()) < subs:
            await asyncio.sleep(0.005)
        stamps = await asyncio.to_thread(k.json, f"kside.stamps_for({MARKER!r})")
        end = stamps.get(str(c))
        arrivals = [t for v in got.values() for t in v]
        if end is not None and len(arrivals) >= subs:
            delays.append((max(arrivals) - end) * 1e3)
    for t in tasks:
        t.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    return {"streams": streams, "cells": cells, "complete": len(delays), **_pcts(delays)}


def subscribers(k: S.BenchKernel, info: dict[str, Any], cells: int) -> dict[str, Any]:
    out = {}
    for subs, streams in ((1, 1), (100, 100), (1000, 100)):
        for raw in (True, False):
            key = f"{subs} subscriptions / {streams} streams, {'raw SSE reader' if raw else 'httpx lines'}"
            out[key] = S.guarded(lambda s=subs, n=streams, r=raw: asyncio.run(_fanout(k, info, s, n, cells, r)))
    return out


async def _clients(url: str, headers: dict[str, str], body: bytes, n: int, seconds: float) -> dict[str, Any]:
    lat: list[float] = []
    errors = 0
    clients = [httpx.AsyncClient(timeout=30) for _ in range(n)]  # built (and connected) before the clock starts
    try:
        await asyncio.gather(*(c.post(url, content=body, headers=headers) for c in clients))
        deadline = time.perf_counter() + seconds

        async def one(http: httpx.AsyncClient) -> None:
            nonlocal errors
            while time.perf_counter() < deadline:
                t0 = time.perf_counter()
                r = await http.post(url, content=body, headers=headers)
                lat.append((time.perf_counter() - t0) * 1e3)
                errors += r.status_code != 200

        t0 = time.perf_counter()
        await asyncio.gather(*(one(c) for c in clients))
        elapsed = time.perf_counter() - t0
    finally:
        await asyncio.gather(*(c.aclose() for c in clients))
    return {"clients": n, "rps": round(len(lat) / elapsed), "errors": errors, **_pcts(lat)}


def concurrent_clients(info: dict[str, Any], n: int, seconds: float) -> dict[str, Any]:
    headers, body = _read_headers(info, "nb://vars/x")
    out = {"httpx clients": asyncio.run(_clients(info["url"], headers, body, n, seconds))}
    out["wrk connections"] = {"connections": n, **loadgen.run_load(info["url"], headers, body, n, seconds)}
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--out", default=str(Path(__file__).resolve().parent / "results" / "scaling.json"))
    args = ap.parse_args()
    seconds = 1.0 if args.quick else 3.0
    cells = 3 if args.quick else 10
    res: dict[str, Any] = {"mode": "quick" if args.quick else "full", "machine": S.machine_facts()}
    with tempfile.TemporaryDirectory(prefix="mcpnb-scale-") as runtime:
        k = S.BenchKernel(runtime)
        try:
            k.run("kside.install_stamp_hook()")
            k.run("%load_ext mcp_notebook")
            info = k.info()
            res["namespace"] = S.guarded(namespace_growth, k, info, [10, 10_000, 100_000], seconds)
            res["subscribers"] = S.guarded(subscribers, k, info, cells)
            res["clients"] = S.guarded(concurrent_clients, info, 50, seconds)
        finally:
            k.shutdown()
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(res, indent=1, default=str))
    for section in ("namespace", "subscribers", "clients"):
        print(f"## {section}")
        for key, row in (res.get(section) or {}).items():
            print(f"  {key}: {json.dumps(row)}")


if __name__ == "__main__":
    main()
