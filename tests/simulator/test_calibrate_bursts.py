"""Bursts that hold two chunks of one request (``calibrate.bursts.split_repeats``): split into the
steps they hold where the chunks are a step apart, kept whole where the client read two at once."""

from __future__ import annotations

import numpy as np

from tokenpace.simulator.calibrate.bursts import split_repeats

MS = 1_000_000


def groups(t, sid, burst) -> list[list[int]]:
    out: dict[int, list[int]] = {}
    for b, s in zip(burst.tolist(), sid):
        out.setdefault(b, []).append(s)
    return list(out.values())


def test_a_long_lone_tail_becomes_one_burst_per_step():
    # 5,000 steps of one request, 5 ms apart, all under the gap threshold: one burst to begin with.
    t = np.arange(5000, dtype=np.int64) * 5 * MS
    burst = split_repeats(t, np.zeros(5000, dtype=int), np.zeros(5000, dtype=np.int64))
    assert burst.tolist() == list(range(5000))


def test_two_sequences_decoding_together_split_by_step_not_by_chunk():
    # Steps of two sequences 0 and 1, 0.4 ms apart within a step, 19 ms between steps; before them a
    # step of three sequences tells how far apart one step's chunks come (0.4 ms).
    t = [0, 400_000, 800_000] + [s * 19 * MS + k for s in range(1, 6) for k in (0, 400_000)]
    sid = [2, 0, 1] + [0, 1] * 5
    burst = split_repeats(np.array(t), np.array(sid), np.array([0, 0, 0] + [1] * 10))
    assert groups(t, sid, burst) == [[2, 0, 1]] + [[0, 1]] * 5


def test_two_chunks_read_at_once_stay_one_ambiguous_burst():
    # The client read two steps of request 0 together (1 µs apart) inside a step of three whose
    # chunks come 0.4 ms apart: no gap is wider than a step's own spread, so nothing is split.
    t = [0, 400_000, 800_000, 10 * MS, 10 * MS + 400_000, 10 * MS + 401_000, 10 * MS + 800_000]
    sid = [0, 1, 2, 1, 0, 0, 2]
    burst = np.array([0, 0, 0, 1, 1, 1, 1])
    assert split_repeats(np.array(t), np.array(sid), burst).tolist() == burst.tolist()
