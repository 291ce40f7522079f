"""The columnar records file: a run's records as typed arrays (``tokenpace.recordtable``), what
reports read fast. The JSONL beside it stays the crash-safe, human-readable journal.

Layout: a directory ``<run>.columns/`` of parts ``part-000000.npz``, ``part-000001.npz``, ... each
an uncompressed NumPy archive of one batch of records, written whole (a temporary file, then a
rename) as soon as the batch is full. A run killed mid-way leaves whole parts only; the JSONL holds
every record, so nothing is lost either way. Why NumPy archives and not Arrow/Parquet: numpy is
already a core dependency and pyarrow only an optional extra, and the summary works on numpy
arrays anyway; an uncompressed part reads back at disk speed with no decoding. Reading: ``columnar_read``.

Memory while writing: at most one batch (``BATCH_RECORDS`` requests or ``BATCH_CHUNKS`` chunks,
whichever fills first) is held, in array columns (``Batch``); every earlier batch is on disk. So the
writer's memory does not grow with the run's length.
"""

from __future__ import annotations

import io
import shutil
import zipfile
from array import array
from collections.abc import Iterable, Sequence
from operator import attrgetter
from pathlib import Path

import numpy as np
import orjson

from tokenpace.errors import NotSaved
from tokenpace.files import write_whole
from tokenpace.record import RequestRecord
from tokenpace.recordtable import (BOOL_FIELDS, FLOAT_FIELDS, INT_FIELDS, NULL, TEXT_FIELDS, RecordTable, Text)
from tokenpace.results.columnar_bulk import bulk_parts
from tokenpace.results.columnar_parts import _chunk_parts

FORMAT = 1
BATCH_RECORDS = 4096
BATCH_CHUNKS = 131_072  # a part's arrays are made in a few ms
_PART = "part-{:06d}.npz"
_EPOCH = (1980, 1, 1, 0, 0, 0)
MANIFEST = "manifest.json"  # written last, by close(): the parts are the whole run


def columns_path(records_path: Path) -> Path:
    """``<stem>.columns`` beside ``<stem>.records.jsonl``."""
    return records_path.with_name(records_path.name.replace(".records.jsonl", ".columns"))


class Batch:
    """One part's records, field by field, as they come: each record's fields are appended to
    ``array.array`` columns (a few microseconds a record, like its JSONL line), so that sealing a
    full batch into a ``RecordTable`` is only a view of those buffers (``np.frombuffer``, no copy
    and no per-element work). That keeps the step that hands a batch on from ever pausing the
    event loop that stamps the requests (``results.spool``)."""

    def __init__(self) -> None:
        self.ints = {k: array("q") for k in INT_FIELDS}
        self.bools = {k: array("b") for k in BOOL_FIELDS}
        self.floats = {k: array("d") for k in FLOAT_FIELDS}
        self.texts: dict[str, tuple[array, dict[str, int]]] = {k: (array("i"), {}) for k in TEXT_FIELDS}
        self.chunk_count = array("q")
        self.chunk_ns = array("q")
        self.chunk_tokens = array("i")

    def __len__(self) -> int:
        return len(self.chunk_count)

    @property
    def chunks(self) -> int:
        return len(self.chunk_ns)

    def add(self, record: RequestRecord) -> None:
        # Each group's fields read in one C call (attrgetter), then appended column by column.
        for column, value in zip(self.ints.values(), _GET_INTS(record)):
            try:
                column.append(NULL if value is None else value)
            except TypeError:  # a whole float (3.0), as np.array(..., int64) took it
                column.append(int(value))
        for column, value in zip(self.bools.values(), _GET_BOOLS(record)):
            column.append(1 if value else 0)
        for column, value in zip(self.floats.values(), _GET_FLOATS(record)):
            column.append(np.nan if value is None else value)
        for (codes, vocab), value in zip(self.texts.values(), _GET_TEXTS(record)):
            codes.append(-1 if value is None else vocab.setdefault(str(value), len(vocab)))
        chunks = record.chunk_ns
        n = len(chunks)
        self.chunk_count.append(n)
        _append(self.chunk_ns, chunks)
        tokens = record.chunk_tokens
        if len(tokens) != n or (type(tokens) is list and tokens.count(1) == n):
            # One token per chunk (every simulated stream, most measured ones): the column's ones are
            # made by repeating one element in C rather than converted one by one from the list.
            self.chunk_tokens.extend(_ONE * n)
        else:
            _append(self.chunk_tokens, tokens)

    def seal(self) -> RecordTable:
        """The batch as a table: views of its buffers (the batch must not be added to after)."""
        return RecordTable(
            ints={k: _view(v, np.int64) for k, v in self.ints.items()},
            bools={k: _view(v, np.int8).view(bool) for k, v in self.bools.items()},
            floats={k: _view(v, np.float64) for k, v in self.floats.items()},
            texts={k: Text(_view(codes, np.int32), list(vocab)) for k, (codes, vocab) in self.texts.items()},
            chunk_count=_view(self.chunk_count, np.int64), chunk_ns=_view(self.chunk_ns, np.int64),
            chunk_tokens=_view(self.chunk_tokens, np.int32))


_ONE = array("i", [1])
# Every field of a group at once, in the order of the group's columns (Batch builds them from the
# same tuples). Each returns a tuple: the groups have more than one field.
_GET_INTS, _GET_BOOLS, _GET_FLOATS, _GET_TEXTS = (
    attrgetter(*fields) if len(fields) > 1 else (lambda r, _f=fields[0]: (getattr(r, _f),))
    for fields in (INT_FIELDS, BOOL_FIELDS, FLOAT_FIELDS, TEXT_FIELDS))


def _append(column: array, values) -> None:
    """``column.extend(values)``; from a list through ``array.fromlist``, which converts a list's
    integers about twice as fast as ``extend`` (5 million chunk times of a 20,000-request run:
    0.35 -> 0.15 CPU-s)."""
    if type(values) is list:
        column.fromlist(values)
    else:
        column.extend(values)


def _view(column: array, dtype) -> np.ndarray:
    return np.frombuffer(column, dtype=dtype) if len(column) else np.zeros(0, dtype)


class ColumnarWriter:
    """Append records as they finish; full batches go to disk as parts (module docstring)."""

    def __init__(self, path: str | Path, *, batch_records: int = BATCH_RECORDS,
                 batch_chunks: int = BATCH_CHUNKS):
        self.path = Path(path)
        if self.path.exists():
            shutil.rmtree(self.path)  # a rerun with the same --out replaces the old parts
        self.path.mkdir(parents=True)
        self.parts = 0
        self.count = 0  # records written to parts
        self.batch_records, self.batch_chunks = batch_records, batch_chunks
        self._batch = Batch()
        self.last_layout: dict[str, tuple] = {}  # the last part's members: where each one's data lies

    def add(self, record: RequestRecord) -> None:
        self._batch.add(record)
        if len(self._batch) >= self.batch_records or self._batch.chunks >= self.batch_chunks:
            self.flush()

    def add_table(self, table: RecordTable) -> None:
        """A batch already in columns (a simulator, a generator of synthetic runs)."""
        self.flush()
        self._write(table)

    def flush(self) -> None:
        if len(self._batch):
            table, self._batch = self._batch.seal(), Batch()
            self._write(table)

    def _write(self, table: RecordTable) -> None:
        arrays = {f"int.{k}": v for k, v in table.ints.items()}
        arrays |= {f"bool.{k}": v for k, v in table.bools.items()}
        arrays |= {f"float.{k}": v for k, v in table.floats.items()}
        for name, text in table.texts.items():
            arrays[f"text.{name}"] = text.codes
            arrays[f"vocab.{name}"] = np.array(text.vocab, dtype=np.str_)
        arrays |= {"chunk_count": table.chunk_count, "chunk_ns": table.chunk_ns,
                   "chunk_tokens": table.chunk_tokens, "format": np.array(FORMAT)}
        buffer = io.BytesIO()
        headers: dict[tuple, bytes] = {}
        # Where each member's data lies in the part (columnar_parts._layout's tuples), as written.
        self.last_layout = where = {}
        with zipfile.ZipFile(buffer, "w", zipfile.ZIP_STORED) as archive:  # np.load reads it as .npz
            for name, array in arrays.items():
                # A fixed member time (np.savez stamps the clock): same records, same bytes.
                with archive.open(zipfile.ZipInfo(name + ".npy", _EPOCH), "w", force_zip64=True) as fh:
                    array = np.asanyarray(array)
                    if _write_npy(fh, array, headers):
                        where[name] = (buffer.tell() - array.nbytes, array.shape, False, array.dtype)
        write_whole(self.path / _PART.format(self.parts), buffer.getbuffer(), what="the columnar records")
        self.parts += 1
        self.count += len(table)

    def close(self) -> None:
        """Write what is left, then the manifest: a directory without one is not a whole run."""
        self.flush()
        manifest = {"format": FORMAT, "records": self.count, "parts": self.parts}
        write_whole(self.path / MANIFEST, orjson.dumps(manifest), what="the columnar records")

    def __enter__(self) -> ColumnarWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _write_npy(fh, array: np.ndarray, headers: dict) -> bool:
    """``np.lib.format.write_array(fh, array)``, the same bytes: a contiguous array's header made
    once per dtype and shape (``headers``: a part's; its fifty members share a few), and its data
    written from its own buffer rather than copied out by ``tobytes`` first. True when the array's
    data went last, C-ordered, as one piece."""
    if array.dtype.hasobject or not array.flags.c_contiguous:
        np.lib.format.write_array(fh, array, allow_pickle=False)
        return False
    key = (array.dtype, array.shape)
    header = headers.get(key)
    if header is None:
        out = io.BytesIO()
        np.lib.format.write_array_header_1_0(out, np.lib.format.header_data_from_array_1_0(array))
        header = headers[key] = out.getvalue()
    fh.write(header)
    if array.size:
        fh.write(array.reshape(-1).view(np.uint8).data)
    return True


def write_table(path: str | Path, records: Iterable[RequestRecord] | RecordTable) -> Path:
    """The whole columnar file of a finished run; on a failed write (NotSaved) nothing is left.
    A sequence of records goes in the parts ``ColumnarWriter.add`` would make, built in bulk
    (``columnar_bulk``)."""
    path = Path(path)
    try:
        writer = ColumnarWriter(path)
        if isinstance(records, RecordTable):
            writer.add_table(records)
        elif isinstance(records, Sequence):  # a finished run's: column by column, the same parts
            for table in bulk_parts(records, writer.batch_records, writer.batch_chunks):
                writer.add_table(table)
        else:
            for record in records:
                writer.add(record)
        writer.close()
    except NotSaved:
        shutil.rmtree(path, ignore_errors=True)
        raise
    return path


def write_records_table(path: str | Path, records: Sequence[RequestRecord]) -> RecordTable:
    """``write_table(path, records)``, and the records as a table to summarize: their per-record
    columns as made for the parts (kept, a few hundred bytes a request), their chunks read back
    from the parts when asked (``RecordTable.chunk_source``). The same table as ``read_table(path,
    chunks=False)`` without parsing every member of every part again (0.06-0.10 CPU-s for
    20,000 requests), for a run the summary takes whole (up to ``metrics.summary.ROW_BLOCKS_ABOVE``
    requests: above, read it back with ``read_table``, which gives its row blocks)."""
    path = Path(path)
    kept: list[RecordTable] = []
    layouts: list | None = []
    try:
        writer = ColumnarWriter(path)
        for table in bulk_parts(records, writer.batch_records, writer.batch_chunks):
            writer.add_table(table)
            kept.append(_without_chunks(table))  # the chunks are on disk now
            part = path / _PART.format(writer.parts - 1)
            if layouts is not None and {"chunk_ns", "chunk_tokens"} <= writer.last_layout.keys():
                layouts.append((part, writer.last_layout, len(table)))
            else:
                layouts = None  # found in the part when read
        writer.close()
    except NotSaved:
        shutil.rmtree(path, ignore_errors=True)
        raise
    parts = [path / _PART.format(i) for i in range(len(kept))]
    counts = [t.chunk_count for t in kept]
    table = _concat_columns(kept)
    table.chunk_source = lambda: _chunk_parts(parts, counts, layouts=layouts)
    return table


def _without_chunks(table: RecordTable) -> RecordTable:
    return RecordTable(ints=table.ints, bools=table.bools, floats=table.floats, texts=table.texts,
                       chunk_count=table.chunk_count, chunk_ns=np.zeros(0, np.int64),
                       chunk_tokens=np.zeros(0, np.int32))


def _concat_columns(tables: list[RecordTable]) -> RecordTable:
    """The per-record columns of consecutive tables as one table (no chunks)."""
    if not tables:
        return _without_chunks(RecordTable.from_records([]))
    if len(tables) == 1:
        return tables[0]
    return RecordTable.concat_columns(tables, chunks=False)


# The read side lives in ``columnar_read``; its names stay importable from here (commands in
# benchmarks/RESULTS.md and older scripts import ``read_table`` from this module).
from tokenpace.results.columnar_read import is_complete, read_parts, read_table  # noqa: E402,F401
