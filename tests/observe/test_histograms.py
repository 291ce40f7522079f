"""Histogram deltas over a run, and quantiles as Prometheus' histogram_quantile reads them."""

from __future__ import annotations

import math

import pytest

from tokenpace.observe.histograms import Histogram, bucket_of, describe_ms, quantile

INF = math.inf


def h(*buckets: tuple[float, float], total: float = 0.0) -> Histogram:
    return Histogram(tuple(buckets), buckets[-1][1], total)


def test_quantile_interpolates_linearly_inside_the_bucket():
    x = h((0.1, 10), (0.2, 20), (INF, 20))
    assert quantile(x, 0.5) == pytest.approx(0.1)  # rank 10: the top of the first bucket
    assert quantile(x, 0.75) == pytest.approx(0.15)  # rank 15: halfway through (0.1, 0.2]
    assert quantile(x, 0.25) == pytest.approx(0.05)  # the first bucket starts at 0
    assert bucket_of(x, 0.75) == (0.1, 0.2)


def test_quantile_in_the_inf_bucket_is_the_largest_finite_bound():
    x = h((0.1, 1), (0.5, 2), (INF, 10))
    assert quantile(x, 0.9) == 0.5
    assert bucket_of(x, 0.9) == (0.5, None)


def test_no_observations_no_quantile():
    assert quantile(h((0.1, 0), (INF, 0)), 0.5) is None
    assert describe_ms(h((0.1, 0), (INF, 0))) is None


def test_delta_is_the_runs_own_distribution():
    before = Histogram(((0.1, 100), (0.2, 150), (INF, 160)), 160, 20.0)
    after = Histogram(((0.1, 100), (0.2, 170), (INF, 190)), 190, 27.0)
    run = after.minus(before)
    assert run == Histogram(((0.1, 0), (0.2, 20), (INF, 30)), 30, pytest.approx(7.0))
    stats = describe_ms(run)
    assert stats["count"] == 30 and stats["mean"] == pytest.approx(7.0 / 30 * 1000)
    # rank 15 of 30 lies in (0.1, 0.2] at 15/20 of the way
    assert stats["p50"] == pytest.approx(175.0) and stats["p50_bucket_ms"] == [100.0, 200.0]
    assert stats["p99"] == pytest.approx(200.0)  # in +Inf: the largest finite bound


def test_delta_refuses_a_reset_or_other_buckets():
    before = Histogram(((0.1, 5), (INF, 5)), 5, 1.0)
    assert Histogram(((0.1, 1), (INF, 1)), 1, 0.1).minus(before) is None  # the engine restarted
    assert Histogram(((0.2, 9), (INF, 9)), 9, 1.0).minus(before) is None
    assert before.minus(None) is before  # no baseline: everything counted
