"""The summary of a long run by row blocks (``summary_blocks``) against the whole-table summary, on
random records written to a columnar file in small parts and read back a few rows at a time: with
failures, cancellations, retries, warmup, multi-token chunks, windows, SLOs, cache writes and
token prices; the describers' guesses made early (often missed: a second pass) or never."""

from __future__ import annotations

import dataclasses
from unittest import mock

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tokenpace.metrics import block_sections, order_stats, summarize
from tokenpace.metrics import summary as summary_module
from tokenpace.metrics.order_stats import BlockDescriber
from tokenpace.metrics.slo import parse_slo
from tokenpace.metrics.summary_blocks import summarize_blocks
from tokenpace.metrics.token_cost import TokenPrices
from tokenpace.recordtable import RecordTable
from tokenpace.results.columnar import ColumnarWriter
from tokenpace.results.columnar_read import read_table

from .factory import record
from .test_columnar_summary import _window, records_strategy


def _split(summary: dict) -> tuple[dict, list[float]]:
    """The summary less every described sample's mean and std and goodput's requests/s (sums
    combined block by block: equal up to rounding), and those figures."""
    sums: list[float] = []

    def walk(value):
        if isinstance(value, dict):
            out = {k: walk(v) for k, v in value.items()}
            if {"mean", "std", "p50"} <= set(out):
                sums.extend([out.pop("mean"), out.pop("std")])
            return out
        if isinstance(value, list):
            return [walk(v) for v in value]
        return value

    out = walk(summary)
    if out.get("goodput") is not None:
        rate = out["goodput"].pop("requests_s")
        sums.append(0.0 if rate is None else rate)
    return out, sums


def _columnar(tmp_path, records, part_rows: int):
    path = tmp_path / "run.columns"
    with ColumnarWriter(path, batch_records=part_rows) as writer:
        for r in records:
            writer.add(r)
    return read_table(path, chunks=False)


@st.composite
def _runs(draw):
    records = draw(st.lists(records_strategy(), max_size=24))  # indices repeat (retried attempts)
    writes = draw(st.booleans())  # a run that reports cache writes (Anthropic's API)
    return [dataclasses.replace(r, request_id=f"r{i}",
                                cache_write_prompt_tokens=draw(st.one_of(st.none(), st.integers(0, 50))) if writes else None)
            for i, r in enumerate(records)]


@settings(max_examples=200, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(records=_runs(), slo=st.sampled_from([None, "chat", "ttft=1ms,e2e=2s,attainment=50%", "tpot=50ms"]),
       window=_window, part_rows=st.integers(1, 4), block_rows=st.integers(1, 6),
       warm=st.sampled_from([0, 3, 10**9]), priced=st.booleans())
def test_the_summary_by_row_blocks_equals_the_whole_table_summary(tmp_path, records, slo, window, part_rows,
                                                                   block_rows, warm, priced):
    prices = TokenPrices(3.0, 15.0) if priced else None
    want = summarize(RecordTable.from_records(records), slo=slo, window=window, gpu_hour_usd=2.0,
                     token_prices=prices)
    table = _columnar(tmp_path, records, part_rows)
    with mock.patch.object(block_sections, "WARM", warm), mock.patch.object(order_stats, "WARM_SAMPLES", warm):
        got = summarize_blocks(table, slo=parse_slo(slo) if slo else None, window=window, gpu_hour_usd=2.0,
                               gpus=1, token_prices=prices, block_rows=block_rows)
    (got, got_sums), (want, want_sums) = _split(got), _split(want)
    assert got == want
    assert got_sums == pytest.approx(want_sums, rel=1e-12, abs=1e-9)


def _drifting(n: int) -> list:
    """Requests whose TTFT and ITL grow through the run: the first blocks hold none of the high
    percentiles, so a guess made from them misses and the second pass reads the blocks again."""
    out = []
    for i in range(n):
        ttft = 10.0 + i * 0.5
        out.append(record(index=i, sent=i * 3.0, chunks=[(ttft, 1), (ttft + 1 + i * 0.01, 2), (ttft + 3 + i * 0.02, 1)]))
    return out


def test_drifting_latencies_take_the_second_pass_and_give_the_same_figures(tmp_path):
    records = _drifting(600)
    want = summarize(RecordTable.from_records(records), slo="chat")
    table = _columnar(tmp_path, records, 25)
    collect = mock.patch.object(BlockDescriber, "collect", autospec=True, side_effect=BlockDescriber.collect)
    with mock.patch.object(block_sections, "WARM", 50), mock.patch.object(order_stats, "WARM_SAMPLES", 50), \
            collect as collected:
        got = summarize_blocks(table, slo=parse_slo("chat"), window=None, gpu_hour_usd=None, gpus=1,
                               token_prices=None, block_rows=100)
    assert collected.called  # the guess missed: a second pass
    (got, got_sums), (want, want_sums) = _split(got), _split(want)
    assert got == want
    assert got_sums == pytest.approx(want_sums, rel=1e-12)
    assert got["latency_ms"]["ttft"]["p99"] > got["latency_ms"]["ttft"]["p50"] + 200  # it did drift


def test_a_long_run_is_summarized_by_row_blocks_without_its_whole_columns(tmp_path):
    # Above the threshold (lowered here) summarize reads the columnar file by row blocks: the
    # table's bool and text columns (read once when first asked for) are never read whole.
    records = _drifting(300)
    table = _columnar(tmp_path, records, 40)
    with mock.patch.object(summary_module, "ROW_BLOCKS_ABOVE", 100):
        got = summarize(table, slo="chat")
    assert table.bools._owner._table is None and table.texts._owner._table is None
    want = summarize(RecordTable.from_records(records), slo="chat")
    assert _split(got) [0] == _split(want)[0]
    assert got["counts"]["sent"] == 300 and got["latency_ms"]["ttft"]["count"] == 300
    # Asked for, the table's columns read as before.
    assert int(table.bools["stream"].sum()) == 300 and table.status_is("ok").all()


def test_hand_made_records_by_row_blocks(tmp_path):
    # Three parts of one request each, one block each: r0 ok (TTFT 100 ms, ITL 10, 10, 10, 20 ms),
    # r1 failed, r2 warmup.
    records = [record(index=0, sent=0, chunks=[(100, 1), (130, 3), (150, 1)]),
               record(index=1, sent=10, status="error", error_kind="http_500", error_message="no"),
               record(index=2, sent=0, chunks=[(5, 1)], warmup=True)]
    s = summarize_blocks(_columnar(tmp_path, records, 1), slo=None, window=(0, 140_000_000), gpu_hour_usd=None,
                         gpus=1, token_prices=None, block_rows=1)
    assert s["counts"]["sent"] == 2 and s["counts"]["ok"] == 1 and s["counts"]["error"] == 1
    assert s["counts"]["warmup_excluded"] == 1 and s["counts"]["first_error_by_kind"] == {"http_500": "no"}
    assert s["latency_ms"]["ttft"]["p50"] == 100.0
    assert s["latency_ms"]["itl"]["count"] == 4 and s["latency_ms"]["itl"]["max"] == 20.0
    assert s["latency_ms"]["itl"]["p50"] == 10.0
    assert s["throughput"]["output_tokens"] == 4 and s["throughput"]["requests"] == 0.8
    assert np.isclose(s["throughput"]["output_tokens_s"], 4 / 0.14)


def test_the_first_error_message_of_a_kind_is_chosen_across_blocks_as_in_the_whole_table(tmp_path):
    # Request 5's measured failure (row 0) and its earlier attempt's, retried (row 2), tie on
    # (index, attempt): the whole table lists retried attempts first, so "retried" is the first
    # message of http_500, whichever block each row is in. Request 3's failure (row 1) comes
    # before both by index; its kind is another.
    records = [record(index=5, sent=0, status="error", error_kind="http_500", error_message="measured"),
               record(index=3, sent=0, status="timeout", error_message="slow"),
               record(index=5, sent=0, status="error", error_kind="http_500", error_message="retried",
                      retried=True)]
    want = summarize(RecordTable.from_records(records))["counts"]["first_error_by_kind"]
    assert want == {"http_500": "retried", "timeout": "slow"}
    got = summarize_blocks(_columnar(tmp_path, records, 1), slo=None, window=None, gpu_hour_usd=None, gpus=1,
                           token_prices=None, block_rows=1)
    assert got["counts"]["first_error_by_kind"] == want
