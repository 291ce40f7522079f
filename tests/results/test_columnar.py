"""The columnar records file: what goes in comes back (across parts, with text columns whose
vocabularies differ from part to part), a summary from it equals the summary from the records,
an unfinished directory is never read as a whole run, and the writer's memory stays flat however
long the run."""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest

from tokenpace.errors import UsageError
from tokenpace.metrics import summarize
from tokenpace.record import RequestRecord
from tokenpace.recordtable import RecordTable
from tokenpace.results.columnar import ColumnarWriter, write_table
from tokenpace.results.columnar_read import is_complete, read_table

MS = 1_000_000


def _records(n: int, *, start: int = 0, tokens: int = 4) -> list[RequestRecord]:
    out = []
    for i in range(start, start + n):
        sent = i * 10 * MS
        failed = i % 7 == 3
        chunks = [] if failed else [sent + (20 + 5 * k) * MS for k in range(tokens)]
        out.append(RequestRecord(
            request_id=f"r{i}", index=i, warmup=i < 2, sent_ns=sent, scheduled_ns=sent,
            first_token_ns=chunks[0] if chunks else None, last_token_ns=chunks[-1] if chunks else None,
            done_ns=chunks[-1] if chunks else sent + 3 * MS, chunk_ns=chunks,
            chunk_tokens=[1 + (k % 2) for k in range(len(chunks))], output_tokens=None if failed else tokens,
            output_tokens_source=None if failed else "usage", prompt_tokens=100 + i % 5,
            status="error" if failed else "ok", error_kind=f"http_50{i % 3}" if failed else None,
            error_message=f"boom {i % 3}" if failed else None, turn=1 + i % 3))
    return out


def test_parts_read_back_as_one_table_that_summarizes_as_the_records_do(tmp_path):
    records = _records(1000)
    with ColumnarWriter(tmp_path / "run.columns", batch_records=128) as writer:
        for r in records:
            writer.add(r)
    assert writer.parts == 8 and writer.count == 1000
    table = read_table(tmp_path / "run.columns")
    direct = RecordTable.from_records(records)
    assert len(table) == 1000
    for name in direct.ints:
        np.testing.assert_array_equal(table.ints[name], direct.ints[name], err_msg=name)
    for name, text in direct.texts.items():
        assert table.texts[name].values() == text.values(), name
    np.testing.assert_array_equal(table.chunk_ns, direct.chunk_ns)
    assert summarize(table, slo="chat") == summarize(records, slo="chat")


def test_chunks_left_on_disk_are_read_part_by_part_as_they_were_written(tmp_path):
    records = _records(500, tokens=6)
    write_table(tmp_path / "run.columns", records[:0])  # an empty part list still reads
    assert len(read_table(tmp_path / "run.columns", chunks=False)) == 0
    with ColumnarWriter(tmp_path / "run.columns", batch_records=64) as writer:
        for r in records:
            writer.add(r)
    lazy = read_table(tmp_path / "run.columns", chunks=False)
    assert lazy.chunk_ns.size == 0  # nothing of the chunks in memory until asked
    blocks = list(lazy.chunk_blocks())
    assert len(blocks) == writer.parts and [b[0] for b in blocks] == list(range(0, 500, 64))
    direct = RecordTable.from_records(records)
    np.testing.assert_array_equal(np.concatenate([b[2] for b in blocks]), direct.chunk_ns)
    np.testing.assert_array_equal(np.concatenate([b[3] for b in blocks]), direct.chunk_tokens)
    assert summarize(lazy, slo="chat") == summarize(records, slo="chat")
    assert summarize(lazy, window=(200 * MS, 3000 * MS)) == summarize(records, window=(200 * MS, 3000 * MS))


def test_an_unfinished_directory_is_not_read_as_a_run(tmp_path):
    writer = ColumnarWriter(tmp_path / "run.columns", batch_records=10)
    for r in _records(25):
        writer.add(r)  # two parts on disk, five records pending, no manifest: a killed run
    assert not is_complete(tmp_path / "run.columns")
    with pytest.raises(UsageError, match="not a whole columnar records directory"):
        read_table(tmp_path / "run.columns")


def test_write_table_replaces_an_older_run(tmp_path):
    write_table(tmp_path / "c", _records(50))
    write_table(tmp_path / "c", _records(5))
    assert len(read_table(tmp_path / "c")) == 5


def test_writer_memory_stays_flat_as_the_run_grows(tmp_path):
    """Peak memory of the writer over 4x more records stays within one batch's worth: earlier
    batches are on disk, not in memory."""

    def peak(n: int) -> int:
        writer = ColumnarWriter(tmp_path / f"run{n}.columns", batch_records=512)
        batch = _records(512, tokens=16)
        tracemalloc.start()
        for i in range(0, n, 512):
            for r in batch:  # the same objects each time: what grows is the writer, if anything
                writer.add(r)
        writer.close()
        _, top = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        return top

    small, large = peak(512 * 4), peak(512 * 16)
    assert large < small * 1.5, (small, large)


def test_a_report_re_judges_from_the_columnar_file_and_without_it_from_the_jsonl(tmp_path, capsys, monkeypatch):
    import shutil
    from pathlib import Path

    from tokenpace.cli.main import main
    from tokenpace.results import load_run

    monkeypatch.chdir(tmp_path)
    assert main(["sim", "--concurrency", "8", "--requests", "120", "--warmup", "5", "--output-tokens", "24",
                 "--out", "s.json", "--quiet"]) == 0
    capsys.readouterr()
    assert is_complete(tmp_path / "s.columns")
    from_columns = load_run(Path("s.json"), slo="chat")["summary"]
    shutil.rmtree(tmp_path / "s.columns")
    from_jsonl = load_run(Path("s.json"), slo="chat")["summary"]
    assert from_columns == from_jsonl
    assert from_columns["counts"]["sent"] == 120 and from_columns["goodput"]["slo"]["name"] == "chat"


def test_a_part_from_before_a_field_existed_reads_it_as_none(tmp_path):
    # Parts written by an earlier version lack the fields added since (``model``, cache writes):
    # those read as None, as a JSONL line without the key does.
    import zipfile
    records = _records(20)
    write_table(tmp_path / "run.columns", records)
    part = tmp_path / "run.columns" / "part-000000.npz"
    with zipfile.ZipFile(part) as old:
        members = {i.filename: old.read(i) for i in old.infolist()}
    with zipfile.ZipFile(part, "w", zipfile.ZIP_STORED) as new:
        for name, data in members.items():
            if name not in ("text.model.npy", "vocab.model.npy", "int.cache_write_prompt_tokens.npy"):
                new.writestr(name, data)
    for chunks in (True, False):  # the columns read whole, or from the part files when asked
        table = read_table(tmp_path / "run.columns", chunks=chunks)
        assert table.texts["model"].values() == [None] * 20
        assert not table.has("cache_write_prompt_tokens").any()
        assert summarize(table, slo="chat") == summarize(records, slo="chat")


def test_without_the_chunks_the_int_columns_are_read_from_the_parts_when_asked(tmp_path):
    # A summary's table (chunks left on disk) holds neither the chunks nor the int and float
    # columns: each is copied out of the part files when read, the same values as a whole read.
    n = 20_000
    records = _records(n)
    with ColumnarWriter(tmp_path / "run.columns", batch_records=4096) as writer:
        for r in records:
            writer.add(r)
    whole = read_table(tmp_path / "run.columns")
    tracemalloc.start()
    try:
        lazy = read_table(tmp_path / "run.columns", chunks=False)
        held = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    # Read whole, the int columns alone are 8 bytes a field a request; the rest (text codes, flags,
    # chunk counts) is about a third of that.
    assert held < 8 * n * len(whole.ints) / 2
    assert list(lazy.ints) == list(whole.ints) and "sent_ns" in lazy.ints and "nonsense" not in lazy.ints
    for group in ("ints", "floats", "bools"):
        for name, column in getattr(whole, group).items():
            np.testing.assert_array_equal(getattr(lazy, group)[name], column, err_msg=name)
    with pytest.raises(KeyError):
        lazy.ints["nonsense"]
    assert summarize(lazy, slo="chat") == summarize(whole, slo="chat") == summarize(records, slo="chat")


def test_a_summary_from_disk_never_holds_the_chunk_table(tmp_path):
    # Memory, not time: the summary of a table whose chunks stay on disk peaks lower than the one
    # read whole by the chunk arrays themselves (12 bytes a chunk), which it never holds. Both run
    # the same block passes, so the difference is those arrays, give or take where the peak falls
    # among a block's temporaries: three quarters of them is the margin (holding them would give 0).
    n, tokens = 4000, 250
    write_table(tmp_path / "run.columns", _records(n, tokens=tokens))

    def peak(chunks: bool) -> int:
        tracemalloc.start()
        try:
            summarize(read_table(tmp_path / "run.columns", chunks=chunks), slo="chat")
            return tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()

    assert peak(chunks=True) - peak(chunks=False) > 0.75 * 12 * n * tokens


def test_a_view_of_the_measured_rows_reads_as_their_copy_does(tmp_path):
    # The summary reads the measured rows of a run with warmup through a view (selected per read)
    # rather than a copy of every column: the same columns, row for row.
    write_table(tmp_path / "run.columns", _records(300))
    table = read_table(tmp_path / "run.columns", chunks=False)
    mask = table.measured
    assert not mask.all()  # two warmup requests
    view, copy = table.records_view(mask), table.records_only(mask)
    for group in ("ints", "bools", "floats"):
        assert list(getattr(view, group)) == list(getattr(copy, group))
        for name, column in getattr(copy, group).items():
            np.testing.assert_array_equal(getattr(view, group)[name], column, err_msg=name)
    assert {k: t.values() for k, t in view.texts.items()} == {k: t.values() for k, t in copy.texts.items()}
    np.testing.assert_array_equal(view.has("sent_ns"), copy.has("sent_ns"))
    np.testing.assert_array_equal(view.sent_ns, copy.sent_ns)  # attribute access, as RecordTable's
    assert "sent_ns" in view.ints and "nonsense" not in view.ints
    assert table.records_view(np.ones(len(table), bool)) is table
