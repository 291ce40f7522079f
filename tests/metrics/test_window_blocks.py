"""The steady-state window and the load report of a long run, read by row blocks (a columnar file;
the threshold lowered here so that a small run takes that path), against the same figures from the
records themselves: random records with warmup, retries, unsent and unfinished requests."""

from __future__ import annotations

from unittest import mock

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tokenpace.config import BenchConfig
from tokenpace.metrics import summary as summary_module
from tokenpace.runner import loadcheck, steady
from tokenpace.runner.loadcheck import load_report, mean_in_flight
from tokenpace.runner.steady import steady_window

from .factory import ns, record
from .test_columnar_summary import _window, records_strategy
from .test_summary_blocks import _columnar


def _same_report(got: dict, want: dict) -> None:
    """Equal; the schedule lag's percentiles up to the last digit (exact selection, then its own
    interpolation against NumPy's)."""
    got, want = dict(got), dict(want)
    lag, want_lag = got.pop("schedule_lag_ms"), want.pop("schedule_lag_ms")
    assert got == want
    assert (lag is None) == (want_lag is None)
    if lag is not None:
        assert lag["max"] == want_lag["max"]
        assert lag == {k: pytest.approx(v, rel=1e-12, abs=1e-12) for k, v in want_lag.items()}


@pytest.fixture
def by_blocks():
    """Every columnar table read by row blocks of one part each."""
    with mock.patch.object(summary_module, "ROW_BLOCKS_ABOVE", 0), \
            mock.patch.object(steady, "BLOCK_ROWS", 1), mock.patch.object(loadcheck, "BLOCK_ROWS", 1):
        yield


@settings(max_examples=150, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(records=st.lists(records_strategy(), max_size=20), part_rows=st.integers(1, 4),
       closed=st.booleans(), concurrency=st.integers(1, 6), warmup_s=st.sampled_from([0.0, 50.0]),
       duration_s=st.sampled_from([None, 300.0]), window=_window, mode=st.sampled_from(["closed", "open"]))
def test_window_and_load_report_by_row_blocks_equal_the_records(tmp_path, by_blocks, records, part_rows, closed,
                                                                concurrency, warmup_s, duration_s, window, mode):
    table = _columnar(tmp_path, records, part_rows)
    assert summary_module.by_row_blocks(table) == bool(records)
    kwargs = dict(closed_loop=closed, concurrency=concurrency, start_ns=10**9, warmup_s=warmup_s,
                  duration_s=duration_s, send_end_ns=5 * 10**11)
    assert steady_window(table, **kwargs) == steady_window(records, **kwargs)
    config = BenchConfig(concurrency=concurrency)
    want = load_report(records, config=config, mode=mode, cpu_s=1.0, wall_s=2.0, window=window)
    got = load_report(table, config=config, mode=mode, cpu_s=1.0, wall_s=2.0, window=window)
    _same_report(got, want)
    assert mean_in_flight(table, window) == mean_in_flight(records, window)


@st.composite
def _timelines(draw):
    """Requests sent at random times (ms), each lasting a random time, some warmup, some scheduled
    earlier than sent: runs whose windows exist (completions after the last send)."""
    n = draw(st.integers(1, 24))
    out = []
    for i in range(n):
        sent = draw(st.floats(0, 1000, allow_nan=False))
        latency = draw(st.floats(1, 500, allow_nan=False))
        out.append(record(sent=sent, chunks=[(sent + latency / 2, 3), (sent + latency, 2)], index=i,
                          scheduled=sent - draw(st.floats(0, 20, allow_nan=False)), warmup=draw(st.booleans())))
    return out


@settings(max_examples=150, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(records=_timelines(), part_rows=st.integers(1, 4), concurrency=st.integers(1, 8), closed=st.booleans())
def test_windows_that_exist_by_row_blocks_equal_the_records(tmp_path, by_blocks, records, part_rows,
                                                            concurrency, closed):
    table = _columnar(tmp_path, records, part_rows)
    kwargs = dict(closed_loop=closed, concurrency=concurrency, start_ns=0)
    want = steady_window(records, **kwargs)
    assert steady_window(table, **kwargs) == want
    config = BenchConfig(concurrency=concurrency)
    mode = "closed" if closed else "open"
    _same_report(load_report(table, config=config, mode=mode, cpu_s=1.0, wall_s=2.0, window=want),
                 load_report(records, config=config, mode=mode, cpu_s=1.0, wall_s=2.0, window=want))


def test_a_closed_loop_window_by_row_blocks(tmp_path, by_blocks):
    # 2 clients, 6 requests of 100 ms (sends at 0, 0, 100, 100, 200, 200 ms), one request per part:
    # the window runs from the 2nd send (0) to the first completion after the last send (300 ms).
    records = [record(sent=(i // 2) * 100.0, chunks=[((i // 2) * 100.0 + 50, 5), ((i // 2) * 100.0 + 100, 5)],
                      index=i) for i in range(6)]
    table = _columnar(tmp_path, records, 1)
    blocks = list(table.row_blocks(1))
    assert len(blocks) == 6
    w = steady_window(table, closed_loop=True, concurrency=2, start_ns=0)
    assert (w.start_ns, w.end_ns) == (0, ns(300))
    report = load_report(table, config=BenchConfig(concurrency=2), mode="closed", cpu_s=0.1, wall_s=1.0, window=w)
    assert report["mean_in_flight"] == pytest.approx(2 * 300 / 300 - (1 * 0) / 300)  # two in flight throughout


def test_bench_end_reads_a_long_run_without_its_whole_columns(tmp_path, by_blocks):
    # All that bench does once its load has ended (the window, the summary over it, the load
    # report) reads a long run's columnar file block by block: the table's bool and text columns
    # (read once, whole, when first asked for) are never read.
    from tokenpace.metrics import summarize

    records = [record(sent=i * 10.0, chunks=[(i * 10.0 + 40, 3), (i * 10.0 + 90, 2)], index=i,
                      scheduled=i * 10.0 - 1, warmup=i < 5) for i in range(120)]
    table = _columnar(tmp_path, records, 16)
    window = steady_window(table, closed_loop=True, concurrency=8, start_ns=0)
    assert window is not None
    summarize(table, slo="chat", window=window)
    report = load_report(table, config=BenchConfig(concurrency=8), mode="closed", cpu_s=0.1, wall_s=1.0,
                         window=window)
    assert table.bools._owner._table is None and table.texts._owner._table is None
    assert report["schedule_lag_ms"]["max"] == 1.0 and report["mean_in_flight"] > 0
