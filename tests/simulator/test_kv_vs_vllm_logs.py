"""The vLLM preset's KV capacity against what vLLM itself logged at start-up ("GPU KV cache size: N
tokens") for the same model, GPU and settings (data/vllm_kv_logs.json: each case's source, setup
and logged figures). Requirement: within 3% of the logged tokens; each term of the formula is
checked against the figure vLLM logged for it too, so a wrong term cannot hide behind another."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tokenpace.simulator import SimConfig, SimRequest, get_gpu, get_model, get_precision, simulate
from tokenpace.simulator.engines import with_engine
from tokenpace.simulator.memory import (
    engine_kv_capacity, vllm_activation_peak_bytes, vllm_non_torch_bytes, weight_bytes,
)

GIB = 2**30
CASES = json.loads((Path(__file__).parent / "data" / "vllm_kv_logs.json").read_text())["cases"]
IDS = [c["name"] for c in CASES]


def capacity(case):
    return engine_kv_capacity(
        get_model(case["model"]), get_gpu(case["gpu"]), get_precision(case["weights"]),
        get_precision(case["kv_cache_dtype"]), memory_model="vllm", fraction=case["gpu_memory_utilization"],
        tp=case["tp"], max_batched_tokens=case["max_num_batched_tokens"], max_num_seqs=case["max_num_seqs"])


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_kv_tokens_within_3_percent_of_the_vllm_log(case):
    tokens = capacity(case).blocks(16) * 16  # vLLM allocates whole blocks of 16
    logged = case["logged"]["kv_cache_tokens"]
    assert abs(tokens - logged) / logged <= 0.03, (tokens, logged)


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_kv_memory_within_3_percent_of_the_vllm_log(case):
    cap = capacity(case)
    kv_gib = (cap.usable_bytes - cap.weight_bytes - cap.reserve_bytes) / GIB
    assert kv_gib == pytest.approx(case["logged"]["available_kv_gib"], rel=0.03)


@pytest.mark.parametrize("case", [c for c in CASES if "weights_gib" in c["logged"]],
                         ids=[c["name"] for c in CASES if "weights_gib" in c["logged"]])
def test_each_term_against_the_figure_vllm_logged_for_it(case):
    m, tp, logged = get_model(case["model"]), case["tp"], case["logged"]
    # Weights: vLLM also holds its rotary cos/sin cache (~0.03 GiB), which the catalog leaves out.
    assert weight_bytes(m, get_precision(case["weights"]), tp) / GIB == pytest.approx(logged["weights_gib"], abs=0.1)
    act = vllm_activation_peak_bytes(m, tp, case["max_num_batched_tokens"], case["max_num_seqs"]) / GIB
    assert act == pytest.approx(logged["torch_peak_increase_gib"], abs=0.1)
    assert vllm_non_torch_bytes(tp) / GIB == pytest.approx(logged["non_torch_increase_gib"], abs=0.15)
    # CUDA's total x utilization: vLLM prints it as "Requested memory ... 75.23 GiB" on every case.
    assert get_gpu(case["gpu"]).cuda_memory_bytes * case["gpu_memory_utilization"] / GIB == pytest.approx(75.23, abs=0.01)


def test_the_simulator_sizes_its_cache_the_same_way_under_the_vllm_preset():
    case = CASES[0]  # Llama-3.1-8B BF16 on one H100 at 0.95
    config = with_engine(SimConfig(model=case["model"], gpu=case["gpu"], gpu_memory_utilization=0.95),
                         "vllm", given={"gpu_memory_utilization"})
    assert (config.max_num_seqs, config.max_batched_tokens) == (1024, 8192)  # vLLM's defaults on an H100
    res = simulate(config, [SimRequest(64, 8, arrival_s=0.0)])
    tokens = res.config["resolved"]["memory"]["kv_capacity_tokens"]
    logged = case["logged"]["kv_cache_tokens"]
    assert abs(tokens - logged) / logged <= 0.03
