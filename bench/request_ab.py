"""The request path of two trees, alternated in one window: the hub thread's CPU per request and
requests a second under load, for a small read and a listing of 1,000 variables, in both eras, on
one connection and on sixteen.

    .venv/bin/python bench/request_ab.py --trees BEFORE,AFTER [--rounds 3] [--seconds 2]

A tree may carry ``%config`` lines run before loading after a ``#``, so one tree is compared with
itself under another setting: ``--trees .,.#MCPHub.held_sockets=False`` (the loop's transport).

Each round loads a fresh kernel per tree (its PYTHONPATH the tree) and runs the same loads in the
same order; the trees take turns, so a drift of the machine's speed hits both. The CPU figure is
the hub thread's own time (``time.thread_time`` read on the hub's loop) over the load divided by
the requests answered: less moved by other load on the machine than requests a second, which
count the load generator's share of two cores too. wrk when installed, else the Python load
generator (``loadgen.run_load``). Prints one line per load and tree as it goes, then the medians
and one JSON document (``BENCHJSON``) with every figure, the machine and the load average.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

import loadgen
import sections as S

THREAD_TIME = (
    "import mcp_notebook as _m, concurrent.futures as _cf, time as _t\n_f = _cf.Future()\n"
    "_m.hub().transport.loop.call_soon_threadsafe(lambda: _f.set_result(_t.thread_time()))\nprint(repr(_f.result(5)))"
)
OPS = (("read", "resources/read", {"uri": "nb://vars/x"}), ("list", "resources/list", None))


def hub_cpu(k: S.BenchKernel) -> float:
    """The hub thread's CPU seconds so far, read on its own loop."""
    return float(k.run(THREAD_TIME).stdout.strip().splitlines()[-1])


def one_tree(
    k: S.BenchKernel, seconds: float, connections: tuple[int, ...], ops: tuple[str, ...] = ("read", "list")
) -> dict[str, dict[str, float]]:
    """Every load against one loaded kernel: {"era/op/cN": {"cpu_us": .., "rps": ..}}."""
    info = k.info()
    auth = {"Authorization": f"Bearer {info['token']}"}
    out: dict[str, dict[str, float]] = {}
    for era in ("stateless", "handshake"):
        session = loadgen.handshake_session(info["url"], auth) if era == "handshake" else None
        for op, method, params in OPS:
            if op not in ops:
                continue
            if session is None:
                headers, body = loadgen.stateless_request(method, params)
                headers.update(auth)
            else:
                headers, body = loadgen.handshake_request(session, method, params)
            loadgen.check_once(info["url"], headers, body)
            loadgen.run_load(info["url"], headers, body, 4, 0.5)  # warm
            for c in connections:
                cpu0 = hub_cpu(k)
                res = loadgen.run_load(info["url"], headers, body, c, seconds)
                cpu = hub_cpu(k) - cpu0
                n = max(1, int(res.get("requests") or 0))
                out[f"{era}/{op}/c{c}"] = {"cpu_us": round(cpu / n * 1e6, 2), "rps": round(float(res["rps"]), 1)}
    return out


def _arm(spec: str) -> str:
    """A tree, resolved, with its ``#config`` (if any) kept."""
    path, sep, config = spec.partition("#")
    return str(Path(path).resolve()) + sep + config


def _label(tree: str) -> str:
    """How a tree is named in the figures: its directory, and its ``#config``."""
    path, sep, config = tree.partition("#")
    return Path(path).name + sep + config


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--trees", required=True, help="two or more source trees, comma-separated (each a checkout)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=2.0, help="each load's length")
    ap.add_argument("--connections", default="1,16")
    ap.add_argument("--ops", default="read,list", help="which loads: read, list or both")
    args = ap.parse_args()
    trees = [_arm(t) for t in args.trees.split(",")]
    conns = tuple(int(c) for c in args.connections.split(","))
    start = os.getloadavg()
    runs: dict[str, dict[str, list[dict[str, float]]]] = {}
    with tempfile.TemporaryDirectory(prefix="mcpnb-request-ab-") as runtime:
        for rnd in range(max(1, args.rounds)):
            for tree in trees if rnd % 2 == 0 else trees[::-1]:
                path, _, config = tree.partition("#")
                os.environ["PYTHONPATH"] = path
                k = S.BenchKernel(runtime)
                try:
                    k.run("%config MCPHub.page_size = 2000")
                    if config:
                        k.run(f"%config {config}")
                    k.run("%load_ext mcp_notebook")
                    k.run("x = 1\nkside.define_vars(1000)")
                    for key, fig in one_tree(k, args.seconds, conns, tuple(args.ops.split(","))).items():
                        runs.setdefault(key, {}).setdefault(tree, []).append(fig)
                        print(rnd, _label(tree), key, fig, flush=True)
                finally:
                    k.shutdown()
    medians = {
        key: {
            _label(t): {f: statistics.median(x[f] for x in figs) for f in ("cpu_us", "rps")} for t, figs in by.items()
        }
        for key, by in runs.items()
    }
    print()
    for key, by in medians.items():
        print(f"{key:24}", "  ".join(f"{t}: {v['cpu_us']:.2f} us/req {v['rps']:,.0f} req/s" for t, v in by.items()))
    doc = {
        "trees": trees,
        "rounds": args.rounds,
        "seconds": args.seconds,
        "runs": runs,
        "medians": medians,
        "machine": S.machine_facts(),
        "loadavg_start": start,
        "loadavg_end": os.getloadavg(),
    }
    print("BENCHJSON " + json.dumps(doc))


if __name__ == "__main__":
    main()
