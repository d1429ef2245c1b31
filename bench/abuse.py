"""Abuse figures for the hub in a real kernel: a reader's latency while others misbehave.

    .venv/bin/python bench/abuse.py [--seconds 10] [--tricklers 500] [--json]

Scenarios, each beside one authenticated keep-alive reader (``resources/read nb://vars/small``):
  baseline      the reader alone;
  chunked-noauth  two 900 KB uploads in 1-byte chunks without the token;
  chunked-auth    the same with the token (the body is decoded: shows the parser is linear);
  trickle       N connections trickling a request head one byte at a time (slowloris), reconnecting
                whenever the hub drops them;
  dropped       200 abruptly dropped GET/listen streams and cut-off requests: threads, fds, RSS of
                the kernel before and after.
Prints the reader's p50/p99, the kernel's CPU seconds per scenario and the attackers' outcomes.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import socket
import sys
import threading
import time
from pathlib import Path
from typing import Any

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from kernel_harness import Kernel

META = {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}}
UPLOAD = 900_000


def post(token: str | None, body: dict[str, Any] | bytes, extra: str = "") -> bytes:
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    auth = f"Authorization: Bearer {token}\r\n" if token else ""
    return (
        f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n{auth}Content-Type: application/json\r\n"
        f"Content-Length: {len(raw)}\r\n{extra}\r\n"
    ).encode() + raw


def read_reply(s: socket.socket, pending: bytearray) -> int:
    """Read one Content-Length response from ``s``; returns its status."""
    while b"\r\n\r\n" not in pending:
        chunk = s.recv(65536)
        if not chunk:
            raise ConnectionError("closed")
        pending += chunk
    end = pending.index(b"\r\n\r\n")
    head = bytes(pending[:end]).decode("latin-1").lower()
    length = int(head.split("content-length:", 1)[1].split("\r\n", 1)[0]) if "content-length:" in head else 0
    while len(pending) < end + 4 + length:
        chunk = s.recv(65536)
        if not chunk:
            raise ConnectionError("closed")
        pending += chunk
    status = int(head[9:12])
    del pending[: end + 4 + length]
    return status


def reader_main(port: int, token: str, stop: Any, results: Any) -> None:
    """One keep-alive client reading a resource in a loop (own process: the attackers' GIL is not its)."""
    request = post(
        token,
        {"jsonrpc": "2.0", "id": 1, "method": "resources/read", "params": {"uri": "nb://vars/small", "_meta": META}},
        "MCP-Protocol-Version: 2026-07-28\r\nMcp-Method: resources/read\r\nMcp-Name: nb://vars/small\r\n",
    )
    samples: list[float] = []
    errors = 0
    s = socket.create_connection(("127.0.0.1", port), timeout=30)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    pending = bytearray()
    while not stop.is_set():
        t0 = time.perf_counter()
        try:
            s.sendall(request)
            status = read_reply(s, pending)
        except OSError:
            errors += 1
            s = socket.create_connection(("127.0.0.1", port), timeout=30)
            pending.clear()
            continue
        samples.append(time.perf_counter() - t0)
        if status != 200:
            errors += 1
        time.sleep(0.005)
    results.put((samples, errors))


class Reader:
    """The reader process and its figures."""

    def __init__(self, port: int, token: str):
        ctx = multiprocessing.get_context("spawn")
        self.stop = ctx.Event()
        self.results = ctx.Queue()
        self.proc = ctx.Process(target=reader_main, args=(port, token, self.stop, self.results), daemon=True)
        self.samples: list[float] = []
        self.errors = 0

    def start(self) -> None:
        self.proc.start()
        time.sleep(1.0)  # the interpreter starts before the clock that matters

    def finish(self) -> None:
        self.stop.set()
        self.samples, self.errors = self.results.get(timeout=60)
        self.proc.join(30)

    def figures(self) -> dict[str, Any]:
        s = sorted(self.samples)
        if not s:
            return {"n": 0, "errors": self.errors}
        return {
            "n": len(s),
            "p50_ms": round(s[len(s) // 2] * 1e3, 2),
            "p99_ms": round(s[min(len(s) - 1, int(len(s) * 0.99))] * 1e3, 2),
            "max_ms": round(s[-1] * 1e3, 2),
            "errors": self.errors,
        }


def chunked_upload(port: int, token: str | None, out: dict[str, Any]) -> None:
    """900 KB in 1-byte chunks ("1\\r\\nx\\r\\n"), 64 chunks per write; records what came back."""
    t0 = time.perf_counter()
    s = socket.create_connection(("127.0.0.1", port), timeout=60)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    auth = f"Authorization: Bearer {token}\r\n" if token else ""
    s.sendall(
        f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n{auth}Content-Type: application/json\r\n"
        f"MCP-Protocol-Version: 2026-07-28\r\nMcp-Method: ping\r\nTransfer-Encoding: chunked\r\n\r\n".encode()
    )
    payload = b'{"jsonrpc":"2.0","id":1,"method":"ping","params":{"pad":"' + b"x" * (UPLOAD - 60) + b'"}}'
    sent = 0
    try:
        for i in range(0, len(payload), 64):
            s.sendall(b"".join(b"1\r\n%s\r\n" % payload[j : j + 1] for j in range(i, min(i + 64, len(payload)))))
            sent = i + 64
        s.sendall(b"0\r\n\r\n")
        status = read_reply(s, bytearray())
        out["status"] = status
    except OSError as exc:
        out["closed_after_bytes"] = sent
        out["error"] = type(exc).__name__
    out["seconds"] = round(time.perf_counter() - t0, 2)
    s.close()


def trickle(port: int, count: int, stop: threading.Event, out: dict[str, int]) -> None:
    """``count`` connections each sending one byte of a request head per round; reconnect when dropped."""
    head = b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nX-Pad: " + b"a" * 4000
    socks: list[list[Any]] = []
    for _ in range(count):
        try:
            socks.append([socket.create_connection(("127.0.0.1", port), timeout=5), 0])
        except OSError:
            out["connect_failed"] += 1
    while not stop.is_set():
        for entry in socks:
            s, pos = entry
            try:
                s.send(head[pos % len(head) : pos % len(head) + 1])
                entry[1] = pos + 1
                out["bytes"] += 1
            except OSError:
                out["dropped"] += 1
                s.close()
                try:
                    entry[0], entry[1] = socket.create_connection(("127.0.0.1", port), timeout=5), 0
                except OSError:
                    out["connect_failed"] += 1
        stop.wait(0.1)
    for s, _ in socks:
        s.close()


def scenario(name: str, kernel_proc: psutil.Process, port: int, token: str, seconds: float, attack: Any) -> dict:
    reader = Reader(port, token)
    reader.start()
    cpu0 = sum(kernel_proc.cpu_times()[:2])
    result: dict[str, Any] = {"scenario": name}
    try:
        attack(result)
        time.sleep(max(0.0, seconds - result.get("attack_seconds", 0)))
    finally:
        reader.finish()
    result["kernel_cpu_s"] = round(sum(kernel_proc.cpu_times()[:2]) - cpu0, 2)
    result["reader"] = reader.figures()
    return result


def dropped_streams(kernel: Kernel, proc: psutil.Process, port: int, token: str) -> dict[str, Any]:
    init = post(token, {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": "2025-11-25"}})
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(init)
        data = s.recv(65536).decode("latin-1")
    sid = data.lower().split("mcp-session-id:", 1)[1].split("\r\n", 1)[0].strip()
    get = (
        f"GET /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {token}\r\nAccept: text/event-stream\r\n"
        f"Mcp-Session-Id: {sid}\r\n\r\n"
    ).encode()
    listen = post(
        token,
        {
            "jsonrpc": "2.0",
            "id": "L",
            "method": "subscriptions/listen",
            "params": {"notifications": {"resourceSubscriptions": ["nb://vars/small"]}, "_meta": META},
        },
        "MCP-Protocol-Version: 2026-07-28\r\nMcp-Method: subscriptions/listen\r\n",
    )
    time.sleep(1)
    before = (proc.num_threads(), proc.num_fds(), proc.memory_info().rss)
    for i in range(200):
        s = socket.create_connection(("127.0.0.1", port), timeout=10)
        s.sendall([get, listen, init[:-10]][i % 3])
        if i % 3 != 2:
            s.recv(100)
        if i % 2 == 0:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
        s.close()
    time.sleep(2)
    after = (proc.num_threads(), proc.num_fds(), proc.memory_info().rss)
    state = kernel.run(
        "import json as _j, mcp_notebook as _m\n_t, _s = _m.hub().transport, _m.hub().server\n"
        "print(_j.dumps({'connections': len(_t.connections), 'streams': len(_t.streams), 'listens': len(_s.listens()),"
        " 'session_streams': sum(len(x.streams) for x in _s.sessions())}))"
    ).stdout.strip()
    return {
        "scenario": "dropped (200 streams/requests)",
        "threads": [before[0], after[0]],
        "fds": [before[1], after[1]],
        "rss_mb": [round(before[2] / 1e6, 1), round(after[2] / 1e6, 1)],
        "hub_state": json.loads(state),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--tricklers", type=int, default=500)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    kernel = Kernel()
    try:
        info = kernel.load_hub()
        kernel.run("small = {'a': 1, 'b': [1, 2, 3]}")
        port, token = int(info["url"].rsplit(":", 1)[1].split("/")[0]), info["token"]
        proc = psutil.Process(kernel.pid())
        results = [scenario("baseline", proc, port, token, args.seconds, lambda r: None)]

        def uploads(with_token: bool) -> Any:
            def attack(r: dict[str, Any]) -> None:
                outs: list[dict[str, Any]] = [{}, {}]
                t0 = time.perf_counter()
                threads = [
                    threading.Thread(target=chunked_upload, args=(port, token if with_token else None, o)) for o in outs
                ]
                for t in threads:
                    t.start()
                for t in threads:
                    t.join(120)
                r["attack_seconds"] = time.perf_counter() - t0
                r["uploads"] = outs

            return attack

        results.append(
            scenario("chunked-noauth (2 x 900 KB, 1-byte chunks)", proc, port, token, args.seconds, uploads(False))
        )
        results.append(
            scenario("chunked-auth (2 x 900 KB, 1-byte chunks)", proc, port, token, args.seconds, uploads(True))
        )

        def trickling(r: dict[str, Any]) -> None:
            stop = threading.Event()
            out = {"bytes": 0, "dropped": 0, "connect_failed": 0}
            t = threading.Thread(target=trickle, args=(port, args.tricklers, stop, out), daemon=True)
            t.start()
            time.sleep(args.seconds + 5)  # past the head deadline: drops and reconnects are in the figures
            stop.set()
            t.join(30)
            r["attack_seconds"] = args.seconds + 5
            r["tricklers"] = {"connections": args.tricklers, **out}

        results.append(scenario(f"trickle ({args.tricklers} slowloris connections)", proc, port, token, 0, trickling))
        results.append(dropped_streams(kernel, proc, port, token))
        stray = kernel.run("print('ok')").stdout.strip()
        results.append({"scenario": "kernel still answers", "ok": stray == "ok"})
    finally:
        kernel.shutdown()
    if args.json:
        print(json.dumps(results, indent=2))
        return
    for r in results:
        name = r.pop("scenario")
        print(f"== {name}")
        for key, value in r.items():
            print(f"   {key}: {value}")


if __name__ == "__main__":
    main()
