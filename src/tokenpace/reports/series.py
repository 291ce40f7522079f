"""Plot-ready series computed from records: pure functions, no plotting library.

Times are seconds from the start of the run (the earliest scheduled or sent stamp), so measured
runs (monotonic clock) and simulations (virtual time from 0) read the same.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from tokenpace.metrics.chunks import chunk_table
from tokenpace.metrics.columns import columns_of_table, table_chunks
from tokenpace.metrics.latency import PER_REQUEST, pooled_itl_and_chunk_gaps_ms
from tokenpace.record import RequestRecord
from tokenpace.recordtable import NULL, RecordTable

# Drawing more bars than this makes a timeline unreadable and the file large: subsample evenly.
MAX_TIMELINE_REQUESTS = 400
# CDFs of large samples are drawn through this many quantiles (the curve looks the same).
MAX_CDF_POINTS = 1000
# The in-flight step function of a large run is read at this many evenly spaced times.
MAX_STEP_POINTS = 2000
# ITL plots of a large run pool the samples of this many requests at most (every k-th).
MAX_ITL_REQUESTS = 20_000
_NS = 1e9


def latency_samples_ms(records: Sequence[RequestRecord] | RecordTable) -> dict[str, np.ndarray]:
    """TTFT, TPOT, E2E (one per ok request) and ITL (one per token) of measured ok records. From a
    ``RecordTable`` (the columnar file of a large run) ITL is pooled over an even subsample of the
    streamed ok requests (every k-th, at most ``MAX_ITL_REQUESTS``): ``itl_requests`` says how many
    of how many (the page says so), so that a plot never holds 10^8 samples."""
    if isinstance(records, RecordTable):
        return _latency_samples_of_table(records)
    ok = [r for r in records if r.measured and r.status == "ok"]
    out = {name: _finite([PER_REQUEST[name](r) for r in ok]) for name in ("ttft", "tpot", "e2e")}
    streamed = [r for r in ok if r.stream]
    out["itl"] = pooled_itl_and_chunk_gaps_ms(chunk_table(streamed))[0] if streamed else np.empty(0)
    return out


def _latency_samples_of_table(table: RecordTable) -> dict[str, np.ndarray]:
    cols = columns_of_table(table, table.measured)
    out = {name: _only_finite(cols.values_ms[name][cols.ok]) for name in ("ttft", "tpot", "e2e")}
    streamed = np.flatnonzero(cols.ok & cols.stream)
    step = max(1, -(-streamed.size // MAX_ITL_REQUESTS))  # ceil: every step-th streamed ok request
    pick = np.zeros(len(cols), dtype=bool)
    pick[streamed[::step]] = True
    # Only the picked requests' chunks are read (their slices of each part), not every chunk.
    out["itl"] = pooled_itl_and_chunk_gaps_ms(cols.chunks.chunk_table(pick))[0] if streamed.size else np.empty(0)
    out["itl_requests"] = np.array([int(pick.sum()), streamed.size])
    return out


def _only_finite(values: np.ndarray) -> np.ndarray:
    return values[np.isfinite(values)]


def _finite(values: list[float | None]) -> np.ndarray:
    arr = np.array([np.nan if v is None else v for v in values], dtype=np.float64)
    return arr[np.isfinite(arr)]


def cdf_points(samples: np.ndarray, *, ascending: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """(value, cumulative fraction), at most MAX_CDF_POINTS points. ``ascending``: the samples are
    already sorted (not sorted again)."""
    ordered = samples if ascending else np.sort(samples)
    n = ordered.size
    if n <= MAX_CDF_POINTS:
        return ordered, np.arange(1, n + 1) / n
    fractions = np.linspace(1 / n, 1.0, MAX_CDF_POINTS)
    return np.quantile(ordered, fractions), fractions


@dataclass(frozen=True)
class RequestBars:
    """One row per drawn request, seconds from the run start: scheduled, sent, first token, last
    token (NaN where missing), status; ``total`` requests existed, ``len(index)`` are drawn."""

    index: np.ndarray
    scheduled_s: np.ndarray
    sent_s: np.ndarray
    first_token_s: np.ndarray
    end_s: np.ndarray  # last token, else done
    status: list[str]
    total: int

    @property
    def subsampled(self) -> bool:
        return len(self.index) < self.total


def run_origin_ns(records: Sequence[RequestRecord] | RecordTable) -> int:
    if isinstance(records, RecordTable):
        stamps = np.concatenate([records.ints[k][records.has(k)] for k in ("scheduled_ns", "sent_ns")])
        return int(stamps.min()) if stamps.size else 0
    stamps = [s for r in records for s in (r.scheduled_ns, r.sent_ns) if s is not None]
    return min(stamps) if stamps else 0


def request_bars(records: Sequence[RequestRecord], limit: int = MAX_TIMELINE_REQUESTS) -> RequestBars:
    """The per-request timeline of measured records in send order, evenly subsampled to ``limit``."""
    if isinstance(records, RecordTable):
        return _request_bars_of_table(records, limit)
    sent = sorted((r for r in records if r.measured), key=lambda r: (r.sent_ns, r.index))
    total = len(sent)
    if total > limit:
        sent = [sent[i] for i in np.linspace(0, total - 1, limit).round().astype(int)]
    origin = run_origin_ns(records)

    def col(values: list[int | None]) -> np.ndarray:
        return np.array([np.nan if v is None else (v - origin) / _NS for v in values], dtype=np.float64)

    return RequestBars(
        index=np.array([r.index for r in sent], dtype=np.int64),
        scheduled_s=col([r.scheduled_ns if r.scheduled_ns is not None else r.sent_ns for r in sent]),
        sent_s=col([r.sent_ns for r in sent]),
        first_token_s=col([r.first_token_ns for r in sent]),
        end_s=col([r.last_token_ns if r.last_token_ns is not None else r.done_ns for r in sent]),
        status=[r.status for r in sent],
        total=total,
    )


def _request_bars_of_table(table: RecordTable, limit: int) -> RequestBars:
    rows = np.flatnonzero(table.measured)
    ints = table.ints
    rows = rows[np.lexsort((ints["index"][rows], ints["sent_ns"][rows]))]
    total = rows.size
    if total > limit:
        rows = rows[np.linspace(0, total - 1, limit).round().astype(int)]
    origin = run_origin_ns(table)

    def col(*names: str) -> np.ndarray:  # the first of the fields that is set, seconds from origin
        out = np.full(rows.size, np.nan)
        for name in reversed(names):
            value = ints[name][rows]
            set_ = value != NULL
            out[set_] = (value[set_] - origin) / _NS
        return out

    status = table.texts["status"]
    return RequestBars(index=ints["index"][rows], scheduled_s=col("scheduled_ns", "sent_ns"),
                       sent_s=col("sent_ns"), first_token_s=col("first_token_ns"),
                       end_s=col("last_token_ns", "done_ns"), status=status[rows].values(), total=total)


@dataclass(frozen=True)
class LoadOverTime:
    bin_s: float
    bin_start_s: np.ndarray  # left edge of each bin
    output_tokens_s: np.ndarray  # output tokens that arrived in the bin / bin width
    completed_s: np.ndarray  # requests that finished ok in the bin / bin width
    step_t_s: np.ndarray  # in-flight requests as a step function: value from t[i] to t[i+1]
    in_flight: np.ndarray


def load_over_time(records: Sequence[RequestRecord], bins: int = 60) -> LoadOverTime | None:
    """Output tokens/s and completed requests/s per time bin, and requests in flight (sent, not
    yet done) as an exact step function. None when no measured request has a time span."""
    if isinstance(records, RecordTable):
        rows = records.measured & records.has("done_ns")
        if not rows.any():
            return None
        origin = run_origin_ns(records)
        start, end = records.ints["sent_ns"][rows], records.ints["done_ns"][rows]
        span_s = max((int(end.max()) - origin) / _NS, 1e-3)
        bin_s = _nice_bin(span_s / bins)
        edges = np.arange(0.0, span_s + bin_s, bin_s)
        tokens = table_chunks(records, rows).histogram(origin, edges)
        done_ok = (end[records.status_is("ok")[rows]] - origin) / _NS
    else:
        measured = [r for r in records if r.measured and r.done_ns is not None]
        if not measured:
            return None
        origin = run_origin_ns(records)
        start = np.array([r.sent_ns for r in measured], dtype=np.int64)
        end = np.array([r.done_ns for r in measured], dtype=np.int64)
        span_s = max((int(end.max()) - origin) / _NS, 1e-3)
        bin_s = _nice_bin(span_s / bins)
        edges = np.arange(0.0, span_s + bin_s, bin_s)
        table = chunk_table(measured)
        tokens, _ = np.histogram((table.ns - origin) / _NS, bins=edges, weights=table.tokens)
        done_ok = np.array([(r.done_ns - origin) / _NS for r in measured if r.status == "ok"])
    completed, _ = np.histogram(done_ok, bins=edges)
    times = np.concatenate([(start - origin) / _NS, (end - origin) / _NS])
    steps = np.concatenate([np.ones(start.size), -np.ones(end.size)])
    order = np.lexsort((steps, times))  # at equal times, a finish before a start
    step_t, in_flight = times[order], np.cumsum(steps[order])
    if step_t.size > MAX_STEP_POINTS:  # keep the SVG small: sample the step function
        grid = np.linspace(step_t[0], step_t[-1], MAX_STEP_POINTS)
        step_t, in_flight = grid, in_flight[np.searchsorted(step_t, grid, side="right") - 1]
    return LoadOverTime(bin_s=bin_s, bin_start_s=edges[:-1], output_tokens_s=tokens / bin_s,
                        completed_s=completed / bin_s, step_t_s=step_t, in_flight=in_flight)


def _nice_bin(raw_s: float) -> float:
    """The smallest of 1, 2, 5 × 10^k seconds that is >= raw_s."""
    exponent = np.floor(np.log10(raw_s))
    for mantissa in (1, 2, 5, 10):
        candidate = mantissa * 10.0 ** exponent
        if candidate >= raw_s:
            return float(candidate)
    return float(10.0 ** (exponent + 1))


def metric_samples_ms(records: Sequence[RequestRecord], name: str) -> np.ndarray:
    """The samples behind one ``latency_ms`` figure of the summary: a per-request metric of
    measured ok records, or ITL / chunk gaps pooled over them."""
    ok = [r for r in records if r.measured and r.status == "ok"]
    if name in PER_REQUEST:
        return _finite([PER_REQUEST[name](r) for r in ok])
    streamed = [r for r in ok if r.stream]
    if not streamed:
        return np.empty(0)
    itl, gaps = pooled_itl_and_chunk_gaps_ms(chunk_table(streamed))
    return {"itl": itl, "chunk_gap": gaps}[name]
