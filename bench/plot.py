"""Plots of a bench/run.py results file, as SVG for the documentation.

    .venv/bin/python bench/plot.py [RESULTS.json] [--out DIR]

RESULTS defaults to bench/results/latest.json (written by bench/run.py); the docs' figures come
from bench/results/published.json, the published run's figures in the same shape. Writes
request-path.svg (requests/s of the hub and the official SDK's servers) and post-cell-hook.svg
(the hook's median cost by namespace size) into DIR (default docs/_static/bench). Needs
matplotlib (the data extra). Parts missing from the file are skipped with a note.
"""

from __future__ import annotations

import argparse
import json
import sys
import textwrap
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

ROOT = Path(__file__).resolve().parent.parent
SERVERS = [
    ("mcp-notebook hub", "request_hub"),
    ("SDK Server", "request_sdk_lowlevel"),
    ("SDK MCPServer", "request_sdk_mcpserver"),
]
ERAS = {"stateless": "2026-07-28", "handshake": "handshake"}
HOOK_MODES = [("steady", "no change"), ("rebind", "one name rebound"), ("newname", "one name added")]
# Reproducible SVG: no date, fixed ids.
plt.rcParams.update({"svg.hashsalt": "mcp-notebook", "svg.fonttype": "none", "font.size": 9})


def describe(res: dict[str, Any]) -> str:
    """One line naming the run: machine, Python, commit, load."""
    m = res.get("machine") or {}
    load = m.get("loadavg_note") or m.get("loadavg_start")
    if isinstance(load, (list, tuple)):
        load = "/".join(f"{x:.1f}" for x in load)
    commit = (m.get("git") or {}).get("commit", "?")
    return f"{m.get('cpu', '?')}, {m.get('cores', '?')} cores, Python {m.get('python', '?')}, git {commit}, load {load}"


def request_cases(res: dict[str, Any]) -> list[tuple[str, list[float | None]]]:
    """(case label, req/s per server) for every era/op/connections the hub has."""
    hub = res.get("request_hub") or {}
    rows = []
    for key in hub:
        if key.count("/") != 2:
            continue
        era, op, conns = key.split("/")
        label = f"{ERAS.get(era, era)} {op}, {conns[1:]} conn."
        rows.append((label, [((res.get(k) or {}).get(key) or {}).get("rps") for _, k in SERVERS]))
    return rows


def plot_requests(res: dict[str, Any], path: Path) -> bool:
    rows = request_cases(res)
    if not rows:
        return False
    fig, ax = plt.subplots(figsize=(7.5, 0.45 * len(rows) + 1.4))
    height = 0.8 / len(SERVERS)
    for i, (name, _) in enumerate(SERVERS):
        ys = [r + i * height for r in range(len(rows))]
        ax.barh(ys, [v[1][i] or 0 for v in rows], height=height, label=name)
    ax.set_yticks([r + height for r in range(len(rows))], [label for label, _ in rows])
    ax.invert_yaxis()
    ax.set_xscale("log")
    ax.set_xlabel("requests/s (log scale; more is better)")
    ax.set_title("Request path: the hub vs the official SDK's servers, same content", loc="left")
    ax.legend(loc="lower right", frameon=False)
    fig.text(0.01, 0.01, describe(res), fontsize=7, color="0.4")
    fig.tight_layout(rect=(0, 0.03, 1, 1))
    fig.savefig(path, metadata={"Date": None})
    plt.close(fig)
    return True


def hook_series(res: dict[str, Any]) -> tuple[list[str], dict[str, list[float | None]]]:
    """Namespaces (as in the file) and the median after_cell µs of each mode, without subscriptions."""
    hook = {k: v for k, v in (res.get("hook") or {}).items() if isinstance(v, dict) and "error" not in v}
    names = list(hook)
    series = {
        label: [((hook[n].get(f"nosubs/{mode}") or {}).get("after_cell") or {}).get("median_us") for n in names]
        for mode, label in HOOK_MODES
    }
    return names, series


def plot_hook(res: dict[str, Any], path: Path) -> bool:
    names, series = hook_series(res)
    if not names:
        return False
    fig, ax = plt.subplots(figsize=(7.5, 3.4))
    width = 0.8 / len(series)
    for i, (label, values) in enumerate(series.items()):
        ax.bar([x + i * width for x in range(len(names))], [v or 0 for v in values], width=width, label=label)
    ax.set_xticks([x + width for x in range(len(names))], [textwrap.fill(n, 14) for n in names])
    ax.set_ylabel("after_cell, median µs (less is better)")
    ax.set_title("Post-cell hook on the main thread, by namespace (no subscriptions)", loc="left")
    ax.legend(frameon=False)
    fig.text(0.01, 0.01, describe(res), fontsize=7, color="0.4")
    fig.tight_layout(rect=(0, 0.03, 1, 1))
    fig.savefig(path, metadata={"Date": None})
    plt.close(fig)
    return True


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("results", nargs="?", default=str(ROOT / "bench" / "results" / "latest.json"))
    ap.add_argument("--out", default=str(ROOT / "docs" / "_static" / "bench"))
    args = ap.parse_args(argv)
    src = Path(args.results)
    if not src.is_file():
        print(f"bench/plot.py: no results file {src} (run bench/run.py first)", file=sys.stderr)
        return 2
    res = json.loads(src.read_text())
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    for name, draw in (("request-path.svg", plot_requests), ("post-cell-hook.svg", plot_hook)):
        if draw(res, out / name):
            print(f"bench/plot.py: wrote {out / name}")
        else:
            print(f"bench/plot.py: {src.name} has no data for {name}; skipped")
    return 0


if __name__ == "__main__":
    sys.exit(main())
