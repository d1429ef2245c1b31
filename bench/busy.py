"""Reads during a busy pure-Python cell, on their own (the same section bench/run.py runs).

.venv/bin/python bench/busy.py [--seconds 5]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

import sections as S


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=float, default=5.0, help="how long the busy cell spins")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="mcpnb-bench-") as runtime:
        k = S.BenchKernel(runtime)
        try:
            k.run("%load_ext mcp_notebook")
            info = k.info()
            k.run("x = 1\nkside.define_vars(1000)")
            out = S.busy_reads(k, info, args.seconds)
        finally:
            k.shutdown()
    for key, row in out.items():
        print(key, json.dumps(row))


if __name__ == "__main__":
    main()
