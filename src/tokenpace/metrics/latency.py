"""Per-request latencies in milliseconds, named and defined as in REFERENCE section 1.

Each function returns None when the record lacks a stamp it needs. Every one of them reads
``first_token_ns`` (the first chunk carrying a generated token: content, reasoning or a tool-call
delta), never the first chunk received, so a role-only first chunk cannot shorten TTFT.

Decisions:

- TPOT uses ``output_token_count`` (the server's usage count when present) and is None for one
  output token or fewer, and for non-streamed responses: there ``first_token == last_token``, so
  the formula would give 0 ms, a figure nobody observed.
- ITL is token-weighted: each gap between consecutive token-carrying chunks is divided evenly over
  the tokens the later chunk carries, one sample per token (a 30 ms gap before a 3-token chunk
  gives three 10 ms samples). The first chunk's tokens give no sample: the first is TTFT's, and
  any others arrived with it, after no gap of their own, so a 0 ms sample would flatter the
  stream. Hence mean ITL = (last - first) / (tokens after the first chunk), which differs from
  TPOT's (output_tokens - 1) when the first chunk carries several tokens.
- Chunk gaps are the raw gaps between consecutive token-carrying chunks (vLLM's "ITL").
- A chunk counted as carrying 0 tokens (a role-only or keep-alive chunk a client kept by mistake,
  or a rounding artifact of apportioned counts) is skipped by both ITL and chunk gaps: the time
  before it is charged to the next chunk that carries tokens, whose tokens waited all of it. So
  per record, the ITL samples and the chunk gaps both sum to (last chunk - first chunk).
- Non-streamed records have no ITL samples and no chunk gaps.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from tokenpace.metrics.chunks import ChunkTable, output_token_count, record_chunks
from tokenpace.record import RequestRecord

_NS_PER_MS = 1e6


def _ms(start_ns: int | None, end_ns: int | None) -> float | None:
    if start_ns is None or end_ns is None:
        return None
    return (end_ns - start_ns) / _NS_PER_MS


def ttft(record: RequestRecord) -> float | None:
    """TTFT = first_token - sent."""
    return _ms(record.sent_ns, record.first_token_ns)


def ttft_from_scheduled(record: RequestRecord) -> float | None:
    """TTFT measured from when the schedule meant to send the request (shows schedule lag)."""
    return _ms(record.scheduled_ns, record.first_token_ns)


def ttfc(record: RequestRecord) -> float | None:
    """Time to first content = first_content - sent (after any reasoning or tool-call deltas)."""
    return _ms(record.sent_ns, record.first_content_ns)


def e2e(record: RequestRecord) -> float | None:
    """E2E = last_token - sent."""
    return _ms(record.sent_ns, record.last_token_ns)


def e2e_from_scheduled(record: RequestRecord) -> float | None:
    """E2E = last_token - scheduled."""
    return _ms(record.scheduled_ns, record.last_token_ns)


def schedule_lag(record: RequestRecord) -> float | None:
    """sent - scheduled: how late the load generator sent the request. None for a retry, whose
    scheduled time is the first attempt's (so that TTFT from scheduled includes the retries)."""
    if record.attempt > 1:
        return None
    return _ms(record.scheduled_ns, record.sent_ns)


def tpot(record: RequestRecord) -> float | None:
    """TPOT = (last_token - first_token) / (output_tokens - 1); None for <= 1 token or no stream."""
    tokens = output_token_count(record)
    if not record.stream or tokens is None or tokens <= 1:
        return None
    span = _ms(record.first_token_ns, record.last_token_ns)
    return None if span is None else span / (tokens - 1)


def itl_samples(record: RequestRecord) -> list[float]:
    """Token-weighted inter-token latencies of one record, ms (see the module docstring)."""
    carrying = _carrying_chunks(record)
    samples: list[float] = []
    for (earlier_ns, _), (later_ns, later_tokens) in zip(carrying, carrying[1:]):
        samples.extend([(later_ns - earlier_ns) / later_tokens / _NS_PER_MS] * later_tokens)
    return samples


def chunk_gaps(record: RequestRecord) -> list[float]:
    """Raw gaps between consecutive token-carrying chunks of one record, ms."""
    carrying = _carrying_chunks(record)
    return [(later - earlier) / _NS_PER_MS
            for (earlier, _), (later, _) in zip(carrying, carrying[1:])]


def _carrying_chunks(record: RequestRecord) -> list[tuple[int, int]]:
    if not record.stream:
        return []
    ns, tokens = record_chunks(record)
    return [(t, k) for t, k in zip(ns, tokens) if k > 0]


# Request-weighted metrics: one sample per request. Name -> function, in report order.
PER_REQUEST: dict[str, Callable[[RequestRecord], float | None]] = {
    "ttft": ttft,
    "ttft_from_scheduled": ttft_from_scheduled,
    "ttfc": ttfc,
    "tpot": tpot,
    "e2e": e2e,
    "e2e_from_scheduled": e2e_from_scheduled,
    "schedule_lag": schedule_lag,
}


def pooled_itl_and_chunk_gaps_ms(table: ChunkTable, record_mask: np.ndarray | None = None, *,
                                 window=None) -> tuple[np.ndarray, np.ndarray]:
    """``itl_samples`` and ``chunk_gaps`` of every record in ``table`` (of those set in
    ``record_mask``, one bool per record, when given), each concatenated in record order
    (vectorized). With one token per chunk both are the same array object.

    Give streamed records only: non-streamed ones have neither. ``table`` may be a
    ``chunk_scan.TableChunks`` (a record table's chunks, read block by block); ``window``: the
    measurement window it sums tokens over in the same pass (what the summary reads next).
    """
    if not isinstance(table, ChunkTable):
        return table.scan(window=window, itl_mask=np.ones(len(table), bool) if record_mask is None
                          else record_mask)
    gaps_ns, later_tokens = _pooled_gaps(table, record_mask)
    if later_tokens is None:  # one token per chunk: each gap is one ITL sample
        gaps_ms = _to_ms_in_place(gaps_ns)
        return gaps_ms, gaps_ms
    return np.repeat(gaps_ns / later_tokens / _NS_PER_MS, later_tokens), gaps_ns / _NS_PER_MS


def _to_ms_in_place(gaps_ns: np.ndarray) -> np.ndarray:
    """``gaps_ns / 1e6`` in the int64 array's own memory (as float64), block by block: the same
    floats, without a second array of 10^8 samples."""
    out = gaps_ns.view(np.float64)
    block = 1 << 20
    for i in range(0, gaps_ns.size, block):
        part = gaps_ns[i:i + block].astype(np.float64)  # read before the view overwrites it
        part /= _NS_PER_MS
        out[i:i + block] = part
    return out


def _pooled_gaps(table: ChunkTable, record_mask: np.ndarray | None = None
                 ) -> tuple[np.ndarray, np.ndarray | None]:
    """Gaps between consecutive token-carrying chunks of the same record (int64 ns), and the
    tokens of the later chunk of each gap (None when every chunk carries one token); only of the
    records set in ``record_mask`` when given (the same as ``table.rows_of(record_mask)`` first,
    without copying the table)."""
    record, ns, tokens = table.record, table.ns, table.tokens
    carrying = tokens > 0
    if not carrying.all():
        record, ns, tokens = record[carrying], ns[carrying], tokens[carrying]
    del carrying
    keep = record[1:] == record[:-1]
    if record_mask is not None and not record_mask.all():
        keep &= record_mask[record[1:]]
    gaps = np.diff(ns)[keep]
    later = None if (tokens == 1).all() else tokens[1:][keep]
    return gaps, later
