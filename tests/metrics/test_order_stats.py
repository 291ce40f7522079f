"""The bucket select (``order_stats``) that describes a large run's pooled samples block by block:
its order statistics against numpy's over all the samples at once, whether its guess of the buckets
to keep held (one pass) or missed (a second pass)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tokenpace.metrics.order_stats import describe_blocks
from tokenpace.metrics.stats import PERCENTILES, describe

_RNG = np.random.default_rng(17)
SAMPLES = {
    "lognormal latencies": _RNG.lognormal(np.log(20), 0.4, 200_003),
    "ties (five values)": _RNG.integers(0, 5, 100_000).astype(np.float64),
    "zeros": np.zeros(1_000),
    "one value": np.array([7.25]),
    "two values": np.array([3.0, 1.0]),
    "300 orders of magnitude": 10.0 ** _RNG.uniform(-150, 150, 50_000),
    "negative and positive": _RNG.normal(0, 1e3, 10_001),
    "zeros, tiny and huge": np.concatenate([np.zeros(500), 10.0 ** _RNG.uniform(-20, 20, 5_000)]),
    "integer nanoseconds in ms": _RNG.integers(15_000_000, 25_000_000, 300_000) / 1e6,
}


def _blocks(values: np.ndarray, size: int) -> list[np.ndarray]:
    return [values[i:i + size] for i in range(0, values.size, size)]


def _assert_same_figures(got: dict, values: np.ndarray) -> None:
    """The order statistics and the p99 interval equal ``describe``'s over all the samples."""
    want = describe(values)
    for key in ("count", "min", "max", *PERCENTILES, "p99_ci95"):
        assert got[key] == want[key], key


@pytest.mark.parametrize("name", list(SAMPLES))
@pytest.mark.parametrize("block", [1, 7, 4_096, 10**6])
def test_order_statistics_equal_numpy_over_all_samples(name, block):
    values = SAMPLES[name]
    if block == 1:
        values = values[:2_000]  # one sample a block: keep it quick
    got, _ = describe_blocks(lambda: iter(_blocks(values, block)))
    held = describe(values)  # every sample in one array, partitioned
    assert got["count"] == values.size
    assert got["min"] == values.min() and got["max"] == values.max()
    for key, q in PERCENTILES.items():
        assert got[key] == held[key], key  # the same order statistics, interpolated alike
        # numpy interpolates from the upper value above a fraction of 0.5: the last digit may differ
        assert got[key] == pytest.approx(np.percentile(values, q * 100), rel=1e-12, abs=1e-300), key
    assert got["mean"] == pytest.approx(values.mean(), rel=1e-12, abs=1e-300)
    # numpy's own std of equal values can be an ulp of their size, not 0 (two passes over a mean
    # that is not exactly representable): the tolerance is absolute at that scale
    assert got["std"] == pytest.approx(values.std(), rel=1e-9, abs=1e-12 * float(np.abs(values).max()) + 1e-300)


@pytest.mark.parametrize("name", [n for n, v in SAMPLES.items() if v.size >= 368])
def test_the_p99_interval_equals_the_one_over_all_samples(name):
    values = SAMPLES[name]
    got, _ = describe_blocks(lambda: iter(_blocks(values, 65_536)))
    assert got["p99_ci95"] == describe(values)["p99_ci95"]


def test_no_samples_give_none():
    assert describe_blocks(lambda: iter([]))[0] is None
    assert describe_blocks(lambda: iter([np.empty(0), np.empty(0)]))[0] is None


@settings(max_examples=200, deadline=None)
@given(values=st.lists(st.one_of(st.integers(0, 30).map(float),
                                 st.floats(0, 1e12, allow_nan=False, allow_infinity=False)),
                       min_size=1, max_size=500),
       block=st.integers(1, 64), warm=st.sampled_from([0, 1, 50, 10**9]),
       order=st.sampled_from(["given", "ascending", "descending"]))
def test_random_samples_in_random_blocks(values, block, warm, order):
    # warm: samples counted before the buckets to keep are guessed (0 and 1: from the first block
    # alone, which often misses and takes the second pass; 10**9: never, every sample held).
    values = np.array(values, dtype=np.float64)
    if order != "given":
        values = np.sort(values)[::1 if order == "ascending" else -1].copy()
    got, passes = describe_blocks(lambda: iter(_blocks(values, block)), warm=warm)
    _assert_same_figures(got, values)
    assert passes in (1, 2)
    # numpy's own std of equal values can be an ulp of their size, not 0 (two passes over a mean
    # that is not exactly representable): the tolerance is absolute at that scale
    assert got["std"] == pytest.approx(values.std(), rel=1e-9, abs=1e-12 * float(np.abs(values).max()) + 1e-300)


_SHUFFLED = _RNG.lognormal(np.log(20), 0.3, 400_000)


@pytest.mark.parametrize("order", ["ascending", "descending"])
def test_sorted_samples_miss_the_guess_and_take_a_second_pass_with_the_same_figures(order):
    # The first 50,000 samples of sorted input are the least (or greatest): the buckets guessed
    # from them hold none of the wanted ranks, and the second pass keeps the missed ones.
    values = np.sort(_SHUFFLED)[::1 if order == "ascending" else -1].copy()
    got, passes = describe_blocks(lambda: iter(_blocks(values, 10_000)), warm=50_000)
    assert passes == 2
    _assert_same_figures(got, values)


def test_samples_in_no_particular_order_are_described_in_one_pass():
    got, passes = describe_blocks(lambda: iter(_blocks(_SHUFFLED, 10_000)), warm=50_000)
    assert passes == 1
    _assert_same_figures(got, _SHUFFLED)


def test_a_drift_late_in_the_run_takes_a_second_pass_with_the_same_figures():
    # Latencies that double in the last quarter (a queue building up): the guess from the first
    # samples misses the upper percentiles.
    values = _SHUFFLED.copy()
    values[300_000:] *= 2
    got, passes = describe_blocks(lambda: iter(_blocks(values, 10_000)), warm=50_000)
    assert passes == 2
    _assert_same_figures(got, values)


def test_the_same_blocks_give_the_same_digits_whatever_the_guess():
    # One pass or two, or every sample held (no guess), the kept buckets differ but every figure,
    # the mean and the standard deviation included, is the same.
    for values in (_SHUFFLED, np.sort(_SHUFFLED)):
        blocks = _blocks(values, 10_000)
        (guessed, passes), (held, _) = (describe_blocks(lambda: iter(blocks), warm=warm)
                                        for warm in (50_000, 10**9))
        assert guessed == held
    assert passes == 2  # the sorted samples missed
