import json
import math

import numpy as np
import pytest

from tokenpace.metrics import describe, quantile_ci
from hypothesis import given, settings
from hypothesis import strategies as st

from tokenpace.metrics.stats import PERCENTILES, min_samples_for_ci

TRUE_P99_EXP1 = math.log(100)  # p99 of Exponential(1)


def test_no_samples_gives_none():
    assert describe([]) is None
    assert describe(np.array([])) is None
    assert describe([float("nan")]) is None


def test_known_array_one_to_hundred():
    stats = describe(range(1, 101))
    assert stats["count"] == 100
    assert stats["mean"] == 50.5
    assert stats["std"] == pytest.approx(28.866070047722118)  # population: sqrt((n^2 - 1) / 12)
    assert (stats["min"], stats["max"]) == (1.0, 100.0)
    # Linear interpolation at rank (n - 1) q.
    assert stats["p50"] == pytest.approx(50.5)
    assert stats["p90"] == pytest.approx(90.1)
    assert stats["p95"] == pytest.approx(95.05)
    assert stats["p99"] == pytest.approx(99.01)
    assert stats["p99.9"] == pytest.approx(99.901)
    assert stats["p99_ci95"] is None  # too few samples for a 95% interval on p99


def test_one_sample_has_zero_spread():
    stats = describe([7.5])
    assert stats["std"] == 0.0
    assert {stats[k] for k in ("min", "max", "p50", "p99", "p99.9")} == {7.5}


def test_percentiles_match_numpy_linear():
    values = np.random.default_rng(3).lognormal(3, 1, 5001)
    stats = describe(values)
    expected = np.percentile(values, [50, 90, 95, 99, 99.9])
    got = [stats[k] for k in ("p50", "p90", "p95", "p99", "p99.9")]
    assert got == pytest.approx(list(expected), rel=1e-12)


def test_nan_samples_are_dropped():
    assert describe([1.0, float("nan"), 3.0])["count"] == 2


def test_json_ready_plain_types():
    stats = describe(np.random.default_rng(0).exponential(10, 1000))
    assert all(type(v) in (int, float, list) for v in stats.values())
    assert all(type(v) is float for v in stats["p99_ci95"])
    json.dumps(stats, allow_nan=False)


def test_deterministic_and_independent_of_order():
    values = np.random.default_rng(1).exponential(10, 20_000)
    shuffled = np.random.default_rng(2).permutation(values)
    assert describe(values) == describe(values.copy()) == describe(shuffled)
    assert json.dumps(describe(values)) == json.dumps(describe(list(values)))


def test_ci_needs_368_samples_for_p99():
    assert min_samples_for_ci(0.99) == 368
    assert describe(np.arange(367.0))["p99_ci95"] is None
    assert describe(np.arange(368.0))["p99_ci95"] is not None


def test_ci_matches_a_brute_force_bootstrap():
    # Independent check: resample with replacement for real, take each resample's p99 with numpy,
    # and compare the 2.5%/97.5% points with the exact-in-distribution shortcut.
    values = np.sort(np.random.default_rng(3).lognormal(3.0, 0.8, 1000))
    rng = np.random.default_rng(4)
    reps = np.percentile(values[rng.integers(0, values.size, (4000, values.size))], 99, axis=1)
    brute = np.quantile(reps, [0.025, 0.975])
    low, high = quantile_ci(values, 0.99)
    width = brute[1] - brute[0]
    assert abs(low - brute[0]) < 0.1 * width
    assert abs(high - brute[1]) < 0.1 * width


def test_ci_contains_true_p99_on_large_sample():
    values = np.random.default_rng(7).exponential(1.0, 200_000)
    low, high = describe(values)["p99_ci95"]
    assert low <= TRUE_P99_EXP1 <= high
    assert high - low < 0.1  # and is tight: ~2% of the p99


def test_ci_covers_true_p99_about_95_percent_of_runs():
    rng = np.random.default_rng(11)
    trials = 400
    covered = 0
    for _ in range(trials):
        interval = quantile_ci(np.sort(rng.exponential(1.0, 3000)), 0.99, seed=int(rng.integers(1 << 30)))
        covered += interval[0] <= TRUE_P99_EXP1 <= interval[1]
    # A percentile bootstrap of a tail quantile covers a little under its nominal 95%.
    assert 0.88 <= covered / trials <= 0.99


def test_million_samples_interval_brackets_p99():
    values = np.random.default_rng(5).exponential(10, 1_000_000)
    stats = describe(values)
    assert stats["p99_ci95"][0] <= stats["p99"] <= stats["p99_ci95"][1]


def test_std_of_millions_of_samples_is_the_population_std():
    # Above a million samples the deviations are summed block by block (no temporary of the
    # samples' size); the known answer: 0..n-1 has population variance (n^2 - 1) / 12.
    n = 3 * 2**20 + 17
    stats = describe(np.arange(n, dtype=np.float64))
    assert stats["std"] == pytest.approx(math.sqrt((n * n - 1) / 12), rel=1e-12)
    assert stats["mean"] == (n - 1) / 2


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(-50, 50), min_size=1, max_size=1500))
def test_order_statistics_equal_those_of_a_full_sort(samples):
    # Ties and every size, around the 368 samples where the interval starts: each percentile
    # against numpy's linear quantile of the sorted samples, the interval against the sorted path.
    values = np.array(samples, dtype=np.float64) / 7
    stats = describe(values)
    ordered = np.sort(values)
    assert (stats["min"], stats["max"]) == (ordered[0], ordered[-1])
    for key, q in PERCENTILES.items():
        assert stats[key] == pytest.approx(float(np.quantile(ordered, q)), rel=1e-12, abs=1e-12), key
    ci = quantile_ci(ordered, 0.99)
    assert stats["p99_ci95"] == (None if ci is None else list(ci))


@settings(max_examples=200, deadline=None)
@given(values=st.lists(st.one_of(st.integers(0, 5).map(float), st.floats(-1e9, 1e9, allow_nan=False)),
                       min_size=1, max_size=300),
       q=st.one_of(st.sampled_from([0.0, 0.5, 0.9, 0.999, 1.0]), st.floats(0, 1)))
def test_a_selected_quantile_is_numpys_linear_percentile(values, q):
    from tokenpace.metrics.stats import select_quantile, sorted_quantile
    values = np.array(values)
    got = select_quantile(values.copy(), q)
    assert got == sorted_quantile(np.sort(values), q)  # the same digits as from the sorted array
    assert got == pytest.approx(np.quantile(values, q), rel=1e-12, abs=1e-6)  # numpy's linear method
