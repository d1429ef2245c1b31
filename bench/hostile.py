"""The hostile client on every surface, long: tests/test_hostile_fuzz.py with 100,000 cases by default.

    .venv/bin/python bench/hostile.py [--cases 100000] [-k EXPR]

Surfaces: the hub on loopback HTTP, the bare bridge's front over HTTP, the server extension's MCP
endpoints (over the kernel's control channel) and its focus/kernels routes, the control channel
(signed messages on a real kernel's control socket), the bridge's stdin. Prints the cases per
surface and every count that must be zero (unanswered, exit, 5xx, -32603, token_leak, leaked, and
what the surface checks besides), with one example of each. Counts are collected without stopping
at the first problem (``MCP_HOSTILE_COUNT_ONLY=1``); the exit status is 1 if any is not zero.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SURFACES = ("hub", "front", "server", "routes", "control", "stdin")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cases", type=int, default=100_000, help="total cases, shared among the surfaces")
    ap.add_argument("-k", default=None, help="pytest -k expression (e.g. 'control or stdin')")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "hostile.json"
        env = {
            **os.environ,
            "MCP_HOSTILE_CASES": str(args.cases),
            "MCP_HOSTILE_COUNT_ONLY": "1",
            "MCP_HOSTILE_REPORT": str(report),
            "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep),
        }
        cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--timeout", "0"]
        cmd += ["tests/test_hostile_fuzz.py"] + (["-k", args.k] if args.k else [])
        started = time.monotonic()
        proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
        elapsed = time.monotonic() - started
        doc = json.loads(report.read_text()) if report.exists() else {"counts": {}, "examples": {}}
    counts, examples = doc["counts"], doc["examples"]
    total = sum(v for k, v in counts.items() if k.endswith(".cases"))
    print(f"{total:,} cases in {elapsed:.0f} s (Python {platform.python_version()}, {os.cpu_count()} CPUs)")
    for surface in SURFACES:
        bad = {
            k.split(".", 1)[1]: v for k, v in counts.items() if k.startswith(surface + ".") and not k.endswith(".cases")
        }
        print(f"  {surface:8} {counts.get(surface + '.cases', 0):>8,} cases  problems: {bad or 'none'}")
    problems = {k: v for k, v in counts.items() if not k.endswith(".cases") and v}
    for key in problems:
        print(f"  e.g. {key}: {examples.get(key, '')[:300]}")
    tail = proc.stdout.strip().splitlines()[-1] if proc.stdout.strip() else ""
    print(f"pytest: {tail}")
    if proc.returncode != 0:
        print(proc.stdout[-4000:])
        print(proc.stderr[-2000:])
    sys.exit(1 if problems or proc.returncode != 0 else 0)


if __name__ == "__main__":
    main()
