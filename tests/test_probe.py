"""The acceptance probe of bench/probe.py in its bounded form (seconds): mutated requests in both eras
with and without the token, comm garbage, abuse beside a reader, dropped streams, a read soak,
unload/reload cycles and a restart. Counts only, no timing asserts (the figures are in bench/)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))
from probe import run_probe


def test_probe_bounded():
    out = run_probe(cases=600, soak=500, drops=24, cycles=2, abuse_seconds=2, tricklers=40, restarts=1)
    fuzz = out["fuzz"]
    assert fuzz["cases"] == 600 and fuzz["crashes"] == 0, fuzz["examples"]
    assert "200" in fuzz["status"] and "401" in fuzz["status"]  # both authenticated and refused cases ran
    assert out["comm"]["kernel_answers"] and out["comm"]["hub_answers"]
    assert out["abuse"]["reader"]["errors"] == 0 and out["abuse"]["reader"]["n"] > 0
    assert out["dropped"]["hub"] == {"connections": 0, "streams": 0, "listens": 0, "session_streams": 0}
    assert out["soak"]["non_200"] == 0
    cycles = out["cycles"]
    for key in ("hooks", "targets", "log_handlers"):
        assert cycles["before"][key] == cycles["after"][key], key
    assert len(cycles["after"]["runtime_files"]) == 1 and cycles["old_ports_still_open"] == 0
    assert cycles["hub_answers"] and out["restarts"]["hub_answers"]
    assert out["restarts"]["runtime_files_after_each"] == [1]
    assert out["server_writes"] == []
