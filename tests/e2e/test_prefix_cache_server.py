"""A shared-prefix workload against the engine-backed built-in server: the server reports cached
prompt tokens, and the report splits TTFT of cache hits from misses (hits are faster)."""

from __future__ import annotations

from tokenpace import BenchConfig, run_bench
from tokenpace.servers import BuiltinServerConfig, start_server_process
from tokenpace.simulator.config import SimConfig


def test_shared_prefix_hits_the_simulated_prefix_cache_and_cuts_ttft(tmp_path):
    config = BuiltinServerConfig(model="llama-3.1-8b",
                                 sim=SimConfig(model="llama-3.1-8b", gpu="l4", prefix_caching=True))
    with start_server_process(config) as server:
        result = run_bench(BenchConfig(
            url=server.url, concurrency=1, input_tokens="32", output_tokens="4", progress=False,
            shared_prefix="groups=2,prefix-tokens=2048,per-group=5,order=grouped",
            out=str(tmp_path / "r.json")))
    recs = sorted(result.records, key=lambda r: r.index)
    # The first request of each group fills the cache; the other four find the 2,048-token prefix.
    assert [r.cached_prompt_tokens > 0 for r in recs] == [False, True, True, True, True] * 2
    assert all(r.cached_prompt_tokens >= 2000 for r in recs if r.cached_prompt_tokens)
    cache = result.summary["breakdowns"]["ttft_by_cache_ms"]
    assert cache["hit_requests"] == 8 and cache["miss_requests"] == 2
    assert cache["hits"]["p50"] < 0.6 * cache["misses"]["p50"]  # prefill of ~2k tokens skipped
