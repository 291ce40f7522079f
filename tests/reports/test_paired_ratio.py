"""``paired_ratio``: one workload's two runs (a measurement and its simulation) compared by the ratio
of a quantile, with request i of both resampled together."""

from __future__ import annotations

import numpy as np
import pytest

from tokenpace.reports.bootstrap import paired_ratio, paired_ratio_replicates


def _lengths(n: int, seed: int = 3) -> np.ndarray:
    """Latencies that mostly follow a request's length: a wide spread from the draw of lengths."""
    return np.random.default_rng(seed).uniform(64, 192, n) * 3.5


def test_a_run_that_is_the_other_scaled_has_no_spread_when_paired():
    base = _lengths(40)
    got = paired_ratio(base, base * 1.1, 0.5)
    assert got.ratio == pytest.approx(0.1, abs=1e-12)
    assert got.ci95 == pytest.approx((0.1, 0.1), abs=1e-12)
    assert got.pairs == 40


def test_pairs_broken_up_leave_the_draws_spread_in_the_interval():
    # The same values with the pairs shuffled: only the pairing differs from the case above.
    base = _lengths(40)
    new = np.random.default_rng(9).permutation(base * 1.1)
    got = paired_ratio(base, new, 0.5)
    assert got.ratio == pytest.approx(0.1, abs=1e-12)  # the quantiles themselves are unchanged
    lo, hi = got.ci95
    assert lo < 0.05 and hi > 0.15  # the draw's spread, which pairing took out above


def test_a_disagreement_on_some_requests_shows_in_the_interval():
    # The simulation is right on three requests in four and 60% slow on the rest: the median moves
    # by some amount that depends on which requests a resample holds.
    base = _lengths(48)
    new = base.copy()
    new[::4] *= 1.6
    got = paired_ratio(base, new, 0.5)
    lo, hi = got.ci95
    assert lo <= got.ratio <= hi
    assert lo >= 0.0 and hi > lo


def test_nan_pairs_are_left_out_and_too_few_pairs_give_no_interval():
    base, new = _lengths(10), _lengths(10, seed=4)
    new[[1, 4, 7, 8]] = np.nan  # e.g. a one-token output has no TPOT
    got = paired_ratio(base, new, 0.5)
    keep = ~np.isnan(new)
    assert got.pairs == 6
    assert got.ratio == pytest.approx(np.median(new[keep]) / np.median(base[keep]) - 1)
    assert got.ci95 is not None  # 6 pairs: the least that can cover a median at 95%
    new[0] = np.nan
    assert paired_ratio(base, new, 0.5).ci95 is None


def test_replicates_are_fixed_by_the_seed_and_cover_long_runs_in_blocks():
    base = _lengths(300_000)
    new = base * np.random.default_rng(5).uniform(0.9, 1.3, base.size)
    a = paired_ratio_replicates(base, new, 0.5, resamples=40)
    b = paired_ratio_replicates(base, new, 0.5, resamples=40)
    assert np.array_equal(a, b)
    assert a.shape == (40,) and np.all(np.isfinite(a))
    # 300,000 pairs: every resample's median ratio sits near the whole run's.
    assert np.abs(a - (np.median(new) / np.median(base) - 1)).max() < 0.01


def test_unpaired_shapes_are_refused():
    with pytest.raises(ValueError, match="alike in shape"):
        paired_ratio(np.ones(5), np.ones(6), 0.5)
    with pytest.raises(ValueError, match="no pair"):
        paired_ratio_replicates(np.array([np.nan]), np.array([1.0]), 0.5)
