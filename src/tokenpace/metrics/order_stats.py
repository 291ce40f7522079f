"""``stats.describe`` of samples that come block by block and are too many to hold: the same
order statistics (percentiles, min, max and the p99 interval's draws), exactly, by a two-pass
bucket select, in memory bounded by the block size rather than the sample count.

- Pass 1 (``count``): per block, each sample's bucket is the top bits of its float64 bit pattern
  made order-preserving (``_buckets``: for doubles of one sign the bit patterns order as the
  values do; negatives are flipped so that all order as signed integers). ``_SHIFT = 44`` keeps
  the sign, the exponent and 8 bits of the mantissa: 256 log-spaced buckets an octave, each
  value's bucket within 0.4% of it. Pass 1 counts samples per bucket and sums them (the mean).
- Between the passes (``plan``): the cumulative counts say which buckets hold the wanted ranks
  (``stats._ranks`` of each percentile, ``stats._ci_draws``' index range, 0 and n - 1).
- Pass 2 (``collect``): the samples of those few buckets only, kept as distinct values with their
  counts (durations from integer nanoseconds repeat a lot), and the squared deviations from the
  mean summed (the standard deviation).
- Then each wanted rank is read from the collected values, and the percentiles and the interval are
  interpolated by ``stats``' own functions, as ``describe`` does: the same numbers as
  ``np.percentile`` (linear) over all samples. The mean and the standard deviation are sums taken
  block by block, in block order (so the same samples in the same blocks give the same digits,
  whatever thread or process computes them); they can differ from a one-array sum in the last
  digits.
"""

from __future__ import annotations

import math

import numpy as np

from tokenpace.metrics.stats import (CI_CONFIDENCE, PERCENTILES, _ci_draws, _ci_from_draws, _interpolate,
                                     _ranks)

_SHIFT = 44
_OFFSET = 1 << (63 - _SHIFT)  # bucket ids from 0
_BUCKETS = 1 << (64 - _SHIFT)
_FLIP = np.int64(0x7FFF_FFFF_FFFF_FFFF)
_MERGE_AT = 1 << 20  # collected entries before they are merged into distinct values again


def _buckets(values: np.ndarray) -> tuple[np.ndarray, int]:
    """The bucket of each sample, in the samples' order, less the block's least bucket; and that
    least bucket (an id in 0 .. _BUCKETS - 1). Relative ids keep a block's counts as short as the
    range of its values."""
    bits = np.ascontiguousarray(values, dtype=np.float64).view(np.int64)
    least = int(bits.min())
    if least >= 0:  # no sign bit set (durations): the bits order as the values do
        key = bits >> _SHIFT
        base = least >> _SHIFT
    else:
        key = bits ^ ((bits >> 63) & _FLIP)  # negatives: the magnitude's bits reversed
        key >>= _SHIFT
        base = int(key.min())
    key -= base
    return key, base + _OFFSET


def _distinct(values: np.ndarray, counts: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Sorted distinct values and how many times each occurs (``counts``: of each given value)."""
    if counts is None:
        return np.unique(values, return_counts=True)
    unique, inverse = np.unique(values, return_inverse=True)
    return unique, np.bincount(inverse.reshape(-1), weights=counts, minlength=unique.size).astype(np.int64)


class BlockDescriber:
    """``describe`` of the samples given to ``count`` block by block, then, after ``plan``, the
    same blocks in the same order to ``collect``; ``result`` gives the dict."""

    def __init__(self) -> None:
        self.n = 0
        self._sum = 0.0
        self._hist: np.ndarray | None = None
        self._squares = 0.0
        self._parts: list[tuple[np.ndarray, np.ndarray]] = []
        self._held = 0

    def count(self, values: np.ndarray) -> None:
        """Pass 1: a block of float64 samples (no NaN)."""
        self.add_tally(self.tally(values))

    @staticmethod
    def tally(values: np.ndarray) -> tuple[int, float, np.ndarray, int] | None:
        """What pass 1 keeps of a block (computed anywhere, e.g. in a worker thread; ``add_tally``
        them in block order): size, sum, counts per bucket from the least bucket, that bucket."""
        if not values.size:
            return None
        key, base = _buckets(values)
        return int(values.size), float(values.sum()), np.bincount(key), base

    def add_tally(self, tally: tuple[int, float, np.ndarray, int] | None) -> None:
        if tally is None:
            return
        size, total, counts, base = tally
        self.n += size
        self._sum += total
        if self._hist is None:
            self._hist = np.zeros(_BUCKETS, dtype=np.int64)
        self._hist[base:base + counts.size] += counts

    def plan(self) -> None:
        """The buckets pass 2 keeps: those of every order statistic ``result`` reads."""
        n = self.n
        if not n:
            return
        self.mean = self._sum / n
        self._draws = _ci_draws(n, 0.99, CI_CONFIDENCE)
        wanted = {0, n - 1}
        for q in PERCENTILES.values():
            low, high, _ = _ranks(n, q)
            wanted |= {low, high}
        self._ends = np.cumsum(self._hist)  # samples up to and including each bucket
        targets = np.zeros(_BUCKETS, dtype=bool)
        targets[np.searchsorted(self._ends, sorted(wanted), side="right")] = True
        if self._draws is not None:
            lo, hi = np.searchsorted(self._ends, [int(self._draws[0].min()), int(self._draws[1].max())],
                                     side="right")
            targets[lo:hi + 1] = True
        self._targets = targets
        self._hist = None  # its cumulative counts are what the ranks need

    def collect(self, values: np.ndarray) -> None:
        """Pass 2: the same blocks as pass 1, in the same order."""
        self.add_pick(self.pick(values))

    def pick(self, values: np.ndarray) -> tuple[float, tuple[np.ndarray, np.ndarray] | None] | None:
        """What pass 2 keeps of a block (after ``plan``; computed anywhere, ``add_pick`` them in
        block order): its squared deviations summed, and its distinct values in the kept buckets
        with their counts."""
        if not values.size:
            return None
        deviations = values - self.mean
        squares = float(np.square(deviations, out=deviations).sum())
        del deviations
        key, base = _buckets(values)
        kept = values[self._targets[base:][key]]
        return squares, (_distinct(kept) if kept.size else None)

    def add_pick(self, pick: tuple[float, tuple[np.ndarray, np.ndarray] | None] | None) -> None:
        if pick is None:
            return
        squares, kept = pick
        self._squares += squares
        if kept is not None:
            self._parts.append(kept)
            self._held += kept[0].size
            if self._held > _MERGE_AT and len(self._parts) > 1:
                self._parts = [_distinct(*map(np.concatenate, zip(*self._parts)))]
                self._held = self._parts[0][0].size

    def _order_statistics(self, ranks: np.ndarray) -> np.ndarray:
        """The samples at 0-based ``ranks`` (each in a kept bucket) of the sorted samples."""
        values, counts = (_distinct(*map(np.concatenate, zip(*self._parts))) if len(self._parts) != 1
                          else self._parts[0])
        self._parts = [(values, counts)]
        key, base = _buckets(values)
        buckets = key + base
        starts = np.concatenate([[0], self._ends])[buckets]  # samples below each value's bucket
        cumulative = np.cumsum(counts)
        first_of_bucket = np.searchsorted(buckets, buckets, side="left")
        before = cumulative[first_of_bucket] - counts[first_of_bucket]  # kept samples before its bucket
        ends = starts + cumulative - before  # rank after the last copy of each value
        return values[np.searchsorted(ends, ranks, side="right")]

    def result(self) -> dict | None:
        n = self.n
        if not n:
            return None
        stats: dict = {"count": n, "mean": float(self.mean), "std": math.sqrt(self._squares / n)}
        draws = self._draws
        ranks = {key: _ranks(n, q) for key, q in PERCENTILES.items()}
        wanted = sorted({0, n - 1} | {i for low, high, _ in ranks.values() for i in (low, high)})
        at = dict(zip(wanted, self._order_statistics(np.array(wanted, dtype=np.int64)).tolist()))
        stats["min"], stats["max"] = float(at[0]), float(at[n - 1])
        for key, (low, high, fraction) in ranks.items():
            stats[key] = _interpolate(float(at[low]), float(at[high]), fraction)
        if draws is None:
            stats["p99_ci95"] = None
        else:
            lo, hi = int(draws[0].min()), int(draws[1].max())
            window = self._order_statistics(np.arange(lo, hi + 1, dtype=np.int64))
            shifted = (draws[0] - lo, draws[1] - lo, draws[2])
            stats["p99_ci95"] = list(_ci_from_draws(window, shifted, CI_CONFIDENCE))
        return stats


def describe_blocks(blocks) -> dict | None:
    """``describe`` of the samples of ``blocks()`` (a callable giving the same float64 blocks each
    time it is called), read twice. For tests and small uses; the summary feeds a ``BlockDescriber``
    from its own chunk passes."""
    describer = BlockDescriber()
    for block in blocks():
        describer.count(block)
    describer.plan()
    if describer.n:
        for block in blocks():
            describer.collect(block)
    return describer.result()
