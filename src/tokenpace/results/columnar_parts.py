"""The files of the columnar records (``columnar``), part by part: where each member of a part
lies (its archive and array headers parsed once), members read straight from there or mapped, and
a run's chunks handed out block by block with their pages let go behind.
"""

from __future__ import annotations

import contextlib
import ctypes
import mmap
import os
import struct
import zipfile
from collections import deque
from pathlib import Path

import numpy as np

from tokenpace.errors import UsageError
from tokenpace.recordtable import BLOCK_CHUNKS, _blocks


def _counts(parts: list[Path]) -> list[np.ndarray]:
    """Each part's ``chunk_count`` (one part open at a time: a long run has thousands)."""
    return [_mapped(name, ("chunk_count",), read=True)[0] for name in parts]


def _part_layouts(parts: list[Path]) -> list[tuple[Path, dict, int]] | None:
    """Per part: its file, where each of its members lies in it, and its rows (from its
    ``chunk_count`` member's header), each part's archive and array headers parsed once; None when
    a part has a compressed member (then the columns are read whole, as with the chunks)."""
    out = []
    for name in parts:
        with zipfile.ZipFile(name) as archive:
            members = tuple(m.removesuffix(".npy") for m in archive.namelist())
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


def _chunk_parts(parts: list[Path], counts: list[np.ndarray] | None = None, *, layouts: list | None = None):
    """``RecordTable.chunk_blocks`` of a columnar directory: one part's chunks at a time, mapped
    from the file rather than read into memory (a part's members are stored uncompressed), in
    blocks of ``BLOCK_CHUNKS``. The pages of a block are unmapped (``madvise``) a few blocks after
    it was handed out: they stay in the page cache, but not in this process's resident memory, so a
    pass over a run of any size (a simulation writes one part) holds a few blocks' pages, not a
    part's or the run's. ``counts``: each part's ``chunk_count``, or None to read them as it goes;
    ``layouts``: ``_part_layouts`` of the parts, or None to find them."""
    row = 0
    handed: deque = deque()
    for i, name in enumerate(parts):
        if layouts is None:
            count = counts[i] if counts is not None else _counts([name])[0]  # read with the part's chunks
            ns, tokens = _mapped(name, ("chunk_ns", "chunk_tokens"))
        else:  # where the members lie is known: no archive parsed again
            where = layouts[i][1]
            count = counts[i] if counts is not None else _laid_array(name, where["chunk_count"], read=True)
            ns, tokens = (_laid_array(name, where[m]) for m in ("chunk_ns", "chunk_tokens"))
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


def _laid_array(path: Path, at: tuple, *, read: bool = False) -> np.ndarray:
    """A member that lies at ``at`` (``_layout``): mapped, or read (``read``), as ``_mapped`` does."""
    offset, shape, fortran, dtype = at
    if int(np.prod(shape)) == 0:
        return np.empty(shape, dtype)
    if read:
        out = np.empty(int(np.prod(shape)), dtype)
        _read_into(path, offset, out)
        return out.reshape(shape, order="F" if fortran else "C")
    return np.memmap(path, dtype=dtype, mode="r", offset=offset, shape=shape, order="F" if fortran else "C")


def _read_into(path: Path, offset: int, out: np.ndarray) -> None:
    """``out.nbytes`` bytes of ``path`` from ``offset`` into ``out`` (contiguous)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        _pread_into(fd, path, offset, out)
    finally:
        os.close(fd)


def _pread_into(fd: int, path: Path, offset: int, out: np.ndarray) -> None:
    """``_read_into`` from a file already open (``fd``)."""
    view = memoryview(out).cast("B")
    done = 0
    while done < view.nbytes:
        got = os.preadv(fd, [view[done:]], offset + done)
        if got <= 0:
            raise UsageError(f"{path} ends inside a member: a truncated columnar part")
        done += got
def _fill(fd: int, path: Path, at: tuple | None, out: np.ndarray, none) -> None:
    """``out`` (one part's rows of a column) from the member that lies at ``at`` (None: the part
    has no such member, every row ``none``)."""
    if at is None:
        out[:] = none
        return
    offset, shape, fortran, dtype = at
    if dtype != out.dtype or fortran or tuple(shape) != (out.size,):  # not as this version writes
        out[:] = np.fromfile(path, dtype, count=int(np.prod(shape)), offset=offset)
    elif out.size:
        _pread_into(fd, path, offset, out)


def _member(fd: int, at: tuple) -> np.ndarray:
    """A whole (small) member, from where it lies."""
    offset, shape, fortran, dtype = at
    count = int(np.prod(shape))
    if not count:
        return np.empty(shape, dtype)
    flat = np.frombuffer(os.pread(fd, count * dtype.itemsize, offset), dtype=dtype, count=count)
    return flat.reshape(shape, order="F" if fortran else "C")
