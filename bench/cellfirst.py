"""The cell comes first (issue #26): reads while a pure-Python cell runs, with the clients people use,
and what a reading assistant costs the cell.

    .venv/bin/python bench/cellfirst.py [--seconds 4] [--switch-ms 0.5]

1. Sequential ``resources/read`` of a small variable, idle and during a busy cell, with the
   **official MCP Python SDK client** (mcp 2.x over httpx: request head and body in two writes)
   and with a raw-socket client that sends each request in one write. Each SDK series also reports
   the client's own CPU time per read (``client_cpu_ms_per_read``: building the request, parsing and
   validating the reply in this process), the floor under its latency on this machine; the
   one-write client's latency is mostly the hub's part. The output names the machine, the Python
   and the load average: quote a figure with them.
2. The cell's own speed (a fixed pure-Python workload, timed inside the kernel) with nobody
   reading, and while the SDK client reads at 20 requests/s; blocks alternate so drift hits both.
   ``--readers sdk,one-write`` times it again with the one-write client reading instead (its own
   CPU is near nothing, so its slowdown is what the hub costs the cell, not what the client does).
   With ``--control``, a third arm: the same client reading a second, idle kernel's hub at the same
   rate while the cell runs, which is what the client and a serving hub cost this machine apart from
   the cell's own process (its GIL). Subtract it to see what the hub costs its own cell.
Every loop is bounded by a count or a deadline; all traffic stays on 127.0.0.1.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

import cellspeed
import loadgen
import sections as S

SPIN = "import time as _t\n_d = _t.time() + {s}\nwhile _t.time() < _d:\n    pass"
# A fixed amount of pure-Python work (dict, int and str operations), timed in the kernel.
WORK = (
    "import time as _t\n_t0 = _t.perf_counter()\n_acc = {{}}\n"
    "for _i in range({n}):\n    _acc[_i % 1000] = str(_i * 3)[-2:] + 'x'\n"
    "kside.emit(_t.perf_counter() - _t0)\ndel _acc, _i, _t0"
)


def _pcts(lat: list[float], errors: int = 0) -> dict[str, Any]:
    lat = sorted(lat)
    if not lat:
        return {"n": 0, "errors": errors}
    pick = lambda q: round(lat[min(len(lat) - 1, int(len(lat) * q))], 3)  # noqa: E731
    return {"n": len(lat), "errors": errors, "p50_ms": pick(0.5), "p90_ms": pick(0.9), "p99_ms": pick(0.99)}


async def _sdk_reads(info: dict[str, Any], seconds: float, rate: float = 0.0, stop: Any = None) -> dict[str, Any]:
    """Sequential reads with the official SDK client for ``seconds`` (or until ``stop`` is set);
    ``rate`` > 0 paces them (requests/s)."""
    from sdk import connect

    lat: list[float] = []
    errors = 0
    async with connect(info) as (client, _inbox):
        await client.read_resource("nb://vars/x")  # discovery / handshake and a warm connection
        cpu0 = time.process_time()  # this process: the SDK client's own cost (its floor for a read)
        deadline = time.perf_counter() + seconds
        nxt = time.perf_counter()
        while time.perf_counter() < deadline and len(lat) < 200_000 and not (stop and stop.is_set()):
            if rate:
                nxt += 1 / rate
                await asyncio.sleep(max(0.0, nxt - time.perf_counter()))
            t0 = time.perf_counter()
            try:
                res = await client.read_resource("nb://vars/x")
                ok = bool(res.contents)
            except Exception:
                ok = False
            lat.append((time.perf_counter() - t0) * 1e3)
            errors += not ok
        cpu_ms = (time.process_time() - cpu0) * 1e3
    return _pcts(lat, errors) | {"client_cpu_ms_per_read": round(cpu_ms / max(1, len(lat)), 3)}


def _raw_reads(
    info: dict[str, Any], seconds: float, gap_s: float = 0.001, rate: float = 0.0, stop: Any = None
) -> dict[str, Any]:
    """Sequential reads from a client that writes each request (head and body) in one send, pausing
    ``gap_s`` between them (as a client does some work of its own: without it, a client that sends
    the next request within microseconds keeps the hub thread holding the GIL, which starves the
    cell rather than measuring a read); ``rate`` > 0 paces them instead (requests/s), until
    ``seconds`` pass or ``stop`` is set."""
    headers, body = loadgen.stateless_request("resources/read", {"uri": "nb://vars/x"})
    headers["Authorization"] = f"Bearer {info['token']}"
    host, port = "127.0.0.1", int(info["url"].split(":")[2].split("/")[0])
    head = f"POST /mcp HTTP/1.1\r\nHost: {host}:{port}\r\nContent-Length: {len(body)}\r\n"
    head += "".join(f"{k}: {v}\r\n" for k, v in headers.items()) + "\r\n"
    request = head.encode() + body
    lat: list[float] = []
    errors = 0
    with socket.create_connection((host, port), timeout=30) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        deadline = time.perf_counter() + seconds
        nxt = time.perf_counter()
        while time.perf_counter() < deadline and len(lat) < 200_000 and not (stop and stop.is_set()):
            if rate:
                nxt += 1 / rate
                time.sleep(max(0.0, nxt - time.perf_counter()))
            else:
                time.sleep(gap_s)
            t0 = time.perf_counter()
            sock.sendall(request)
            data = b""
            while b"\r\n\r\n" not in data or len(data) < data.index(b"\r\n\r\n") + 4 + _length(data):
                chunk = sock.recv(65536)
                if not chunk:
                    raise ConnectionError("the hub closed the connection")
                data += chunk
            lat.append((time.perf_counter() - t0) * 1e3)
            errors += b'"result"' not in data
    return _pcts(lat, errors)


def _length(data: bytes) -> int:
    head = data[: data.index(b"\r\n\r\n")].lower()
    return int(head.split(b"content-length:")[1].split(b"\r\n")[0])


def busy_reads(k: S.BenchKernel, info: dict[str, Any], seconds: float) -> dict[str, Any]:
    """SDK-client and one-write reads, idle and during a pure-Python cell."""
    out: dict[str, Any] = {"busy_s": seconds}
    for client in ("sdk", "one-write"):
        reads = (lambda s: asyncio.run(_sdk_reads(info, s))) if client == "sdk" else (lambda s: _raw_reads(info, s))
        out[f"{client}/idle"] = S.guarded(reads, min(2.0, seconds / 2))
        msg_id = k.execute_nowait(SPIN.format(s=seconds + 1.5))
        time.sleep(0.3)
        out[f"{client}/busy"] = S.guarded(reads, seconds)
        k.wait_idle(msg_id, timeout=seconds + 60)
    return out


def _work_size(k: S.BenchKernel, target_s: float) -> int:
    n = 200_000
    for _ in range(6):  # bounded calibration: about target_s of work
        took = k.json(WORK.format(n=n))
        if took > target_s / 2:
            break
        n *= 2
    return max(10_000, int(n * target_s / max(took, 1e-3)))


def _read_during(
    k: S.BenchKernel, info: dict[str, Any], rate: float, n: int, cell_s: float, out: dict, reader: str = "sdk"
) -> float:
    """One timed cell while a client (a thread of this process: the SDK's, or the one-write client)
    reads ``info``'s hub at ``rate``/s."""
    stop = threading.Event()
    seconds = cell_s * 4 + 30
    if reader == "sdk":
        target = lambda: out.update(asyncio.run(_sdk_reads(info, seconds, rate, stop)))  # noqa: E731
    else:
        target = lambda: out.update(_raw_reads(info, seconds, rate=rate, stop=stop))  # noqa: E731
    th = threading.Thread(target=target, daemon=True)
    th.start()
    time.sleep(1.0)  # connected and reading before the cell starts
    took = k.json(WORK.format(n=n))
    stop.set()
    th.join(60)
    return took


ORDERS = [("alone", "own", "other"), ("own", "other", "alone"), ("other", "alone", "own")]


def cell_slowdown(
    k: S.BenchKernel,
    info: dict[str, Any],
    rate: float,
    blocks: int,
    cell_s: float,
    other: dict[str, Any] | None = None,
    reader: str = "sdk",
) -> dict[str, Any]:
    """The same pure-Python cell with nobody reading and while a client (``reader``: the official
    SDK's, or the one-write client, whose own cost is near nothing) reads at ``rate``/s.

    With ``other`` (the runtime info of a second kernel's hub, idle), a control arm: the same client
    reads that hub at the same rate while this kernel's cell runs. Its slowdown is what the client
    and a serving hub cost the machine without touching the cell's process (its GIL); the
    difference is the hub's own cost to its cell."""
    n = _work_size(k, cell_s)
    times: dict[str, list[float]] = {"alone": [], "own": [], "other": []}
    reads: dict[str, Any] = {}
    control: dict[str, Any] = {}
    for block in range(blocks):
        # The arms in turn (every order of the rotation, reversed on odd blocks), so a drift of the
        # host's speed within a block hits every arm alike over the run.
        order = ORDERS[(block // 2) % 3] if other else (("alone", "own") if block % 2 == 0 else ("own", "alone"))
        if other and block % 2:
            order = order[::-1]
        for arm in order:
            if arm == "alone":
                times["alone"].append(k.json(WORK.format(n=n)))
            elif arm == "own":
                times["own"].append(_read_during(k, info, rate, n, cell_s, reads, reader))
            else:
                times["other"].append(_read_during(k, other, rate, n, cell_s, control, reader))
    alone, read = times["alone"], times["own"]
    a, r = sorted(alone), sorted(read)
    med = lambda v: v[len(v) // 2]  # noqa: E731
    paired = sorted((x / y - 1) * 100 for x, y in zip(read, alone, strict=True))  # each pair ran back to back
    res = {
        "reader": reader,
        "rate_per_s": rate,
        "work_iterations": n,
        "alone_s": [round(x, 4) for x in alone],
        "reading_s": [round(x, 4) for x in read],
        "slowdown_pct_median": round((med(r) / med(a) - 1) * 100, 2),
        "slowdown_pct_min": round((r[0] / a[0] - 1) * 100, 2),
        "slowdown_pct_paired_median": round(med(paired), 2),
        "spread_pct": {"alone": round((a[-1] / a[0] - 1) * 100, 2), "reading": round((r[-1] / r[0] - 1) * 100, 2)},
        "reads_during": reads,
    }
    if other:
        o = sorted(times["other"])
        paired_o = sorted((x / y - 1) * 100 for x, y in zip(times["other"], alone, strict=True))
        res |= {
            "other_hub_s": [round(x, 4) for x in times["other"]],
            "control_slowdown_pct_median": round((med(o) / med(a) - 1) * 100, 2),
            "control_slowdown_pct_paired_median": round(med(paired_o), 2),
            "own_vs_control_pct_median": round((med(r) / med(o) - 1) * 100, 2),
            "control_reads_during": control,
        }
    return res


def run(prof: dict[str, Any], config: str = "") -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="mcpnb-cellfirst-") as runtime:
        k = S.BenchKernel(runtime)
        try:
            if config:
                k.run(config)
            k.run("%load_ext mcp_notebook")
            info = k.info()
            k.run("x = 1\nkside.define_vars(1000)")
            res = {"busy": busy_reads(k, info, prof["busy_s"])}
            other = _other_hub(runtime) if prof.get("control") or prof.get("pairs") else None
            try:
                for reader in prof.get("readers", ("sdk",)):
                    tail = "" if reader == "sdk" else f"_{reader.replace('-', '_')}"
                    if prof.get("pairs") and other:
                        res["cell_speed" + tail] = S.guarded(
                            cellspeed.measure,
                            k,
                            info,
                            other[1],
                            reader,
                            prof["pairs"],
                            prof.get("block_s", 0.3),
                            prof.get("pair_rate", 20.0),
                            pin=prof.get("pin", False),
                        )
                    if not prof["slow_blocks"]:
                        continue
                    res["cell_slowdown" + tail] = S.guarded(
                        cell_slowdown,
                        k,
                        info,
                        20.0,
                        prof["slow_blocks"],
                        prof["slow_cell_s"],
                        other[1] if other and prof.get("control") else None,
                        reader,
                    )
            finally:
                if other:
                    other[0].shutdown()
            return res
        finally:
            k.shutdown()


def _other_hub(runtime: str) -> tuple[S.BenchKernel, dict[str, Any]]:
    """A second kernel with the hub loaded and ``x`` defined, left idle: the control arm's server."""
    other = S.BenchKernel(tempfile.mkdtemp(prefix="other-", dir=runtime))
    other.run("%load_ext mcp_notebook\nx = 1")
    return other, other.info()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=float, default=4.0, help="how long each busy-cell read series lasts")
    ap.add_argument(
        "--blocks", type=int, default=5, help="alternating blocks of the cell-slowdown measurement (0: skip it)"
    )
    ap.add_argument("--cell-seconds", type=float, default=2.0, help="length of the timed pure-Python cell")
    ap.add_argument("--config", default="", help="%%config lines run before loading (e.g. MCPHub settings)")
    ap.add_argument(
        "--control",
        action="store_true",
        help="also time the cell while the same client reads a second, idle kernel's hub (what the client and "
        "a serving hub cost the machine, apart from the cell's process)",
    )
    ap.add_argument(
        "--readers",
        default="sdk",
        help="comma-separated clients reading during the timed cell: sdk (the official SDK client), one-write "
        "(a raw-socket client whose own CPU is near nothing, so the slowdown is the hub's); default sdk",
    )
    ap.add_argument(
        "--pairs",
        type=int,
        default=0,
        help="the cell's own speed measured to 1 %% (bench/cellspeed.py): this many groups of short blocks "
        "(alone, read, control arm) in random order, in one long cell; 0 (default) skips it",
    )
    ap.add_argument("--block-seconds", type=float, default=0.3, help="length of each short block (--pairs)")
    ap.add_argument(
        "--pair-rate",
        type=float,
        default=20.0,
        help="reads a second during --pairs' read arms (default 20; a higher rate magnifies the cost of one read)",
    )
    ap.add_argument(
        "--pin",
        action="store_true",
        help="with --pairs: the cell's thread on core 1 and the reader process on core 0 (2 cores: they never share one)",
    )
    args = ap.parse_args()
    readers = tuple(r.strip() for r in args.readers.split(",") if r.strip())
    if not readers or set(readers) - {"sdk", "one-write"}:
        ap.error("--readers takes sdk and/or one-write")
    prof = {
        "readers": readers,
        "busy_s": args.seconds,
        "slow_blocks": args.blocks,
        "slow_cell_s": args.cell_seconds,
        "control": args.control,
        "pairs": args.pairs,
        "block_s": args.block_seconds,
        "pin": args.pin,
        "pair_rate": args.pair_rate,
    }
    start = os.getloadavg()
    res = run(prof, args.config)
    res |= {"machine": S.machine_facts(), "loadavg_start": start, "loadavg_end": os.getloadavg()}
    print(json.dumps(res, indent=1))


if __name__ == "__main__":
    main()
