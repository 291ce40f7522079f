"""Plot series from records: the numbers a reader would check on the page."""

from __future__ import annotations

import numpy as np

from tokenpace.record import RequestRecord
from tokenpace.reports.series import MAX_STEP_POINTS, cdf_points, latency_samples_ms, load_over_time, request_bars

from .runs import make_records

MS = 1_000_000


def test_in_flight_counts_overlapping_requests():
    # Three requests: 0–100 ms, 50–150 ms, 200–300 ms.
    spans = [(0, 100), (50, 150), (200, 300)]
    records = [RequestRecord(request_id=f"r{i}", index=i, scheduled_ns=a * MS, sent_ns=a * MS,
                             first_token_ns=a * MS + MS, last_token_ns=b * MS, done_ns=b * MS,
                             chunk_ns=[a * MS + MS, b * MS], chunk_tokens=[1, 1], output_tokens=2)
               for i, (a, b) in enumerate(spans)]
    load = load_over_time(records)
    at = {round(t, 3): n for t, n in zip(load.step_t_s, load.in_flight)}
    assert at == {0.0: 1, 0.05: 2, 0.1: 1, 0.15: 0, 0.2: 1, 0.3: 0}
    assert load.output_tokens_s.sum() * load.bin_s == 6  # every token counted once


def test_large_run_series_stay_small():
    records = make_records(n=3000, every_ms=2.0, tokens=4)
    load = load_over_time(records)
    # Each request lasts ~130 ms and one starts every 2 ms: about 65 in flight.
    assert load.step_t_s.size == MAX_STEP_POINTS and 55 < load.in_flight.max() < 75
    x, y = cdf_points(np.arange(100_000, dtype=float))
    assert x.size == 1000 and y[-1] == 1.0
    bars = request_bars(records)
    assert bars.subsampled and len(bars.index) == 400 and bars.index[0] == 0 and bars.index[-1] == 2999


def test_timeline_phases_come_from_the_stamps():
    r = RequestRecord(request_id="a", index=0, scheduled_ns=0, sent_ns=10 * MS, first_token_ns=60 * MS,
                      last_token_ns=160 * MS, done_ns=170 * MS)
    bars = request_bars([r])
    assert (bars.scheduled_s[0], bars.sent_s[0], bars.first_token_s[0], bars.end_s[0]) == (0.0, 0.01, 0.06, 0.16)


def _with_failures(records: list[RequestRecord]) -> list[RequestRecord]:
    """Some failed before the first token, some cancelled, one warmup, one never sent."""
    for r in records[::7]:
        r.status, r.chunk_ns, r.chunk_tokens, r.first_token_ns, r.last_token_ns = "error", [], [], None, None
    for r in records[3::11]:
        r.status = "cancelled"
    records[1].warmup = True
    records[2].sent_ns = None
    return records


def test_series_from_a_record_table_equal_those_from_the_records():
    # The HTML report of a run with a whole columnar file draws from the table: the same series.
    from tokenpace.recordtable import RecordTable
    records = _with_failures(make_records(n=900, every_ms=2.0, tokens=5))
    table = RecordTable.from_records(records)
    want, got = load_over_time(records), load_over_time(table)
    for name in ("bin_start_s", "output_tokens_s", "completed_s", "step_t_s", "in_flight"):
        np.testing.assert_array_equal(getattr(got, name), getattr(want, name), err_msg=name)
    assert got.bin_s == want.bin_s
    want_bars, got_bars = request_bars(records), request_bars(table)
    for name in ("index", "scheduled_s", "sent_s", "first_token_s", "end_s"):
        np.testing.assert_array_equal(getattr(got_bars, name), getattr(want_bars, name), err_msg=name)
    assert (got_bars.status, got_bars.total) == (want_bars.status, want_bars.total)
    want_samples, got_samples = latency_samples_ms(records), latency_samples_ms(table)
    for name in ("ttft", "tpot", "e2e", "itl"):
        np.testing.assert_array_equal(got_samples[name], want_samples[name], err_msg=name)


def test_itl_plot_samples_of_a_large_table_are_an_even_subsample_of_requests(monkeypatch):
    from tokenpace.metrics.latency import itl_samples
    from tokenpace.recordtable import RecordTable
    from tokenpace.reports import series
    records = _with_failures(make_records(n=500, every_ms=2.0, tokens=4))
    monkeypatch.setattr(series, "MAX_ITL_REQUESTS", 100)
    samples = latency_samples_ms(RecordTable.from_records(records))
    streamed = [r for r in records if r.measured and r.status == "ok" and r.stream]
    drawn, total = samples["itl_requests"].tolist()
    step = -(-len(streamed) // 100)
    assert total == len(streamed) and drawn == len(streamed[::step]) <= 100
    assert samples["itl"].tolist() == [s for r in streamed[::step] for s in itl_samples(r)]


def test_series_from_a_columnar_file_on_disk_equal_those_from_the_records(tmp_path, monkeypatch):
    # A large run's report reads the chunks from the parts: the ITL subsample gathers only the
    # picked requests' slices of each part, and the tokens-over-time histogram bins whole requests
    # at once; both must give what the records give.
    from tokenpace.metrics.latency import itl_samples
    from tokenpace.reports import series
    from tokenpace.results.columnar import ColumnarWriter
    from tokenpace.results.columnar_read import read_table
    records = _with_failures(make_records(n=700, every_ms=2.0, tokens=6))
    for r in records[5::13]:  # some multi-token chunks
        r.chunk_tokens = [2] * len(r.chunk_ns)
        r.output_tokens = 2 * len(r.chunk_ns)
    with ColumnarWriter(tmp_path / "run.columns", batch_records=50) as writer:
        for r in records:
            writer.add(r)
    table = read_table(tmp_path / "run.columns", chunks=False)
    assert table.chunk_source is not None and not table.chunk_ns.size  # the chunks stay on disk
    want, got = load_over_time(records), load_over_time(table)
    np.testing.assert_array_equal(got.output_tokens_s, want.output_tokens_s)
    assert got.output_tokens_s.sum() * got.bin_s == sum(sum(r.chunk_tokens) for r in records if r.measured)
    streamed = [r for r in records if r.measured and r.status == "ok" and r.stream]
    every = latency_samples_ms(table)  # under MAX_ITL_REQUESTS: every streamed ok request
    assert every["itl"].tolist() == [s for r in streamed for s in itl_samples(r)]
    all_ok = make_records(n=300, every_ms=2.0, tokens=6)  # every record drawn: no row left out
    with ColumnarWriter(tmp_path / "ok.columns", batch_records=50) as writer:
        for r in all_ok:
            writer.add(r)
    assert latency_samples_ms(read_table(tmp_path / "ok.columns", chunks=False))["itl"].tolist() == [
        s for r in all_ok for s in itl_samples(r)]
    monkeypatch.setattr(series, "MAX_ITL_REQUESTS", 60)
    samples = latency_samples_ms(table)
    step = -(-len(streamed) // 60)
    assert samples["itl_requests"].tolist() == [len(streamed[::step]), len(streamed)]
    assert samples["itl"].tolist() == [s for r in streamed[::step] for s in itl_samples(r)]
