"""Where the post-cell hook's time goes, in the main thread's CPU time (issue #48), trees alternated.

    .venv/bin/python bench/hook_parts.py [--trees PATH,PATH] [--names 10000] [--rounds 4] [--blocks 4] [--phases]

For each round and tree (a checkout of this package, put first on the kernel's PYTHONPATH): a fresh
kernel with ``--names`` variables, callbacks that stamp ``time.thread_time_ns`` registered before and
after the hub's own (so the hub's pre- and post-cell callbacks are timed between them), the namespace
diff, the table's read and ``changed_words`` wrapped in place, and ``--blocks`` blocks of 60 cells
(``bench_tick = bench_tick + 1``, history stored). CPU time, not wall time: what the kernel's process
lost to other processes on a shared machine is not counted (cache contention still is). Each stamp and
wrapper adds ~0.5 µs. ``--phases`` instead times IPython's own phases of the cell with the hub's callbacks
off, on, and on without the table's read (``kside.time_phases``): where the time a cell pays outside our
callbacks lands. Prints one line per round and tree and one JSON line; all local, loops bounded.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import sections as S

PARTS = {  # tag: what is wrapped, from the hub
    "diff": "variables._watch.diff",
    "read": "variables._watch._reader.read",
}


@contextlib.contextmanager
def _loaded(runtime: str, tree: str, names: int, stamps: bool = False) -> Iterator[S.BenchKernel]:
    """A fresh kernel importing ``tree``, ``names`` variables and the hub loaded (with ``stamps``, the
    stamping callbacks registered before and after the hub's own); shut down on the way out."""
    os.environ["PYTHONPATH"] = tree
    k = S.BenchKernel(runtime)
    try:
        k.run(f"kside.define_vars({names})", timeout=300)
        if stamps:
            k.run("kside.stamp_callbacks('before')")
        k.run("%load_ext mcp_notebook")
        k.json("kside.after_load()")
        if stamps:
            k.run("kside.stamp_callbacks('after')")
        yield k
    finally:
        k.shutdown()


def phases(runtime: str, tree: str, names: int, blocks: int) -> dict[str, Any]:
    """IPython's phases of a cell, the hub's callbacks off / on / on without the table (kside.time_phases)."""
    with _loaded(runtime, tree, names) as k:
        return k.json(f"kside.time_phases(60, {blocks})", timeout=600)


def one(runtime: str, tree: str, names: int, blocks: int) -> dict[str, Any]:
    """The hub's callbacks and the diff's parts in main-thread CPU time, medians of ``blocks`` blocks."""
    with _loaded(runtime, tree, names, stamps=True) as k:
        where = k.run("import mcp_notebook; print(mcp_notebook.__file__)").stdout.strip()
        if not where.startswith(tree):
            raise RuntimeError(f"the kernel imported {where}, not the tree {tree}")
        if k.run("print(mcp_notebook.hub().variables._watch.reads_table)").stdout.strip() == "True":
            for tag, path in PARTS.items():
                k.run(f"kside.time_part({path!r}, {tag!r})")
            k.run(
                "import mcp_notebook.postcell.nswatch as _nw, kside as _ks\n"
                "_cw = _nw.changed_words\n"
                "def _timed_cw(*a, **kw):\n"
                "    t0 = _ks.time.thread_time_ns()\n"
                "    try:\n        return _cw(*a, **kw)\n"
                "    finally:\n        _ks._PART_TIMES.setdefault('changed_words', []).append(_ks.time.thread_time_ns() - t0)\n"
                "_nw.changed_words = _timed_cw"
            )
        got = [k.json("kside.time_parts(60)") for _ in range(blocks)]
        return {tag: statistics.median(g[tag] for g in got) for tag in got[0]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--trees", default=str(Path(__file__).resolve().parent.parent))
    ap.add_argument("--names", type=int, default=10000)
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--blocks", type=int, default=4)
    ap.add_argument("--phases", action="store_true", help="IPython's phases, callbacks off / on / on without the table")
    args = ap.parse_args()
    trees = [str(Path(t).resolve()) for t in args.trees.split(",")]
    rows = []
    saved = os.environ.get("PYTHONPATH")
    try:
        with tempfile.TemporaryDirectory(prefix="mcpnb-parts-") as runtime:
            for rnd in range(args.rounds):
                for tree in trees:  # alternated
                    measure = phases if args.phases else one
                    row = {
                        "round": rnd,
                        "tree": tree,
                        "names": args.names,
                        **measure(runtime, tree, args.names, args.blocks),
                    }
                    rows.append(row)
                    parts = ", ".join(
                        f"{k} {v:.1f}" if isinstance(v, float) else f"{k} {v}" for k, v in list(row.items())[3:]
                    )
                    print(f"round {rnd} {Path(tree).name:>12} {args.names:>7,} names: µs CPU {parts}", file=sys.stderr)
    finally:
        if saved is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = saved
    print("BENCHJSON " + json.dumps({"load": os.getloadavg(), "rows": rows}))


if __name__ == "__main__":
    main()
