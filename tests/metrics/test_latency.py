import numpy as np
import pytest

from tokenpace.metrics import (
    chunk_gaps, e2e, e2e_from_scheduled, itl_samples, output_token_count, schedule_lag, tpot,
    ttfc, ttft, ttft_from_scheduled,
)
from tokenpace.metrics.chunks import chunk_table
from tokenpace.metrics.latency import pooled_itl_and_chunk_gaps_ms

from .factory import record


def test_ttft_is_first_token_not_a_role_only_first_chunk():
    # A client that kept the role-only chunk (5 ms, 0 tokens) in its chunk list; the first token
    # came at 120 ms. TTFT, ITL and chunk gaps all ignore the role chunk.
    r = record(chunks=[(5, 0), (120, 1), (130, 1), (150, 1)])
    assert r.first_token_ns == 120_000_000
    assert ttft(r) == 120.0
    assert itl_samples(r) == [10.0, 20.0]
    assert chunk_gaps(r) == [10.0, 20.0]
    assert tpot(r) == 15.0  # (150 - 120) / (3 - 1)


def test_multi_token_chunk_splits_its_gap_evenly():
    r = record(chunks=[(100, 1), (130, 3), (150, 2)])
    assert itl_samples(r) == [10.0, 10.0, 10.0, 10.0, 10.0]  # 30/3 x3, 20/2 x2
    assert chunk_gaps(r) == [30.0, 20.0]
    assert tpot(r) == 10.0  # (150 - 100) / (6 - 1)


def test_first_chunk_tokens_give_no_itl_sample():
    r = record(chunks=[(100, 3), (130, 3)])
    assert itl_samples(r) == [10.0, 10.0, 10.0]
    assert tpot(r) == 6.0  # (130 - 100) / (6 - 1): TPOT and mean ITL differ here, by definition


def test_reasoning_first_stream_ttft_before_ttfc():
    r = record(chunks=[(100, 1), (200, 1), (400, 1), (410, 1)], first_content=400)
    assert ttft(r) == 100.0
    assert ttfc(r) == 400.0


def test_one_token_output_has_no_tpot_or_itl():
    r = record(chunks=[(80, 1)])
    assert tpot(r) is None
    assert itl_samples(r) == []
    assert e2e(r) == 80.0


def test_non_streamed_response_has_no_tpot_itl_or_gaps():
    r = record(chunks=[(900, 50)], stream=False)
    assert ttft(r) == 900.0 and e2e(r) == 900.0
    assert tpot(r) is None
    assert itl_samples(r) == [] and chunk_gaps(r) == []


def test_schedule_lag_and_from_scheduled_variants():
    r = record(scheduled=0, sent=5, chunks=[(55, 1), (65, 1)])
    assert schedule_lag(r) == 5.0
    assert ttft(r) == 50.0 and ttft_from_scheduled(r) == 55.0
    assert e2e(r) == 60.0 and e2e_from_scheduled(r) == 65.0


def test_missing_stamps_give_none():
    r = record(sent=None, scheduled=None, chunks=[])
    for metric in (ttft, ttft_from_scheduled, ttfc, e2e, e2e_from_scheduled, schedule_lag, tpot):
        assert metric(r) is None


def test_tpot_uses_the_servers_count_over_the_clients():
    # Server usage says 11 tokens; the client saw 6 chunks of one token.
    r = record(chunks=[(100 + 10 * k, 1) for k in range(6)], output_tokens=11,
               output_tokens_client=6)
    assert output_token_count(r) == 11
    assert tpot(r) == 5.0  # 50 ms / 10


def test_chunk_token_list_of_wrong_length_counts_one_per_chunk():
    r = record(chunks=[(100, 1), (120, 1), (140, 1)])
    r.chunk_tokens = [4]
    assert itl_samples(r) == [20.0, 20.0]


def test_pooled_arrays_equal_per_record_concatenation():
    rng = np.random.default_rng(0)
    records = []
    for i in range(200):
        n = int(rng.integers(0, 8))
        times = np.cumsum(rng.integers(1, 50, n)).tolist()
        tokens = rng.integers(0, 4, n).tolist()
        records.append(record(chunks=list(zip(times, tokens)), index=i))
    itl, gaps = pooled_itl_and_chunk_gaps_ms(chunk_table(records))
    assert itl.tolist() == [s for r in records for s in itl_samples(r)]
    assert gaps.tolist() == [g for r in records for g in chunk_gaps(r)]
    ones = [record(chunks=[(10, 1), (25, 1), (27, 1)], index=i) for i in range(3)]
    itl, gaps = pooled_itl_and_chunk_gaps_ms(chunk_table(ones))
    assert itl.tolist() == gaps.tolist() == [15.0, 2.0] * 3


def test_itl_sums_to_stream_span():
    r = record(chunks=[(100, 2), (117, 3), (140, 1), (141, 5)])
    assert sum(itl_samples(r)) == pytest.approx(41.0)
    assert len(itl_samples(r)) == 9
