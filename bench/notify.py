"""Notification latency: cell end (stamped in the kernel) to resources/updated at an SDK client.

The official SDK client (mcp 2.3.0) subscribes in legacy mode (resources/subscribe, GET stream)
or listens in the 2026-07-28 era (subscriptions/listen). Each cell rebinds the watched variable;
the kernel's stamp hook records time.time() at post_run_cell, the client records time.time() on
arrival, and cells are paired with the first notification that follows them.
"""

from __future__ import annotations

import time
import warnings
from contextlib import AsyncExitStack
from typing import Any

import anyio
import httpx2
import mcp_types as types
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

URI = "nb://vars/counter"
MARKER = "bench-notify"


class _Path:
    """One SDK client's arrivals (one path to the kernel: the user's own server, the service...)."""

    def __init__(self) -> None:
        self.arrivals: list[float] = []
        self.event = anyio.Event()

    def arrived(self) -> None:
        self.arrivals.append(time.time())
        self.event.set()
        self.event = anyio.Event()

    async def wait_past(self, before: int) -> bool:
        with anyio.move_on_after(5):
            while len(self.arrivals) <= before:
                await self.event.wait()
        return len(self.arrivals) > before


async def _client(stack: AsyncExitStack, tg: Any, info: dict[str, Any], mode: str, path: _Path) -> None:
    """An SDK client at ``info`` subscribed (legacy) or listening (2026-07-28) to URI, its arrivals in ``path``."""

    async def on_message(msg: Any) -> None:
        if mode == "legacy" and isinstance(msg, types.ResourceUpdatedNotification) and str(msg.params.uri) == URI:
            path.arrived()

    headers = {"Authorization": f"Bearer {info['token']}"} if info.get("token") else {}
    http = await stack.enter_async_context(httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30, read=300)))
    transport = streamable_http_client(info["url"], http_client=http)
    client = await stack.enter_async_context(Client(transport, mode=mode, message_handler=on_message, cache=None))
    if mode == "legacy":
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            await client.subscribe_resource(URI)
        return
    sub = await stack.enter_async_context(client.listen(resource_subscriptions=[URI]))

    async def reader() -> None:
        async for ev in sub:
            if getattr(ev, "uri", None) is not None and str(ev.uri) == URI:
                path.arrived()

    tg.start_soon(reader)


async def _measure_paths(
    kernel: Any, infos: dict[str, dict[str, Any]], mode: str, cells: int, tag: str
) -> dict[str, Any]:
    """Every path of ``infos`` listening at once; each cell's arrival at each (cells interleaved:
    the paths share every cell, so their difference is paired per cell)."""
    paths = {name: _Path() for name in infos}
    async with AsyncExitStack() as stack, anyio.create_task_group() as tg:
        for name, info in infos.items():
            await _client(stack, tg, info, mode, paths[name])
        if mode == "legacy":
            await anyio.sleep(0.5)  # the clients open their GET streams after initialize
        cell_of: dict[str, dict[str, int]] = {name: {} for name in infos}
        missing = dict.fromkeys(infos, 0)
        for i in range(-1, cells):  # a warm-up cell: proves the streams are live before timing starts
            key = f"{tag}{i}"
            before = {name: len(p.arrivals) for name, p in paths.items()}
            await anyio.to_thread.run_sync(lambda k=key: kernel.run(f"counter = counter + 1  # {MARKER} {k}"))
            for name, p in paths.items():
                if await p.wait_past(before[name]):
                    if i >= 0:
                        cell_of[name][key] = before[name]
                elif i >= 0:
                    missing[name] += 1
        stamps = await anyio.to_thread.run_sync(lambda: kernel.json(f"kside.stamps_for({MARKER!r})"))
        tg.cancel_scope.cancel()
    out: dict[str, Any] = {}
    per_cell: dict[str, dict[str, float]] = {}
    for name, p in paths.items():
        lat = {k: (p.arrivals[idx] - stamps[k]) * 1e3 for k, idx in cell_of[name].items() if k in stamps}
        per_cell[name] = lat
        out[name] = {
            "cells": cells,
            "received": len(lat),
            "missing": missing[name],
            "extra": len(p.arrivals) - len(lat) - 1,
            **_ms(sorted(lat.values())),
            "per_cell_ms": lat,
            "arrived_at": {k: p.arrivals[idx] for k, idx in cell_of[name].items()},  # (bench/notify_hops.py)
        }
    out["cell_end"] = {k: t for k, t in stamps.items() if k.startswith(tag)}
    return out


async def _measure(kernel: Any, info: dict[str, Any], mode: str, cells: int, tag: str) -> dict[str, Any]:
    result = (await _measure_paths(kernel, {"one": info}, mode, cells, tag))["one"]
    for key in ("per_cell_ms", "arrived_at"):
        result.pop(key, None)
    return result


def _ms(values: list[float]) -> dict[str, Any]:
    if not values:
        return {"median_ms": None, "p99_ms": None}
    return {
        "median_ms": values[len(values) // 2],
        "p99_ms": values[min(len(values) - 1, int(len(values) * 0.99))],
        "min_ms": values[0],
        "max_ms": values[-1],
    }


def notification_latency(kernel: Any, info: dict[str, Any], cells: int) -> dict[str, Any]:
    """Latency in both eras; the kernel must have kside's stamp hook installed before the hub."""
    kernel.run("counter = 100000")
    out: dict[str, Any] = {}
    for mode, tag in (("legacy", "L"), ("2026-07-28", "M")):
        try:
            out[mode] = anyio.run(_measure, kernel, info, mode, cells, tag)
        except BaseException as exc:
            if isinstance(exc, KeyboardInterrupt):
                raise
            out[mode] = {"error": f"{type(exc).__name__}: {exc}"[:400]}
    return out


def notification_pairs(kernel: Any, infos: dict[str, dict[str, Any]], cells: int) -> dict[str, Any]:
    """Both eras, every path of ``infos`` timed on the same cells (see ``_measure_paths``); under
    each era's ``added`` what each later path adds to the first, cell by cell: median, p10, p90."""
    kernel.run("counter = 100000")
    out: dict[str, Any] = {}
    first = next(iter(infos))
    for mode, tag in (("legacy", "L"), ("2026-07-28", "M")):
        try:
            got = anyio.run(_measure_paths, kernel, infos, mode, cells, tag)
        except BaseException as exc:
            if isinstance(exc, KeyboardInterrupt):
                raise
            out[mode] = {"error": f"{type(exc).__name__}: {exc}"[:400]}
            continue
        added = {}
        for name in infos:  # (not "cell_end": the kernel's stamps)
            if name == first:
                continue
            a, b = got[first]["per_cell_ms"], got[name]["per_cell_ms"]
            diffs = sorted(b[k] - a[k] for k in a.keys() & b.keys())
            added[name] = {"n": len(diffs), **_quantiles(diffs)}
        out[mode] = {**got, "added": added}
    return out


def _quantiles(values: list[float]) -> dict[str, Any]:
    if not values:
        return {"median_ms": None, "p10_ms": None, "p90_ms": None}
    pick = lambda q: values[min(len(values) - 1, int(len(values) * q))]  # noqa: E731
    return {"median_ms": values[len(values) // 2], "p10_ms": pick(0.1), "p90_ms": pick(0.9)}


def print_notification_rows(direct: dict[str, Any], other: dict[str, Any]) -> None:
    """Markdown rows: each era's notification median and p99, direct against through a layer."""
    for era in ("legacy", "2026-07-28"):
        a, b = direct.get(era, {}), other.get(era, {})
        for q in ("median", "p99"):
            x, y = a.get(f"{q}_ms"), b.get(f"{q}_ms")
            if x is None or y is None:
                print(f"| notification {era} {q} | {a.get('error', x)} | {b.get('error', y)} | |")
                continue
            print(f"| notification {era} {q} | {x:.2f} ms | {y:.2f} ms | {y - x:+.2f} ms |")
