"""The cell's own speed while a client reads the kernel's hub, measured to 1 % (issue #48).

    .venv/bin/python bench/cellfirst.py --blocks 0 --pairs 50 --readers sdk,one-write [--pin]

One long cell (bench/speed_cell.py) times many short blocks (``--block-seconds``, 0.3 s) of a
fixed pure-Python workload. Blocks come in groups of three arms in a random order each group
(seeded): **alone** (no client connected), **own** (a reader process reads this kernel's hub open
loop at 20/s) and **other** (the same reader reads a second, idle kernel's hub: the control arm,
which costs the machine what reading costs it but cannot touch this cell's GIL). Within a group
the arms are run back to back, about a second apart, so drift (CPU frequency, the other core's
load) cancels in each group's ratios: own/alone, other/alone and own/other.

Per comparison: the median of the groups' ratios and its bootstrap 95 % interval (percentile,
resampling groups), for the wall time and for the wall time less the cell thread's run-queue wait
(runnable but waiting for a core: other processes' doing; a thread waiting for the GIL sleeps and
stays counted). An honest method shows the control arm's interval around 0. The variance: the
ratio of the interquartile ranges of the blocks' times (own against alone) with its bootstrap
interval. Also: the reads actually done in each block, their latency, the reader's CPU, the
cores things ran on (``--pin``: the cell's thread on core 1 and the reader process on core 0;
the kernel's other threads, the hub's among them, are left to the scheduler), the cell thread's
voluntary context switches (its GIL waits) and the CPU other processes used meanwhile.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import quiet
import sections as S
from speed_cell import ALONE, ARM_NAMES, OTHER, OWN

HERE = Path(__file__).resolve().parent
ARMS = (ALONE, OWN, OTHER)
COMPARE = (("own_vs_alone", OWN, ALONE), ("other_vs_alone", OTHER, ALONE), ("own_vs_other", OWN, OTHER))


def _median(v: list[float]) -> float:
    s = sorted(v)
    m = len(s) // 2
    return s[m] if len(s) % 2 else (s[m - 1] + s[m]) / 2


def _iqr(v: list[float]) -> float:
    s = sorted(v)
    return s[(3 * len(s)) // 4] - s[len(s) // 4]


def bootstrap(stat: Any, groups: list[Any], rng: random.Random, resamples: int = 2000) -> tuple[float, float]:
    """The percentile bootstrap 95 % interval of ``stat`` over ``groups`` resampled with replacement."""
    vals = sorted(stat([groups[rng.randrange(len(groups))] for _ in groups]) for _ in range(resamples))
    return vals[int(0.025 * resamples)], vals[int(0.975 * resamples) - 1]


def _schedule(groups: int, seed: int) -> list[int]:
    """A warm-up group, then ``groups`` groups of the three arms, each in a random order."""
    rng = random.Random(seed)
    out = []
    for _ in range(groups + 1):
        arms = list(ARMS)
        rng.shuffle(arms)
        out += arms
    return out


def _pct(a: float, b: float) -> float:
    return (a / b - 1) * 100


def compare(groups: list[dict[int, dict[str, float]]], key: str, rng: random.Random) -> dict[str, Any]:
    """Each comparison's median per-group % and its bootstrap interval, for one time ``key``."""
    out: dict[str, Any] = {}
    for name, a, b in COMPARE:
        pcts = [_pct(g[a][key], g[b][key]) for g in groups]
        lo, hi = bootstrap(_median, pcts, rng)
        out[name] = {
            "median_pct": round(_median(pcts), 3),
            "ci95_pct": [round(lo, 3), round(hi, 3)],
            "mean_pct": round(sum(pcts) / len(pcts), 3),
        }
    return out


def spread(groups: list[dict[int, dict[str, float]]], key: str, rng: random.Random) -> dict[str, Any]:
    """The blocks' spread by arm (IQR as % of the median) and own/alone's IQR ratio with its interval;
    the same ratio paired, each block taken over its group's control block (drift cancelled)."""

    def ratio(gs: list[dict[int, dict[str, float]]]) -> float:
        return _iqr([g[OWN][key] for g in gs]) / max(1e-12, _iqr([g[ALONE][key] for g in gs]))

    out: dict[str, Any] = {}
    for arm in ARMS:
        v = [g[arm][key] for g in groups]
        out[f"{ARM_NAMES[arm]}_iqr_pct"] = round(_iqr(v) / _median(v) * 100, 3)
    lo, hi = bootstrap(ratio, groups, rng)
    out["own_vs_alone_iqr_ratio"] = round(ratio(groups), 3)
    out["own_vs_alone_iqr_ratio_ci95"] = [round(lo, 3), round(hi, 3)]

    def paired(gs: list[dict[int, dict[str, float]]]) -> float:
        # each block over its own group's control block: a drift common to the group cancels, so the
        # spread left is the blocks' own (the whole run's IQR above counts the drift across groups)
        own = [g[OWN][key] / g[OTHER][key] for g in gs]
        alone = [g[ALONE][key] / g[OTHER][key] for g in gs]
        return _iqr(own) / max(1e-12, _iqr(alone))

    lo, hi = bootstrap(paired, groups, rng)
    out["own_vs_alone_paired_iqr_ratio"] = round(paired(groups), 3)
    out["own_vs_alone_paired_iqr_ratio_ci95"] = [round(lo, 3), round(hi, 3)]
    return out


def _arm_facts(blocks: list[dict[str, Any]], rows: list[list[Any]]) -> dict[str, Any]:
    """Per arm: reads a block, their latency, the reader's CPU, the cell thread's waits and cores."""
    out: dict[str, Any] = {}
    for arm in ARMS:
        bs = [b for b in blocks if b["arm"] == arm]
        rs = [r for r in rows if r[0] == arm]
        lat = sorted(x for b in bs for x in b["lat_ms"])
        counts = sorted(len(b["lat_ms"]) for b in bs)
        wall = _median([r[1] for r in rs])
        facts: dict[str, Any] = {
            "blocks": len(rs),
            "block_wall_s_median": round(wall, 5),
            "cell_run_queue_ms_median": round(_median([r[3] for r in rs]) / 1e6, 3),
            "cell_voluntary_switches_median": _median([r[4] for r in rs]),
            "cell_involuntary_switches_median": _median([r[5] for r in rs]),
            "cell_cores": sorted({r[6] for r in rs}),
            "hub_cpu_ms_median": round(_median([r[7] for r in rs]) / 1e6, 3) if len(rows[0]) > 7 else None,
            "hub_run_queue_ms_median": round(_median([r[8] for r in rs]) / 1e6, 3) if len(rows[0]) > 8 else None,
            "reader_cpu_pct_of_a_core": round(_median([b["cpu_ms"] for b in bs if "cpu_ms" in b]) / 10 / wall, 2),
        }
        if lat:
            pick = lambda q: round(lat[min(len(lat) - 1, int(len(lat) * q))], 3)  # noqa: E731, B023
            facts |= {
                "reads_per_block": {"min": counts[0], "median": _median(counts), "max": counts[-1]},
                "reads": len(lat),
                "read_errors": sum(b["errors"] for b in bs),
                "read_p50_ms": pick(0.5),
                "read_p99_ms": pick(0.99),
            }
        out[ARM_NAMES[arm]] = facts
    return out


def per_read(rows: list[list[Any]], blocks: list[dict[str, Any]], rng: random.Random) -> dict[str, Any]:
    """What one read costs the cell, per group (own block against the group's alone and other
    blocks, over the reads the own block saw): wall µs, cell-thread run-queue µs, voluntary switches."""
    per: list[dict[str, float]] = []
    for i in range(0, len(rows) - len(ARMS) + 1, len(ARMS)):
        g = {rows[j][0]: (rows[j], blocks[j]) for j in range(i, i + len(ARMS))}
        reads = max(1, len(g[OWN][1]["lat_ms"]))
        own, alone, other = g[OWN][0], g[ALONE][0], g[OTHER][0]
        per.append(
            {
                "wall_us_vs_alone": (own[1] - alone[1]) * 1e6 / reads,
                "wall_us_vs_other": (own[1] - other[1]) * 1e6 / reads,
                "run_queue_us_vs_other": (own[3] - other[3]) / 1e3 / reads,
                "voluntary_switches_vs_alone": (own[4] - alone[4]) / reads,
                "hub_cpu_us_vs_alone": (own[7] - alone[7]) / 1e3 / reads if len(own) > 7 else 0.0,
            }
        )
    out: dict[str, Any] = {}
    for key in per[0] if per else ():
        vals = [p[key] for p in per]
        lo, hi = bootstrap(_median, vals, rng)
        out[key] = {"median": round(_median(vals), 2), "ci95": [round(lo, 2), round(hi, 2)]}
    return out


def analyse(rows: list[list[Any]], reader: dict[str, Any], seed: int) -> dict[str, Any]:
    """Groups of three back-to-back blocks (the warm-up group dropped) into the figures."""
    blocks = reader["blocks"]
    if len(blocks) != len(rows) or [b["arm"] for b in blocks] != [r[0] for r in rows]:
        raise RuntimeError(f"the reader saw {len(blocks)} blocks, the cell ran {len(rows)}")
    timed = [{"wall": r[1], "on_core": r[1] - max(0, r[3]) / 1e9, "cpu": r[2] / 1e9} for r in rows]
    groups = []
    for i in range(len(ARMS), len(rows) - len(ARMS) + 1, len(ARMS)):
        groups.append({rows[j][0]: timed[j] for j in range(i, i + len(ARMS))})
    rng = random.Random(seed)
    return {
        "groups": len(groups),
        "per_read": per_read(rows[len(ARMS) :], blocks[len(ARMS) :], rng),
        "wall": compare(groups, "wall", rng),
        "wall_less_run_queue": compare(groups, "on_core", rng),
        "spread_wall": spread(groups, "wall", rng),
        "spread_wall_less_run_queue": spread(groups, "on_core", rng),
        "arms": _arm_facts(blocks[len(ARMS) :], rows[len(ARMS) :]),
        "reader_core": reader["core"],
        "reader_affinity": reader["affinity"],
    }


def measure(
    k: S.BenchKernel,
    info: dict[str, Any],
    other: dict[str, Any],
    client: str,
    groups: int = 50,
    block_s: float = 0.3,
    rate: float = 20.0,
    seed: int = 1,
    pin: bool = False,
) -> dict[str, Any]:
    """The cell's own speed, alone / read by ``client`` / the control arm, in random-order groups."""
    k.run("import speed_cell")
    n = k.json(f"kside.emit(speed_cell.calibrate({block_s!r}))")
    schedule = _schedule(groups, seed)
    pin_cell, pin_reader = (1, 0) if pin and (os.cpu_count() or 1) >= 2 else (-1, -1)
    with tempfile.TemporaryDirectory(prefix="mcpnb-cellspeed-") as tmp:
        board, own_f, other_f = (str(Path(tmp) / name) for name in ("board", "own.json", "other.json"))
        Path(board).write_bytes(bytes(64))
        Path(own_f).write_text(json.dumps(info))
        Path(other_f).write_text(json.dumps(other))
        cmd = [sys.executable, str(HERE / "speed_reader.py"), "--board", board, "--own", own_f, "--other", other_f]
        cmd += ["--client", client, "--rate", str(rate), "--seed", str(seed), "--pin", str(pin_reader)]
        load0, others = os.getloadavg(), quiet.OtherLoad().start()
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
        try:
            cell = k.json(f"speed_cell.run_blocks({board!r}, {schedule!r}, {n}, {pin_cell})", timeout=900)
            out, _ = proc.communicate(timeout=120)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait(10)
        machine = others.stop()
    res = analyse(cell["rows"], json.loads(out.strip().splitlines()[-1]), seed)
    return {
        "reader": client,
        "rate_per_s": rate,
        "block_s": block_s,
        "work_iterations": n,
        "pinned": {"cell_thread": pin_cell, "reader": pin_reader},
        "seed": seed,
        **res,
        "loadavg_start": load0,
        "loadavg_end": os.getloadavg(),
        "other_processes": machine,
        "took_s": round(time.monotonic() - others.wall0, 1),
    }
