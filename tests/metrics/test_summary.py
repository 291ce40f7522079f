import json

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tokenpace.metrics as metrics
from tokenpace.metrics import LATENCY_NAMES, summarize
from tokenpace.record import STATUSES, RequestRecord

from .factory import record, steady

STATS_KEYS = {"count", "mean", "std", "min", "max", "p50", "p90", "p95", "p99", "p99.9",
              "p99_ci95"}


def mixed_run():
    records = steady(6, every=100.0, tokens=4, prompt_tokens=20, prompt_tokens_source="usage",
                     output_tokens_client=4, chunk_tokens_source="chunk_usage")
    records[0].output_tokens_client = 5  # client re-tokenization disagrees on one request
    records += [
        record(sent=600, chunks=[(605, 1)], done=610, status="error", error_kind="reset_mid_stream",
               index=6),  # a fast partial: must not show up in latency
        record(sent=700, chunks=[], done=700, status="error", error_kind="http_429", index=7),
        record(sent=710, chunks=[], done=720, status="error", error_kind="http_429", index=8),
        record(sent=800, chunks=[(900, 1)], done=2000, status="timeout", index=9),
        record(sent=900, chunks=[], done=950, status="cancelled", index=10),
        record(sent=-100, chunks=[(-50, 3)], warmup=True, index=11),
        RequestRecord(request_id="never", index=12),  # scheduled, never sent
    ]
    return records


def test_shape_follows_the_contract():
    summary = summarize(mixed_run(), slo="chat", gpu_hour_usd=1.0)
    assert list(summary) == ["counts", "window", "latency_ms", "ratings", "throughput", "goodput",
                             "cost", "tokens", "breakdowns"]
    assert tuple(summary["latency_ms"]) == LATENCY_NAMES == (
        "ttft", "ttft_from_scheduled", "ttfc", "tpot", "itl", "chunk_gap", "e2e",
        "e2e_from_scheduled", "schedule_lag")
    for stats in summary["latency_ms"].values():
        assert set(stats) == STATS_KEYS
    assert {"sent", "ok", "error", "timeout", "cancelled", "warmup_excluded",
            "errors_by_kind"} <= set(summary["counts"])
    assert set(summary["window"]) == {"start_ns", "end_ns", "duration_s", "definition",
                                      "requests_sent", "requests_completed", "requests_in_flight_at_start",
                                      "requests_in_flight_at_end"}
    assert {"output_tokens_s", "input_tokens_s", "total_tokens_s", "requests_s",
            "cached_prompt_tokens_s", "output_tokens", "input_tokens", "cached_prompt_tokens",
            "uncached_input_tokens_s"} <= set(summary["throughput"])
    assert {"slo", "good_requests", "requests_s", "output_tokens_s", "fraction",
            "verdict"} <= set(summary["goodput"])
    assert set(summary["cost"]) == {"gpu_hour_usd", "gpus", "usd_per_1m_output_tokens",
                                    "usd_per_1m_good_output_tokens"}
    assert set(summary["tokens"]) == {"prompt_sources", "output_sources", "chunk_token_sources", "input_mismatch",
                                      "mismatch"}


def test_counts_identity_and_error_kinds():
    counts = summarize(mixed_run())["counts"]
    assert counts["sent"] == 11 == counts["ok"] + counts["error"] + counts["timeout"] + \
        counts["cancelled"]
    assert (counts["ok"], counts["error"], counts["timeout"], counts["cancelled"]) == (6, 3, 1, 1)
    assert counts["errors_by_kind"] == {"cancelled": 1, "http_429": 2, "reset_mid_stream": 1,
                                        "timeout": 1}
    assert counts["warmup_excluded"] == 1
    assert counts["not_sent"] == 1


def test_latency_from_ok_records_only():
    latency = summarize(mixed_run())["latency_ms"]
    assert latency["ttft"]["count"] == 6
    assert latency["ttft"]["min"] == 50.0  # the 5 ms partial of the failed request is excluded
    assert latency["itl"]["count"] == 6 * 3 and latency["itl"]["p50"] == 10.0
    assert latency["tpot"]["mean"] == 10.0


def test_token_sources_and_mismatch():
    tokens = summarize(mixed_run())["tokens"]
    assert tokens["prompt_sources"] == {"unknown": 5, "usage": 6}
    assert tokens["output_sources"] == {"unknown": 3, "usage": 8}
    assert tokens["chunk_token_sources"] == {"chunk_usage": 6, "unknown": 5}
    assert tokens["mismatch"] == {"requests_compared": 6, "requests_mismatched": 1,
                                  "server_total": 24, "client_total": 25}


def _plain(value):
    if isinstance(value, dict):
        return all(isinstance(k, str) and _plain(v) for k, v in value.items())
    if isinstance(value, list):
        return all(_plain(v) for v in value)
    return value is None or type(value) in (bool, int, float, str)


def test_json_ready_and_deterministic():
    first = summarize(mixed_run(), slo="code", gpu_hour_usd=3.0)
    assert _plain(first)
    text = json.dumps(first, allow_nan=False, sort_keys=True)
    assert text == json.dumps(summarize(mixed_run(), slo="code", gpu_hour_usd=3.0),
                              allow_nan=False, sort_keys=True)


def test_public_surface():
    for name in metrics.__all__:
        assert hasattr(metrics, name), name
    for name in ("summarize", "SLO", "parse_slo", "SLO_PRESETS", "describe", "ttft", "tpot",
                 "itl_samples", "chunk_gaps", "e2e", "ttfc", "schedule_lag"):
        assert name in metrics.__all__


def test_hundred_thousand_tokens_pooled():
    rng = np.random.default_rng(0)
    records = []
    for i in range(2000):
        sent = i * 5.0
        arrivals = sent + 40.0 + np.cumsum(rng.exponential(8.0, 128))
        records.append(record(sent=sent, chunks=[(float(t), 2) for t in arrivals], index=i))
    summary = summarize(records, slo="chat")  # speed: benchmarks, not a unit test
    assert summary["latency_ms"]["itl"]["count"] == 2000 * 127 * 2


# Property: any valid-shaped records summarize, and the counts identity holds.
_stamp = st.one_of(st.none(), st.integers(0, 10**12))
_count = st.one_of(st.none(), st.integers(0, 10**6))
_source = st.sampled_from([None, "usage", "chunk_usage", "estimate", "simulated"])


@st.composite
def records_strategy(draw):
    n_chunks = draw(st.integers(0, 6))
    chunk_ns = sorted(draw(st.lists(st.integers(0, 10**12), min_size=n_chunks,
                                    max_size=n_chunks)))
    chunk_tokens = draw(st.one_of(
        st.lists(st.integers(0, 5), min_size=n_chunks, max_size=n_chunks),
        st.lists(st.integers(0, 5), max_size=3)))
    return RequestRecord(
        request_id=draw(st.text(max_size=4)), index=draw(st.integers(0, 100)),
        stream=draw(st.booleans()), warmup=draw(st.booleans()),
        scheduled_ns=draw(_stamp), sent_ns=draw(_stamp), first_token_ns=draw(_stamp),
        first_content_ns=draw(_stamp), last_token_ns=draw(_stamp), done_ns=draw(_stamp),
        chunk_ns=chunk_ns, chunk_tokens=chunk_tokens,
        chunk_tokens_source=draw(st.sampled_from([None, "chunk_usage", "apportioned",
                                                  "one_per_chunk", "simulated"])),
        prompt_tokens=draw(_count), prompt_tokens_source=draw(_source),
        cached_prompt_tokens=draw(_count), output_tokens=draw(_count),
        output_tokens_source=draw(_source), output_tokens_client=draw(_count),
        status=draw(st.sampled_from(STATUSES)),
        error_kind=draw(st.sampled_from([None, "http_500", "connect"])),
    )


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(records=st.lists(records_strategy(), max_size=12),
       slo=st.sampled_from([None, "chat", "batch", "ttft=1ms,e2e=2s,attainment=50%"]),
       window=st.one_of(st.none(), st.tuples(st.integers(0, 10**12), st.integers(0, 10**12))
                        .map(sorted).map(tuple)))
def test_summarize_never_raises_and_counts_add_up(records, slo, window):
    summary = summarize(records, slo=slo, gpu_hour_usd=2.5, window=window)
    counts = summary["counts"]
    assert counts["sent"] == counts["ok"] + counts["error"] + counts["timeout"] + \
        counts["cancelled"]
    assert counts["sent"] == sum(1 for r in records if r.measured)
    assert sum(counts["errors_by_kind"].values()) == counts["sent"] - counts["ok"]
    assert _plain(summary)
    json.dumps(summary, allow_nan=False)
    if summary["goodput"] is not None:
        assert 0 <= summary["goodput"]["good_requests"] <= counts["ok"]


@pytest.mark.parametrize("slo", [None, "chat"])
def test_empty_run(slo):
    summary = summarize([], slo=slo)
    assert summary["counts"]["sent"] == 0
    assert all(v is None for v in summary["latency_ms"].values())
    if slo:
        assert summary["goodput"]["fraction"] is None
        assert summary["goodput"]["verdict"]["met"] is False
