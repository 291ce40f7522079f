"""Prometheus histograms: the change over a run, and quantiles read from the buckets.

An engine's histogram counts every request since it started. The run's own distribution is the
difference of two scrapes (bucket by bucket, end minus start). Quantiles are estimated the way
Prometheus' ``histogram_quantile`` does: find the bucket holding the q-th observation and
interpolate linearly inside it (from 0 for the first bucket); a quantile that falls in the +Inf
bucket is the largest finite bound. They are approximate: the true value lies somewhere in that
bucket, whose bounds are reported with the median (``p50_bucket_ms``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class Histogram:
    """Cumulative buckets ``(upper bound, observations <= bound)`` ascending, the last +Inf."""

    buckets: tuple[tuple[float, float], ...]
    count: float
    sum: float

    def minus(self, start: Histogram | None) -> Histogram | None:
        """The observations made between ``start`` and this one; None when the bounds differ or a
        count went down (the engine restarted in between)."""
        if start is None:
            return self
        if [b for b, _ in start.buckets] != [b for b, _ in self.buckets]:
            return None
        buckets = tuple((b, n - n0) for (b, n), (_, n0) in zip(self.buckets, start.buckets))
        count = self.count - start.count
        if count < 0 or any(n < 0 for _, n in buckets):
            return None
        return Histogram(buckets, count, self.sum - start.sum)


def quantile(h: Histogram, q: float) -> float | None:
    """Prometheus' ``histogram_quantile(q)``: None without observations."""
    if not h.buckets or h.buckets[-1][0] != math.inf:
        return None
    total = h.buckets[-1][1]
    if total <= 0:
        return None
    rank = q * total
    i = next(i for i, (_, n) in enumerate(h.buckets) if n >= rank or i == len(h.buckets) - 1)
    if i == len(h.buckets) - 1:  # in the +Inf bucket: the largest finite bound is all we know
        return h.buckets[-2][0] if len(h.buckets) > 1 else None
    upper, cumulative = h.buckets[i]
    lower, below = (0.0, 0.0) if i == 0 else h.buckets[i - 1]
    if i == 0 and upper <= 0:
        return upper
    in_bucket = cumulative - below
    return upper if in_bucket <= 0 else lower + (upper - lower) * (rank - below) / in_bucket


def bucket_of(h: Histogram, q: float) -> tuple[float, float | None] | None:
    """The bounds (lower, upper) of the bucket holding the q-quantile; upper None for +Inf."""
    if not h.buckets or h.buckets[-1][1] <= 0:
        return None
    rank = q * h.buckets[-1][1]
    for i, (upper, n) in enumerate(h.buckets):
        if n >= rank:
            lower = 0.0 if i == 0 else h.buckets[i - 1][0]
            return lower, (None if upper == math.inf else upper)
    return None


def describe_ms(h: Histogram | None) -> dict | None:
    """count, mean and approximate p50/p90/p99 (ms) of a histogram in seconds; None if empty."""
    if h is None or h.count <= 0:
        return None
    bounds = bucket_of(h, 0.5)
    return {
        "count": int(round(h.count)),
        "mean": h.sum / h.count * 1000,
        **{key: _ms(quantile(h, q)) for key, q in (("p50", 0.5), ("p90", 0.9), ("p99", 0.99))},
        "p50_bucket_ms": None if bounds is None else [bounds[0] * 1000, _ms(bounds[1])],
    }


def _ms(seconds: float | None) -> float | None:
    return None if seconds is None else seconds * 1000
