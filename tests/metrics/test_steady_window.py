"""The steady-state window rule on hand-made timelines (milliseconds)."""

from __future__ import annotations

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


def test_closed_loop_from_the_cth_send_to_the_first_completion_after_the_last_send():
    # 2 clients, 6 requests of 100 ms: sends at 0, 0, 100, 100, 200, 200; completions at 100, 200, 300.
    records = _closed_loop(2, 6, 100.0)
    w = steady_window(records, closed_loop=True, concurrency=2, start_ns=0)
    assert (w.start_ns, w.end_ns) == (0, ns(300))  # the last send at 200 ms; the next completion at 300
    assert w.rule.startswith("Steady-state window (closed loop at concurrency 2)")


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
