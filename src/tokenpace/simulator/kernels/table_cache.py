"""aiconfigurator-core's Parquet tables, read once per machine: every column is kept as a NumPy
array in an ``.npz`` file of our cache, and later runs load that instead of the Parquet file.

Reading a table through pyarrow costs about a second of CPU on a small machine, most of it
importing pyarrow's Parquet and dataset modules; the ``.npz`` of the same columns loads in
milliseconds with NumPy alone. The cache lives in ``$TOKENPACE_KERNEL_CACHE``, else
``kernel-tables/`` in ``$TOKENPACE_CACHE`` or ``~/.cache/tokenpace``. An entry is keyed by the
table's path, size and modification time and this module's format version, so an upgraded package
is read afresh. Text columns are stored as their distinct values in fixed-width Unicode and an
index per row (no pickling: ``np.load`` runs with ``allow_pickle=False``), numbers in the dtype pyarrow gave them. The cache only ever saves time: an
entry that cannot be read is replaced, and a cache that cannot be written is skipped.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
from functools import lru_cache
from pathlib import Path

import numpy as np

from tokenpace.errors import NotSaved
from tokenpace.files import cache_dir, write_whole

FORMAT = 1  # bump when what an entry holds changes
# Before each column's name in the .npz (so that no name collides with np.savez's own arguments): a
# numeric column; a text column's distinct values; each row's index into them.
PLAIN, TEXT, CODES = "n.", "t.", "i."


def kernel_cache_dir() -> Path:
    return cache_dir("kernel-tables", "TOKENPACE_KERNEL_CACHE")


def table_columns(path: Path) -> dict[str, np.ndarray]:
    """Every column of the Parquet table at ``path`` (read-only arrays: callers share them)."""
    stat = path.stat()
    return _columns(str(path.resolve()), stat.st_size, stat.st_mtime_ns)


@lru_cache(maxsize=32)
def _columns(path: str, size: int, mtime_ns: int) -> dict[str, np.ndarray]:
    key = hashlib.sha256(f"{path}|{size}|{mtime_ns}|{FORMAT}".encode()).hexdigest()[:16]
    entry = kernel_cache_dir() / f"{Path(path).stem}-{key}.npz"
    columns = None
    if entry.is_file():
        with contextlib.suppress(Exception):  # damaged or half-removed: read the table again
            with np.load(entry, allow_pickle=False) as npz:
                columns = _unpack({name: npz[name] for name in npz.files})
    if columns is None:
        columns = _read_parquet(Path(path))
        buf = io.BytesIO()
        np.savez(buf, **_pack(columns))
        with contextlib.suppress(OSError, NotSaved):  # no cache: read from Parquet next time
            write_whole(entry, buf.getvalue())
    for array in columns.values():
        array.flags.writeable = False
    return columns


def _pack(columns: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """A text column as its distinct values and each row's index into them: a table's few kernel
    and dtype names, repeated on every row, would otherwise take 4 bytes a character a row."""
    out = {}
    for name, array in columns.items():
        if array.dtype.kind == "U":
            values, codes = np.unique(array, return_inverse=True)
            out[TEXT + name] = values
            out[CODES + name] = codes.astype(np.int32)
        else:
            out[PLAIN + name] = array
    return out


def _unpack(entries: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    out = {}
    for key, array in entries.items():
        if key.startswith(PLAIN):
            out[key[len(PLAIN):]] = array
        elif key.startswith(CODES):
            name = key[len(CODES):]
            out[name] = entries[TEXT + name][array]
    return out


def _read_parquet(path: Path) -> dict[str, np.ndarray]:
    import pyarrow.parquet as pq

    table = pq.read_table(path)
    out = {}
    for name in table.column_names:
        array = table.column(name).to_numpy(zero_copy_only=False)
        out[name] = array.astype(str) if array.dtype == object else array
    return out
