"""A run's files beside its result JSON (the records JSONL, the columnar directory, a simulation's
engine timeline) as bytes, to be written again under another name, possibly on another machine:
how a sweep step simulated in a worker process or a Ray task reaches the sweep's own directory
without its records being turned back into Python objects (``sweep/fanout.py``).

``pack`` reads them as the run wrote them; ``unpack`` writes them where another result of the same
run says, each file whole or not at all (``write_whole``), the columnar manifest last (a directory
without one is not a whole run). The bytes are the files' own, so the copy is the original, byte for
byte. The result JSON is not part of it: it names its files, so it is written anew for the new place.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass, field

from tokenpace.files import write_whole
from tokenpace.results.columnar import MANIFEST, columns_path
from tokenpace.results.run import RunResult


@dataclass
class RunFiles:
    records: bytes  # the JSONL
    timeline: bytes | None = None  # a simulation's engine timeline JSONL
    columns: dict[str, bytes] = field(default_factory=dict)  # file name in the columnar directory: bytes

    @property
    def size(self) -> int:
        return len(self.records) + len(self.timeline or b"") + sum(map(len, self.columns.values()))


def pack(result: RunResult) -> RunFiles:
    """The files ``result`` wrote beside its result JSON."""
    columns = columns_path(result.records_path)
    return RunFiles(
        records=result.records_path.read_bytes(),
        timeline=(result.timeline_path.read_bytes()
                  if result.timeline_path is not None and result.timeline_path.is_file() else None),
        columns=({p.name: p.read_bytes() for p in sorted(columns.iterdir()) if p.is_file()}
                 if columns.is_dir() else {}))


def unpack(files: RunFiles, result: RunResult) -> None:
    """Write ``files`` under ``result``'s paths (records, timeline, columnar directory)."""
    write_whole(result.records_path, files.records, what="the records file")
    if files.timeline is not None and result.timeline_path is not None:
        write_whole(result.timeline_path, files.timeline, what="the engine timeline")
    columns = columns_path(result.records_path)
    shutil.rmtree(columns, ignore_errors=True)  # a stale directory of an earlier run of this name
    if files.columns:
        for name in sorted(set(files.columns) - {MANIFEST}):
            write_whole(columns / name, files.columns[name], what="the columnar records")
        if MANIFEST in files.columns:
            write_whole(columns / MANIFEST, files.columns[MANIFEST], what="the columnar records")


__all__ = ["RunFiles", "pack", "unpack"]
