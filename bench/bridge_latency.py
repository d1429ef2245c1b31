"""What a read costs through `mcp-notebook bridge` with no selector (every kernel), as a host runs it:
the official SDK's stdio client against `python -m mcp_notebook bridge`, two kernels with hubs in a
runtime dir of their own, N sequential reads of `nb://vars/x` (the current kernel's) in each era.

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

import anyio
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


async def _reads(params: StdioServerParameters, mode: str, n: int) -> list[float]:
    times = []
    async with Client(params, mode=mode, cache=None) as client:
        for i in range(n + WARMUP):
            t0 = time.perf_counter()
            read = await client.read_resource("nb://vars/x")
            elapsed = time.perf_counter() - t0
            assert "'beta'" in read.contents[0].text, read
            if i >= WARMUP:
                times.append(elapsed)
    return times


def measure(runtime: Path, code: Path, mode: str, n: int) -> list[float]:
    """n reads through a bridge whose package comes from ``code``."""
    env = {**os.environ, "JUPYTER_RUNTIME_DIR": str(runtime), "PYTHONPATH": str(code)}
    params = StdioServerParameters(command=sys.executable, args=["-m", "mcp_notebook", "bridge"], env=env)
    return anyio.run(_reads, params, mode, n)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--reads", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=3, help="alternating rounds per bridge and era")
    ap.add_argument("--before", help="another source tree whose bridge is measured too")
    ap.add_argument("--out", default=str(ROOT / "bench" / "results" / "bridge_latency.json"))
    args = ap.parse_args()
    codes = {"this": ROOT} | ({"before": Path(args.before).resolve()} if args.before else {})
    runtime = Path(tempfile.mkdtemp(prefix="mcp-nb-bench-bridge-"))
    kernels: list[Kernel] = []
    start = os.getloadavg()
    try:
        for name in ("alpha", "beta"):  # beta runs a cell last: bare URIs address it
            k = Kernel(env={"JUPYTER_RUNTIME_DIR": str(runtime)})
            k.run(f"%config MCPHub.notebook_path = '{name}.ipynb'")
            k.load_hub()
            k.run(f"x = {name!r}")
            kernels.append(k)
        times: dict[str, list[float]] = {}
        for _ in range(args.rounds):
            for mode in ("legacy", "auto"):
                for label, code in codes.items():
                    times.setdefault(f"{label}/{mode}", []).extend(measure(runtime, code, mode, args.reads))
    finally:
        for k in kernels:
            k.shutdown()
    rows = [
        {"bridge": key.split("/")[0], "era": key.split("/")[1], "reads": len(v), **_pct(v)} for key, v in times.items()
    ]
    for row in rows:
        print(json.dumps(row), flush=True)
    load = {"loadavg_start": start, "loadavg_end": os.getloadavg(), "cpus": os.cpu_count()}
    print(json.dumps(load))
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps({"rows": rows, **load}, indent=2))


if __name__ == "__main__":
    main()
