"""What a figure description costs (issue #44): the time it adds to a cell that shows a
matplotlib figure, and the characters it adds to a read.

    .venv/bin/python bench/figures.py [--repeat 5] [--json OUT.json]

For figures of 1, 10 and 100 line series holding 1,000 to 1,000,000 points in all: the median time
of ``describe_live_figure`` (all the hub adds when a figure is shown: the display formatter's
wrapper calls it once, on the kernel's main thread) next to the time the inline backend takes to
show the same figure (``savefig`` to PNG with ``bbox_inches="tight"``, as matplotlib-inline does),
and the description's length in characters. Agg backend, one process, no kernel: the added cost
is this function's and nothing else.
"""

from __future__ import annotations

import argparse
import io
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np

from mcp_notebook.figures.live import describe_live_figure

CASES = [(1, 1_000), (1, 100_000), (1, 1_000_000), (10, 100_000), (10, 1_000_000), (100, 100_000), (100, 1_000_000)]


def figure(series: int, points: int) -> plt.Figure:
    rng = np.random.default_rng(1)
    fig, ax = plt.subplots()
    per = points // series
    x = np.arange(per)
    for k in range(series):
        ax.plot(x, rng.standard_normal(per).cumsum() + k, label=f"s{k}")
    ax.set_title(f"{series} series, {points:,} points")
    return fig


def timed(fn, repeat: int) -> float:
    runs = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        runs.append(time.perf_counter() - t0)
    return statistics.median(runs)


def measure(series: int, points: int, repeat: int) -> dict[str, float | int]:
    fig = figure(series, points)
    text = describe_live_figure(fig, 2000)
    describe = timed(lambda: describe_live_figure(fig, 2000), repeat)
    show = timed(lambda: fig.savefig(io.BytesIO(), format="png", bbox_inches="tight"), max(1, repeat // 2))
    plt.close(fig)
    return {
        "series": series,
        "points": points,
        "describe_ms": round(describe * 1000, 2),
        "show_ms": round(show * 1000, 1),
        "added_percent": round(100 * describe / show, 1),
        "chars": len(text),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    rows = [measure(s, p, args.repeat) for s, p in CASES]
    print(f"{'series':>6} {'points':>10} {'describe ms':>12} {'show ms':>9} {'added':>7} {'chars':>6}")
    for r in rows:
        print(
            f"{r['series']:>6} {r['points']:>10,} {r['describe_ms']:>12} {r['show_ms']:>9} "
            f"{r['added_percent']:>6}% {r['chars']:>6}"
        )
    if args.json:
        args.json.write_text(json.dumps({"figures": rows}, indent=1) + "\n")


if __name__ == "__main__":
    main()
