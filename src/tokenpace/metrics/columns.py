"""The measured records of a run as numpy columns, computed once and shared by every section.

Per-request latencies are computed once per record with the functions of ``latency`` (so the
summary and the per-request API cannot disagree) and stored as float64 with NaN for "undefined";
chunks are flattened once into a ``ChunkTable``. Throughput, goodput and latency statistics then
work on whole arrays, which keeps a 100k-request x 256-token run to seconds.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from tokenpace.metrics.chunks import ChunkTable, chunk_table
from tokenpace.metrics.latency import PER_REQUEST
from tokenpace.metrics.window import completion_ns
from tokenpace.record import RequestRecord


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
    chunks: ChunkTable

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
