"""How one run's chunks, sorted by time, fall into the engine's steps: bursts that hold two chunks of
one request split where they are a step apart, and the bursts that stay ambiguous."""

from __future__ import annotations

import numpy as np

# A burst that holds two chunks of one request is split at a gap wider than this many times the
# 90th percentile of the gaps between one step's chunks (``split_repeats``).
SPLIT_SPREAD_FACTOR = 4.0


def split_repeats(t: np.ndarray, sid: np.ndarray, burst: np.ndarray) -> np.ndarray:
    """``burst`` with every burst that holds two chunks of one request split at its widest gap, again
    while one does and that gap is wider than ``SPLIT_SPREAD_FACTOR`` times the 90th percentile of
    the gaps inside bursts that hold no such pair (how far apart one step's chunks reach the client).

    The gap threshold comes from the usual gap between one request's chunks, so steps much shorter
    than the usual one merge: a request decoding alone at the end of a c=4 run (19 ms a step on
    llama.cpp where four sequences take 64 ms) falls into one burst. Such a burst holds one
    request's chunks one step apart, and is split into its steps. Two chunks of one request that
    reached the client together (it read two steps at once) are closer than a step's own spread,
    and stay one ambiguous burst."""
    first = np.flatnonzero(np.diff(np.concatenate([[-1], burst])))
    bounds = list(zip(first.tolist(), np.append(first[1:], len(t)).tolist()))
    repeats = [len(set(sid[lo:hi].tolist())) < hi - lo for lo, hi in bounds]
    if not any(repeats):
        return burst
    inside = [np.diff(t[lo:hi]) for (lo, hi), r in zip(bounds, repeats) if not r and hi - lo > 1]
    inside_gaps = np.concatenate(inside) if inside else np.zeros(0, dtype=np.int64)
    floor = SPLIT_SPREAD_FACTOR * float(np.percentile(inside_gaps, 90)) if len(inside_gaps) else 0.0
    cuts: list[int] = []  # chunk indices that begin a new burst
    todo = [b for b, r in zip(bounds, repeats) if r]  # a stack, not recursion: a lone tail can run 1000s of steps
    while todo:
        lo, hi = todo.pop()
        if hi - lo < 2 or len(set(sid[lo:hi].tolist())) == hi - lo:
            continue
        gaps = np.diff(t[lo:hi])
        k = int(np.argmax(gaps))
        if gaps[k] <= floor:
            continue
        cuts.append(lo + k + 1)
        todo += [(lo, lo + k + 1), (lo + k + 1, hi)]
    if not cuts:
        return burst
    starts = np.zeros(len(t), dtype=np.int64)
    starts[first] = 1
    starts[cuts] = 1
    starts[0] = 0
    return np.cumsum(starts)


def ambiguous_bursts(chunk_burst: list[list[int]]) -> dict[int, str]:
    """Bursts holding two chunks of one request (the client read two steps at once), or missing a
    request that was decoding across them (its chunks skip the burst); burst → reason."""
    bad: dict[int, str] = {}
    for bursts in chunk_burst:
        for prev, cur in zip(bursts, bursts[1:]):
            if cur == prev:
                bad.setdefault(prev, "two chunks of one request")
            for missed in range(prev + 1, cur):
                bad.setdefault(missed, "a decoding request missing")
    return bad
