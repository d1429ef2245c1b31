"""Small reads that differ one from the next, hub vs bare uvloop and asyncio HTTP responders, in one run.

    .venv/bin/python bench/varied.py [--seconds 5] [--rounds 2] [--uris 25,1000] [--conns 1,16]
                                     [--eras stateless,handshake]

The load generator (wrk, one thread) reads ``nb://vars/v0`` .. ``nb://vars/v{N-1}`` in turn with a
fresh id each time, at 1 and 16 connections, in both eras (stateless: the ``Mcp-Name`` header
moves with the URI; handshake: one session, its id in every head, the URI in the body alone), so
no two requests in a row are alike; the same script is sent to bench/bare.py, responders that
split each head into a dict and answer fixed bytes, on uvloop (``bare``) and on asyncio's own loop
(``bare_asyncio``), and a framing-only one (it only finds each request's end). 25 URIs: a client
reading a handful of resources; 1,000: more distinct heads than the hub remembers. Rounds
alternate hub and responders so drift hits all of them. Needs wrk. Loopback only.

Beside requests/s, each run records the CPU time the serving process spent per request (its user +
system time from /proc, over the wrk run): on a machine shared with other work the requests/s swing,
while the CPU a request costs the hub and the responders moves much less, and their ratio is what
the requests/s ratio becomes on a quiet machine where the server's core is the bottleneck.
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
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

import loadgen
import sections as S

HERE = Path(__file__).resolve().parent


def _bare(size: int, framing_only: bool = False, asyncio_loop: bool = False) -> tuple[subprocess.Popen, str]:
    port = S._free_port()
    extra = (["--framing-only"] if framing_only else []) + (["--asyncio"] if asyncio_loop else [])
    proc = subprocess.Popen([sys.executable, str(HERE / "bare.py"), str(port), str(size), *extra])
    S._wait_port(port, proc)
    return proc, f"http://127.0.0.1:{port}/mcp"


def varied_reads(
    k: S.BenchKernel,
    info: dict[str, Any],
    seconds: float,
    rounds: int,
    uris: tuple[int, ...] = (25, 1000),
    eras: tuple[str, ...] = ("stateless", "handshake"),
    conns: tuple[int, ...] = (1, 16),
) -> dict[str, Any]:
    """Requests/s of rotating reads at ``conns`` connections over ``uris`` distinct URIs, per era: hub,
    bare responders (uvloop, asyncio), ratios. 25 URIs: a client reading a handful of resources (the
    hub remembers their heads); 1,000: every request is new to the hub (more distinct heads than it
    remembers). The handshake era reads in one session (its id in every head, no ``_meta``, no
    ``Mcp-Name``)."""
    if not loadgen.have_wrk():
        return {"error": "wrk is not installed"}
    k.run("kside.define_vars(1000)")
    hub_pid = k.pid()
    out: dict[str, Any] = {}
    for era in eras:
        headers, auth = _era_headers(era, info)
        size = loadgen.check_once(info["url"], *_one(auth, "nb://vars/v7", era))
        out[f"{era} response_bytes"] = size
        proc, bare_url = _bare(size)
        aproc, abare_url = _bare(size, asyncio_loop=True)
        floor, floor_url = _bare(size, framing_only=True)
        try:
            loadgen.run_wrk_rotating(info["url"], auth, "nb://vars/v", 1000, 4, 1, era)  # warm-up: every read cached
            for n, c in [(n, c) for n in uris for c in conns]:
                runs: dict[str, list[dict[str, Any]]] = {"hub": [], "bare": [], "bare_asyncio": [], "framing": []}
                for _ in range(rounds):
                    for name, url, h, pid in (
                        ("hub", info["url"], auth, hub_pid),
                        ("bare", bare_url, headers, proc.pid),
                        ("bare_asyncio", abare_url, headers, aproc.pid),
                        ("framing", floor_url, headers, floor.pid),
                    ):
                        before = _cpu_seconds(pid)
                        res = loadgen.run_wrk_rotating(url, h, "nb://vars/v", n, c, seconds, era)
                        res["cpu_us"] = (_cpu_seconds(pid) - before) * 1e6 / max(1, res["requests"])
                        runs[name].append(res)
                out[f"{era}, {n} URIs, c{c}"] = _summary(runs)
        finally:
            for p in (proc, aproc, floor):
                p.terminate()
                p.wait(10)
    return out


def _cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` so far (all its threads; Linux /proc)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _era_headers(era: str, info: dict[str, Any]) -> tuple[dict[str, str], dict[str, str]]:
    """The headers the bare responders get, and the hub's (with its token; a session's in the handshake era)."""
    token = {"Authorization": f"Bearer {info['token']}"}
    if era == "stateless":
        headers = {**loadgen.BASE_HEADERS, "MCP-Protocol-Version": loadgen.STATELESS, "Mcp-Method": "resources/read"}
        return headers, {**headers, **token}
    session = loadgen.handshake_session(info["url"], token)
    return {k: v for k, v in session.items() if k != "Authorization"}, session


def _summary(runs: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    hub, bare, framing = runs["hub"], runs["bare"], runs["framing"]
    best_hub = max(hub, key=lambda r: r["rps"])
    best_bare = max(bare, key=lambda r: r["rps"])
    best_asyncio = max(runs["bare_asyncio"], key=lambda r: r["rps"])
    return {
        "hub_rps": [round(r["rps"]) for r in hub],
        "bare_rps": [round(r["rps"]) for r in bare],
        "bare_asyncio_rps": [round(r["rps"]) for r in runs["bare_asyncio"]],
        "hub_errors": sum(r["errors"] for r in hub),
        "hub_p50_us": best_hub["p50_us"],
        "bare_p50_us": best_bare["p50_us"],
        "ratio_pct": round(100 * best_hub["rps"] / best_bare["rps"], 1),
        "ratio_to_asyncio_pct": round(100 * best_hub["rps"] / best_asyncio["rps"], 1),
        "framing_only_rps": [round(r["rps"]) for r in framing],
        # CPU µs of the serving process per request, median of the rounds: robust to other load
        "cpu_us": {name: round(statistics.median(r["cpu_us"] for r in rs), 2) for name, rs in runs.items()},
        "ratio_to_framing_only_pct": round(100 * best_hub["rps"] / max(r["rps"] for r in framing), 1),
    }


def _one(headers: dict[str, str], uri: str, era: str = "stateless") -> tuple[dict[str, str], bytes]:
    if era != "stateless":
        return headers, json.dumps(
            {"jsonrpc": "2.0", "id": 1, "method": "resources/read", "params": {"uri": uri}}
        ).encode()
    body = {"jsonrpc": "2.0", "id": 1, "method": "resources/read", "params": {"uri": uri, "_meta": loadgen.META}}
    return {**headers, "Mcp-Name": uri}, json.dumps(body).encode()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--uris", default="25,1000", help="counts of distinct URIs read in turn, comma-separated")
    ap.add_argument("--conns", default="1,16", help="wrk connections, comma-separated")
    ap.add_argument("--eras", default="stateless,handshake")
    args = ap.parse_args()
    counts = tuple(int(n) for n in args.uris.split(","))
    conns = tuple(int(n) for n in args.conns.split(","))
    eras = tuple(args.eras.split(","))
    start = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="mcpnb-varied-") as runtime:
        k = S.BenchKernel(runtime)
        try:
            k.run("%load_ext mcp_notebook")
            out = varied_reads(k, k.info(), args.seconds, args.rounds, counts, eras, conns)
        finally:
            k.shutdown()
    out |= {"machine": S.machine_facts(), "loadavg_start": start, "loadavg_end": os.getloadavg()}
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
