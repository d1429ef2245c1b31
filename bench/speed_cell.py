"""The cell's side of bench/cellspeed.py: one long cell that times many short blocks of fixed
pure-Python work, each under an arm a reader process obeys (nobody reading, reading this kernel's
hub, reading another kernel's hub), told through a small shared board file.

Imported inside the benchmark kernel. Per block it records the wall time and, from
``/proc/thread-self`` (Linux), the cell thread's CPU time, its run-queue wait (runnable, waiting for
a core: other processes' doing) and its voluntary / involuntary context switches (a thread waiting
for the GIL sleeps: voluntary). Prints one ``BENCHJSON`` line.
"""

from __future__ import annotations

import json
import mmap
import os
import struct
import time
from typing import Any

ALONE, OWN, OTHER, GAP, END = 0, 1, 2, 3, 4
ARM_NAMES = ("alone", "own", "other")
BOARD_BYTES = 64  # int64 slots: 0 command seq, 1 command arm, 2 acknowledged seq
SETTLE_S = 0.003  # after the reader's acknowledgement, before the clock starts


class Board:
    """The shared board: the cell writes a command (arm, then its sequence number), the reader
    acknowledges the sequence number once it is set up for that arm (connected or not, no read in
    flight). A plain file mapped by both processes; x86 and ARM keep these 8-byte stores whole."""

    def __init__(self, path: str) -> None:
        with open(path, "r+b") as f:
            self.mem = mmap.mmap(f.fileno(), BOARD_BYTES)

    def command(self, seq: int, arm: int) -> None:
        struct.pack_into("q", self.mem, 8, arm)
        struct.pack_into("q", self.mem, 0, seq)

    def read_command(self) -> tuple[int, int]:
        seq = struct.unpack_from("q", self.mem, 0)[0]
        return seq, struct.unpack_from("q", self.mem, 8)[0]

    def ack(self, seq: int) -> None:
        struct.pack_into("q", self.mem, 16, seq)

    def acked(self) -> int:
        return struct.unpack_from("q", self.mem, 16)[0]

    def wait_ack(self, seq: int, timeout: float = 30.0) -> None:
        """Sleep-poll (the GIL let go, as between cells) until the reader acknowledged ``seq``."""
        deadline = time.monotonic() + timeout
        while self.acked() < seq:
            if time.monotonic() > deadline:
                raise TimeoutError(f"the reader did not acknowledge command {seq}")
            time.sleep(0.0005)


def work(n: int) -> None:
    """The fixed pure-Python workload (dict, int and str operations), bench/cellfirst.py's WORK."""
    acc: dict[int, str] = {}
    for i in range(n):
        acc[i % 1000] = str(i * 3)[-2:] + "x"


def thread_stats() -> tuple[int, int, int, int, int]:
    """This thread's CPU ns, run-queue wait ns, voluntary and involuntary switches, last core
    (all -1 where /proc/thread-self is missing)."""
    try:
        with open("/proc/thread-self/schedstat") as f:
            cpu_ns, wait_ns, _slices = (int(x) for x in f.read().split()[:3])
        with open("/proc/thread-self/status") as f:
            status = f.read()
        with open("/proc/thread-self/stat") as f:
            core = int(f.read().rsplit(")", 1)[1].split()[36])
    except (OSError, ValueError, IndexError):
        return -1, -1, -1, -1, -1
    vol = int(status.split("voluntary_ctxt_switches:")[1].split()[0])
    invol = int(status.split("nonvoluntary_ctxt_switches:")[1].split()[0])
    return cpu_ns, wait_ns, vol, invol, core


def hub_tid() -> int:
    """The hub thread's native id (its name is the server's), or -1."""
    import threading

    return next((t.native_id or -1 for t in threading.enumerate() if t.name == "mcp-notebook-http"), -1)


def hub_stats(tid: int) -> tuple[int, int]:
    """The hub thread's CPU ns and run-queue wait ns (``schedstat``), or -1s."""
    try:
        with open(f"/proc/self/task/{tid}/schedstat") as f:
            cpu_ns, wait_ns = (int(x) for x in f.read().split()[:2])
    except (OSError, ValueError):
        return -1, -1
    return cpu_ns, wait_ns


def calibrate(block_s: float) -> int:
    """Iterations of ``work`` that take about ``block_s`` here (bounded: at most 8 timings)."""
    n = 100_000
    took = 0.0
    for _ in range(8):
        t0 = time.perf_counter()
        work(n)
        took = time.perf_counter() - t0
        if took > block_s / 3:
            break
        n *= 2
    n = max(10_000, int(n * block_s / max(took, 1e-4)))
    best = []
    for _ in range(3):  # the fastest of three at that size: a block slowed by others is not the size
        t0 = time.perf_counter()
        work(n)
        best.append(time.perf_counter() - t0)
    return max(10_000, int(n * block_s / max(min(best), 1e-4)))


def run_blocks(board_path: str, schedule: list[int], n: int, pin_cpu: int = -1) -> None:
    """Run ``work(n)`` once per entry of ``schedule`` (an arm each), the reader set up for that arm
    before the clock starts and idle again (a gap command acknowledged) before the next one."""
    was = os.sched_getaffinity(0)
    if pin_cpu >= 0:
        os.sched_setaffinity(0, {pin_cpu})  # this thread only (Linux: pid 0 is the calling thread)
    try:
        _run(board_path, schedule, n, pin_cpu)
    finally:
        os.sched_setaffinity(0, was)  # the kernel's main thread free again for what follows


def _run(board_path: str, schedule: list[int], n: int, pin_cpu: int) -> None:
    board = Board(board_path)
    hub = hub_tid()
    rows: list[list[Any]] = []
    seq = 0
    for arm in schedule:
        seq += 1
        board.command(seq, arm)
        board.wait_ack(seq)
        time.sleep(SETTLE_S)  # the GIL let go: the hub handles a close or a first read's aftermath now
        h0 = hub_stats(hub)
        s0 = thread_stats()
        t0 = time.perf_counter()
        work(n)
        t1 = time.perf_counter()
        s1 = thread_stats()
        h1 = hub_stats(hub)
        seq += 1
        board.command(seq, GAP)
        board.wait_ack(seq)
        rows.append(
            [arm, t1 - t0, *(b - a for a, b in zip(s0[:4], s1[:4], strict=True)), s1[4], h1[0] - h0[0], h1[1] - h0[1]]
        )
    board.command(seq + 1, END)
    print("BENCHJSON " + json.dumps({"n": n, "pin_cpu": pin_cpu, "rows": rows}))
