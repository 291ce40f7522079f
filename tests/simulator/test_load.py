"""The load shapes bench drives, in virtual time: an open loop's in-flight cap, and runs bounded by
a stop time (with an endless stream of requests)."""

from __future__ import annotations

import itertools

import pytest

from tokenpace.simulator import SimConfig, SimRequest, simulate


def in_flight_at(records, t_ns: int) -> int:
    return sum(r.sent_ns <= t_ns < r.done_ns for r in records)


def test_open_loop_cap_holds_requests_until_a_slot_frees():
    # 40 requests arrive at once; at most 4 may be in flight.
    reqs = [SimRequest(256, 32, arrival_s=0.0) for _ in range(40)]
    res = simulate(SimConfig(max_in_flight=4), reqs)
    recs = res.records
    assert len(recs) == 40 and all(r.status == "ok" for r in recs)
    assert all(r.scheduled_ns == 0 for r in recs)  # the plan's time is kept...
    assert [r.sent_ns for r in recs[:4]] == [0] * 4
    assert all(r.sent_ns > 0 for r in recs[4:])  # ...and sending waits for a slot
    sends = sorted({r.sent_ns for r in recs} | {r.done_ns for r in recs})
    assert max(in_flight_at(recs, t) for t in sends) == 4
    # Each later request is sent the instant an earlier one is done.
    done = {r.done_ns for r in recs}
    assert all(r.sent_ns in done for r in recs[4:])


def test_uncapped_open_loop_sends_on_schedule():
    reqs = [SimRequest(256, 32, arrival_s=0.0) for _ in range(40)]
    assert all(r.sent_ns == r.scheduled_ns == 0 for r in simulate(SimConfig(), reqs).records)


def test_closed_loop_stops_issuing_at_the_stop_time_from_an_endless_stream():
    endless = (SimRequest(512, 64) for _ in itertools.count())
    res = simulate(SimConfig(concurrency=8, stop_issuing_s=5.0), endless)
    recs = res.records
    assert recs and all(r.status == "ok" for r in recs)
    assert max(r.sent_ns for r in recs) < 5_000_000_000
    assert max(r.done_ns for r in recs) > 5_000_000_000  # those in flight run to the end
    assert res.stats["requests"] == len(recs)
    # Concurrency held until the stop: 8 in flight just before it.
    assert in_flight_at(recs, 4_999_999_999) == 8


def test_open_loop_stop_time_drops_later_arrivals_and_queued_requests():
    endless = (SimRequest(2048, 512, arrival_s=0.01 * i) for i in itertools.count())
    res = simulate(SimConfig(max_in_flight=2, stop_issuing_s=1.0), endless)
    recs = res.records
    assert res.stats["requests"] == 100  # arrivals in [0, 1 s)
    assert max(r.sent_ns for r in recs) < 1_000_000_000
    assert len(recs) < 100 and res.stats["sent"] == len(recs)  # the cap was full at the stop


def test_endless_stream_without_a_stop_is_refused():
    from tokenpace.errors import UsageError

    with pytest.raises(UsageError, match="stop time"):
        simulate(SimConfig(concurrency=2), (SimRequest(10, 10) for _ in itertools.count()))


def test_timeline_summary_describes_a_saturated_closed_loop():
    res = simulate(SimConfig(concurrency=16), [SimRequest(1024, 128) for _ in range(64)])
    st = res.stats["timeline"]
    assert st["busy_fraction"] == pytest.approx(1.0)
    assert 14 <= st["mean_running_seqs"] <= 16
    assert st["steps"] == res.stats["engine_steps"]
    assert 0 < st["mean_kv_usage"] <= st["peak_kv_usage"] <= 1
