"""``ordered_map``: a function over blocks in a few threads, results in block order.

The summary's passes over the chunk blocks are numpy work on arrays of a few hundred thousand
elements, which releases the GIL; two threads keep both cores of a small machine busy. Results
come back in the order of the blocks, and every caller folds them in that order, so the numbers
are the same whatever the thread count (a Ray task, with one thread, writes the same files as a
serial run). At most ``2 * workers`` blocks are in flight: memory stays bounded by the block size.
"""

from __future__ import annotations

import os
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

T = TypeVar("T")
R = TypeVar("R")


def default_workers() -> int:
    """The cores this process may run on, at most 2 (what the summary's passes gain from)."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        cores = os.cpu_count() or 1
    return max(1, min(2, cores))


def ordered_map(fn: Callable[[T], R], items: Iterable[T], workers: int | None = None) -> Iterator[R]:
    """``map(fn, items)``, ``workers`` calls at a time (default ``default_workers()``)."""
    workers = default_workers() if workers is None else workers
    if workers <= 1:
        yield from map(fn, items)
        return
    with ThreadPoolExecutor(workers, thread_name_prefix="tokenpace-blocks") as pool:
        pending: deque = deque()
        for item in items:
            pending.append(pool.submit(fn, item))
            if len(pending) >= 2 * workers:
                yield pending.popleft().result()
        while pending:
            yield pending.popleft().result()
