"""The live view's figures from hand-made records on a hand-driven clock: what "last 10 s" and
"since the start" mean, which requests count, and when the run is said to be heading for invalid."""

from __future__ import annotations

import io
import math
import re

import numpy as np
import pytest
from rich.console import Console

from tests.metrics.factory import record
from tokenpace.metrics import parse_slo
from tokenpace.runner.live_stats import LiveStats, LogHistogram, Ring
from tokenpace.runner.live_view import plain_line, render

S = 1_000  # ms per second: the factory takes times in ms


class Clock:
    def __init__(self) -> None:
        self.ms = 0.0
        self.cpu_s = 0.0

    def ns(self) -> int:
        return int(self.ms * 1_000_000)


def stats(clock: Clock, **kw) -> LiveStats:
    kw.setdefault("total", None)
    kw.setdefault("duration_s", None)
    kw.setdefault("target", "concurrency 4")
    kw.setdefault("judge_lag", False)
    s = LiveStats(clock_ns=clock.ns, cpu_s=lambda: clock.cpu_s, **kw)
    s.start()
    return s


def done_at(t_ms: float, ttft_ms: float, *, tokens: int = 11, tpot_ms: float = 10.0, index: int = 0, **kw):
    """A request that ended at t_ms with the given TTFT and TPOT."""
    sent = t_ms - ttft_ms - tpot_ms * (tokens - 1)
    return record(sent=sent, chunks=[(sent + ttft_ms + k * tpot_ms, 1) for k in range(tokens)], index=index, **kw)


def test_recent_percentiles_see_only_the_last_seconds_and_overall_sees_all():
    clock = Clock()
    s = stats(clock)
    for k in range(100):  # the first 20 s: TTFT 100 ms
        clock.ms = 200 * k
        s.add(done_at(clock.ms, 100.0, index=k))
    for k in range(50):  # then 10 s at TTFT 400 ms
        clock.ms = 20 * S + 200 * k
        s.add(done_at(clock.ms, 400.0, index=100 + k))
    clock.ms = 30 * S
    f = s.frame()
    assert f.ttft_ms["p50_recent"] == pytest.approx(400.0)
    assert f.ttft_ms["p99_recent"] == pytest.approx(400.0)
    assert f.ttft_ms["p50"] == pytest.approx(100.0, rel=0.01)  # two thirds of all were 100 ms
    assert f.ttft_ms["p99"] == pytest.approx(400.0, rel=0.01)
    assert f.tpot_ms["p50"] == pytest.approx(10.0, rel=0.01)
    assert f.done == f.ok == 150 and f.errors == {}


def test_failures_count_by_kind_retried_attempts_and_warmup_are_handled_apart():
    clock = Clock()
    s = stats(clock, slo=parse_slo("ttft=200ms"))
    clock.ms = 1 * S
    s.add(done_at(900, 100.0, index=0))  # good
    s.add(done_at(950, 300.0, index=1))  # too slow: not good
    s.add(record(sent=800, status="error", error_kind="http_500", index=2))
    s.add(record(sent=800, status="timeout", error_kind="ttft_timeout", index=3))
    s.add(record(sent=800, status="error", error_kind="http_429", index=4, retried=True))  # retried: not an end
    s.add(done_at(990, 50.0, index=5, warmup=True))  # ended, but not measured
    f = s.frame()
    assert f.done == 5 and f.ok == 3
    assert f.errors == {"http_500": 1, "ttft_timeout": 1}
    assert f.goodput_fraction == pytest.approx(1 / 4)  # 1 good of the 4 measured ends
    assert f.ttft_ms["p99_recent"] == pytest.approx(300.0, rel=0.02)  # failures and warmup have no TTFT here


def test_rates_tokens_and_requests_in_flight_come_from_the_load_generator():
    clock = Clock()
    s = stats(clock, total=100)
    flying = [record(sent=0, chunks=[(10 * k, 1) for k in range(30)], index=k) for k in range(4)]
    s.sent = lambda: 10
    s.in_flight = lambda: flying
    clock.ms = 2 * S
    for k in range(6):
        s.add(done_at(2 * S, 50.0, tokens=20, index=10 + k))
    f = s.frame()
    assert (f.sent, f.done, f.in_flight) == (10, 6, 4)
    assert f.output_tokens_s == pytest.approx((6 * 20 + 4 * 30) / 2)  # partial streams count
    assert f.rate_rps == pytest.approx(5.0)
    assert f.remaining_requests == 94
    assert f.remaining_s == pytest.approx(94 / 3)  # 6 ended in 2 s


def test_open_loop_lag_past_the_limit_warns_but_closed_loop_lag_is_not_judged():
    for judge in (True, False):
        clock = Clock()
        s = stats(clock, judge_lag=judge)
        for k in range(20):
            clock.ms = 100 * k + 100
            s.add(record(sent=clock.ms - 80, scheduled=clock.ms - 100, chunks=[(clock.ms, 1)], index=k))
        f = s.frame()
        assert f.lag_ms["p99"] == pytest.approx(20.0, rel=0.01)
        assert bool(f.warnings) is judge
        assert f.lag_judged is judge


def test_client_cpu_above_the_limit_warns():
    clock = Clock()
    s = stats(clock)
    clock.ms, clock.cpu_s = 10 * S, 9.5
    f = s.frame()
    assert f.cpu_util == pytest.approx(0.95)
    assert any("client CPU" in w for w in f.warnings)


def test_the_ring_keeps_a_fixed_number_of_entries():
    ring = Ring(("ttft",), capacity=8)
    for k in range(0, 100, 10):
        ring.add(np.arange(k, k + 10), ttft=np.arange(k, k + 10, dtype=float))
    assert ring.size == 8
    mask = ring.since(0)
    assert ring.quantiles("ttft", mask, (0.0, 1.0)) == [92.0, 99.0]  # the newest 8


@pytest.mark.parametrize("value", [0.5, 3.0, 87.0, 1234.0, 9_000.0])
def test_the_log_histogram_is_within_one_percent(value):
    h = LogHistogram()
    h.add(np.array([value] * 10 + [value * 1000, math.nan]))
    assert h.count == 11
    assert h.quantile(0.5) == pytest.approx(value, rel=0.01)
    assert h.quantile(0.999) == pytest.approx(value * 1000, rel=0.01)


def test_the_view_turns_red_and_says_so_when_the_run_is_heading_for_invalid():
    clock = Clock()
    s = stats(clock, judge_lag=True, target="4 req/s constant")
    for k in range(20):  # sent 20 ms after their scheduled time: lag p99 20 ms > 10 ms
        clock.ms = 100 * k + 100
        s.add(record(sent=clock.ms - 80, scheduled=clock.ms - 100, chunks=[(clock.ms, 1)], index=k))
    console = Console(file=io.StringIO(), force_terminal=True, color_system="truecolor", width=100)
    console.print(render(s.frame()))
    drawn = console.file.getvalue()
    assert re.search(r"\x1b\[1;31mthe run is heading for INVALID: schedule lag p99 (19.9|20.0) ms > 10 ms", drawn)
    assert "\x1b[31m20 ms" in drawn  # the overall lag figure itself is red
    assert re.search(r"INVALID AHEAD: schedule lag p99 (19.9|20.0) ms > 10 ms", plain_line(s.frame()))
