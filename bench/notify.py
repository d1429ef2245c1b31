"""Notification latency: cell end (stamped in the kernel) to resources/updated at an SDK client.

The official SDK client (mcp 2.3.0) subscribes in legacy mode (resources/subscribe, GET stream)
or listens in the 2026-07-28 era (subscriptions/listen). Each cell rebinds the watched variable;
the kernel's stamp hook records time.time() at post_run_cell, the client records time.time() on
arrival, and cells are paired with the first notification that follows them.
"""

from __future__ import annotations

import contextlib
import subprocess
import sys
import threading
import time
import warnings
from pathlib import Path
from typing import Any

import anyio
import httpx2
import mcp_types as types
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

URI = "nb://vars/counter"
MARKER = "bench-notify"


class _ClientProcess:
    """bench/notify_client.py at one path: its arrivals, read from its output on a thread."""

    def __init__(self, info: dict[str, Any], mode: str):
        self.arrivals: list[float] = []
        self.imported = threading.Event()
        self.ready = threading.Event()
        self.changed = threading.Condition()
        script = Path(__file__).resolve().parent / "notify_client.py"
        self.proc = subprocess.Popen(
            [sys.executable, str(script), info["url"], mode],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        assert self.proc.stdin is not None
        self.proc.stdin.write((info.get("token") or "") + "\n")
        self.proc.stdin.flush()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            if line.strip() in ("imported", "ready"):
                (self.imported if line.strip() == "imported" else self.ready).set()
                continue
            with contextlib.suppress(ValueError), self.changed:
                self.arrivals.append(float(line))
                self.changed.notify_all()
        self.imported.set()  # it ended (an error): nobody waits for it
        self.ready.set()

    def go(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write("go\n")
        self.proc.stdin.flush()

    def wait_past(self, before: int, timeout: float = 5.0) -> bool:
        with self.changed:
            return self.changed.wait_for(lambda: len(self.arrivals) > before, timeout)

    def close(self) -> None:
        with contextlib.suppress(OSError):
            assert self.proc.stdin is not None
            self.proc.stdin.close()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(5)


def _measure_paths(kernel: Any, infos: dict[str, dict[str, Any]], mode: str, cells: int, tag: str) -> dict[str, Any]:
    """Every path of ``infos`` listening at once, each client in a process of its own, opened in
    the order of ``infos`` (the kernel writes its listens in the order they opened); each cell's
    arrival at each (cells interleaved: the paths share every cell, their difference is paired)."""
    paths: dict[str, _ClientProcess] = {}
    try:
        paths = {name: _ClientProcess(info, mode) for name, info in infos.items()}  # importing together
        for name, p in paths.items():  # then connected one after the other, in order
            if not p.imported.wait(60):
                raise RuntimeError(f"the {name} client did not start")
            p.go()
            if not p.ready.wait(60) or p.proc.poll() is not None:
                raise RuntimeError(f"the {name} client did not start")
        cell_of: dict[str, dict[str, int]] = {name: {} for name in infos}
        missing = dict.fromkeys(infos, 0)
        for i in range(-1, cells):  # a warm-up cell: proves the streams are live before timing starts
            key = f"{tag}{i}"
            before = {name: len(p.arrivals) for name, p in paths.items()}
            kernel.run(f"counter = counter + 1  # {MARKER} {key}")
            for name, p in paths.items():
                if p.wait_past(before[name]):
                    if i >= 0:
                        cell_of[name][key] = before[name]
                elif i >= 0:
                    missing[name] += 1
        stamps = kernel.json(f"kside.stamps_for({MARKER!r})")
    finally:
        for p in paths.values():
            p.close()
    out: dict[str, Any] = {}
    for name, p in paths.items():
        lat = {k: (p.arrivals[idx] - stamps[k]) * 1e3 for k, idx in cell_of[name].items() if k in stamps}
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


def notification_pairs(kernel: Any, infos: dict[str, dict[str, Any]], cells: int, base: str) -> dict[str, Any]:
    """Both eras, every path of ``infos`` timed on the same cells (see ``_measure_paths``); under
    each era's ``added`` what each other path adds to ``base``, cell by cell: median, p10, p90."""
    kernel.run("counter = 100000")
    out: dict[str, Any] = {}
    first = base
    for mode, tag in (("legacy", "L"), ("2026-07-28", "M")):
        try:
            got = _measure_paths(kernel, infos, mode, cells, tag)
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
