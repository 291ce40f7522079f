"""The steady-state window of a run: one rule for measured (bench) and simulated (sim) runs.

Rates (tokens/s, requests/s, goodput) are counted over the part of a run where the load was at its
target, so that neither the ramp-up nor the drain dilutes them:

- it starts once the target load is reached: closed loop, when the C-th request was sent (C
  requests are then in flight); open loop, at the first send. Never before the end of warmup
  (``--warmup SECONDS``) or of ``--ramp``, nor before the first measured request was sent;
- it ends when sending stops: open loop, at the last send (a ``--duration`` run whose sending went
  on to the deadline: at the deadline);
  closed loop, when the first request of the cooldown would have been sent: at the first completion
  that no send followed, the C-th latest (``cooldown_start``; a ``--duration`` run: at the deadline,
  if that comes first).

Every request is still counted in the summary's counts and latency percentiles; the window only
says over which time its rates are counted. When no such window exists (nothing measured, or the
load never reached its target before sending stopped) the run falls back to the default window of
``tokenpace.metrics.window`` (first sent to last done), and the definition says so.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import numpy as np

from tokenpace.metrics.summary import by_row_blocks
from tokenpace.metrics.summary_blocks import BLOCK_ROWS
from tokenpace.metrics.window import Window, completion_ns
from tokenpace.record import RequestRecord
from tokenpace.recordtable import NULL, RecordTable
from tokenpace.results.window import STEADY_PREFIX  # noqa: F401  every rule below starts so

NS = 1_000_000_000

CLOSED_RULE = ("Steady-state window (closed loop at concurrency {c}): from when request number {c} was sent "
               "(the target concurrency reached){after} to when the first request of the cooldown would "
               "have been sent (the first completion that no send followed){deadline}, both ends inclusive; "
               "the ramp-up and the drain are outside it.")
OPEN_RULE = ("Steady-state window (open loop): from the first send{after} to the last send{deadline}, "
             "both ends inclusive; the drain after the last send is outside it.")


def steady_window(records: Sequence[RequestRecord] | RecordTable, *, closed_loop: bool,
                  concurrency: int | None, start_ns: int, warmup_s: float = 0.0, ramp_s: float = 0.0,
                  duration_s: float | None = None, send_end_ns: int | None = None) -> Window | None:
    """The steady-state window (module docstring) of a run that began sending at ``start_ns``;
    None when there is none (the caller then uses the default window). ``send_end_ns``: when the
    runner stopped sending (the deadline, or the plan ran out), if it knows. ``records`` may be a
    ``RecordTable`` (a measured run's records, read back from its columnar parts; a long run's is
    read by row blocks, in memory that does not grow with the run)."""
    closed = closed_loop and bool(concurrency)
    sends = _Sends.of(records, concurrency if closed else 0)
    if not sends.count:
        return None
    settled_ns = start_ns + round((warmup_s + ramp_s) * NS)
    deadline_ns = None if duration_s is None else start_ns + round((warmup_s + ramp_s + duration_s) * NS)
    if closed:
        if sends.count < concurrency:  # type: ignore[operator]
            return None  # the target concurrency was never reached
        begin = max(settled_ns, sends.kth)  # the C-th send
        end = cooldown_start(records, sends.last, concurrency)  # type: ignore[arg-type]
        if deadline_ns is not None:
            end = deadline_ns if end is None else min(end, deadline_ns)
    else:
        if sends.measured_first is None:
            return None
        begin = max(settled_ns, sends.measured_first)
        end = sends.measured_last
        if deadline_ns is not None and send_end_ns is not None:  # sending went on to the deadline
            end = max(end, min(deadline_ns, send_end_ns))
    if end is None or end <= begin:
        return None
    return Window(begin, end, explicit=True, rule=_rule(closed, concurrency, warmup_s, ramp_s, duration_s))


def cooldown_start(records: Sequence[RequestRecord] | RecordTable, last_send: int, concurrency: int) -> int | None:
    """When a closed loop of ``concurrency`` clients began its cooldown: the first completion its
    client had no request left to follow. Every completion before it sent the next request, and C of
    the N sends were not sent after a completion, so it is the (N − C + 1)-th completion, i.e. the
    C-th latest. The first completion after the last send is the same moment unless completions tie
    (a simulation of identical requests ends clients in whole cohorts: the last sends then happen at
    the very instant of the cooldown's first completions) or one came within a client's turnaround
    of the last send; the earlier of the two is taken (with ``--workers`` a worker can run out of
    requests before the others, and neither is then earlier than that moment). None: no completion
    after the last send."""
    after, latest = None, np.empty(0, dtype=np.int64)
    for completion in _completion_blocks(records):
        later = completion[completion > last_send]
        if later.size:
            low = int(later.min())
            after = low if after is None else min(after, low)
        both = np.concatenate([latest, completion])
        latest = both if both.size <= concurrency else np.partition(both, both.size - concurrency)[-concurrency:]
    if after is None:
        return None
    return min(after, int(latest.min())) if latest.size == concurrency else after


class _Sends:
    """What the window needs of a run's sends: how many, the k-th smallest, the last, and the first
    and last measured send; from whole arrays, or a long run's row blocks one at a time."""

    def __init__(self, k: int) -> None:
        self.k = k
        self.count = 0
        self.smallest = np.empty(0, dtype=np.int64)  # the k smallest sends so far
        self.last = None
        self.measured_first = None
        self.measured_last = None

    @classmethod
    def of(cls, records: Sequence[RequestRecord] | RecordTable, k: int) -> _Sends:
        sends = cls(k)
        blocks = _send_blocks(records)
        if isinstance(records, RecordTable) and by_row_blocks(records):
            for sent, measured in blocks:
                sends.add(sent, measured)
            return sends
        (sent, measured), = blocks  # whole arrays: sorted, as the rule reads
        sent, measured = np.sort(sent), np.sort(measured)
        sends.count = int(sent.size)
        if sent.size:
            sends.last = int(sent[-1])
            sends.smallest = sent[:k]
        if measured.size:
            sends.measured_first, sends.measured_last = int(measured[0]), int(measured[-1])
        return sends

    def add(self, sent: np.ndarray, measured: np.ndarray) -> None:
        if sent.size:
            self.count += int(sent.size)
            self.last = _max(self.last, int(sent.max()))
            if self.k:
                both = np.concatenate([self.smallest, sent])
                self.smallest = both if both.size <= self.k else np.partition(both, self.k - 1)[:self.k]
        if measured.size:
            low, high = int(measured.min()), int(measured.max())
            self.measured_first = low if self.measured_first is None else min(self.measured_first, low)
            self.measured_last = _max(self.measured_last, high)

    @property
    def kth(self) -> int:
        return int(self.smallest.max())


def _max(a: int | None, b: int) -> int:
    return b if a is None else max(a, b)


def _blocks(records: Sequence[RequestRecord] | RecordTable) -> Iterator[RecordTable]:
    if by_row_blocks(records):  # type: ignore[arg-type]
        yield from records.row_blocks(BLOCK_ROWS)  # type: ignore[union-attr]
    else:
        yield records  # type: ignore[misc]


def _send_blocks(records: Sequence[RequestRecord] | RecordTable) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """(every send, the measured requests' sends) as int64 arrays, by block."""
    if not isinstance(records, RecordTable):
        yield (np.array([r.sent_ns for r in records if r.sent_ns is not None], dtype=np.int64),
               np.array([r.sent_ns for r in records if r.measured and r.sent_ns is not None], dtype=np.int64))
        return
    for block in _blocks(records):
        sent_ns = block.ints["sent_ns"]
        yield sent_ns[block.has("sent_ns")], sent_ns[block.measured]


def _completion_blocks(records: Sequence[RequestRecord] | RecordTable) -> Iterator[np.ndarray]:
    """Every completion that exists (done, else the last token, else the send), by block."""
    if not isinstance(records, RecordTable):
        yield np.array([c for c in map(completion_ns, records) if c is not None], dtype=np.int64)
        return
    for block in _blocks(records):
        ints = block.ints
        completion = np.where(block.has("done_ns"), ints["done_ns"],
                              np.where(block.has("last_token_ns"), ints["last_token_ns"], ints["sent_ns"]))
        yield completion[completion != NULL]


def _rule(closed: bool, concurrency: int | None, warmup_s: float, ramp_s: float,
          duration_s: float | None) -> str:
    parts = []
    if warmup_s:
        parts.append(f"{warmup_s:g} s of warmup")
    if ramp_s:
        parts.append(f"the {ramp_s:g} s ramp")
    after = f" (not before the end of {' and '.join(parts)})" if parts else ""
    deadline = "" if duration_s is None else f" (or the end of the {duration_s:g} s duration, if that comes first)"
    if closed:
        return CLOSED_RULE.format(c=concurrency, after=after, deadline=deadline)
    if duration_s is not None:
        deadline = f" (or the end of the {duration_s:g} s duration, when sending went on until then)"
    return OPEN_RULE.format(after=after, deadline=deadline)
