"""How quiet the machine was during a run: the CPU that processes other than the run's own used.

A figure is published only from a run where everything else on the machine used at most
``PUBLISH_LIMIT`` of one core (issue #48). The run's own CPU is this process, the children it
waited for (``os.times``) and the descendants still alive at the end; everything else is the
machine's busy time (``psutil.cpu_times``, all cores) minus that. Children of our children that
were never waited for are counted as others: the estimate errs towards "not quiet".
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from typing import Any

import psutil

PUBLISH_LIMIT = 0.05  # of one core, averaged over the run


def _busy_s() -> float:
    """Seconds all cores spent busy (steal counted: a neighbour's load is not quiet either)."""
    t = psutil.cpu_times()
    return sum(getattr(t, name, 0.0) for name in ("user", "nice", "system", "irq", "softirq", "steal"))


def _own_s() -> float:
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def _descendants_s() -> dict[int, float]:
    out: dict[int, float] = {}
    for child in psutil.Process().children(recursive=True):
        try:
            c = child.cpu_times()
            out[child.pid] = c.user + c.system
        except psutil.Error:
            continue
    return out


@dataclass
class OtherLoad:
    """Measures the CPU of everything but this run between ``start()`` and ``stop()``."""

    wall0: float = 0.0
    busy0: float = 0.0
    own0: float = 0.0
    desc0: dict[int, float] = field(default_factory=dict)

    def start(self) -> OtherLoad:
        self.wall0, self.busy0, self.own0 = time.monotonic(), _busy_s(), _own_s()
        self.desc0 = _descendants_s()
        return self

    def stop(self) -> dict[str, Any]:
        wall = max(1e-9, time.monotonic() - self.wall0)
        busy = _busy_s() - self.busy0
        desc = _descendants_s()
        live = sum(cpu - self.desc0.get(pid, 0.0) for pid, cpu in desc.items())
        own = _own_s() - self.own0 + live
        others = max(0.0, busy - own)
        fraction = others / wall
        return {
            "wall_s": round(wall, 1),
            "machine_busy_cpu_s": round(busy, 1),
            "run_cpu_s": round(own, 1),
            "others_cpu_s": round(others, 1),
            "others_core_fraction": round(fraction, 4),
            "publishable": fraction <= PUBLISH_LIMIT,
            "limit_core_fraction": PUBLISH_LIMIT,
        }


def verdict(quiet: dict[str, Any] | None) -> str:
    """One line for the table's header: quiet enough to publish, or why not."""
    if not quiet:
        return "quietness not recorded: NOT FOR PUBLISHING"
    pct = 100 * quiet["others_core_fraction"]
    if quiet["publishable"]:
        return f"other processes used {pct:.1f} % of a core during the run: quiet, publishable"
    limit = 100 * quiet["limit_core_fraction"]
    return f"other processes used {pct:.1f} % of a core during the run (limit {limit:.0f} %): NOT FOR PUBLISHING"
