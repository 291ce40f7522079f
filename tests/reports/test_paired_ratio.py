"""Paired resampling (``reports.bootstrap``): one workload's two runs (a measurement and its
simulation) compared by a quantile, with request i of both resampled together."""

from __future__ import annotations

import numpy as np
import pytest

from tokenpace.reports.bootstrap import paired_difference, paired_quantiles, paired_ratio_replicates


def _lengths(n: int, seed: int = 3) -> np.ndarray:
    """Latencies that mostly follow a request's length: a wide spread from the draw of lengths."""
    return np.random.default_rng(seed).uniform(64, 192, n) * 3.5


def _interval(replicates: np.ndarray) -> tuple[float, float]:
    lo, hi = np.quantile(replicates, [0.025, 0.975])
    return float(lo), float(hi)


def test_a_run_that_is_the_other_scaled_has_no_spread_when_paired():
    base = _lengths(40)
    replicates = paired_ratio_replicates(base, base * 1.1, 0.5)
    assert replicates.shape == (2000,)
    assert _interval(replicates) == pytest.approx((0.1, 0.1), abs=1e-12)


def test_pairs_broken_up_leave_the_draws_spread_in_the_interval():
    # The same values with the pairs shuffled: only the pairing differs from the case above.
    base = _lengths(40)
    new = np.random.default_rng(9).permutation(base * 1.1)
    lo, hi = _interval(paired_ratio_replicates(base, new, 0.5))
    assert np.median(new) / np.median(base) - 1 == pytest.approx(0.1, abs=1e-12)  # the quantiles are unchanged
    assert lo < 0.05 and hi > 0.15  # the draw's spread, which pairing took out above


def test_a_disagreement_on_some_requests_shows_in_the_interval():
    # The simulation is right on every other request and 60% slow on the rest: the median moves by
    # an amount that depends on which requests a resample holds.
    base = _lengths(48)
    new = base.copy()
    new[::2] *= 1.6
    lo, hi = _interval(paired_ratio_replicates(base, new, 0.5))
    assert 0.0 < lo <= np.median(new) / np.median(base) - 1 <= hi and hi > lo + 0.05
    verdict = paired_difference(base, new, 0.5)
    assert verdict.verdict == "beyond noise" and verdict.ci95[0] > 0.0
    # Slow on one request in four, some resamples keep the median where it was: not beyond noise.
    new = base.copy()
    new[::4] *= 1.6
    assert paired_difference(base, new, 0.5).verdict == "within noise"


def test_the_same_run_twice_is_within_noise():
    base = _lengths(48)
    verdict = paired_difference(base, base.copy(), 0.5)
    assert verdict.verdict == "within noise" and verdict.ci95 == (0.0, 0.0)


def test_nan_pairs_are_left_out_and_too_few_pairs_give_no_verdict():
    base, new = _lengths(10), _lengths(10, seed=4)
    new[[1, 4, 7, 8]] = np.nan  # e.g. a one-token output has no TPOT
    b, n = paired_quantiles(base, new, 0.5, resamples=50)
    keep = ~np.isnan(new)
    assert b.min() >= base[keep].min() and b.max() <= base[keep].max()  # only the 6 kept pairs drawn
    assert paired_difference(base, new, 0.5).ci95 is not None  # 6 pairs: the least that can cover a median
    new[0] = np.nan
    assert paired_difference(base, new, 0.5).verdict == "too few samples"


def test_replicates_are_fixed_by_the_seed_and_cover_long_runs_in_blocks():
    base = _lengths(300_000)
    new = base * np.random.default_rng(5).uniform(0.9, 1.3, base.size)
    a = paired_ratio_replicates(base, new, 0.5, resamples=40)
    b = paired_ratio_replicates(base, new, 0.5, resamples=40)
    assert np.array_equal(a, b)
    assert not np.array_equal(a, paired_ratio_replicates(base, new, 0.5, resamples=40, seed=1))
    assert a.shape == (40,) and np.all(np.isfinite(a))
    # 300,000 pairs: every resample's median ratio sits near the whole run's.
    assert np.abs(a - (np.median(new) / np.median(base) - 1)).max() < 0.01


def test_no_pair_with_both_values_is_refused():
    with pytest.raises(ValueError, match="no pair"):
        paired_quantiles(np.array([np.nan]), np.array([1.0]), 0.5)
