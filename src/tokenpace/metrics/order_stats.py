"""``stats.describe`` of samples that come block by block and are too many to hold: the same
order statistics (percentiles, min, max and the p99 interval's draws), exactly, by a bucket select
that reads the blocks once in the common case, in memory bounded by the block size rather than the
sample count.

- Buckets (``_buckets``): each sample's bucket is the top bits of its float64 bit pattern made
  order-preserving (for doubles of one sign the bit patterns order as the values do; negatives are
  flipped so that all order as signed integers). ``_SHIFT = 44`` keeps the sign, the exponent and 8
  bits of the mantissa: 256 log-spaced buckets an octave, each value's bucket within 0.4% of it.
- The pass (``share`` in any thread, ``fold`` in block order): per block, its samples are counted
  per bucket, summed, their squared deviations from the block's mean summed, their least and
  greatest kept. The first ``WARM_SAMPLES`` samples are held; from their counts, ``_estimate``
  guesses the buckets that hold the wanted ranks (each percentile's, and the range the p99
  interval's draws read), with a margin of several standard errors of a quantile estimated from
  that many samples. From then on every block also keeps the samples of the guessed buckets (as
  distinct values with counts: durations from integer nanoseconds repeat a lot), and the held
  ones are picked alike and let go.
- After the pass (``settle``): the full counts say which buckets hold the wanted ranks exactly.
  When the guess covered them all (the common case: the first million samples are a fair sample
  of the run), the pass is done. When it missed some (a run whose latencies drift, or samples in
  sorted order), a second pass (``collect``) over the same blocks keeps the missed buckets only.
  Either way each bucket's samples are kept whole or not at all, so the ranks read are exact.
- Then each wanted rank is read from the kept values, and the percentiles and the interval are
  interpolated by ``stats``' own functions, as ``describe`` does: the same numbers as
  ``np.percentile`` (linear) over all samples, whether one pass or two ran. The mean is the blocks'
  sums added in block order, the standard deviation the blocks' squared deviations combined in
  block order (Chan et al.'s pairwise update), so the same samples in the same blocks give the same
  digits whatever thread computed them; both can differ from a one-array numpy figure in the last
  digits.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from tokenpace.metrics.stats import (CI_CONFIDENCE, PERCENTILES, _ci_draws, _ci_from_draws, _interpolate,
                                     _ranks)

_SHIFT = 44
_OFFSET = 1 << (63 - _SHIFT)  # bucket ids from 0
_BUCKETS = 1 << (64 - _SHIFT)
_FLIP = np.int64(0x7FFF_FFFF_FFFF_FFFF)
_MERGE_AT = 1 << 20  # collected entries before they are merged into distinct values again
# Samples held (8 bytes each) before the buckets to keep are guessed from their counts.
WARM_SAMPLES = 1 << 21
# The guess keeps, around each wanted quantile q, the quantiles q +- MARGIN_SE standard errors of a
# quantile estimated from the held samples, sqrt(q (1 - q) / held), and at least +- MARGIN_MIN.
MARGIN_SE = 9.0
MARGIN_MIN = 1e-4


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


def _distinct(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Sorted distinct values and how many times each occurs."""
    return np.unique(values, return_counts=True)


def _merge(parts: list[tuple[np.ndarray, np.ndarray]]) -> tuple[np.ndarray, np.ndarray]:
    """``_distinct`` of the samples of several ``_distinct`` results. Each is sorted: a stable sort
    (a merge sort, which finds the sorted runs) of them laid end to end costs little beside
    ``np.unique``'s sort of the whole."""
    if len(parts) == 1:
        return parts[0]
    values, counts = (np.concatenate(column) for column in zip(*parts))
    order = np.argsort(values, kind="stable")
    values, counts = values[order], counts[order]
    starts = np.flatnonzero(np.concatenate(([True], values[1:] != values[:-1])))
    return values[starts], np.add.reduceat(counts, starts)


def _keep(values: np.ndarray, key: np.ndarray, base: int, targets: np.ndarray
          ) -> tuple[np.ndarray, np.ndarray] | None:
    """The samples of ``values`` (buckets ``key`` from ``base``) in the buckets set in ``targets``,
    as distinct values with counts; None when there are none."""
    kept = values[targets[base:][key]]
    return _distinct(kept) if kept.size else None


def _pick(values: np.ndarray, targets: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    return _keep(values, *_buckets(values), targets) if values.size else None


class Share(NamedTuple):
    """What the pass keeps of one block (``BlockDescriber.share``)."""
    size: int
    total: float
    squares: float  # squared deviations from the block's own mean, summed
    least: float
    greatest: float
    counts: np.ndarray  # per bucket from ``base``
    base: int
    guessed: bool  # ``kept`` is already the guessed buckets' distinct values (else the raw samples)
    kept: object


def share(values: np.ndarray, guess: np.ndarray | None = None) -> Share | None:
    """What the pass keeps of a block of float64 samples (no NaN): its counts, sums and extremes;
    and its samples in the ``guess``ed buckets, or without a guess the samples themselves (the
    describer that folds it picks them once it has guessed)."""
    if not values.size:
        return None
    key, base = _buckets(values)
    size, total = int(values.size), float(values.sum())
    deviations = values - total / size
    squares = float(np.square(deviations, out=deviations).sum())
    del deviations
    kept = values if guess is None else _keep(values, key, base, guess)
    return Share(size, total, squares, float(values.min()), float(values.max()), np.bincount(key), base,
                 guess is not None, kept)


class BlockDescriber:
    """``describe`` of the samples given block by block: ``fold(share(block))`` for each block in
    order (``share`` may run in other threads); then ``settle``, and when it returns buckets, the
    same blocks in the same order again to ``collect``; ``result`` gives the dict. ``passes`` says
    how many passes it took (1 or 2)."""

    def __init__(self, warm: int | None = None, quantiles: tuple[float, ...] = ()) -> None:
        """``quantiles``: more quantiles (0..1) to read exactly after ``result`` (``quantile``),
        beside the summary's percentiles (a goodput verdict's attainment percentile)."""
        self.n = 0
        self._quantiles = (*PERCENTILES.values(), *quantiles)
        self._sum = 0.0
        self._squares = 0.0
        self._least = math.inf
        self._greatest = -math.inf
        self._hist: np.ndarray | None = None
        self._warm = WARM_SAMPLES if warm is None else warm
        self._guess: np.ndarray | None = None  # set once, then never changed
        self._raw: list[np.ndarray] = []  # the blocks' samples until the guess
        self._second: np.ndarray | None = None
        self._targets: np.ndarray | None = None  # the buckets that hold a wanted rank (``settle``)
        self._parts: list[tuple[np.ndarray, np.ndarray]] = []
        self._held = 0
        self._merge_at = _MERGE_AT
        self.passes = 1

    def share(self, values: np.ndarray) -> Share | None:
        """A block's share of the pass (``share``, with this describer's guess once it is made;
        computed in any thread, ``fold`` them in block order)."""
        return share(values, self._guess)

    def count(self, values: np.ndarray) -> None:
        """``fold(share(values))``: one block of the pass, in this thread."""
        self.fold(self.share(values))

    def fold(self, share: Share | None) -> None:
        if share is None:
            return
        n, size = self.n, share.size
        if n:  # Chan et al.: the squared deviations of two groups from their joint mean
            delta = share.total / size - self._sum / n
            self._squares += share.squares + delta * delta * (n * size / (n + size))
        else:
            self._squares = share.squares
        self.n += size
        self._sum += share.total
        self._least = min(self._least, share.least)
        self._greatest = max(self._greatest, share.greatest)
        if self._hist is None:
            self._hist = np.zeros(_BUCKETS, dtype=np.int64)
        self._hist[share.base:share.base + share.counts.size] += share.counts
        if share.guessed:
            self._add(share.kept)
        elif self._guess is not None:  # computed before the guess was made
            self._add(_pick(share.kept, self._guess))
        else:
            self._raw.append(share.kept)
            if self.n >= self._warm:
                self._set_guess(self._estimate())

    def _set_guess(self, targets: np.ndarray) -> None:
        self._guess = targets
        for values in self._raw:
            self._add(_pick(values, targets))
        self._raw = []

    def _estimate(self) -> np.ndarray:
        """The buckets that likely hold the wanted ranks, from the counts so far."""
        m = self.n
        ends = np.cumsum(self._hist)
        targets = np.zeros(_BUCKETS, dtype=bool)
        for q in self._quantiles:
            margin = max(MARGIN_SE * math.sqrt(q * (1 - q) / m), MARGIN_MIN)
            low, high = np.searchsorted(ends, [max(q - margin, 0.0) * m, min(q + margin, 1.0) * m - 1],
                                        side="right")
            targets[low:min(high, _BUCKETS - 1) + 1] = True
        return targets

    def _wanted(self) -> list[int]:
        """The 0-based ranks ``result`` reads from kept buckets (min and max are kept apart)."""
        n = self.n
        return sorted({i for q in self._quantiles for i in _ranks(n, q)[:2]})

    def settle(self) -> np.ndarray | None:
        """After the pass: None when every bucket holding a wanted rank was kept; else those it
        missed, for a second pass (``collect``) over the same blocks."""
        n = self.n
        if not n:
            return None
        self.mean = self._sum / n
        self._draws = _ci_draws(n, 0.99, CI_CONFIDENCE)
        self._ends = np.cumsum(self._hist)  # samples up to and including each bucket
        self._hist = None
        targets = np.zeros(_BUCKETS, dtype=bool)
        targets[np.searchsorted(self._ends, self._wanted(), side="right")] = True
        if self._draws is not None:
            lo, hi = np.searchsorted(self._ends, [int(self._draws[0].min()), int(self._draws[1].max())],
                                     side="right")
            targets[lo:hi + 1] = True
        self._targets = targets
        if self._guess is None:  # fewer samples than held before a guess: pick them exactly
            self._set_guess(targets)
            return None
        missed = targets & ~self._guess
        if not missed.any():
            return None
        self._second, self.passes = missed, 2
        return missed

    def collect(self, values: np.ndarray) -> None:
        """The second pass (after ``settle`` returned buckets): the same blocks, in the same order."""
        self.add_pick(self.pick(values))

    def pick(self, values: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
        """What the second pass keeps of a block (computed anywhere; ``add_pick`` them in block order)."""
        return _pick(values, self._second)

    def add_pick(self, kept: tuple[np.ndarray, np.ndarray] | None) -> None:
        self._add(kept)

    def _add(self, kept: tuple[np.ndarray, np.ndarray] | None) -> None:
        if kept is None:
            return
        self._parts.append(kept)
        self._held += kept[0].size
        if self._held > self._merge_at and len(self._parts) > 1:
            self._parts = [_merge(self._parts)]
            self._held = self._parts[0][0].size
            # Merge again once the parts since hold as many entries as the merged ones: each entry is
            # merged a few times at most, even when the distinct values alone are over the threshold.
            self._merge_at = max(_MERGE_AT, 4 * self._held)

    def _order_statistics(self, ranks: np.ndarray) -> np.ndarray:
        """The samples at 0-based ``ranks`` (each in a kept bucket) of the sorted samples."""
        if self._targets is not None:  # the guess's margins are of no use now: merge the rest only
            self._parts = [part for part in map(self._targeted, self._parts) if part[0].size]
            self._targets = None
        values, counts = self._parts[0] = _merge(self._parts)
        del self._parts[1:]
        key, base = _buckets(values)
        buckets = key + base
        starts = np.concatenate([[0], self._ends])[buckets]  # samples below each value's bucket
        cumulative = np.cumsum(counts)
        first_of_bucket = np.searchsorted(buckets, buckets, side="left")
        before = cumulative[first_of_bucket] - counts[first_of_bucket]  # kept samples before its bucket
        ends = starts + cumulative - before  # rank after the last copy of each value
        return values[np.searchsorted(ends, ranks, side="right")]

    def _targeted(self, part: tuple[np.ndarray, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
        """The entries of ``part`` in buckets that hold a wanted rank."""
        values, counts = part
        key, base = _buckets(values)
        keep = self._targets[base:][key]
        return values[keep], counts[keep]

    def result(self) -> dict | None:
        n = self.n
        if not n:
            return None
        stats: dict = {"count": n, "mean": float(self.mean), "std": math.sqrt(self._squares / n),
                       "min": self._least, "max": self._greatest}
        draws = self._draws
        ranks = {key: _ranks(n, q) for key, q in PERCENTILES.items()}
        wanted = self._wanted()
        at = dict(zip(wanted, self._order_statistics(np.array(wanted, dtype=np.int64)).tolist()))
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

    def quantile(self, q: float) -> float | None:
        """The q-quantile of the samples (linear interpolation, as ``stats.select_quantile``), for
        a q given to the constructor; after ``result``. None without samples."""
        if not self.n:
            return None
        low, high, fraction = _ranks(self.n, q)
        at = self._order_statistics(np.array([low, high], dtype=np.int64)).tolist()
        return _interpolate(float(at[0]), float(at[1]), fraction)


def describe_blocks(blocks, warm: int | None = None) -> tuple[dict | None, int]:
    """``describe`` of the samples of ``blocks()`` (a callable giving the same float64 blocks each
    time it is called: called a second time only when the guess missed), and the passes it took.
    For tests and small uses; the summary feeds a ``BlockDescriber`` from its own chunk passes."""
    describer = BlockDescriber(warm)
    for block in blocks():
        describer.count(block)
    if describer.settle() is not None:
        for block in blocks():
            describer.collect(block)
    return describer.result(), describer.passes
