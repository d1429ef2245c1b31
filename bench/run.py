"""mcp-notebook benchmark suite (issue 7).

    .venv/bin/python bench/run.py [--quick] [--out PATH]

Measures the request path (hub vs the official SDK's low-level Server and MCPServer, with wrk),
the post-cell hook (up to 100,000 names), notification latency, reads during a busy cell with the
official SDK client and what a reading client costs the cell (bench/cellfirst.py), reads that
differ one from the next beside a bare uvloop responder (bench/varied.py), the fan-out to 1,000
subscriptions (bench/scaling.py), big reads and the cost of loading. Prints a table and writes
bench/results/latest.json. All traffic stays on 127.0.0.1 and
every loop is bounded by a count or a deadline. ``--quick`` is a smoke run (under 2 minutes).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import cellfirst
import quiet
import scaling
import sections as S
import varied
from notify import notification_latency

PROFILES: dict[str, dict[str, Any]] = {
    "full": {
        "wrk_s": 8,
        "warmup_s": 2,
        "sdk_handshake": True,
        "handle_calls": 3000,
        "hook_calls": 300,
        "hook_budget_s": 3,
        "e2e_cells": 60,
        "e2e_blocks": 3,
        "notify_cells": 50,
        "busy_s": 5,
        "big_n": 10,
        "slow_blocks": 6,
        "slow_cell_s": 2.0,
        "varied_rounds": 2,
        "fanout_cells": 10,
    },
    "quick": {
        "wrk_s": 1,
        "warmup_s": 0.5,
        "sdk_handshake": False,
        "handle_calls": 300,
        "hook_calls": 40,
        "hook_budget_s": 1,
        "e2e_cells": 15,
        "e2e_blocks": 1,
        "notify_cells": 8,
        "busy_s": 2.5,
        "big_n": 2,
        "slow_blocks": 2,
        "slow_cell_s": 1.0,
        "varied_rounds": 1,
        "fanout_cells": 3,
    },
}


def log(msg: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def run_suite(quick: bool, request_only: bool = False) -> dict[str, Any]:
    prof = PROFILES["quick" if quick else "full"]
    res: dict[str, Any] = {"mode": "quick" if quick else "full", "profile": prof, "machine": S.machine_facts()}
    res["machine"]["loadavg_start"] = os.getloadavg()
    others = quiet.OtherLoad().start()
    t_start = time.perf_counter()
    S.compile_package()  # bytecode as pip writes it: the load cost users see, whatever PYTHONDONTWRITEBYTECODE says
    with tempfile.TemporaryDirectory(prefix="mcpnb-bench-") as runtime:
        log("kernel A: load cost, request path, notifications, busy reads, varied reads, fan-out, big reads")
        k = S.BenchKernel(runtime)
        try:
            k.run("kside.install_stamp_hook()")  # before the hub's hook: stamps the end of each cell
            k.run("%config MCPHub.page_size = 2000")  # one page of ~1,000 resources, like the SDK servers
            res["load"] = S.guarded(S.load_cost, k)
            info = k.info()
            k.run("x = 1\nkside.define_vars(1000)")
            log("request path: hub")
            res["request_hub"] = S.guarded(S.hub_request_path, k, info, prof)
            if not request_only:
                log("notification latency")
                res["notify"] = S.guarded(notification_latency, k, info, prof["notify_cells"])
                log("reads during a busy cell")
                res["busy"] = S.guarded(S.busy_reads, k, info, prof["busy_s"])
                log("varied reads beside a bare uvloop responder")
                res["varied"] = S.guarded(varied.varied_reads, k, info, prof["wrk_s"], prof["varied_rounds"])
                log("fan-out to 1, 100, 1,000 subscriptions")
                res["fanout"] = S.guarded(scaling.subscribers, k, info, prof["fanout_cells"])
                log("big reads")
                res["big_reads"] = S.guarded(S.big_reads, k, info, prof["big_n"])
        finally:
            k.shutdown()
        if not request_only:
            log("the cell comes first: busy reads with the official SDK client, cell slowdown at 20 reads/s")
            res["cellfirst"] = S.guarded(cellfirst.run, prof)
        for kind in ("lowlevel", "mcpserver"):
            log(f"request path: SDK {kind}")
            res[f"request_sdk_{kind}"] = S.guarded(S.sdk_request_path, kind, prof)
        res["hook"] = {}
        for name, setup in S.SCENARIOS.items() if not request_only else ():
            log(f"post-cell hook: {name}")
            res["hook"][name] = S.guarded(S.hook_scenario, runtime, setup, "big =" in setup, prof)
    res["elapsed_s"] = time.perf_counter() - t_start
    res["machine"]["loadavg_end"] = os.getloadavg()
    res["machine"]["quiet"] = others.stop()
    return res


# -- table ---------------------------------------------------------------------------------------


def _f(v: Any, nd: int = 1) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:,.{nd}f}"
    return f"{v:,}" if isinstance(v, int) else str(v)


def _table(title: str, head: list[str], rows: list[list[Any]]) -> str:
    cells = [head] + [[_f(c) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(head))]
    lines = [f"\n## {title}", "| " + " | ".join(h.ljust(w) for h, w in zip(head, widths, strict=True)) + " |"]
    lines.append("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    for r in cells[1:]:
        lines.append("| " + " | ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) + " |")
    return "\n".join(lines)


def _load(v: Any) -> str:
    return "/".join(f"{x:.1f}" for x in v) if v else "?"


def render(res: dict[str, Any]) -> str:
    m = res["machine"]
    v = m["versions"]
    out = [
        f"# mcp-notebook benchmarks ({res['mode']} run, {res.get('elapsed_s', 0):.0f} s)",
        f"Machine: {m['cpu']}, {m['cores']} cores, {m['memory_gb']} GB, {m['os']}; Python {m['python']}; "
        f"mcp {v.get('mcp')}, tornado {v.get('tornado')}, uvicorn {v.get('uvicorn')}, ipykernel {v.get('ipykernel')}, "
        f"numpy {v.get('numpy')}, pandas {v.get('pandas')}; load generator: wrk {m['wrk'] or 'absent (Python fallback)'}; "
        f"git {m['git'].get('commit')} (+{m['git'].get('dirty_files', 0)} changed files); "
        f"load average (1/5/15 min) at start {_load(m.get('loadavg_start'))}, at end {_load(m.get('loadavg_end'))}; "
        + quiet.verdict(m.get("quiet")),
    ]
    servers = [
        ("hub", "request_hub"),
        ("SDK Server", "request_sdk_lowlevel"),
        ("SDK MCPServer", "request_sdk_mcpserver"),
    ]
    rows = []
    for label, key in servers:
        data = res.get(key, {})
        if "error" in data:
            rows.append([label, "-", "-", "-", "error: " + data["error"][:60], "", "", "", ""])
            continue
        for k, r in data.items():
            if k.count("/") != 2:
                continue
            era, op, conc = k.split("/")
            if "error" in r:
                rows.append([label, era, op, conc[1:], "error: " + r["error"][:60], "", "", "", ""])
                continue
            rows.append(
                [
                    label,
                    era,
                    op,
                    conc[1:],
                    r["rps"],
                    r["p50_us"] / 1e3,
                    r["p99_us"] / 1e3,
                    r["errors"],
                    r.get("response_bytes"),
                ]
            )
    tool = (m["wrk"] and "wrk") or "Python fallback"
    hub = res.get("request_hub", {})
    out.append(
        _table(
            f"Request path ({tool}, keep-alive; hub lists {hub.get('listed_resources', '?')} resources, SDK 1,001)",
            ["server", "era", "op", "conns", "req/s", "p50 ms", "p99 ms", "errors", "resp bytes"],
            rows,
        )
    )
    ratio_rows = []
    for ref_label, ref_key in servers[1:]:
        ref = res.get(ref_key, {})
        for k, r in hub.items():
            if k.count("/") != 2 or k not in ref or "rps" not in r or "rps" not in ref.get(k, {}):
                continue
            ratio_rows.append([ref_label, k, r["rps"] / ref[k]["rps"], r["p50_us"] / max(1, ref[k]["p50_us"])])
    out.append(
        _table("Ratios hub / SDK (same era, op, connections)", ["vs", "case", "req/s ratio", "p50 ratio"], ratio_rows)
    )
    ih = hub.get("inprocess_handle", {})
    out.append(
        _table(
            "In-process McpServer.handle() (no HTTP), stateless era",
            ["op", "median µs", "p99 µs", "resp bytes"],
            [[op, d.get("median_us"), d.get("p99_us"), d.get("bytes")] for op, d in ih.items()],
        )
    )
    rows = []
    for name, d in res.get("hook", {}).items():
        if "error" in d:
            rows.append([name, "error: " + d["error"][:70], "", "", "", "", "", ""])
            continue
        for subs in ("nosubs", "subs"):
            r = [name, "yes" if subs == "subs" else "no"]
            for mode in ("steady", "rebind", "newname"):
                a = d.get(f"{subs}/{mode}", {})
                r.append(
                    f"{_f(a.get('after_cell', {}).get('median_us'))} / {_f(a.get('after_cell', {}).get('p99_us'))}"
                )
            r.append(_f(d.get(f"{subs}/rebind", {}).get("drain", {}).get("median_us")))
            r.append(_f(d.get("e2e_without", {}).get("median_us")))
            r.append(_f(d.get("e2e_added_us", {}).get(subs)))
            rows.append(r)
    out.append(
        _table(
            "Post-cell hook: hub.after_cell() median / p99 µs (main thread); worker exact check; cell e2e",
            [
                "namespace",
                "subs",
                "steady",
                "rebind 1 name",
                "new _iN name",
                "worker µs",
                "cell e2e µs w/o ext",
                "e2e added µs",
            ],
            rows,
        )
    )
    rows = []
    for mode, d in (res.get("notify") or {}).items():
        if not isinstance(d, dict):
            continue
        if "error" in d:
            rows.append([mode, "error: " + d["error"][:70], "", "", "", ""])
            continue
        rows.append([mode, d.get("received"), d.get("missing"), d.get("median_ms"), d.get("p99_ms"), d.get("max_ms")])
    out.append(
        _table(
            "Notification latency: cell end -> resources/updated at the SDK client",
            ["client mode", "received", "missing", "median ms", "p99 ms", "max ms"],
            rows,
        )
    )
    busy = res.get("busy", {})
    rows = []
    for k, d in busy.items():
        if isinstance(d, dict):
            rows.append([k, d.get("n"), d.get("errors"), d.get("median_ms"), d.get("p99_ms"), d.get("max_ms")])
    if "error" in busy:
        rows.append(["error", busy["error"][:80], "", "", "", ""])
    out.append(
        _table(
            f"Sequential reads (httpx, 1 connection) idle vs during a {busy.get('busy_s', '?')} s pure-Python cell",
            ["case", "n", "errors", "median ms", "p99 ms", "max ms"],
            rows,
        )
    )
    big = res.get("big_reads", {})
    rows = []
    for k, d in big.items():
        if isinstance(d, dict):
            note = d.get("error", "") if d.get("status") != "ok" else d.get("uri", "")
            rows.append([k, d.get("status"), d.get("median_ms"), d.get("p99_ms"), d.get("response_bytes"), note[:60]])
    if "error" in big:
        rows.append(["error", big["error"][:80], "", "", "", ""])
    out.append(
        _table(
            "Big reads (stateless era, sequential)",
            ["resource", "status", "median ms", "p99 ms", "bytes", "note"],
            rows,
        )
    )
    out.extend(render_cellfirst(res))
    ld = res.get("load", {})
    out.append(
        _table(
            "Cost of loading (fresh kernel)",
            ["%load_ext ms", "RSS added MB", "%unload_ext ms", "reload ms"],
            [
                [
                    (ld.get("load_s") or 0) * 1e3,
                    (ld.get("rss_added_bytes") or 0) / 2**20,
                    (ld.get("unload_s") or 0) * 1e3,
                    (ld.get("reload_s") or 0) * 1e3,
                ]
            ]
            if "error" not in ld
            else [[ld["error"][:80], "", "", ""]],
        )
    )
    return "\n".join(out)


def render_cellfirst(res: dict[str, Any]) -> list[str]:
    """The tables of issue #26: busy reads with the SDK client, cell slowdown, varied reads, fan-out."""
    out = []
    cf = res.get("cellfirst") or {}
    busy = cf.get("busy") or {}
    rows = [
        [k, d.get("n"), d.get("errors"), d.get("p50_ms"), d.get("p90_ms"), d.get("p99_ms")]
        for k, d in busy.items()
        if isinstance(d, dict)
    ]
    slow = cf.get("cell_slowdown") or {}
    if "error" in cf or "error" in slow:
        rows.append(["error", (cf.get("error") or slow.get("error", ""))[:80], "", "", "", ""])
    out.append(
        _table(
            f"Reads idle and during a {busy.get('busy_s', '?')} s pure-Python cell: official SDK client (httpx, "
            "head and body in two writes) and a one-write client (1 ms between requests)",
            ["client/case", "n", "errors", "p50 ms", "p90 ms", "p99 ms"],
            rows,
        )
    )
    if "slowdown_pct_median" in slow:
        out.append(
            _table(
                "The cell's own speed while the SDK client reads at 20/s (same pure-Python cell, alternating blocks)",
                [
                    "cell alone s (median)",
                    "cell while reading s (median)",
                    "slower % (median)",
                    "slower % (best of each)",
                    "slower % (median of back-to-back pairs)",
                ],
                [
                    [
                        sorted(slow["alone_s"])[len(slow["alone_s"]) // 2],
                        sorted(slow["reading_s"])[len(slow["reading_s"]) // 2],
                        slow["slowdown_pct_median"],
                        slow["slowdown_pct_min"],
                        slow.get("slowdown_pct_paired_median", "-"),
                    ]
                ],
            )
        )
    var = res.get("varied") or {}
    rows = [
        [
            k,
            max(d["hub_rps"]),
            max(d["bare_rps"]),
            d["ratio_pct"],
            max(d["framing_only_rps"]),
            d["ratio_to_framing_only_pct"],
        ]
        for k, d in var.items()
        if isinstance(d, dict) and "hub_rps" in d
    ]
    if "error" in var:
        rows.append(["error", var["error"][:80], "", "", "", ""])
    out.append(
        _table(
            "Reads that differ one from the next (rotating URIs and ids, wrk) vs a bare uvloop responder (head to a "
            "dict, fixed reply) and a framing-only one",
            ["era, URIs, conns", "hub req/s", "bare req/s", "hub / bare %", "framing-only req/s", "hub / framing %"],
            rows,
        )
    )
    fan = res.get("fanout") or {}
    rows = [
        [k, d.get("complete"), d.get("p50_ms"), d.get("p99_ms"), d.get("max_ms")]
        if "error" not in d
        else [k, "error: " + d["error"][:60], "", "", ""]
        for k, d in fan.items()
        if isinstance(d, dict)
    ]
    out.append(
        _table(
            "Cell end to the last notification at the clients (listen streams)",
            ["subscriptions / streams, client", "cells", "p50 ms", "p99 ms", "max ms"],
            rows,
        )
    )
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="short smoke run (under 2 minutes)")
    ap.add_argument("--request-only", action="store_true", help="only the request path (hub and SDK servers)")
    ap.add_argument("--out", default=str(Path(__file__).resolve().parent / "results" / "latest.json"))
    args = ap.parse_args()
    res = run_suite(args.quick, args.request_only)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(res, indent=2, default=str))
    print(render(res))
    print(f"\nwrote {out}")


if __name__ == "__main__":
    main()
