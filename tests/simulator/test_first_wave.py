"""A closed loop's first wave goes out one request after another, as a real client sends it: an
engine that begins a step as soon as a request arrives computes the first prompt alone, and the
others wait for that step. Calibration measures the gap between the first sends and the simulated
clients copy it where they copy the turnaround."""

from __future__ import annotations

import dataclasses

import pytest

from tokenpace.config import BenchConfig
from tokenpace.runner.simulate import SimRunConfig, run_sim
from tokenpace.simulator import RooflineParams, SimConfig
from tokenpace.simulator.calibrate import calibrate
from tokenpace.simulator.calibrate.client import first_wave_gap

ENGINE = SimConfig(model="llama-3.1-8b", gpu="l4", weights="int4",
                   roofline=RooflineParams(mfu=0.35, mbu=0.7, step_overhead_s=0.003, seq_overhead_s=0.002),
                   max_num_seqs=16, max_batched_tokens=2048)


def run(tmp_path, engine: SimConfig, concurrency: int = 2, requests: int = 24, name: str = "run", **load):
    load = BenchConfig(concurrency=concurrency, requests=requests, input_tokens="uniform:min=64,max=512",
                       output_tokens="uniform:min=8,max=48", seed=3, out=str(tmp_path / f"{name}.json"),
                       progress=False, **load)
    return run_sim(SimRunConfig(load=load, engine=engine)).records


def first_wave(records, concurrency):
    return sorted((r for r in records if r.sent_ns is not None), key=lambda r: r.sent_ns)[:concurrency]


def test_sends_one_after_another_leave_the_later_ones_out_of_the_first_step(tmp_path):
    together = first_wave(run(tmp_path, ENGINE, 3, name="together"), 3)
    assert len({r.sent_ns for r in together}) == 1
    assert len({r.first_token_ns for r in together}) == 1  # one step computed the three prompts

    apart = first_wave(run(tmp_path, dataclasses.replace(ENGINE, first_wave_gap_s=0.0005), 3, name="apart"), 3)
    t0 = apart[0].sent_ns
    assert [r.sent_ns - t0 for r in apart] == [0, 500_000, 1_000_000]
    # The first prompt's step began at its arrival, alone; the two later sends waited for it and
    # shared the next one.
    assert apart[0].first_token_ns < apart[1].first_token_ns == apart[2].first_token_ns
    assert apart[1].first_token_ns - apart[1].sent_ns > apart[0].first_token_ns - apart[0].sent_ns


def test_a_ramp_longer_than_the_gaps_still_sets_the_first_sends(tmp_path):
    engine = dataclasses.replace(ENGINE, first_wave_gap_s=0.0005)  # a ramp of 10 ms a client, past 0.5
    sends = [r.sent_ns for r in first_wave(run(tmp_path, engine, 3, ramp_s=0.03), 3)]
    assert [s - sends[0] for s in sends] == [0, 10_000_000, 20_000_000]


@pytest.mark.parametrize("turnaround_s", [0.0, 0.002])
def test_calibration_measures_the_gap_and_copies_it_with_the_turnaround(tmp_path, turnaround_s):
    engine = dataclasses.replace(ENGINE, first_wave_gap_s=0.0004, turnaround_s=turnaround_s)
    records = run(tmp_path, engine, concurrency=4, requests=48)
    cal = calibrate(records, model=ENGINE.model, hardware=ENGINE.gpu, weights=ENGINE.weights, max_num_seqs=16,
                    max_batched_tokens=2048, closed_loop_concurrency=4)
    t = cal.fit["client_turnaround"]
    assert t["first_wave_gap_ms"] == pytest.approx(0.4, abs=1e-6) and t["first_wave_gaps"] == 3
    # Copied where the clients' late sends missed the engine's steps (the turnaround is copied);
    # an engine that took the next requests into the step begun took the first ones too.
    assert cal.first_wave_gap_s == pytest.approx(0.0004 if turnaround_s else 0.0, abs=1e-12)
    assert t["simulated_first_wave_gap_ms"] == pytest.approx(0.4 if turnaround_s else 0.0, abs=1e-6)


def test_the_first_wave_is_what_was_sent_before_anything_ended(tmp_path):
    # Two runs pooled: a closed loop of 3 (two gaps of 1 ms) and one of 1 (no gap); a send after an
    # end belongs to no first wave.
    records = run(tmp_path, dataclasses.replace(ENGINE, first_wave_gap_s=0.001), 3, requests=9, name="c3")
    lone = run(tmp_path, ENGINE, 1, requests=4, name="c1")
    assert first_wave_gap([records, lone]) == (pytest.approx(0.001), 2)
    assert first_wave_gap([lone]) == (0.0, 0)
