"""Descriptive statistics of a latency sample, with a confidence interval on p99.

Choices, stated once here and relied on by every report:

- ``std`` is the *population* standard deviation (ddof=0): it describes the samples we observed
  rather than estimating a wider population, and is 0.0 (not NaN) for one sample.
- Percentiles use linear interpolation between order statistics (numpy's default ``"linear"``
  method, Hyndman-Fan type 7): the q-quantile of n sorted values sits at rank ``(n - 1) * q``.
- ``p99_ci95`` is a percentile bootstrap 95% interval (Efron): the 2.5% and 97.5% points of the
  p99 over B = 2,000 resamples drawn with replacement, with a fixed seed so the same samples give
  the same interval. It is computed exactly in distribution without materializing the resamples:
  a resample's k-th order statistic is F_n^-1(U_(k)), where F_n^-1(u) = x_(ceil(n u)) is the
  sample's quantile function and U_(k) ~ Beta(k, n - k + 1) is the k-th of n uniform order
  statistics; the (k+1)-th is U_(k) + (1 - U_(k)) Beta(1, n - k). So each resample costs O(1)
  whatever n is, and a p99 over 10^7 ITL samples gets its interval in microseconds.
- ``p99_ci95`` is None below ``min_samples_for_ci(0.99)`` = 368 samples: with fewer, the largest
  sample lies below the true p99 more than 2.5% of the time, so no interval built from the data
  can reach 95% coverage (the bootstrap would print one anyway, too narrow); we say so instead.

Same input, same output: nothing here is random.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import numpy as np

# Summary key -> quantile.
PERCENTILES: dict[str, float] = {"p50": 0.50, "p90": 0.90, "p95": 0.95, "p99": 0.99, "p99.9": 0.999}
CI_CONFIDENCE = 0.95
BOOTSTRAP_RESAMPLES = 2000
BOOTSTRAP_SEED = 0


def describe(values_ms: Iterable[float] | np.ndarray) -> dict | None:
    """count, mean, std, min, max, p50..p99.9 and ``p99_ci95`` of the samples; None when empty.

    All numbers are plain Python floats/ints (JSON-ready). NaN samples are dropped.
    """
    values = np.asarray(values_ms if isinstance(values_ms, np.ndarray) else list(values_ms),
                        dtype=np.float64)
    values = values[~np.isnan(values)] if values.size else values
    if values.size == 0:
        return None
    ordered = np.sort(values)  # one sort serves min, max, every percentile and the CI
    stats: dict = {
        "count": int(ordered.size),
        "mean": float(ordered.mean()),
        "std": float(ordered.std()),
        "min": float(ordered[0]),
        "max": float(ordered[-1]),
    }
    for key, q in PERCENTILES.items():
        stats[key] = sorted_quantile(ordered, q)
    ci = quantile_ci(ordered, 0.99, CI_CONFIDENCE)
    stats["p99_ci95"] = None if ci is None else [ci[0], ci[1]]
    return stats


def sorted_quantile(ordered: np.ndarray, q: float) -> float:
    """The q-quantile (0..1) of an ascending, non-empty array, by linear interpolation."""
    rank = (ordered.size - 1) * q
    low = math.floor(rank)
    high = min(low + 1, ordered.size - 1)
    fraction = rank - low
    lo_value, hi_value = float(ordered[low]), float(ordered[high])
    if fraction == 0.0 or lo_value == hi_value:
        return lo_value
    return lo_value + fraction * (hi_value - lo_value)


def quantile_ci(ordered: np.ndarray, q: float, confidence: float = CI_CONFIDENCE, *,
                resamples: int = BOOTSTRAP_RESAMPLES, seed: int = BOOTSTRAP_SEED
                ) -> tuple[float, float] | None:
    """Percentile-bootstrap interval for the q-quantile of an ascending array (see the module
    docstring for the exact-in-distribution resampling); None below ``min_samples_for_ci``."""
    n = int(ordered.size)
    if n < min_samples_for_ci(q, confidence):
        return None
    rank = (n - 1) * q  # the linear-interpolation rank, as in sorted_quantile
    low = math.floor(rank)
    fraction = rank - low
    k = low + 1  # 1-based order statistic below the rank
    rng = np.random.default_rng(seed)
    u_k = rng.beta(k, n - k + 1, size=resamples)
    u_next = u_k + (1.0 - u_k) * rng.beta(1, n - k, size=resamples) if k < n else u_k
    x_k = ordered[_empirical_index(u_k, n)]
    x_next = ordered[_empirical_index(u_next, n)]
    replicates = x_k + fraction * (x_next - x_k)
    tail = (1.0 - confidence) / 2.0
    lo, hi = np.quantile(replicates, [tail, 1.0 - tail])
    return float(lo), float(hi)


def _empirical_index(u: np.ndarray, n: int) -> np.ndarray:
    """0-based index of F_n^-1(u) = x_(ceil(n u))."""
    return np.clip(np.ceil(u * n).astype(np.int64) - 1, 0, n - 1)


def min_samples_for_ci(q: float, confidence: float = CI_CONFIDENCE) -> int:
    """Smallest n for which a data-based interval can cover the q-quantile: q^n <= (1 - confidence) / 2."""
    return math.ceil(math.log((1.0 - confidence) / 2.0) / math.log(q))
