"""KV bytes per token and KV capacity, against hand-computed numbers."""

from __future__ import annotations

import pytest

from tokenpace.simulator import (
    SimConfig, SimRequest, get_gpu, get_model, get_precision, kv_bytes_per_token, kv_capacity, simulate,
)

BF16, FP8 = get_precision("bf16"), get_precision("fp8")


def test_kv_bytes_per_token():
    # 2 (K and V) × 32 layers × 8 KV heads × 128 dims × 2 bytes = 131,072 = 128 KiB.
    assert kv_bytes_per_token(get_model("llama-3.1-8b"), BF16) == 131072
    # 70B: 2 × 80 × 8 × 128 × 2 = 327,680 = 320 KiB; a 4,096-token context is 1.34 GB.
    assert kv_bytes_per_token(get_model("llama-3.1-70b"), BF16) == 327680
    assert kv_bytes_per_token(get_model("qwen3-8b"), BF16) == 2 * 36 * 8 * 128 * 2
    assert kv_bytes_per_token(get_model("llama-3.1-8b"), FP8) == 65536


def test_kv_heads_split_across_tensor_parallel_gpus_but_never_below_one():
    m = get_model("llama-3.1-8b")
    assert kv_bytes_per_token(m, BF16, tp=2) == 65536
    assert kv_bytes_per_token(m, BF16, tp=16) == 2 * 32 * 1 * 128 * 2  # 8 KV heads, replicated


def test_kv_capacity_of_8b_on_h100():
    # 80 GiB × 0.9 − 1.5 GiB reserve = 70.5 GiB = 75,698,651,136 B; minus 16,059,990,016 B of
    # weights = 59,638,661,120 B; / 131,072 B per token = 455,008 tokens (28,438 blocks of 16).
    cap = kv_capacity(get_model("llama-3.1-8b"), get_gpu("h100-sxm"), BF16, BF16)
    assert cap.tokens == 455008
    assert cap.blocks(16) == 28438


def test_tensor_parallel_frees_memory_for_kv():
    m, g = get_model("llama-3.1-70b"), get_gpu("h100-sxm")
    assert kv_capacity(m, g, BF16, BF16, tp=1).tokens == 0  # 141 GB of weights on one 80 GB GPU
    tp2 = kv_capacity(m, g, BF16, BF16, tp=2)
    tp4 = kv_capacity(m, g, BF16, BF16, tp=4)
    assert 0 < tp2.tokens < tp4.tokens


def test_a_model_that_does_not_fit_is_refused_clearly():
    with pytest.raises(ValueError, match="no room for a KV cache"):
        simulate(SimConfig(model="llama-3.1-70b", gpu="h100-sxm"), [SimRequest(10, 10, arrival_s=0.0)])
