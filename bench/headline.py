"""The headline figures of one or two `bench/run.py` results files, as the Markdown table the README
and docs/benchmarks.md publish (issue #48: "the tables come from one such run, with the command").

    .venv/bin/python bench/headline.py AFTER.json [--before BEFORE.json] [--load LOAD.json]

AFTER and BEFORE are results files written by `bench/run.py` (bench/results/latest.json);
LOAD is the JSON `bench/load.py --kernels 10` prints. Each file's machine line and quiet verdict
(bench/quiet.py) are printed above the table: a run that says NOT FOR PUBLISHING is not published.
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path
from typing import Any

import quiet


def _get(d: Any, *path: str) -> Any:
    for key in path:
        if not isinstance(d, dict) or key not in d:
            return None
        d = d[key]
    return d


def _ms(v: Any, nd: int = 2) -> str:
    return "-" if v is None else f"{v:.{nd}f}"


def _pair(d: dict[str, Any], a: str, b: str) -> str:
    return f"{_ms(d.get(a))} / {_ms(d.get(b))}" if d else "-"


def _spread_pct(values: list[float] | None) -> str:
    if not values or len(values) < 2:
        return "-"
    return f"{100 * statistics.stdev(values) / statistics.mean(values):.1f} %"


def rows(res: dict[str, Any]) -> list[tuple[str, str]]:
    """(what, figure) for one results file."""
    out: list[tuple[str, str]] = []
    busy = _get(res, "cellfirst", "busy") or {}
    one_idle, one_busy = busy.get("one-write/idle") or {}, busy.get("one-write/busy") or {}
    sdk_idle, sdk_busy = busy.get("sdk/idle") or {}, busy.get("sdk/busy") or {}
    out.append(("small read, one-write client, idle: p50 / p99 ms", _pair(one_idle, "p50_ms", "p99_ms")))
    out.append(("same during a busy pure-Python cell: p50 / p99 ms", _pair(one_busy, "p50_ms", "p99_ms")))
    out.append(
        ("official SDK client, idle / busy p50 ms", f"{_ms(sdk_idle.get('p50_ms'))} / {_ms(sdk_busy.get('p50_ms'))}")
    )
    slow = _get(res, "cellfirst", "cell_slowdown") or {}
    out.append(
        (
            "the cell's own speed while the SDK reads at 20/s: slower % (median; median of back-to-back pairs); "
            "spread alone / reading",
            f"{_ms(slow.get('slowdown_pct_median'), 1)} %; {_ms(slow.get('slowdown_pct_paired_median'), 1)} %; "
            f"{_spread_pct(slow.get('alone_s'))} / "
            f"{_spread_pct(slow.get('reading_s'))}",
        )
    )
    for key, v in (res.get("varied") or {}).items():
        if isinstance(v, dict) and "ratio_pct" in v:
            asy = v.get("ratio_to_asyncio_pct")
            out.append(
                (
                    f"varied reads ({key}): hub req/s, x bare uvloop, x bare asyncio",
                    f"{max(v.get('hub_rps') or [0]):,}, {v['ratio_pct'] / 100:.2f}, "
                    + (f"{asy / 100:.2f}" if asy is not None else "-"),
                )
            )
    for name in ("10,000 vars", "100,000 vars"):
        hook = _get(res, "hook", name) or {}
        added = _get(hook, "e2e_added_us", "nosubs")
        rebind = _get(hook, "nosubs/rebind", "after_cell", "median_us")
        out.append(
            (
                f"post-cell hook, {name[:-5]} names: whole cell added / after_cell (one rebound) µs",
                f"{_ms(added, 0)} / {_ms(rebind, 0)}",
            )
        )
    load = res.get("load") or {}
    out.append(("%load_ext in one fresh kernel (bench/run.py) ms", _ms((load.get("load_s") or 0) * 1e3, 1)))
    for era in ("legacy", "2026-07-28"):
        n = _get(res, "notify", era) or {}
        out.append(
            (f"notification, cell end to the SDK client ({era}): median / p99 ms", _pair(n, "median_ms", "p99_ms"))
        )
    return out


def machine_line(res: dict[str, Any]) -> str:
    m = res.get("machine") or {}
    git = m.get("git") or {}
    return (
        f"{m.get('cpu')}, {m.get('cores')} cores, Python {m.get('python')}, git {git.get('commit')}; "
        + quiet.verdict(m.get("quiet"))
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("after")
    ap.add_argument("--before")
    ap.add_argument("--load", help="bench/load.py's JSON output")
    args = ap.parse_args()
    after = json.loads(Path(args.after).read_text())
    before = json.loads(Path(args.before).read_text()) if args.before else None
    print(f"- after: {machine_line(after)}")
    if before is not None:
        print(f"- before: {machine_line(before)}")
    head = "| what | before | after |\n|---|---|---|" if before else "| what | figure |\n|---|---|"
    print("\n" + head)
    old = dict(rows(before)) if before else {}
    for what, fig in rows(after):
        print(f"| {what} | {old.get(what, '-')} | {fig} |" if before else f"| {what} | {fig} |")
    if args.load:
        load = json.loads(Path(args.load).read_text())
        wall, cpu = load.get("load_ext_wall_ms") or {}, load.get("load_ext_main_thread_cpu_ms") or {}
        print(
            f"\n`%load_ext` in {load.get('kernels')} fresh kernels (bench/load.py): wall median {wall.get('median')} ms "
            f"(min {wall.get('min')}, max {wall.get('max')}), main thread CPU median {cpu.get('median')} ms."
        )


if __name__ == "__main__":
    main()
