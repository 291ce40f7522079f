"""A finished run's records written in bulk (``write_table`` of a list, ``write_records_table``)
give the same part files, byte for byte, as the same records added one by one; and the table
``write_records_table`` returns summarizes as the parts read back do."""

from __future__ import annotations

import dataclasses
import io

import numpy as np
import pytest

from tokenpace.chunk_runs import ChunkRuns
from tokenpace.metrics import summarize
from tokenpace.record import RequestRecord
from tokenpace.recordtable import RecordTable
from tokenpace.results.columnar import ColumnarWriter, _write_npy, write_records_table, write_table
from tokenpace.results.columnar_bulk import bulk_parts, part_bounds
from tokenpace.results.columnar_read import read_table
from tokenpace.simulator import SimConfig, SimRequest, simulate

MS = 1_000_000


def _mixed(n: int) -> list[RequestRecord]:
    """Records with every kind of value a column meets: None and set, whole floats in int fields,
    text that is not a str, chunk tokens shared, given, of another length or not a list, no chunks."""
    shared_ones = [1] * 6
    out = []
    for i in range(n):
        sent = i * 7 * MS
        kind = i % 9
        chunks = [] if kind == 3 else [sent + (30 + 4 * k) * MS for k in range(6 if kind != 5 else 3 + i % 4)]
        if kind == 1:
            tokens = [2] * len(chunks)
        elif kind == 2:
            tokens = [1]  # not one per chunk: written as ones
        elif kind == 4:
            tokens = tuple(1 + k % 3 for k in range(len(chunks)))
        elif kind == 5:
            tokens = [1] * len(chunks)
        else:
            tokens = shared_ones if len(chunks) == 6 else []
        out.append(RequestRecord(
            request_id=f"r{i}", index=i, warmup=i < 3, sent_ns=sent, scheduled_ns=None if kind == 7 else sent,
            first_token_ns=chunks[0] if chunks else None, done_ns=(chunks[-1] if chunks else sent) + MS,
            chunk_ns=chunks, chunk_tokens=tokens, prompt_tokens=float(100 + i % 5) if kind == 6 else 100 + i % 5,
            output_tokens=len(chunks) or None, status="error" if kind == 3 else "ok",
            error_kind="http_500" if kind == 3 else None, finish_reason=7 if kind == 8 else "length",
            model=None if i % 2 else f"m{i % 4}", retry_after_s=1.5 if kind == 0 else None, turn=1 + i % 3))
    return out


def _parts(path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(path.iterdir())}


@pytest.mark.parametrize("batch_records, batch_chunks", [(4096, 131_072), (16, 1 << 20), (1000, 40)])
def test_bulk_parts_are_the_bytes_of_records_added_one_by_one(tmp_path, batch_records, batch_chunks):
    records = _mixed(300)
    with ColumnarWriter(tmp_path / "one.columns", batch_records=batch_records, batch_chunks=batch_chunks) as w:
        for r in records:
            w.add(r)
    one = _parts(tmp_path / "one.columns")
    assert len(one) == w.parts + 1  # the parts and the manifest
    with ColumnarWriter(tmp_path / "bulk.columns", batch_records=batch_records, batch_chunks=batch_chunks) as w2:
        for table in bulk_parts(records, batch_records, batch_chunks):
            w2.add_table(table)
    assert _parts(tmp_path / "bulk.columns") == one


def test_write_table_of_a_list_is_the_bytes_of_the_writer_one_by_one(tmp_path):
    records = _mixed(2000)
    with ColumnarWriter(tmp_path / "one.columns") as w:
        for r in records:
            w.add(r)
    write_table(tmp_path / "list.columns", records)
    write_records_table(tmp_path / "kept.columns", records)
    one = _parts(tmp_path / "one.columns")
    assert _parts(tmp_path / "list.columns") == one
    assert _parts(tmp_path / "kept.columns") == one


def test_the_kept_table_summarizes_as_the_parts_read_back(tmp_path):
    records = [r for r in _mixed(3000) if type(r.finish_reason) is str]
    kept = write_records_table(tmp_path / "run.columns", records)
    assert kept.chunk_source is not None and kept.chunk_ns.size == 0  # the chunks stay on disk
    back = read_table(tmp_path / "run.columns", chunks=False)
    for ours, theirs in zip(kept.chunk_blocks(), back.chunk_blocks(), strict=True):  # where the writer says
        assert ours[0] == theirs[0]
        for a, b in zip(ours[1:], theirs[1:]):
            np.testing.assert_array_equal(a, b)
    assert summarize(kept, slo="chat") == summarize(back, slo="chat") == summarize(records, slo="chat")


def test_part_bounds_cut_where_the_writer_does():
    assert part_bounds([5] * 10, 4, 1000) == [(0, 4), (4, 8), (8, 10)]
    assert part_bounds([5, 5, 20, 1, 1], 100, 10) == [(0, 2), (2, 3), (3, 5)]
    assert part_bounds([], 4, 10) == []


@pytest.mark.parametrize("array", [
    np.arange(1000, dtype=np.int64), np.array([True, False, True]), np.array(["ok", "timeout"], dtype=np.str_),
    np.array(1), np.zeros(0, np.int32), np.arange(20, dtype=np.float64)[::2], np.arange(12).reshape(3, 4).T,
    np.array([np.nan, 1.5])])
def test_a_member_is_written_as_numpy_writes_it(array):
    ours, numpys = io.BytesIO(), io.BytesIO()
    headers: dict = {}
    _write_npy(ours, array, headers)
    _write_npy(ours, array, headers)  # the second time from the header made the first
    np.lib.format.write_array(numpys, array, allow_pickle=False)
    np.lib.format.write_array(numpys, array, allow_pickle=False)
    assert ours.getvalue() == numpys.getvalue()


@pytest.mark.parametrize("batch_records, batch_chunks", [(4096, 131_072), (50, 3000)])
def test_records_holding_runs_of_step_ends_are_written_as_their_lists(tmp_path, batch_records, batch_chunks):
    # A simulated run's chunk times are runs of its step ends (tokenpace.chunk_runs); the client's
    # limits turn a cut record's into a list, so a part may hold both kinds.
    res = simulate(SimConfig(policy="chunked-prefill", concurrency=64, num_gpu_blocks=3000),
                   [SimRequest(512 + 64 * (i % 5), 40 + 7 * (i % 11)) for i in range(400)])
    records = res.records
    assert all(type(r.chunk_ns) is ChunkRuns for r in records)
    for r in records[:60:7]:  # the first parts mixed, the others runs only
        r.chunk_ns = r.chunk_ns[:len(r.chunk_ns) - 3]
        r.chunk_tokens = r.chunk_tokens[:len(r.chunk_ns)]
    as_lists = [dataclasses.replace(r, chunk_ns=list(r.chunk_ns)) for r in records]
    with ColumnarWriter(tmp_path / "one.columns", batch_records=batch_records, batch_chunks=batch_chunks) as w:
        for r in as_lists:
            w.add(r)
    with ColumnarWriter(tmp_path / "runs.columns", batch_records=batch_records, batch_chunks=batch_chunks) as w2:
        for table in bulk_parts(records, batch_records, batch_chunks):
            w2.add_table(table)
    assert _parts(tmp_path / "runs.columns") == _parts(tmp_path / "one.columns")
    ours, lists = RecordTable.from_records(records[1:7]), RecordTable.from_records(as_lists[1:7])  # runs only
    np.testing.assert_array_equal(ours.chunk_ns, lists.chunk_ns)
    assert ours.chunk_ns.size == sum(len(r.chunk_ns) for r in as_lists[1:7]) > 0
