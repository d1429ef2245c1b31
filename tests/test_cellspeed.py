"""bench/cellspeed.py, the method that measures the cell's own speed to 1 % (issue #48): its
statistics on known inputs, and one short run with real kernels, a real hub and a reader process.
Counts and structure only, no timing asserts (the figures are in bench/ and docs/DESIGN.md)."""

from __future__ import annotations

import random
import sys
import tempfile
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))
import cellspeed
import sections as S
from speed_cell import ALONE, OTHER, OWN


def _rows(factors: dict[int, float], groups: int, seed: int = 3) -> tuple[list, dict]:
    """Synthetic blocks: each group drifts (a common factor), each arm its own factor."""
    rng = random.Random(seed)
    rows, blocks = [], []
    for _ in range(groups + 1):
        drift = rng.uniform(0.8, 1.2)
        arms = [ALONE, OWN, OTHER]
        rng.shuffle(arms)
        for arm in arms:
            wall = 0.3 * drift * factors[arm]
            rows.append(
                [arm, wall, int(wall * 1e9), 0, 2 if arm == OWN else 0, 1, 1, 60_000 * 6 if arm == OWN else 0, 0]
            )
            lat = [] if arm == ALONE else [0.5] * 6
            blocks.append({"arm": arm, "lat_ms": lat, "errors": 0, "cpu_ms": 3.0})
    return rows, {"blocks": blocks, "core": 0, "affinity": [0]}


def test_paired_groups_cancel_drift_and_find_a_known_slowdown():
    rows, reader = _rows({ALONE: 1.0, OWN: 1.01, OTHER: 1.0}, groups=20)
    res = cellspeed.analyse(rows, reader, seed=1)
    own = res["wall"]["own_vs_alone"]
    assert res["groups"] == 20
    assert own["median_pct"] == pytest.approx(1.0, abs=1e-6)  # the drift (±20 %) cancels in each group
    assert own["ci95_pct"][0] == pytest.approx(1.0, abs=1e-6) and own["ci95_pct"][1] == pytest.approx(1.0, abs=1e-6)
    assert res["wall"]["other_vs_alone"]["median_pct"] == pytest.approx(0.0, abs=1e-6)
    assert res["arms"]["own"]["reads_per_block"] == {"min": 6, "median": 6, "max": 6}
    assert "reads" not in res["arms"]["alone"]
    assert res["per_read"]["voluntary_switches_vs_alone"]["median"] == pytest.approx(2 / 6, abs=0.01)
    assert res["per_read"]["hub_cpu_us_vs_alone"]["median"] == pytest.approx(60.0)


def _noisy_rows(noise: dict[int, float], groups: int, seed: int = 7) -> tuple[list, dict]:
    """Synthetic blocks under a large common drift (±20 % a group), each arm with its own noise."""
    rng = random.Random(seed)
    rows, blocks = [], []
    for _ in range(groups + 1):
        drift = rng.uniform(0.8, 1.2)
        for arm in (ALONE, OWN, OTHER):
            wall = 0.3 * drift * (1 + rng.gauss(0, noise[arm]))
            rows.append([arm, wall, int(wall * 1e9), 0, 0, 1, 1, 0, 0])
            blocks.append({"arm": arm, "lat_ms": [] if arm == ALONE else [0.5], "errors": 0, "cpu_ms": 3.0})
    return rows, {"blocks": blocks, "core": 0, "affinity": [0]}


def test_the_paired_spread_sees_a_noisier_arm_through_the_drift():
    same = cellspeed.analyse(*_noisy_rows({ALONE: 0.01, OWN: 0.01, OTHER: 0.01}, groups=200), seed=1)
    noisier = cellspeed.analyse(*_noisy_rows({ALONE: 0.01, OWN: 0.03, OTHER: 0.01}, groups=200), seed=1)
    # across the whole run the drift swamps a 1 % or 3 % noise: the unpaired ratio cannot tell them apart
    assert 0.7 < same["spread_wall"]["own_vs_alone_iqr_ratio"] < 1.4
    assert 0.7 < noisier["spread_wall"]["own_vs_alone_iqr_ratio"] < 1.4
    lo, hi = same["spread_wall"]["own_vs_alone_paired_iqr_ratio_ci95"]
    assert lo < 1 < hi  # equal noise: 1 inside the interval
    lo, _ = noisier["spread_wall"]["own_vs_alone_paired_iqr_ratio_ci95"]
    assert lo > 1.3  # three times the noise: seen once each block is taken over its group's control


def test_the_bootstrap_interval_widens_with_noise_and_holds_the_median():
    rng = random.Random(5)
    noisy = [rng.gauss(0.5, 1.0) for _ in range(50)]
    lo, hi = cellspeed.bootstrap(cellspeed._median, noisy, random.Random(1))
    assert lo < cellspeed._median(noisy) < hi and hi - lo > 0.2
    assert cellspeed.bootstrap(cellspeed._median, [2.0] * 10, random.Random(1)) == (2.0, 2.0)


def test_a_reader_out_of_step_with_the_cell_is_refused():
    rows, reader = _rows({ALONE: 1.0, OWN: 1.0, OTHER: 1.0}, groups=2)
    reader["blocks"].pop()
    with pytest.raises(RuntimeError, match="the reader saw"):
        cellspeed.analyse(rows, reader, seed=1)


@pytest.mark.parametrize("client", ["one-write", "sdk"])
def test_a_short_run_reads_only_in_the_read_arms(client):
    with tempfile.TemporaryDirectory(prefix="mcpnb-cellspeed-test-") as runtime:
        k = S.BenchKernel(runtime)
        other = S.BenchKernel(tempfile.mkdtemp(dir=runtime))
        try:
            k.run("%load_ext mcp_notebook\nx = 1")
            other.run("%load_ext mcp_notebook\nx = 1")
            res = cellspeed.measure(k, k.info(), other.info(), client, groups=3, block_s=0.1, rate=50.0)
        finally:
            other.shutdown()
            k.shutdown()
    assert res["groups"] == 3 and res["reader"] == client
    arms = res["arms"]
    assert "reads" not in arms["alone"]  # nobody connected, nobody reading
    for arm in ("own", "other"):
        assert arms[arm]["blocks"] == 3 and arms[arm]["read_errors"] == 0
        assert arms[arm]["reads_per_block"]["min"] >= 1
    for name in ("own_vs_alone", "other_vs_alone", "own_vs_other"):
        lo, hi = res["wall"][name]["ci95_pct"]
        assert lo <= res["wall"][name]["median_pct"] <= hi
    assert set(res["other_processes"]) >= {"others_core_fraction", "publishable"}
    assert arms["own"]["hub_cpu_ms_median"] > 0  # the hub thread was found and worked in the read arm
