"""The MCP Apps views as a user meets them: a host page on the official Apps SDK (AppBridge) and the
official TypeScript client in headless chromium, against a real kernel's hub.

    .venv/bin/python bench/apps.py [--rounds 5]

Per round: the frame explorer opened on a 1,000,000-row pandas frame (tool call to the first rows
painted: the view's HTML read, the iframe's start, the tool call), a jump to row 900,123 (typed to
shown), a sort by a header click (clicked to the first sorted row shown), a lazy DuckDB relation
opened and jumped to row 500,000; then the size of the built views. Rounds after the first find
the sorted order in the hub's per-cell order cache (the first round's column shows the uncached sort). Needs `bash scripts/test.sh
--setup-only` (the views' Node tooling builds the test host). Writes bench/results/apps.json.
"""

from __future__ import annotations

import argparse
import functools
import gzip
import http.server
import json
import statistics
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

import test_apps_browser as views  # noqa: E402
from kernel_harness import Kernel  # noqa: E402
from playwright.sync_api import sync_playwright  # noqa: E402


def _timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return (time.perf_counter() - start) * 1000


def _open(page, name: str) -> None:
    """The frame explorer on ``name``, until its first row is shown."""
    page.evaluate("a => window.host.open('explore_frame', a)", {"name": name})
    views._row_text(page.frame_locator("#view"), 0)


def _jump(page, row: int) -> None:
    """Go to ``row`` in the open frame explorer, until it is shown."""
    view = page.frame_locator("#view")
    view.locator('[data-testid="jump"]').fill(str(row))
    view.locator('[data-testid="jump"]').press("Enter")
    views._row_text(view, row, timeout=30_000)


def _sort(page) -> None:
    """Sort by x (a header click), until the sorted order is shown."""
    view = page.frame_locator("#view")
    view.locator('[data-column="x"]').click()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        texts = view.locator('[data-row="1"] .cell').all_inner_texts()
        if texts and texts[1] == "1000":  # x = (n % 1000) / 10 sorted, ties in source order
            return
        time.sleep(0.01)
    raise AssertionError("the sorted first row never showed")


def one_round(page) -> dict[str, float]:
    return {
        "frame: open to first rows": _timed(lambda: _open(page, "big")),
        "frame: jump to row 900,123": _timed(lambda: _jump(page, 900123)),
        "frame: sort 1M rows by a header click": _timed(lambda: _sort(page)),
        "duckdb: open to first rows": _timed(lambda: _open(page, "duck")),
        "duckdb: jump to row 500,000": _timed(lambda: _jump(page, 500000)),
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    kernel = Kernel()
    try:
        hub = kernel.load_hub()
        kernel.run(
            "import numpy as np, pandas as pd, duckdb\n"
            "big = pd.DataFrame({'n': np.arange(1_000_000), 'x': (np.arange(1_000_000) % 1000) / 10,"
            " 'word': ['w%d' % (i % 1000) for i in range(1_000_000)]})\n"
            "duck = duckdb.sql('select range as i, range % 97 as m from range(1000000)')"
        )
        handler = functools.partial(views._Quiet, directory=str(views.HOST_DIR))
        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        url = f"http://127.0.0.1:{server.server_address[1]}/index.html"
        rounds = []
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=views.CHROMIUM, args=["--no-sandbox", "--disable-gpu"])
            page = browser.new_page(viewport={"width": 1100, "height": 900})
            page.goto(url)
            page.evaluate("([u, t]) => window.host.connect(u, t)", [hub["url"], hub["token"]])
            for _ in range(args.rounds):
                rounds.append(one_round(page))
            browser.close()
        server.shutdown()
    finally:
        kernel.shutdown()
    print(f"# MCP Apps views, {args.rounds} rounds (median / max ms)")
    print("| step | median ms | max ms | first round ms |\n|---|---|---|---|")
    result = {}
    for key in rounds[0]:
        values = [r[key] for r in rounds]
        result[key] = {"median": statistics.median(values), "max": max(values), "first": values[0]}
        print(f"| {key} | {statistics.median(values):.0f} | {max(values):.0f} | {values[0]:.0f} |")
    sizes = {}
    for path in sorted((ROOT / "mcp_notebook" / "views").glob("*.html")):
        raw = path.read_bytes()
        sizes[path.name] = {"bytes": len(raw), "gzip": len(gzip.compress(raw, 9))}
        print(f"{path.name}: {len(raw):,} bytes, {len(gzip.compress(raw, 9)):,} gzipped")
    out = ROOT / "bench" / "results"
    out.mkdir(exist_ok=True)
    (out / "apps.json").write_text(json.dumps({"steps": result, "sizes": sizes}, indent=1))


if __name__ == "__main__":
    main()
