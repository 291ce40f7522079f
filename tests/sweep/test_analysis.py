"""Knee, SLO crossing, quadrants and auto rates on hand-made curves with known answers."""

from __future__ import annotations

import pytest

from tokenpace.sweep.analysis import CurvePoint, knee, quadrants, slo_crossing
from tokenpace.sweep.rates import auto_rates, wide_miss


def curve(loads, thr, lat, att=None, good=None, req=None):
    att = att or [None] * len(loads)
    good = good or [None] * len(loads)
    req = req or good
    return [CurvePoint(load=l, output_tokens_s=t, latency_ms=y, attainment=a, good_requests_s=g,
                       requests_s=r, good_output_tokens_s=None if g is None else g * 100,
                       extra={"ttft_p99_ms": y})
            for l, t, y, a, g, r in zip(loads, thr, lat, att, good, req)]


def test_knee_is_the_last_step_before_latency_takes_off():
    # Throughput grows linearly, latency flat then explodes: x_n - y_n = 0, .25, .5, .75-1/9, 0
    pts = curve([1, 2, 3, 4, 5], [100, 200, 300, 400, 500], [10, 10, 10, 20, 100])
    k = knee(pts)
    assert k["index"] == 3 and k["load"] == 4


def test_knee_on_a_saturating_curve_is_where_throughput_stops_growing():
    # Throughput saturates at 1000 from load 8 on; latency doubles each step after that.
    loads = [1, 2, 4, 8, 16, 32]
    pts = curve(loads, [125, 250, 500, 950, 1000, 1000], [50, 51, 53, 60, 120, 240])
    assert knee(pts)["load"] == 8


def test_knee_ignores_input_order_of_equal_steps_and_picks_the_earliest_on_ties():
    pts = curve([1, 2, 3, 4], [100, 200, 200, 300], [10, 10, 10, 110])
    # x_n - y_n = 0, .5, .5, 0 → the earlier of the tie
    assert knee(pts)["index"] == 1


def test_no_knee_when_latency_never_climbs_or_too_few_steps():
    flat = knee(curve([1, 2, 4, 8], [100, 200, 400, 800], [50, 52, 51, 60]))
    assert flat["index"] is None and "never saturated" in flat["reason"]
    # Latency that climbs fastest at low load (p99 noise), then evenly: no upward bend, no knee.
    concave = knee(curve([4, 8, 16, 24], [483, 1001, 1943, 2902], [33, 53, 62, 74]))
    assert concave["index"] is None and "did not bend" in concave["reason"]
    short = knee(curve([1, 2], [100, 200], [10, 100]))
    assert short["index"] is None and "at least 3" in short["reason"]


def test_slo_crossing_interpolates_the_load_where_attainment_falls_to_the_target():
    # attainment 1.0, 0.95, 0.85 at rates 2, 4, 6 → 0.90 is reached halfway between 4 and 6, where
    # throughput is 5.0 req/s (halfway) and goodput 0.9 x 5.0 = 4.5, above the 3.8 of the rate-4 step.
    pts = curve([2, 4, 6], [200, 400, 500], [50, 80, 300], att=[1.0, 0.95, 0.85], good=[2.0, 3.8, 5.1],
                req=[2.0, 4.0, 6.0])
    best = slo_crossing(pts, 0.90)
    assert best["interpolated"] and best["between"] == [4, 6]
    assert best["load"] == pytest.approx(5.0) and best["limit_load"] == pytest.approx(5.0)
    assert best["requests_s"] == pytest.approx(5.0)
    assert best["good_requests_s"] == pytest.approx(4.5)
    assert best["output_tokens_s"] == pytest.approx(450)
    assert best["good_output_tokens_s"] == pytest.approx(405)
    assert best["ttft_p99_ms"] == pytest.approx(190)
    assert best["held_at_every_step"] is False


def test_best_goodput_may_sit_below_the_crossing():
    # Attainment 1.0 at 16 req/s (14 good req/s) and 0.4 at 20: the crossing lies at 16.67 req/s
    # with 0.9 x 14.2 = 12.8 good req/s, less than the meeting step's 14: the best is the step.
    pts = curve([12, 16, 20], [1, 2, 3], [1, 2, 3], att=[1.0, 1.0, 0.4], good=[11.0, 14.0, 3.7],
                req=[11.0, 14.0, 14.6])
    best = slo_crossing(pts, 0.90)
    assert best["load"] == 16 and not best["interpolated"] and best["good_requests_s"] == 14.0
    assert best["limit_load"] == pytest.approx(16 + 4 * 0.1 / 0.6)


def test_slo_crossing_takes_the_highest_goodput_not_the_highest_load():
    # Goodput peaks at a meeting step and the later crossing yields less (overload collapse).
    pts = curve([1, 2, 3, 4], [100, 200, 150, 100], [10, 20, 30, 900], att=[1.0, 1.0, 0.92, 0.2],
                good=[1.0, 2.0, 1.4, 0.2])
    best = slo_crossing(pts, 0.90)
    assert best["load"] == 2 and not best["interpolated"]


def test_slo_crossing_when_every_step_meets_or_none_does():
    ok = slo_crossing(curve([1, 2], [1, 2], [1, 1], att=[1.0, 0.99], good=[1.0, 2.0]), 0.9)
    assert ok["load"] == 2 and ok["held_at_every_step"]
    assert slo_crossing(curve([1, 2], [1, 2], [1, 1], att=[0.5, 0.1], good=[0.5, 0.2]), 0.9) is None


def test_quadrants_name_the_one_to_avoid():
    pts = curve([1, 2, 3, 4], [100, 900, 1000, 200], [None] * 4)
    quads, thresholds = quadrants(pts, [100, 200, 900, 2000], ttft_limit_ms=500)
    assert quads == ["underused", "efficient", "saturated", "avoid"]
    assert thresholds["high_latency_above_ms"] == 500
    assert thresholds["high_throughput_from_output_tokens_s"] == 500
    # Without an SLO: twice the lowest load's p99 TTFT.
    quads, thresholds = quadrants(pts, [100, 150, 900, 2000], ttft_limit_ms=None)
    assert thresholds["high_latency_above_ms"] == 200 and quads[1] == "efficient"


def test_auto_rates_run_from_sync_to_past_saturation_denser_near_saturation():
    rates = auto_rates(1.0, 43.0, 8)
    assert rates[0] == 1.0 and len(rates) == 8
    below, past = rates[:6], rates[6:]
    assert below[-1] == 43.0 and past == [pytest.approx(43.0 * 1.15, rel=1e-3), pytest.approx(43.0 * 1.35, rel=1e-3)]
    gaps = [b - a for a, b in zip(below, below[1:])]
    assert all(g2 < g1 for g1, g2 in zip(gaps, gaps[1:]))  # steps shrink toward saturation
    assert auto_rates(5.0, 5.1, 8) == [5.0, 5.865, 6.885]  # a target that does not batch: its rate, then past it


def test_the_saturation_ladder_rises_to_its_cap_and_stops_when_throughput_does():
    from tokenpace.sweep.rates import saturation_ladder, still_growing

    assert saturation_ladder(256) == [4, 16, 64, 256] and saturation_ladder(100) == [4, 16, 64, 100]
    assert saturation_ladder(2) == [2]
    assert still_growing(None, 1.0) and still_growing(10.0, 10.6) and not still_growing(10.0, 10.4)
    with pytest.raises(ValueError):
        auto_rates(0.0, 10.0)


def test_wide_miss_is_two_times_a_limit_or_half_the_attainment():
    slo = {"attainment": 0.9}
    near = {"slo": slo, "fraction": 0.8, "verdict": {"ttft": {"threshold_ms": 500, "value_ms": 900, "met": False}}}
    assert wide_miss(near) is None
    far = {"slo": slo, "fraction": 0.8, "verdict": {"ttft": {"threshold_ms": 500, "value_ms": 1100, "met": False}}}
    assert "TTFT" in wide_miss(far)
    few = {"slo": slo, "fraction": 0.4, "verdict": {}}
    assert "40%" in wide_miss(few)
    assert wide_miss(None) is None


def test_pareto_frontier_keeps_the_points_nothing_beats_on_both_axes():
    from tokenpace.sweep.analysis import pareto_frontier

    # (tokens/s per user, tokens/s per GPU): a light load is fast per user, a heavy one per GPU.
    pts = [(100, 500), (80, 1500), (60, 1400), (40, 3000), (90, 400), (40, 2000), (20, 3000)]
    # (60, 1400) is beaten by (80, 1500); (90, 400) by (100, 500); (40, 2000) by (40, 3000);
    # (20, 3000) ties (40, 3000) on throughput and is slower per user.
    assert pareto_frontier(pts) == [3, 1, 0]
    assert pareto_frontier([(1, 1), (1, 1)]) == [0]
    assert pareto_frontier([]) == []
