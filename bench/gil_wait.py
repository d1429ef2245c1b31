"""What a thread's timer slack adds to its wait for the GIL while a pure-Python thread runs (Linux).

    .venv/bin/python bench/gil_wait.py [--reads 1200] [--switch-us 250] [--block 50]

A pure-Python thread spins (a busy cell). Another process writes a timestamp into a pipe every
3 ms; a second thread of this process blocks in ``os.read`` on it (without the GIL, as the hub
thread waits in ``epoll_wait``), then needs the GIL back to return: the time from the write to the
read's return is one GIL hand-off, the wait a busy-cell read pays (docs/DESIGN.md, "The cell comes
first"). The reading thread alternates, in blocks of ``--block`` reads, between Linux's default
timer slack (50 µs) and 1 ns (``prctl(PR_SET_TIMERSLACK)``, what the hub thread and its worker
pool set): its timed wait of one switch interval ends up to the slack late. Prints p50/p90/p99 of
both and the load average (a busy machine widens both; the difference is the slack).
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import struct
import subprocess
import sys
import threading
import time

PR_SET_TIMERSLACK = 29
DEFAULT_SLACK_NS = 50_000


def _pcts(values: list[float]) -> dict[str, float]:
    v = sorted(values)
    pick = lambda q: round(v[min(len(v) - 1, int(len(v) * q))], 1)  # noqa: E731
    return {"n": len(v), "p50_us": pick(0.5), "p90_us": pick(0.9), "p99_us": pick(0.99)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--reads", type=int, default=1200)
    ap.add_argument("--switch-us", type=float, default=250.0, help="the switch interval (the hub's default)")
    ap.add_argument("--block", type=int, default=50, help="reads per block before the slack alternates")
    args = ap.parse_args()
    if not sys.platform.startswith("linux"):
        sys.exit("timer slack is a Linux setting")
    libc = ctypes.CDLL(None, use_errno=True)
    sys.setswitchinterval(args.switch_us / 1e6)
    stop = threading.Event()

    def spin() -> None:  # the busy cell: pure Python, never lets go of the GIL by itself
        while not stop.is_set():
            pass

    r, w = os.pipe()
    writer = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import os, struct, sys, time\n"
            f"for _ in range({args.reads}):\n"
            "    time.sleep(0.003)\n"
            f"    os.write({w}, struct.pack('d', time.perf_counter()))\n",
        ],
        pass_fds=(w,),
    )
    os.close(w)
    waits: dict[str, list[float]] = {"default": [], "1ns": []}

    def reader() -> None:
        for i in range(args.reads):
            precise = (i // args.block) % 2 == 1
            libc.prctl(PR_SET_TIMERSLACK, 1 if precise else DEFAULT_SLACK_NS, 0, 0, 0)
            data = os.read(r, 8)
            if len(data) < 8:
                return
            waits["1ns" if precise else "default"].append((time.perf_counter() - struct.unpack("d", data)[0]) * 1e6)

    start = os.getloadavg()
    spinner = threading.Thread(target=spin, daemon=True)
    spinner.start()
    thread = threading.Thread(target=reader)
    thread.start()
    thread.join(args.reads * 0.05 + 30)
    stop.set()
    spinner.join(5)
    writer.wait(30)
    out = {k: _pcts(v) for k, v in waits.items() if v}
    out |= {"switch_us": args.switch_us, "loadavg_start": start, "loadavg_end": os.getloadavg()}
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
