"""The post-cell hook alone (issue #48): what the extension adds to a whole cell, trees alternated.

    .venv/bin/python bench/hook.py [--trees PATH,PATH] [--names 10,10000,100000] [--rounds 2] [--blocks 6] [--portable]

For each round, each tree (a checkout of this package, put first on the kernel's PYTHONPATH) and
each namespace size: a fresh kernel times ``bench_tick = bench_tick + 1`` cells with history
stored (``kside.time_cells``, as bench/run.py's hook section: IPython's whole run_cell, every
post_run_cell hook, no ZMQ) without the extension, with it, and with three variables watched, in
alternating blocks (``--blocks``, each after the hub's after-load work is done); the added time is
taken per block (its median with minus its median without), a round's figure is the median of its
blocks, and the summary gives the median of the rounds with the rounds' and blocks' spread. It also counts
the function calls our hooks make per cell (``kside.hook_calls``), a figure a busy machine does not
move. ``--portable`` adds the same with MCP_NOTEBOOK_PORTABLE=1 (the listing instead of the
dict's table) beside each. Prints a table and one JSON line; all local, every loop bounded.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import sections as S
from notify import notification_latency

WATCHED = ["nb://vars/v0", "nb://vars/v1", "nb://vars/v2"]


def _kernel(runtime: str, tree: str, portable: bool) -> S.BenchKernel:
    saved = {k: os.environ.get(k) for k in ("PYTHONPATH", "MCP_NOTEBOOK_PORTABLE")}
    os.environ["PYTHONPATH"] = tree
    if portable:
        os.environ["MCP_NOTEBOOK_PORTABLE"] = "1"
    else:
        os.environ.pop("MCP_NOTEBOOK_PORTABLE", None)
    try:
        return S.BenchKernel(runtime)
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def _load(k: S.BenchKernel) -> None:
    k.run("%load_ext mcp_notebook")
    k.json("kside.after_load()")  # the after-load thread's work is not in any timed block


def one(runtime: str, tree: str, names: int, portable: bool, cells: int, blocks: int) -> dict[str, Any]:
    """Medians (µs) of whole cells without the extension, with it, with 3 watches; calls per cell.

    Each block times ``cells`` cells without, with, and with watches, one after the other; the added
    time is taken per block (its median with minus its median without: drift between blocks cancels)
    and the figure is the median of the blocks' figures, with their spread (lowest, highest)."""
    k = _kernel(runtime, tree, portable)
    try:
        k.run(f"kside.define_vars({names})", timeout=300)
        where = k.run("import mcp_notebook; print(mcp_notebook.__file__)").stdout.strip()
        if not where.startswith(tree):
            raise RuntimeError(f"the kernel imported {where}, not the tree {tree}")
        got: dict[str, list[float]] = {"without": [], "nosubs": [], "subs": []}
        per_block: dict[str, list[float]] = {"nosubs": [], "subs": []}
        for _ in range(blocks):
            without = statistics.median(k.json(f"kside.time_cells({cells}, 5)"))
            _load(k)
            nosubs = statistics.median(k.json(f"kside.time_cells({cells}, 5)"))
            k.run(f"kside.watch({WATCHED!r})", timeout=120)
            subs = statistics.median(k.json(f"kside.time_cells({cells}, 5)"))
            k.run("%unload_ext mcp_notebook")
            got["without"].append(without)
            got["nosubs"].append(nosubs)
            got["subs"].append(subs)
            per_block["nosubs"].append(nosubs - without)
            per_block["subs"].append(subs - without)
        _load(k)
        calls = k.json("kside.hook_calls(30)")
        return {
            "without_us": statistics.median(got["without"]),
            "added_us": statistics.median(per_block["nosubs"]),
            "added_spread_us": [min(per_block["nosubs"]), max(per_block["nosubs"])],
            "added_subs_us": statistics.median(per_block["subs"]),
            "added_blocks_us": per_block["nosubs"],
            "calls_per_cell": calls["calls"],
            "python_calls_per_cell": calls["python"],
        }
    finally:
        k.shutdown()


def notify(runtime: str, tree: str, cells: int) -> dict[str, Any]:
    """Cell end to resources/updated at the official SDK client, both eras (bench/notify.py)."""
    k = _kernel(runtime, tree, False)
    try:
        k.run("kside.install_stamp_hook()")  # before the hub's hook: stamps the end of each cell
        k.run("%load_ext mcp_notebook")
        got = notification_latency(k, k.info(), cells)
        return {era: {q: got[era].get(f"{q}_ms") for q in ("median", "p99")} for era in got}
    finally:
        k.shutdown()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--trees", default=str(Path(__file__).resolve().parent.parent))
    ap.add_argument("--names", default="10,10000,100000")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--cells", type=int, default=60)
    ap.add_argument("--blocks", type=int, default=6)
    ap.add_argument("--portable", action="store_true", help="also MCP_NOTEBOOK_PORTABLE=1")
    ap.add_argument("--notify", type=int, default=0, help="also notification latency over this many cells")
    args = ap.parse_args()
    trees = [str(Path(t).resolve()) for t in args.trees.split(",")]
    sizes = [int(n) for n in args.names.split(",") if n]
    modes = [False, True] if args.portable else [False]
    rows: list[dict[str, Any]] = []
    for tree in trees:  # bytecode as pip writes it (PYTHONDONTWRITEBYTECODE would compile every load)
        subprocess.run([sys.executable, "-m", "compileall", "-q", f"{tree}/mcp_notebook"], check=False, timeout=300)
    with tempfile.TemporaryDirectory(prefix="mcpnb-hook-") as runtime:
        for rnd in range(args.rounds):
            for names in sizes:
                for portable in modes:
                    for tree in trees:  # alternated: drift hits every tree alike
                        row = one(runtime, tree, names, portable, args.cells, args.blocks)
                        row.update(round=rnd, tree=tree, names=names, portable=portable)
                        rows.append(row)
                        print(_line(row), file=sys.stderr, flush=True)
            for tree in trees if args.notify else ():
                row = {"round": rnd, "tree": tree, "notify": notify(runtime, tree, args.notify)}
                rows.append(row)
                print(
                    f"round {rnd} {Path(tree).name:>12} notification ms: {row['notify']}", file=sys.stderr, flush=True
                )
    for line in summary(rows):
        print(line, file=sys.stderr, flush=True)
    print("BENCHJSON " + json.dumps({"load": os.getloadavg(), "rows": rows}))


def _line(r: dict[str, Any]) -> str:
    path = "portable" if r["portable"] else "table"
    return (
        f"round {r['round']} {Path(r['tree']).name:>12} {r['names']:>7,} names {path:>8}: added "
        f"{r['added_us']:6.1f} µs (blocks {r['added_spread_us'][0]:.0f}-{r['added_spread_us'][1]:.0f}), "
        f"{r['added_subs_us']:6.1f} with 3 watches (cell alone {r['without_us']:6.1f}); "
        f"{r['calls_per_cell']:.0f} calls/cell, {r['python_calls_per_cell']:.1f} Python"
    )


def summary(rows: list[dict[str, Any]]) -> list[str]:
    """Per tree, size and path: the median of the rounds' figures (each a median of blocks) and the
    rounds' spread, so that 0.09 and 0.11 ms can be told apart (or seen not to be)."""
    groups: dict[tuple[str, int, bool], list[dict[str, Any]]] = {}
    for r in rows:
        if "added_us" in r:
            groups.setdefault((r["tree"], r["names"], r["portable"]), []).append(r)
    out = []
    for (tree, names, portable), rs in groups.items():
        added = sorted(r["added_us"] for r in rs)
        blocks = sorted(b for r in rs for b in r["added_blocks_us"])
        q1, q3 = blocks[len(blocks) // 4], blocks[(3 * len(blocks)) // 4]
        out.append(
            f"{Path(tree).name:>12} {names:>7,} names {'portable' if portable else 'table':>8}: added "
            f"{statistics.median(added):6.1f} µs median of {len(added)} rounds (rounds {added[0]:.0f}-{added[-1]:.0f}; "
            f"all {len(blocks)} blocks: median {statistics.median(blocks):.0f}, quartiles {q1:.0f}-{q3:.0f}); "
            f"{rs[-1]['python_calls_per_cell']:.1f} Python calls/cell"
        )
    return out


if __name__ == "__main__":
    main()
