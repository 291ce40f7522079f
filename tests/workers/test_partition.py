"""The partition of one global plan over workers: every request and session has exactly one owner."""

from __future__ import annotations

import pytest

from tokenpace.config import BenchConfig
from tokenpace.errors import UsageError
from tokenpace.runner.partition import Partition, auto_workers, shares


@pytest.mark.parametrize(("total", "n", "expected"), [(5, 2, [3, 2]), (8, 3, [3, 3, 2]), (4, 4, [1, 1, 1, 1])])
def test_shares_split_as_evenly_as_possible(total, n, expected):
    assert shares(total, n) == expected


@pytest.mark.parametrize(("n", "slots"), [(1, None), (2, None), (3, None), (2, 5), (3, 8), (4, 4)])
def test_every_request_has_exactly_one_owner(n, slots):
    for index in range(200):
        owners = [k for k in range(n) if Partition(k, n, slots).owns(index)]
        assert len(owners) == 1, (index, owners)


def test_closed_loop_requests_follow_the_split_streams():
    # C=5 over 2 workers: 3 streams and 2, so 3 of every 5 requests go to worker 0
    owned = [sum(Partition(k, 2, 5).owns(i) for i in range(100)) for k in range(2)]
    assert owned == [60, 40]


def test_auto_workers_is_one_below_the_load_that_needs_more_and_leaves_a_cpu():
    assert auto_workers(BenchConfig(concurrency=64), cpus=8) == 1
    assert auto_workers(BenchConfig(concurrency=512), cpus=8) == 4
    assert auto_workers(BenchConfig(concurrency=4096), cpus=8) == 7
    assert auto_workers(BenchConfig(concurrency=512), cpus=2) == 1
    assert auto_workers(BenchConfig(rate=100.0), cpus=8) == 1  # an open loop without a cap


def test_more_workers_than_streams_is_refused():
    with pytest.raises(UsageError, match="more than --concurrency"):
        BenchConfig(concurrency=2, workers=3).validate()
