"""A request's arrival costs the step it arrives during its host time (``RooflineParams.arrival_s``):
llama-server's HTTP thread takes it in on the core that computes the step. The engine applies it,
the step observer counts arrivals, and a calibration recovers it."""

from __future__ import annotations

import dataclasses

import pytest

from tokenpace.record import RequestRecord
from tokenpace.simulator import RooflineParams, SimConfig
from tokenpace.simulator.calibrate import observe_steps
from tokenpace.simulator.request import SimRequest
from tokenpace.simulator.simulate import simulate

from sim_helpers import FIXED_STEP_ENGINE, FixedStep

CONFIG = SimConfig(**FIXED_STEP_ENGINE)


def chunk_ms(arrival_s: float) -> list[list[float]]:
    requests = [SimRequest(prompt_tokens=32, output_tokens=5, arrival_s=0.0),
                SimRequest(prompt_tokens=32, output_tokens=2, arrival_s=0.025)]
    result = simulate(CONFIG, requests, FixedStep(RooflineParams(arrival_s=arrival_s)))
    return [[t / 1e6 for t in r.chunk_ns] for r in sorted(result.records, key=lambda r: r.index)]


def test_an_arrival_delays_the_step_it_arrives_during_and_an_idle_engine_pays_nothing():
    # Without the cost: A's steps end at 10, 20, 30, 40, 50 ms; B (sent at 25 ms, during A's step
    # [20, 30)) is prefilled in the step [30, 40) with A's 4th decode, then decodes with A at 50.
    assert chunk_ms(0.0) == [[10, 20, 30, 40, 50], [40, 50]]
    # 4 ms each: A finds the engine idle (not charged); B arrives at 25 during the step [20, 30),
    # which then ends at 34; then 44 (B's prefill with A's decode), 54.
    assert chunk_ms(0.004) == [[10, 20, 34, 44, 54], [44, 54]]


def test_the_observer_counts_the_requests_sent_during_each_step():
    # A closed loop of 2 made by hand: A decodes alone from 50 ms on, B is sent at 61 ms (during
    # A's step [60, 80)) and first-token at 100 ms.
    def record(i, sent_ms, chunks_ms, prompt):
        return RequestRecord(request_id=f"r{i}", index=i, sent_ns=int(sent_ms * 1e6),
                             chunk_ns=[int(t * 1e6) for t in chunks_ms], chunk_tokens=[1] * len(chunks_ms),
                             prompt_tokens=prompt, output_tokens=len(chunks_ms), status="ok", stream=True)

    a = record(0, 0, [30, 40, 50, 60, 80, 100, 120], 64)
    b = record(1, 61, [100, 120], 64)
    steps = {s.end_ns // 1_000_000: s for s in observe_steps([a, b]).steps}
    assert steps[30].arrivals == 0  # began idle at A's send: its own arrival is in its duration
    assert steps[40].arrivals == 0 and steps[60].arrivals == 0
    assert steps[80].arrivals == 1 and steps[80].batch.num_decode == 1  # B arrived during it
    assert steps[100].arrivals == 0 and steps[100].batch.prefill  # B's prefill, with A's decode


def test_a_calibration_recovers_the_arrival_cost_and_predicts_another_load(tmp_path):
    from sim_helpers import assert_predicts

    from test_calibrate import ENGINE, fit, run

    truth = dataclasses.replace(ENGINE, roofline=dataclasses.replace(ENGINE.roofline, arrival_s=0.004),
                                turnaround_s=0.0005)
    cal = fit(run(tmp_path, 4, truth).records, closed_loop_concurrency=4)
    lo, hi = cal.fit["ranges"]["arrival_s"]
    assert cal.roofline.arrival_s == pytest.approx(0.004, abs=0.0005)
    assert lo <= 0.004 <= hi and "arrival_s" not in cal.fit["undetermined"]
    predicted = run(tmp_path, 12, dataclasses.replace(ENGINE, roofline=cal.roofline, turnaround_s=cal.turnaround_s))
    assert_predicts(predicted, run(tmp_path, 12, truth), rel=0.02)
