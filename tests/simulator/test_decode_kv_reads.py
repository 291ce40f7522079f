"""How decode attention reads a grouped-query model's KV cache (``RooflineParams.decode_kv_reads``,
``sim --decode-kv-reads``): "shared" reads each KV head once for all its query heads (every current
kernel); "per-query-head" once for each, as TensorRT-LLM's masked MHA kernel did up to v0.6."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys

import pytest

from tokenpace.simulator import RooflineParams, RooflinePredictor, StepBatch, get_gpu, get_model, get_precision
from tokenpace.simulator.args import add_engine_arguments, engine_config
from tokenpace.simulator.catalog.efficiency import get_efficiency

PER_HEAD = RooflineParams(decode_kv_reads="per-query-head")
# 64 sequences decoding at 2,048 tokens of context: Llama-2-70B's KV (80 layers × 8 KV heads × 128 ×
# 2 (K, V) × 1 B in FP8 = 160 KiB a token) is 21 GB a step at TP 1, 5.4 GB per GPU at TP 4.
DECODE = StepBatch(decode_context=(2048,) * 64)


def roofline(model: str, tp: int, params: RooflineParams | None = None) -> RooflinePredictor:
    fp8 = get_precision("fp8")
    return RooflinePredictor(get_model(model), get_gpu("h100-sxm"), fp8, fp8, tp, params, engine="trtllm")


def test_an_unknown_way_of_reading_is_refused():
    with pytest.raises(ValueError, match="decode_kv_reads"):
        RooflineParams(decode_kv_reads="per-kv-head")


def test_a_multi_head_model_reads_its_kv_alike_either_way():
    # Llama-2-7B has as many KV heads as query heads: nothing to read twice.
    assert roofline("llama-2-7b", 1, PER_HEAD).step_s(DECODE) == roofline("llama-2-7b", 1).step_s(DECODE)


@pytest.mark.parametrize("tp", [1, 4])
def test_per_query_head_reads_a_gqa_model_kv_once_per_query_head(tp):
    shared, per_head = roofline("llama-2-70b", tp), roofline("llama-2-70b", tp, PER_HEAD)
    a, b = shared.work(DECODE), per_head.work(DECODE)
    # Llama-2-70B: 64 query heads over 8 KV heads, 8 query heads per KV head at any TP.
    assert b.memory_s[2] == pytest.approx(8 * a.memory_s[2], rel=1e-12)
    # ... at multi-head attention's read efficiency: the catalog's figure at one query head per KV head.
    attn = get_efficiency("h100-sxm", "fp8", engine="trtllm")
    assert b.memory_eff[2] == pytest.approx(attn.attention_decode_bandwidth_at(1))
    assert a.memory_eff[2] == pytest.approx(attn.attention_decode_bandwidth_at(8))
    # The weights and the GEMMs are untouched; the step costs more, by more than half at this context.
    assert b.memory_s[:2] == a.memory_s[:2] and b.compute_s == a.compute_s
    assert per_head.step_s(DECODE) > 1.5 * shared.step_s(DECODE)


def test_a_prompt_alone_costs_about_the_same_either_way():
    # A 2,048-token prompt is compute-bound: reading its own KV 8 times moves it by under 1%.
    prompt = StepBatch(decode_context=(), prefill=((2048, 0),))
    shared, per_head = roofline("llama-2-70b", 4).step_s(prompt), roofline("llama-2-70b", 4, PER_HEAD).step_s(prompt)
    assert shared <= per_head < shared * 1.01


def test_the_kernel_predictor_reads_a_multi_head_table_per_query_head(kernel_tables):
    from tokenpace.simulator.kernels.predictor import KernelPredictor

    fp8 = get_precision("fp8")

    def kernels(model, params=None):
        return KernelPredictor(get_model(model), get_gpu("h100-sxm"), fp8, fp8, 4, params, engine="trtllm")

    def kv_heads(table):  # of the shape looked up: the rows' own, times the scale to the asked-for one
        return table.shape[1] * table.scale

    assert kv_heads(kernels("llama-2-70b", PER_HEAD).generation) == pytest.approx(16)  # 64 / 4 query heads per GPU
    assert kv_heads(kernels("llama-2-70b").generation) == pytest.approx(2)
    assert kernels("llama-2-70b", PER_HEAD).step_s(DECODE) > 1.5 * kernels("llama-2-70b").step_s(DECODE)
    assert kernels("llama-2-7b", PER_HEAD).step_s(DECODE) == kernels("llama-2-7b").step_s(DECODE)


def test_the_flag_sets_it_and_the_result_states_it(tmp_path):
    p = argparse.ArgumentParser()
    add_engine_arguments(p)
    config = engine_config(p.parse_args(["--decode-kv-reads", "per-query-head"]), model="llama-2-70b",
                           max_num_seqs=None)
    assert config.roofline.decode_kv_reads == "per-query-head"
    out = tmp_path / "r.json"
    run = subprocess.run([sys.executable, "-m", "tokenpace", "sim", "--model", "llama-2-70b", "--quant", "fp8",
                          "--tp", "4", "--decode-kv-reads", "per-query-head", "--requests", "4", "--concurrency", "2",
                          "--input-tokens", "64", "--output-tokens", "8", "--out", str(out)],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert json.loads(out.read_text())["engine"]["config"]["roofline"]["decode_kv_reads"] == "per-query-head"
    bad = subprocess.run([sys.executable, "-m", "tokenpace", "sim", "--decode-kv-reads", "twice"],
                         capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2 and "--decode-kv-reads" in bad.stderr
