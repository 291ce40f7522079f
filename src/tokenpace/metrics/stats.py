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

import bisect
import math
from collections.abc import Iterable

import numpy as np

# Summary key -> quantile.
PERCENTILES: dict[str, float] = {"p50": 0.50, "p90": 0.90, "p95": 0.95, "p99": 0.99, "p99.9": 0.999}
CI_CONFIDENCE = 0.95
BOOTSTRAP_RESAMPLES = 2000
BOOTSTRAP_SEED = 0


def describe(values_ms: Iterable[float] | np.ndarray, *, owned: bool = False) -> dict | None:
    """count, mean, std, min, max, p50..p99.9 and ``p99_ci95`` of the samples; None when empty.

    All numbers are plain Python floats/ints (JSON-ready). NaN samples are dropped. The order
    statistics come from one ``np.partition`` at the lower rank of each percentile (the next rank
    up is then the least value of the segment after it, and min/max one pass each) and a sort of
    the few hundred samples around p99 that its interval draws from: the same values a full sort
    gives, several times faster on tens of millions of samples. ``owned``: the caller hands the array
    over, so it is reordered in place instead of copied (pooled ITL: no second copy of 10^8
    samples).
    """
    values = np.asarray(values_ms if isinstance(values_ms, np.ndarray) else list(values_ms),
                        dtype=np.float64)
    if values.size and np.isnan(values).any():
        values = values[~np.isnan(values)]
    elif not owned or values is values_ms and not values.flags.writeable:
        values = values.copy()
    n = int(values.size)
    if n == 0:
        return None
    mean = values.mean()
    stats: dict = {"count": n, "mean": float(mean), "std": _std(values, mean)}
    ranks = {key: _ranks(n, q) for key, q in PERCENTILES.items()}
    draws = _ci_draws(n, 0.99, CI_CONFIDENCE)
    stats["min"], stats["max"] = float(values.min()), float(values.max())
    kth = {low for low, _, _ in ranks.values()}
    lo_i = hi_i = -1
    if draws is not None:
        lo_i, hi_i = int(draws[0].min()), int(draws[1].max())
        kth |= {lo_i, hi_i}
    kth_sorted = sorted(kth)
    values.partition(kth_sorted)
    if draws is not None:
        values[lo_i:hi_i + 1].sort()  # every index the interval reads, in order

    def order_statistic(i: int) -> float:
        if i in kth or lo_i <= i <= hi_i:
            return float(values[i])
        # i - 1 is a partition point: the i-th is the least value up to the next one.
        after = bisect.bisect_right(kth_sorted, i)
        end = kth_sorted[after] + 1 if after < len(kth_sorted) else n
        return float(values[i:end].min())

    for key, (low, high, fraction) in ranks.items():
        stats[key] = _interpolate(float(values[low]), order_statistic(high), fraction)
    stats["p99_ci95"] = None if draws is None else list(_ci_from_draws(values, draws, CI_CONFIDENCE))
    return stats


def copy_stats(stats: dict | None) -> dict | None:
    """A copy of ``describe``'s result that shares no list with it (the same samples described
    twice, e.g. ITL and chunk gaps when every chunk carries one token)."""
    if stats is None:
        return None
    ci = stats["p99_ci95"]
    return {**stats, "p99_ci95": None if ci is None else list(ci)}


_STD_BLOCK = 1 << 20


def _std(values: np.ndarray, mean: float) -> float:
    """``values.std()`` (population); above a million samples summed block by block, so that no
    temporary array of the samples' size is made (10^8 ITL samples: 800 MB saved)."""
    n = values.size
    if n <= _STD_BLOCK:
        return float(values.std())
    squares = 0.0
    for i in range(0, n, _STD_BLOCK):
        deviations = values[i:i + _STD_BLOCK] - mean
        # numpy's own pairwise sum, not np.dot: BLAS sums in an order that depends on its thread
        # count, so the same samples gave a different last digit in a Ray task (one thread).
        squares += float(np.square(deviations, out=deviations).sum())
    return math.sqrt(squares / n)


def _ranks(n: int, q: float) -> tuple[int, int, float]:
    """The two order statistics (0-based) the linear-interpolation q-quantile reads, and the weight."""
    rank = (n - 1) * q
    low = math.floor(rank)
    return low, min(low + 1, n - 1), rank - low


def _interpolate(lo_value: float, hi_value: float, fraction: float) -> float:
    if fraction == 0.0 or lo_value == hi_value:
        return lo_value
    return lo_value + fraction * (hi_value - lo_value)


def sorted_quantile(ordered: np.ndarray, q: float) -> float:
    """The q-quantile (0..1) of an ascending, non-empty array, by linear interpolation."""
    low, high, fraction = _ranks(ordered.size, q)
    return _interpolate(float(ordered[low]), float(ordered[high]), fraction)


def select_quantile(values: np.ndarray, q: float) -> float:
    """``sorted_quantile`` of a non-empty array in any order, which it reorders in place: the two
    order statistics it reads are selected (``np.partition``), not sorted for."""
    low, high, fraction = _ranks(values.size, q)
    values.partition(low)
    high_value = values[low] if high == low else values[high:].min()  # the least above the low one
    return _interpolate(float(values[low]), float(high_value), fraction)


def quantile_ci(ordered: np.ndarray, q: float, confidence: float = CI_CONFIDENCE, *,
                resamples: int = BOOTSTRAP_RESAMPLES, seed: int = BOOTSTRAP_SEED
                ) -> tuple[float, float] | None:
    """Percentile-bootstrap interval for the q-quantile of an ascending array (see the module
    docstring for the exact-in-distribution resampling); None below ``min_samples_for_ci``."""
    draws = _ci_draws(int(ordered.size), q, confidence, resamples=resamples, seed=seed)
    return None if draws is None else _ci_from_draws(ordered, draws, confidence)


def _ci_draws(n: int, q: float, confidence: float, *, resamples: int = BOOTSTRAP_RESAMPLES,
              seed: int = BOOTSTRAP_SEED) -> tuple[np.ndarray, np.ndarray, float] | None:
    """Per resample, the 0-based indices of the two order statistics its q-quantile reads, and
    the interpolation weight; None below ``min_samples_for_ci``."""
    if n < min_samples_for_ci(q, confidence):
        return None
    low, _, fraction = _ranks(n, q)  # the linear-interpolation rank, as in sorted_quantile
    k = low + 1  # 1-based order statistic below the rank
    rng = np.random.default_rng(seed)
    u_k = rng.beta(k, n - k + 1, size=resamples)
    u_next = u_k + (1.0 - u_k) * rng.beta(1, n - k, size=resamples) if k < n else u_k
    return _empirical_index(u_k, n), _empirical_index(u_next, n), fraction


def _ci_from_draws(ordered: np.ndarray, draws: tuple[np.ndarray, np.ndarray, float],
                   confidence: float) -> tuple[float, float]:
    """``ordered`` needs to be in order only at the indices ``draws`` reads."""
    i_k, i_next, fraction = draws
    x_k, x_next = ordered[i_k], ordered[i_next]
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
