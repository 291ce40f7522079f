"""step_errors prices another run's engine steps with a calibration: right where the step model is,
and off in exactly the steps a wrong term prices."""

from __future__ import annotations

import dataclasses

from tokenpace.config import BenchConfig
from tokenpace.runner.simulate import SimRunConfig, run_sim
from tokenpace.simulator import RooflineParams, SimConfig
from tokenpace.simulator.calibrate import calibrate, step_errors

TRUTH = RooflineParams(mfu=0.35, mbu=0.7, step_overhead_s=0.003, seq_overhead_s=0.002)
# Llama-3.1-8B in INT4 on an L4: decode steps memory-bound, prefills compute-bound.
ENGINE = SimConfig(model="llama-3.1-8b", gpu="l4", weights="int4", roofline=TRUTH, max_num_seqs=16,
                   max_batched_tokens=2048)


def run(tmp_path, concurrency: int):
    load = BenchConfig(concurrency=concurrency, requests=48, input_tokens="uniform:min=64,max=512",
                       output_tokens="uniform:min=8,max=48", seed=3, out=str(tmp_path / f"c{concurrency}.json"),
                       progress=False)
    return run_sim(SimRunConfig(load=load, engine=ENGINE)).records


def test_a_calibration_prices_another_loads_steps_and_a_wrong_mfu_shows_in_the_prompts_alone(tmp_path):
    cal = calibrate(run(tmp_path, 4), model=ENGINE.model, hardware=ENGINE.gpu, weights=ENGINE.weights,
                    max_num_seqs=16, max_batched_tokens=2048)
    other = run(tmp_path, 12)
    rows = step_errors(cal, other)
    decode = [r for r in rows if r["kind"] == "decode"]
    assert len(decode) >= 3 and max(r["decode_seqs"] for r in decode) > 4  # batch sizes c=4 never ran
    assert any(r["prompts"] for r in rows)
    for r in rows:
        assert abs(r["error_pct"]) < 2, r
        assert r["steps"] >= 1 and r["measured_total_s"] > 0
    assert sum(r["steps"] for r in rows) > 48  # every kind of step is there, not only a few

    slow = dataclasses.replace(cal, roofline=dataclasses.replace(cal.roofline, mfu=cal.roofline.mfu / 2))
    rows = step_errors(slow, other)
    with_prompts = [r["error_pct"] for r in rows if r["prompts"]]
    # Steps with prompts (compute-bound) at half the MFU: much slower; memory-bound decodes: unchanged.
    assert min(with_prompts) > 20 and max(with_prompts) > 60
    assert max(abs(r["error_pct"]) for r in rows if not r["prompts"]) < 2
