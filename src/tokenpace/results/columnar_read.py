"""Reading the columnar records file (``columnar``): a run's parts as one ``RecordTable``, the
per-request columns read from the part files when asked and the chunks mapped part by part, so
that a summary or a report of a long run never holds all of it.
"""

from __future__ import annotations

import contextlib
import ctypes
import mmap
import os
import struct
import zipfile
from collections import deque
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import orjson

from tokenpace.errors import UsageError
from tokenpace.recordtable import (BLOCK_CHUNKS, BOOL_FIELDS, FLOAT_FIELDS, INT_FIELDS, NULL, TEXT_FIELDS,
                                   RecordTable, Text, _blocks)
from tokenpace.results.columnar import _PART, FORMAT, MANIFEST


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
    a writer that could not finish had written: ``results.spool``).

    ``chunks=False`` (a summary, a report): nothing per request is read up front. The chunks stay
    on disk (``chunk_source``); the int and float columns are read from the part files each time
    one is asked for (``_ReadOnRead``); the bool and text columns (``_LoadOnce``) and the chunk
    counts (``_PartsTable``) are read once, when first asked for. The table also gives its rows as
    consecutive tables of whole parts (``RecordTable.row_blocks``): how a summary of a long run
    reads it, holding one block at a time."""
    path = Path(path)
    parts = [path / _PART.format(i) for i in range(parts_count)]
    layouts = None if chunks else _part_layouts(parts)
    if layouts is None:  # the chunks asked for, or a part written by another tool: read it all now
        counts = _counts(parts)
        table = _table_of(parts, counts, chunks=chunks)
        sizes = [c.size for c in counts]
    else:
        sizes = [size for _, _, size in layouts]
        n = sum(sizes)
        small = _LoadOnce(lambda: _table_of(parts, _split(table.chunk_count, sizes), chunks=False, big=False,
                                            chunk_count=table.chunk_count))  # the counts shared, not read twice
        table = _PartsTable(
            n, lambda: np.concatenate(_counts(parts)) if parts else np.zeros(0, np.int64),
            ints=_ReadOnRead(layouts, INT_FIELDS, "int.", np.int64, NULL, n),
            bools=small.group("bools", BOOL_FIELDS),
            floats=_ReadOnRead(layouts, FLOAT_FIELDS, "float.", np.float64, np.nan, n),
            texts=small.group("texts", TEXT_FIELDS),
            chunk_ns=np.zeros(0, np.int64), chunk_tokens=np.zeros(0, np.int32),
            chunk_source=lambda: _chunk_parts(parts))
    if not chunks:
        table.row_blocks = lambda rows: _row_blocks(parts, sizes, rows)
    return table


def _split(counts: np.ndarray, sizes: list[int]) -> list[np.ndarray]:
    """``counts`` cut into each part's (views)."""
    return np.split(counts, np.cumsum(sizes)[:-1]) if sizes else []


def _counts(parts: list[Path]) -> list[np.ndarray]:
    """Each part's ``chunk_count`` (one part open at a time: a long run has thousands)."""
    return [_mapped(name, ("chunk_count",), read=True)[0] for name in parts]


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


def _row_blocks(parts: list[Path], sizes: list[int], rows: int):
    """The parts as consecutive tables of at least ``rows`` rows each (whole parts; the last may
    have fewer), every column read in, the chunks left on disk."""
    start = 0
    while start < len(parts):
        end, size = start, 0
        while end < len(parts) and (size < rows or end == start):
            size += sizes[end]
            end += 1
        block = parts[start:end]
        yield _table_of(block, _counts(block), chunks=False)
        start = end


def _table_of(parts: list[Path], counts: list[np.ndarray], *, chunks: bool, big: bool = True,
              chunk_count: np.ndarray | None = None) -> RecordTable:
    """The parts as one table, every per-request column read in (``big=False``: only the bool and
    text ones, the int and float columns left empty); the chunks read too, or left on disk.
    ``chunk_count``: ``counts`` end to end, when the caller has them so."""
    n = sum(c.size for c in counts)
    total = int(sum(int(c.sum()) for c in counts))
    table = RecordTable(
        ints={k: np.empty(n, np.int64) for k in INT_FIELDS} if big else {},
        bools={k: np.empty(n, bool) for k in BOOL_FIELDS},
        floats={k: np.empty(n, np.float64) for k in FLOAT_FIELDS} if big else {},
        texts={}, chunk_count=(chunk_count if chunk_count is not None else np.concatenate(counts) if counts
                               else np.zeros(0, np.int64)),
        chunk_ns=np.empty(total if chunks else 0, np.int64),
        chunk_tokens=np.empty(total if chunks else 0, np.int32),
        chunk_source=None if chunks else lambda: _chunk_parts(parts, counts))
    vocab: dict[str, dict[str, int]] = {k: {} for k in TEXT_FIELDS}
    codes = {k: np.empty(n, np.int32) for k in TEXT_FIELDS}
    row = chunk = 0
    for name, count in zip(parts, counts):
        size, n_chunks = count.size, int(count.sum())
        part = _members(name, chunks=chunks, columns=big)  # copied once into the table's arrays
        # A field newer than the part (written by an earlier version) reads as None for every row.
        for group, columns, none in (("int", table.ints, NULL), ("bool", table.bools, False),
                                     ("float", table.floats, np.nan)):
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


def _part_layouts(parts: list[Path]) -> list[tuple[Path, dict, int]] | None:
    """Per part: its file, where its int and float members lie in it, and its rows (from its
    ``chunk_count`` member's header); None when a part has a compressed member (then the columns
    are read whole, as with the chunks)."""
    out = []
    for name in parts:
        with zipfile.ZipFile(name) as archive:
            members = tuple(m.removesuffix(".npy") for m in archive.namelist()
                            if m.startswith(("int.", "float.")) or m == "chunk_count.npy")
        if "chunk_count" not in members:
            raise UsageError(f"{name} is not a columnar records part (no chunk_count)")
        layout = _layout(name, members)
        if layout is None:
            return None
        where = dict(zip(members, layout))
        out.append((name, where, int(np.prod(where["chunk_count"][1]))))
    return out


# Blocks handed out whose mapped pages are kept: worker threads may still be reading them.
_MAPPED_BLOCKS = 8


def _chunk_parts(parts: list[Path], counts: list[np.ndarray] | None = None):
    """``RecordTable.chunk_blocks`` of a columnar directory: one part's chunks at a time, mapped
    from the file rather than read into memory (a part's members are stored uncompressed), in
    blocks of ``BLOCK_CHUNKS``. The pages of a block are unmapped (``madvise``) a few blocks after
    it was handed out: they stay in the page cache, but not in this process's resident memory, so a
    pass over a run of any size (a simulation writes one part) holds a few blocks' pages, not a
    part's or the run's. ``counts``: each part's ``chunk_count``, or None to read them as it goes."""
    row = 0
    handed: deque = deque()
    for i, name in enumerate(parts):
        count = counts[i] if counts is not None else _counts([name])[0]  # read with the part's chunks
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
