"""A measured run's records, spilled to the columnar parts while the load runs: memory stays
bounded however long the run (``RecordSpool``).

Where the work goes, and why (measured in ``benchmarks/bench_memory.py``, RESULTS.md 17c): on the
event loop that stamps the requests, each ended record only has its fields appended to the array
columns of the current ``columnar.Batch`` (5-6 microseconds, less than its JSONL line's 8-9), and a
full batch is sealed without copying (views of those arrays, about 35 microseconds per 4,096
records). Everything that takes milliseconds (the part's arrays written into its archive, the file
written and renamed: 3-4 ms a part) runs in one writer thread fed by a queue. The alternative,
every record handed whole to a thread that also does the appends, measured a lower p99 lateness of
a 1 ms ticker on the loop at 4,000 records/s (0.62-0.65 ms against 0.72-1.13, floor 0.53-0.56)
but more CPU (0.51-0.52 s against 0.41-0.48 s of the whole process for the same 16,000 records,
floor 0.25-0.27: the hand-off, and the interpreter lock passed back and forth); bench's client is
CPU-bound at high rates, so the appends stay on the loop, both ways far inside the 10 ms lag limit.

Memory: the batch being filled (at most ``BATCH_RECORDS`` records or ``BATCH_CHUNKS`` chunks), the
sealed batches waiting in the queue for the thread, at most ``MAX_QUEUED`` (the thread writes a part
in milliseconds, so the queue is empty or one batch long), and the part being written (its arrays
and the archive's bytes). Every earlier record is on disk. A disk too slow to keep up fills the
queue and then ``add`` waits for room: the loop pauses (it shows as schedule lag) rather than
memory growing without bound.

A part that cannot be written (a full disk): the columnar file is given up (its directory removed:
reports read the JSONL journal then) and the batches are kept in memory from then on, so that the
run's summary still covers every record; a full disk stops the load through the JSONL anyway.
"""

from __future__ import annotations

import queue
import shutil
import threading
from pathlib import Path

from tokenpace.errors import NotSaved
from tokenpace.record import RequestRecord
from tokenpace.recordtable import RecordTable
from tokenpace.results import columnar
from tokenpace.results.columnar import Batch, ColumnarWriter
from tokenpace.results.columnar_read import read_parts, read_table

MAX_QUEUED = 4  # sealed batches waiting for the writer thread


class RecordSpool:
    """``add`` each record as it ends (on the loop); ``close`` after the load: the run's table."""

    def __init__(self, path: str | Path, *, batch_records: int | None = None,
                 batch_chunks: int | None = None, max_queued: int = MAX_QUEUED) -> None:
        """``batch_records``, ``batch_chunks``: a part's size (None: ``columnar.BATCH_RECORDS``
        and ``BATCH_CHUNKS``, read when the spool is made)."""
        self.path = Path(path)
        batch_records = columnar.BATCH_RECORDS if batch_records is None else batch_records
        batch_chunks = columnar.BATCH_CHUNKS if batch_chunks is None else batch_chunks
        self.batch_records, self.batch_chunks = batch_records, batch_chunks
        self.count = 0  # records added
        self.error: NotSaved | None = None  # the part that could not be written; set by the thread
        self._writer = ColumnarWriter(self.path, batch_records=batch_records, batch_chunks=batch_chunks)
        self._batch = Batch()
        self._held: list[RecordTable] = []  # after a failed write: every batch, kept in memory
        self._queue: queue.Queue[RecordTable | None] = queue.Queue(maxsize=max_queued)
        self._thread = threading.Thread(target=self._drain, name="tokenpace-columnar-writer", daemon=True)
        self._thread.start()
        self._closed = False

    def add(self, record: RequestRecord) -> None:
        self._batch.add(record)
        self.count += 1
        if len(self._batch) >= self.batch_records or self._batch.chunks >= self.batch_chunks:
            self._hand_on()

    def _hand_on(self) -> None:
        if len(self._batch):
            table, self._batch = self._batch.seal(), Batch()
            self._queue.put(table)

    def _drain(self) -> None:
        while (table := self._queue.get()) is not None:
            if self.error is None:
                try:
                    self._writer.add_table(table)
                    continue
                except Exception as exc:  # NotSaved, or any failure: never leave the loop blocked on put
                    self.error = exc if isinstance(exc, NotSaved) else NotSaved(
                        f"cannot write the columnar records {self.path}: {exc}")
                    self._give_up()
            self._held.append(table)

    def _give_up(self) -> None:
        """The columnar file cannot be written: what is on disk comes back into memory (and if
        even that fails, the thread still goes on: the loop must never wait on it for ever)."""
        try:
            if self._writer.parts:
                self._held.append(read_parts(self.path, self._writer.parts))  # copied: chunks too
        except Exception as exc:  # noqa: BLE001
            self.error = NotSaved(f"{self.error}; the parts already written could not be read back "
                                  f"either ({exc}): the summary lacks their records")
        finally:
            shutil.rmtree(self.path, ignore_errors=True)

    def close(self) -> RecordTable:
        """Write what is left and the manifest; the run's records as one table, in the order they
        ended: from the parts (the chunks left on disk, read part by part) when the file was
        written whole, else from memory. Blocks until the writer thread is done."""
        if not self._closed:
            self._closed = True
            self._hand_on()
            self._queue.put(None)
            self._thread.join()
            if self.error is None:
                try:
                    self._writer.close()
                except NotSaved as exc:
                    self.error = exc
                    self._give_up()
        if self.error is None:
            return read_table(self.path, chunks=False)
        return RecordTable.concat(self._held)

    def abandon(self) -> None:
        """Stop the thread without finishing the file (the run failed before its end): the
        directory is removed, as an unfinished file would mislead."""
        if not self._closed:
            self._closed = True
            self._queue.put(None)
            self._thread.join()
            shutil.rmtree(self.path, ignore_errors=True)
