"""A run's columnar parts opened without reading them (``columnar_read.read_table(...,
chunks=False)``): the int and float columns read from the part files each time one is asked for,
the bool and text columns and the chunk counts once when first asked for, and the rows as
consecutive tables of whole parts (``RecordTable.row_blocks``: how a summary of a long run reads
them, one block at a time).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

import numpy as np

from tokenpace.recordtable import BOOL_FIELDS, FLOAT_FIELDS, INT_FIELDS, NULL, TEXT_FIELDS, RecordTable, Text
from tokenpace.results.columnar_parts import _chunk_parts, _fill, _member, _read_into


class _PartsTable(RecordTable):
    """A table of a run's parts whose chunk counts (8 bytes a request) are read when first asked
    for: a summary by row blocks asks only for its length."""

    def __init__(self, n: int, load_counts, **fields) -> None:
        self._n, self._load_counts, self._chunk_count = n, load_counts, None
        super().__init__(chunk_count=None, **fields)

    @property
    def chunk_count(self) -> np.ndarray:
        if self._chunk_count is None:
            self._chunk_count = self._load_counts()
        return self._chunk_count

    @chunk_count.setter
    def chunk_count(self, value) -> None:
        self._chunk_count = value

    def __len__(self) -> int:
        return self._n


def _row_blocks(sizes: list[int], rows: int, block):
    """Consecutive tables of at least ``rows`` rows each (whole parts; the last may have fewer):
    ``block(start, end)``, the table of parts ``start`` to ``end`` (``sizes``: each part's rows)."""
    start = 0
    while start < len(sizes):
        end, size = start, 0
        while end < len(sizes) and (size < rows or end == start):
            size += sizes[end]
            end += 1
        yield block(start, end)
        start = end


def _table_laid(laid: list[tuple[Path, dict, int]], *, big: bool = True,
                chunk_count: np.ndarray | None = None) -> RecordTable:
    """``_table_of(parts, ..., chunks=False, big=big, chunk_count=chunk_count)`` from the parts'
    member layouts: each part opened once and each member read straight from where it lies
    (``os.preadv``)."""
    n = sum(size for _, _, size in laid)
    ints = {k: np.empty(n, np.int64) for k in INT_FIELDS} if big else {}
    bools = {k: np.empty(n, bool) for k in BOOL_FIELDS}
    floats = {k: np.empty(n, np.float64) for k in FLOAT_FIELDS} if big else {}
    codes = {k: np.empty(n, np.int32) for k in TEXT_FIELDS}
    vocab: dict[str, dict[str, int]] = {k: {} for k in TEXT_FIELDS}
    counts = []
    row = 0
    for path, where, size in laid:
        fd = os.open(path, os.O_RDONLY)
        try:
            # A field newer than the part (written by an earlier version) reads as None for every row.
            for group, columns, none in (("int", ints, NULL), ("bool", bools, False), ("float", floats, np.nan)):
                for k, out in columns.items():
                    _fill(fd, path, where.get(f"{group}.{k}"), out[row:row + size], none)
            if chunk_count is None:
                count = np.empty(size, np.int64)
                _fill(fd, path, where["chunk_count"], count, 0)
                counts.append(count)
            for k in TEXT_FIELDS:
                at = where.get(f"text.{k}")
                if at is None:
                    codes[k][row:row + size] = -1
                    continue
                part_codes = np.empty(size, np.int32)
                _fill(fd, path, at, part_codes, -1)
                words = _member(fd, where[f"vocab.{k}"]).tolist()
                remap = np.array([vocab[k].setdefault(w, len(vocab[k])) for w in words] + [-1], np.int32)
                codes[k][row:row + size] = remap[part_codes]
        finally:
            os.close(fd)
        row += size
    return RecordTable(ints=ints, bools=bools, floats=floats,
                       texts={k: Text(codes[k], list(vocab[k])) for k in TEXT_FIELDS},
                       chunk_count=(chunk_count if chunk_count is not None else np.concatenate(counts) if counts
                                    else np.zeros(0, np.int64)),
                       chunk_ns=np.zeros(0, np.int64), chunk_tokens=np.zeros(0, np.int32),
                       chunk_source=lambda: _chunk_parts([p for p, _, _ in laid], counts or None, layouts=laid))


class _LoadOnce:
    """The bool and text columns of a run's parts, read in together when one is first asked for
    and kept (3 + 36 bytes a request): what reads the table whole (reports, a run's load report)
    reads them many times; a summary by row blocks never asks."""

    def __init__(self, load) -> None:
        self._load, self._table = load, None

    def group(self, name: str, fields: tuple[str, ...]) -> Mapping:
        return _Group(self, name, fields)

    def columns(self, name: str) -> dict:
        if self._table is None:
            self._table = self._load()
        return getattr(self._table, name)


class _Group(Mapping):
    def __init__(self, owner: _LoadOnce, name: str, fields: tuple[str, ...]) -> None:
        self._owner, self._name, self._fields = owner, name, fields

    def __getitem__(self, key: str):
        if key not in self._fields:
            raise KeyError(key)
        return self._owner.columns(self._name)[key]

    def __contains__(self, key: object) -> bool:
        return key in self._fields

    def __iter__(self):
        return iter(self._fields)

    def __len__(self) -> int:
        return len(self._fields)


class _ReadOnRead(Mapping):
    """The per-request columns of one kind (``prefix``: ``int.`` or ``float.``) of a run's parts,
    read from the part files each time one is asked for and not kept: the summary reads each
    column a few times, so a run's columns are never all in this process's memory at once
    (``read_table(..., chunks=False)``). Each read opens each part and reads its member straight
    into the column (``os.preadv``): no part stays open or mapped (a long run has thousands)."""

    def __init__(self, parts: list[tuple[Path, dict, int]], names: tuple[str, ...], prefix: str,
                 dtype, none, n: int) -> None:
        self._parts, self._names, self._prefix = parts, names, prefix
        self._dtype, self._none, self._n = np.dtype(dtype), none, n

    def __getitem__(self, name: str) -> np.ndarray:
        if name not in self._names:
            raise KeyError(name)
        out = np.empty(self._n, self._dtype)
        row = 0
        for path, layout, size in self._parts:
            at = layout.get(self._prefix + name)
            if at is None or not size:  # a field newer than the part: None for every row
                out[row:row + size] = self._none
            else:
                offset, shape, fortran, dtype = at
                if dtype != self._dtype or fortran or tuple(shape) != (size,):  # not as this version writes
                    out[row:row + size] = np.fromfile(path, dtype, count=int(np.prod(shape)), offset=offset)
                else:
                    _read_into(path, offset, out[row:row + size])
            row += size
        return out

    def __contains__(self, name: object) -> bool:
        return name in self._names

    def __iter__(self):
        return iter(self._names)

    def __len__(self) -> int:
        return len(self._names)
