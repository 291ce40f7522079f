"""Engine presets (vLLM, SGLang, TensorRT-LLM): their limits, KV sizing and admission, checked
against numbers computed by hand from each engine's documented rules."""

from __future__ import annotations

import argparse
import json

import pytest

from tokenpace.simulator import SimConfig, SimRequest, get_gpu, get_model, get_precision, simulate
from tokenpace.simulator.args import add_engine_arguments, engine_config
from tokenpace.simulator.engines import get_engine, list_engines, trtllm_bench_limits, with_engine
from tokenpace.simulator.memory import engine_kv_capacity

BF16 = get_precision("bf16")


def flags(*argv: str):
    p = argparse.ArgumentParser()
    add_engine_arguments(p)
    ns = p.parse_args(list(argv))
    return engine_config(ns, model="llama-3.1-8b", max_num_seqs=ns.max_num_seqs)


def test_fp8_weights_imply_an_fp8_kv_cache_unless_told_otherwise():
    assert SimConfig(weights="fp8").kv_cache_dtype == "fp8" and SimConfig(weights="fp8").kv_dtype_implied
    assert SimConfig(weights="bf16").kv_cache_dtype == "bf16"
    assert SimConfig(weights="int4").kv_cache_dtype == "bf16"  # weight-only: activations stay 16-bit
    told = SimConfig(weights="fp8", kv_cache_dtype="bf16")
    assert told.kv_cache_dtype == "bf16" and not told.kv_dtype_implied
    assert flags("--quant", "fp8").kv_cache_dtype == "fp8"
    assert flags("--quant", "fp8", "--kv-dtype", "bf16").kv_cache_dtype == "bf16"
    # Twice the tokens fit: 8B FP8 on an H100 holds ~1.0M FP8 KV tokens, not ~0.5M BF16 ones.
    res = simulate(SimConfig(weights="fp8", concurrency=1), [SimRequest(16, 2)])
    assert res.stats["kv_bytes_per_token_per_gpu"] == 65536
    assert res.config["kv_dtype_implied"] is True


def test_the_builtin_presets():
    assert {e.id for e in list_engines()} == {"vllm", "sglang", "trtllm"}
    assert get_engine("TensorRT-LLM").id == "trtllm"


def test_vllm_limits_follow_its_defaults_per_gpu():
    h100 = with_engine(SimConfig(gpu="h100-sxm"), "vllm")
    assert (h100.max_num_seqs, h100.max_batched_tokens, h100.admission) == (1024, 8192, "context")
    a100 = with_engine(SimConfig(gpu="a100-80gb"), "vllm")  # vLLM leaves A100 on the small defaults
    assert (a100.max_num_seqs, a100.max_batched_tokens) == (256, 2048)
    assert with_engine(SimConfig(gpu="h100-sxm"), "vllm", offline=True).max_batched_tokens == 16384
    set_ = dict(h100.engine_set)
    assert set_["memory_model"] == "vllm" and set_["step_overhead_s"] == h100.roofline.step_overhead_s
    assert h100.to_dict()["engine"]["preset"] == "vllm"


def test_flags_given_win_over_the_preset():
    c = flags("--engine", "vllm", "--max-num-seqs", "64", "--max-batched-tokens", "4096",
              "--step-overhead-ms", "3")
    assert (c.max_num_seqs, c.max_batched_tokens, c.roofline.step_overhead_s) == (64, 4096, 0.003)
    assert "max_num_seqs" not in dict(c.engine_set) and dict(c.engine_set)["admission"] == "context"
    assert flags().engine is None and flags().max_num_seqs == 256  # no preset: the simulator's defaults


def test_vllm_kv_capacity_by_hand():
    # Llama-3.1-8B BF16 on one H100 (CUDA reports 79.19 GiB = 85,029,615,042 B), utilization 0.9,
    # 8,192 batched tokens, 1,024 sequences (vLLM's profile run; memory.vllm_activation_peak_bytes):
    #   usable        85,029,615,042 × 0.9             = 76,526,653,537.8 B
    #   weights       8,029,995,008 params × 2 B       = 16,059,990,016 B
    #   activations   sampler 1,024 × 128,256 × 14 B + hidden and residual 8,192 × 2 × 4,096 × 2 B
    #                 = 1,838,678,016 + 134,217,728     = 1,972,895,744 B
    #                 (> forward: 8,192 × (3 × 14,336 + 4 × 4,096) × 2 B = 973,078,528 B)
    #   non-torch     0.25 GiB                         = 268,435,456 B
    #   KV            58,225,332,321.8 B / 131,072 B per token = 444,224 tokens (54.23 GiB)
    cap = engine_kv_capacity(get_model("llama-3.1-8b"), get_gpu("h100-sxm"), BF16, BF16, memory_model="vllm",
                             fraction=0.9, max_batched_tokens=8192, max_num_seqs=1024)
    assert cap.tokens == 444224


def test_trtllm_kv_is_a_fraction_of_the_free_memory():
    # Llama-3.1-8B FP8 with an FP8 KV cache, H100, fraction 0.9, 2,048 max tokens, 2,048 sequences.
    # Weights: 6,979,321,856 block params × 1 B + 1,050,673,152 embedding/LM-head params × 2 B
    # = 9,080,668,160 B. Free = 85,029,615,042 − 9,080,668,160 − activations max(2,048 × 67,584 × 2
    # = 276,824,064, 2,048 × 128,256 × 8 = 2,101,346,304) − 161,061,273.6 = 73,686,539,304.4 B;
    # × 0.9 = 66,317,885,374.0 B / 65,536 B per token = 1,011,930 tokens.
    fp8 = get_precision("fp8")
    cap = engine_kv_capacity(get_model("llama-3.1-8b"), get_gpu("h100-sxm"), fp8, fp8, memory_model="trtllm",
                             fraction=0.9, max_batched_tokens=2048, max_num_seqs=2048)
    assert cap.tokens == 1011930


def test_trtllm_bench_batch_heuristic_by_hand():
    # 8B FP8/FP8 KV on an H100, ISL 128, OSL 4096: (85,029,615,042 − 8,029,995,008 B) × 0.9 /
    # (65,536 B × 4,224 tokens) = 250.34 requests -> batch rounded up to 32s: 256; tokens
    # 250.34 × (1 + 128/4096) = 258.2 -> at least 2,048.
    c = with_engine(SimConfig(weights="fp8", gpu="h100-sxm", concurrency=4), "trtllm")
    assert trtllm_bench_limits(c, 128, 4096) == (256, 2048)
    # ISL 5000, OSL 500: 69,299,658,031 B / (65,536 × 5,500) = 192.26 -> rounded up to 32s: 224; 192.26 × 11 = 2,114.9
    # tokens -> 2,304 (multiple of 256).
    assert trtllm_bench_limits(c, 5000, 500) == (224, 2304)
    res = simulate(c, [SimRequest(128, 4096) for _ in range(4)])  # the workload sets them
    assert (res.config["max_num_seqs"], res.config["engine"]["set"]["max_num_seqs"]) == (256, 256)


def test_a_user_preset_file(tmp_path):
    path = tmp_path / "engine.json"
    path.write_text(json.dumps({"engines": [{"id": "mine", "policy": "prefill-first", "admission": "prompt",
                                             "memory": {"model": "vllm", "fraction": 0.8},
                                             "limits": [{"max_num_seqs": 48, "max_batched_tokens": 4096}],
                                             "step_overhead_ms": 2.5}]}))
    c = with_engine(SimConfig(), str(path))
    assert (c.engine, c.policy, c.max_num_seqs, c.gpu_memory_utilization, c.roofline.step_overhead_s) == \
        ("mine", "prefill-first", 48, 0.8, 0.0025)


@pytest.mark.parametrize("engine", ["vllm", "sglang", "trtllm"])
def test_long_prompts_do_not_thrash_under_any_preset(engine):
    # 20,000 in / 2,000 out, every request queued at once, FP8 weights (and so FP8 KV): the case
    # that preempted 16,000 times for 800 requests.
    c = with_engine(SimConfig(weights="fp8", gpu="h100-sxm", concurrency=2048), engine)
    res = simulate(c, [SimRequest(20_000, 2_000) for _ in range(80)])
    assert all(r.status == "ok" and r.output_tokens == 2_000 for r in res.records)
    assert res.stats["preemptions"] <= 5


def test_serve_sim_takes_the_presets_limits():
    from tokenpace.servers.args import add_server_arguments, config_from_args

    p = argparse.ArgumentParser()
    add_server_arguments(p)
    cfg = config_from_args(p.parse_args(["--sim", "--engine", "vllm", "--gpu", "h100-sxm"]))
    assert cfg.max_num_seqs == 1024 and cfg.sim.engine == "vllm" and cfg.sim.admission == "context"
    given = config_from_args(p.parse_args(["--sim", "--engine", "vllm", "--max-num-seqs", "32"]))
    assert given.max_num_seqs == 32 and given.sim.max_num_seqs == 32
