"""The reader process of bench/cellspeed.py: obeys the board the timed cell writes (bench/speed_cell.py).

    python bench/speed_reader.py --board FILE --own INFO.json --other INFO.json --client sdk|one-write

Per command: ``alone`` closes every connection; ``own`` / ``other`` connects to that hub (one warm
read) if not connected yet; then it acknowledges and, until the next command, reads ``nb://vars/x``
open loop at ``--rate`` a second (a random phase per block, so the reads' place in a block varies).
A ``gap`` command is acknowledged as soon as no read is in flight. It polls the board every 1 ms
in every arm alike. At ``end`` it prints one JSON line: per block, the reads done, their latencies
and this process's CPU time. Every loop is bounded by a deadline; traffic stays on 127.0.0.1.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import random
import socket
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

import loadgen
from speed_cell import END, GAP, OTHER, OWN, Board

URI = "nb://vars/x"


class OneWrite:
    """A raw-socket client sending each request (head and body) in one write."""

    def __init__(self, info: dict[str, Any]) -> None:
        headers, body = loadgen.stateless_request("resources/read", {"uri": URI})
        headers["Authorization"] = f"Bearer {info['token']}"
        self.addr = ("127.0.0.1", int(info["url"].split(":")[2].split("/")[0]))
        head = f"POST /mcp HTTP/1.1\r\nHost: {self.addr[0]}:{self.addr[1]}\r\nContent-Length: {len(body)}\r\n"
        self.request = (head + "".join(f"{k}: {v}\r\n" for k, v in headers.items()) + "\r\n").encode() + body
        self.sock: socket.socket | None = None

    async def open(self) -> None:
        self.sock = socket.create_connection(self.addr, timeout=30)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        await self.read()

    async def read(self) -> bool:
        assert self.sock is not None
        self.sock.sendall(self.request)
        data = b""
        while b"\r\n\r\n" not in data or len(data) < data.index(b"\r\n\r\n") + 4 + _length(data):
            chunk = self.sock.recv(65536)
            if not chunk:
                raise ConnectionError("the hub closed the connection")
            data += chunk
        return b'"result"' in data

    async def close(self) -> None:
        if self.sock is not None:
            self.sock.close()
            self.sock = None


def _length(data: bytes) -> int:
    head = data[: data.index(b"\r\n\r\n")].lower()
    return int(head.split(b"content-length:")[1].split(b"\r\n")[0])


class Sdk:
    """The official MCP SDK client (mcp 2.x over httpx), as tests/sdk.py connects it."""

    def __init__(self, info: dict[str, Any]) -> None:
        self.info = info
        self.stack: contextlib.AsyncExitStack | None = None
        self.client: Any = None

    async def open(self) -> None:
        from sdk import connect

        self.stack = contextlib.AsyncExitStack()
        self.client, _inbox = await self.stack.enter_async_context(connect(self.info))
        await self.read()

    async def read(self) -> bool:
        res = await self.client.read_resource(URI)
        return bool(res.contents)

    async def close(self) -> None:
        if self.stack is not None:
            await self.stack.aclose()
            self.stack = None


async def serve_board(board: Board, clients: dict[int, Any], rate: float, seed: int, limit_s: float) -> dict:
    """Follow the board's commands until ``end`` (or ``limit_s``); the per-block record."""
    rng = random.Random(seed)
    blocks: list[dict[str, Any]] = []
    seen, arm, connected = 0, GAP, None
    nxt, cur = 0.0, None
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        seq, cmd = board.read_command()
        if seq != seen:
            if cmd == END:
                break
            if cur is not None:
                cur["cpu_ms"] = round((time.process_time() - cur.pop("_cpu0")) * 1e3, 3)
                cur = None
            if cmd != GAP:
                want = {OWN: OWN, OTHER: OTHER}.get(cmd)
                if connected is not None and connected != want:
                    await clients[connected].close()
                    connected = None
                if want is not None and connected is None:
                    await clients[want].open()
                    connected = want
                cur = {"arm": cmd, "lat_ms": [], "errors": 0, "_cpu0": time.process_time()}
                blocks.append(cur)
                nxt = time.perf_counter() + rng.uniform(0, 1 / rate)
            seen, arm = seq, cmd
            board.ack(seq)
        if arm in (OWN, OTHER) and cur is not None and time.perf_counter() >= nxt:
            t0 = time.perf_counter()
            ok = await clients[arm].read()
            cur["lat_ms"].append(round((time.perf_counter() - t0) * 1e3, 4))
            cur["errors"] += not ok
            nxt = max(nxt + 1 / rate, time.perf_counter() - 1 / rate)  # late by over a tick: no burst
        await asyncio.sleep(0.001)
    if connected is not None:
        await clients[connected].close()
    return {"blocks": blocks, "core": _core(), "affinity": sorted(os.sched_getaffinity(0))}


def _core() -> int:
    try:
        with open("/proc/self/stat") as f:
            return int(f.read().rsplit(")", 1)[1].split()[36])
    except (OSError, ValueError, IndexError):
        return -1


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--board", required=True)
    ap.add_argument("--own", required=True, help="this kernel's runtime info (JSON file)")
    ap.add_argument("--other", required=True, help="the control arm's idle kernel's runtime info (JSON file)")
    ap.add_argument("--client", choices=("sdk", "one-write"), default="sdk")
    ap.add_argument("--rate", type=float, default=20.0)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--pin", type=int, default=-1, help="pin this process to that core")
    ap.add_argument("--limit-s", type=float, default=900.0)
    args = ap.parse_args()
    if args.pin >= 0:
        os.sched_setaffinity(0, {args.pin})
    kind = Sdk if args.client == "sdk" else OneWrite
    clients = {OWN: kind(json.loads(Path(args.own).read_text())), OTHER: kind(json.loads(Path(args.other).read_text()))}
    board = Board(args.board)
    board.ack(0)
    out = asyncio.run(serve_board(board, clients, args.rate, args.seed, args.limit_s))
    print(json.dumps(out))


if __name__ == "__main__":
    main()
