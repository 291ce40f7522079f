"""Many ``RequestRecord``s as typed arrays: one array per field, and the chunks of every record
flattened into two arrays. What the summary, the reports and the columnar records file work on,
without one Python object per request or per token.

Encoding, one rule per kind of field:

- integers (timestamps in ns, token counts, ids): int64, ``NULL`` (the smallest int64) for None;
- booleans: bool; ``retry_after_s``: float64, NaN for None;
- text from a small set (status, API, count sources, error kind and message, finish reason):
  int32 codes into a vocabulary, -1 for None;
- chunks: ``chunk_count`` per record (its ``chunk_ns`` length), then every record's ``chunk_ns``
  (int64) and ``chunk_tokens`` (int32) one after another, in record order. A record whose
  ``chunk_tokens`` does not have one entry per chunk gets one token per chunk, as the metrics read
  it (``metrics.chunks.record_chunks``).

Kept out (they stay in the JSONL journal): ``request_id``, ``server_timing`` and ``prompt_hash_chain``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from itertools import chain

import numpy as np

from tokenpace.chunk_runs import chunk_times
from tokenpace.record import RequestRecord

NULL = np.iinfo(np.int64).min
# Chunks a block of ``chunk_blocks``: 3 MB of stamps and tokens. Small enough that the dozen
# temporaries a pass makes of a block stay in the CPU cache and are reused by the allocator; at 2M
# chunks a block the summary of 1M x 128 took twice the CPU time, a third of it the kernel
# handing out fresh pages (RESULTS 17d).
BLOCK_CHUNKS = 1 << 18

INT_FIELDS = ("index", "attempt", "requested_input_tokens", "requested_output_tokens", "prefix_group",
              "session", "turn", "scheduled_ns", "sent_ns", "first_token_ns", "first_content_ns",
              "first_reasoning_ns", "first_tool_call_ns", "last_token_ns", "done_ns", "prompt_tokens",
              "cached_prompt_tokens", "cache_write_prompt_tokens", "output_tokens", "reasoning_tokens",
              "output_tokens_client", "http_status")
BOOL_FIELDS = ("stream", "warmup", "retried")
FLOAT_FIELDS = ("retry_after_s",)
TEXT_FIELDS = ("api", "status", "chunk_tokens_source", "prompt_tokens_source", "output_tokens_source",
               "error_kind", "error_message", "finish_reason", "model")


@dataclass
class Text:
    """A text column: ``codes`` (int32, -1 for None) into ``vocab``."""

    codes: np.ndarray
    vocab: list[str]

    def code_of(self, value: str) -> int:
        """The code of ``value``; -2 (matches nothing) when it does not occur."""
        try:
            return self.vocab.index(value)
        except ValueError:
            return -2

    def values(self) -> list[str | None]:
        vocab = self.vocab
        return [None if c < 0 else vocab[c] for c in self.codes.tolist()]

    def __getitem__(self, key) -> Text:
        return Text(self.codes[key], self.vocab)


class _Selected(Mapping):
    """The columns of ``columns`` at the rows set in ``mask``, selected on each read (not kept)."""

    def __init__(self, columns: Mapping, mask: np.ndarray) -> None:
        self._columns, self._mask = columns, mask

    def __getitem__(self, name: str):
        return self._columns[name][self._mask]

    def __contains__(self, name: object) -> bool:
        return name in self._columns

    def __iter__(self) -> Iterator[str]:
        return iter(self._columns)

    def __len__(self) -> int:
        return len(self._columns)


@dataclass
class RecordTable:
    ints: dict[str, np.ndarray]
    bools: dict[str, np.ndarray]
    floats: dict[str, np.ndarray]
    texts: dict[str, Text]
    chunk_count: np.ndarray  # int64 per record
    chunk_ns: np.ndarray  # int64, all records' chunks in order
    chunk_tokens: np.ndarray  # int32, aligned with chunk_ns
    # When set, the chunks are still on disk and ``chunk_ns``/``chunk_tokens`` are empty: a callable
    # yielding them block by block as ``chunk_blocks`` does (``results.columnar_read.read_table``).
    chunk_source: Callable[[], Iterator[tuple[int, np.ndarray, np.ndarray, np.ndarray]]] | None = None
    # When set (a columnar file read with its chunks on disk): the table's rows as consecutive
    # tables of about the given number of rows each (whole parts), each with its own chunk source:
    # what a summary of a long run reads instead of whole columns (``metrics.summary_blocks``).
    row_blocks: Callable[[int], Iterator[RecordTable]] | None = None

    def __len__(self) -> int:
        return int(self.chunk_count.size)

    def __getattr__(self, name: str) -> np.ndarray:
        for group in ("ints", "bools", "floats"):
            columns = self.__dict__.get(group) or {}
            if name in columns:
                return columns[name]
        raise AttributeError(name)

    def has(self, name: str) -> np.ndarray:
        """Per record: the integer field ``name`` is not None."""
        return self.ints[name] != NULL

    @property
    def measured(self) -> np.ndarray:
        """``RequestRecord.measured``: not warmup, not a retried attempt, and sent."""
        return ~self.bools["warmup"] & ~self.bools["retried"] & self.has("sent_ns")

    def status_is(self, status: str) -> np.ndarray:
        text = self.texts["status"]
        return text.codes == text.code_of(status)

    def chunk_offsets(self) -> np.ndarray:
        """Where each record's chunks start in ``chunk_ns`` (one more entry: the end)."""
        offsets = np.zeros(self.chunk_count.size + 1, dtype=np.int64)
        np.cumsum(self.chunk_count, out=offsets[1:])
        return offsets

    def chunk_blocks(self, max_chunks: int = BLOCK_CHUNKS
                     ) -> Iterator[tuple[int, np.ndarray, np.ndarray, np.ndarray]]:
        """The chunks of consecutive records, block by block and in order: (first record, their
        ``chunk_count``, ``chunk_ns``, ``chunk_tokens``), about ``max_chunks`` chunks a block (at
        least one record). From disk one part at a time when the chunks were left there."""
        if self.chunk_source is None:
            yield from _blocks(0, self.chunk_count, self.chunk_ns, self.chunk_tokens, max_chunks)
            return
        for row, counts, ns, tokens in self.chunk_source():
            yield from _blocks(row, counts, ns, tokens, max_chunks)

    def load_chunks(self) -> RecordTable:
        """This table with its chunks in memory (read from disk when they were left there)."""
        if self.chunk_source is None:
            return self
        blocks = list(self.chunk_blocks())
        return RecordTable(ints=self.ints, bools=self.bools, floats=self.floats, texts=self.texts,
                           chunk_count=self.chunk_count,
                           chunk_ns=np.concatenate([b[2] for b in blocks] or [np.zeros(0, np.int64)]),
                           chunk_tokens=np.concatenate([b[3] for b in blocks] or [np.zeros(0, np.int32)]))

    def take(self, mask: np.ndarray) -> RecordTable:
        """The records where ``mask`` (one bool per record) is set, in order, their chunks in memory
        (only theirs read, when the chunks were left on disk)."""
        if mask.all():
            return self.load_chunks()
        if self.chunk_source is not None:
            chunk_ns, chunk_tokens = self._gather_chunks(np.flatnonzero(mask))
        else:
            chunk_mask = np.repeat(mask, self.chunk_count)
            chunk_ns, chunk_tokens = self.chunk_ns[chunk_mask], self.chunk_tokens[chunk_mask]
        return RecordTable(
            ints={k: v[mask] for k, v in self.ints.items()},
            bools={k: v[mask] for k, v in self.bools.items()},
            floats={k: v[mask] for k, v in self.floats.items()},
            texts={k: v[mask] for k, v in self.texts.items()},
            chunk_count=self.chunk_count[mask], chunk_ns=chunk_ns, chunk_tokens=chunk_tokens)

    def _gather_chunks(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The chunks of the records ``rows`` (ascending indices) from ``chunk_source``: only their
        slices are read from each part (an even subsample of a run on disk touches a few pages of
        each part, not every chunk)."""
        ns_parts, token_parts = [np.zeros(0, np.int64)], [np.zeros(0, np.int32)]
        for first, counts, ns, tokens in self.chunk_source():
            lo, hi = np.searchsorted(rows, [first, first + counts.size])
            if lo == hi:
                continue
            local = rows[lo:hi] - first
            lengths = counts[local]
            starts = np.zeros(counts.size + 1, dtype=np.int64)
            np.cumsum(counts, out=starts[1:])
            before = np.zeros(local.size, dtype=np.int64)
            np.cumsum(lengths[:-1], out=before[1:])
            at = np.repeat(starts[local] - before, lengths) + np.arange(int(lengths.sum()))
            ns_parts.append(np.asarray(ns[at]))
            token_parts.append(np.asarray(tokens[at]))
        return np.concatenate(ns_parts), np.concatenate(token_parts)

    def records_only(self, mask: np.ndarray) -> RecordTable:
        """The per-record columns (``chunk_count`` included) of the records where ``mask`` is set,
        without their chunks (``chunk_ns`` and ``chunk_tokens`` empty): for what reads no chunk.
        Every record set: this table itself (no copy)."""
        if mask.all():
            return self
        return RecordTable(
            ints={k: v[mask] for k, v in self.ints.items()},
            bools={k: v[mask] for k, v in self.bools.items()},
            floats={k: v[mask] for k, v in self.floats.items()},
            texts={k: v[mask] for k, v in self.texts.items()},
            chunk_count=self.chunk_count[mask], chunk_ns=np.zeros(0, np.int64),
            chunk_tokens=np.zeros(0, np.int32))

    def records_view(self, mask: np.ndarray) -> RecordTable:
        """``records_only(mask)`` whose columns are selected when read, each time, never all at
        once: for whole-column work that reads each column a few times (the summary), so that the
        measured rows of a run with warmup are not a second copy of its columns. Every record set:
        this table itself."""
        if mask.all():
            return self
        return RecordTable(
            ints=_Selected(self.ints, mask), bools=_Selected(self.bools, mask),
            floats=_Selected(self.floats, mask), texts=_Selected(self.texts, mask),
            chunk_count=self.chunk_count[mask], chunk_ns=np.zeros(0, np.int64),
            chunk_tokens=np.zeros(0, np.int32))

    @classmethod
    def from_records(cls, records: Sequence[RequestRecord], *, chunks: bool = True) -> RecordTable:
        """``chunks=False``: the per-record columns only (``chunk_ns``/``chunk_tokens`` empty), for
        what reads no chunk."""
        n = len(records)
        ints = {}
        for name in INT_FIELDS:
            values = [getattr(r, name) for r in records]
            ints[name] = np.fromiter((NULL if v is None else v for v in values), dtype=np.int64, count=n)
        bools = {name: np.fromiter((bool(getattr(r, name)) for r in records), dtype=bool, count=n)
                 for name in BOOL_FIELDS}
        floats = {name: np.fromiter((np.nan if (v := getattr(r, name)) is None else v for r in records),
                                    dtype=np.float64, count=n) for name in FLOAT_FIELDS}
        texts = {name: _text(getattr(r, name) for r in records) for name in TEXT_FIELDS}
        counts = np.fromiter((len(r.chunk_ns) for r in records), dtype=np.int64, count=n)
        if not chunks:
            return cls(ints=ints, bools=bools, floats=floats, texts=texts, chunk_count=counts,
                       chunk_ns=np.zeros(0, np.int64), chunk_tokens=np.zeros(0, np.int32))
        total = int(counts.sum())
        tokens = (r.chunk_tokens if len(r.chunk_tokens) == len(r.chunk_ns) else [1] * len(r.chunk_ns)
                  for r in records)
        return cls(ints=ints, bools=bools, floats=floats, texts=texts, chunk_count=counts,
                   chunk_ns=chunk_times([r.chunk_ns for r in records]),
                   chunk_tokens=np.fromiter(chain.from_iterable(tokens), dtype=np.int32, count=total))

    @classmethod
    def concat(cls, tables: Sequence[RecordTable]) -> RecordTable:
        if len(tables) == 1:
            return tables[0]
        if not tables:
            return cls.from_records([])
        tables = [t.load_chunks() for t in tables]
        return cls.concat_columns(tables, chunks=True)

    @classmethod
    def concat_columns(cls, tables: Sequence[RecordTable], *, chunks: bool) -> RecordTable:
        """Two or more tables' per-record columns end to end; their chunks too when ``chunks``
        (loaded), else none."""
        first = tables[0]
        return cls(
            ints={k: np.concatenate([t.ints[k] for t in tables]) for k in first.ints},
            bools={k: np.concatenate([t.bools[k] for t in tables]) for k in first.bools},
            floats={k: np.concatenate([t.floats[k] for t in tables]) for k in first.floats},
            texts={k: _concat_texts([t.texts[k] for t in tables]) for k in first.texts},
            chunk_count=np.concatenate([t.chunk_count for t in tables]),
            chunk_ns=np.concatenate([t.chunk_ns for t in tables]) if chunks else np.zeros(0, np.int64),
            chunk_tokens=np.concatenate([t.chunk_tokens for t in tables]) if chunks else np.zeros(0, np.int32))


def _blocks(first: int, counts: np.ndarray, ns: np.ndarray, tokens: np.ndarray, max_chunks: int):
    """``RecordTable.chunk_blocks`` of the records from ``first`` whose chunks are ``ns``/``tokens``."""
    if ns.size <= max_chunks:
        yield first, counts, ns, tokens
        return
    offsets = np.zeros(counts.size + 1, dtype=np.int64)
    np.cumsum(counts, out=offsets[1:])
    row, n = 0, counts.size
    while row < n:
        end = int(np.searchsorted(offsets, offsets[row] + max_chunks, side="right")) - 1
        end = min(max(end, row + 1), n)
        a, b = offsets[row], offsets[end]
        yield first + row, counts[row:end], ns[a:b], tokens[a:b]
        row = end


def _text(values: Iterable[str | None]) -> Text:
    vocab: dict[str, int] = {}
    codes = [-1 if v is None else vocab.setdefault(str(v), len(vocab)) for v in values]
    return Text(np.array(codes, dtype=np.int32), list(vocab))


def _concat_texts(parts: Sequence[Text]) -> Text:
    vocab: dict[str, int] = {}
    out = []
    for part in parts:
        remap = np.array([vocab.setdefault(v, len(vocab)) for v in part.vocab] + [-1], dtype=np.int32)
        out.append(remap[part.codes])  # code -1 picks the last entry: -1
    return Text(np.concatenate(out) if out else np.zeros(0, dtype=np.int32), list(vocab))
