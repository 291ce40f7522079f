"""The client against the fault-injecting built-in server (in process, loopback): every fault kind
ends in a record with a precise status and error kind, the tokens that arrived before it, and the
latency up to the failure."""

from __future__ import annotations

import asyncio

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tokenpace.client import OpenAIClient, SSEParser
from tokenpace.record import RequestRecord
from tokenpace.servers import BuiltinServerConfig, running_server

MAX_TOKENS = 8
STEP_S = 0.005  # one token every 5 ms
FAST = dict(prefill_base_s=0.002, prefill_per_token_s=0.0, decode_base_s=STEP_S, decode_per_running_s=0.0,
            jitter_frac=0.0)  # fmt: skip
LIMIT_S = 0.3  # the timeout under test
SLACK_S = 0.25  # a loaded 2-core machine


def send_two(faults: str, **client_args) -> tuple[RequestRecord, RequestRecord]:
    """Request 1 gets the fault (``at:1``), request 2 is served normally on the same client."""

    async def scenario():
        records = [RequestRecord(request_id=f"r{i}", index=i, requested_output_tokens=MAX_TOKENS) for i in (1, 2)]
        async with running_server(BuiltinServerConfig(faults=faults, **FAST)) as url:
            async with OpenAIClient(url, "tokenpace-sim", **client_args) as client:
                for record in records:
                    await client.send(record, "hello there")
        return records

    return tuple(asyncio.run(scenario()))


def latency_s(record: RequestRecord) -> float:
    return (record.done_ns - record.sent_ns) / 1e9


# fault spec, client args, status, error_kind, http_status, token chunks kept
CASES = [
    ("http-429=at:1:2", {}, "error", "http_429", 429, 0),
    ("http-500=at:1", {}, "error", "http_500", 500, 0),
    ("http-503=at:1:0.5", {}, "error", "http_503", 503, 0),
    ("reset-before-headers=at:1", {}, "error", "reset_before_headers", None, 0),
    ("reset-mid=at:1:3", {}, "error", "reset_mid_stream", 200, 3),
    ("stall-first=at:1:3s", dict(ttft_timeout_s=LIMIT_S), "timeout", "ttft_timeout", 200, 0),
    ("stall-mid=at:1:3s", dict(ttft_timeout_s=2.0, idle_timeout_s=LIMIT_S), "timeout", "idle_timeout", 200, 4),
    ("malformed-sse=at:1:3", {}, "error", "malformed_sse", 200, 3),
    ("invalid-json=at:1:5", {}, "error", "invalid_json", 200, 5),
    ("no-done=at:1", {}, "ok", None, 200, MAX_TOKENS),
    ("no-usage=at:1", {}, "ok", None, 200, MAX_TOKENS),
    ("empty-choices=at:1", {}, "error", "empty_response", 200, 0),
    ("slow-headers=at:1:3s", dict(ttft_timeout_s=LIMIT_S), "timeout", "ttft_timeout", None, 0),
    ("wrong-content-type=at:1", {}, "error", "wrong_content_type", 200, 0),
    ("endless=at:1:0.05", dict(ttft_timeout_s=LIMIT_S), "timeout", "ttft_timeout", 200, 0),
]


@pytest.mark.parametrize("faults, client_args, status, kind, http_status, chunks", CASES,
                         ids=[case[0].split("=")[0] for case in CASES])  # fmt: skip
def test_each_fault_is_classified_precisely(faults, client_args, status, kind, http_status, chunks):
    faulted, normal = send_two(faults, **client_args)
    assert (faulted.status, faulted.error_kind, faulted.http_status) == (status, kind, http_status)
    assert len(faulted.chunk_ns) == chunks  # the tokens that arrived before the failure are kept
    if chunks:
        assert faulted.output_tokens == chunks and faulted.first_token_ns <= faulted.last_token_ns <= faulted.done_ns
    assert faulted.done_ns >= faulted.sent_ns
    if status == "timeout":  # the latency runs up to the moment the limit was passed
        since = faulted.last_token_ns if kind == "idle_timeout" else faulted.sent_ns
        assert LIMIT_S <= (faulted.done_ns - since) / 1e9 < LIMIT_S + SLACK_S
    else:
        assert latency_s(faulted) < 0.5 + SLACK_S
    # The next request on the same client is unaffected.
    assert (normal.status, len(normal.chunk_ns), normal.output_tokens_source) == ("ok", MAX_TOKENS, "usage")


def test_http_errors_carry_retry_after():
    assert send_two("http-429=at:1:2")[0].retry_after_s == 2.0
    assert send_two("http-503=at:1:500ms")[0].retry_after_s == 0.5


def test_missing_done_is_ok_and_missing_usage_falls_back_to_the_client_count():
    no_done = send_two("no-done=at:1")[0]
    assert (no_done.output_tokens, no_done.output_tokens_source, no_done.finish_reason) == (MAX_TOKENS, "usage", "length")
    no_usage = send_two("no-usage=at:1")[0]
    assert (no_usage.output_tokens, no_usage.output_tokens_source) == (MAX_TOKENS, "estimate")
    assert no_usage.chunk_tokens_source == "one_per_chunk" and no_usage.prompt_tokens is None


def test_without_a_ttft_limit_the_idle_limit_covers_the_wait_for_the_first_token():
    record = send_two("stall-first=at:1:3s", idle_timeout_s=LIMIT_S)[0]
    assert (record.status, record.error_kind) == ("timeout", "idle_timeout")
    # Counted from the role chunk, the last bytes that arrived.
    assert LIMIT_S <= latency_s(record) < LIMIT_S + SLACK_S


def test_keep_alives_count_as_life_so_an_endless_stream_ends_at_the_total_timeout():
    record = send_two("endless=at:1:0.05", idle_timeout_s=0.2, timeout_s=0.6)[0]
    assert (record.status, record.error_kind) == ("timeout", "total_timeout")
    assert 0.6 <= latency_s(record) < 0.6 + SLACK_S


def test_with_a_ttft_limit_a_slow_first_token_is_not_an_idle_gap():
    record = send_two("stall-first=at:1:0.4s", ttft_timeout_s=2.0, idle_timeout_s=0.2)[0]
    assert (record.status, len(record.chunk_ns)) == ("ok", MAX_TOKENS)
    assert (record.first_token_ns - record.sent_ns) / 1e9 >= 0.4


@settings(max_examples=300, deadline=None)
@given(st.lists(st.binary(max_size=40) | st.sampled_from([b"data: x\n\n", b": ka\n", b"dta: {\n", b"\r\n"]), max_size=12))
def test_strict_sse_parsing_stops_at_the_first_broken_line_and_agrees_otherwise(feeds):
    strict, lenient = SSEParser(strict=True), SSEParser()
    strict_events = [e for feed in feeds for e in strict.feed(feed)] + strict.close()
    lenient_events = [e for feed in feeds for e in lenient.feed(feed)] + lenient.close()
    if strict.invalid_line is None:
        assert strict_events == lenient_events
    else:  # what came before the broken line, and nothing after it
        assert strict_events == lenient_events[: len(strict_events)]
