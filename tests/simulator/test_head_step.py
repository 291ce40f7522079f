"""A cost per step of two or more sequences (``RooflineParams.head_step_s``, issue 25).

ggml multiplies the LM head over a step's output rows, one per sequence: one row takes a dot
product, two or more llamafile's GEMM kernel. On llama-server a prompt beside one decode cost more
than a per-sequence cost explains (RESULTS 7zn). The truth here is the simulator with such a term,
on ggml's shape (row groups of 4, the rows left over one by one) and one shared KV buffer; the
calibration must recover it where the steps show lone sequences beside steps of several, and say
it could not where every step holds one sequence.
"""

from __future__ import annotations

import argparse
import dataclasses
import random

import numpy as np
import pytest

from tokenpace.simulator import RooflineParams, StepBatch
from tokenpace.simulator.args import add_engine_arguments, engine_argv, engine_config
from tokenpace.simulator.calibrate import ObservedStep
from tokenpace.simulator.calibrate.fit import fit_roofline
from tokenpace.simulator.step import decode_run_s

from sim_helpers import cpu_predictor

HEAD_S = 0.012
BASE = RooflineParams(mfu=0.3, mbu=0.6, step_overhead_s=0.002, seq_overhead_s=0.0015, row_group=4,
                      row_remainder="gemv-pass", gemv_row_s=0.015, gemm_step_s=0.010, kv_scan_s=2e-7)
TRUTH = dataclasses.replace(BASE, head_step_s=HEAD_S)


def test_two_or_more_sequences_pay_it_once_and_a_lone_sequence_never():
    plain, headed = cpu_predictor(BASE), cpu_predictor(TRUTH)
    lone = (StepBatch(prefill=((300, 0),)), StepBatch(decode_context=(90,)), StepBatch(prefill=((64, 200),)))
    for batch in lone:  # a lone prompt's many rows have one output row
        assert headed.step_s(batch) == plain.step_s(batch)
    several = (StepBatch(decode_context=(90, 40)), StepBatch(decode_context=(90,) * 7),
               StepBatch(prefill=((100, 0),), decode_context=(200,)), StepBatch(prefill=((50, 0), (60, 0))))
    for batch in several:
        assert headed.step_s(batch) - plain.step_s(batch) == pytest.approx(HEAD_S, rel=1e-9)


def test_price_step_and_a_decode_run_give_the_same_floats_with_it():
    p = cpu_predictor(TRUTH)
    start = StepBatch(decode_context=(37, 410, 222))
    run = decode_run_s(p, start, 25)
    one_by_one = [p.step_s(StepBatch(decode_context=(37 + i, 410 + i, 222 + i))) for i in range(25)]
    assert list(np.asarray(run)) == one_by_one
    assert list(np.asarray(decode_run_s(p, StepBatch(decode_context=(37,)), 5))) == \
        [cpu_predictor(BASE).step_s(StepBatch(decode_context=(37 + i,))) for i in range(5)]


def steps(noise: float, lone: bool, seed: int = 11) -> list[ObservedStep]:
    """Decode steps of 1 (``lone``) or 2 to 8 sequences, prompts alone (``lone``) and beside 1 to 7
    decodes; each duration the truth's, times 1 ± ``noise`` (uniform, seeded)."""
    rng = random.Random(seed)
    p = cpu_predictor(TRUTH)
    low = 1 if lone else 2
    batches = [StepBatch(decode_context=tuple(rng.randint(20, 400) for _ in range(rng.randint(low, 8))))
               for _ in range(240)]
    batches += [StepBatch(prefill=((rng.randint(16, 256), 0),),
                          decode_context=tuple(rng.randint(20, 400) for _ in range(rng.randint(low - 1, 7))))
                for _ in range(80)]
    if not lone:  # every step holds several sequences: none to tell the cost from the step's own
        batches = [b for b in batches if b.num_decode + len(b.prefill) >= 2]
    return [ObservedStep(batch=b, duration_s=p.step_s(b) * (1 + rng.uniform(-noise, noise)), end_ns=i)
            for i, b in enumerate(batches)]


def test_it_is_recovered_within_its_range_where_lone_sequences_show():
    fit = fit_roofline(cpu_predictor(RooflineParams()), steps(0.01, lone=True), RooflineParams(), shared_kv=True)
    got = fit.params
    assert (got.row_group, got.row_remainder) == (4, "gemv-pass")
    lo, hi = fit.ranges["head_step_s"]
    assert lo <= HEAD_S <= hi and hi < 3 * HEAD_S
    assert got.head_step_s == pytest.approx(HEAD_S, rel=0.15)
    assert "head_step_s" not in fit.undetermined
    # Without the term the same steps are explained worse.
    without = fit_roofline(cpu_predictor(RooflineParams()), steps(0.01, lone=True), RooflineParams())
    assert "head_step_s" not in without.ranges and without.rms_rel > 1.5 * fit.rms_rel


def test_without_a_lone_sequence_it_is_undetermined_and_said_so():
    """Every step holds two or more sequences: the term is the step overhead's line, so it is left at
    0 and reported undetermined, and the step overhead carries both."""
    fit = fit_roofline(cpu_predictor(RooflineParams()), steps(0.01, lone=False), RooflineParams(), shared_kv=True)
    assert "head_step_s" in fit.undetermined and fit.params.head_step_s == 0.0
    assert fit.params.step_overhead_s == pytest.approx(TRUTH.step_overhead_s + HEAD_S, rel=0.2)


def test_the_flag_sets_it_and_a_config_gives_the_flag_back():
    parser = argparse.ArgumentParser()
    add_engine_arguments(parser)
    ns = parser.parse_args(["--row-remainder", "gemv-pass", "--head-step-ms", "12.5"])
    config = engine_config(ns, model=None, max_num_seqs=None)
    assert config.roofline.head_step_s == pytest.approx(0.0125)
    argv = engine_argv(config)
    assert argv[argv.index("--head-step-ms") + 1] == repr(12.5)
    back = engine_config(parser.parse_args(argv), model=None, max_num_seqs=None)
    assert back.roofline == config.roofline
    assert "--head-step-ms" not in engine_argv(engine_config(parser.parse_args([]), model=None, max_num_seqs=None))
