"""The TensorRT-LLM and SGLang presets' KV capacity against what those engines logged at start-up
for the same model, GPU and settings (data/engine_kv_logs.json: each case's source, setup, the
engine's formula and its logged figures). Requirement: within 3% of the logged tokens; the terms a
log prints (weights, the KV bytes) are checked on their own too."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tokenpace.simulator import SimConfig, SimRequest, get_gpu, get_model, get_precision, simulate
from tokenpace.simulator.engines import with_engine
from tokenpace.simulator.memory import engine_kv_capacity, weight_bytes

GIB = 2**30
CASES = json.loads((Path(__file__).parent / "data" / "engine_kv_logs.json").read_text())["cases"]
TRT = [c for c in CASES if c["engine"] == "trtllm"]
SGL = [c for c in CASES if c["engine"] == "sglang"]


def capacity(case):
    limits = {}
    if case["engine"] == "trtllm":  # its profiling pass runs at the engine's own limits
        limits = {"max_batched_tokens": case["max_num_tokens"], "max_num_seqs": case["max_batch_size"]}
    return engine_kv_capacity(
        get_model(case["model"]), get_gpu(case["gpu"]), get_precision(case["weights"]),
        get_precision(case["kv_cache_dtype"]), memory_model=case["engine"], fraction=case["fraction"],
        tp=case["tp"], **limits)


@pytest.mark.parametrize("case", TRT, ids=[c["name"] for c in TRT])
def test_trtllm_max_tokens_within_3_percent_of_its_log(case):
    cap = capacity(case)
    logged = case["logged"]
    assert abs(cap.tokens - logged["max_tokens"]) / logged["max_tokens"] <= 0.03, (cap.tokens, logged)
    assert cap.tokens * cap.kv_bytes_per_token / GIB == pytest.approx(logged["allocated_kv_gib"], rel=0.03)


@pytest.mark.parametrize("case", SGL, ids=[c["name"] for c in SGL])
def test_sglang_max_total_num_tokens_within_3_percent_of_its_log(case):
    cap = capacity(case)
    logged = case["logged"]
    assert abs(cap.tokens - logged["max_total_num_tokens"]) / logged["max_total_num_tokens"] <= 0.03
    assert cap.tokens * cap.kv_bytes_per_token / GIB == pytest.approx(logged["k_plus_v_gib"], rel=0.03)


@pytest.mark.parametrize("case", [c for c in CASES if "weights_gib" in c["logged"]],
                         ids=[c["name"] for c in CASES if "weights_gib" in c["logged"]])
def test_weights_against_the_figure_the_engine_logged(case):
    # SGLang's "mem usage" at load is the memory loading took: the weights plus the rotary cache and
    # allocator rounding (about 0.15 GiB over the weights for an 8B model).
    w = weight_bytes(get_model(case["model"]), get_precision(case["weights"]), case["tp"]) / GIB
    assert w == pytest.approx(case["logged"]["weights_gib"], abs=0.2)


def test_the_simulator_sizes_its_cache_the_same_way_under_the_sglang_preset():
    case = SGL[0]  # SGLang's default fraction for one 80 GB GPU is the preset's 0.88
    config = with_engine(SimConfig(model=case["model"], gpu=case["gpu"]), "sglang")
    assert config.gpu_memory_utilization == case["fraction"]
    res = simulate(config, [SimRequest(64, 8, arrival_s=0.0)])
    tokens = res.config["resolved"]["memory"]["kv_capacity_tokens"]
    logged = case["logged"]["max_total_num_tokens"]
    assert abs(tokens - logged) / logged <= 0.03


def test_the_simulator_sizes_its_cache_the_same_way_under_the_trtllm_preset():
    case = TRT[0]
    config = with_engine(
        # FP8 weights imply the FP8 KV cache the log used
        SimConfig(model=case["model"], gpu=case["gpu"], weights="fp8",
                  gpu_memory_utilization=case["fraction"], max_num_seqs=case["max_batch_size"],
                  max_batched_tokens=case["max_num_tokens"]),
        "trtllm", given={"gpu_memory_utilization", "max_num_seqs", "max_batched_tokens"})
    res = simulate(config, [SimRequest(64, 8, arrival_s=0.0)])
    tokens = res.config["resolved"]["memory"]["kv_capacity_tokens"]
    logged = case["logged"]["allocated_tokens"]
    assert abs(tokens - logged) / logged <= 0.03
