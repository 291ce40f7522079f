"""Reading the columnar records file (``columnar``): a run's parts as one ``RecordTable``, read
whole, or opened without reading anything per request (``columnar_lazy``) so that a summary or a
report of a long run never holds all of it. The part files themselves: ``columnar_parts``.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import orjson

from tokenpace.errors import UsageError
from tokenpace.recordtable import BOOL_FIELDS, FLOAT_FIELDS, INT_FIELDS, NULL, TEXT_FIELDS, RecordTable, Text
from tokenpace.results.columnar import _PART, FORMAT, MANIFEST
from tokenpace.results.columnar_lazy import _LoadOnce, _PartsTable, _ReadOnRead, _row_blocks, _table_laid
from tokenpace.results.columnar_parts import _chunk_parts, _counts, _laid_array, _members, _part_layouts


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
        table_layouts = layouts
        small = _LoadOnce(lambda: _table_laid(table_layouts, big=False,
                                              chunk_count=table.chunk_count))  # the counts shared, not read twice
        table = _PartsTable(
            n, lambda: (np.concatenate([_laid_array(p, w["chunk_count"], read=True) for p, w, _ in table_layouts])
                        if parts else np.zeros(0, np.int64)),
            ints=_ReadOnRead(layouts, INT_FIELDS, "int.", np.int64, NULL, n),
            bools=small.group("bools", BOOL_FIELDS),
            floats=_ReadOnRead(layouts, FLOAT_FIELDS, "float.", np.float64, np.nan, n),
            texts=small.group("texts", TEXT_FIELDS),
            chunk_ns=np.zeros(0, np.int64), chunk_tokens=np.zeros(0, np.int32),
            chunk_source=lambda: _chunk_parts(parts, layouts=table_layouts))
    if not chunks:
        table.row_blocks = lambda rows: _row_blocks(sizes, rows, lambda start, end: (
            _table_of(parts[start:end], _counts(parts[start:end]), chunks=False) if layouts is None
            else _table_laid(layouts[start:end])))
    return table


def _table_of(parts: list[Path], counts: list[np.ndarray], *, chunks: bool, big: bool = True) -> RecordTable:
    """The parts as one table, every per-request column read in (``big=False``: only the bool and
    text ones, the int and float columns left empty); the chunks read too, or left on disk."""
    n = sum(c.size for c in counts)
    total = int(sum(int(c.sum()) for c in counts))
    table = RecordTable(
        ints={k: np.empty(n, np.int64) for k in INT_FIELDS} if big else {},
        bools={k: np.empty(n, bool) for k in BOOL_FIELDS},
        floats={k: np.empty(n, np.float64) for k in FLOAT_FIELDS} if big else {},
        texts={}, chunk_count=np.concatenate(counts) if counts else np.zeros(0, np.int64),
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
