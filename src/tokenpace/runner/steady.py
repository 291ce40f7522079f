"""The steady-state window of a run: one rule for measured (bench) and simulated (sim) runs.

Rates (tokens/s, requests/s, goodput) are counted over the part of a run where the load was at its
target, so that neither the ramp-up nor the drain dilutes them:

- it starts once the target load is reached: closed loop, when the C-th request was sent (C
  requests are then in flight); open loop, at the first send. Never before the end of warmup
  (``--warmup SECONDS``) or of ``--ramp``, nor before the first measured request was sent;
- it ends when sending stops: open loop, at the last send (a ``--duration`` run whose sending went
  on to the deadline: at the deadline);
  closed loop, when the first request of the cooldown would have been sent, i.e. at the first
  completion after the last send (a ``--duration`` run: at the deadline, if that comes first).

Every request is still counted in the summary's counts and latency percentiles; the window only
says over which time its rates are counted. When no such window exists (nothing measured, or the
load never reached its target before sending stopped) the run falls back to the default window of
``tokenpace.metrics.window`` (first sent to last done), and the definition says so.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from tokenpace.metrics.window import Window, completion_ns
from tokenpace.record import RequestRecord
from tokenpace.recordtable import NULL, RecordTable
from tokenpace.results.window import STEADY_PREFIX  # noqa: F401  every rule below starts so

NS = 1_000_000_000

CLOSED_RULE = ("Steady-state window (closed loop at concurrency {c}): from when request number {c} was sent "
               "(the target concurrency reached){after} to when the first request of the cooldown would "
               "have been sent (the first completion after the last send){deadline}, both ends inclusive; "
               "the ramp-up and the drain are outside it.")
OPEN_RULE = ("Steady-state window (open loop): from the first send{after} to the last send{deadline}, "
             "both ends inclusive; the drain after the last send is outside it.")


def steady_window(records: Sequence[RequestRecord] | RecordTable, *, closed_loop: bool,
                  concurrency: int | None, start_ns: int, warmup_s: float = 0.0, ramp_s: float = 0.0,
                  duration_s: float | None = None, send_end_ns: int | None = None) -> Window | None:
    """The steady-state window (module docstring) of a run that began sending at ``start_ns``;
    None when there is none (the caller then uses the default window). ``send_end_ns``: when the
    runner stopped sending (the deadline, or the plan ran out), if it knows. ``records`` may be a
    ``RecordTable`` (a measured run's records, read back from its columnar parts)."""
    sent, measured, completion = _stamps(records)
    sends = np.sort(sent)
    measured_sends = np.sort(measured)
    if not sends.size:
        return None
    settled_ns = start_ns + round((warmup_s + ramp_s) * NS)
    deadline_ns = None if duration_s is None else start_ns + round((warmup_s + ramp_s + duration_s) * NS)
    closed = closed_loop and bool(concurrency)
    if closed:
        if sends.size < concurrency:  # type: ignore[operator]
            return None  # the target concurrency was never reached
        begin = max(settled_ns, int(sends[concurrency - 1]))  # type: ignore[operator]
        after = completion[completion > sends[-1]]
        end = int(after.min()) if after.size else None
        if deadline_ns is not None:
            end = deadline_ns if end is None else min(end, deadline_ns)
    else:
        if not measured_sends.size:
            return None
        begin = max(settled_ns, int(measured_sends[0]))
        end = int(measured_sends[-1])
        if deadline_ns is not None and send_end_ns is not None:  # sending went on to the deadline
            end = max(end, min(deadline_ns, send_end_ns))
    if end is None or end <= begin:
        return None
    return Window(begin, end, explicit=True, rule=_rule(closed, concurrency, warmup_s, ramp_s, duration_s))


def _stamps(records: Sequence[RequestRecord] | RecordTable) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(every send, the measured requests' sends, every completion that exists) as int64 arrays."""
    if isinstance(records, RecordTable):
        has_sent = records.has("sent_ns")
        sent_ns = records.ints["sent_ns"]
        completion = np.where(records.has("done_ns"), records.ints["done_ns"],
                              np.where(records.has("last_token_ns"), records.ints["last_token_ns"], sent_ns))
        return sent_ns[has_sent], sent_ns[records.measured], completion[completion != NULL]
    sent = np.array([r.sent_ns for r in records if r.sent_ns is not None], dtype=np.int64)
    measured = np.array([r.sent_ns for r in records if r.measured and r.sent_ns is not None], dtype=np.int64)
    completion = np.array([c for c in map(completion_ns, records) if c is not None], dtype=np.int64)
    return sent, measured, completion


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
