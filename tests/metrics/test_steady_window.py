"""The steady-state window rule on hand-made timelines (milliseconds)."""

from __future__ import annotations

import pytest

from tokenpace.metrics import summarize
from tokenpace.runner.steady import steady_window

from .factory import ns, record, steady


def _closed_loop(concurrency: int, requests: int, latency: float) -> list:
    """A closed loop at ``concurrency`` where every request takes ``latency`` ms: waves."""
    out = []
    for i in range(requests):
        sent = (i // concurrency) * latency
        out.append(record(sent=sent, chunks=[(sent + latency / 2, 5), (sent + latency, 5)], index=i))
    return out


def test_closed_loop_from_the_cth_send_to_the_first_completion_no_send_followed():
    # 2 clients, 6 requests of 100 ms: sends at 0, 0, 100, 100, 200, 200; completions at 100, 200, 300.
    records = _closed_loop(2, 6, 100.0)
    w = steady_window(records, closed_loop=True, concurrency=2, start_ns=0)
    assert (w.start_ns, w.end_ns) == (0, ns(300))  # the last sends at 200 ms; the next completions at 300
    assert w.rule.startswith("Steady-state window (closed loop at concurrency 2)")


def test_a_cohort_that_ends_at_the_last_sends_instant_ends_the_window_there():
    # 2 clients, 5 requests of 100 ms in lockstep (a simulation of identical requests): both end at
    # 200 ms, one client sends the fifth request at that instant, the other has none left. From 200
    # ms one request is in flight, not two: the window ends at 200, not at the fifth's end (300).
    records = _closed_loop(2, 5, 100.0)
    w = steady_window(records, closed_loop=True, concurrency=2, start_ns=0)
    assert (w.start_ns, w.end_ns) == (0, ns(200))
    # 16 clients, 120 identical requests: 7 whole cohorts, then 8 requests run at half load.
    records = _closed_loop(16, 120, 100.0)
    w = steady_window(records, closed_loop=True, concurrency=16, start_ns=0)
    assert w.end_ns == ns(700)
    # The rate is the full load's: 16 requests of 10 tokens per 100 ms (over 0-800 ms it read 1,500).
    assert summarize(records, window=w)["throughput"]["output_tokens_s"] == pytest.approx(1600)


def test_a_completion_within_the_last_sends_turnaround_ends_the_window():
    # 2 clients: A's requests take 100 ms, B's 150 ms; a client sends its next request 10 ms after
    # its previous one ended. Sends: A at 0, 110, 220; B at 0, 160. A's third ends at 320, B's second
    # at 310, 90 ms after the last send (220): the window ends at 310, where B found none left.
    records = [record(sent=0, chunks=[(100, 5)], index=0), record(sent=0, chunks=[(150, 5)], index=1),
               record(sent=110, chunks=[(210, 5)], index=2), record(sent=160, chunks=[(310, 5)], index=3),
               record(sent=220, chunks=[(320, 5)], index=4)]
    w = steady_window(records, closed_loop=True, concurrency=2, start_ns=0)
    assert w.end_ns == ns(310)
    # A completion inside the last send's turnaround: A ends at 210, sends at 220; B had ended at
    # 215 with nothing left. The first completion after the last send (320) is past the cooldown's start.
    records[3] = record(sent=160, chunks=[(215, 5)], index=3)
    w = steady_window(records, closed_loop=True, concurrency=2, start_ns=0)
    assert w.end_ns == ns(215)


def test_the_drain_is_left_out_of_an_open_loop():
    # Sends every 100 ms from 0 to 900 ms; each request lasts 600 ms: the drain runs to 1500 ms.
    records = steady(10, every=100.0, ttft=100.0, tokens=6, itl=100.0)
    w = steady_window(records, closed_loop=False, concurrency=None, start_ns=0)
    assert (w.start_ns, w.end_ns) == (0, ns(900))
    old = summarize(records)["throughput"]["requests_s"]
    new = summarize(records, window=w)
    assert old == 10 / 1.5  # diluted by the drain
    # Over the sending window: the progress of the requests in flight counts (the first sent at
    # 0, done at 600; by 900 ms the work done adds up to 6.5 requests' worth in 0.9 s).
    assert new["throughput"]["requests_s"] == 6.5 / 0.9
    assert new["window"]["requests_sent"] == 10 and new["window"]["requests_completed"] == 4


def test_a_load_that_never_reached_its_concurrency_has_no_steady_window():
    records = _closed_loop(4, 3, 100.0)  # three requests for four clients
    assert steady_window(records, closed_loop=True, concurrency=4, start_ns=0) is None


def test_warmup_and_ramp_hold_the_start_back():
    records = steady(30, every=100.0)
    w = steady_window(records, closed_loop=False, concurrency=None, start_ns=0, warmup_s=0.5, ramp_s=1.0)
    assert w.start_ns == ns(1500) and "0.5 s of warmup and the 1 s ramp" in w.rule


def test_completions_can_outnumber_sends_and_every_request_is_accounted_for():
    # A closed loop of 2 clients, 100 ms requests, its window begun at 150 ms (after a ramp): the
    # two requests sent at 100 ms are in flight then and complete inside it without being sent in it.
    records = _closed_loop(2, 6, 100.0)
    w = summarize(records, window=(ns(150), ns(250)))["window"]
    assert (w["requests_sent"], w["requests_completed"]) == (2, 2)  # sent at 200; done at 200
    assert (w["requests_in_flight_at_start"], w["requests_in_flight_at_end"]) == (2, 2)  # sent at 100; at 200
    w = summarize(records, window=(ns(50), ns(210)))["window"]
    # In flight at 50 ms: the two sent at 0. Sent inside: at 100 and 200 (4); done inside: at 100 and 200 (4).
    assert (w["requests_sent"], w["requests_completed"], w["requests_in_flight_at_start"],
            w["requests_in_flight_at_end"]) == (4, 4, 2, 2)


def test_the_console_says_why_completions_outnumber_sends(tmp_path):
    from tokenpace.config import BenchConfig
    from tokenpace.reports.console import inside_counts
    from tokenpace.runner.simulate import SimRunConfig, run_sim

    # A closed loop at 16 reached over a 5 s ramp: its window opens with all 16 already in flight.
    run = run_sim(SimRunConfig(load=BenchConfig(concurrency=16, requests=200, ramp_s=5, output_tokens="64",
                                                progress=False, out=str(tmp_path / "r.json"))))
    w = run.summary["window"]
    assert w["requests_completed"] > w["requests_sent"]
    assert w["requests_in_flight_at_start"] == 16
    # Every request inside is accounted for (none failed here: ended inside = completed ok inside).
    assert (w["requests_in_flight_at_start"] + w["requests_sent"]
            == w["requests_completed"] + w["requests_in_flight_at_end"])
    assert "16 already in flight when it began" in inside_counts(w)


def _mixed(seed: int) -> list:
    """Random records: warmup, retried attempts, never sent, failures without tokens, late sends."""
    import random

    rng = random.Random(seed)
    out = []
    for i in range(rng.randint(1, 60)):
        sent = None if rng.random() < 0.1 else rng.uniform(0, 5000)
        chunks = [] if sent is None or rng.random() < 0.2 else \
            sorted((sent + rng.uniform(1, 800), 1) for _ in range(rng.randint(1, 6)))
        out.append(record(sent=sent, chunks=chunks, index=i, warmup=rng.random() < 0.15,
                          retried=rng.random() < 0.1, attempt=rng.choice((1, 1, 2)),
                          scheduled=None if sent is None else sent - rng.uniform(0, 20),
                          done=None if sent is None and rng.random() < 0.5 else
                          (chunks[-1][0] if chunks else (sent or 0.0) + rng.uniform(0, 50)),
                          status="ok" if chunks else "error"))
    return out


def _reference_load(records: list, window) -> dict:
    """The load report's figures record by record (the definitions, as the per-record code had them)."""
    import numpy as np

    sent = [r for r in records if r.sent_ns is not None]
    measured = [r for r in sent if not r.warmup]
    lags = [(r.sent_ns - r.scheduled_ns) / 1e6 for r in sent
            if r.scheduled_ns is not None and r.attempt == 1 and not r.warmup]
    sends = sorted(r.sent_ns for r in measured)
    achieved = ((len(sends) - 1) / ((sends[-1] - sends[0]) / 1e9)
                if len(sends) > 1 and sends[-1] > sends[0] else None)
    spans = [(r.sent_ns, r.done_ns) for r in measured if r.done_ns]
    in_flight = None
    if spans:
        lo = window.start_ns if window else min(s for s, _ in spans)
        hi = window.end_ns if window else max(d for _, d in spans)
        if hi > lo:
            in_flight = sum(max(0, min(d, hi) - max(s, lo)) for s, d in spans) / (hi - lo)
    lag = None
    if lags:
        p50, p99 = np.percentile(lags, [50, 99])
        lag = {"p50": float(p50), "p99": float(p99), "max": max(lags)}
    return {"schedule_lag_ms": lag, "achieved_rate_rps": achieved, "mean_in_flight": in_flight}


def test_a_record_table_gives_the_window_and_load_report_its_records_give():
    """bench computes the window and the load report from its columnar parts (a RecordTable): the
    same window as from the records, and the load report's figures as defined record by record,
    on random runs."""
    from tokenpace.config import BenchConfig
    from tokenpace.recordtable import RecordTable
    from tokenpace.runner.loadcheck import load_report

    config = BenchConfig(concurrency=4, requests=10)
    for seed in range(200):
        records = _mixed(seed)
        table = RecordTable.from_records(records)
        for closed, c, warmup_s, duration_s in ((True, 4, 0.0, None), (False, None, 0.5, 3.0), (True, 2, 1.0, 2.0)):
            args = dict(closed_loop=closed, concurrency=c, start_ns=0, warmup_s=warmup_s,
                        duration_s=duration_s, send_end_ns=ns(4000))
            assert steady_window(table, **args) == steady_window(records, **args), seed
        for window in (None, steady_window(records, closed_loop=False, concurrency=None, start_ns=0)):
            got = load_report(table, config=config, mode="open", cpu_s=1.0, wall_s=5.0, window=window)
            assert {k: got[k] for k in ("schedule_lag_ms", "achieved_rate_rps", "mean_in_flight")} == \
                _reference_load(records, window), seed
