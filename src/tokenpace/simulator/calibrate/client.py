"""What the measured client did that the simulator's load must copy: its turnaround in a closed loop.

A closed-loop client sends its next request a little after its previous one ended: it reads the
end of the stream, records it, and sends (a millisecond or two). An engine does not wait for it:
its next step begins as the last one ends, so the new request misses that step and waits for the
one after, which adds a step to its TTFT. The simulator's clients react at the very instant a
request ends unless told the turnaround, so calibration measures it: for each request sent after
another ended, the time since the latest end before its send (its slot's predecessor, the one
that freed it), the median over the run.

An engine that takes requests in between steps (llama-server launches waiting requests' slots
after it has streamed a step's tokens) lets a send that comes soon enough after a step join the
next one. Calibration measures the engine's join window (``join_window``, from the sends that
joined or missed: ``calibrate.steps``) and the turnarounds' spread (``turnaround_spread``), and the
simulator copies both unless told not to (``calibrate(..., apply_join_window=False)``).

A closed loop's first wave is sent one request after another, not at one instant (a real client
takes a fraction of a millisecond per send), and an engine that begins a step as soon as a request
arrives starts the first one alone: the others wait for its step. Which requests share a step then
sets the phase of the whole run at low concurrency (RESULTS 7z). Calibration measures the gap
between the first wave's sends (``first_wave_gap``) for the simulator's clients to copy.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np

from tokenpace.record import RequestRecord

# The share of a closed loop's next requests, sent just after a step began, that must have waited for
# the step after it for a calibration to copy the turnaround (``copies_turnaround``). At a half, 16
# that joined against 14 that waited turned the copy off in one of three like llama.cpp runs, and its
# prediction lost the join window with it: c=4's TTFT −28.9% where the other two came within 7%
# (RESULTS 7zh).
TURNAROUND_WAITED_SHARE = 0.25


def copies_turnaround(joined: int, waited: int) -> bool:
    """Whether a calibration copies the closed loop's turnaround: where at least
    ``TURNAROUND_WAITED_SHARE`` of the next requests sent just after a step began waited for the
    step after it (``StepObservations.joins_after_start``). An engine that takes nearly all of them
    into the step begun (the simulator's real-time server) is better simulated with clients that
    send at once; where a good share waited (llama-server: 47-87%), the copied turnaround and the
    join window tell the joins from the waits."""
    return waited > 0 and waited >= TURNAROUND_WAITED_SHARE * (joined + waited)


def closed_loop_turnaround(records: Iterable[RequestRecord], concurrency: int) -> tuple[float, int]:
    """Median seconds from a request's last token to the next send, and how many sends it is
    taken over (0: none followed an end; then 0 s). Only meaningful for a closed loop."""
    gaps = closed_loop_turnarounds(records, concurrency)
    if not len(gaps):
        return 0.0, 0
    return float(np.median(gaps)), int(len(gaps))


def closed_loop_turnarounds(records: Iterable[RequestRecord], concurrency: int) -> np.ndarray:
    """Every send's seconds since the latest end before it, the first wave left out (empty where
    none followed an end)."""
    sends, ends = _sends_and_ends(records)
    sends = sends[concurrency:]  # the first wave
    if not len(ends) or not len(sends):
        return np.zeros(0)
    i = np.searchsorted(ends, sends, side="right") - 1
    return (sends[i >= 0] - ends[i[i >= 0]]) / 1e9


def first_wave_gap(runs: Iterable[Iterable[RequestRecord]]) -> tuple[float, int]:
    """Median seconds between consecutive sends of the runs' first waves (the sends before any request
    of the run ended), and how many gaps it is taken over (0: no run sent two requests before an end;
    then 0 s)."""
    gaps: list[np.ndarray] = []
    for run in runs:
        sends, ends = _sends_and_ends(run)
        if len(ends):
            gaps.append(np.diff(sends[sends < ends[0]]) / 1e9)
    pooled = np.concatenate(gaps) if gaps else np.zeros(0)
    if not len(pooled):
        return 0.0, 0
    return float(np.median(pooled)), int(len(pooled))


def _sends_and_ends(records: Iterable[RequestRecord]) -> tuple[np.ndarray, np.ndarray]:
    """The run's send times and end times (last token, else done), each sorted; retried attempts left out."""
    recs = [r for r in records if r.sent_ns is not None and not r.retried]
    ends = [r.last_token_ns or r.done_ns for r in recs if (r.last_token_ns or r.done_ns)]
    return (np.sort(np.array([r.sent_ns for r in recs], dtype=np.int64)),
            np.sort(np.array(ends, dtype=np.int64)))


def turnaround_spread(gaps: np.ndarray, n: int = 10) -> tuple[float, ...]:
    """``n`` quantiles of the turnarounds (at the middles of n equal shares: 5%, 15%, ... 95% for
    10), for the simulator's clients to wait in turn."""
    if not len(gaps):
        return ()
    return tuple(float(q) for q in np.quantile(gaps, (np.arange(n) + 0.5) / n))


def stream_join_from_places(places: Sequence[tuple[int, bool]], interval_s: float,
                            turnarounds_s: Sequence[float]) -> float | None:
    """``stream_join_s`` fitted from which finished sequences' clients got their next request into
    the next step, by the chunks streamed after the sequence's last (``StepObservations.stream_places``).
    The simulated client whose sequence had a chunks after it is in time when its turnaround (one of
    ``turnarounds_s`` in turn) is at most a × ``interval_s`` + ``stream_join_s``; the fit is the
    value whose expected count in time, per count of chunks after, comes closest (least squares) to
    the count that was, the middle of the best values. Counted in the engine's order of streaming,
    not timed from the step's last chunk on the client's clock, which the client's own send holds
    back (RESULTS 7zj). None where no place was seen or either outcome is missing."""
    if not places or not interval_s or not len(turnarounds_s):
        return None
    if all(j for _, j in places) or not any(j for _, j in places):
        return None
    turns = np.sort(np.asarray(turnarounds_s, dtype=float))
    after = np.array([a for a, _ in places])
    joined = np.array([j for _, j in places], dtype=float)
    counts = np.unique(after)
    seen = np.array([joined[after == a].sum() for a in counts])
    n = np.array([(after == a).sum() for a in counts])
    # the in-time share changes only where a × interval + join crosses a turnaround
    edges = np.unique((turns[:, None] - counts[None, :] * interval_s).ravel())
    cands = np.concatenate([[edges[0] - 1e-6], (edges[:-1] + edges[1:]) / 2, [edges[-1] + 1e-6]])
    share = (np.searchsorted(turns, counts[None, :] * interval_s + cands[:, None], side="right") / len(turns))
    err = ((share * n - seen) ** 2).sum(axis=1)
    best = np.flatnonzero(err <= err.min() + 1e-9)
    return float((cands[best[0]] + cands[best[-1]]) / 2)


def join_window(joined: Sequence[float], waited: Sequence[float]) -> float:
    """The join window that best tells the sends that joined a step from those that waited, by their
    delay after the step before: the smallest delay d such that treating every send at or below d as
    joined and every later one as waiting misclassifies the fewest, then halfway to the next delay
    that waited (the window lies between them; d itself where none waited later; 0 where none
    joined)."""
    if not joined:
        return 0.0
    j, w = np.sort(np.asarray(joined)), np.sort(np.asarray(waited))
    best, best_err = 0.0, None
    for c in np.unique(np.concatenate([j, w])):
        err = int(len(j) - np.searchsorted(j, c, side="right")) + int(np.searchsorted(w, c, side="right"))
        if best_err is None or err < best_err:
            best, best_err = float(c), err
    later = w[w > best]
    return (best + float(later[0])) / 2 if len(later) else best
