"""TTFT splits by cache hit, turn and prefix group; tool-call timing; absent when not applicable."""

from __future__ import annotations

from tokenpace.metrics import summarize

from .factory import record


def test_cache_hits_and_misses_are_split_by_the_servers_cached_count():
    recs = [record(index=0, chunks=[(40, 1), (50, 1)], cached_prompt_tokens=256),
            record(index=1, chunks=[(30, 1), (40, 1)], cached_prompt_tokens=512),
            record(index=2, chunks=[(200, 1), (210, 1)], cached_prompt_tokens=0),
            record(index=3, chunks=[(300, 1)], status="error", cached_prompt_tokens=128)]
    cache = summarize(recs)["breakdowns"]["ttft_by_cache_ms"]
    assert cache["hit_requests"] == 2 and cache["miss_requests"] == 1
    assert cache["hits"]["p50"] == 35.0 and cache["misses"]["p50"] == 200.0
    assert cache["cached_prompt_tokens"] == 768  # errors are not ok requests: not counted


def test_ttft_by_turn_and_group_and_tool_calls():
    recs = [record(index=0, chunks=[(100, 1)], turn=1, session=0, prefix_group=3),
            record(index=1, chunks=[(20, 1)], turn=2, session=0, prefix_group=3),
            record(index=2, chunks=[(120, 1)], turn=1, session=1, prefix_group=4,
                   first_tool_call_ns=90_000_000)]
    b = summarize(recs)["breakdowns"]
    assert {k: v["p50"] for k, v in b["ttft_by_turn_ms"].items()} == {"1": 110.0, "2": 20.0}
    assert {k: v["count"] for k, v in b["ttft_by_prefix_group_ms"].items()} == {"3": 2, "4": 1}
    assert b["time_to_first_tool_call_ms"]["p50"] == 90.0 and b["tool_call_requests"] == 1


def test_a_plain_run_has_no_breakdowns():
    assert summarize([record(chunks=[(10, 1)])])["breakdowns"] == {}


def test_prompt_count_mismatch_between_server_and_request():
    recs = [record(index=0, chunks=[(10, 1)], prompt_tokens=520, prompt_tokens_source="usage",
                   requested_input_tokens=512),
            record(index=1, chunks=[(10, 1)], prompt_tokens=512, prompt_tokens_source="usage",
                   requested_input_tokens=512),
            record(index=2, chunks=[(10, 1)], prompt_tokens=None, requested_input_tokens=512)]
    im = summarize(recs)["tokens"]["input_mismatch"]
    assert im == {"requests_compared": 2, "requests_mismatched": 1, "server_total": 1032,
                  "client_total": 1024, "mean_server_minus_client": 4.0}
