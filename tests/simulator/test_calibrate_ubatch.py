"""A step's prompts in ubatches of their own ("gemv-ubatch", issue 25).

llama.cpp with a KV stream per slot splits a step's batch with ``split_equal``: the decoding
sequences' one token each in one ubatch, the rest of a prompt in another. So under "gemv-ubatch" a
step's decode rows and its prompt rows are priced apart, each at its own bound, and the step is
their sum; the decode rows carry the GEMV rows' weight passes and the kernel-path costs, a prompt
one weight pass, one LM-head pass for its one output row, and no kernel-path cost. The truth here
is the memory-bound llama.cpp shape of test_calibrate_step_model.py (Llama-3.1-8B in INT4 at 50
GB/s) with a 30 ms GEMM kernel path and a 5 ms cost per GEMV row.
"""

from __future__ import annotations

import dataclasses

import pytest

from tokenpace.simulator import RooflineParams, StepBatch
from tokenpace.simulator.calibrate import calibrate
from tokenpace.simulator.calibrate.fit import fit_roofline
from tokenpace.simulator.calibrate.priors import DECODE_MFU_PRIOR, sequence_prior_s
from tokenpace.simulator.catalog import get_model

from sim_helpers import assert_predicts
from test_calibrate_step_model import ENGINE, LLAMA_CPP, SLOW_CPU, run, synthetic_steps, truth_predictor

UBATCH = dataclasses.replace(LLAMA_CPP, row_remainder="gemv-ubatch", gemv_row_s=0.005, seq_overhead_s=0.004)
PASS = dataclasses.replace(UBATCH, row_remainder="gemv-pass")
PROMPT = ((130, 0),)  # 130 prompt tokens: 32 full groups of 4 rows and 2 rows left over
DECODES = (50, 60, 70)  # three decoding sequences: three GEMV rows, no full group


def test_a_prompt_pays_no_kernel_path_and_one_weight_pass():
    ub, gp = truth_predictor(UBATCH, SLOW_CPU), truth_predictor(PASS, SLOW_CPU)
    prefill = StepBatch(prefill=PROMPT)
    one_pass = ub.work(StepBatch(decode_context=(50,))).memory_s[1]  # the MLP's weights, read once
    # "gemv-pass": 130 rows = one GEMM call and 2 GEMV rows, 3 passes; "gemv-ubatch": the prompt's one.
    assert gp.work(prefill).memory_s[1] == pytest.approx(3 * one_pass)
    assert ub.work(prefill).memory_s[1] == pytest.approx(one_pass)
    assert (gp.work(prefill).kernel_rows, ub.work(prefill).kernel_rows) == (130, 0)
    # No GEMM kernel path (30 ms) and no GEMV row cost (2 × 5 ms) on the prompt's rows.
    without_paths = truth_predictor(dataclasses.replace(UBATCH, gemm_step_s=0.0, gemv_row_s=0.0), SLOW_CPU)
    assert ub.step_s(prefill) == pytest.approx(without_paths.step_s(prefill))
    # Two prompts: one LM-head pass each, for each one's output row.
    lm_one = ub.work(prefill).memory_s[3]
    assert ub.work(StepBatch(prefill=((130, 0), (90, 0)))).memory_s[3] == pytest.approx(2 * lm_one)


def test_a_mixed_step_costs_its_decode_ubatch_plus_its_prompt_ubatch():
    ub = truth_predictor(UBATCH, SLOW_CPU)
    mixed = StepBatch(prefill=PROMPT, decode_context=DECODES)
    decode, prefill = StepBatch(decode_context=DECODES), StepBatch(prefill=PROMPT)
    # Two ubatches, each at its own bound; the step's fixed overhead once.
    assert ub.step_s(mixed) == pytest.approx(ub.step_s(decode) + ub.step_s(prefill) - UBATCH.step_overhead_s)
    work = ub.work(mixed)
    assert len(work.compute_s) == 10 and work.kernel_rows == 3  # the decode rows' kernel paths only
    # The decode ubatch: 3 GEMV rows, 3 passes over the MLP's weights; the prompt's: 1.
    one_pass = ub.work(StepBatch(decode_context=(50,))).memory_s[1]
    assert (work.memory_s[1], work.memory_s[6]) == (pytest.approx(3 * one_pass), pytest.approx(one_pass))
    # "gemv-pass" prices all 133 rows as one call: a GEMM call (30 ms) and 1 GEMV row (5 ms) as paths.
    gp = truth_predictor(PASS, SLOW_CPU)
    assert gp.work(mixed).kernel_rows == 133
    assert PASS.kernel_paths_s(133) == pytest.approx(0.030 + 0.005)
    assert UBATCH.kernel_paths_s(3) == pytest.approx(3 * 0.005)


def test_pure_decode_steps_are_priced_as_gemv_pass_prices_them():
    ub, gp = truth_predictor(UBATCH, SLOW_CPU), truth_predictor(PASS, SLOW_CPU)
    for k in range(1, 10):
        batch = StepBatch(decode_context=(80,) * k)
        assert ub.step_s(batch) == gp.step_s(batch)


def _fit(truth: RooflineParams):
    steps = synthetic_steps(noise=0.01, truth=truth, hardware=SLOW_CPU)
    prior = sequence_prior_s(get_model("llama-3.1-8b"), SLOW_CPU)
    return fit_roofline(truth_predictor(RooflineParams(), SLOW_CPU), steps, RooflineParams(), seq_prior_s=prior,
                        decode_mfu=DECODE_MFU_PRIOR)


@pytest.mark.parametrize("truth", [UBATCH, PASS], ids=["gemv-ubatch", "gemv-pass"])
def test_the_step_composition_is_recovered_with_the_parameters_in_their_ranges(truth):
    fit = _fit(truth)
    got = fit.params
    assert (got.row_group, got.row_remainder) == (4, truth.row_remainder)
    # Prefills of 16-256 tokens and mixed steps tell the two compositions apart: reported as fitted.
    assert "row_remainder" not in fit.undetermined
    for name in ("mfu", "mbu", "seq_overhead_s", "gemv_row_s", "gemm_step_s", "row_group"):  # the truth in each range
        lo, hi = fit.ranges[name]
        assert lo <= getattr(truth, name) <= hi, (name, lo, hi)
    assert got.mfu == pytest.approx(truth.mfu, rel=0.05)


def test_a_calibration_at_4_of_a_ubatch_engine_predicts_1_and_8_within_2_percent(tmp_path):
    engine = dataclasses.replace(ENGINE, gpu=SLOW_CPU, roofline=UBATCH)
    cal = calibrate(run(tmp_path, 4, engine).records, model="llama-3.1-8b", hardware=SLOW_CPU, weights="int4",
                    max_num_seqs=16, max_batched_tokens=2048)
    assert (cal.roofline.row_group, cal.roofline.row_remainder) == (4, "gemv-ubatch")
    for concurrency in (1, 8):
        truth = run(tmp_path, concurrency, engine)
        predicted = run(tmp_path, concurrency, dataclasses.replace(engine, roofline=cal.roofline))
        assert_predicts(predicted, truth, rel=0.02)


def test_with_one_kv_buffer_prompts_are_not_fitted_in_ubatches_of_their_own():
    # llama.cpp with one KV buffer (--kv-unified) cuts a batch into ubatches in batch order
    # (split_simple): a step's prompts share the decode tokens' kernel invocations, whatever the steps
    # would fit best. Steps made under "gemv-ubatch" (above: recovered as such) get another composition.
    steps = synthetic_steps(noise=0.01, truth=UBATCH, hardware=SLOW_CPU)
    prior = sequence_prior_s(get_model("llama-3.1-8b"), SLOW_CPU)
    fit = fit_roofline(truth_predictor(RooflineParams(), SLOW_CPU), steps, RooflineParams(), seq_prior_s=prior,
                       decode_mfu=DECODE_MFU_PRIOR, shared_kv=True)
    assert fit.params.row_remainder != "gemv-ubatch" and "row_remainder" not in fit.undetermined
