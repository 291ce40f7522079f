"""Is the load generator honest? Target vs achieved load, schedule lag, and the client's own CPU.

A load generator that falls behind its schedule makes the server look faster than it is. This
report says how far behind it fell, and marks the run invalid when the client was the bottleneck.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from tokenpace.config import BenchConfig
from tokenpace.metrics import Window
from tokenpace.record import RequestRecord
from tokenpace.recordtable import RecordTable

LAG_P99_LIMIT_MS = 10.0  # schedule lag p99 above this: the client could not keep its schedule
CPU_LIMIT = 0.90  # client CPU use above this fraction of one core: the client was saturated


def mean_in_flight(records: Sequence[RequestRecord] | RecordTable,
                   window: tuple[int, int] | Window | None = None) -> float | None:
    """Time-averaged number of requests in flight (sent → done) over the window."""
    if isinstance(records, RecordTable):
        spans = records.has("sent_ns") & records.has("done_ns") & (records.ints["done_ns"] != 0)
        return _mean_in_flight(records.ints["sent_ns"][spans], records.ints["done_ns"][spans], window)
    pairs = [(r.sent_ns, r.done_ns) for r in records if r.sent_ns is not None and r.done_ns]
    return _mean_in_flight(np.array([s for s, _ in pairs], dtype=np.int64),
                           np.array([d for _, d in pairs], dtype=np.int64), window)


def _mean_in_flight(sent: np.ndarray, done: np.ndarray, window: tuple[int, int] | Window | None) -> float | None:
    if not sent.size:
        return None
    if isinstance(window, Window):
        window = (window.start_ns, window.end_ns)
    lo = window[0] if window else int(sent.min())
    hi = window[1] if window else int(done.max())
    if hi <= lo:
        return None
    busy = int(np.maximum(0, np.minimum(done, hi) - np.maximum(sent, lo)).sum())
    return busy / (hi - lo)


def load_report(records: Sequence[RequestRecord] | RecordTable, *, config: BenchConfig, mode: str,
                cpu_s: float, wall_s: float, window: tuple[int, int] | Window | None = None) -> dict[str, Any]:
    """mode: "closed", "open", "trace" or "conversations". ``records`` may be a ``RecordTable``."""
    table = records if isinstance(records, RecordTable) else RecordTable.from_records(list(records), chunks=False)
    ints = table.ints
    sent = table.has("sent_ns")
    measured = sent & ~table.bools["warmup"]
    # Lag of first attempts only: a retry's scheduled time is its first attempt's.
    first = measured & table.has("scheduled_ns") & (ints["attempt"] == 1)
    lags = (ints["sent_ns"][first] - ints["scheduled_ns"][first]) / 1e6
    sends = np.sort(ints["sent_ns"][measured])
    achieved = (float((len(sends) - 1) / ((sends[-1] - sends[0]) / 1e9))
                if len(sends) > 1 and sends[-1] > sends[0] else None)
    cpu_util = cpu_s / wall_s if wall_s > 0 else None
    lag = None
    if lags.size:
        p50, p99 = np.percentile(lags, [50, 99])
        lag = {"p50": float(p50), "p99": float(p99), "max": float(lags.max())}
    reasons = []
    # Closed loop has no schedule to keep: there, sent - scheduled is only the client's own
    # overhead, reported but not judged.
    if mode != "closed" and lag and lag["p99"] > LAG_P99_LIMIT_MS:
        reasons.append(f"schedule lag p99 {lag['p99']:.1f} ms > {LAG_P99_LIMIT_MS:g} ms")
    if cpu_util is not None and cpu_util > CPU_LIMIT:
        reasons.append(f"client CPU {cpu_util:.0%} of one core > {CPU_LIMIT:.0%}")
    return {
        "mode": mode,
        "target_concurrency": config.effective_concurrency() if mode == "closed" else config.concurrency,
        "mean_in_flight": mean_in_flight(table.records_only(measured), window),
        "target_rate_rps": config.rate,
        "achieved_rate_rps": achieved,
        "schedule_lag_ms": lag,
        "client_cpu_s": cpu_s,
        "client_cpu_util": cpu_util,
        "wall_s": wall_s,
        "valid": not reasons,
        "invalid_reasons": reasons,
        "suggestion": (None if not reasons else
                       "the load generator was the bottleneck: lower --rate or --concurrency, raise --workers, "
                       "or run tokenpace on a less busy machine (or several)"),
    }
