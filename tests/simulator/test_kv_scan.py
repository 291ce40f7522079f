"""The scan of one KV buffer shared by every sequence (``RooflineParams.kv_scan_s``, issue 25).

llama.cpp with ``--kv-unified`` runs every row's attention over every KV cell in use, its mask hiding
the other sequences' cells: a prompt beside decoding sequences costs more the longer their contexts
(RESULTS 7p). The term prices, per query row, the batch's cells of other sequences than the row's.
The truth here is the simulator with such a term; the calibration must find it where the runs
show steps with several sequences, and leave it alone where every step holds one.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from tokenpace.config import BenchConfig
from tokenpace.runner.simulate import SimRunConfig, run_sim
from tokenpace.simulator import RooflineParams, SimConfig, StepBatch
from tokenpace.simulator.calibrate import calibrate, load_calibration, write_calibration
from tokenpace.simulator.step import decode_run_s

from sim_helpers import CPU_LIKE, assert_predicts, cpu_predictor

CPU = CPU_LIKE
BASE = RooflineParams(mfu=0.3, mbu=0.6, step_overhead_s=0.002, seq_overhead_s=0.0015)
SCAN_S = 2e-7  # per row and cell of another sequence: 0.2 µs
TRUTH = dataclasses.replace(BASE, kv_scan_s=SCAN_S)
ENGINE = SimConfig(model="llama-3.1-8b", gpu=CPU, weights="int4", roofline=TRUTH, max_num_seqs=8,
                   max_batched_tokens=2048)


def test_a_prompt_beside_decodes_pays_for_their_cells_and_a_lone_sequence_pays_nothing():
    plain, scanned = cpu_predictor(BASE), cpu_predictor(dataclasses.replace(BASE, kv_scan_s=1e-6))
    # A 100-token prompt beside decodes of 200 and 300 tokens: after the step the batch holds 201 +
    # 301 + 100 = 602 cells. The first decode's row sees 401 others', the second's 301, each of the
    # prompt's 100 rows 502: 50,902 row-cells in all.
    mixed = StepBatch(prefill=((100, 0),), decode_context=(200, 300))
    assert scanned.step_s(mixed) - plain.step_s(mixed) == pytest.approx(50_902e-6, rel=1e-9)
    assert scanned.work(mixed).scan == 50_902
    for lone in (StepBatch(prefill=((500, 0),)), StepBatch(decode_context=(900,)),
                 StepBatch(prefill=((64, 200),))):  # a cached prefix is the sequence's own
        assert scanned.step_s(lone) == plain.step_s(lone)
    # Two prompts with a cached prefix each: 50 rows see the other's 30 + 10 cells, 10 rows 20 + 50.
    two = StepBatch(prefill=((50, 20), (10, 30)))
    assert scanned.work(two).scan == 50 * 40 + 10 * 70


def test_price_step_and_a_decode_run_give_the_same_floats_with_the_scan():
    p = cpu_predictor(TRUTH)
    mixed = StepBatch(prefill=((77, 13),), decode_context=(120, 340, 5))
    assert p.step_s(mixed) == p.params.price(p.work(mixed))
    start = StepBatch(decode_context=(37, 410, 222))
    run = decode_run_s(p, start, 25)
    one_by_one = [p.step_s(StepBatch(decode_context=(37 + i, 410 + i, 222 + i))) for i in range(25)]
    assert list(np.asarray(run)) == one_by_one
    assert one_by_one[0] > cpu_predictor(BASE).step_s(start)


def run(tmp_path, concurrency: int, roofline: RooflineParams = TRUTH, requests: int = 48):
    load = BenchConfig(concurrency=concurrency, requests=requests, input_tokens="uniform:min=32,max=512",
                       output_tokens="uniform:min=8,max=40", seed=5, progress=False,
                       out=str(tmp_path / f"c{concurrency}-{abs(hash(roofline)) % 10**8}.json"))
    return run_sim(SimRunConfig(load=load, engine=dataclasses.replace(ENGINE, roofline=roofline)))


def test_a_calibration_finds_the_scan_and_predicts_a_load_it_did_not_see(tmp_path):
    """From c=4 (prompts beside 3 decodes, decode steps of 1 to 4), the fitted scan is within its
    reported range of the truth and c=8 is predicted within 2%; the same fit without the scan
    misses c=8 by more."""
    cal = calibrate(run(tmp_path, 4).records, model="llama-3.1-8b", hardware=CPU, weights="int4",
                    max_num_seqs=8, max_batched_tokens=2048, shared_kv=True,
                    attention_tile_rows=0)  # the truth has no tiled attention
    got = cal.roofline.kv_scan_s
    lo, hi = cal.fit["ranges"]["kv_scan_s"]
    assert lo <= SCAN_S <= hi and got == pytest.approx(SCAN_S, rel=0.1)
    assert "kv_scan_s" not in cal.fit["undetermined"]
    assert cal.roofline.row_remainder != "gemv-ubatch" and "split_simple" in cal.fit["assumed"]["row_remainder"]
    truth = run(tmp_path, 8)
    assert_predicts(run(tmp_path, 8, cal.roofline), truth, rel=0.02)
    with pytest.raises(AssertionError):
        assert_predicts(run(tmp_path, 8, dataclasses.replace(cal.roofline, kv_scan_s=0.0)), truth, rel=0.02)
    back = load_calibration(write_calibration(cal, tmp_path / "cal.json"))
    assert back.roofline == cal.roofline


def test_one_sequence_at_a_time_cannot_show_the_scan_and_without_a_shared_buffer_it_is_not_fitted(tmp_path):
    cal = calibrate(run(tmp_path, 1, requests=16).records, model="llama-3.1-8b", hardware=CPU, weights="int4",
                    max_num_seqs=8, max_batched_tokens=2048, shared_kv=True,
                    attention_tile_rows=0)  # the truth has no tiled attention
    assert cal.roofline.kv_scan_s == 0.0 and "kv_scan_s" in cal.fit["undetermined"]
    assert "kv_scan_s" not in cal.roofline.to_dict()
    unshared = calibrate(run(tmp_path, 4).records, model="llama-3.1-8b", hardware=CPU, weights="int4",
                         max_num_seqs=8, max_batched_tokens=2048)
    assert unshared.roofline.kv_scan_s == 0.0 and "kv_scan_s" not in unshared.fit["ranges"]
