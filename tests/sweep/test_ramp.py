"""--ramp: the load rises linearly to its target, and the steady-state window starts after it
(simulated runs: virtual time, exact)."""

from __future__ import annotations

import pytest

from tokenpace.config import BenchConfig
from tokenpace.errors import UsageError
from tokenpace.runner.simulate import SimRunConfig, run_sim
from tokenpace.simulator.config import SimConfig
from tokenpace.workload.ramp import client_start_s, ramped_offset_s

NS = 1_000_000_000


def _sim(tmp_path, **load):
    return run_sim(SimRunConfig(load=BenchConfig(progress=False, out=str(tmp_path / "r.json"), **load),
                                engine=SimConfig()))


def test_an_open_loop_rate_rises_linearly_then_holds(tmp_path):
    run = _sim(tmp_path, rate=8.0, arrival="constant", duration_s=60, ramp_s=30)
    sends = [r.sent_ns / NS for r in run.records]
    per_10s = [sum(1 for t in sends if lo <= t < lo + 10) for lo in range(0, 90, 10)]
    # Cumulative arrivals of a linear ramp: 8 t^2 / 60 over the first 30 s, then 8 per second.
    assert per_10s[:3] == [pytest.approx(8 * (b * b - a * a) / 60, abs=1) for a, b in ((0, 10), (10, 20), (20, 30))]
    assert per_10s[3:] == [80] * 6
    w = run.summary["window"]
    assert w["start_ns"] == 30 * NS and w["end_ns"] <= 90 * NS
    assert "30 s ramp" in w["definition"]
    assert run.summary["throughput"]["requests_s"] == pytest.approx(8.0, rel=0.02)


def test_closed_loop_clients_join_one_by_one(tmp_path):
    run = _sim(tmp_path, concurrency=8, duration_s=30, ramp_s=4, output_tokens="256")
    first_sends = [r.sent_ns for r in sorted(run.records, key=lambda r: r.index)[:8]]
    assert first_sends == [k * NS // 2 for k in range(8)]  # client k at k x 4 s / 8
    assert run.summary["window"]["start_ns"] == 4 * NS


def test_the_ramp_bends_the_plans_clock_only():
    assert ramped_offset_s(0.0, 10) == 0.0
    assert ramped_offset_s(5.0, 10) == pytest.approx(10.0)  # half the ramp's arrivals by its end
    assert ramped_offset_s(7.0, 10) == 12.0 and ramped_offset_s(3.0, 0) == 3.0
    offsets = [ramped_offset_s(u / 10, 10) for u in range(200)]
    assert offsets == sorted(offsets)  # order kept
    assert [client_start_s(k, 4, 2.0) for k in range(4)] == [0.0, 0.5, 1.0, 1.5]


def test_a_ramp_needs_a_rate_or_a_concurrency():
    with pytest.raises(UsageError, match="--ramp"):
        BenchConfig(conversations="sessions=2,turns=2", ramp_s=5).validate()
    with pytest.raises(UsageError, match="--ramp"):
        BenchConfig(ramp_s=-1).validate()
