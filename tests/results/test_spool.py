"""A measured run's records spilled to the columnar parts while the load runs (``results.spool``):
what goes in comes back in the order it ended, a part that cannot be written keeps every record in
memory instead (and leaves no half-written file), and the memory of the record path does not grow
with the number of records."""

from __future__ import annotations

import gc
import tracemalloc

import numpy as np

from tokenpace.record import RequestRecord
from tokenpace.recordtable import RecordTable
from tokenpace.results.columnar_read import is_complete
from tokenpace.results.records import JournalRecords, RecordSink, read_records
from tokenpace.results.spool import RecordSpool

from .test_columnar import _records



def _record(i: int, tokens: int = 4) -> RequestRecord:
    return _records(1, start=i, tokens=tokens)[0]  # the columnar tests' records, one at a time


def _assert_same(table: RecordTable, records: list[RequestRecord]) -> None:
    direct = RecordTable.from_records(records)
    assert len(table) == len(records)
    table = table.load_chunks()
    for group in ("ints", "bools", "floats"):
        for name, column in getattr(direct, group).items():
            np.testing.assert_array_equal(getattr(table, group)[name], column, err_msg=name)
    for name, text in direct.texts.items():
        assert table.texts[name].values() == text.values(), name
    np.testing.assert_array_equal(table.chunk_count, direct.chunk_count)
    np.testing.assert_array_equal(table.chunk_ns, direct.chunk_ns)
    np.testing.assert_array_equal(table.chunk_tokens, direct.chunk_tokens)


def test_records_come_back_from_the_parts_in_the_order_they_ended(tmp_path):
    ended = [_record(i) for i in (5, 0, 3, 1, 4, 2)] + [_record(i) for i in range(6, 700)]
    spool = RecordSpool(tmp_path / "run.columns", batch_records=64)
    for r in ended:
        spool.add(r)
    table = spool.close()
    assert spool.error is None and is_complete(tmp_path / "run.columns")
    assert len(list((tmp_path / "run.columns").glob("part-*.npz"))) == 11  # 700 / 64, rounded up
    assert table.chunk_source is not None  # the chunks stay on disk until a summary reads them
    _assert_same(table, ended)


def test_a_part_that_cannot_be_written_keeps_every_record_in_memory_and_no_file(tmp_path):
    path = tmp_path / "run.columns"
    spool = RecordSpool(path, batch_records=100)
    (path / "part-000002.npz").mkdir()  # the third part cannot be renamed into place
    records = [_record(i) for i in range(450)]
    for r in records:
        spool.add(r)
    table = spool.close()
    assert spool.error is not None and "cannot write the columnar records" in str(spool.error)
    assert not path.exists()  # no file that looks like a run and holds part of it
    _assert_same(table, records)  # the two parts written, read back, and the rest from memory


def test_journal_records_read_the_jsonl_lazily_with_the_unsaved_ones_after(tmp_path):
    path = tmp_path / "run.records.jsonl"
    with RecordSink(path) as sink:
        for i in range(5):
            sink.write(_record(i))
    late = _record(9)
    records = JournalRecords(path, sink.count, [late])
    assert len(records) == 6
    assert [r.index for r in records] == [0, 1, 2, 3, 4, 9]
    assert records[2] == read_records(path)[2] and records[-1] is late
    assert records == read_records(path) + [late]


def _peak_of_record_path(tmp_path, n: int, tokens: int) -> int:
    """Peak traced memory while ``n`` records (made one at a time, never kept) go through what
    ``runner.bench.Recorder`` does with each: the JSONL journal and the spool."""
    gc.collect()
    tracemalloc.start()
    try:
        with RecordSink(tmp_path / f"r{n}.records.jsonl") as sink:
            spool = RecordSpool(tmp_path / f"r{n}.columns", batch_records=256, max_queued=2)
            for i in range(n):
                record = _record(i, tokens)
                sink.write(record)
                spool.add(record)
                del record
            peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert len(spool.close()) == n
    return peak


def test_memory_of_the_record_path_does_not_grow_with_the_number_of_records(tmp_path):
    tokens = 32
    small = _peak_of_record_path(tmp_path, 2_000, tokens)
    large = _peak_of_record_path(tmp_path, 20_000, tokens)
    # What keeping the extra 18,000 records would cost (as bench did before: a list of them all).
    gc.collect()
    tracemalloc.start()
    try:
        kept = [_record(i, tokens) for i in range(18_000)]
        held = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    del kept
    assert held > 10 * 2**20  # the bound below means something: the list is tens of MB
    assert large - small < held / 20, (small, large, held)
