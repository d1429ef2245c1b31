"""A notification's path, hop by hop: where the milliseconds between a cell's end and the SDK
clients' arrivals go, from a ``bench/jupyterhub_paced.py --trace DIR`` run.

    .venv/bin/python bench/notify_hops.py bench/results/jupyterhub_paced_{label}.json DIR

Every process the bench started wrote ``DIR/<pid>.tsv`` (mcp_notebook/hop_trace.py: time, hop,
thread, detail); the bench's JSON has each cell's end (stamped in the kernel) and each client's
arrival, on the same clock. For each run, phase and era: per hop, the median over cells of the
first time it was reached after the cell's end (ms), in the order a notification crosses them.
"""

from __future__ import annotations

import bisect
import json
import sys
from pathlib import Path
from typing import Any

URI = "nb://vars/counter"
WINDOW = 1.0  # seconds after a cell's end in which its hops are looked for


def role(header: str) -> str:
    if "ipykernel" in header:
        return "kernel"
    if "singleuser" in header:
        return "server"
    if "jupyterhub_service" in header:
        return "service"
    return "other"


def load(trace: Path) -> dict[str, list[tuple[float, str]]]:
    """``role.hop[.agent]`` -> sorted (time, detail) stamps, every process of that role together."""
    hops: dict[str, list[tuple[float, str]]] = {}
    for path in trace.glob("*.tsv"):
        who = "other"
        for line in path.read_text().splitlines():
            parts = line.split("\t")
            if parts[0] == "#":
                who = role(parts[1] if len(parts) > 1 else "")
                continue
            if len(parts) < 4:
                continue
            t, hop, detail = float(parts[0]), parts[1], parts[3]
            if hop == "pipe.read":  # the SDK client's stream (python-httpx) or the service's (no agent)
                hop += ".client" if "httpx" in detail else ".service"
            if URI not in detail and hop != "stream.push":  # (a push names no URI: the waker's)
                continue
            hops.setdefault(f"{who}.{hop}", []).append((t, detail))
    for stamps in hops.values():
        stamps.sort()
    return hops


def first_after(stamps: list[tuple[float, str]], t0: float) -> float | None:
    i = bisect.bisect_left(stamps, (t0, ""))
    return stamps[i][0] if i < len(stamps) and stamps[i][0] < t0 + WINDOW else None


def summary(era: dict[str, Any], hops: dict[str, list[tuple[float, str]]]) -> dict[str, float]:
    """Per hop (and each path's arrival), the median ms after the cell's end over the cells."""
    rows: dict[str, list[float]] = {}
    for key, t0 in (era.get("cell_end") or {}).items():
        for name, stamps in hops.items():
            t = first_after(stamps, t0)
            if t is not None:
                rows.setdefault(name, []).append((t - t0) * 1e3)
        for path in ("direct", "service"):
            t = ((era.get(path) or {}).get("arrived_at") or {}).get(key)
            if t is not None:
                rows.setdefault(f"client.arrived.{path}", []).append((t - t0) * 1e3)
    return {name: sorted(v)[len(v) // 2] for name, v in rows.items() if v}


SEGMENTS = (  # (name, from, to): per cell, the time between two hops
    ("cell end -> user's server reads the client's event", "", "server.pipe.read.client"),
    ("cell end -> user's server reads the service's event", "", "server.pipe.read.service"),
    ("user's server -> proxy -> service's listen read", "server.pipe.read.service", "service.listen.read"),
    ("service: read -> routed -> pushed to the client's stream", "service.listen.read", "service.stream.push"),
    ("service: pushed -> written on the loop (a thread hop)", "service.stream.push", "service.stream.write"),
    ("service written -> proxy -> SDK client", "service.stream.write", "client.arrived.service"),
    ("user's server read -> proxy -> SDK client (direct)", "server.pipe.read.client", "client.arrived.direct"),
    ("added: service arrival - direct arrival", "client.arrived.direct", "client.arrived.service"),
)


def segments(era: dict[str, Any], hops: dict[str, list[tuple[float, str]]]) -> dict[str, tuple[float, float, int]]:
    """Per segment of ``SEGMENTS``: (median, p90, cells) in ms over the cells that reached both ends."""
    got: dict[str, list[float]] = {}
    for key, t0 in (era.get("cell_end") or {}).items():
        at = {"": t0}
        for name, stamps in hops.items():
            t = first_after(stamps, t0)
            if t is not None:
                at[name] = t
        for path in ("direct", "service"):
            t = ((era.get(path) or {}).get("arrived_at") or {}).get(key)
            if t is not None:
                at[f"client.arrived.{path}"] = t
        for name, a, b in SEGMENTS:
            if a in at and b in at:
                got.setdefault(name, []).append((at[b] - at[a]) * 1e3)
    out = {}
    for name, values in got.items():
        values.sort()
        out[name] = (values[len(values) // 2], values[min(len(values) - 1, int(len(values) * 0.9))], len(values))
    return out


def main() -> int:
    results, trace = json.loads(Path(sys.argv[1]).read_text()), Path(sys.argv[2])
    hops = load(trace)
    for replicas, runs in results["deployments"].items():
        for users, run in runs.items():
            for phase in ("notify_direct", "notify_service"):
                for era_name in ("legacy", "2026-07-28"):
                    era = run[phase].get(era_name) or {}
                    med = summary(era, hops)
                    order = sorted(med.items(), key=lambda kv: kv[1])
                    print(f"\n{replicas} replica(s), {users} users, {phase} (reads through {phase[7:]}), {era_name}:")
                    for name, ms in order:
                        print(f"  {ms:7.2f} ms  {name}")
                    print("  segments, median / p90 ms (cells):")
                    for name, (p50, p90, n) in segments(era, hops).items():
                        print(f"  {p50:7.2f} / {p90:6.2f}  ({n})  {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
