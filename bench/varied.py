"""Small reads that differ one from the next, hub vs a bare uvloop HTTP responder, in one run.

    .venv/bin/python bench/varied.py [--seconds 5] [--rounds 2]

The load generator (wrk, one thread) reads ``nb://vars/v0`` .. ``nb://vars/v999`` in turn with a
fresh id each time, in both eras (stateless: the ``Mcp-Name`` header moves with the URI;
handshake: one session, its id in every head), so neither the hub's remembered heads nor its
replays of a repeated request apply; the same script is sent to
bench/bare.py, a uvloop responder that only finds each request's end and answers fixed bytes.
Rounds alternate hub and responder so drift hits both. Needs wrk. Loopback only.
"""

from __future__ import annotations

import argparse
import json
import os
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


def _bare(size: int, framing_only: bool = False) -> tuple[subprocess.Popen, str]:
    port = S._free_port()
    extra = ["--framing-only"] if framing_only else []
    proc = subprocess.Popen([sys.executable, str(HERE / "bare.py"), str(port), str(size), *extra])
    S._wait_port(port, proc)
    return proc, f"http://127.0.0.1:{port}/mcp"


def varied_reads(
    k: S.BenchKernel,
    info: dict[str, Any],
    seconds: float,
    rounds: int,
    uris: tuple[int, ...] = (10, 1000),
    eras: tuple[str, ...] = ("stateless", "handshake"),
) -> dict[str, Any]:
    """Requests/s of rotating reads at 1 and 16 connections over ``uris`` distinct URIs, per era: hub,
    bare responder, ratio. 10 URIs: a client reading a handful of resources (the hub remembers their
    heads); 1,000: every request is new to the hub (more distinct heads than it remembers). The
    handshake era reads in one session (its id in every head, no ``_meta``, no ``Mcp-Name``)."""
    if not loadgen.have_wrk():
        return {"error": "wrk is not installed"}
    k.run("kside.define_vars(1000)")
    out: dict[str, Any] = {}
    for era in eras:
        headers, auth = _era_headers(era, info)
        size = loadgen.check_once(info["url"], *_one(auth, "nb://vars/v7", era))
        out[f"{era} response_bytes"] = size
        proc, bare_url = _bare(size)
        floor, floor_url = _bare(size, framing_only=True)
        try:
            loadgen.run_wrk_rotating(info["url"], auth, "nb://vars/v", 1000, 4, 1, era)  # warm-up: every read cached
            for n, conns in [(n, c) for n in uris for c in (1, 16)]:
                runs: dict[str, list[dict[str, Any]]] = {"hub": [], "bare": [], "framing": []}
                for _ in range(rounds):
                    for name, url, h in (
                        ("hub", info["url"], auth),
                        ("bare", bare_url, headers),
                        ("framing", floor_url, headers),
                    ):
                        runs[name].append(loadgen.run_wrk_rotating(url, h, "nb://vars/v", n, conns, seconds, era))
                out[f"{era}, {n} URIs, c{conns}"] = _summary(runs)
        finally:
            for p in (proc, floor):
                p.terminate()
                p.wait(10)
    return out


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
    return {
        "hub_rps": [round(r["rps"]) for r in hub],
        "bare_rps": [round(r["rps"]) for r in bare],
        "hub_errors": sum(r["errors"] for r in hub),
        "hub_p50_us": best_hub["p50_us"],
        "bare_p50_us": best_bare["p50_us"],
        "ratio_pct": round(100 * best_hub["rps"] / best_bare["rps"], 1),
        "framing_only_rps": [round(r["rps"]) for r in framing],
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
    args = ap.parse_args()
    start = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="mcpnb-varied-") as runtime:
        k = S.BenchKernel(runtime)
        try:
            k.run("%load_ext mcp_notebook")
            out = varied_reads(k, k.info(), args.seconds, args.rounds)
        finally:
            k.shutdown()
    out |= {"machine": S.machine_facts(), "loadavg_start": start, "loadavg_end": os.getloadavg()}
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
