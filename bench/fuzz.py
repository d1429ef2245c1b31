"""The long fuzz run: tests/test_fuzz.py under Hypothesis's ``long`` profile (tens of thousands of cases).

    .venv/bin/python bench/fuzz.py [--profile long] [-k EXPR]

Prints the number of cases per pass (in-process, sockets, real kernel) and the failures, which
must be 0. CI runs the same tests under the bounded ``ci`` profile.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--profile", default="long")
    ap.add_argument("-k", default=None, help="pytest -k expression (e.g. 'in_process')")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "cases.json"
        env = {**os.environ, "HYPOTHESIS_PROFILE": args.profile, "MCP_FUZZ_REPORT": str(report)}
        cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--timeout", "0", "tests/test_fuzz.py"]
        if args.k:
            cmd += ["-k", args.k]
        started = time.monotonic()
        proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
        elapsed = time.monotonic() - started
        cases = json.loads(report.read_text()) if report.exists() else {}
    tail = proc.stdout.strip().splitlines()[-1] if proc.stdout.strip() else ""
    print(f"profile {args.profile}: {sum(cases.values())} cases in {elapsed:.0f} s  {cases}")
    print(f"pytest: {tail}")
    if proc.returncode != 0:
        print(proc.stdout[-6000:])
        print(proc.stderr[-2000:])
    sys.exit(proc.returncode)


if __name__ == "__main__":
    main()
