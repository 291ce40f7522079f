"""The measured records of a run as numpy columns, computed once and shared by every section.

Per-request latencies are computed once per record with the functions of ``latency`` (so the
summary and the per-request API cannot disagree) and stored as float64 with NaN for "undefined";
chunks are flattened once into a ``ChunkTable``. Throughput, goodput and latency statistics then
work on whole arrays, which keeps a 100k-request x 256-token run to seconds.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from tokenpace.metrics.chunk_scan import TableChunks
from tokenpace.metrics.chunks import ChunkTable, chunk_table
from tokenpace.metrics.latency import PER_REQUEST
from tokenpace.metrics.window import completion_ns
from tokenpace.record import RequestRecord
from tokenpace.recordtable import NULL, RecordTable

_NS_PER_MS = 1e6


@dataclass(frozen=True)
class Columns:
    ok: np.ndarray  # bool: status == "ok"
    stream: np.ndarray  # bool
    completion_ns: np.ndarray  # int64: done_ns, else last_token_ns, else sent_ns (0 if none)
    has_completion: np.ndarray  # bool: completion_ns is real
    sent_ns: np.ndarray  # int64: sent_ns (-1 if never sent)
    prompt_tokens: np.ndarray  # int64, missing or negative -> 0
    cached_prompt_tokens: np.ndarray  # int64, missing or negative -> 0
    values_ms: dict[str, np.ndarray]  # PER_REQUEST name -> float64, NaN where undefined
    chunks: ChunkTable | TableChunks  # the records' chunks, in memory or read block by block
    cache: dict = field(default_factory=dict, compare=False, repr=False)  # sums shared by sections

    def __len__(self) -> int:
        return int(self.ok.size)


def columns(records: Sequence[RequestRecord]) -> Columns:
    """The columns of ``records``, one entry per record, in order."""
    n = len(records)
    completions = [completion_ns(r) for r in records]
    return Columns(
        ok=np.fromiter((r.status == "ok" for r in records), dtype=bool, count=n),
        stream=np.fromiter((bool(r.stream) for r in records), dtype=bool, count=n),
        completion_ns=np.fromiter((c or 0 for c in completions), dtype=np.int64, count=n),
        has_completion=np.fromiter((c is not None for c in completions), dtype=bool, count=n),
        sent_ns=np.fromiter((-1 if r.sent_ns is None else r.sent_ns for r in records), dtype=np.int64, count=n),
        prompt_tokens=_counts(r.prompt_tokens for r in records),
        cached_prompt_tokens=_counts(r.cached_prompt_tokens for r in records),
        values_ms={name: np.array([metric(r) for r in records], dtype=np.float64)
                   for name, metric in PER_REQUEST.items()},
        chunks=chunk_table(records),
    )


def _counts(values) -> np.ndarray:
    return np.array([max(v or 0, 0) for v in values], dtype=np.int64)


def columns_of_table(table: RecordTable, rows: np.ndarray | None = None, *,
                     selected: RecordTable | None = None) -> Columns:
    """``columns`` of the records in a ``RecordTable`` (of those set in ``rows``, one bool per
    record, when given), computed on whole arrays: the same numbers as the per-record definitions
    of ``latency`` and ``chunks`` give (a property test holds them to it), without one Python
    object per request or per token. The chunks are not copied: ``chunk_scan.TableChunks`` reads
    them block by block when a section needs them. ``selected``: ``table.records_only(rows)`` when
    the caller has it already (not a second copy of the rows' columns)."""
    if rows is None:
        rows = np.ones(len(table), dtype=bool)
    if selected is None:
        selected = table.records_only(rows) if not rows.all() else table
    has = selected.has
    ints = selected.ints
    chunks, count = _table_chunks(table, rows, selected)
    values_ms = {
        "ttft": _span_ms(selected, "sent_ns", "first_token_ns"),
        "ttft_from_scheduled": _span_ms(selected, "scheduled_ns", "first_token_ns"),
        "ttfc": _span_ms(selected, "sent_ns", "first_content_ns"),
        "tpot": _tpot_ms(selected, count),
        "e2e": _span_ms(selected, "sent_ns", "last_token_ns"),
        "e2e_from_scheduled": _span_ms(selected, "scheduled_ns", "last_token_ns"),
        "schedule_lag": np.where(ints["attempt"] > 1, np.nan, _span_ms(selected, "scheduled_ns", "sent_ns")),
    }
    assert tuple(values_ms) == tuple(PER_REQUEST)  # the same metrics, in the same order
    completion = np.where(has("done_ns"), ints["done_ns"],
                          np.where(has("last_token_ns"), ints["last_token_ns"], ints["sent_ns"]))
    has_completion = has("done_ns") | has("last_token_ns") | has("sent_ns")
    return Columns(
        ok=selected.status_is("ok"),
        stream=selected.bools["stream"],
        completion_ns=np.where(has_completion, completion, 0),
        has_completion=has_completion,
        sent_ns=np.where(has("sent_ns"), ints["sent_ns"], -1),
        prompt_tokens=np.maximum(ints["prompt_tokens"], 0),  # NULL is negative: 0
        cached_prompt_tokens=np.maximum(ints["cached_prompt_tokens"], 0),
        values_ms=values_ms,
        chunks=chunks,
    )


def table_chunks(table: RecordTable, rows: np.ndarray) -> TableChunks:
    """``columns_of_table(table, rows).chunks`` alone: for what reads only the chunks (the
    tokens-over-time plot), without the per-request latencies."""
    return _table_chunks(table, rows, table.records_only(rows) if not rows.all() else table)[0]


def _table_chunks(table: RecordTable, rows: np.ndarray, selected: RecordTable) -> tuple[TableChunks, np.ndarray]:
    """The chunks of the rows ``rows`` of ``table`` (``selected``: those rows), a record with no
    chunk list but a last token and an output count read as one chunk; and each row's output count."""
    chunks = TableChunks(table, rows, np.zeros(len(selected), bool), np.zeros(0, np.int64), np.zeros(0, np.int64))
    count = output_token_counts(selected, chunks.token_sum)
    one = (selected.chunk_count == 0) & selected.has("last_token_ns") & (count != NULL) & (count != 0)
    chunks.one, chunks.one_ns, chunks.one_tokens = one, selected.ints["last_token_ns"], count
    return chunks, count


def output_token_counts(table: RecordTable, chunk_sums: Callable[[], np.ndarray] | None = None) -> np.ndarray:
    """``chunks.output_token_count`` per record (int64, NULL for None). ``chunk_sums``: gives each
    record's chunk tokens summed, read only when some record has neither output count (by
    default summed from ``table``'s own chunks)."""
    chunked = table.chunk_count > 0
    has_count = table.has("output_tokens") | table.has("output_tokens_client")
    chunk_sum = np.full(len(table), NULL, dtype=np.int64)
    if (chunked & ~has_count).any():
        if chunk_sums is None:
            chunk_sums = lambda: TableChunks(table, np.ones(len(table), bool), np.zeros(len(table), bool),
                                             np.zeros(0, np.int64), np.zeros(0, np.int64)).token_sum()
        chunk_sum[chunked] = chunk_sums()[chunked]
    client = np.where(table.has("output_tokens_client"), table.ints["output_tokens_client"], chunk_sum)
    return np.where(table.has("output_tokens"), table.ints["output_tokens"], client)


def _span_ms(table: RecordTable, start: str, end: str) -> np.ndarray:
    both = table.has(start) & table.has(end)
    with np.errstate(over="ignore"):  # NULL stamps give garbage where `both` is False
        span = (table.ints[end] - table.ints[start]) / _NS_PER_MS
    return np.where(both, span, np.nan)


def _tpot_ms(table: RecordTable, count: np.ndarray) -> np.ndarray:
    defined = table.bools["stream"] & (count != NULL) & (count > 1)
    span = _span_ms(table, "first_token_ns", "last_token_ns")
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(defined, span / np.where(defined, count - 1, 1), np.nan)
