"""--scrape-metrics against a real llama-server (--metrics): the engine is recognised from its
`llamacpp:` families, its gauges and counters are followed through a short bench, and its
per-request `timings` land in the records and the engine-vs-client comparison. Skips without the
cached binary and model (fails instead with TOKENPACE_REQUIRE_ENGINE=1: see conftest.py)."""

from __future__ import annotations

import pytest

from tokenpace.config import BenchConfig
from tokenpace.runner.bench import run_bench

from .conftest import SLOTS

pytestmark = pytest.mark.engine

REQUESTS, OUTPUT_TOKENS = 24, 16


def test_scrape_llama_server_during_a_bench(llama_url, tmp_path):
    result = run_bench(BenchConfig(
        url=llama_url, concurrency=SLOTS + 4, requests=REQUESTS, input_tokens="32",
        output_tokens=str(OUTPUT_TOKENS), scrape_metrics=True, scrape_interval_s=0.2, timeout_s=120,
        progress=False, out=str(tmp_path / "run.json")))
    assert result.summary["counts"]["ok"] == REQUESTS
    em = result.engine_metrics
    assert em["engine"] == "llamacpp" and em["url"] == llama_url.removesuffix("/v1") + "/metrics"
    assert em["scrapes"]["failed"] == 0 and em["scrapes"]["ok"] >= 3
    series = em["series"]
    assert {"running", "waiting", "prompt_tokens", "generation_tokens"} <= set(series)
    assert 1 <= max(series["running"]) <= SLOTS  # never more than its slots at once
    # Counters over the run: every output token (+1 if the preflight request's slot was released
    # only after the baseline scrape: llama.cpp counts a request when its slot is freed).
    assert REQUESTS * OUTPUT_TOKENS <= em["totals"]["generation_tokens"] <= REQUESTS * OUTPUT_TOKENS + 1
    # llama.cpp has no TTFT histogram: the comparison is per request, from its `timings`.
    assert em["histograms_ms"] == {} and "ttft" not in em["vs_client"]
    per = em["vs_client"]["per_request"]
    assert per["requests"] == REQUESTS
    assert per["server_prompt_ms"]["min"] > 0
    assert per["ttft_minus_prompt_ms"]["min"] > 0  # the client sees the first token after the prompt is done
    for record in result.records:
        assert record.server_timing["predicted_n"] == OUTPUT_TOKENS
    assert em["diagnosis"] and em["diagnosis"][0]["rule"] in {"queue_built_up", "brief_queueing", "no_queueing"}
