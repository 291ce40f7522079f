"""Append-only JSONL sink: each record is written and flushed to the OS as soon as it completes.

Each record is written at once on a file opened with O_APPEND, so a SIGKILL loses nothing that had
completed: every line in the file is whole, and `tokenpace report RUN.jsonl` can summarize it.
A write that fails (disk full, file too large) cuts its partial line off again and ends the
writing; `error` says why, and the caller keeps the records that could not be saved.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import overload

import orjson

from tokenpace.chunk_runs import json_default
from tokenpace.errors import UsageError
from tokenpace.files import open_run_file
from tokenpace.record import RequestRecord


class RecordSink:
    def __init__(self, path: str | Path, *, on_error: Callable[[OSError], None] | None = None):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_TRUNC, 0o644)
        self.count = 0  # records written whole
        self.error: OSError | None = None  # the write that failed; nothing is written after it
        self._size = 0
        self._on_error = on_error

    def write(self, record: RequestRecord) -> bool:
        """Append one record; False when it could not be saved (see ``error``)."""
        if self.error is not None:
            return False
        # orjson reads the dataclass directly: ~10 µs, against ~300 µs through asdict's deep copy,
        # and this runs on the event loop while chunks arrive.
        line = memoryview(orjson.dumps(record, default=json_default, option=orjson.OPT_APPEND_NEWLINE))
        written = 0
        try:
            while written < len(line):  # a write may be short (a file size limit, a full disk)
                written += os.write(self._fd, line[written:])
        except OSError as exc:
            self.error = exc
            if written:
                try:
                    os.ftruncate(self._fd, self._size)  # never leave a torn line
                except OSError:
                    pass
            if self._on_error is not None:
                self._on_error(exc)
            return False
        self._size += written
        self.count += 1
        return True

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def __enter__(self) -> RecordSink:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def read_records(path: str | Path) -> list[RequestRecord]:
    """Read a records JSONL file; unreadable lines (a torn last line after a kill) are skipped."""
    return read_records_counted(path)[0]


def read_records_counted(path: str | Path) -> tuple[list[RequestRecord], int]:
    """Records from a JSONL, and how many lines could not be read."""
    records, skipped = [], 0
    with open_run_file(path) as fh:
        for line in fh:
            if not line.strip():
                continue
            try:
                data = orjson.loads(line)
                if not isinstance(data, dict):
                    raise ValueError("not a JSON object")
                records.append(RequestRecord.from_dict(data))
            except (orjson.JSONDecodeError, ValueError, TypeError):
                skipped += 1
    if not records and skipped:
        raise UsageError(f"{path}: no readable record ({skipped} unreadable lines)")
    return records, skipped


class JournalRecords(Sequence[RequestRecord]):
    """A measured run's records, read from its JSONL journal when asked rather than held: what
    ``RunResult.records`` is after ``bench`` (whose records go to disk as they end, so that its
    memory does not grow with the run). A read-only sequence in the order the requests ended (the
    journal's order; sort by ``index`` for the plan's order). Iterating reads the file once, one
    line at a time; ``len`` reads nothing; indexing reads the whole file each time, so take
    ``list(records)`` once to index much. ``unsaved``: records the journal could not take (a full
    disk), kept in memory and given after the saved ones."""

    def __init__(self, path: str | Path, count: int, unsaved: Sequence[RequestRecord] = ()) -> None:
        self.path = Path(path)
        self._count = count
        self._unsaved = list(unsaved)

    def __len__(self) -> int:
        return self._count + len(self._unsaved)

    def __iter__(self) -> Iterator[RequestRecord]:
        seen = 0
        if self._count:
            with open_run_file(self.path) as fh:
                for line in fh:
                    if seen == self._count:
                        break
                    try:
                        data = orjson.loads(line)
                    except orjson.JSONDecodeError:
                        continue
                    if isinstance(data, dict):
                        seen += 1
                        yield RequestRecord.from_dict(data)
        yield from self._unsaved

    @overload
    def __getitem__(self, index: int) -> RequestRecord: ...
    @overload
    def __getitem__(self, index: slice) -> list[RequestRecord]: ...
    def __getitem__(self, index):
        return list(self)[index]

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Sequence):
            return len(self) == len(other) and list(self) == list(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  # like a list

    def __repr__(self) -> str:
        return f"JournalRecords({str(self.path)!r}, {len(self)} records)"
