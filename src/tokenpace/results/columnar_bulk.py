"""A finished run's records into columnar parts in bulk: column by column rather than record by
record (``columnar.Batch.add``), cut into the same parts, with the same arrays and so the same
bytes. What ``write_table`` does with a list of records (``tokenpace sim``: ``Batch.add``'s
per-field loops were half the columnar file's time for 20,000 records, RESULTS.md 4h).

Each field is read for every record of a part in one C call (``map`` over an ``attrgetter``) and
converted to its array in one NumPy call. A column with a value of a type the fast path does not
expect is converted as ``Batch.add`` converts it, value by value.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterator, Sequence
from operator import attrgetter

import numpy as np

from tokenpace.chunk_runs import chunk_times
from tokenpace.record import RequestRecord
from tokenpace.recordtable import BOOL_FIELDS, FLOAT_FIELDS, INT_FIELDS, NULL, TEXT_FIELDS, RecordTable, Text

_GET_CHUNK_NS = attrgetter("chunk_ns")
_GET_CHUNK_TOKENS = attrgetter("chunk_tokens")


def part_bounds(counts: Sequence[int], batch_records: int, batch_chunks: int) -> list[tuple[int, int]]:
    """Where ``ColumnarWriter`` cuts records with these chunk counts into parts: a part ends after
    the record that brings it to ``batch_records`` records or ``batch_chunks`` chunks."""
    bounds, start, chunks = [], 0, 0
    for i, count in enumerate(counts):
        chunks += count
        if i + 1 - start >= batch_records or chunks >= batch_chunks:
            bounds.append((start, i + 1))
            start, chunks = i + 1, 0
    if start < len(counts):
        bounds.append((start, len(counts)))
    return bounds


def bulk_parts(records: Sequence[RequestRecord], batch_records: int, batch_chunks: int) -> Iterator[RecordTable]:
    """The tables ``ColumnarWriter.add`` would seal for ``records`` added one by one, part by part
    (one part's arrays made at a time)."""
    chunk_lists = list(map(_GET_CHUNK_NS, records))
    counts = list(map(len, chunk_lists))
    ones_memo: dict[int, bool] = {}
    for start, end in part_bounds(counts, batch_records, batch_chunks):
        part = records[start:end]
        yield RecordTable(
            ints={k: _ints(list(map(attrgetter(k), part))) for k in INT_FIELDS},
            bools={k: np.array(list(map(bool, map(attrgetter(k), part))), dtype=bool) for k in BOOL_FIELDS},
            floats={k: _floats(list(map(attrgetter(k), part))) for k in FLOAT_FIELDS},
            texts={k: _text(list(map(attrgetter(k), part))) for k in TEXT_FIELDS},
            chunk_count=np.array(counts[start:end], dtype=np.int64),
            chunk_ns=chunk_times(chunk_lists[start:end]),
            chunk_tokens=_chunk_tokens(part, counts[start:end], ones_memo))


def _ints(values: list) -> np.ndarray:
    if None in values:
        values = [NULL if v is None else v for v in values]
    try:
        return np.array(values, dtype=np.int64)
    except (TypeError, ValueError):  # as Batch.add: a whole float (3.0) through int()
        return np.array([int(v) for v in values], dtype=np.int64)


def _floats(values: list) -> np.ndarray:
    return np.array([np.nan if v is None else float(v) for v in values], dtype=np.float64)


def _text(values: list) -> Text:
    """Codes in the order each value first occurs in the part (``Batch.add``'s vocabulary)."""
    seen = dict.fromkeys(values)
    if all(type(v) is str or v is None for v in seen):
        vocab = [v for v in seen if v is not None]
        code = {v: i for i, v in enumerate(vocab)}
        code[None] = -1
        return Text(np.fromiter(map(code.__getitem__, values), dtype=np.int32, count=len(values)), vocab)
    lookup: dict[str, int] = {}
    codes = [-1 if v is None else lookup.setdefault(str(v), len(lookup)) for v in values]
    return Text(np.array(codes, dtype=np.int32), list(lookup))


def _chunk_tokens(part: Sequence[RequestRecord], counts: list[int], ones_memo: dict[int, bool]) -> np.ndarray:
    """Each record's chunk tokens, or ones where ``Batch.add`` writes ones: a list of a length
    other than its chunks', or a list of ones (a simulated run shares one such list between its
    records of one length: each distinct list is counted once)."""
    column = array("i")
    ones_run = 0
    for tokens, n in zip(map(_GET_CHUNK_TOKENS, part), counts):
        if type(tokens) is list and len(tokens) == n:
            ones = ones_memo.get(id(tokens))
            if ones is None:
                ones = ones_memo[id(tokens)] = tokens.count(1) == n
        else:
            ones = len(tokens) != n
        if ones:
            ones_run += n
            continue
        if ones_run:
            column.extend(_ONE * ones_run)
            ones_run = 0
        if type(tokens) is list:
            column.fromlist(tokens)
        else:
            column.extend(tokens)
    if ones_run:
        column.extend(_ONE * ones_run)
    return np.frombuffer(column, dtype=np.int32) if len(column) else np.zeros(0, np.int32)


_ONE = array("i", [1])
