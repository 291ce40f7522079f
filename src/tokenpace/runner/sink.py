"""Append-only JSONL sink: each record is written and flushed to the OS as soon as it completes.

One `os.write` per record on a file opened with O_APPEND, so a SIGKILL loses nothing that had
completed: every line in the file is whole, and `tokenpace report RUN.jsonl` can summarize it.
"""

from __future__ import annotations

import os
from pathlib import Path

import orjson

from tokenpace.record import RequestRecord


class RecordSink:
    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_TRUNC, 0o644)
        self.count = 0

    def write(self, record: RequestRecord) -> None:
        os.write(self._fd, orjson.dumps(record.to_dict()) + b"\n")
        self.count += 1

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def __enter__(self) -> RecordSink:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def read_records(path: str | Path) -> list[RequestRecord]:
    """Read a records JSONL file; a torn last line (from a kill mid-write) is skipped."""
    records = []
    with open(path, "rb") as fh:
        for line in fh:
            if not line.strip():
                continue
            try:
                records.append(RequestRecord.from_dict(orjson.loads(line)))
            except orjson.JSONDecodeError:
                continue
    return records
