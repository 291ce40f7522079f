"""A bounded JSONL record sink for long-lived processes: the file rotates at ``max_bytes``
(``calls.jsonl`` -> ``calls.1.jsonl`` -> ... up to ``backups`` old files), so a process that runs
for weeks keeps at most ``(backups + 1) * max_bytes`` on disk. Each line is one whole record,
written with one ``os.write`` on a file opened with O_APPEND (``tokenpace report`` reads any of the
files). Safe to call from several threads."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import orjson

from tokenpace.record import RequestRecord

DEFAULT_MAX_BYTES = 64 * 1024 * 1024
DEFAULT_BACKUPS = 4


def rotated_path(path: Path, n: int) -> Path:
    """``calls.jsonl`` -> ``calls.N.jsonl``."""
    return path.with_name(f"{path.stem}.{n}{path.suffix}")


class RotatingRecordSink:
    def __init__(self, path: str | Path, *, max_bytes: int = DEFAULT_MAX_BYTES, backups: int = DEFAULT_BACKUPS) -> None:
        if max_bytes <= 0 or backups < 0:
            raise ValueError("max_bytes must be > 0 and backups >= 0")
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.max_bytes = max_bytes
        self.backups = backups
        self.count = 0  # records written
        self.error: OSError | None = None  # the last write that failed (that record is lost)
        self._lock = threading.Lock()
        self._fd = -1
        self._size = 0
        self._open()

    def _open(self) -> None:
        self._fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        self._size = os.fstat(self._fd).st_size

    def __call__(self, record: RequestRecord) -> None:
        self.write(record)

    def write(self, record: RequestRecord) -> bool:
        line = orjson.dumps(record, option=orjson.OPT_APPEND_NEWLINE)
        with self._lock:
            if self._fd < 0:
                return False
            if self._size and self._size + len(line) > self.max_bytes:
                self._rotate()
            try:
                os.write(self._fd, line)
            except OSError as exc:  # disk full: this record is lost, the next may fit after rotation
                self.error = exc
                return False
            self._size += len(line)
            self.count += 1
            return True

    def _rotate(self) -> None:
        os.close(self._fd)
        if self.backups == 0:
            self.path.unlink(missing_ok=True)
        else:
            rotated_path(self.path, self.backups).unlink(missing_ok=True)
            for n in range(self.backups - 1, 0, -1):
                older = rotated_path(self.path, n)
                if older.exists():
                    older.replace(rotated_path(self.path, n + 1))
            self.path.replace(rotated_path(self.path, 1))
        self._open()

    def close(self) -> None:
        with self._lock:
            if self._fd >= 0:
                os.close(self._fd)
                self._fd = -1
