"""The step-time model on hand-checked cases. Numbers are worked out by hand in the comments."""

from __future__ import annotations

import pytest

from tokenpace.simulator import (
    RooflineParams, RooflinePredictor, StepBatch, StepPredictor, get_gpu, get_model, get_precision,
)

IDEAL = RooflineParams(mfu=1.0, mbu=1.0, step_overhead_s=0.0, allreduce_latency_s=0.0)


def predictor(model="llama-3.1-8b", gpu="h100-sxm", weights="bf16", tp=1, params=None):
    return RooflinePredictor(get_model(model), get_gpu(gpu), get_precision(weights),
                             get_precision("bf16"), tp, params)


def test_roofline_is_a_step_predictor():
    assert isinstance(predictor(), StepPredictor)


def test_one_decode_step_of_8b_bf16_on_h100_is_bounded_by_weight_streaming():
    # Llama-3.1-8B holds 8,029,995,008 parameters: 16,059,990,016 bytes in BF16, and streaming them
    # at 3.35 TB/s takes 16.06e9 / 3.35e12 = 4.794 ms: no decode step can be faster.
    one = StepBatch(decode_context=(1,))
    assert predictor().step_s(one) >= 0.004794
    # A decode step streams the blocks and the LM head but only gathers one row of the input
    # embedding: (6,979,321,856 + 525,336,576) × 2 B = 15.01 GB, 4.480 ms at 100% bandwidth.
    assert predictor(params=IDEAL).step_s(one) == pytest.approx(0.004480, rel=0.001)
    # Default: the catalog's measured H100 BF16 GEMMs (data/efficiency_measured.json, the engines'
    # tables pooled) stream their weights at 0.872 of HBM at one row after 4.04 µs per GEMM call:
    # 4.480 ms / 0.872 + (4 × 32 + 1) calls × 4.04 µs + 1.75 ms overhead = 7.41 ms (7.72 ms with the
    # former assumed MBU of 0.75 and no per-call cost), and 32 layers × 4 elementwise kernels × 3 µs
    # = 0.384 ms: 7.80 ms.
    assert predictor().step_s(one) == pytest.approx(0.00780, rel=0.01)


def test_decode_step_grows_with_the_kv_history_it_reads():
    # 64 sequences × 4,096 tokens × 128 KiB = 34.4 GB of KV: 10.3 ms more at 3.35 TB/s.
    p = predictor(params=IDEAL)
    short = p.step_s(StepBatch(decode_context=(0,) * 64))
    long = p.step_s(StepBatch(decode_context=(4096,) * 64))
    assert long - short == pytest.approx(64 * 4096 * 131072 / 3.35e12, rel=0.01)


def test_prefill_is_bounded_by_compute():
    # 4,096 prompt tokens through 6,979,321,856 block weights: 2 × 6.979e9 × 4096 = 5.72e13 FLOPs,
    # 57.8 ms at 989 TFLOP/s; causal attention adds 4 × 32 × 128 × 32 × 4096·4097/2 = 4.40e12 (4.4 ms).
    # The elementwise passes move, per token and layer, 2 × 4 × 4096 × 2 = 65,536 B (two fused
    # residual-add + RMSNorms), 2 × (32 + 8) × 128 × 2 = 20,480 B (rotary) and 3 × 14,336 × 2 =
    # 86,016 B (SiLU-and-mul): 172,032 B × 32 layers × 4096 tokens = 22.5 GB, 6.7 ms at 3.35 TB/s.
    t = predictor(params=IDEAL).step_s(StepBatch(prefill=((4096, 0),)))
    assert t >= 0.0578
    assert t == pytest.approx(0.0578 + 0.0044 + 0.0067, rel=0.02)


def test_fp8_halves_prefill_on_h100_but_not_on_a100():
    batch = StepBatch(prefill=((4096, 0),))
    h100 = (predictor(weights="bf16", params=IDEAL).step_s(batch)
            / predictor(weights="fp8", params=IDEAL).step_s(batch))
    a100 = predictor(gpu="a100-80gb").step_s(batch) / predictor(gpu="a100-80gb", weights="fp8").step_s(batch)
    assert 1.5 < h100 < 2.0  # linears twice as fast at equal efficiency; attention, LM head in BF16
    assert a100 == pytest.approx(1.0, abs=0.02)
    # With the catalog's efficiencies FP8 GEMMs reach 0.46 of a twice-higher peak, BF16 ones 0.68:
    # the linears gain 2 × 0.46 / 0.68 = 1.35×, less the FP8 activation quantization passes.
    catalog = predictor(weights="bf16").step_s(batch) / predictor(weights="fp8").step_s(batch)
    assert 1.1 < catalog < 1.35


def test_int4_decode_streams_about_a_quarter_of_the_block_weights():
    one = StepBatch(decode_context=(1,))
    bf16 = predictor(params=IDEAL).step_s(one)
    int4 = predictor(weights="int4", params=IDEAL).step_s(one)
    # blocks: 6.979e9 × 0.515625 B; the LM head stays 16-bit: 0.525e9 × 2 B.
    assert int4 == pytest.approx((6.979e9 * 0.515625 + 0.525e9 * 2) / 3.35e12, rel=0.01)
    assert int4 < bf16 / 2.5


def test_tensor_parallel_splits_weights_and_adds_all_reduces():
    # Llama-3.1-70B in BF16 streams 68,451,041,280 block + 1,050,673,152 LM-head params per decode
    # step = 139.0 GB; TP2 → 69.50 GB per GPU = 20.75 ms, plus 2 all-reduces per layer × 80 layers
    # × 8 µs = 1.28 ms.
    one = StepBatch(decode_context=(1,))
    tp2 = predictor("llama-3.1-70b", tp=2, params=RooflineParams(1.0, 1.0, 0.0, 8e-6)).step_s(one)
    assert tp2 == pytest.approx(0.02075 + 0.00128, rel=0.01)
    tp1 = predictor("llama-3.1-70b", params=IDEAL).step_s(one)
    assert tp1 / predictor("llama-3.1-70b", tp=4, params=IDEAL).step_s(one) == pytest.approx(4, rel=0.01)


def test_moe_decode_reads_only_the_experts_the_batch_touches():
    # One token touches its top-2 of 8 experts (12.88B active params of 46.7B); 64 tokens touch
    # 8·(1 − (6/8)^64) ≈ 8 experts, i.e. nearly the whole model.
    p = predictor("mixtral-8x7b", params=IDEAL)
    one = p.step_s(StepBatch(decode_context=(1,)))
    many = p.step_s(StepBatch(decode_context=(1,) * 64))
    assert one == pytest.approx(12_879_659_008 * 2 / 3.35e12, rel=0.02)
    assert many == pytest.approx(46_702_526_464 * 2 / 3.35e12, rel=0.02)


def test_multi_token_verification_costs_little_at_low_load_and_a_lot_at_saturation():
    p = predictor()
    low = p.step_s(StepBatch(decode_context=(512,), decode_tokens_per_seq=5)) / p.step_s(
        StepBatch(decode_context=(512,)))
    high = p.step_s(StepBatch(decode_context=(128,) * 256, decode_tokens_per_seq=5)) / p.step_s(
        StepBatch(decode_context=(128,) * 256))
    assert low < 1.05  # memory-bound: five tokens cost what one does
    # 1,280 tokens per step: compute-bound. Not 5x: the 256-row step's GEMMs already stream their
    # weights well below the small-batch rate (measured H100 GEMMs: 0.63 of HBM at 256 rows).
    assert high > 2.5


def test_empty_step_costs_only_the_overhead():
    assert predictor().step_s(StepBatch()) == RooflineParams().step_overhead_s
