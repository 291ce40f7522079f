"""The planner's memory arithmetic on hand-checked cases."""

from __future__ import annotations

import pytest

from tokenpace.plan.fit import memory_fit

GIB = 2**30


def test_a_4096_token_llama_3_70b_context_at_16_bits_is_the_seeds_1_3_gb():
    # 2 (K and V) x 80 layers x 8 KV heads x 128 head dim x 2 bytes = 327,680 bytes per token.
    fit = memory_fit("llama-3.1-70b", "h100-sxm", "bf16", tp=2, context_tokens=4096)
    assert fit.kv_bytes_per_token * fit.tp == 327_680
    assert fit.kv_gib_per_sequence * GIB == 327_680 * 4096  # 1.34e9 bytes: "roughly 1.3 GB"
    assert 1.3e9 < fit.kv_gib_per_sequence * GIB < 1.4e9


def test_tensor_parallelism_splits_weights_and_kv_heads():
    one = memory_fit("llama-3.1-8b", "h100-sxm", "bf16", tp=1)
    two = memory_fit("llama-3.1-8b", "h100-sxm", "bf16", tp=2)
    assert two.weights_gib == pytest.approx(one.weights_gib / 2)
    assert two.kv_bytes_per_token == one.kv_bytes_per_token / 2  # 8 KV heads: 4 per GPU
    # 8 KV heads over 16 GPUs: every GPU still holds one (vLLM replicates them).
    sixteen = memory_fit("llama-3.1-8b", "h100-sxm", "bf16", tp=16)
    assert sixteen.kv_bytes_per_token == 2 * 32 * 1 * 128 * 2


def test_fp8_weights_imply_an_fp8_kv_cache_and_halve_both():
    bf16 = memory_fit("llama-3.1-70b", "h100-sxm", "bf16", tp=2)
    fp8 = memory_fit("llama-3.1-70b", "h100-sxm", "fp8", tp=2)
    assert fp8.kv_dtype == "fp8"
    assert fp8.kv_bytes_per_token == bf16.kv_bytes_per_token / 2
    assert fp8.weights_gib < 0.55 * bf16.weights_gib  # blocks in 8 bits, embeddings stay 16


def test_a_70b_model_at_16_bits_does_not_fit_one_80_gb_gpu_and_says_why_in_numbers():
    fit = memory_fit("llama-3.1-70b", "h100-sxm", "bf16", tp=1)
    assert not fit.fits and fit.kv_tokens == 0
    assert fit.weights_gib > 120  # 70.6B parameters x 2 bytes
    assert "weights 131.4 GiB" in fit.reason() and "no KV room" in fit.reason()


def test_sequences_are_the_kv_capacity_over_the_context_capped_by_the_batch_limit():
    fit = memory_fit("llama-3.1-8b", "l40s", "bf16", context_tokens=8192)
    assert fit.sequences == min(fit.kv_tokens // 8192, fit.max_num_seqs)
    short = memory_fit("llama-3.1-8b", "l40s", "bf16", context_tokens=64)
    assert short.sequences == short.max_num_seqs  # the batch limit binds first
    huge = memory_fit("llama-3.1-8b", "l40s", "bf16", context_tokens=fit.kv_tokens + 1)
    assert not huge.fits and "needs" in huge.reason()
