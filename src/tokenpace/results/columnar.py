"""The columnar records file: a run's records as typed arrays (``tokenpace.recordtable``), what
reports read fast. The JSONL beside it stays the crash-safe, human-readable journal.

Layout: a directory ``<run>.columns/`` of parts ``part-000000.npz``, ``part-000001.npz``, ... each
an uncompressed NumPy archive of one batch of records, written whole (a temporary file, then a
rename) as soon as the batch is full. A run killed mid-way leaves whole parts only; the JSONL holds
every record, so nothing is lost either way. Why NumPy archives and not Arrow/Parquet: numpy is
already a core dependency and pyarrow only an optional extra, and the summary works on numpy
arrays anyway; an uncompressed part reads back at disk speed with no decoding.

Memory while writing: at most one batch (``BATCH_RECORDS`` requests or ``BATCH_CHUNKS`` chunks,
whichever fills first) is held, in array columns (``Batch``); every earlier batch is on disk. So the
writer's memory does not grow with the run's length.
"""

from __future__ import annotations

import contextlib
import ctypes
import io
import mmap
import os
import shutil
from array import array
import struct
import zipfile
from collections import deque
from collections.abc import Iterable, Mapping
from operator import attrgetter
from pathlib import Path

import numpy as np
import orjson

from tokenpace.errors import NotSaved, UsageError
from tokenpace.files import write_whole
from tokenpace.record import RequestRecord
from tokenpace.recordtable import (BLOCK_CHUNKS, BOOL_FIELDS, FLOAT_FIELDS, INT_FIELDS, NULL, TEXT_FIELDS,
                                   RecordTable, Text, _blocks)

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
        with zipfile.ZipFile(buffer, "w", zipfile.ZIP_STORED) as archive:  # np.load reads it as .npz
            for name, array in arrays.items():
                # A fixed member time (np.savez stamps the clock): same records, same bytes.
                with archive.open(zipfile.ZipInfo(name + ".npy", _EPOCH), "w", force_zip64=True) as fh:
                    np.lib.format.write_array(fh, np.asanyarray(array), allow_pickle=False)
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


def write_table(path: str | Path, records: Iterable[RequestRecord] | RecordTable) -> Path:
    """The whole columnar file of a finished run; on a failed write (NotSaved) nothing is left."""
    path = Path(path)
    try:
        writer = ColumnarWriter(path)
        if isinstance(records, RecordTable):
            writer.add_table(records)
        else:
            for record in records:
                writer.add(record)
        writer.close()
    except NotSaved:
        shutil.rmtree(path, ignore_errors=True)
        raise
    return path


def is_complete(path: str | Path) -> bool:
    """A columnar directory whose writer closed it (its manifest is there)."""
    return (Path(path) / MANIFEST).is_file()


def read_table(path: str | Path, *, chunks: bool = True) -> RecordTable:
    """Every part of a columnar records directory, in order, as one table. The result arrays are
    allocated once at their full size and filled part by part (no second copy of the run).
    ``chunks=False`` leaves the chunks on disk: the table reads them one part at a time when asked
    (``RecordTable.chunk_blocks``), so a summary of 10^8 chunks never holds them all."""
    path = Path(path)
    if not is_complete(path):
        raise UsageError(f"{path} is not a whole columnar records directory (no {MANIFEST}): "
                         "read the records JSONL beside it")
    manifest = orjson.loads((path / MANIFEST).read_bytes())
    if manifest.get("format", 0) > FORMAT:
        raise UsageError(f"{path} has columnar format {manifest['format']}; this tokenpace reads up "
                         f"to {FORMAT}: upgrade tokenpace")
    return read_parts(path, int(manifest["parts"]), chunks=chunks)


def read_parts(path: str | Path, parts_count: int, *, chunks: bool = True) -> RecordTable:
    """The first ``parts_count`` parts of a columnar directory as one table, manifest or not (what
    a writer that could not finish had written: ``results.spool``)."""
    path = Path(path)
    parts = [path / _PART.format(i) for i in range(parts_count)]
    counts = []
    for name in parts:  # one part open at a time: a long run has thousands
        counts.append(_mapped(name, ("chunk_count",), read=True)[0])
    n = sum(c.size for c in counts)
    total = int(sum(int(c.sum()) for c in counts))
    # Without the chunks (a summary, a report), the int and float columns stay in the part files and
    # are read when asked (``_ReadOnRead``): most of a request's bytes, never all held at once.
    layouts = _part_layouts(parts, counts) if not chunks else None
    table = RecordTable(
        ints=({k: np.empty(n, np.int64) for k in INT_FIELDS} if layouts is None
              else _ReadOnRead(layouts, INT_FIELDS, "int.", np.int64, NULL, n)),
        bools={k: np.empty(n, bool) for k in BOOL_FIELDS},
        floats=({k: np.empty(n, np.float64) for k in FLOAT_FIELDS} if layouts is None
                else _ReadOnRead(layouts, FLOAT_FIELDS, "float.", np.float64, np.nan, n)),
        texts={}, chunk_count=np.concatenate(counts) if counts else np.zeros(0, np.int64),
        chunk_ns=np.empty(total if chunks else 0, np.int64),
        chunk_tokens=np.empty(total if chunks else 0, np.int32),
        chunk_source=None if chunks else lambda: _chunk_parts(parts, counts))
    vocab: dict[str, dict[str, int]] = {k: {} for k in TEXT_FIELDS}
    codes = {k: np.empty(n, np.int32) for k in TEXT_FIELDS}
    row = chunk = 0
    for name, count in zip(parts, counts):
        size, n_chunks = count.size, int(count.sum())
        # copied once into the table's arrays (the int and float columns only when not read lazily)
        part = _members(name, chunks=chunks, columns=layouts is None)
        # A field newer than the part (written by an earlier version) reads as None for every row.
        for group, columns, none in (("int", table.ints, NULL), ("bool", table.bools, False),
                                     ("float", table.floats, np.nan)):
            if isinstance(columns, _ReadOnRead):
                continue
            for k, out in columns.items():
                out[row:row + size] = part.get(f"{group}.{k}", none)
        for k in TEXT_FIELDS:
            if f"text.{k}" not in part:
                codes[k][row:row + size] = -1
                continue
            words = part[f"vocab.{k}"].tolist()
            remap = np.array([vocab[k].setdefault(w, len(vocab[k])) for w in words] + [-1], np.int32)
            codes[k][row:row + size] = remap[part[f"text.{k}"]]
        if chunks:
            table.chunk_ns[chunk:chunk + n_chunks] = part["chunk_ns"]
            table.chunk_tokens[chunk:chunk + n_chunks] = part["chunk_tokens"]
        del part
        row, chunk = row + size, chunk + n_chunks
    table.texts = {k: Text(codes[k], list(vocab[k])) for k in TEXT_FIELDS}
    return table


def _part_layouts(parts: list[Path], counts: list[np.ndarray]) -> list[tuple[Path, dict, int]] | None:
    """Per part: its file, where its int and float members lie in it, and its rows; None when a
    part has a compressed member (then the columns are read whole, as with the chunks)."""
    out = []
    for name, count in zip(parts, counts):
        with zipfile.ZipFile(name) as archive:
            members = tuple(m.removesuffix(".npy") for m in archive.namelist()
                            if m.startswith(("int.", "float.")))
        layout = _layout(name, members)
        if layout is None:
            return None
        out.append((name, dict(zip(members, layout)), int(count.size)))
    return out


# Blocks handed out whose mapped pages are kept: worker threads may still be reading them.
_MAPPED_BLOCKS = 8


def _chunk_parts(parts: list[Path], counts: list[np.ndarray]):
    """``RecordTable.chunk_blocks`` of a columnar directory: one part's chunks at a time, mapped
    from the file rather than read into memory (a part's members are stored uncompressed), in
    blocks of ``BLOCK_CHUNKS``. The pages of a block are unmapped (``madvise``) a few blocks after
    it was handed out: they stay in the page cache, but not in this process's resident memory, so a
    pass over a run of any size (a simulation writes one part) holds a few blocks' pages, not a
    part's or the run's."""
    row = 0
    handed: deque = deque()
    for name, count in zip(parts, counts):
        ns, tokens = _mapped(name, ("chunk_ns", "chunk_tokens"))
        for block in _blocks(row, count, ns, tokens, BLOCK_CHUNKS):
            yield block
            handed.append(block)
            if len(handed) > _MAPPED_BLOCKS:
                _unmap_pages(*handed.popleft()[2:])
        row += count.size
    for block in handed:
        _unmap_pages(*block[2:])


_PAGE = mmap.PAGESIZE
_MADV_DONTNEED = getattr(mmap, "MADV_DONTNEED", None)
try:
    _madvise = ctypes.CDLL(None, use_errno=True).madvise
    _madvise.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int)
except (OSError, AttributeError):  # not on Linux: the pages stay until the part is closed
    _madvise = None


def _unmap_pages(*arrays: np.ndarray) -> None:
    """Drop the pages of mapped (``np.memmap``) arrays from this process: reading them again maps
    them again from the page cache, so this only ever costs time, never correctness."""
    if _madvise is None or _MADV_DONTNEED is None:
        return
    for array in arrays:
        if not isinstance(array, np.memmap) or not array.size:
            continue
        start = array.ctypes.data
        end = start + array.nbytes
        start -= start % _PAGE  # the first page may hold the previous block's end: mapped again if read
        _madvise(start, end - start, _MADV_DONTNEED)


def _members(path: Path, *, chunks: bool = True, columns: bool = True) -> dict[str, np.ndarray]:
    """Every member of a part by name (without ``.npy``): the per-record columns read into memory
    (a few kilobytes each), the chunks mapped as ``_mapped`` maps them; ``chunks=False`` leaves the
    chunks out, ``columns=False`` the int and float columns. Mapping costs a system call and a
    NumPy memmap per member (about 0.1 ms): for the fifty small members of each of a run's parts,
    reading them is several times cheaper."""
    with zipfile.ZipFile(path) as archive:
        names = tuple(n.removesuffix(".npy") for n in archive.namelist())
    missing = [f for f in ("chunk_ns", "chunk_tokens", "chunk_count") if f not in names]
    if missing:
        raise UsageError(f"{path} is not a columnar records part (no {missing[0]})")
    big = ("chunk_ns", "chunk_tokens")
    small = tuple(n for n in names if n not in big
                  and (columns or not n.startswith(("int.", "float."))))
    out = dict(zip(small, _mapped(path, small, read=True)))
    if chunks:
        out |= dict(zip(big, _mapped(path, big)))
    return out


def _layout(path: Path, names: tuple[str, ...]) -> list[tuple[int, tuple, bool, np.dtype]] | None:
    """Where each member's array lies in a part file: (offset, shape, Fortran order, dtype); None
    when a member is compressed (a part written by another tool: read the usual way)."""
    with zipfile.ZipFile(path) as archive:
        infos = [archive.getinfo(name + ".npy") for name in names]
    if any(info.compress_type != zipfile.ZIP_STORED for info in infos):
        return None
    out = []
    with open(path, "rb") as fh:
        for info in infos:
            fh.seek(info.header_offset)
            local = fh.read(30)  # the local file header: its name and extra field lengths end it
            name_length, extra_length = struct.unpack("<HH", local[26:30])
            fh.seek(info.header_offset + 30 + name_length + extra_length)
            version = np.lib.format.read_magic(fh)
            read_header = (np.lib.format.read_array_header_1_0 if version == (1, 0)
                           else np.lib.format.read_array_header_2_0)
            shape, fortran, dtype = read_header(fh)
            out.append((fh.tell(), shape, fortran, dtype))
    return out


def _mapped(path: Path, names: tuple[str, ...], *, read: bool = False) -> list[np.ndarray]:
    """Members of a part, memory-mapped read-only: a stored (uncompressed) zip member is the .npy
    file's bytes as they are, at an offset the member's local header gives. No copy and no
    checksum pass; a compressed member (a part written by another tool) is read the usual way.
    ``read``: read each member's bytes from that offset instead of mapping them (small members)."""
    layout = _layout(path, names)
    if layout is None:
        with np.load(path, allow_pickle=False) as part:
            return [part[name] for name in names]
    out = []
    with open(path, "rb") if read else contextlib.nullcontext() as fh:
        for offset, shape, fortran, dtype in layout:
            count = int(np.prod(shape))
            order = "F" if fortran else "C"
            if count == 0:
                out.append(np.empty(shape, dtype))
            elif read:
                fh.seek(offset)
                flat = np.frombuffer(fh.read(count * dtype.itemsize), dtype=dtype, count=count)
                out.append(flat.reshape(shape, order=order))
            else:
                out.append(np.memmap(path, dtype=dtype, mode="r", offset=offset, shape=shape,
                                     order=order))
    return out


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


def _read_into(path: Path, offset: int, out: np.ndarray) -> None:
    """``out.nbytes`` bytes of ``path`` from ``offset`` into ``out`` (contiguous)."""
    view = memoryview(out).cast("B")
    fd = os.open(path, os.O_RDONLY)
    try:
        done = 0
        while done < view.nbytes:
            got = os.preadv(fd, [view[done:]], offset + done)
            if got <= 0:
                raise UsageError(f"{path} ends inside a member: a truncated columnar part")
            done += got
    finally:
        os.close(fd)
