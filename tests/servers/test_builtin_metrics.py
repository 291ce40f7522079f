"""/metrics looks like vLLM's to a scraper: names, buckets, labels, and values that add up."""

from __future__ import annotations

import asyncio

import aiohttp
from prometheus_client.parser import text_string_to_metric_families
from servers_helpers import chat_body, completion_body, fast_config, post_stream, read_events, run

from tokenpace.servers import running_server

# REFERENCE section 3.
VLLM_TTFT_BUCKETS = [0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10, 20, 40,
                     80, 160, 640, 2560]  # fmt: skip
VLLM_ITL_BUCKETS = [0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1, 2.5, 5, 7.5, 10, 20, 40, 80]


async def scrape(session, base_url) -> dict:
    """{family name: {sample name + sorted labels: value}} of one scrape."""
    async with session.get(base_url.removesuffix("/v1") + "/metrics") as r:
        assert r.status == 200 and r.headers["Content-Type"].startswith("text/plain")
        text = await r.text()
    families = {}
    for family in text_string_to_metric_families(text):
        families[family.name] = {
            (s.name, tuple(sorted(s.labels.items()))): s.value for s in family.samples
        }  # fmt: skip
    return families


def value(families, family, sample, **labels):
    labels.setdefault("model_name", "tokenpace-sim")
    return families[family][(sample, tuple(sorted(labels.items())))]


def bucket_bounds(families, family):
    return [float(dict(labels)["le"]) for name, labels in families[family] if name.endswith("_bucket")]


def test_counters_and_histograms_after_n_requests():
    n, max_tokens, prompt_words = 3, 5, 6

    async def go():
        async with running_server(fast_config()) as url, aiohttp.ClientSession() as s:
            body = chat_body(max_tokens, content=" ".join(["word"] * prompt_words))
            for _ in range(n - 1):
                await post_stream(s, url + "/chat/completions", body)
            async with s.post(url + "/chat/completions", json=body) as r:  # one non-streamed
                await r.read()
            return await scrape(s, url)

    m = run(go())
    assert value(m, "vllm:prompt_tokens", "vllm:prompt_tokens_total") == n * prompt_words
    assert value(m, "vllm:generation_tokens", "vllm:generation_tokens_total") == n * max_tokens
    assert value(m, "vllm:request_success", "vllm:request_success_total", finished_reason="length") == n
    assert value(m, "vllm:prefix_cache_queries", "vllm:prefix_cache_queries_total") == n * prompt_words
    assert value(m, "vllm:prefix_cache_hits", "vllm:prefix_cache_hits_total") == 0
    assert value(m, "vllm:num_preemptions", "vllm:num_preemptions_total") == 0

    ttft = "vllm:time_to_first_token_seconds"
    assert value(m, ttft, ttft + "_count") == n
    assert 0.002 * n <= value(m, ttft, ttft + "_sum") < 0.5  # prefill is 2 ms each
    itl = "vllm:inter_token_latency_seconds"
    assert value(m, itl, itl + "_count") == n * (max_tokens - 1)
    for name in ("vllm:e2e_request_latency_seconds", "vllm:request_queue_time_seconds",
                 "vllm:request_time_per_output_token_seconds"):  # fmt: skip
        assert value(m, name, name + "_count") == n

    assert bucket_bounds(m, ttft) == VLLM_TTFT_BUCKETS + [float("inf")]
    assert bucket_bounds(m, itl) == VLLM_ITL_BUCKETS + [float("inf")]

    for gauge in ("vllm:num_requests_running", "vllm:num_requests_waiting", "vllm:kv_cache_usage_perc"):
        assert value(m, gauge, gauge) == 0


def test_gauges_while_requests_run_and_wait():
    config = fast_config(decode_base_s=0.02, max_num_seqs=2, kv_capacity_tokens=1000)

    async def go():
        async with running_server(config) as url, aiohttp.ClientSession() as s:
            async def one():
                async with s.post(url + "/completions", json=completion_body(20, prompt="w " * 100, stream=True)) as r:
                    await read_events(r)

            tasks = [asyncio.create_task(one()) for _ in range(3)]
            await asyncio.sleep(0.1)
            during = await scrape(s, url)
            await asyncio.gather(*tasks)
            return during

    m = run(go())
    assert value(m, "vllm:num_requests_running", "vllm:num_requests_running") == 2
    assert value(m, "vllm:num_requests_waiting", "vllm:num_requests_waiting") == 1
    kv = value(m, "vllm:kv_cache_usage_perc", "vllm:kv_cache_usage_perc")
    assert 0.2 < kv < 0.3  # two running requests: 2 x (100 prompt + a few generated) / 1000


def test_each_server_has_its_own_registry():
    async def go():
        async with running_server(fast_config()) as a, running_server(fast_config()) as b:
            async with aiohttp.ClientSession() as s:
                await post_stream(s, a + "/completions", completion_body(4))
                return await scrape(s, a), await scrape(s, b)

    ma, mb = run(go())
    assert value(ma, "vllm:generation_tokens", "vllm:generation_tokens_total") == 4
    assert value(mb, "vllm:generation_tokens", "vllm:generation_tokens_total") == 0
