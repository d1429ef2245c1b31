"""What `%load_ext mcp_notebook` costs in a fresh kernel, as a user gets it: the package's bytecode
written first (as pip does on install), then N fresh kernels, each loading once.

    .venv/bin/python bench/load.py [--kernels 10]

Timed inside each kernel: the wall time of `%load_ext mcp_notebook` (importing the package, which
a fresh kernel has not imported, the hub's start: socket, server thread and its loop — uvloop is
imported on that thread while the main thread waits —, runtime file) and the main thread's CPU time
over the same span (less sensitive to other load on the machine). Prints one JSON document with the
median, min and max of each, the machine, the Python and the load average before and after: quote a
figure with those. bench/run.py's load section times the same first load in one kernel.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

import sections as S

CELL = """import time as _t, json as _j
_w0, _c0 = _t.perf_counter(), _t.thread_time()
get_ipython().run_line_magic('load_ext', 'mcp_notebook')
_w1, _c1 = _t.perf_counter(), _t.thread_time()
print('BENCHJSON ' + _j.dumps({'wall_ms': (_w1 - _w0) * 1e3, 'main_cpu_ms': (_c1 - _c0) * 1e3}))"""


def _spread(values: list[float]) -> dict[str, Any]:
    s = sorted(values)
    return {"median": round(s[len(s) // 2], 1), "min": round(s[0], 1), "max": round(s[-1], 1)}


def run(kernels: int) -> dict[str, Any]:
    S.compile_package()
    rows: list[dict[str, float]] = []
    start = os.getloadavg()
    for _ in range(kernels):
        with tempfile.TemporaryDirectory(prefix="mcpnb-load-") as runtime:
            k = S.BenchKernel(runtime)
            try:
                rows.append(k.json(CELL))
            finally:
                k.shutdown()
    return {
        "kernels": kernels,
        "load_ext_wall_ms": _spread([r["wall_ms"] for r in rows]),
        "load_ext_main_thread_cpu_ms": _spread([r["main_cpu_ms"] for r in rows]),
        "machine": S.machine_facts(),
        "loadavg_start": start,
        "loadavg_end": os.getloadavg(),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kernels", type=int, default=10, help="fresh kernels, one load each")
    args = ap.parse_args()
    print(json.dumps(run(max(1, args.kernels)), indent=1))


if __name__ == "__main__":
    main()
