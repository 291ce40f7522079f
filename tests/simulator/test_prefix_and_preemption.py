"""Prefix caching saves prefill for a shared prefix; a full KV cache preempts instead of failing."""

from __future__ import annotations

from sim_helpers import percentile, ttft_ms
from tokenpace.simulator import SimConfig, SimRequest, simulate


def shared_prefix_load(n: int = 40) -> list[SimRequest]:
    # A 2k-token system prompt, then 150 tokens of user message; one request every 0.5 s.
    return [SimRequest(2198, 100, arrival_s=0.5 * i, prefix_group="support-bot", prefix_tokens=2048)
            for i in range(n)]


def test_prefix_caching_lowers_ttft_for_a_shared_prefix():
    reqs = shared_prefix_load()
    cold = simulate(SimConfig(prefix_caching=False), reqs)
    warm = simulate(SimConfig(prefix_caching=True), reqs)
    assert percentile([ttft_ms(r) for r in warm.records], 50) < 0.4 * percentile(
        [ttft_ms(r) for r in cold.records], 50)
    # The first request pays; every later one finds the 128 full blocks of the prefix.
    assert [r.cached_prompt_tokens for r in warm.records[:3]] == [0, 2048, 2048]
    assert all(r.cached_prompt_tokens == 0 for r in cold.records)
    assert warm.timeline[-1].prefix_cache_hit_rate > 0.85
    assert warm.stats["prefix_cache_hits_tokens"] == 2048 * 39


def test_a_different_prefix_misses():
    reqs = [SimRequest(2198, 10, arrival_s=0.5 * i, prefix_group=f"tenant-{i}", prefix_tokens=2048)
            for i in range(5)]
    res = simulate(SimConfig(prefix_caching=True), reqs)
    assert all(r.cached_prompt_tokens == 0 for r in res.records)


def test_user_block_hashes_share_exactly_their_common_blocks():
    reqs = [SimRequest(100, 5, arrival_s=0.0, prompt_block_hashes=(1, 2, 3, 4)),
            SimRequest(100, 5, arrival_s=1.0, prompt_block_hashes=(1, 2, 9, 4))]
    res = simulate(SimConfig(prefix_caching=True), reqs)
    assert res.records[1].cached_prompt_tokens == 32  # blocks 1 and 2; block 3 differs, so 4 does too


def test_cached_prefix_is_evicted_tail_first_under_memory_pressure():
    # 300 blocks. Request 0 holds 132 (2,110 tokens) and publishes its 131 full prompt blocks. Once
    # it ends: 169 never-published free blocks, 131 cached. Request 1 needs ceil(4,010 / 16) = 251:
    # the 169 free ones, then 82 cached ones evicted from the tail, leaving the first 49 blocks
    # (784 tokens) of the prefix for request 2.
    reqs = [SimRequest(2100, 10, arrival_s=0.0, prefix_group="p", prefix_tokens=2048),
            SimRequest(4000, 10, arrival_s=1.0),
            SimRequest(2100, 10, arrival_s=2.0, prefix_group="p", prefix_tokens=2048)]
    res = simulate(SimConfig(prefix_caching=True, num_gpu_blocks=300), reqs)
    assert res.records[2].cached_prompt_tokens == 49 * 16
    kept = simulate(SimConfig(prefix_caching=True, num_gpu_blocks=600), reqs)
    assert kept.records[2].cached_prompt_tokens == 2048


def test_kv_exhaustion_preempts_and_every_request_still_completes():
    # 64 streams × (1000 + 1000) tokens need 8,000 blocks; give the engine 2,000.
    reqs = [SimRequest(1000, 1000) for _ in range(100)]
    for policy in ("chunked-prefill", "prefill-first", "decode-first"):
        res = simulate(SimConfig(concurrency=64, num_gpu_blocks=2000, policy=policy), reqs)
        assert res.stats["preemptions"] > 0
        assert res.timeline[-1].preemptions == res.stats["preemptions"]
        assert all(r.status == "ok" and r.output_tokens == 1000 for r in res.records)
        assert all(sum(r.chunk_tokens) == 1000 for r in res.records)
        assert max(row.kv_usage for row in res.timeline) <= 1.0


def test_request_larger_than_the_whole_cache_fails_as_data():
    reqs = [SimRequest(30_000, 10, arrival_s=0.0), SimRequest(100, 10, arrival_s=0.0)]
    res = simulate(SimConfig(num_gpu_blocks=1000), reqs)
    bad, good = res.records
    assert (bad.status, bad.error_kind, bad.http_status) == ("error", "exceeds_kv_capacity", 400)
    assert good.status == "ok"
