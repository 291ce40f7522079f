"""What the measured client did that the simulator's load must copy: its turnaround in a closed loop.

A closed-loop client sends its next request a little after its previous one ended: it reads the
end of the stream, records it, and sends (a millisecond or two). An engine does not wait for it:
its next step begins as the last one ends, so the new request misses that step and waits for the
one after, which adds a step to its TTFT. The simulator's clients react at the very instant a
request ends unless told the turnaround, so calibration measures it: for each request sent after
another ended, the time since the latest end before its send (its slot's predecessor, the one
that freed it), the median over the run.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from tokenpace.record import RequestRecord


def closed_loop_turnaround(records: Iterable[RequestRecord], concurrency: int) -> tuple[float, int]:
    """Median seconds from a request's last token to the next send, and how many sends it is
    taken over (0: none followed an end; then 0 s). Only meaningful for a closed loop."""
    recs = [r for r in records if r.sent_ns is not None and not r.retried]
    ends = np.sort(np.array([r.last_token_ns or r.done_ns for r in recs if (r.last_token_ns or r.done_ns)],
                            dtype=np.int64))
    sends = np.sort(np.array([r.sent_ns for r in recs], dtype=np.int64))[concurrency:]  # the first wave
    if not len(ends) or not len(sends):
        return 0.0, 0
    i = np.searchsorted(ends, sends, side="right") - 1
    gaps = (sends[i >= 0] - ends[i[i >= 0]]) / 1e9
    if not len(gaps):
        return 0.0, 0
    return float(np.median(gaps)), int(len(gaps))
