"""Is the load generator honest? Target vs achieved load, schedule lag, and the client's own CPU.

A load generator that falls behind its schedule makes the server look faster than it is. This
report says how far behind it fell, and marks the run invalid when the client was the bottleneck.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np

from tokenpace.config import BenchConfig
from tokenpace.metrics import Window
from tokenpace.metrics.order_stats import describe_blocks
from tokenpace.metrics.summary import by_row_blocks
from tokenpace.metrics.summary_blocks import BLOCK_ROWS
from tokenpace.record import RequestRecord
from tokenpace.recordtable import RecordTable

LAG_P99_LIMIT_MS = 10.0  # schedule lag p99 above this: the client could not keep its schedule
CPU_LIMIT = 0.90  # client CPU use above this fraction of one core: the client was saturated


def mean_in_flight(records: Sequence[RequestRecord] | RecordTable,
                   window: tuple[int, int] | Window | None = None) -> float | None:
    """Time-averaged number of requests in flight (sent → done) over the window."""
    if isinstance(records, RecordTable):
        return _mean_in_flight(lambda: (_spans(block, None) for block in _blocks(records)), window)
    pairs = [(r.sent_ns, r.done_ns) for r in records if r.sent_ns is not None and r.done_ns]
    spans = (np.array([s for s, _ in pairs], dtype=np.int64), np.array([d for _, d in pairs], dtype=np.int64))
    return _mean_in_flight(lambda: iter([spans]), window)


def _blocks(table: RecordTable) -> Iterator[RecordTable]:
    """``table`` whole or, for a long run's columnar file, one row block at a time (memory that
    does not grow with the run; the same figures)."""
    yield from table.row_blocks(BLOCK_ROWS) if by_row_blocks(table) else [table]  # type: ignore[misc]


def _measured(block: RecordTable) -> np.ndarray:
    """The requests the load report describes: sent, not warmup."""
    return block.has("sent_ns") & ~block.bools["warmup"]


def _spans(block: RecordTable, rows: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
    """(sent, done) of ``rows`` (a mask; None: every row) that have both."""
    spans = block.has("sent_ns") & block.has("done_ns") & (block.ints["done_ns"] != 0)
    if rows is not None:
        spans &= rows
    return block.ints["sent_ns"][spans], block.ints["done_ns"][spans]


def _lags(block: RecordTable) -> np.ndarray:
    """Schedule lag (ms) of the measured first attempts: a retry's scheduled time is its first's."""
    ints = block.ints
    first = _measured(block) & block.has("scheduled_ns") & (ints["attempt"] == 1)
    return (ints["sent_ns"][first] - ints["scheduled_ns"][first]) / 1e6


def _lag(table: RecordTable) -> dict[str, float] | None:
    """Schedule lag p50, p99 and max (ms). A long run's by row blocks, selected exactly
    (``order_stats``; its interpolation can differ from NumPy's in the last digit)."""
    if by_row_blocks(table):
        described, _passes = describe_blocks(lambda: map(_lags, _blocks(table)))
        return None if described is None else {key: float(described[key]) for key in ("p50", "p99", "max")}
    lags = _lags(table)
    if not lags.size:
        return None
    p50, p99 = np.percentile(lags, [50, 99])
    return {"p50": float(p50), "p99": float(p99), "max": float(lags.max())}


def _mean_in_flight(spans: Callable[[], Iterator[tuple[np.ndarray, np.ndarray]]],
                    window: tuple[int, int] | Window | None) -> float | None:
    """``spans()``: (sent, done) arrays block by block, the same each time it is called."""
    if isinstance(window, Window):
        window = (window.start_ns, window.end_ns)
    count, lo, hi = 0, 0, 0
    for sent, done in spans():
        if sent.size:
            lo = int(sent.min()) if not count else min(lo, int(sent.min()))
            hi = int(done.max()) if not count else max(hi, int(done.max()))
            count += int(sent.size)
    if not count:
        return None
    if window:
        lo, hi = window
    if hi <= lo:
        return None
    busy = sum(int(np.maximum(0, np.minimum(done, hi) - np.maximum(sent, lo)).sum()) for sent, done in spans())
    return busy / (hi - lo)


def load_report(records: Sequence[RequestRecord] | RecordTable, *, config: BenchConfig, mode: str,
                cpu_s: float, wall_s: float, window: tuple[int, int] | Window | None = None) -> dict[str, Any]:
    """mode: "closed", "open", "trace" or "conversations". ``records`` may be a ``RecordTable`` (a
    long run's columnar file is read by row blocks: the same figures, memory that does not grow)."""
    table = records if isinstance(records, RecordTable) else RecordTable.from_records(list(records), chunks=False)
    lag = _lag(table)
    count, first, last = 0, 0, 0
    for block in _blocks(table):  # the measured sends
        sends = block.ints["sent_ns"][_measured(block)]
        if sends.size:
            first = int(sends.min()) if not count else min(first, int(sends.min()))
            last = int(sends.max()) if not count else max(last, int(sends.max()))
            count += int(sends.size)
    achieved = float((count - 1) / ((last - first) / 1e9)) if count > 1 and last > first else None
    cpu_util = cpu_s / wall_s if wall_s > 0 else None
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
        "mean_in_flight": _mean_in_flight(lambda: (_spans(b, _measured(b)) for b in _blocks(table)), window),
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
