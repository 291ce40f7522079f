"""The efficiency catalog applied per operator class, on hand-computed steps of a tiny model.

Tiny model: 1 layer, hidden 64, 2 heads and 1 KV head of 32, SwiGLU MLP of 128, vocabulary 256.
Per layer: attention projections 2·64·64 + 2·64·32 = 12,288 weights; MLP 3·64·128 = 24,576; LM head
256·64 = 16,384; KV 2 · 1 · 32 · 2 B = 128 B per token; attention 4 · 2 · 32 = 256 FLOPs per
(query, key) pair. Elementwise bytes per token: norms 2·4·64·2 = 1,024, rotary 2·(2+1)·32·2 = 384,
SiLU-and-mul 3·128·2 = 768: 2,176 B. Every number below is worked out by hand from these.
"""

from __future__ import annotations

import json

import pytest

from tokenpace.errors import UsageError
from tokenpace.simulator import RooflineParams, RooflinePredictor, StepBatch, get_gpu, get_model, get_precision
from tokenpace.simulator.catalog import GPU, ModelSpec
from tokenpace.simulator.catalog.efficiency import get_efficiency

TINY = ModelSpec(id="tiny", name="tiny", num_layers=1, hidden_size=64, num_heads=2, num_kv_heads=1, head_dim=32,
                 intermediate_size=128, vocab_size=256)
# 1 GFLOP/s and 1 GB/s: a prefill of 100 tokens is compute-bound; at 1 TFLOP/s a decode is memory-bound.
SLOW = GPU(id="tiny-gpu", name="tiny", bf16_tflops=0.001, fp8_tflops=None, memory_gb=1, hbm_tb_s=0.001, link_gb_s=2)
FAST = GPU(id="tiny-gpu", name="tiny", bf16_tflops=1.0, fp8_tflops=None, memory_gb=1, hbm_tb_s=0.001, link_gb_s=2)
NO_OVERHEAD = RooflineParams(step_overhead_s=0.0)
FIGURES = {"gemm_flops": 0.5, "weight_bandwidth": 0.8, "attention_prefill_flops": 0.25,
           "attention_decode_bandwidth": 0.4, "elementwise_bandwidth": 0.5,
           "elementwise_latency_s": 0.0}  # (its own test below)


@pytest.fixture
def catalog(tmp_path):
    path = tmp_path / "eff.json"
    entry = {"gpu": ["tiny-gpu"], "compute": "*",
             **{k: {"value": v, "source": "test"} for k, v in FIGURES.items()}}
    path.write_text(json.dumps({"efficiency": [entry]}))
    return str(path)


def tiny(gpu, catalog, params=NO_OVERHEAD):
    bf16 = get_precision("bf16")
    return RooflinePredictor(TINY, gpu, bf16, bf16, 1, params, catalog)


def test_a_prefill_prices_each_operator_class_at_its_own_efficiency(catalog):
    # 100 prompt tokens, compute-bound at 1 GFLOP/s:
    #   projections 2 · 12,288 · 100 = 2,457,600 FLOPs / (1e9 · 0.5)  = 4.9152 ms
    #   MLP         2 · 24,576 · 100 = 4,915,200 FLOPs / (1e9 · 0.5)  = 9.8304 ms
    #   attention   256 · 100·101/2  = 1,292,800 FLOPs / (1e9 · 0.25) = 5.1712 ms
    #   LM head (one logit): 2 · 16,384 = 32,768 FLOPs / 0.5e9 = 0.065536 ms > 32,768 B / 0.8e9 = 0.04096 ms
    #   elementwise 2,176 B · 100 / (1e9 · 0.5) = 0.4352 ms
    t = tiny(SLOW, catalog).step_s(StepBatch(prefill=((100, 0),)))
    assert t == pytest.approx(0.0049152 + 0.0098304 + 0.0051712 + 0.000065536 + 0.0004352, rel=1e-6)


def test_a_decode_streams_weights_and_kv_at_their_own_bandwidths(catalog):
    # One sequence with 1,000 tokens cached, memory-bound at 1 GB/s:
    #   weights (12,288 + 24,576) · 2 B / 0.8e9 = 92.16 µs; LM head 32,768 B / 0.8e9 = 40.96 µs
    #   KV (1,000 read + 1 written) · 128 B / 0.4e9 = 320.32 µs; elementwise 2,176 B / 0.5e9 = 4.352 µs
    batch = StepBatch(decode_context=(1000,))
    assert tiny(FAST, catalog).step_s(batch) == pytest.approx(
        92.16e-6 + 40.96e-6 + 320.32e-6 + 4.352e-6, rel=1e-6)
    # --mbu 0.5 replaces every bandwidth efficiency: (73,728 + 32,768 + 128,128 + 2,176) B / 0.5e9.
    over = tiny(FAST, catalog, RooflineParams(mbu=0.5, step_overhead_s=0.0)).step_s(batch)
    assert over == pytest.approx(236_800 / 0.5e9, rel=1e-6)


def test_mfu_replaces_every_compute_efficiency(catalog):
    # The prefill above at MFU 1: (2,457,600 + 4,915,200 + 1,292,800) FLOPs / 1e9 = 8.6656 ms, plus
    # the LM head (now memory-bound: 32,768 FLOPs / 1e9 = 0.0328 ms < 0.04096 ms) and the
    # elementwise passes (0.4352 ms) as before.
    t = tiny(SLOW, catalog, RooflineParams(mfu=1.0, step_overhead_s=0.0)).step_s(StepBatch(prefill=((100, 0),)))
    assert t == pytest.approx(0.0086656 + 0.00004096 + 0.0004352, rel=1e-6)


def test_all_reduce_latency_grows_with_the_ring():
    # The hand-written fallback (a GPU without measured tables): 5 µs base + 1.5 µs per hop, a ring
    # all-reduce over t GPUs taking 2(t − 1) hops.
    m, g, bf16 = get_model("llama-3.1-70b"), get_gpu("h20"), get_precision("bf16")
    one = StepBatch(decode_context=(100,))
    lat = {tp: RooflinePredictor(m, g, bf16, bf16, tp).work(one).allreduce_latency_s for tp in (2, 4, 8)}
    assert lat == pytest.approx({2: 8e-6, 4: 14e-6, 8: 26e-6})


def test_attention_runs_at_the_precision_of_its_kernel():
    # Llama-3.1-8B, 4,096-token prompt on an H100 at 100% efficiency: causal attention is
    # 4 · 32 · 128 · 32 · 4096·4097/2 = 4.40e12 FLOPs, 4.45 ms at BF16's 989 TFLOP/s and 2.22 ms at
    # FP8's 1,979 with an FP8 KV cache (FlashAttention-3 / TensorRT-LLM FP8 context attention).
    m, g, w = get_model("llama-3.1-8b"), get_gpu("h100-sxm"), get_precision("bf16")
    ideal = RooflineParams(mfu=1.0, mbu=1.0, step_overhead_s=0.0)
    batch = StepBatch(prefill=((4096, 0),))
    bf16 = RooflinePredictor(m, g, w, get_precision("bf16"), 1, ideal).step_s(batch)
    fp8 = RooflinePredictor(m, g, w, get_precision("fp8"), 1, ideal).step_s(batch)
    assert bf16 - fp8 == pytest.approx(4.40e12 / 989e12 - 4.40e12 / 1979e12, rel=0.02)
    # Without FP8 units (A100) an FP8 cache is attended in BF16.
    assert RooflinePredictor(m, get_gpu("a100-80gb"), w, get_precision("fp8")).attention_precision == "bf16"


MEASURED = {"h100-sxm": ("bf16", "fp8"), "h200": ("bf16", "fp8"), "a100-80gb": ("bf16",), "l40s": ("bf16", "fp8"),
            "b200": ("bf16", "fp8"), "gb200": ("bf16", "fp8")}
DERIVED = ("gemm_flops", "weight_bandwidth", "attention_prefill_flops", "attention_decode_bandwidth",
           "allreduce_bus_bandwidth", "allreduce_base_latency_s", "allreduce_hop_latency_s")


@pytest.mark.parametrize("gpu", sorted(MEASURED))
def test_gpus_with_kernel_tables_take_their_figures_from_them_per_engine(gpu):
    for compute in MEASURED[gpu]:
        for engine in (None, "vllm", "sglang", "trtllm"):
            eff = get_efficiency(gpu, compute, engine=engine)
            src = dict(eff.sources)
            for f in DERIVED:
                assert "aiconfigurator-core" in src[f] and "derive_efficiency.py" in src[f], (gpu, compute, engine, f)
            # An engine's own tables where they measure the figure; SGLang's have no FP8-KV context
            # attention on Hopper, so the engines' pooled samples stand in.
            pooled = engine is None or (engine == "sglang" and compute == "fp8" and gpu in ("h100-sxm", "h200"))
            attn = src["attention_prefill_flops"]
            assert ("samples pooled" in attn) if pooled else (f"({engine} " in attn), (gpu, compute, engine)
            assert f"({engine} " in src["gemm_flops"] if engine else "samples pooled" in src["gemm_flops"]
            assert "aiconfigurator-core" not in src["elementwise_bandwidth"]  # no table measures it
            assert eff.weight_bandwidth_by_rows and all(0 < e <= 1 and 0 <= lat < 1e-4 for _, e, lat in eff.weight_bandwidth_by_rows)
    # The engines' kernels differ, and so do their figures.
    assert len({get_efficiency(gpu, "bf16", engine=e).gemm_flops for e in ("vllm", "sglang", "trtllm")}) == 3


def test_gpus_without_tables_keep_the_hand_written_figures():
    for gpu in ("h20", "h100-pcie", "some-cpu"):
        sources = dict(get_efficiency(gpu, "bf16", engine="vllm").sources)
        assert all(sources.values()) and not any("derive_efficiency.py" in s for s in sources.values())


def test_a_users_entry_wins_and_a_bad_figure_is_a_usage_error(tmp_path):
    path = tmp_path / "mine.json"
    path.write_text(json.dumps([{"gpu": "a100-80gb", "compute": "bf16", "gemm_flops": 0.8}]))
    assert get_efficiency("a100-80gb", "bf16", path).gemm_flops == 0.8
    built_in = get_efficiency("a100-80gb", "bf16")
    mine = get_efficiency("a100-80gb", "bf16", path)
    assert (mine.weight_bandwidth, mine.weight_bandwidth_by_rows) == (
        built_in.weight_bandwidth, built_in.weight_bandwidth_by_rows)  # the rest: built-in
    path.write_text(json.dumps([{"gpu": "*", "gemm_flops": 1.5}]))
    with pytest.raises(UsageError, match="out of range"):
        get_efficiency("a100-80gb", "bf16", path)


def test_an_engine_entry_applies_under_that_engine_only(tmp_path):
    path = tmp_path / "mine.json"
    path.write_text(json.dumps([{"gpu": "a100-80gb", "compute": "bf16", "engine": "trtllm", "gemm_flops": 0.9}]))
    assert get_efficiency("a100-80gb", "bf16", path, engine="trtllm").gemm_flops == 0.9
    assert get_efficiency("a100-80gb", "bf16", path, engine="vllm").gemm_flops == \
        get_efficiency("a100-80gb", "bf16", engine="vllm").gemm_flops
    assert get_efficiency("a100-80gb", "bf16", path).gemm_flops != 0.9  # no preset: '*' entries only


def test_weight_streaming_by_rows_is_interpolated_between_its_points(tmp_path):
    path = tmp_path / "eff.json"
    entry = {"gpu": ["tiny-gpu"], "compute": "*",
             **{k: {"value": v, "source": "test"} for k, v in FIGURES.items()}}
    entry["weight_bandwidth"]["by_rows"] = [[1, 0.8], [3, 0.4]]
    path.write_text(json.dumps({"efficiency": [entry]}))
    eff = get_efficiency("tiny-gpu", "bf16", path)
    assert [eff.weight_bandwidth_at(r) for r in (1, 2, 3, 100)] == pytest.approx([0.8, 0.6, 0.4, 0.4])
    # Two sequences with 1,000 tokens cached each, memory-bound at 1 GB/s: GEMMs of 2 rows stream
    # their weights at 0.6: (12,288 + 24,576) · 2 B / 0.6e9 = 122.88 µs, the LM head's 32,768 B /
    # 0.6e9 = 54.613 µs; KV (2,000 read + 2 written) · 128 B / 0.4e9 = 640.64 µs; elementwise
    # 2 · 2,176 B / 0.5e9 = 8.704 µs.
    t = tiny(FAST, str(path)).step_s(StepBatch(decode_context=(1000, 1000)))
    assert t == pytest.approx(122.88e-6 + 54.6133e-6 + 640.64e-6 + 8.704e-6, rel=1e-5)


def test_decode_attention_by_group_takes_the_models_query_heads_per_kv_head(tmp_path):
    path = tmp_path / "eff.json"
    entry = {"gpu": ["tiny-gpu"], "compute": "*",
             **{k: {"value": v, "source": "test"} for k, v in FIGURES.items()}}
    entry["attention_decode_bandwidth"]["by_group"] = [[1, 0.1], [4, 0.4]]  # its value stays 0.4
    path.write_text(json.dumps({"efficiency": [entry]}))
    assert get_efficiency("tiny-gpu", "bf16", path).attention_decode_bandwidth_at(2) == pytest.approx(0.2)
    # TINY has 2 query heads per KV head: 0.2. One sequence with 1,000 tokens cached, memory-bound
    # at 1 GB/s: KV (1,000 read + 1 written) · 128 B / 0.2e9 = 640.64 µs, and as in the test above
    # the weights 92.16 µs, the LM head 40.96 µs, elementwise 4.352 µs.
    t = tiny(FAST, str(path)).step_s(StepBatch(decode_context=(1000,)))
    assert t == pytest.approx(92.16e-6 + 40.96e-6 + 640.64e-6 + 4.352e-6, rel=1e-6)


def test_each_elementwise_kernel_adds_its_fixed_time_once_per_layer_and_step(tmp_path):
    path = tmp_path / "eff.json"
    entry = {"gpu": ["tiny-gpu"], "compute": "*",
             **{k: {"value": v, "source": "test"} for k, v in FIGURES.items()}}
    entry["elementwise_latency_s"]["value"] = 1e-3
    path.write_text(json.dumps({"efficiency": [entry]}))
    bf16 = get_precision("bf16")
    one, two = StepBatch(decode_context=(1000,)), StepBatch(decode_context=(1000, 1000))
    base = tiny(FAST, _flat(tmp_path))
    slow = tiny(FAST, str(path))
    # TINY's one layer in BF16 runs 4 elementwise kernels a step (two residual-add + RMSNorms,
    # rotary, SiLU-and-mul): 4 ms more, whatever the batch; under the TensorRT-LLM preset rotary is
    # inside the attention: 3 kernels, 3 ms.
    assert slow.step_s(one) - base.step_s(one) == pytest.approx(4e-3, rel=1e-9)
    assert slow.step_s(two) - base.step_s(two) == pytest.approx(4e-3, rel=1e-9)
    trt = RooflinePredictor(TINY, FAST, bf16, bf16, 1, NO_OVERHEAD, str(path), engine="trtllm")
    trt_base = RooflinePredictor(TINY, FAST, bf16, bf16, 1, NO_OVERHEAD, _flat(tmp_path), engine="trtllm")
    assert trt.step_s(one) - trt_base.step_s(one) == pytest.approx(3e-3, rel=1e-9)
    # A calibration's MBU replaces the catalog, fixed times included.
    with_mbu = RooflineParams(step_overhead_s=0.0, mbu=0.5)
    assert tiny(FAST, str(path), with_mbu).step_s(one) == tiny(FAST, _flat(tmp_path), with_mbu).step_s(one)


def _flat(tmp_path):
    path = tmp_path / "flat.json"
    path.write_text(json.dumps({"efficiency": [{"gpu": ["tiny-gpu"], "compute": "*",
                                                **{k: {"value": v, "source": "test"} for k, v in FIGURES.items()}}]}))
    return str(path)


def test_gemm_flops_by_size_takes_the_models_layer_size_in_log_scale(tmp_path):
    # TINY's layer holds 12,288 + 24,576 = 36,864 GEMM weights: the geometric middle of 9,216 and
    # 147,456, so the curve gives the middle of its two efficiencies there, 0.25.
    def catalog_with(**gemm):
        path = tmp_path / f"eff{len(list(tmp_path.iterdir()))}.json"
        entry = {"gpu": ["tiny-gpu"], "compute": "*",
                 **{k: {"value": v, "source": "test"} for k, v in FIGURES.items()}}
        entry["gemm_flops"].update(gemm)
        path.write_text(json.dumps({"efficiency": [entry]}))
        return str(path)

    curve = catalog_with(by_size=[[9216, 0.1], [147456, 0.4]])  # its value stays 0.5
    eff = get_efficiency("tiny-gpu", "bf16", curve)
    assert [eff.gemm_flops_at(w) for w in (1000, 9216, 36864, 147456, 1e9)] == pytest.approx([0.1, 0.1, 0.25, 0.4, 0.4])
    prefill = StepBatch(prefill=((100, 0),))  # compute-bound on the slow GPU
    by_size = tiny(SLOW, curve).step_s(prefill)
    # The projections and the MLP at 0.25, as with a plain 0.25; the LM head (one GEMM, one row for
    # the prompt's logits) keeps the entry's value 0.5: 2 · 16,384 FLOPs / 1e9 · (1/0.25 − 1/0.5)
    # = 65.536 µs less than with 0.25 everywhere.
    assert tiny(SLOW, catalog_with(value=0.25)).step_s(prefill) - by_size == pytest.approx(65.536e-6, rel=1e-9)
    assert by_size > tiny(SLOW, catalog_with(value=0.5)).step_s(prefill) * 1.5
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps([{"gpu": "*", "weight_bandwidth": {"value": 0.5, "by_size": [[1, 0.5]]}}]))
    with pytest.raises(UsageError, match="only gemm_flops"):
        get_efficiency("a100-80gb", "bf16", bad)


@pytest.mark.parametrize("by_rows, why", [([[3, 0.5], [1, 0.6]], "ascending"), ([[1, 1.5]], "out of range"),
                                          ("x", "by_rows must be")])
def test_a_bad_curve_is_a_usage_error(tmp_path, by_rows, why):
    path = tmp_path / "mine.json"
    path.write_text(json.dumps([{"gpu": "*", "weight_bandwidth": {"value": 0.5, "by_rows": by_rows}}]))
    with pytest.raises(UsageError, match=why):
        get_efficiency("a100-80gb", "bf16", path)


def test_a_tensor_capped_hopper_runs_prefill_near_its_cap():
    # The H20's tensor units are capped at 148/296 TFLOP/s (BF16/FP8) while its SMs and 4 TB/s HBM
    # stay near the H100's, so a compute-bound prefill runs close to the cap: measured tensor-bound
    # kernels on H20 reach 0.73-0.88 of it. An 8,192-token prefill of Qwen3-8B in FP8 (BF16 KV) has
    # its GEMM FLOPs at no less than 0.8 of the FP8 cap, and the step runs at least 1.6x faster than
    # at the H100 PCIe's fraction of its own peak (0.46 FP8 GEMMs, 0.5 BF16 attention).
    m, g = get_model("qwen3-8b"), get_gpu("h20")
    fp8, bf16 = get_precision("fp8"), get_precision("bf16")
    batch = StepBatch(prefill=((8192, 0),))
    h20 = RooflinePredictor(m, g, fp8, bf16, 1, RooflineParams(step_overhead_s=0.0))
    work = h20.work(batch)
    gemm_s = sum(work.compute_s[i] for i in (0, 1, 3))  # projections, MLP, LM head: FLOPs at peak
    assert min(work.compute_eff[i] for i in (0, 1, 3)) >= 0.8
    t = h20.step_s(batch)
    slow = gemm_s / 0.46 + work.compute_s[2] / 0.5
    assert t < slow / 1.6 and t > gemm_s  # faster than the H100 PCIe's fractions, never past the cap
    assert get_efficiency("h100-pcie", "fp8").gemm_flops == pytest.approx(0.46)  # unchanged


def test_a_measured_all_reduce_curve_prices_each_message_where_it_has_the_gpu_count(tmp_path):
    # TINY (hidden 64) at TP2: a step of k tokens all-reduces k · 64 values twice (one layer). The
    # curve says 10 µs for 64 values (1 token) and 30 µs for 640 (10 tokens): 4 tokens (256
    # values) take 10 + 20 · 192/576 = 16.667 µs each, 20 tokens (1,280 values, past the curve)
    # twice the largest message's 30 µs.
    path = tmp_path / "eff.json"
    entry = {"gpu": ["tiny-gpu"], "compute": "*", **{k: {"value": v, "source": "test"} for k, v in FIGURES.items()},
             "allreduce_bus_bandwidth": {"value": 0.5, "source": "test", "by_message": [[2, 64, 10e-6], [2, 640, 30e-6]]},
             "allreduce_base_latency_s": {"value": 1e-6}, "allreduce_hop_latency_s": {"value": 0.0}}
    path.write_text(json.dumps({"efficiency": [entry]}))
    bf16 = get_precision("bf16")

    def allreduces(tp, tokens, params=NO_OVERHEAD):
        p = RooflinePredictor(TINY, FAST, bf16, bf16, tp, params, str(path))
        return p.params.fixed_s(p.work(StepBatch(decode_context=(100,) * tokens)))

    assert allreduces(2, 1) == pytest.approx(2 * 10e-6, rel=1e-9)
    assert allreduces(2, 4) == pytest.approx(2 * 16.6667e-6, rel=1e-5)
    assert allreduces(2, 20) == pytest.approx(2 * 60e-6, rel=1e-9)
    # A calibration's all-reduce latency replaces the curve's smallest message's (10 µs): 4 tokens
    # then pay 1 + 6.667 µs each.
    fitted = RooflineParams(step_overhead_s=0.0, allreduce_latency_s=1e-6)
    assert allreduces(2, 4, fitted) == pytest.approx(2 * 7.6667e-6, rel=1e-5)
    # No curve at TP4: the line, 1 µs latency + 2 · 3/4 · 4 tokens · 64 · 2 B over 2 GB/s · 0.5
    # (the link's 2 GB/s, 1 GB/s per direction).
    assert allreduces(4, 4) == pytest.approx(2 * (1e-6 + 1.5 * 512 / 0.5e9), rel=1e-9)


@pytest.mark.parametrize("by_message, why", [([[2, 640, 1e-5], [2, 64, 1e-5]], "ascending"),
                                             ([[1, 64, 1e-5]], "ascending"), ([[2, 64, 0]], "out of range"),
                                             ([[2, 64]], "by_message must be")])
def test_a_bad_all_reduce_curve_is_a_usage_error(tmp_path, by_message, why):
    path = tmp_path / "mine.json"
    path.write_text(json.dumps([{"gpu": "*", "allreduce_bus_bandwidth": {"value": 0.5, "by_message": by_message}}]))
    with pytest.raises(UsageError, match=why):
        get_efficiency("a100-80gb", "bf16", path)
    path.write_text(json.dumps([{"gpu": "*", "weight_bandwidth": {"value": 0.5, "by_message": [[2, 64, 1e-5]]}}]))
    with pytest.raises(UsageError, match="only allreduce_bus_bandwidth"):
        get_efficiency("a100-80gb", "bf16", path)
