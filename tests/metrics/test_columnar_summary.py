"""The summary computed on a RecordTable's arrays (the columnar path that large runs and the
columnar records file use) against the per-record definitions, on random records with failures,
cancellations, retries, multi-token and zero-token chunks, non-streamed responses, warmup,
missing stamps and windows; and a few hand-made records whose numbers are worked out by hand."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tokenpace.metrics import Window, summarize
from tokenpace.metrics.chunks import record_chunks
from tokenpace.metrics.columns import columns_of_table
from tokenpace.metrics.latency import PER_REQUEST, chunk_gaps, itl_samples
from tokenpace.metrics.latency import pooled_itl_and_chunk_gaps_ms
from tokenpace.record import RequestRecord
from tokenpace.recordtable import RecordTable

from .factory import record

_stamp = st.one_of(st.none(), st.integers(0, 10**12))
_count = st.one_of(st.none(), st.integers(-2, 10**6))
_source = st.sampled_from([None, "", "usage", "chunk_usage", "estimate", "simulated"])


@st.composite
def records_strategy(draw, index: int = 0) -> RequestRecord:
    n_chunks = draw(st.integers(0, 6))
    chunk_ns = sorted(draw(st.lists(st.integers(0, 10**12), min_size=n_chunks, max_size=n_chunks)))
    chunk_tokens = draw(st.one_of(  # aligned (multi-token and 0-token chunks), or a length mismatch
        st.lists(st.integers(0, 5), min_size=n_chunks, max_size=n_chunks),
        st.lists(st.integers(0, 5), max_size=3)))
    status = draw(st.sampled_from(["ok", "ok", "ok", "error", "timeout", "cancelled", "mystery"]))
    return RequestRecord(
        request_id=f"r{index}", index=draw(st.integers(0, 50)), attempt=draw(st.integers(1, 3)),
        stream=draw(st.booleans()), warmup=draw(st.booleans()), retried=draw(st.booleans()),
        requested_input_tokens=draw(_count), prefix_group=draw(st.one_of(st.none(), st.integers(0, 3))),
        turn=draw(st.one_of(st.none(), st.integers(1, 4))),
        scheduled_ns=draw(_stamp), sent_ns=draw(st.one_of(st.none(), st.integers(0, 10**12), st.integers(0, 10**12))),
        first_token_ns=draw(_stamp), first_content_ns=draw(_stamp), first_tool_call_ns=draw(_stamp),
        last_token_ns=draw(_stamp), done_ns=draw(_stamp),
        chunk_ns=chunk_ns, chunk_tokens=chunk_tokens,
        chunk_tokens_source=draw(st.sampled_from([None, "chunk_usage", "apportioned", "one_per_chunk"])),
        prompt_tokens=draw(_count), prompt_tokens_source=draw(_source),
        cached_prompt_tokens=draw(_count), output_tokens=draw(_count), output_tokens_source=draw(_source),
        reasoning_tokens=draw(_count), output_tokens_client=draw(_count), status=status,
        error_kind=draw(st.sampled_from([None, "", "http_500", "connect"])) if status != "ok" else None,
        error_message=draw(st.sampled_from([None, "", "boom", "x" * 300])) if status != "ok" else None)


_window = st.one_of(st.none(), st.tuples(st.integers(0, 10**12), st.integers(0, 10**12)).map(sorted).map(tuple),
                    st.builds(lambda a, b: Window(min(a, b), max(a, b), explicit=True, rule="Steady-state window x."),
                              st.integers(0, 10**12), st.integers(0, 10**12)))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(records=st.lists(records_strategy(), max_size=14),
       slo=st.sampled_from([None, "chat", "ttft=1ms,e2e=2s,attainment=50%", "tpot=50ms"]),
       window=_window)
def test_the_columnar_summary_equals_the_per_record_summary(records, slo, window):
    expected = summarize(records, slo=slo, window=window, gpu_hour_usd=2.0)
    assert summarize(RecordTable.from_records(records), slo=slo, window=window, gpu_hour_usd=2.0) == expected


class _SmallBlocks(RecordTable):
    """A table whose chunks are read a few at a time, so that records fall in many blocks."""

    def chunk_blocks(self, max_chunks: int = 3):
        return super().chunk_blocks(max_chunks)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(records=st.lists(records_strategy(), max_size=14),
       slo=st.sampled_from([None, "chat", "tpot=50ms"]), window=_window)
def test_the_summary_read_block_by_block_equals_the_per_record_summary(records, slo, window):
    table = RecordTable.from_records(records)
    small = _SmallBlocks(**{k: getattr(table, k) for k in table.__dataclass_fields__})
    assert summarize(small, slo=slo, window=window) == summarize(records, slo=slo, window=window)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(records=st.lists(records_strategy(), max_size=14))
def test_columns_follow_the_per_record_definitions(records):
    """Slow reference: each metric's own per-record function, record by record."""
    cols = columns_of_table(RecordTable.from_records(records))
    for name, metric in PER_REQUEST.items():
        want = np.array([np.nan if (v := metric(r)) is None else v for r in records], dtype=np.float64)
        np.testing.assert_array_equal(cols.values_ms[name], want, err_msg=name)
    streamed_ok = [r for r in records if r.status == "ok" and r.stream]
    itl, gaps = pooled_itl_and_chunk_gaps_ms(cols.chunks, cols.ok & cols.stream)
    assert itl.tolist() == [s for r in streamed_ok for s in itl_samples(r)]
    assert gaps.tolist() == [g for r in streamed_ok for g in chunk_gaps(r)]
    flat = [(i, t, k) for i, r in enumerate(records) for t, k in zip(*record_chunks(r))]
    chunks = cols.chunks.chunk_table()
    assert list(zip(chunks.record.tolist(), chunks.ns.tolist(), chunks.tokens.tolist())) == flat


def test_hand_made_records_through_the_columnar_path():
    # r0: 3 chunks (100 ms: 1 token, 130 ms: 3 tokens, 150 ms: 1 token); r1: failed; r2: warmup.
    records = [record(index=0, sent=0, chunks=[(100, 1), (130, 3), (150, 1)]),
               record(index=1, sent=10, status="error", error_kind="http_500", error_message="no"),
               record(index=2, sent=0, chunks=[(5, 1)], warmup=True)]
    s = summarize(RecordTable.from_records(records), window=(0, 140_000_000))
    assert s["counts"]["sent"] == 2 and s["counts"]["ok"] == 1 and s["counts"]["error"] == 1
    assert s["counts"]["warmup_excluded"] == 1
    assert s["counts"]["first_error_by_kind"] == {"http_500": "no"}
    assert s["latency_ms"]["ttft"]["p50"] == 100.0
    assert s["latency_ms"]["tpot"]["p50"] == 12.5  # (150 - 100) / (5 - 1)
    # ITL: a 30 ms gap over 3 tokens gives three 10 ms samples, then one 20 ms sample.
    assert s["latency_ms"]["itl"]["count"] == 4 and s["latency_ms"]["itl"]["max"] == 20.0
    assert s["latency_ms"]["itl"]["mean"] == pytest.approx(50 / 4)
    assert s["latency_ms"]["chunk_gap"]["count"] == 2
    # In the window [0, 140 ms]: the 1-token and 3-token chunks (4 of 5 tokens), 0.8 of the request.
    assert s["throughput"]["output_tokens"] == 4
    assert s["throughput"]["requests"] == 0.8
    assert math.isclose(s["throughput"]["output_tokens_s"], 4 / 0.14)


def _without_sums(summary: dict) -> tuple[dict, list[float]]:
    """The summary less the pooled samples' mean and std (summed block by block when described
    without holding them: equal up to rounding), and those figures."""
    latency = dict(summary["latency_ms"])
    sums = []
    for name in ("itl", "chunk_gap"):
        if latency[name] is not None:
            latency[name] = dict(latency[name])
            sums += [latency[name].pop("mean"), latency[name].pop("std")]
    return {**summary, "latency_ms": latency}, sums


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(records=st.lists(records_strategy(), max_size=14),
       slo=st.sampled_from([None, "chat", "tpot=50ms"]), window=_window, workers=st.sampled_from([1, 2]),
       warm=st.sampled_from([0, 3, 10**9]))
def test_pooled_samples_described_without_holding_them_equal_the_per_record_summary(records, slo, window,
                                                                                    workers, warm):
    # A large run's ITL and chunk gaps are described by the bucket select (order_stats), here
    # forced on small random runs, read three chunks at a time, in one or two threads, its guess of
    # the buckets to keep made after the first block (warm 0: often missed, a second pass), after
    # 3 samples, or never (every sample held).
    from unittest import mock

    from tokenpace.metrics import block_map, chunk_scan, order_stats
    table = RecordTable.from_records(records)
    small = _SmallBlocks(**{k: getattr(table, k) for k in table.__dataclass_fields__})
    with mock.patch.object(chunk_scan, "HELD_SAMPLES", -1), \
            mock.patch.object(order_stats, "WARM_SAMPLES", warm), \
            mock.patch.object(block_map, "default_workers", lambda: workers):
        got, got_sums = _without_sums(summarize(small, slo=slo, window=window))
    want, want_sums = _without_sums(summarize(records, slo=slo, window=window))
    assert got == want
    assert got_sums == pytest.approx(want_sums, rel=1e-12, abs=1e-9)


def test_the_described_summary_is_the_same_in_one_thread_or_two():
    # Blocks are folded in their order whatever thread computed them: the same digits, so a Ray
    # task (one thread) and a serial sweep write the same files.
    from unittest import mock

    from tokenpace.metrics import block_map, chunk_scan
    rng = np.random.default_rng(3)
    records = []
    for i in range(400):
        n = int(rng.integers(2, 40))
        arrivals = np.cumsum(rng.uniform(1, 50, n)).round(3).tolist()
        records.append(record(index=i, chunks=list(zip(arrivals, rng.integers(1, 4, n).tolist()))))
    table = RecordTable.from_records(records)
    small = _SmallBlocks(**{k: getattr(table, k) for k in table.__dataclass_fields__})
    out = []
    for workers in (1, 2):
        with mock.patch.object(chunk_scan, "HELD_SAMPLES", -1), \
                mock.patch.object(block_map, "default_workers", lambda: workers):
            out.append(summarize(small, slo="chat"))
    assert out[0] == out[1]
    assert out[0]["latency_ms"]["itl"]["count"] > out[0]["latency_ms"]["chunk_gap"]["count"]  # multi-token chunks
