"""Notification latency: cell end (stamped in the kernel) to resources/updated at an SDK client.

The official SDK client (mcp 2.3.0) subscribes in legacy mode (resources/subscribe, GET stream)
or listens in the 2026-07-28 era (subscriptions/listen). Each cell rebinds the watched variable;
the kernel's stamp hook records time.time() at post_run_cell, the client records time.time() on
arrival, and cells are paired with the first notification that follows them.
"""

from __future__ import annotations

import time
import warnings
from typing import Any

import anyio
import httpx2
import mcp_types as types
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

URI = "nb://vars/counter"
MARKER = "bench-notify"


async def _measure(kernel: Any, info: dict[str, Any], mode: str, cells: int, tag: str) -> dict[str, Any]:
    arrivals: list[float] = []
    changed = anyio.Event()
    state = {"event": changed}

    def arrived() -> None:
        arrivals.append(time.time())
        state["event"].set()
        state["event"] = anyio.Event()

    async def on_message(msg: Any) -> None:
        if mode == "legacy" and isinstance(msg, types.ResourceUpdatedNotification) and str(msg.params.uri) == URI:
            arrived()

    async def run_cells() -> dict[str, Any]:
        cell_of: dict[str, int] = {}
        missing = 0
        # warm-up cell: proves the stream is live before timing starts
        for i in range(-1, cells):
            key = f"{tag}{i}"
            before = len(arrivals)
            await anyio.to_thread.run_sync(lambda k=key: kernel.run(f"counter = counter + 1  # {MARKER} {k}"))
            with anyio.move_on_after(5):
                while len(arrivals) <= before:
                    await state["event"].wait()
            if len(arrivals) > before:
                if i >= 0:
                    cell_of[key] = before
            elif i >= 0:
                missing += 1
        stamps = await anyio.to_thread.run_sync(lambda: kernel.json(f"kside.stamps_for({MARKER!r})"))
        lat = sorted((arrivals[idx] - stamps[key]) * 1e3 for key, idx in cell_of.items() if key in stamps)
        return {
            "cells": cells,
            "received": len(lat),
            "missing": missing,
            "extra": len(arrivals) - len(lat) - 1,
            **_ms(lat),
        }

    headers = {"Authorization": f"Bearer {info['token']}"} if info.get("token") else {}
    async with httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30, read=300)) as http:
        transport = streamable_http_client(info["url"], http_client=http)
        async with Client(transport, mode=mode, message_handler=on_message, cache=None) as client:
            if mode == "legacy":
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    await client.subscribe_resource(URI)
                await anyio.sleep(0.5)  # the client opens its GET stream after initialize
                return await run_cells()
            async with client.listen(resource_subscriptions=[URI]) as sub:
                result: dict[str, Any] = {}
                async with anyio.create_task_group() as tg:

                    async def reader() -> None:
                        async for ev in sub:
                            if getattr(ev, "uri", None) is not None and str(ev.uri) == URI:
                                arrived()

                    tg.start_soon(reader)
                    result = await run_cells()
                    tg.cancel_scope.cancel()
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
