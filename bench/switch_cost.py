"""What a shorter GIL switch interval costs pure-Python work split over 1, 2 and 4 threads (a cell
running its own CPU-bound threads), with nobody else wanting the GIL.

    .venv/bin/python bench/switch_cost.py [--blocks 5] [--work 2000000] [--intervals-us 5000,500,300,250]

The same fixed amount of work (dict, int and str operations, as bench/cellfirst.py's cell) runs in
every configuration; blocks alternate the intervals so drift hits all of them. Prints, per thread
count and interval, the median wall time and this process's CPU time with their change against
the first interval (CPython's default 5 ms), the spread of the blocks, and the voluntary context
switches a second (the GIL hand-offs, about). Only the switch counts survive a machine others
load; quote the times from a quiet run.
Every loop is bounded by a count.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import sections as S


def _work(n: int) -> None:
    acc: dict[int, str] = {}
    for i in range(n):
        acc[i % 1000] = str(i * 3)[-2:] + "x"


def _timed(threads: int, work: int) -> tuple[float, float, int]:
    """Wall seconds, this process's CPU seconds and its voluntary context switches for ``work``
    iterations split over ``threads`` threads."""
    share = work // threads
    pool = [threading.Thread(target=_work, args=(share,)) for _ in range(threads)]
    r0, c0, t0 = resource.getrusage(resource.RUSAGE_SELF), time.process_time(), time.perf_counter()
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    return wall, cpu, resource.getrusage(resource.RUSAGE_SELF).ru_nvcsw - r0.ru_nvcsw


def run(blocks: int, work: int, intervals_us: list[int], thread_counts: tuple[int, ...] = (1, 2, 4)) -> dict[str, Any]:
    before = sys.getswitchinterval()
    times: dict[tuple[int, int], list[tuple[float, float, int]]] = {
        (t, i): [] for t in thread_counts for i in intervals_us
    }
    try:
        _timed(1, work // 4)  # warm up
        for b in range(blocks):
            order = intervals_us if b % 2 == 0 else intervals_us[::-1]
            for us in order:
                sys.setswitchinterval(us * 1e-6)
                for t in thread_counts:
                    times[(t, us)].append(_timed(t, work))
    finally:
        sys.setswitchinterval(before)
    out: dict[str, Any] = {}
    med = lambda v: sorted(v)[len(v) // 2]  # noqa: E731
    for t in thread_counts:
        base = [med([x[k] for x in times[(t, intervals_us[0])]]) for k in (0, 1)]
        for us in intervals_us:
            wall, cpu, switches = ([x[k] for x in times[(t, us)]] for k in (0, 1, 2))
            out[f"{t} thread(s), {us} us"] = {
                "wall_s": round(med(wall), 4),
                "wall_vs_first_pct": round((med(wall) / base[0] - 1) * 100, 2),
                "wall_spread_pct": round((max(wall) / min(wall) - 1) * 100, 2),
                "cpu_s": round(med(cpu), 4),
                "cpu_vs_first_pct": round((med(cpu) / base[1] - 1) * 100, 2),
                "cpu_spread_pct": round((max(cpu) / min(cpu) - 1) * 100, 2),
                "switches_per_s": round(med(switches) / med(wall)),
            }
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--blocks", type=int, default=5)
    ap.add_argument("--work", type=int, default=2_000_000, help="iterations of the work, whatever the threads")
    ap.add_argument("--intervals-us", default="5000,500,300,250", help="switch intervals, the first is the base")
    args = ap.parse_args()
    intervals = [int(x) for x in args.intervals_us.split(",")]
    start = os.getloadavg()
    res = run(args.blocks, args.work, intervals)
    res |= {"machine": S.machine_facts(), "loadavg_start": start, "loadavg_end": os.getloadavg()}
    print(json.dumps(res, indent=1))


if __name__ == "__main__":
    main()
