"""Blackwell GPUs (B200, GB200) and NVFP4 weights: the datasheet peaks, FP4 tensor cores only where
the GPU has them (elsewhere NVFP4 weights are computed in BF16, as W4A16 kernels run them), the FP8
KV cache an NVFP4 checkpoint implies, and the measured B200 NVFP4 GEMMs the kernel predictor reads."""

from __future__ import annotations

import pytest

from tokenpace.simulator import (
    RooflineParams, RooflinePredictor, SimConfig, SimRequest, StepBatch, get_gpu, get_model, get_precision, simulate,
)
from tokenpace.simulator.catalog.efficiency import get_efficiency
from tokenpace.simulator.config import implied_kv_dtype

IDEAL = RooflineParams(mfu=1.0, mbu=1.0, step_overhead_s=0.0)


def _step(gpu: str, weights: str, batch: StepBatch, model: str = "llama-3.1-70b") -> tuple[float, RooflinePredictor]:
    w = get_precision(weights)
    p = RooflinePredictor(get_model(model), get_gpu(gpu), w, get_precision(implied_kv_dtype(w)), 1, IDEAL)
    return p.step_s(batch), p


@pytest.mark.parametrize("gid, bf16, fp8, fp4, mem, hbm", [
    ("b200", 2250, 4500, 9000, 180, 7.7), ("gb200", 2500, 5000, 10000, 185, 8.0),
])
def test_blackwell_peaks_are_the_datasheets(gid, bf16, fp8, fp4, mem, hbm):
    g = get_gpu(gid)
    assert (g.bf16_tflops, g.fp8_tflops, g.fp4_tflops, g.memory_gb, g.hbm_tb_s, g.link_gb_s) == (bf16, fp8, fp4, mem, hbm, 1800)
    assert g.peak_flops("fp4") == fp4 * 1e12
    assert get_gpu("dgx-b200").id == "b200" and get_gpu("GB200_NVL72").id == "gb200"


def test_fp4_falls_back_to_bf16_peaks_on_gpus_without_fp4_units():
    h100 = get_gpu("h100-sxm")
    assert h100.fp4_tflops is None and h100.peak_flops("fp4") == 989e12
    assert get_gpu("a100-80gb").peak_flops("fp4") == 312e12


def test_an_nvfp4_checkpoint_implies_an_fp8_kv_cache_and_weight_only_int4_does_not():
    assert get_precision("fp4").id == "nvfp4"
    assert implied_kv_dtype("nvfp4") == "fp8" and implied_kv_dtype("fp8") == "fp8"
    assert implied_kv_dtype("int4") == "bf16" and implied_kv_dtype("bf16") == "bf16"


def test_nvfp4_prefill_runs_on_fp4_tensor_cores_on_blackwell_and_in_bf16_on_hopper():
    prefill = StepBatch(prefill=((8192, 0),))
    fp4_b200, p = _step("b200", "nvfp4", prefill)
    fp8_b200, _ = _step("b200", "fp8", prefill)
    assert p.gemm_precision == "fp4" and p.attention_precision == "fp8"
    # A compute-bound 8,192-token prefill: the GEMMs at twice FP8's peak, attention unchanged (FP8).
    assert 0.5 < fp4_b200 / fp8_b200 < 0.8
    fp4_h100, q = _step("h100-sxm", "nvfp4", prefill)
    fp8_h100, _ = _step("h100-sxm", "fp8", prefill)
    assert q.gemm_precision == "bf16"
    assert fp4_h100 > 1.5 * fp8_h100  # BF16's peak is half FP8's


def test_an_nvfp4_decode_streams_little_more_than_half_of_fp8s_weight_bytes():
    decode = StepBatch(decode_context=(128,))  # one sequence, short context: the weights dominate
    fp4, _ = _step("b200", "nvfp4", decode)
    fp8, _ = _step("b200", "fp8", decode)
    # 4.5 bits a weight (a 4-bit value and an FP8 scale per 16) against 8, plus the 16-bit LM head.
    assert 0.55 < fp4 / fp8 < 0.65


def test_a_simulation_on_b200_in_nvfp4_fits_more_kv_and_finishes_sooner_than_fp8():
    runs = {}
    for quant in ("nvfp4", "fp8"):
        reqs = [SimRequest(arrival_s=0.0, prompt_tokens=1024, output_tokens=256) for _ in range(64)]
        runs[quant] = simulate(SimConfig(model="llama-3.1-70b", gpu="b200", weights=quant), reqs)
    fp4, fp8 = runs["nvfp4"], runs["fp8"]
    assert (fp4.config["kv_cache_dtype"], fp4.config["kv_dtype_implied"]) == ("fp8", True)
    assert fp4.stats["kv_capacity_tokens"] > fp8.stats["kv_capacity_tokens"]
    assert all(r.status == "ok" for r in fp4.records) and len(fp4.records) == 64
    assert fp4.duration_s < fp8.duration_s


def test_b200_nvfp4_gemm_lookup_is_the_measured_entry_at_a_grid_point(kernel_tables):
    import pyarrow.parquet as pq

    t = kernel_tables.load_tables("b200", "trtllm")
    kernel = t.gemm_kernel("nvfp4")
    rows = pq.read_table(t.dir / f"gemm/trtllm/{t.version}/gemm_perf.parquet").to_pandas()
    mine = rows[(rows.gemm_dtype == "nvfp4") & (rows.kernel_source == kernel)]
    for m, n, k in ((256, 8192, 8192), (4096, 8192, 8192), (16384, 8192, 8192)):
        hit = mine[(mine.m == m) & (mine.n == n) & (mine.k == k)]
        assert len(hit) >= 1, (m, n, k)
        assert t.gemm_ms("nvfp4", m, n, k) == hit.latency.iloc[0]
    # and the efficiency catalog's B200 FP4 figures come from those tables
    src = dict(get_efficiency("b200", "fp4", engine="trtllm").sources)
    assert "aiconfigurator-core" in src["gemm_flops"] and "(trtllm " in src["gemm_flops"]
