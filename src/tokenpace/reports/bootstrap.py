"""Is a difference in percentiles between two runs beyond run-to-run noise?

Percentile bootstrap of the difference: each run is resampled with replacement on its own
(B = 2,000 resamples, fixed seeds), the q-quantile of each resample is taken, and the 2.5% and
97.5% points of (new − base) over the resamples form a 95% interval. The difference is beyond
noise when that interval excludes 0.

Resamples are drawn exactly in distribution without materializing them, as in
``tokenpace.metrics.stats``: a resample's k-th order statistic is x_(ceil(n U)) with
U ~ Beta(k, n − k + 1), so a p99 over a million ITL samples costs the same as over a hundred.
Below ``min_samples_for_ci(q)`` samples in either run (368 for p99) no interval from the data can
reach 95% coverage, and we say so instead of guessing.

Two runs of one workload draw (a measured run and its simulation, where request i has the same
lengths in both) compare more sharply with the requests resampled in pairs (``paired_quantiles``,
``paired_difference``, ``paired_ratio_replicates``): request i of both runs is drawn together, so
what the draw of lengths puts into both quantiles cancels and the interval holds only how the two
runs disagree.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from tokenpace.metrics.stats import BOOTSTRAP_RESAMPLES, CI_CONFIDENCE, min_samples_for_ci

BASE_SEED, NEW_SEED = 0, 1


@dataclass(frozen=True)
class NoiseVerdict:
    verdict: str  # "beyond noise", "within noise" or "too few samples"
    ci95: tuple[float, float] | None  # interval of new − base

    @property
    def beyond(self) -> bool:
        return self.verdict == "beyond noise"


def quantile_replicates(samples: np.ndarray, q: float, resamples: int = BOOTSTRAP_RESAMPLES,
                        seed: int = BASE_SEED) -> np.ndarray:
    """The q-quantile (linear interpolation) of ``resamples`` bootstrap resamples of ``samples``."""
    ordered = np.sort(samples)
    n = ordered.size
    rank = (n - 1) * q
    low = math.floor(rank)
    fraction = rank - low
    k = low + 1  # 1-based order statistic just below the rank
    rng = np.random.default_rng(seed)
    u_k = rng.beta(k, n - k + 1, size=resamples)
    u_next = u_k + (1.0 - u_k) * rng.beta(1, n - k, size=resamples) if k < n else u_k
    x_k = ordered[_index(u_k, n)]
    return x_k + fraction * (ordered[_index(u_next, n)] - x_k)


def _index(u: np.ndarray, n: int) -> np.ndarray:
    return np.clip(np.ceil(u * n).astype(np.int64) - 1, 0, n - 1)


def percentile_difference(base: np.ndarray, new: np.ndarray, q: float,
                          confidence: float = CI_CONFIDENCE) -> NoiseVerdict:
    need = min_samples_for_ci(q, confidence)
    if base.size < need or new.size < need:
        return NoiseVerdict("too few samples", None)
    diff = quantile_replicates(new, q, seed=NEW_SEED) - quantile_replicates(base, q, seed=BASE_SEED)
    tail = (1.0 - confidence) / 2.0
    lo, hi = (float(v) for v in np.quantile(diff, [tail, 1.0 - tail]))
    return NoiseVerdict("beyond noise" if lo > 0 or hi < 0 else "within noise", (lo, hi))


# Resampled values held at once (resamples x pairs): bounds the memory of long runs.
_BLOCK_VALUES = 4_000_000


def paired_quantiles(base: np.ndarray, new: np.ndarray, q: float, resamples: int = BOOTSTRAP_RESAMPLES,
                     seed: int = BASE_SEED) -> tuple[np.ndarray, np.ndarray]:
    """Both runs' q-quantiles (linear interpolation) over ``resamples`` resamples of the pairs
    (base[i], new[i]) drawn with replacement, each pair whole. Pairs with a NaN on either side are
    left out first. Fixed seed: the same arrays give the same replicates."""
    keep = ~(np.isnan(base) | np.isnan(new))
    base, new = base[keep], new[keep]
    n = base.size
    if n == 0:
        raise ValueError("no pair with both values")
    rng = np.random.default_rng(seed)
    out_base, out_new = np.empty(resamples), np.empty(resamples)
    step = max(1, _BLOCK_VALUES // n)
    for start in range(0, resamples, step):
        rows = rng.integers(0, n, size=(min(step, resamples - start), n))
        stop = start + rows.shape[0]
        out_base[start:stop] = np.quantile(base[rows], q, axis=1)
        out_new[start:stop] = np.quantile(new[rows], q, axis=1)
    return out_base, out_new


def paired_ratio_replicates(base: np.ndarray, new: np.ndarray, q: float, resamples: int = BOOTSTRAP_RESAMPLES,
                            seed: int = BASE_SEED) -> np.ndarray:
    """new's q-quantile over base's, minus 1, for each resample of ``paired_quantiles``."""
    b, n = paired_quantiles(base, new, q, resamples, seed)
    return n / b - 1


def paired_difference(base: np.ndarray, new: np.ndarray, q: float,
                      confidence: float = CI_CONFIDENCE) -> NoiseVerdict:
    """``percentile_difference`` for paired samples (``base[i]`` and ``new[i]`` the same request),
    the pairs resampled whole (``paired_quantiles``)."""
    if np.count_nonzero(~(np.isnan(base) | np.isnan(new))) < min_samples_for_ci(q, confidence):
        return NoiseVerdict("too few samples", None)
    b, n = paired_quantiles(base, new, q)
    tail = (1.0 - confidence) / 2.0
    lo, hi = (float(v) for v in np.quantile(n - b, [tail, 1.0 - tail]))
    return NoiseVerdict("beyond noise" if lo > 0 or hi < 0 else "within noise", (lo, hi))

