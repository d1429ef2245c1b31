"""What a read costs through `mcp-notebook bridge` with no selector (every kernel), as a host runs it:
the official SDK's stdio client against `python -m mcp_notebook bridge`, two kernels with hubs in a
runtime dir of their own, N sequential reads of `nb://vars/x` (the current kernel's) in each era:
latency (p50, p90) and the CPU time the bridge process spends per read (user + system, its front
included; steadier than latency on a busy machine).

`--before PATH` also measures the bridge of another source tree (e.g. `git archive` of main into
/tmp/base) against the same kernels, in alternating rounds, so both see the same machine load.

    .venv/bin/python bench/bridge_latency.py [--reads 200] [--rounds 3] [--before /tmp/base]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio
import psutil
from mcp import Client
from mcp.client.stdio import StdioServerParameters

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
from kernel_harness import Kernel  # noqa: E402

WARMUP = 20


def _pct(values: list[float]) -> dict[str, float]:
    values = sorted(values)
    return {
        "p50_ms": round(statistics.median(values) * 1e3, 3),
        "p90_ms": round(values[min(len(values) - 1, int(len(values) * 0.9))] * 1e3, 3),
    }


def _cpu(proc: psutil.Process) -> float:
    t = proc.cpu_times()
    return t.user + t.system


async def _reads(params: StdioServerParameters, mode: str, n: int) -> tuple[list[float], float]:
    """Latencies of n reads after a warm-up, and the CPU seconds the bridge spent on them."""
    times = []
    async with Client(params, mode=mode, cache=None) as client:
        (bridge,) = [p for p in psutil.Process().children() if "bridge" in p.cmdline()]
        cpu0 = 0.0
        for i in range(n + WARMUP):
            if i == WARMUP:
                cpu0 = _cpu(bridge)
            t0 = time.perf_counter()
            read = await client.read_resource("nb://vars/x")
            elapsed = time.perf_counter() - t0
            assert "'beta'" in read.contents[0].text, read
            if i >= WARMUP:
                times.append(elapsed)
        return times, _cpu(bridge) - cpu0


def measure(runtime: Path, code: Path, mode: str, n: int) -> tuple[list[float], float]:
    """n reads through a bridge whose package comes from ``code``."""
    env = {**os.environ, "JUPYTER_RUNTIME_DIR": str(runtime), "PYTHONPATH": str(code)}
    args = ["-m", "mcp_notebook", "bridge"]  # run from ``code``: `-m` puts the working directory first
    params = StdioServerParameters(command=sys.executable, args=args, env=env, cwd=str(code))
    return anyio.run(_reads, params, mode, n)


def run(codes: dict[str, Path], reads: int, rounds: int) -> list[dict[str, Any]]:
    """Two kernels, then ``rounds`` alternating rounds of each bridge in each era."""
    runtime = Path(tempfile.mkdtemp(prefix="mcp-nb-bench-bridge-"))
    kernels: list[Kernel] = []
    times: dict[tuple[str, str], list[float]] = {}
    cpu: dict[tuple[str, str], float] = {}
    try:
        for name in ("alpha", "beta"):  # beta runs a cell last: bare URIs address it
            k = Kernel(env={"JUPYTER_RUNTIME_DIR": str(runtime)})
            k.run(f"%config MCPHub.notebook_path = '{name}.ipynb'")
            k.load_hub()
            k.run(f"x = {name!r}")
            kernels.append(k)
        for _ in range(rounds):
            for mode in ("legacy", "auto"):
                for label, code in codes.items():
                    got, spent = measure(runtime, code, mode, reads)
                    times.setdefault((label, mode), []).extend(got)
                    cpu[label, mode] = cpu.get((label, mode), 0.0) + spent
    finally:
        for k in kernels:
            k.shutdown()
    return [
        {
            "bridge": label,
            "era": mode,
            "reads": len(v),
            **_pct(v),
            "cpu_ms_per_read": round(cpu[label, mode] / len(v) * 1e3, 3),
        }
        for (label, mode), v in times.items()
    ]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--reads", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=3, help="alternating rounds per bridge and era")
    ap.add_argument("--before", help="another source tree whose bridge is measured too")
    ap.add_argument("--out", default=str(ROOT / "bench" / "results" / "bridge_latency.json"))
    args = ap.parse_args()
    codes = {"this": ROOT} | ({"before": Path(args.before).resolve()} if args.before else {})
    start = os.getloadavg()
    rows = run(codes, args.reads, args.rounds)
    for row in rows:
        print(json.dumps(row), flush=True)
    load = {"loadavg_start": start, "loadavg_end": os.getloadavg(), "cpus": os.cpu_count()}
    print(json.dumps(load))
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps({"rows": rows, **load}, indent=2))


if __name__ == "__main__":
    main()
